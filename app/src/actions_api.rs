//! Server functions for the actions: replay, delete and restore dead letters (picked by id or
//! by filter), cancel a replay job, and the read side that shows what came of them (dry-run
//! preview, jobs, audit trail, a dead letter's history).
//!
//! The state-changing ones are POST server functions driven by `ActionForm`s, so they work as
//! plain HTML forms without JavaScript:
//! - each takes a `csrf` argument it never reads: the authentication middleware checks that
//!   form field before the function runs, and a hydrated `ActionForm` only sends the function's
//!   own arguments, so the field must be one of them;
//! - on success they `leptos_axum::redirect` (to the job page after a replay, back to the page
//!   with a `done=` notice after a delete or restore); on failure the server-function layer
//!   redirects a plain form back to the page with the error in `__err`, which the page's
//!   `ServerAction` shows;
//! - a role that may not act gets 403 (and an audit row with outcome `denied`).
//!
//! Their fixed URLs (`/api/ui/...`) are what the forms post to.

use leptos::prelude::*;
use redrive_core::actions::{AuditEntry, DryRun, HistoryEvent, ReplayJob};
use redrive_core::Page;
use serde::{Deserialize, Serialize};

use crate::api::Listing;

/// An action on dead letters, as a form's `op` field names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    Replay,
    Delete,
    Restore,
    /// Add the form's `label` to the dead letters (their own labels).
    LabelAdd,
    /// Remove the form's `label` from the dead letters.
    LabelRemove,
}

impl Op {
    /// Parses `replay`, `delete`, `restore`, `label_add` or `label_remove`.
    pub fn parse(s: &str) -> Option<Op> {
        match s {
            "replay" => Some(Op::Replay),
            "delete" => Some(Op::Delete),
            "restore" => Some(Op::Restore),
            "label_add" => Some(Op::LabelAdd),
            "label_remove" => Some(Op::LabelRemove),
            _ => None,
        }
    }

    /// True for the label changes (they need a `label`).
    pub fn is_label(self) -> bool {
        matches!(self, Op::LabelAdd | Op::LabelRemove)
    }

    /// The permission this action needs.
    pub fn permission(self) -> redrive_core::permission::Permission {
        use redrive_core::permission::Permission;
        match self {
            Op::Replay => Permission::Replay,
            Op::Delete | Op::Restore => Permission::Delete,
            Op::LabelAdd | Op::LabelRemove => Permission::Annotate,
        }
    }

    /// The form value and audit action name.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Replay => "replay",
            Op::Delete => "delete",
            Op::Restore => "restore",
            Op::LabelAdd => "label_add",
            Op::LabelRemove => "label_remove",
        }
    }

    /// The verb for buttons and headings.
    pub fn verb(self) -> &'static str {
        match self {
            Op::Replay => "Replay",
            Op::Delete => "Delete",
            Op::Restore => "Restore",
            Op::LabelAdd => "Label",
            Op::LabelRemove => "Unlabel",
        }
    }
}

/// What an action did (the hydrated page reads it; a plain form follows the redirect).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionDone {
    pub op: Op,
    /// Dead letters deleted or restored, or queued for replay.
    pub affected: i64,
    /// The replay job, for a replay.
    pub job_id: Option<String>,
    /// The approval request it became instead (four-eyes approval, `approvals_api`): nothing
    /// was done yet, `affected` is the count it would change.
    #[serde(default)]
    pub request_id: Option<i64>,
}

