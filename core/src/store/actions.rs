//! The actions on dead letters: replay (into the outbox), delete, restore, cancel a job, and
//! their dry runs. An action on explicit ids is ONE transaction: the state change, the
//! history events, the audit row and (for a replay) the job and its outbox rows (`docs/invariants.md`,
//! invariants 3–5). An action over a filter runs in chunks of
//! short transactions (`bulk.rs`: the audit row with the final count comes with the last
//! chunk, a replay job stays `preparing` until then, an interrupted action is resumed).
//!
//! A selection by filter goes through [`sql::push_filter`], the same WHERE the list and count
//! use, and the dry runs share each action's eligibility condition, so a dry-run count and
//! the action can only disagree if the data changed in between.
//!
//! Status rules:
//! - replay queues dead letters that are not `deleted` and not already `replay_pending`, and
//!   have a target (the override, else their source topic); the rest are counted as skipped.
//! - delete acts on dead letters that are not `deleted` and not `replay_pending` (a pending
//!   one is in a job's outbox: cancel the job first).
//! - restore acts on `deleted` ones and puts back the status they had before.
//! - cancel releases a job's `pending` outbox rows; rows a relay is publishing right now
//!   (`claimed`) finish and are counted as published or failed.

use sqlx::QueryBuilder;

use super::approvals::{approval_detail, claim_query, ApprovalLink};
use super::bulk::{Bulk, BulkKind};
use super::dialect::{store_error, Column, Dialect, Val};
use super::sql;
use super::{Pool, Store, StoreError};
use crate::actions::{
    Actor, DryRun, NewAuditEntry, ReplayJob, ReplayOptions, ReplayRequest, Selection,
};
use crate::filter::Filter;

/// Statuses a replay or delete leaves alone.
pub(super) const NOT_ACTIONABLE: &str = "('deleted', 'replay_pending')";

pub(crate) use crate::clock::now_ms;

/// `[1,2,3]`: the JSON array text [`Dialect::push_json_ids`] reads.
pub(crate) fn ids_json(ids: &[i64]) -> String {
    let mut s = String::with_capacity(ids.len() * 8 + 2);
    s.push('[');
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&id.to_string());
    }
    s.push(']');
    s
}

/// The filter as a JSON object of the fields that are set, with the list's query names
/// (`{"fingerprint":"…","status":"new"}`): what the audit row shows as "the filter as given".
pub(crate) fn filter_json(f: &Filter) -> String {
    let map: serde_json::Map<String, serde_json::Value> = f
        .to_pairs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v)))
        .collect();
    serde_json::Value::Object(map).to_string()
}

/// PostgreSQL text cannot hold U+0000: free text from a request is stored with U+FFFD instead.
pub(crate) fn clean_text(s: &str) -> String {
    s.replace('\0', "\u{FFFD}")
}

/// The trimmed reason, `None` if empty. Errors: `Invalid` when longer than
/// [`crate::actions::MAX_REASON_CHARS`].
pub(super) fn check_reason(reason: Option<&str>) -> Result<Option<String>, StoreError> {
    crate::request::reason(reason)
        .map(|r| r.map(|r| clean_text(&r)))
        .map_err(|e| StoreError::Invalid(e.0))
}

/// The audit row of a dead-letter action: actor, selection (ids or filter as given), reason.
pub(super) fn action_audit(
    actor: &Actor,
    action: &str,
    selection: &Selection,
    count: i64,
    reason: Option<&str>,
    outcome: String,
) -> NewAuditEntry {
    let (ids, filter) = match selection {
        Selection::Ids(ids) => (Some(ids_json(ids)), None),
        Selection::Filter(f) => (None, Some(filter_json(f))),
    };
    // An "all" action (empty filter) got past the typed-count confirmation
    // (`confirm_all.rs`): its row says so, in words and in `detail`.
    let (outcome, detail) = if selection.is_all() {
        (
            format!("{outcome}; {}", super::confirm_all::ALL_OUTCOME),
            Some(serde_json::json!({ "all": true }).to_string()),
        )
    } else {
        (outcome, None)
    };
    NewAuditEntry {
        count,
        ids,
        filter,
        reason: reason.map(str::to_string),
        detail,
        ..NewAuditEntry::by(actor, action, &outcome)
    }
}

