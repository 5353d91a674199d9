//! The action forms' fields, checked and parsed (`ssr` only): `op`, ids, the text fields,
//! the rate limit, the target topic, the reason, the lag gate and the replay's options.

use leptos::prelude::*;
use redrive_core::actions::Selection;

use crate::actions_api::Op;
use crate::refusal::{refused, INVALID};

/// Most ids one form may name: the domain's limit, the API's too.
const MAX_IDS: usize = redrive_core::request::MAX_SELECTION_IDS;

/// The form's `op`.
pub fn op(op: &str) -> Result<Op, ServerFnError> {
    Op::parse(op).ok_or_else(|| {
        // Empty: Enter in a text field, which submits the list form's hidden first button
        // (`components/bulk_actions.rs`) rather than "Replay".
        let message = if op.trim().is_empty() {
            "Nothing was done: choose an action with its button (Replay, Delete, Restore or a \
             label button); Enter in a text field does not pick one."
        } else {
            "Unknown action: use the Replay, Delete, Restore or label buttons."
        };
        refused(INVALID, message)
    })
}

/// An optional text field: trimmed, `None` when empty.
pub fn text(v: &str) -> Option<String> {
    let t = v.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// The rate-limit field: empty = unthrottled, else 1 to the domain's limit
/// ([`redrive_core::request::rate_text`], the API's rule too).
pub fn rate(v: &str) -> Result<Option<u32>, ServerFnError> {
    redrive_core::request::rate_text(v).map_err(|e| refused(INVALID, sentence(&e.0)))
}

/// The target-topic field: empty = each record's source topic, else a Kafka topic name
/// ([`redrive_core::request::target_topic`]).
pub fn target_topic(v: &str) -> Result<Option<String>, ServerFnError> {
    redrive_core::request::target_topic(Some(v))
        .map_err(|e| refused(INVALID, format!("Could not start the replay: {}.", e.0)))
}

/// The reason field: trimmed, empty = none, within the domain's limit
/// ([`redrive_core::request::reason`]).
pub fn reason(v: &str) -> Result<Option<String>, ServerFnError> {
    redrive_core::request::reason(Some(v)).map_err(|e| refused(INVALID, sentence(&e.0)))
}

/// The domain's message as a sentence for the page: capitalised, with a full stop.
pub(super) fn sentence(m: &str) -> String {
    let mut c = m.chars();
    let first = c.next().map(|f| f.to_uppercase().collect::<String>());
    let mut out = first.unwrap_or_default() + c.as_str();
    if !out.ends_with('.') {
        out.push('.');
    }
    out
}

/// The confirmation page's lag gate fields (`docs/replay.md`, "Lag-aware replay"): both
/// empty = no gate; a group needs a limit and a limit a group. The group id itself is
/// checked by the store with the replay.
pub fn lag_gate(
    group: &str,
    max_lag: &str,
) -> Result<Option<redrive_core::actions::LagGate>, ServerFnError> {
    match (text(group), text(max_lag)) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(refused(
            INVALID,
            "Give the most records the consumer group may be behind (1 or more), or clear \
             the group for a replay without a lag gate.",
        )),
        (None, Some(_)) => Err(refused(
            INVALID,
            "Name the consumer group that reads the target topic, or clear the lag limit \
             for a replay without a lag gate.",
        )),
        (Some(g), Some(m)) => {
            let max_lag = m.replace([',', '_', ' '], "").parse::<u64>().map_err(|_| {
                refused(
                    INVALID,
                    "The lag limit must be a whole number of records (1 or more).",
                )
            })?;
            // The group as typed, but for the surrounding spaces a browser field adds.
            Ok(Some(redrive_core::actions::LagGate { group: g, max_lag }))
        }
    }
}
/// A checkbox of the confirmation form: ticked (`true`, or `on`, a browser's value for a
/// checkbox without one) or not (absent or empty); anything else is refused by name.
pub fn flag(name: &str, v: &str) -> Result<bool, ServerFnError> {
    match v.trim() {
        "" | "false" => Ok(false),
        "true" | "on" => Ok(true),
        other => Err(refused(
            INVALID,
            format!(
            "The field {name} is a checkbox: send true or leave it out (got \u{201c}{}\u{201d}).",
            crate::display::visible::name(other, 64)
        ),
        )),
    }
}

/// A replay's [`ReplayOptions`](redrive_core::actions::ReplayOptions) from the
/// confirmation form's fields, as `POST /api/v1/replays` takes them in `"options"`
/// (`docs/replay.md`): the transform script (empty = none, default limits), "publish
/// without per-key order" (`unordered`) and "publish to the original partition"
/// (`original_partition`), checkboxes (see [`flag`]).
pub fn replay_options(
    transform: &str,
    unordered: &str,
    original_partition: &str,
) -> Result<redrive_core::actions::ReplayOptions, ServerFnError> {
    Ok(redrive_core::actions::ReplayOptions {
        transform: text(transform).map(|script| redrive_core::actions::TransformOptions {
            script,
            ..Default::default()
        }),
        unordered: flag("unordered", unordered)?,
        original_partition: flag("original_partition", original_partition)?,
        // The canary's own fields: `act_on_filter` (`CanaryOptions::from_form`).
        canary: None,
        lag_gate: None,
    })
}

/// Checks an id selection's size.
pub fn ids(ids: Vec<i64>) -> Result<Selection, ServerFnError> {
    if ids.is_empty() {
        return Err(refused(
            INVALID,
            "Nothing selected: tick the dead letters to act on, or use \u{201c}… all \
             matching\u{201d}.",
        ));
    }
    if ids.len() > MAX_IDS {
        return Err(refused(
            INVALID,
            format!(
                "Too many dead letters picked at once (at most {MAX_IDS}); use \u{201c}… all \
             matching\u{201d} with a filter instead."
            ),
        ));
    }
    // Sorted and de-duplicated by the domain's one parser (the API's too).
    redrive_core::request::ids(ids).map_err(|e| refused(INVALID, sentence(&e.0)))
}