/// What "… all matching" would do, shown on the confirmation page before it acts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    pub op: Op,
    /// The filter, normalised (the list's parameter names, times as epoch ms): exactly what
    /// the confirmation form sends back.
    pub filter: Vec<(String, String)>,
    /// The replay's target-topic override; `None` = each record's source topic.
    pub target_topic: Option<String>,
    /// A replay's dry run (`None` for delete and restore).
    pub dry_run: Option<DryRun>,
    /// The label to add or remove (label changes only), normalised.
    #[serde(default)]
    pub label: Option<String>,
    /// How many dead letters the action would change now.
    pub count: i64,
    /// For an empty filter ("all"): the number of dead letters it matches now, which the
    /// person must type to confirm (`Store::check_confirm_all`); `None` for any other filter.
    #[serde(default)]
    pub confirm_all: Option<i64>,
    /// A replay's transform script as typed (the `transform` parameter), `None` without one.
    #[serde(default)]
    pub transform: Option<String>,
    /// Why the script cannot be used (it does not compile, or is too long); the sample is then
    /// shown without it and the replay cannot be confirmed with it.
    #[serde(default)]
    pub transform_error: Option<String>,
    /// A replay's sample: the first records per target topic, after the transform if any.
    #[serde(default)]
    pub sample: Option<redrive_core::replay_sample::ReplaySample>,
}

/// A replay job as read at `as_of_ms` (epoch ms, the server's clock: the reference for a
/// running job's measured rate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSnapshot {
    pub job: ReplayJob,
    pub as_of_ms: i64,
    /// The re-failure watch window in force (`replay_outcome_window_ms`), ms.
    #[serde(default)]
    pub window_ms: u64,
}

/// The notice a page shows after a delete or restore, carried in the URL as `done=CODE-N` so
/// that it survives the redirect of a plain form. Only known codes are shown: the URL cannot
/// make the page say anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notice {
    pub op: Op,
    pub count: u64,
}

impl Notice {
    /// Parses a `done` value (`deleted-3`, `restored-1`).
    pub fn parse(v: &str) -> Option<Notice> {
        let (code, n) = v.split_once('-')?;
        let op = match code {
            "deleted" => Op::Delete,
            "restored" => Op::Restore,
            "labelled" => Op::LabelAdd,
            "unlabelled" => Op::LabelRemove,
            _ => return None,
        };
        Some(Notice {
            op,
            count: n.parse().ok()?,
        })
    }

    /// The `done` value for `op` having changed `count` dead letters.
    pub fn code(op: Op, count: u64) -> String {
        let word = match op {
            Op::Delete => "deleted",
            Op::Restore => "restored",
            Op::Replay => "replayed",
            Op::LabelAdd => "labelled",
            Op::LabelRemove => "unlabelled",
        };
        format!("{word}-{count}")
    }

    /// The sentence shown.
    pub fn sentence(self) -> String {
        let n = self.count;
        let things = if n == 1 {
            "dead letter"
        } else {
            "dead letters"
        };
        match (self.op, n) {
            (Op::Delete, 0) => "Nothing was deleted: the selected dead letters are already \
                                deleted or waiting in a replay job (cancel the job first)."
                .to_string(),
            (Op::Delete, _) => format!(
                "Deleted {n} {things}. They are kept under the status filter \u{201c}deleted\u{201d} \
                 and can be restored."
            ),
            (Op::Restore, 0) => "Nothing was restored: none of the selected dead letters was \
                                 deleted."
                .to_string(),
            (Op::Restore, _) => format!("Restored {n} {things} to the status they had before."),
            (Op::Replay, _) => format!("Queued {n} {things} for replay."),
            (Op::LabelAdd, 0) => "No label was added: the selected dead letters already have \
                                  it (or have the most labels allowed)."
                .to_string(),
            (Op::LabelAdd, _) => format!("Labelled {n} {things}."),
            (Op::LabelRemove, 0) => {
                "No label was removed: none of the selected dead letters had it.".to_string()
            }
            (Op::LabelRemove, _) => format!("Removed the label from {n} {things}."),
        }
    }
}

/// Query parameters that belong to the page, not to the list's filter: the notice and the
/// server-function error of a plain form's redirect (with the server's signature of it,
/// `__sig`: `docs/security.md`). They are removed before the filter is parsed (the filter
/// parser refuses names it does not know).
pub const PAGE_PARAMS: [&str; 4] = ["done", "__err", "__path", "__sig"];