/// Appends ` WHERE <selection>`: the list's filter (so `status` absent means "not deleted"),
/// or `id IN (<ids>)` for explicit ids (any status).
pub(crate) fn push_selection<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, sel: &'a Selection) {
    match sel {
        Selection::Filter(f) => sql::push_filter(qb, f),
        Selection::Ids(ids) => {
            qb.push(" WHERE id IN ");
            DB::push_json_ids(qb, ids_json(ids));
        }
    }
}

/// The condition (after the selection's WHERE) a replay queues: actionable and with a target.
pub(super) fn push_replayable<'a, DB: Dialect>(
    qb: &mut QueryBuilder<'a, DB>,
    target: Option<&'a str>,
) {
    qb.push(" AND status NOT IN ").push(NOT_ACTIONABLE);
    qb.push(" AND COALESCE(");
    DB::bind(qb, Val::Text(target));
    qb.push(", source_topic) IS NOT NULL");
}

/// The condition (after the selection's WHERE) a delete acts on.
pub(super) fn push_deletable<DB: Dialect>(qb: &mut QueryBuilder<'_, DB>) {
    qb.push(" AND status NOT IN ").push(NOT_ACTIONABLE);
}

/// The condition (after the selection's WHERE) a restore acts on.
pub(super) fn push_restorable<DB: Dialect>(qb: &mut QueryBuilder<'_, DB>) {
    qb.push(" AND status = 'deleted'");
}

/// One group of the replay dry run.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct DryRow {
    target: Option<String>,
    skip: i32,
    n: i64,
}

pub(super) fn dry_run_query<'a, DB: Dialect>(
    sel: &'a Selection,
    target: Option<&'a str>,
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new("SELECT COALESCE(");
    DB::bind(&mut qb, Val::Text(target));
    qb.push(", source_topic) AS target, CASE WHEN status IN ")
        .push(NOT_ACTIONABLE)
        .push(" THEN 1 ELSE 0 END AS skip, COUNT(*) AS n FROM dead_letters");
    push_selection(&mut qb, sel);
    qb.push(" GROUP BY 1, 2");
    qb
}

