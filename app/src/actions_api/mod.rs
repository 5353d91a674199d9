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
use redrive_core::actions::{AuditEntry, HistoryEvent, ReplayJob};
use redrive_core::Page;

use crate::api::Listing;

mod forms;
mod notice;
mod op;
mod responses;
#[cfg(feature = "ssr")]
mod seam;

pub use forms::{
    act_on_filter, act_on_selected, cancel_replay_job, ActOnFilter, ActOnSelected, CancelReplayJob,
};
pub use notice::{safe_back, with_notice, without_page_params, Notice, PAGE_PARAMS};
pub use op::Op;
pub use responses::{ActionDone, JobSnapshot, Preview};

/// The seams the label server functions (`labels_api`) share with these.
#[cfg(feature = "ssr")]
pub use seam::{
    failed as failed_for_labels, permitted as permitted_for_labels, store as store_for_labels,
};

// The read-side server functions below stay in this module: without an explicit `endpoint`,
// a server function's URL is its name plus a hash of its module path, which moving it would
// change.

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
    // The label of a label change travels as `op_label` (`label` is the filter's). A missing
    // or unusable one is the label's refusal, not the filter's: the page says what to type.
    let (label, label_error) = if op.is_label() {
        use redrive_core::labels::{parse_label, LabelError};
        match parse_label(crate::query::value(&pairs, "op_label")) {
            Ok(l) => (Some(l), None),
            Err(LabelError::Empty) => (None, op.missing_label().map(str::to_string)),
            Err(e) => (None, Some(format!("This label cannot be used: {e}."))),
        }
    } else {
        (None, None)
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
        label_error,
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
