//! The state-changing server functions the action forms post to: act on the dead letters
//! picked by id or on everything matching a filter, and cancel a replay job.

// Without `ssr` the `#[server]` macro (server_fn_macro 0.8.12) drops a function's own lint
// attributes from the client-side function it generates, so its `#[allow]` is given here too.
#![allow(clippy::too_many_arguments)]

use leptos::prelude::*;
use redrive_core::actions::ReplayJob;

#[cfg(feature = "ssr")]
use super::seam;
use super::ActionDone;

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
