//! Requesting a replay (`docs/replay.md`): the checks of a request, its job row and outbox rows
//! (a fresh UUID v4 idempotency key each, the per-key order place of `order.rs`), and the
//! transaction that writes them with the `replay_pending` status, the history events and the
//! audit row ([`replay_ids_in_tx`]), used by [`Store::request_replay`], the bulk action over a
//! filter (`bulk/`), an approved request (`approvals/approve.rs`) and the scheduler's rounds
//! (`rounds.rs`). What a replay of a selection would do is [`Store::dry_run`].

use sqlx::QueryBuilder;

use super::actions::{
    check_reason, clean_text, dry_run_from, dry_run_query, ids_json, now_ms, DryRow,
};
use super::approvals::{claim_in_tx, ApprovalLink};
use super::bulk::{Bulk, BulkKind};
use super::dialect::{store_error, Column, Dialect, Val};
use super::tx_retry::{retry_rolled_back, TxFailed};
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, DryRun, ReplayJob, ReplayOptions, ReplayRequest, Selection};

/// Most outbox rows one `INSERT` writes ([`insert_outbox`]): on SQLite its row source binds
/// three values a row, and a statement takes at most 32,766 (`Dialect::MAX_BINDS`).
pub(super) const OUTBOX_ROWS_PER_STATEMENT: usize = 2_000;

/// The replay job row, as first written.
pub(super) fn insert_job<'a, DB: Dialect>(job: &'a ReplayJob) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(
        "INSERT INTO replay_jobs (id, status, created_by, created_at_ms, finished_at_ms, \
         target_topic, rate_per_sec, reason, total, skipped, skipped_without_target, selection, \
         options, canary_state) VALUES (",
    );
    let values = [
        Val::Text(Some(job.id.as_str())),
        Val::Text(Some(job.status.as_str())),
        Val::Text(Some(job.created_by.as_str())),
        Val::I64(Some(job.created_at_ms)),
        Val::I64(job.finished_at_ms),
        Val::Text(job.target_topic.as_deref()),
        Val::I32(job.rate_per_sec.map(|r| r as i32)),
        Val::Text(job.reason.as_deref()),
        Val::I64(Some(job.total)),
        Val::I64(Some(job.skipped)),
        Val::I64(Some(job.skipped_without_target)),
        Val::Text(Some(job.selection.as_str())),
        Val::OwnedText(Some(job.options.to_json())),
        // A canary starts when the job first runs (`canary.rs`): nothing is claimed before.
        Val::Text(job.options.canary.as_ref().map(|_| "starting")),
    ];
    for (i, v) in values.into_iter().enumerate() {
        if i > 0 {
            qb.push(", ");
        }
        DB::bind(&mut qb, v);
    }
    qb.push(")");
    qb
}

/// One outbox row per dead letter of `ids` (ascending, at most [`OUTBOX_ROWS_PER_STATEMENT`]),
/// each with a fresh UUID v4 idempotency key, in id order (so a replay publishes in ingest
/// order), pinned to the dead letter's latest edited version (`versions.rs`; none = the
/// original), with its per-key order group and place from `places` (`order.rs`, ascending by
/// id, may hold more ids than `ids`; empty: none, a job without per-key order).
pub(super) fn insert_outbox<'a, DB: Dialect>(
    job_id: &'a str,
    ids: &[i64],
    target: Option<&'a str>,
    now: i64,
    places: &[(i64, i64, i64)],
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(
        "INSERT INTO outbox (job_id, dead_letter_id, idempotency_key, target_topic, status, \
         attempts, next_attempt_at_ms, created_at_ms, version_id, order_key, order_pos) SELECT ",
    );
    DB::bind(&mut qb, Val::Text(Some(job_id)));
    qb.push(", dead_letters.id, ")
        .push(DB::NEW_UUID)
        .push(", COALESCE(");
    DB::bind(&mut qb, Val::Text(target));
    qb.push(", source_topic), 'pending', 0, ");
    DB::bind(&mut qb, Val::I64(Some(now)));
    qb.push(", ");
    DB::bind(&mut qb, Val::I64(Some(now)));
    qb.push(", ")
        .push(super::versions::LATEST_VERSION_ID)
        .push(" AS version_id");
    if places.is_empty() {
        qb.push(", NULL, NULL FROM dead_letters WHERE dead_letters.id IN ");
        DB::push_json_ids(&mut qb, ids_json(ids));
    } else {
        // The row source drives the join, one row per id (the place, or NULLs): with the
        // dead letters first, SQLite scanned the whole materialized list once per dead
        // letter (500 x 500 a chunk; docs/bench.md "2026-12-05 (5)").
        let place = |id: &i64| {
            let i = places.binary_search_by_key(id, |p| p.0).ok()?;
            Some((places[i].1, places[i].2))
        };
        qb.push(", p.column2, p.column3 FROM ");
        DB::push_columns(
            &mut qb,
            vec![
                Column::I64(ids.to_vec()),
                Column::OptI64(ids.iter().map(|id| place(id).map(|p| p.0)).collect()),
                Column::OptI64(ids.iter().map(|id| place(id).map(|p| p.1)).collect()),
            ],
        );
        qb.push(" AS p JOIN dead_letters ON dead_letters.id = p.column1");
    }
    qb.push(" ORDER BY dead_letters.id RETURNING id, dead_letter_id");
    qb
}