pub(super) fn dry_run_from(rows: Vec<DryRow>) -> DryRun {
    let mut out = DryRun {
        total: 0,
        per_target: Vec::new(),
        without_target: 0,
        skipped: 0,
        loop_guarded: 0,
    };
    for r in rows {
        out.total += r.n;
        match (r.skip != 0, r.target) {
            (true, _) => out.skipped += r.n,
            (false, None) => out.without_target += r.n,
            (false, Some(t)) => out.per_target.push((t, r.n)),
        }
    }
    out.per_target
        .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// `SELECT COUNT(*)` of the selection under an action's condition.
fn count_query<'a, DB: Dialect>(
    sel: &'a Selection,
    condition: fn(&mut QueryBuilder<'a, DB>),
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new("SELECT COUNT(*) FROM dead_letters");
    push_selection(&mut qb, sel);
    condition(&mut qb);
    qb
}

/// `UPDATE dead_letters SET <set>` over the selection under `condition`, `RETURNING id`.
pub(super) fn update_returning_ids<'a, DB: Dialect>(
    set: &str,
    sel: &'a Selection,
    condition: impl FnOnce(&mut QueryBuilder<'a, DB>),
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(format!("UPDATE dead_letters SET {set}"));
    push_selection(&mut qb, sel);
    condition(&mut qb);
    qb.push(" RETURNING id");
    qb
}

/// One history event per dead letter of `ids`; `detail` pushes an SQL text expression over
/// the dead letter's columns (binding any user text), to which the bound `suffix` is appended.
#[allow(clippy::too_many_arguments)]
pub(crate) fn insert_events_for_ids<'a, DB: Dialect>(
    ids: &[i64],
    at_ms: i64,
    kind: &'a str,
    actor: &'a str,
    detail: impl FnOnce(&mut QueryBuilder<'a, DB>),
    suffix: String,
    job_id: Option<&'a str>,
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(
        "INSERT INTO dead_letter_events (dead_letter_id, at_ms, kind, actor, detail, job_id) \
         SELECT id, ",
    );
    DB::bind(&mut qb, Val::I64(Some(at_ms)));
    qb.push(", ");
    DB::bind(&mut qb, Val::Text(Some(kind)));
    qb.push(", ");
    DB::bind(&mut qb, Val::Text(Some(actor)));
    qb.push(", ");
    detail(&mut qb);
    qb.push(" || ");
    DB::bind(&mut qb, Val::OwnedText(Some(suffix)));
    qb.push(", ");
    DB::bind(&mut qb, Val::Text(job_id));
    qb.push(" FROM dead_letters WHERE id IN ");
    DB::push_json_ids(&mut qb, ids_json(ids));
    qb
}

/// `; reason: …` for an event's detail, or nothing.
pub(super) fn reason_suffix(reason: Option<&str>) -> String {
    reason.map(|r| format!("; reason: {r}")).unwrap_or_default()
}

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

/// One outbox row per dead letter of `ids`, each with a fresh UUID v4 idempotency key, in id
/// order (so a replay publishes in ingest order), pinned to the dead letter's latest edited
/// version (`versions.rs`; none = the original), with its per-key order group and place
/// from `places` (`order.rs`; empty: none, a job without per-key order).
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
        qb.push(", NULL, NULL FROM dead_letters");
    } else {
        qb.push(", p.column2, p.column3 FROM dead_letters LEFT JOIN ");
        DB::push_columns(
            &mut qb,
            vec![
                Column::I64(places.iter().map(|p| p.0).collect()),
                Column::I64(places.iter().map(|p| p.1).collect()),
                Column::I64(places.iter().map(|p| p.2).collect()),
            ],
        );
        qb.push(" AS p ON p.column1 = dead_letters.id");
    }
    qb.push(" WHERE dead_letters.id IN ");
    DB::push_json_ids(&mut qb, ids_json(ids));
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
        $crate::store::actions::insert_job::<DB>(&$job)
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
            $crate::store::actions::insert_outbox::<DB>(
                &$job.id,
                &ids,
                $target,
                $now,
                &places.rows,
            )
            .build()
            .persistent(false)
            .execute(&mut *$tx)
            .await
            .map_err($crate::store::dialect::store_error)?;
            if let Some(mut qb) = $crate::store::order::hold_later::<DB>(&$job.id, &places) {
                qb.build()
                    .persistent(false)
                    .execute(&mut *$tx)
                    .await
                    .map_err($crate::store::dialect::store_error)?;
            }
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
                $crate::store::actions::replay_detail(base.detail.clone(), Some(&$job.options)),
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
    /// long), `Unavailable`, `Database`. On error nothing is changed.
    pub async fn request_replay(
        &self,
        actor: &Actor,
        req: &ReplayRequest,
    ) -> Result<ReplayJob, StoreError> {
        self.replay_as(actor, req, None).await
    }

    /// [`Store::request_replay`], carrying out an approved request when `approval` is given
    /// (`approvals.rs`): its first transaction claims the request, a filter is bounded by the
    /// request's `max_id`, and the audit row names the approver.
    pub(super) async fn replay_as(
        &self,
        actor: &Actor,
        req: &ReplayRequest,
        approval: Option<&ApprovalLink>,
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
        let mut job = new_replay_job(
            actor,
            req,
            target.clone(),
            reason.clone(),
            now,
            selection_json,
        );
        if let Selection::Filter(filter) = &req.selection {
            // Over a filter: in chunks (`bulk.rs`), the audit row with the last one.
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
            let bulk = self.run_bulk(bulk).await?;
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
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            if let Some(link) = approval {
                let claimed: Option<i64> = claim_query::<DB>(link, Some(job.id.as_str()), now)
                    .build_query_scalar()
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_error)?;
                if claimed.is_none() {
                    return Err(link.lost());
                }
                super::audit::insert_audit::<DB>(&link.audit(Some(job.id.as_str())), now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            replay_ids_in_tx!(tx, job, actor, sel, target, reason, approval, now);
            tx.commit().await.map_err(store_error)?;
            Ok::<(), StoreError>(())
        })?;
        tracing::info!(
            job = %job.id,
            actor = %job.created_by,
            queued = job.total,
            skipped = job.skipped,
            "replay requested"
        );
        Ok(job)
    }

    /// How many dead letters [`Store::delete`] of `selection` would delete now.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn delete_dry_run(&self, selection: &Selection) -> Result<i64, StoreError> {
        on_pool!(self, |pool, DB| {
            count_query::<DB>(selection, push_deletable)
                .build_query_scalar::<i64>()
                .fetch_one(pool)
                .await
        })
        .map_err(store_error)
    }

    /// How many dead letters [`Store::restore`] of `selection` would restore now.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn restore_dry_run(&self, selection: &Selection) -> Result<i64, StoreError> {
        on_pool!(self, |pool, DB| {
            count_query::<DB>(selection, push_restorable)
                .build_query_scalar::<i64>()
                .fetch_one(pool)
                .await
        })
        .map_err(store_error)
    }

    /// Soft-deletes the selected dead letters that are neither `deleted` nor `replay_pending`,
    /// in ONE transaction with a `deleted` history event each and one audit row (`delete`).
    /// They leave the default list, stay under `status=deleted`, and can be restored.
    /// Returns how many were deleted (the audit row's count).
    ///
    /// Errors: `Invalid` (reason too long), `Unavailable`, `Database`.
    pub async fn delete(
        &self,
        actor: &Actor,
        selection: &Selection,
        reason: Option<&str>,
    ) -> Result<u64, StoreError> {
        self.set_status(actor, selection, reason, StatusAction::Delete, None)
            .await
    }

    /// Restores the selected `deleted` dead letters to the status they had before the delete,
    /// in ONE transaction with a `restored` history event each and one audit row (`restore`).
    /// Returns how many were restored.
    ///
    /// Errors: `Invalid` (reason too long), `Unavailable`, `Database`.
    pub async fn restore(
        &self,
        actor: &Actor,
        selection: &Selection,
        reason: Option<&str>,
    ) -> Result<u64, StoreError> {
        self.set_status(actor, selection, reason, StatusAction::Restore, None)
            .await
    }

    /// [`Store::delete`] (`delete` true) or [`Store::restore`] carrying out an approved
    /// request (`approvals.rs`; see [`Store::replay_as`]).
    pub(super) async fn change_status_as(
        &self,
        actor: &Actor,
        selection: &Selection,
        reason: Option<&str>,
        delete: bool,
        approval: Option<&ApprovalLink>,
    ) -> Result<u64, StoreError> {
        let action = if delete {
            StatusAction::Delete
        } else {
            StatusAction::Restore
        };
        self.set_status(actor, selection, reason, action, approval)
            .await
    }

    async fn set_status(
        &self,
        actor: &Actor,
        selection: &Selection,
        reason: Option<&str>,
        action: StatusAction,
        approval: Option<&ApprovalLink>,
    ) -> Result<u64, StoreError> {
        let reason = check_reason(reason)?;
        // Held to the actor's DLQ-topic scope (`scope.rs`) before anything is read.
        let selection = &self.scope_selection(actor, selection).await?;
        let now = now_ms();
        let user = clean_text(&actor.user);
        if let Selection::Filter(filter) = selection {
            // Over a filter: in chunks (`bulk.rs`), the audit row with the last one.
            let kind = match action {
                StatusAction::Delete => BulkKind::Delete,
                StatusAction::Restore => BulkKind::Restore,
            };
            let max_id = match approval.and_then(|a| a.max_id) {
                Some(m) => m,
                None => self.max_dead_letter_id().await?,
            };
            let mut bulk = Bulk::new(kind, actor, filter, reason, None, max_id);
            bulk.approval = approval.cloned();
            let bulk = self.run_bulk(bulk).await?;
            tracing::info!(
                actor = %user,
                action = action.name(),
                count = bulk.done,
                chunks = bulk.chunks,
                "dead letters changed"
            );
            return Ok(u64::try_from(bulk.done).unwrap_or(0));
        }
        let suffix = reason_suffix(reason.as_deref());
        let (set, kind, detail_sql) = match action {
            StatusAction::Delete => (
                "status_before = status, status = 'deleted'",
                "deleted",
                "'was ' || COALESCE(status_before, 'new')",
            ),
            StatusAction::Restore => (
                "status = COALESCE(status_before, 'new'), status_before = NULL",
                "restored",
                "'back to ' || status",
            ),
        };
        let n = on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            if let Some(link) = approval {
                let claimed: Option<i64> = claim_query::<DB>(link, None, now)
                    .build_query_scalar()
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_error)?;
                if claimed.is_none() {
                    return Err(link.lost());
                }
                super::audit::insert_audit::<DB>(&link.audit(None), now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            let mut ids: Vec<i64> = update_returning_ids::<DB>(set, selection, |qb| match action {
                StatusAction::Delete => push_deletable(qb),
                StatusAction::Restore => push_restorable(qb),
            })
            .build_query_scalar()
            .fetch_all(&mut *tx)
            .await
            .map_err(store_error)?;
            ids.sort_unstable();
            if !ids.is_empty() {
                insert_events_for_ids::<DB>(
                    &ids,
                    now,
                    kind,
                    &user,
                    |qb| {
                        qb.push(detail_sql);
                    },
                    suffix,
                    None,
                )
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            }
            let audit = action_audit(
                actor,
                action.name(),
                selection,
                ids.len() as i64,
                reason.as_deref(),
                "ok".to_string(),
            );
            let audit = NewAuditEntry {
                detail: approval_detail(audit.detail.clone(), approval),
                ..audit
            };
            super::audit::insert_audit::<DB>(&audit, now)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<u64, StoreError>(ids.len() as u64)
        })?;
        tracing::info!(actor = %user, action = action.name(), count = n, "dead letters changed");
        Ok(n)
    }

    /// Cancels a preparing, running, waiting or paused replay job, in ONE transaction: its
    /// `pending` outbox rows
    /// become `cancelled`, their dead letters go back to the status they had before the
    /// request (a `replay_cancelled` history event each), the job becomes `cancelled` with
    /// its `cancelled` count, and one audit row (`cancel_job`) is written. Rows a relay is
    /// publishing at this moment finish normally and count as published (or failed). A job
    /// still `preparing` (its bulk action queueing rows over a filter) gets no more rows: the
    /// action's next chunk sees the cancel and ends with the action's audit row (`bulk.rs`).
    ///
    /// Errors: `NotFound` (no such job), `Conflict` (already finished or cancelled),
    /// `Unavailable`, `Database`.
    pub async fn cancel_job(&self, actor: &Actor, job_id: &str) -> Result<ReplayJob, StoreError> {
        let now = now_ms();
        let user = clean_text(&actor.user);
        let n = on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            // The status guard makes a second, concurrent cancel a Conflict (PostgreSQL
            // re-checks it after waiting for the first one's row lock).
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE replay_jobs SET status = 'cancelled', finished_at_ms = ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::Text(Some(job_id)));
            qb.push(" AND status IN ('preparing', 'running', 'waiting', 'paused') RETURNING id");
            let hit: Option<String> = qb
                .build_query_scalar()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
            if hit.is_none() {
                let status: Option<String> = super::job_control::job_status_query::<DB>(job_id)
                    .build_query_scalar()
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_error)?;
                return Err(super::job_control::refused_job_change(
                    job_id,
                    status,
                    |s| {
                        format!(
                            "replay job {job_id} is already {s}; only a preparing, running, \
                         waiting or paused job can be cancelled"
                        )
                    },
                ));
            }
            // Every row not yet published or failed, including those a relay has claimed:
            // a claimed row left alone would go back to `pending` when the relay lets go of it,
            // and stay there, its dead letter `replay_pending`, under a cancelled job. The
            // claim token stays, so a publish already in flight is still recorded as published
            // (`Store::mark`); nothing else the relay does touches a cancelled row.
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "UPDATE outbox SET status = 'cancelled', lease_until_ms = NULL WHERE job_id = ",
            );
            DB::bind(&mut qb, Val::Text(Some(job_id)));
            qb.push(" AND status IN ('pending', 'claimed') RETURNING dead_letter_id");
            let mut ids: Vec<i64> = qb
                .build_query_scalar()
                .fetch_all(&mut *tx)
                .await
                .map_err(store_error)?;
            ids.sort_unstable();
            if !ids.is_empty() {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "UPDATE dead_letters SET status = COALESCE(status_before, 'new'), \
                     status_before = NULL WHERE status = 'replay_pending' AND id IN ",
                );
                DB::push_json_ids(&mut qb, ids_json(&ids));
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
                insert_events_for_ids::<DB>(
                    &ids,
                    now,
                    "replay_cancelled",
                    &user,
                    |qb| {
                        qb.push("'back to ' || status");
                    },
                    String::new(),
                    Some(job_id),
                )
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            }
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE replay_jobs SET cancelled = cancelled + ");
            DB::bind(&mut qb, Val::I64(Some(ids.len() as i64)));
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::Text(Some(job_id)));
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            let audit = NewAuditEntry {
                count: ids.len() as i64,
                job_id: Some(job_id.to_string()),
                ..NewAuditEntry::by(actor, "cancel_job", "ok")
            };
            super::audit::insert_audit::<DB>(&audit, now)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<usize, StoreError>(ids.len())
        })?;
        tracing::info!(job = %job_id, actor = %user, released = n, "replay job cancelled");
        self.job(job_id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("replay job {job_id}")))
    }
}