/// `raw` (a query string) without [`PAGE_PARAMS`], re-encoded.
pub fn without_page_params(raw: &str) -> String {
    let pairs = crate::query::parse(raw);
    let kept: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| !PAGE_PARAMS.contains(&k.as_str()))
        .map(|(k, v)| format!("{}={}", crate::query::encode(k), crate::query::encode(v)))
        .collect();
    kept.join("&")
}

/// A same-site path to go back to, or `/`: `back` must be a path on this site (`/...`, not
/// `//host` or `/\host`, which browsers treat as another site), so a form cannot be used to
/// redirect elsewhere; and visible ASCII only (what a browser sends, and what a `Location`
/// header can hold). Page parameters of an earlier action are dropped.
pub fn safe_back(back: &str) -> String {
    let ok = back.starts_with('/')
        && !back.starts_with("//")
        && !back.starts_with("/\\")
        && back.bytes().all(|b| b.is_ascii_graphic());
    if !ok {
        return "/".to_string();
    }
    let (path, query) = back.split_once('?').unwrap_or((back, ""));
    let query = without_page_params(query);
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    }
}

/// `back` (see [`safe_back`]) with the notice `done=CODE`.
pub fn with_notice(back: &str, code: &str) -> String {
    let back = safe_back(back);
    let sep = if back.contains('?') { '&' } else { '?' };
    format!("{back}{sep}done={}", crate::query::encode(code))
}

/// The seams the label server functions (`labels_api`) share with these.
#[cfg(feature = "ssr")]
pub use seam::{
    failed as failed_for_labels, permitted as permitted_for_labels, store as store_for_labels,
};

#[cfg(feature = "ssr")]
mod seam {
    use leptos::prelude::*;
    use redrive_core::actions::{Actor, AuditQuery, Selection};
    use redrive_core::permission::Permission;
    use redrive_core::store::{Store, StoreError};

    use super::{ActionDone, Notice, Op};
    use crate::auth_context;
    use crate::http_status::HttpStatus;
    use crate::refusal::{refused, INVALID};

    /// Most ids one form may name: the domain's limit, the API's too.
    const MAX_IDS: usize = redrive_core::request::MAX_SELECTION_IDS;

    /// The store the site router provides.
    pub fn store() -> Result<Store, ServerFnError> {
        use_context::<Store>()
            .ok_or_else(|| ServerFnError::new("redrive is misconfigured: no store in context"))
    }

    /// A store failure as the user should read it: what to change for a refused request,
    /// else a hint (the detail goes to the log). Answered with the failure's status (422,
    /// 409, 404, 503, else 500; `crate::refusal`) when a script called.
    pub fn failed(what: &str, e: StoreError) -> ServerFnError {
        crate::refusal::set_status(crate::refusal::store_status(&e));
        match e {
            StoreError::Invalid(m) | StoreError::Conflict(m) => {
                ServerFnError::new(format!("Could not {what}: {m}."))
            }
            StoreError::NotFound(m) => ServerFnError::new(format!("There is no {m}.")),
            other => {
                tracing::error!(error = %other, "{what} failed");
                let hint = match other {
                    StoreError::Unavailable(_) => {
                        "the database is unavailable; try again in a moment"
                    }
                    _ => "see the server log for the cause",
                };
                ServerFnError::new(format!("Could not {what}: {hint}."))
            }
        }
    }

    /// The actor, if its role grants `needed`; else 403 with the reason, and the refusal is
    /// audited as `action`.
    pub async fn permitted(needed: Permission, action: &str) -> Result<Actor, ServerFnError> {
        let status = HttpStatus::current();
        auth_context::authorize_permission(needed, action)
            .await
            .inspect_err(|_| status.set(403))
    }