/// The trimmed target override, `None` if absent or empty. Errors: `Invalid` for a name
/// Kafka would refuse.
fn check_target(target: Option<&str>) -> Result<Option<String>, StoreError> {
    crate::request::target_topic(target).map_err(|e| StoreError::Invalid(e.0))
}

/// A replay's audit `detail` with its transform's identity merged in
/// (`{"transform": {"sha256", "bytes", "time_limit_ms", "max_operations"}}`, beside what
/// `detail` already holds); `detail` unchanged without a transform.
pub(super) fn replay_detail(
    detail: Option<String>,
    options: Option<&ReplayOptions>,
) -> Option<String> {
    let Some(t) = options.and_then(|o| o.transform.as_ref()) else {
        return detail;
    };
    let mut d = detail
        .as_deref()
        .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    d["transform"] = serde_json::json!({
        "sha256": t.script_sha256(),
        "bytes": t.script.len(),
        "time_limit_ms": t.time_limit_ms(),
        "max_operations": t.max_operations(),
    });
    Some(d.to_string())
}

/// Checks a replay's options: a transform must compile under its limits, a canary's size,
/// wait and threshold must be in range (`CanaryOptions::check`), a lag gate needs a consumer
/// group id and a limit of at least 1 record ([`crate::actions::LagGate::check`]). Errors:
/// `Invalid` with the compiler's message and line, or what to change in the canary or gate.
pub fn check_options(options: &ReplayOptions) -> Result<(), StoreError> {
    if let Some(g) = &options.lag_gate {
        g.check().map_err(StoreError::Invalid)?;
    }
    if let Some(c) = &options.canary {
        c.check().map_err(StoreError::Invalid)?;
    }
    if let Some(t) = &options.transform {
        crate::replay::transform::Transform::compile(t)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
    }
    Ok(())
}

/// Checks a replay request; returns the trimmed target override and reason.
pub(super) fn check_replay(
    req: &ReplayRequest,
) -> Result<(Option<String>, Option<String>), StoreError> {
    let target = check_target(req.target_topic.as_deref())?;
    check_options(&req.options)?;
    crate::request::rate(req.rate_per_sec).map_err(|e| StoreError::Invalid(e.0))?;
    Ok((target, check_reason(req.reason.as_deref())?))
}

/// A replay job as first written for `req` by `actor` (status `running`, counts 0; the
/// replay fills them): a fresh UUID v4 id, the checked `target` override and `reason`.
pub(super) fn new_replay_job(
    actor: &Actor,
    req: &ReplayRequest,
    target: Option<String>,
    reason: Option<String>,
    now: i64,
    selection_json: String,
) -> ReplayJob {
    ReplayJob {
        id: uuid::Uuid::new_v4().to_string(),
        status: crate::actions::JobStatus::Running,
        created_by: clean_text(&actor.user),
        created_at_ms: now,
        started_at_ms: None,
        finished_at_ms: None,
        target_topic: target,
        rate_per_sec: req.rate_per_sec,
        reason,
        total: 0,
        published: 0,
        failed: 0,
        cancelled: 0,
        skipped: 0,
        skipped_without_target: 0,
        last_error: None,
        selection: selection_json,
        options: req.options.clone(),
        transform: Default::default(),
        refailed: 0,
        canary: req
            .options
            .canary
            .as_ref()
            .map(|_| crate::canary::CanaryStatus::starting()),
        lag: Default::default(),
        queueing: None,
    }
}