#[derive(Debug, Clone, Copy)]
enum StatusAction {
    Delete,
    Restore,
}

impl StatusAction {
    /// The audit action name.
    fn name(self) -> &'static str {
        match self {
            StatusAction::Delete => "delete",
            StatusAction::Restore => "restore",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_filters_as_json() {
        assert_eq!(ids_json(&[]), "[]");
        assert_eq!(ids_json(&[3, 1, -2]), "[3,1,-2]");
        let f = Filter {
            fingerprint: Some("ab\"c".into()),
            status: Some(crate::model::Status::New),
            ..Filter::default()
        };
        let v: serde_json::Value = serde_json::from_str(&filter_json(&f)).unwrap();
        assert_eq!(v["fingerprint"], "ab\"c");
        assert_eq!(v["status"], "new");
        assert_eq!(filter_json(&Filter::default()), "{}");
    }

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

    #[test]
    fn dry_run_groups_add_up() {
        let d = dry_run_from(vec![
            DryRow {
                target: Some("b".into()),
                skip: 0,
                n: 2,
            },
            DryRow {
                target: Some("a".into()),
                skip: 0,
                n: 2,
            },
            DryRow {
                target: Some("c".into()),
                skip: 0,
                n: 5,
            },
            DryRow {
                target: None,
                skip: 0,
                n: 1,
            },
            DryRow {
                target: Some("a".into()),
                skip: 1,
                n: 3,
            },
            DryRow {
                target: None,
                skip: 1,
                n: 1,
            },
        ]);
        assert_eq!(d.total, 14);
        assert_eq!(
            d.per_target,
            vec![("c".into(), 5), ("a".into(), 2), ("b".into(), 2)]
        );
        assert_eq!(d.without_target, 1);
        assert_eq!(d.skipped, 4);
        assert_eq!(d.queued(), 9);
    }
}