    /// The form's `op`.
    pub fn op(op: &str) -> Result<Op, ServerFnError> {
        Op::parse(op).ok_or_else(|| {
            refused(
                INVALID,
                "Unknown action: use the Replay, Delete, Restore or label buttons.",
            )
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
    fn sentence(m: &str) -> String {
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

    /// Refuses an "all" action (an empty filter) unless `typed` is the number of dead letters
    /// the empty filter matches now; the message says the number to type.
    pub async fn confirm_all(selection: &Selection, typed: &str) -> Result<(), ServerFnError> {
        use redrive_core::store::ConfirmAllError;
        if !selection.is_all() {
            return Ok(());
        }
        let given = match text(typed) {
            None => None,
            Some(t) => Some(t.replace([',', '_', ' '], "").parse::<i64>().map_err(|_| {
                refused(
                    INVALID,
                    format!(
                    "Nothing was changed: \u{201c}{t}\u{201d} is not a number. Type the count of \
                     dead letters shown to confirm acting on all of them."
                ),
                )
            })?),
        };
        match store()?.check_confirm_all(selection, given).await {
            Ok(_) => Ok(()),
            Err(ConfirmAllError::Missing { matched }) => Err(refused(
                INVALID,
                format!(
                "Nothing was changed: with no filter this acts on every dead letter that is not \
                 deleted ({matched} now). Type {matched} to confirm, or narrow the filter."
            ),
            )),
            Err(ConfirmAllError::Wrong { matched, given }) => Err(refused(
                INVALID,
                format!(
                    "Nothing was changed: you typed {given}, but there are {matched} dead letters \
                 now. Type {matched} to act on all of them, or narrow the filter."
                ),
            )),
            Err(ConfirmAllError::Store(e)) => Err(failed("count the dead letters", e)),
        }
    }

    /// A checkbox of the confirmation form: ticked (`true`, or `on`, a browser's value for a
    /// checkbox without one) or not (absent or empty); anything else is refused by name.
    pub fn flag(name: &str, v: &str) -> Result<bool, ServerFnError> {
        match v.trim() {
            "" | "false" => Ok(false),
            "true" | "on" => Ok(true),
            other => Err(refused(INVALID, format!(
                "The field {name} is a checkbox: send true or leave it out (got \u{201c}{}\u{201d}).",
                crate::display::visible::name(other, 64)
            ))),
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

    /// Runs `op` on `selection` and redirects: to the job after a replay, else to `back` with
    /// the notice.
    #[allow(clippy::too_many_arguments)]
    pub async fn act(
        op: Op,
        selection: Selection,
        target_topic: &str,
        rate_per_sec: &str,
        reason: &str,
        label: &str,
        back: &str,
        options: redrive_core::actions::ReplayOptions,
    ) -> Result<ActionDone, ServerFnError> {
        let store = store()?;
        let actor = permitted(op.permission(), op.as_str()).await?;
        let reason = self::reason(reason)?;
        match op {
            Op::LabelAdd | Op::LabelRemove => {
                let label_op = if op == Op::LabelAdd {
                    redrive_core::labels::LabelOp::Add
                } else {
                    redrive_core::labels::LabelOp::Remove
                };
                if label.trim().is_empty() {
                    return Err(refused(
                        INVALID,
                        "Type the label to add or remove (e.g. needs-fix) first.",
                    ));
                }
                let o = store
                    .label_selection(&actor, &selection, label, label_op)
                    .await
                    .map_err(|e| failed("change the labels", e))?;
                let n = u64::try_from(o.changed).unwrap_or(0);
                leptos_axum::redirect(&super::with_notice(back, &Notice::code(op, n)));
                Ok(ActionDone {
                    op,
                    affected: o.changed,
                    job_id: None,
                    request_id: None,
                })
            }
            Op::Replay => {
                let req = redrive_core::actions::ReplayRequest {
                    selection,
                    target_topic: self::target_topic(target_topic)?,
                    rate_per_sec: rate(rate_per_sec)?,
                    reason,
                    options,
                };
                if let Some(done) = pending(&store, &actor, op, &req).await? {
                    return Ok(done);
                }
                let job = store
                    .request_replay(&actor, &req)
                    .await
                    .map_err(|e| failed("start the replay", e))?;
                leptos_axum::redirect(&format!("/jobs/{}", crate::query::encode(&job.id)));
                Ok(ActionDone {
                    op,
                    affected: job.total,
                    job_id: Some(job.id),
                    request_id: None,
                })
            }
            Op::Delete | Op::Restore => {
                let req = redrive_core::actions::ReplayRequest {
                    selection,
                    target_topic: None,
                    rate_per_sec: None,
                    reason,
                    options: Default::default(),
                };
                if let Some(done) = pending(&store, &actor, op, &req).await? {
                    return Ok(done);
                }
                let (selection, reason) = (req.selection, req.reason);
                let n = if op == Op::Delete {
                    store.delete(&actor, &selection, reason.as_deref()).await
                } else {
                    store.restore(&actor, &selection, reason.as_deref()).await
                }
                .map_err(|e| failed(&format!("{} the dead letters", op.as_str()), e))?;
                leptos_axum::redirect(&super::with_notice(back, &Notice::code(op, n)));
                Ok(ActionDone {
                    op,
                    affected: i64::try_from(n).unwrap_or(i64::MAX),
                    job_id: None,
                    request_id: None,
                })
            }
        }
    }

    /// The approval gate (`approvals_api::gate`) of a replay, delete or restore: when it
    /// needs approval, the request is stored and the browser goes to `/approvals`.
    async fn pending(
        store: &Store,
        actor: &Actor,
        op: Op,
        req: &redrive_core::actions::ReplayRequest,
    ) -> Result<Option<ActionDone>, ServerFnError> {
        use redrive_core::approval::ActionKind;
        let kind = match op {
            Op::Replay => ActionKind::Replay,
            Op::Delete => ActionKind::Delete,
            Op::Restore => ActionKind::Restore,
            Op::LabelAdd | Op::LabelRemove => return Ok(None),
        };
        let Some(r) = crate::approvals_api::gate(store, actor, kind, req).await? else {
            return Ok(None);
        };
        leptos_axum::redirect(&format!("/approvals?requested={}#request-{}", r.id, r.id));
        Ok(Some(ActionDone {
            op,
            affected: r.count,
            job_id: None,
            request_id: Some(r.id),
        }))
    }

    /// Parses the audit page's query (the names of `GET /api/v1/audit`: `actor`, `action`,
    /// `from`, `to`, `limit`, `cursor`); the message says what is wrong.
    pub fn audit_query(pairs: &[(String, String)]) -> Result<AuditQuery, String> {
        AuditQuery::from_pairs(
            pairs
                .iter()
                .filter(|(k, _)| !super::PAGE_PARAMS.contains(&k.as_str()))
                .map(|(k, v)| (k.as_str(), v.as_str())),
        )
    }
}

/// Replays, deletes or restores the dead letters picked by id (`ids[]` checkboxes of the list,
/// or the one dead letter of a detail page). `op` is `replay`, `delete` or `restore`; empty
/// text fields mean "not given". After a replay the browser goes to the job's page; after a
/// delete or restore back to `back` (a path on this site) with a notice.
#[allow(clippy::too_many_arguments)]
#[server(endpoint = "ui/act")]
pub async fn act_on_selected(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    op: String,
    #[server(default)] ids: Vec<i64>,
    #[server(default)] reason: String,
    #[server(default)] target_topic: String,
    #[server(default)] rate_per_sec: String,
    #[server(default)] label: String,
    #[server(default)] back: String,
) -> Result<ActionDone, ServerFnError> {
    let _ = csrf;
    let op = seam::op(&op)?;
    let selection = seam::ids(ids)?;
    seam::act(
        op,
        selection,
        &target_topic,
        &rate_per_sec,
        &reason,
        &label,
        &back,
        Default::default(),
    )
    .await
}

/// Replays, deletes or restores everything matching `filter` (the list's query parameters,
/// URL-encoded, as the confirmation page shows them), evaluated inside the action's own
/// transaction. Sent by the confirmation page's "Confirm" button only.
#[allow(clippy::too_many_arguments)]
#[server(endpoint = "ui/act-on-filter")]
pub async fn act_on_filter(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    op: String,
    #[server(default)] filter: String,
    #[server(default)] reason: String,
    #[server(default)] target_topic: String,
    #[server(default)] rate_per_sec: String,
    #[server(default)] label: String,
    /// With an empty filter: the count typed into "type N to confirm".
    #[server(default)]
    confirm_all: String,
    /// A replay's transform script (`docs/replay.md`); empty = none.
    #[server(default)]
    transform: String,
    /// A replay's "publish without per-key order" checkbox (`true` when ticked).
    #[server(default)]
    unordered: String,
    /// A replay's "publish to each record's original partition" checkbox.
    #[server(default)]
    original_partition: String,
    /// A replay's canary (`docs/replay.md`, "Canary replay"): its size as a record count or
    /// a percentage (`10`, `1 %`); empty = no canary.
    #[server(default)]
    canary_size: String,
    /// The canary's watch, seconds; empty = the default (5 min).
    #[server(default)]
    canary_wait_s: String,
    /// Canary records that may come back before the job pauses; empty = 0.
    #[server(default)]
    canary_max_refailed: String,
    /// A replay's lag gate: the consumer group that reads the target topic; empty = none.
    #[server(default)]
    lag_group: String,
    /// A replay's lag gate: the most records that group may be behind.
    #[server(default)]
    lag_max: String,
) -> Result<ActionDone, ServerFnError> {
    let _ = csrf;
    let op = seam::op(&op)?;
    let mut options = seam::replay_options(&transform, &unordered, &original_partition)?;
    options.canary = redrive_core::canary::CanaryOptions::from_form(
        &canary_size,
        &canary_wait_s,
        &canary_max_refailed,
    )
    .map_err(|e| crate::refusal::refused(crate::refusal::INVALID, e))?;
    options.lag_gate = seam::lag_gate(&lag_group, &lag_max)?;
    let pairs = crate::query::parse(&filter);
    let q = redrive_core::ListQuery::from_pairs(
        pairs
            .iter()
            .filter(|(k, _)| k != "limit" && k != "cursor")
            .map(|(k, v)| (k.as_str(), v.as_str())),
    )
    .map_err(|e| {
        crate::refusal::refused(
            crate::refusal::INVALID,
            format!("This filter cannot be used: {e}."),
        )
    })?;
    let back = crate::query::href("/", crate::query::filter_only(&pairs));
    let selection = redrive_core::actions::Selection::Filter(q.filter);
    seam::confirm_all(&selection, &confirm_all).await?;
    seam::act(
        op,
        selection,
        &target_topic,
        &rate_per_sec,
        &reason,
        &label,
        &back,
        options,
    )
    .await
}

/// Cancels a running or waiting replay job: rows not yet published are released (their dead
/// letters go back to their previous status), and the cancel is audited. Back to the job.
#[server(endpoint = "ui/cancel-job")]
pub async fn cancel_replay_job(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    job_id: String,
) -> Result<ReplayJob, ServerFnError> {
    let _ = csrf;
    let store = seam::store()?;
    let actor = seam::permitted(redrive_core::permission::Permission::Replay, "cancel_job").await?;
    let job = store
        .cancel_job(&actor, job_id.trim())
        .await
        .map_err(|e| seam::failed("cancel the replay job", e))?;
    leptos_axum::redirect(&format!("/jobs/{}", crate::query::encode(&job.id)));
    Ok(job)
}

/// The confirmation page's preview for its raw query `query`: `op`, optional `target_topic`,
/// and the filter (the list's parameters; `limit` and `cursor` are ignored: "all matching"
/// means all, not the page shown).
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn preview_action(query: String) -> Result<Listing<Preview>, ServerFnError> {
    use redrive_core::actions::Selection;
    use redrive_core::store::StoreError;

    let store = seam::store()?;
    let pairs = crate::query::parse(&query);
    let Some(op) = Op::parse(crate::query::value(&pairs, "op")) else {
        return Ok(Listing::BadQuery(
            "say what to do: `op` must be replay, delete, restore, label_add or label_remove"
                .to_string(),
        ));
    };
    let target_topic = seam::text(crate::query::value(&pairs, "target_topic"));
    let transform = seam::text(crate::query::value(&pairs, "transform"));
    let filter_pairs: Vec<(&str, &str)> = pairs
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "op" | "target_topic" | "limit" | "cursor" | "op_label" | "transform"
            ) && !PAGE_PARAMS.contains(&k.as_str())
        })
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut q = match redrive_core::ListQuery::from_pairs(filter_pairs) {
        Ok(q) => q,
        Err(e) => return Ok(Listing::BadQuery(e.to_string())),
    };
    // The counts are of what the actor may act on (its DLQ-topic scope).
    crate::auth_context::limit_to_scope(&store, &mut q.filter)
        .await
        .map_err(|e| seam::failed("count the dead letters", e))?;
    let filter: Vec<(String, String)> = q
        .filter
        .to_pairs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    // The label of a label change travels as `op_label` (`label` is the filter's).
    let label = if op.is_label() {
        match redrive_core::labels::parse_label(crate::query::value(&pairs, "op_label")) {
            Ok(l) => Some(l),
            Err(e) => return Ok(Listing::BadQuery(format!("`op_label`: {e}"))),
        }
    } else {
        None
    };
    let selection = Selection::Filter(q.filter);
    let confirm_all = if selection.is_all() {
        Some(
            store
                .all_count()
                .await
                .map_err(|e| seam::failed("count the dead letters", e))?,
        )
    } else {
        None
    };
    let (dry_run, count) = match op {
        Op::LabelAdd | Op::LabelRemove => {
            let Selection::Filter(f) = &selection else {
                return Ok(Listing::BadQuery("a label change needs a filter".into()));
            };
            (
                None,
                store
                    .count(f)
                    .await
                    .map_err(|e| seam::failed("count the dead letters", e))?,
            )
        }
        Op::Replay => match store.dry_run(&selection, target_topic.as_deref()).await {
            Ok(d) => {
                let n = d.queued();
                (Some(d), n)
            }
            Err(StoreError::Invalid(m)) => return Ok(Listing::BadQuery(m)),
            Err(e) => return Err(seam::failed("count what the replay would do", e)),
        },
        Op::Delete => (
            None,
            store
                .delete_dry_run(&selection)
                .await
                .map_err(|e| seam::failed("count what the delete would do", e))?,
        ),
        Op::Restore => (
            None,
            store
                .restore_dry_run(&selection)
                .await
                .map_err(|e| seam::failed("count what the restore would do", e))?,
        ),
    };
    // A replay's sample, through the transform when one is given (`docs/replay.md`).
    let (mut sample, mut transform_error) = (None, None);
    if let Some(d) = &dry_run {
        let topics: Vec<String> = d.per_target.iter().map(|(t, _)| t.clone()).collect();
        let options = redrive_core::actions::ReplayOptions {
            transform: transform
                .clone()
                .map(|script| redrive_core::actions::TransformOptions {
                    script,
                    ..Default::default()
                }),
            ..Default::default()
        };
        let per_target = redrive_core::replay_sample::SAMPLE_PER_TARGET;
        let target = target_topic.as_deref();
        match store
            .replay_sample(&selection, target, &topics, &options, per_target)
            .await
        {
            Ok(s) => sample = Some(s),
            Err(StoreError::Invalid(m)) => {
                transform_error = Some(m);
                let plain = redrive_core::actions::ReplayOptions::default();
                sample = store
                    .replay_sample(&selection, target, &topics, &plain, per_target)
                    .await
                    .ok();
            }
            Err(e) => return Err(seam::failed("read a sample of the replay", e)),
        }
    }
    Ok(Listing::Found(Preview {
        op,
        filter,
        target_topic,
        dry_run,
        count,
        label,
        confirm_all,
        transform,
        transform_error,
        sample,
    }))
}

/// The replay job `id`, or `None` if there is none.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_replay_job(id: String) -> Result<Option<JobSnapshot>, ServerFnError> {
    let job = seam::store()?
        .job(&id)
        .await
        .map_err(|e| seam::failed("read the replay job", e))?;
    let as_of_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let window_ms = redrive_core::outcome::window_ms();
    Ok(job.map(|job| JobSnapshot {
        job,
        as_of_ms,
        window_ms,
    }))
}

/// The most recent replay jobs, newest first.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn list_replay_jobs() -> Result<Vec<ReplayJob>, ServerFnError> {
    seam::store()?
        .jobs(50)
        .await
        .map_err(|e| seam::failed("list the replay jobs", e))
}

/// One page of the audit trail for the audit page's raw query `query`.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn list_audit(query: String) -> Result<Listing<Page<AuditEntry>>, ServerFnError> {
    let store = seam::store()?;
    let q = match seam::audit_query(&crate::query::parse(&query)) {
        Ok(q) => q,
        Err(m) => return Ok(Listing::BadQuery(m)),
    };
    store
        .audit(&q)
        .await
        .map(Listing::Found)
        .map_err(|e| seam::failed("read the audit trail", e))
}

