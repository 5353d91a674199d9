//! What a replay's transform (`replay/transform.rs`) did to one claim, recorded by
//! [`Store::mark`](super::Store) in the same transaction as the rest of the batch:
//!
//! - **skipped by the script**: the outbox row ends `skipped` with the reason in
//!   `last_error`; the dead letter is NOT marked replayed: it goes back to the status it had
//!   before the replay (like a cancel), with a `replay_skipped` history event;
//! - **failed by the script** (an error, a limit, a wrong answer): an ordinary final failure
//!   (`failed` row, dead letter `replay_failed`, stored bytes unchanged, replayable again),
//!   also counted in the job's `failed_by_script`;
//! - **transformed**: published after the script returned it, counted in the job's
//!   `transformed`.
//!
//! The counts go to the mark's tally row (`job_tallies.rs`).
//!
//! Only rows still held under the batch's claim token count, each once (migration 0015).

use sqlx::QueryBuilder;

use super::actions::ids_json;
use super::dialect::{Dialect, Val};

/// A row the script skipped.
#[derive(Debug, Clone)]
pub(crate) struct Skipped {
    pub(crate) outbox_id: i64,
    /// The script's `skip("reason")`, or `None` for `skip()`.
    pub(crate) reason: Option<String>,
}

/// The transform's part of a [`MarkBatch`](super::MarkBatch); empty for a plain replay.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScriptMarks {
    pub(crate) skipped: Vec<Skipped>,
    /// Outbox ids sent as the script returned them (counted when marked published).
    pub(crate) transformed: Vec<i64>,
    /// Outbox ids of the batch's `failed` (or retried) rows whose error is the script's.
    pub(crate) failed: Vec<i64>,
}

impl ScriptMarks {
    /// True when there is nothing to record (a plain replay).
    pub(crate) fn is_empty(&self) -> bool {
        self.skipped.is_empty() && self.transformed.is_empty() && self.failed.is_empty()
    }
}

/// The `last_error` of a skipped row and the detail of its `replay_skipped` event.
pub(crate) fn skip_text(reason: Option<&str>) -> String {
    match reason {
        Some(r) => format!("skipped by the transform script: {r}"),
        None => "skipped by the transform script".to_string(),
    }
}

/// `UPDATE outbox SET status = 'skipped'` for the held rows of `skipped`, one statement per
/// distinct reason, `RETURNING id, dead_letter_id`.
pub(super) fn skip_rows<'a, DB: Dialect>(
    skipped: &[Skipped],
    token: &'a str,
) -> Vec<QueryBuilder<'a, DB>> {
    let mut by_reason: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    for s in skipped {
        by_reason
            .entry(super::actions::clean_text(&skip_text(s.reason.as_deref())))
            .or_default()
            .push(s.outbox_id);
    }
    by_reason
        .into_iter()
        .map(|(text, ids)| {
            let mut qb = QueryBuilder::new(
                "UPDATE outbox SET status = 'skipped', lease_until_ms = NULL, last_error = ",
            );
            DB::bind(&mut qb, Val::OwnedText(Some(text)));
            qb.push(" WHERE id IN ");
            DB::push_json_ids(&mut qb, ids_json(&ids));
            qb.push(" AND claim_token = ");
            DB::bind(&mut qb, Val::Text(Some(token)));
            qb.push(" AND status = 'claimed' RETURNING id, dead_letter_id");
            qb
        })
        .collect()
}

/// After [`skip_rows`] moved `outbox_ids` (of dead letters `dl_ids`): the dead letters go back
/// to their status before the replay, one `replay_skipped` event each (the detail is the
/// row's reason).
pub(super) fn after_skip<'a, DB: Dialect>(
    outbox_ids: &[i64],
    dl_ids: &[i64],
    actor: &'a str,
    now: i64,
) -> [QueryBuilder<'a, DB>; 2] {
    let mut release = QueryBuilder::new(
        "UPDATE dead_letters SET status = COALESCE(status_before, 'new'), status_before = NULL \
         WHERE status = 'replay_pending' AND id IN ",
    );
    DB::push_json_ids(&mut release, ids_json(dl_ids));
    let mut events = QueryBuilder::new(
        "INSERT INTO dead_letter_events (dead_letter_id, at_ms, kind, actor, detail, job_id) \
         SELECT dead_letter_id, ",
    );
    DB::bind(&mut events, Val::I64(Some(now)));
    events.push(", 'replay_skipped', ");
    DB::bind(&mut events, Val::Text(Some(actor)));
    events.push(", last_error, job_id FROM outbox WHERE id IN ");
    DB::push_json_ids(&mut events, ids_json(outbox_ids));
    events.push(" ORDER BY id");
    [release, events]
}