/// The explicit-ids part of a replay, inside the caller's write transaction `$tx` (a
/// `WriteTx` of the `DB` in scope, as `on_pool!` names it): the dry run of `$sel`, the
/// replayable ones set `replay_pending`, the job row (`$job`, updated with its counts and,
/// when nothing was queued, `finished`), its outbox rows (a fresh UUID v4 idempotency key
/// each), their per-key order, the `replay_requested` history events and the audit row.
/// Shared by [`Store::request_replay`] and the scheduler's rounds (`rounds.rs`), which run it
/// in their own transaction so the round's own writes commit with it or not at all.
/// Evaluates to the ids queued (sorted). A `?` in it returns the enclosing fn's `StoreError`.
macro_rules! replay_ids_in_tx {
    ($tx:ident, $job:ident, $actor:expr, $sel:expr, $target:expr, $reason:expr, $approval:expr, $now:expr) => {{
        let dry: Vec<$crate::store::actions::DryRow> =
            $crate::store::actions::dry_run_query::<DB>($sel, $target)
                .build_query_as()
                .fetch_all(&mut *$tx)
                .await
                .map_err($crate::store::dialect::store_error)?;
        let dry = $crate::store::actions::dry_run_from(dry);
        let mut ids: Vec<i64> = $crate::store::actions::update_returning_ids::<DB>(
            "status_before = status, status = 'replay_pending'",
            "'replay_pending'",
            $now,
            $sel,
            |qb| $crate::store::actions::push_replayable(qb, $target),
        )
        .build_query_scalar()
        .fetch_all(&mut *$tx)
        .await
        .map_err($crate::store::dialect::store_error)?;
        ids.sort_unstable();
        $job.total = ids.len() as i64;
        $job.skipped = (dry.total - $job.total).max(0);
        $job.skipped_without_target = dry.without_target.min($job.skipped);
        if ids.is_empty() {
            $job.status = crate::actions::JobStatus::Finished;
            $job.finished_at_ms = Some($now);
        }
        $crate::store::replay_request::insert_job::<DB>(&$job)
            .build()
            .execute(&mut *$tx)
            .await
            .map_err($crate::store::dialect::store_error)?;
        if !ids.is_empty() {
            // Per-key order (`order.rs`): each row's key group and place, written with it.
            let places = if $job.options.unordered {
                $crate::store::order::Places::default()
            } else {
                let keys: Vec<$crate::store::order::KeyRow> =
                    $crate::store::order::read_keys::<DB>(&ids)
                        .build_query_as()
                        .persistent(false)
                        .fetch_all(&mut *$tx)
                        .await
                        .map_err($crate::store::dialect::store_error)?;
                $crate::store::order::places($target, &keys)
            };
            // In id order, statement after statement: the outbox ids follow the dead letters'.
            for chunk in ids.chunks($crate::store::replay_request::OUTBOX_ROWS_PER_STATEMENT) {
                $crate::store::replay_request::insert_outbox::<DB>(
                    &$job.id,
                    chunk,
                    $target,
                    $now,
                    &places.rows,
                )
                .build()
                .persistent(false)
                .execute(&mut *$tx)
                .await
                .map_err($crate::store::dialect::store_error)?;
            }
            $crate::store::order::hold_later_in!($tx, &$job.id, &places);
            $crate::store::actions::insert_events_for_ids::<DB>(
                &ids,
                $now,
                "replay_requested",
                &$job.created_by,
                |qb| {
                    qb.push("'to ' || COALESCE(");
                    <DB as $crate::store::dialect::Dialect>::bind(
                        qb,
                        $crate::store::dialect::Val::Text($target),
                    );
                    qb.push(", source_topic)");
                },
                $crate::store::actions::reason_suffix($reason.as_deref()),
                Some(&$job.id),
            )
            .build()
            .execute(&mut *$tx)
            .await
            .map_err($crate::store::dialect::store_error)?;
        }
        let outcome = format!(
            "ok: {} queued, {} skipped ({} without a target topic)",
            $job.total, $job.skipped, $job.skipped_without_target
        );
        let base = $crate::store::actions::action_audit(
            $actor,
            "replay",
            $sel,
            $job.total,
            $reason.as_deref(),
            outcome,
        );
        let audit = $crate::actions::NewAuditEntry {
            job_id: Some($job.id.clone()),
            detail: $crate::store::approvals::approval_detail(
                $crate::store::replay_request::replay_detail(
                    base.detail.clone(),
                    Some(&$job.options),
                ),
                $approval,
            ),
            ..base
        };
        $crate::store::audit::insert_audit::<DB>(&audit, $now)
            .build()
            .execute(&mut *$tx)
            .await
            .map_err($crate::store::dialect::store_error)?;
        ids
    }};
}
pub(super) use replay_ids_in_tx;