/// The dead letter `id`'s own history, oldest first (empty if there is no such dead letter).
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_history(id: i64) -> Result<Vec<HistoryEvent>, ServerFnError> {
    let store = seam::store()?;
    // Outside the actor's DLQ-topic scope a record is absent.
    let actor = crate::auth_context::signed_in()?;
    match store.check_ids_in_scope(&actor, &[id]).await {
        Ok(()) => {}
        Err(redrive_core::store::StoreError::NotFound(_)) => return Ok(Vec::new()),
        Err(e) => return Err(seam::failed("read the history", e)),
    }
    match store.history(id).await {
        Ok(events) => Ok(events),
        Err(redrive_core::store::StoreError::NotFound(_)) => Ok(Vec::new()),
        Err(e) => Err(seam::failed("read the history", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_stays_on_this_site() {
        assert_eq!(safe_back("/?status=deleted"), "/?status=deleted");
        assert_eq!(safe_back("//evil.example/x"), "/");
        assert_eq!(safe_back("/\\evil.example"), "/");
        assert_eq!(safe_back("https://evil.example"), "/");
        assert_eq!(safe_back(""), "/");
        assert_eq!(safe_back("/x\n"), "/");
        assert_eq!(safe_back("/é"), "/");
        assert_eq!(
            safe_back("/?q=a%20b&done=deleted-2&__err=x&__path=y"),
            "/?q=a%20b"
        );
        assert_eq!(
            with_notice("/?q=a", &Notice::code(Op::Delete, 2)),
            "/?q=a&done=deleted-2"
        );
        assert_eq!(
            with_notice("/dead-letters/4", "restored-1"),
            "/dead-letters/4?done=restored-1"
        );
    }

    #[test]
    fn notices_are_codes_not_text() {
        let n = Notice::parse("deleted-3").expect("a notice");
        assert_eq!(n.op, Op::Delete);
        assert_eq!(n.count, 3);
        assert!(n.sentence().starts_with("Deleted 3 dead letters."));
        assert!(Notice::parse("deleted-x").is_none());
        assert!(Notice::parse("<b>hi</b>-1").is_none());
        assert!(Notice::parse("restored-0")
            .expect("a notice")
            .sentence()
            .starts_with("Nothing was restored"));
    }

    #[test]
    fn page_params_are_dropped() {
        assert_eq!(
            without_page_params("?fingerprint=ab&done=deleted-1&status=new"),
            "fingerprint=ab&status=new"
        );
        assert_eq!(without_page_params(""), "");
    }
}