impl Store {
    /// What a replay of `selection` (to `target_topic`, `None` = each record's source topic)
    /// would do: how many are selected, how many it would queue per target topic, how many
    /// have no target, how many it would skip (deleted or already pending). Exact at the time
    /// of the call; [`Store::request_replay`] evaluates the same SQL in its transaction.
    ///
    /// Errors: `Invalid` (a bad topic name), `Unavailable`, `Database`.
    pub async fn dry_run(
        &self,
        selection: &Selection,
        target_topic: Option<&str>,
    ) -> Result<DryRun, StoreError> {
        let target = check_target(target_topic)?;
        let rows: Vec<DryRow> = on_pool!(self, |pool, DB| {
            let mut qb = dry_run_query::<DB>(selection, target.as_deref());
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let mut dry = dry_run_from(rows);
        dry.loop_guarded = self.loop_guarded_in(selection).await?;
        Ok(dry)
    }

    /// Requests a replay, in ONE transaction: the selected dead letters that are replayable
    /// (not `deleted`, not already `replay_pending`, with a target topic) become
    /// `replay_pending` (remembering their status for a cancel), a job is created, one outbox
    /// row per dead letter with a fresh UUID v4 idempotency key, a `replay_requested` history
    /// event each, and one audit row (`replay`, count = queued, the ids or filter as given).
    ///
    /// Dead letters skipped are counted in the job (`skipped`, `skipped_without_target`) and
    /// in the audit outcome, never silently dropped. A request that queues nothing still
    /// creates a job (status `finished`, total 0), so the caller always gets a job to show.
    /// The relay publishes the rows afterwards.
    ///
    /// Errors: `Invalid` (bad topic name, rate 0 or above [`crate::actions::MAX_RATE_PER_SEC`], reason too
    /// long), `NotFound("dead letter N")` for a picked id that is not there or outside the
    /// actor's scope, `Unavailable`, `Database`. On error nothing is changed.
    pub async fn request_replay(
        &self,
        actor: &Actor,
        req: &ReplayRequest,
    ) -> Result<ReplayJob, StoreError> {
        self.replay_as(actor, req, None, usize::MAX).await
    }

    /// [`Store::request_replay`] that stops a replay over a filter after at most
    /// `max_chunks` chunks, leaving its bulk action `running` in `bulk_actions` and its job
    /// part-queued exactly as a process that died there would (crash tests resume it with
    /// [`Store::resume_bulk_actions`] or a restart). Returns the job as those chunks left it.
    /// A replay of ids is one transaction whatever `max_chunks`.
    ///
    /// Errors: as [`Store::request_replay`].
    pub async fn request_replay_chunks(
        &self,
        actor: &Actor,
        req: &ReplayRequest,
        max_chunks: usize,
    ) -> Result<ReplayJob, StoreError> {
        self.replay_as(actor, req, None, max_chunks).await
    }

    /// [`Store::request_replay`], carrying out an approved request when `approval` is given
    /// (`approvals/approve.rs`): its first transaction claims the request, a filter is
    /// bounded by the request's `max_id`, and the audit row names the approver. A filter's
    /// bulk action runs at most `max_chunks` chunks ([`Store::request_replay_chunks`]).
    pub(super) async fn replay_as(
        &self,
        actor: &Actor,
        req: &ReplayRequest,
        approval: Option<&ApprovalLink>,
        max_chunks: usize,
    ) -> Result<ReplayJob, StoreError> {
        let (target, reason) = check_replay(req)?;
        // Held to the actor's DLQ-topic scope (`scope.rs`) before anything is read.
        let scoped = ReplayRequest {
            selection: self.scope_selection(actor, &req.selection).await?,
            ..req.clone()
        };
        let req = &scoped;
        // The loop guard (`tiers.rs`, `docs/automation.md`): loop-guarded dead letters in the
        // selection need the approve permission and a reason — checked here, the one path
        // the UI, the API and an approved request all take.
        let guarded = self.loop_guarded_in(&req.selection).await?;
        super::tiers::check_loop_guard(actor, reason.as_deref(), approval.is_some(), guarded)?;
        let now = now_ms();
        let selection_json = serde_json::to_string(&req.selection)
            .map_err(|e| StoreError::Invalid(format!("selection: {e}")))?;
        let job = new_replay_job(
            actor,
            req,
            target.clone(),
            reason.clone(),
            now,
            selection_json,
        );
        if let Selection::Filter(filter) = &req.selection {
            // Over a filter: in chunks (`bulk/`), the audit row with the last one.
            let max_id = match approval.and_then(|a| a.max_id) {
                Some(m) => m,
                None => self.max_dead_letter_id().await?,
            };
            let mut bulk = Bulk::new(
                BulkKind::Replay,
                actor,
                filter,
                reason.clone(),
                Some(job),
                max_id,
            );
            bulk.approval = approval.cloned();
            let bulk = self.run_bulk_chunks(bulk, max_chunks).await?;
            let job = bulk
                .job
                .ok_or_else(|| StoreError::Database("bulk replay lost its job".into()))?;
            tracing::info!(
                job = %job.id,
                actor = %job.created_by,
                queued = job.total,
                skipped = job.skipped,
                chunks = bulk.chunks,
                "replay requested"
            );
            return Ok(job);
        }
        let sel = &req.selection;
        let target = target.as_deref();
        // One transaction, tried again when it is rolled back for a transient reason (a
        // deadlock with the tier sorter on PostgreSQL, `tx_retry.rs`): it re-checks which
        // dead letters are replayable, and each attempt starts from the job as requested
        // (the macro fills in its counts), so a retry writes the same job id with fresh
        // outbox rows, never two jobs.
        let (requested, reason) = (&job, &reason);
        let job = retry_rolled_back("replay", || async move {
            let mut job = requested.clone();
            on_pool!(self, |pool, DB| {
                let mut tx = self.begin_write(pool).await?;
                if let Some(link) = approval {
                    claim_in_tx!(tx, link, Some(job.id.as_str()), now);
                }
                replay_ids_in_tx!(tx, job, actor, sel, target, reason, approval, now);
                tx.commit().await.map_err(TxFailed::at_commit)?;
                Ok::<(), TxFailed>(())
            })?;
            Ok(job)
        })
        .await?;
        tracing::info!(
            job = %job.id,
            actor = %job.created_by,
            queued = job.total,
            skipped = job.skipped,
            "replay requested"
        );
        Ok(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_requests_are_checked() {
        let req = |t: Option<&str>, r: Option<u32>| ReplayRequest {
            selection: Selection::Ids(vec![1]),
            target_topic: t.map(str::to_string),
            rate_per_sec: r,
            reason: Some("  ".into()),
            options: Default::default(),
        };
        assert_eq!(
            check_replay(&req(Some(" orders "), Some(5))).unwrap(),
            (Some("orders".to_string()), None)
        );
        assert_eq!(check_replay(&req(Some(""), None)).unwrap(), (None, None));
        assert!(matches!(
            check_replay(&req(Some("a b"), None)),
            Err(StoreError::Invalid(_))
        ));
        assert!(matches!(
            check_replay(&req(None, Some(0))),
            Err(StoreError::Invalid(_))
        ));
        assert!(matches!(
            check_reason(Some(&"x".repeat(crate::actions::MAX_REASON_CHARS + 1))),
            Err(StoreError::Invalid(_))
        ));
    }
}
