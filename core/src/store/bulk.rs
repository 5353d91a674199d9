//! Bulk actions over a filter — replay, delete, restore, label / unlabel "all matching"
//! (`label_bulk.rs`) — carried out in
//! chunks of short write transactions, so that one action over a million dead letters never
//! holds the write lock (SQLite's single writer, PostgreSQL's row locks) for long.
//!
//! # How
//! The action covers the dead letters that match its filter and have an id at or below the
//! highest id when it started (`max_id`): a dead letter ingested meanwhile is not swept in.
//! It walks them in id order, [`CHUNK_ROWS`] at a time: the ids of the next chunk are read
//! outside any write transaction, then ONE write transaction re-checks the filter and the
//! action's condition on exactly those ids and changes them — state, history events, (replay)
//! outbox rows — and moves the action's `cursor_id` forward in the same commit.
//!
//! # What is recorded (the invariants)
//! - **The audit row.** ONE audit row per action, as for a small action: written in the
//!   transaction of the LAST chunk, with the final count (what was actually changed) and the
//!   filter as given; its outcome says `in N chunks` and, if it was resumed, `resumed after an
//!   interruption`. An auditor sees one row per action with the number acted on.
//! - **Before that**, the action is recorded in `bulk_actions` from its first chunk on (actor,
//!   filter, reason, progress), in the same transactions as the changes, and every changed
//!   dead letter has its own history event with the actor. No change is ever committed without
//!   a record of who asked for it.
//! - **Replay publishes nothing early.** The job is created `preparing` with the first chunk;
//!   the relay works only on `running`/`waiting` jobs, and the last chunk turns the job
//!   `running` in the transaction that writes the audit row. Transactional outbox kept: state
//!   change + outbox rows in each chunk, audit row + "go" in the last.
//! - **A process that dies mid-way** leaves its action `running` in `bulk_actions`, with the
//!   cursor of the last committed chunk (visible through [`Store::bulk_actions`] and, for a
//!   replay, as a `preparing` job). [`Store::resume_bulk_actions`] (run by `serve` at start-up
//!   and then every minute) picks up any action that has made no progress for
//!   [`STALE_AFTER_MS`] and finishes it from its cursor. Nothing is done twice: the cursor
//!   moves in the same commit as the chunk it covers.

use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::QueryBuilder;

use super::actions::{
    action_audit, clean_text, dry_run_from, ids_json, insert_events_for_ids, now_ms,
    push_deletable, push_replayable, push_restorable, reason_suffix, DryRow, NOT_ACTIONABLE,
};
use super::dialect::{store_error, Dialect, Val};
use super::label_bulk::{label_change_query, label_matched_query};
use super::replay_request::{insert_job, insert_outbox};
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, JobStatus, NewAuditEntry, ReplayJob, Selection};
use crate::filter::Filter;
use crate::labels::LabelOp;

/// Dead letters per chunk: one write transaction changes at most this many. Measured in
/// `make bench` (1M rows on SQLite): see `docs/replay.md`, "Bulk actions". 500 since the
/// maintained aggregates (migration 0006): their row triggers made a 2,000-row chunk hold
/// SQLite's write lock for 1.3–1.5 s on a busy 2-core machine, long enough that the other
/// writers (ingest, the relay, a second bulk action) could wait past the 5 s busy timeout.
pub const CHUNK_ROWS: usize = 500;

/// A `running` bulk action that has not moved for this long is taken to be interrupted (its
/// process died) and is resumed, ms.
pub const STALE_AFTER_MS: i64 = 60_000;

/// The longest a chunk's write transaction has held the write lock in this process, µs
/// (from `BEGIN` returning to `COMMIT` returning).
static LONGEST_CHUNK_US: AtomicU64 = AtomicU64::new(0);

/// The longest a bulk action's chunk transaction has held the write lock in this process
/// (since start-up): the figure `make bench` reports for a 1M-row action.
pub fn longest_bulk_transaction() -> std::time::Duration {
    std::time::Duration::from_micros(LONGEST_CHUNK_US.load(Ordering::Relaxed))
}

/// Which action a bulk action is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BulkKind {
    Replay,
    Delete,
    Restore,
    /// A label added to / removed from each dead letter's own labels (`label_bulk.rs`);
    /// the label is [`Bulk::label`].
    Label(LabelOp),
}

impl BulkKind {
    /// The name in `bulk_actions.kind` and in the audit row.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BulkKind::Replay => "replay",
            BulkKind::Delete => "delete",
            BulkKind::Restore => "restore",
            BulkKind::Label(op) => op.audit_action(),
        }
    }

    fn parse(s: &str) -> Option<BulkKind> {
        [
            BulkKind::Replay,
            BulkKind::Delete,
            BulkKind::Restore,
            BulkKind::Label(LabelOp::Add),
            BulkKind::Label(LabelOp::Remove),
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

/// One bulk action, as recorded in `bulk_actions` (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BulkAction {
    pub id: i64,
    /// `replay`, `delete`, `restore`, `label_add` or `label_remove`.
    pub kind: String,
    /// `running` (in progress, or interrupted and waiting to be resumed) or `done`.
    pub status: String,
    pub actor: String,
    /// The filter (its JSON form, as in a replay job's `selection`).
    pub filter: String,
    pub reason: Option<String>,
    /// For a replay: the job being filled.
    pub job_id: Option<String>,
    /// For `label_add` / `label_remove`: the label (normalised).
    pub label: Option<String>,
    /// Dead letters with an id at or below this are covered.
    pub max_id: i64,
    /// Dead letters with an id at or below this are done.
    pub cursor_id: i64,
    /// Dead letters changed so far.
    pub done: i64,
    /// Matched but left alone (replay: deleted, already pending, or without a target).
    pub skipped: i64,
    /// Write transactions committed.
    pub chunks: i64,
    /// Times it was resumed after an interruption.
    pub resumed: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub finished_at_ms: Option<i64>,
}

const BULK_COLUMNS: &str = "id, kind, status, actor, filter, reason, job_id, label, max_id, \
     cursor_id, done, skipped, chunks, resumed, created_at_ms, updated_at_ms, finished_at_ms";

#[derive(Debug, sqlx::FromRow)]
struct BulkRow {
    id: i64,
    kind: String,
    status: String,
    actor: String,
    filter: String,
    reason: Option<String>,
    job_id: Option<String>,
    label: Option<String>,
    max_id: i64,
    cursor_id: i64,
    done: i64,
    skipped: i64,
    chunks: i64,
    resumed: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
    finished_at_ms: Option<i64>,
}

impl From<BulkRow> for BulkAction {
    fn from(r: BulkRow) -> BulkAction {
        BulkAction {
            id: r.id,
            kind: r.kind,
            status: r.status,
            actor: r.actor,
            filter: r.filter,
            reason: r.reason,
            job_id: r.job_id,
            label: r.label,
            max_id: r.max_id,
            cursor_id: r.cursor_id,
            done: r.done,
            skipped: r.skipped,
            chunks: r.chunks,
            resumed: r.resumed,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            finished_at_ms: r.finished_at_ms,
        }
    }
}

/// What a resumed action needs beyond its row.
#[derive(Debug, sqlx::FromRow)]
struct ResumeRow {
    id: i64,
    kind: String,
    actor_json: String,
    reason: Option<String>,
    job_id: Option<String>,
    label: Option<String>,
    max_id: i64,
    cursor_id: i64,
    done: i64,
    skipped: i64,
    skipped_without_target: i64,
    chunks: i64,
    filter: String,
}

/// A bulk action in progress, in memory.
#[derive(Debug, Clone)]
pub(crate) struct Bulk {
    /// `None` until the first chunk that is not also the last writes the row.
    pub(crate) id: Option<i64>,
    pub(crate) kind: BulkKind,
    pub(crate) actor: Actor,
    pub(crate) filter: Filter,
    pub(crate) reason: Option<String>,
    /// Replay only: the job (created `preparing` with the first chunk).
    pub(crate) job: Option<ReplayJob>,
    /// Label only: the label added or removed (normalised).
    pub(crate) label: Option<String>,
    pub(crate) max_id: i64,
    pub(crate) cursor: i64,
    pub(crate) done: i64,
    pub(crate) skipped: i64,
    pub(crate) skipped_without_target: i64,
    pub(crate) chunks: i64,
    pub(crate) resumed: bool,
    /// Replay only: its job was cancelled while it was `preparing`; the chunk that saw it
    /// queued nothing and ended the action.
    pub(crate) cancelled: bool,
    /// Carrying out an approved request (`approvals.rs`): the first chunk claims it, the
    /// audit row names the approver. `None` for a direct action and after a resume (the
    /// claim committed with the first chunk; the approver's own audit row is there too).
    pub(crate) approval: Option<super::approvals::ApprovalLink>,
}

impl Bulk {
    /// A new action over `filter`, covering ids up to `max_id`.
    pub(crate) fn new(
        kind: BulkKind,
        actor: &Actor,
        filter: &Filter,
        reason: Option<String>,
        job: Option<ReplayJob>,
        max_id: i64,
    ) -> Bulk {
        Bulk {
            id: None,
            kind,
            actor: actor.clone(),
            filter: filter.clone(),
            reason,
            job,
            label: None,
            max_id,
            cursor: 0,
            done: 0,
            skipped: 0,
            skipped_without_target: 0,
            chunks: 0,
            resumed: false,
            cancelled: false,
            approval: None,
        }
    }

    fn selection(&self) -> Selection {
        Selection::Filter(self.filter.clone())
    }

    fn outcome(&self) -> String {
        let how = match (self.chunks + 1, self.resumed) {
            (1, false) => String::new(),
            (n, false) => format!(" in {n} chunks"),
            (n, true) => format!(" in {n} chunks, resumed after an interruption"),
        };
        match self.kind {
            BulkKind::Replay if self.cancelled => format!(
                "cancelled while preparing: {} queued before the cancel (released by it), {} \
                 skipped ({} without a target topic){how}",
                self.done, self.skipped, self.skipped_without_target
            ),
            BulkKind::Replay => format!(
                "ok: {} queued, {} skipped ({} without a target topic){how}",
                self.done, self.skipped, self.skipped_without_target
            ),
            BulkKind::Label(_) => {
                format!("ok: {} changed, {} skipped{how}", self.done, self.skipped)
            }
            _ if how.is_empty() => "ok".to_string(),
            _ => format!("ok{how}"),
        }
    }
}

/// Appends ` AND id IN (<ids>)`.
fn push_ids<DB: Dialect>(qb: &mut QueryBuilder<'_, DB>, ids: &[i64]) {
    qb.push(" AND id IN ");
    DB::push_json_ids(qb, ids_json(ids));
}

impl Store {
    /// The highest dead letter id now (0 when empty): a bulk action covers up to it.
    pub(crate) async fn max_dead_letter_id(&self) -> Result<i64, StoreError> {
        on_pool!(self, |pool, _DB| {
            sqlx::query_scalar::<_, i64>("SELECT COALESCE(MAX(id), 0) FROM dead_letters")
                .fetch_one(pool)
                .await
        })
        .map_err(store_error)
    }

    /// Runs `bulk` to the end, chunk by chunk, in a task of its own: a caller that gives up
    /// (an HTTP request that times out) does not stop it half-way. Returns it as finished.
    ///
    /// Errors: those of a chunk (`Unavailable`, `Database`); the action then stays `running`
    /// and is resumed by [`Store::resume_bulk_actions`].
    pub(crate) async fn run_bulk(&self, bulk: Bulk) -> Result<Bulk, StoreError> {
        self.run_bulk_chunks(bulk, usize::MAX).await
    }

    /// [`Store::run_bulk`] for at most `max_chunks` chunks (tests stop an action half-way
    /// with it, as a crash would).
    pub(crate) async fn run_bulk_chunks(
        &self,
        bulk: Bulk,
        max_chunks: usize,
    ) -> Result<Bulk, StoreError> {
        let store = self.clone();
        let task = tokio::spawn(async move {
            let mut bulk = bulk;
            for _ in 0..max_chunks {
                if store.bulk_step(&mut bulk).await? {
                    break;
                }
            }
            Ok::<Bulk, StoreError>(bulk)
        });
        task.await
            .map_err(|e| StoreError::Database(format!("bulk action task failed: {e}")))?
    }

    /// Reads the next chunk's ids and commits it. Returns `true` after the last chunk (or the
    /// chunk that found its replay job cancelled).
    async fn bulk_step(&self, bulk: &mut Bulk) -> Result<bool, StoreError> {
        let ids = self.next_chunk_ids(bulk).await?;
        let last = ids.len() < CHUNK_ROWS;
        self.commit_chunk(bulk, &ids, last).await?;
        Ok(last || bulk.cancelled)
    }

    /// The ids of the next chunk, read outside any write transaction: for a replay every
    /// dead letter the filter matches (so the skipped ones are counted), for a delete or a
    /// restore those the action applies to.
    async fn next_chunk_ids(&self, bulk: &Bulk) -> Result<Vec<i64>, StoreError> {
        let selection = bulk.selection();
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new("SELECT id FROM dead_letters");
            super::actions::push_selection(&mut qb, &selection);
            match bulk.kind {
                // Every match, so the ones left alone are counted as skipped.
                BulkKind::Replay | BulkKind::Label(_) => {}
                BulkKind::Delete => push_deletable(&mut qb),
                BulkKind::Restore => push_restorable(&mut qb),
            }
            qb.push(" AND id > ");
            DB::bind(&mut qb, Val::I64(Some(bulk.cursor)));
            qb.push(" AND id <= ");
            DB::bind(&mut qb, Val::I64(Some(bulk.max_id)));
            qb.push(" ORDER BY id LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(CHUNK_ROWS as i64)));
            qb.build_query_scalar::<i64>().fetch_all(pool).await
        })
        .map_err(store_error)
    }

    /// ONE write transaction: the chunk's changes, the action's progress, and — for the last
    /// chunk — the audit row (and a replay job's "go").
    async fn commit_chunk(
        &self,
        bulk: &mut Bulk,
        ids: &[i64],
        last: bool,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let selection = bulk.selection();
        let user = clean_text(&bulk.actor.user);
        let mut next = bulk.clone();
        let target = bulk.job.as_ref().and_then(|j| j.target_topic.clone());
        let target = target.as_deref();
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let locked_at = std::time::Instant::now();
            // A replay whose job was cancelled while preparing queues nothing more: this
            // chunk ends the action (its audit row says so). The job's row is locked first, so
            // a cancel committing meanwhile is seen (PostgreSQL re-reads the row after the
            // cancel's lock) and never leaves rows queued under a cancelled job.
            let cancelled = match &next.job {
                Some(job) if next.chunks > 0 || next.resumed => {
                    let mut qb: QueryBuilder<'_, DB> =
                        QueryBuilder::new("UPDATE replay_jobs SET status = status WHERE id = ");
                    DB::bind(&mut qb, Val::Text(Some(&job.id)));
                    qb.push(" RETURNING status");
                    let status: Option<String> = qb
                        .build_query_scalar()
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    status.as_deref() == Some("cancelled")
                }
                _ => false,
            };
            next.cancelled = cancelled;
            // An approved request: claimed in the first chunk's transaction (rolled back,
            // nothing done, when it was decided or expired meanwhile).
            if let (Some(link), 0, false) = (&next.approval, next.chunks, next.resumed) {
                let job_id = next.job.as_ref().map(|j| j.id.as_str());
                let claimed: Option<i64> = super::approvals::claim_query::<DB>(link, job_id, now)
                    .build_query_scalar()
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_error)?;
                if claimed.is_none() {
                    return Err(link.lost());
                }
                super::audit::insert_audit::<DB>(&link.audit(job_id), now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            let (ids, last): (&[i64], bool) = if cancelled { (&[], true) } else { (ids, last) };
            // The replay job exists from the first chunk on, `preparing`.
            if let (Some(job), 0, false) = (&next.job, next.chunks, next.resumed) {
                let job = ReplayJob {
                    status: JobStatus::Preparing,
                    ..job.clone()
                };
                insert_job::<DB>(&job)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            let changed: Vec<i64> = if ids.is_empty() {
                Vec::new()
            } else {
                match next.kind {
                    BulkKind::Replay => {
                        let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new("SELECT COALESCE(");
                        DB::bind(&mut qb, Val::Text(target));
                        qb.push(", source_topic) AS target, CASE WHEN status IN ")
                            .push(NOT_ACTIONABLE)
                            .push(" THEN 1 ELSE 0 END AS skip, COUNT(*) AS n FROM dead_letters");
                        super::actions::push_selection(&mut qb, &selection);
                        push_ids(&mut qb, ids);
                        qb.push(" GROUP BY 1, 2");
                        let dry: Vec<DryRow> = qb
                            .build_query_as()
                            .persistent(false)
                            .fetch_all(&mut *tx)
                            .await
                            .map_err(store_error)?;
                        let dry = dry_run_from(dry);
                        let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                            "UPDATE dead_letters SET status_before = status, \
                             status = 'replay_pending'",
                        );
                        super::actions::push_selection(&mut qb, &selection);
                        push_replayable(&mut qb, target);
                        push_ids(&mut qb, ids);
                        qb.push(" RETURNING id");
                        let mut queued: Vec<i64> = qb
                            .build_query_scalar()
                            .persistent(false)
                            .fetch_all(&mut *tx)
                            .await
                            .map_err(store_error)?;
                        queued.sort_unstable();
                        let skipped = (dry.total - queued.len() as i64).max(0);
                        next.skipped += skipped;
                        next.skipped_without_target += dry.without_target.min(skipped);
                        if let (Some(job), false) = (&next.job, queued.is_empty()) {
                            // Per-key order (`order.rs`): each row's key group and place,
                            // written with it; heads unheld.
                            let places = if job.options.unordered {
                                super::order::Places::default()
                            } else {
                                let keys: Vec<super::order::KeyRow> =
                                    super::order::read_keys::<DB>(&queued)
                                        .build_query_as()
                                        .persistent(false)
                                        .fetch_all(&mut *tx)
                                        .await
                                        .map_err(store_error)?;
                                super::order::places(target, &keys)
                            };
                            insert_outbox::<DB>(&job.id, &queued, target, now, &places.rows)
                                .build()
                                .persistent(false)
                                .execute(&mut *tx)
                                .await
                                .map_err(store_error)?;
                            if let Some(mut qb) = super::order::hold_later::<DB>(&job.id, &places) {
                                qb.build()
                                    .persistent(false)
                                    .execute(&mut *tx)
                                    .await
                                    .map_err(store_error)?;
                            }
                            insert_events_for_ids::<DB>(
                                &queued,
                                now,
                                "replay_requested",
                                &job.created_by,
                                |qb| {
                                    qb.push("'to ' || COALESCE(");
                                    DB::bind(qb, Val::Text(target));
                                    qb.push(", source_topic)");
                                },
                                reason_suffix(next.reason.as_deref()),
                                Some(&job.id),
                            )
                            .build()
                            .persistent(false)
                            .execute(&mut *tx)
                            .await
                            .map_err(store_error)?;
                        }
                        queued
                    }
                    BulkKind::Label(op) => {
                        let label = next.label.clone().ok_or_else(|| {
                            StoreError::Corrupt("a label bulk action without a label".into())
                        })?;
                        let ids_text = ids_json(ids);
                        let matched: i64 = label_matched_query::<DB>(&selection, ids_text.clone())
                            .build_query_scalar()
                            .persistent(false)
                            .fetch_one(&mut *tx)
                            .await
                            .map_err(store_error)?;
                        let mut changed: Vec<i64> =
                            label_change_query::<DB>(&selection, ids_text, &label, op, now, &user)
                                .build_query_scalar()
                                .persistent(false)
                                .fetch_all(&mut *tx)
                                .await
                                .map_err(store_error)?;
                        changed.sort_unstable();
                        if !changed.is_empty() {
                            insert_events_for_ids::<DB>(
                                &changed,
                                now,
                                op.event_kind(),
                                &user,
                                |qb| {
                                    DB::bind(qb, Val::OwnedText(Some(label.clone())));
                                },
                                String::new(),
                                None,
                            )
                            .build()
                            .persistent(false)
                            .execute(&mut *tx)
                            .await
                            .map_err(store_error)?;
                        }
                        next.skipped += (matched - changed.len() as i64).max(0);
                        changed
                    }
                    BulkKind::Delete | BulkKind::Restore => {
                        let (set, kind, detail_sql) = if next.kind == BulkKind::Delete {
                            (
                                "status_before = status, status = 'deleted'",
                                "deleted",
                                "'was ' || COALESCE(status_before, 'new')",
                            )
                        } else {
                            (
                                "status = COALESCE(status_before, 'new'), status_before = NULL",
                                "restored",
                                "'back to ' || status",
                            )
                        };
                        let mut qb: QueryBuilder<'_, DB> =
                            QueryBuilder::new(format!("UPDATE dead_letters SET {set}"));
                        super::actions::push_selection(&mut qb, &selection);
                        if next.kind == BulkKind::Delete {
                            push_deletable(&mut qb);
                        } else {
                            push_restorable(&mut qb);
                        }
                        push_ids(&mut qb, ids);
                        qb.push(" RETURNING id");
                        let mut changed: Vec<i64> = qb
                            .build_query_scalar()
                            .persistent(false)
                            .fetch_all(&mut *tx)
                            .await
                            .map_err(store_error)?;
                        changed.sort_unstable();
                        if !changed.is_empty() {
                            insert_events_for_ids::<DB>(
                                &changed,
                                now,
                                kind,
                                &user,
                                |qb| {
                                    qb.push(detail_sql);
                                },
                                reason_suffix(next.reason.as_deref()),
                                None,
                            )
                            .build()
                            .persistent(false)
                            .execute(&mut *tx)
                            .await
                            .map_err(store_error)?;
                        }
                        changed
                    }
                }
            };
            next.done += changed.len() as i64;
            next.cursor = if last {
                next.max_id
            } else {
                ids.last().copied().unwrap_or(next.cursor)
            };

            // The action's own row: written with the first chunk that is not the last.
            match next.id {
                None if !last => {
                    let actor_json = serde_json::to_string(&next.actor)
                        .map_err(|e| StoreError::Invalid(format!("actor: {e}")))?;
                    let filter_json = serde_json::to_string(&next.filter)
                        .map_err(|e| StoreError::Invalid(format!("filter: {e}")))?;
                    let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                        "INSERT INTO bulk_actions (kind, status, actor, actor_json, filter, \
                         reason, job_id, label, max_id, cursor_id, done, skipped, \
                         skipped_without_target, chunks, created_at_ms, updated_at_ms) VALUES (",
                    );
                    let job_id = next.job.as_ref().map(|j| j.id.clone());
                    let values = [
                        Val::Text(Some(next.kind.name())),
                        Val::Text(Some("running")),
                        Val::OwnedText(Some(user.clone())),
                        Val::OwnedText(Some(clean_text(&actor_json))),
                        Val::OwnedText(Some(clean_text(&filter_json))),
                        Val::OwnedText(next.reason.clone()),
                        Val::OwnedText(job_id),
                        Val::OwnedText(next.label.clone()),
                        Val::I64(Some(next.max_id)),
                        Val::I64(Some(next.cursor)),
                        Val::I64(Some(next.done)),
                        Val::I64(Some(next.skipped)),
                        Val::I64(Some(next.skipped_without_target)),
                        Val::I64(Some(next.chunks + 1)),
                        Val::I64(Some(now)),
                        Val::I64(Some(now)),
                    ];
                    for (i, v) in values.into_iter().enumerate() {
                        if i > 0 {
                            qb.push(", ");
                        }
                        DB::bind(&mut qb, v);
                    }
                    qb.push(") RETURNING id");
                    let id: i64 = qb
                        .build_query_scalar()
                        .fetch_one(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    next.id = Some(id);
                }
                None => {}
                Some(id) => {
                    let mut qb: QueryBuilder<'_, DB> =
                        QueryBuilder::new("UPDATE bulk_actions SET cursor_id = ");
                    DB::bind(&mut qb, Val::I64(Some(next.cursor)));
                    qb.push(", done = ");
                    DB::bind(&mut qb, Val::I64(Some(next.done)));
                    qb.push(", skipped = ");
                    DB::bind(&mut qb, Val::I64(Some(next.skipped)));
                    qb.push(", skipped_without_target = ");
                    DB::bind(&mut qb, Val::I64(Some(next.skipped_without_target)));
                    qb.push(", chunks = chunks + 1, updated_at_ms = ");
                    DB::bind(&mut qb, Val::I64(Some(now)));
                    if last {
                        qb.push(", status = 'done', finished_at_ms = ");
                        DB::bind(&mut qb, Val::I64(Some(now)));
                    }
                    qb.push(" WHERE id = ");
                    DB::bind(&mut qb, Val::I64(Some(id)));
                    qb.build().execute(&mut *tx).await.map_err(store_error)?;
                }
            }

            if let Some(job) = &mut next.job {
                job.total = next.done;
                job.skipped = next.skipped;
                job.skipped_without_target = next.skipped_without_target;
                if last && cancelled {
                    job.status = JobStatus::Cancelled;
                } else if last {
                    job.status = if job.total == 0 {
                        job.finished_at_ms = Some(now);
                        JobStatus::Finished
                    } else {
                        JobStatus::Running
                    };
                } else {
                    // Still queueing: the relay must not publish (nor mark) any of its rows
                    // before the last chunk (`request_replay` hands over a `running` job).
                    job.status = JobStatus::Preparing;
                }
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("UPDATE replay_jobs SET total = ");
                DB::bind(&mut qb, Val::I64(Some(job.total)));
                qb.push(", skipped = ");
                DB::bind(&mut qb, Val::I64(Some(job.skipped)));
                qb.push(", skipped_without_target = ");
                DB::bind(&mut qb, Val::I64(Some(job.skipped_without_target)));
                // A pause (or a cancel) while preparing is a person's: kept as it is.
                qb.push(", status = CASE WHEN status IN ('paused', 'cancelled') THEN status ELSE ");
                DB::bind(&mut qb, Val::Text(Some(job.status.as_str())));
                qb.push(" END, finished_at_ms = CASE WHEN status IN ('paused', 'cancelled') THEN finished_at_ms ELSE ");
                DB::bind(&mut qb, Val::I64(job.finished_at_ms));
                qb.push(" END WHERE id = ");
                DB::bind(&mut qb, Val::Text(Some(&job.id)));
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
            }

            if last {
                // A label change names its label and what it left alone (`docs/triage.md`).
                // An "all" action says so (`confirm_all.rs`), beside the label.
                let detail = next.label.as_ref().map(|label| {
                    let mut d = serde_json::json!({ "label": label, "skipped": next.skipped });
                    if selection.is_all() {
                        d["all"] = serde_json::Value::Bool(true);
                    }
                    d.to_string()
                });
                let base = action_audit(
                    &next.actor,
                    next.kind.name(),
                    &selection,
                    next.done,
                    next.reason.as_deref(),
                    next.outcome(),
                );
                let audit = NewAuditEntry {
                    job_id: next.job.as_ref().map(|j| j.id.clone()),
                    detail: super::approvals::approval_detail(
                        super::replay_request::replay_detail(
                            detail.or(base.detail.clone()),
                            next.job.as_ref().map(|j| &j.options),
                        ),
                        next.approval.as_ref(),
                    ),
                    ..base
                };
                super::audit::insert_audit::<DB>(&audit, now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            tx.commit().await.map_err(store_error)?;
            let held = u64::try_from(locked_at.elapsed().as_micros()).unwrap_or(u64::MAX);
            LONGEST_CHUNK_US.fetch_max(held, Ordering::Relaxed);
            Ok::<(), StoreError>(())
        })?;
        next.chunks += 1;
        *bulk = next;
        Ok(())
    }

    /// Bulk actions, newest first, at most `limit` (capped at 500): the running ones show
    /// what a half-done action has done so far.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn bulk_actions(&self, limit: u32) -> Result<Vec<BulkAction>, StoreError> {
        let limit = i64::from(limit.clamp(1, 500));
        let rows: Vec<BulkRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {BULK_COLUMNS} FROM bulk_actions ORDER BY id DESC LIMIT "
            ));
            DB::bind(&mut qb, Val::I64(Some(limit)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        Ok(rows.into_iter().map(BulkAction::from).collect())
    }

    /// Finishes every `running` bulk action that has not moved for `stale_after_ms` (its
    /// process died, see the module docs), each from its cursor. Returns how many it
    /// finished. Another instance resuming the same action at the same time loses the race
    /// on the `updated_at_ms` claim and leaves it alone.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt` (a row this build cannot read).
    pub async fn resume_bulk_actions(&self, stale_after_ms: i64) -> Result<u64, StoreError> {
        let now = now_ms();
        let rows: Vec<ResumeRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT id, kind, actor_json, reason, job_id, label, max_id, cursor_id, done, \
                 skipped, skipped_without_target, chunks, filter FROM bulk_actions \
                 WHERE status = 'running' AND updated_at_ms <= ",
            );
            DB::bind(&mut qb, Val::I64(Some(now - stale_after_ms)));
            qb.push(" ORDER BY id");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let mut finished = 0;
        for r in rows {
            // Claim it: only one resumer moves `updated_at_ms` from the value it read.
            let claimed = on_write_conn!(self, |conn, DB| {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "UPDATE bulk_actions SET resumed = resumed + 1, updated_at_ms = ",
                );
                DB::bind(&mut qb, Val::I64(Some(now_ms())));
                qb.push(" WHERE status = 'running' AND id = ");
                DB::bind(&mut qb, Val::I64(Some(r.id)));
                qb.push(" AND cursor_id = ");
                DB::bind(&mut qb, Val::I64(Some(r.cursor_id)));
                qb.push(" AND updated_at_ms <= ");
                DB::bind(&mut qb, Val::I64(Some(now - stale_after_ms)));
                qb.build()
                    .execute(&mut *conn)
                    .await
                    .map(|d| d.rows_affected())
            })
            .map_err(store_error)?;
            if claimed == 0 {
                continue;
            }
            let job_id = r.job_id.clone();
            let mut bulk = resume_state(r)?;
            if bulk.kind == BulkKind::Replay {
                let id = job_id.unwrap_or_default();
                let job = self.job(&id).await?.ok_or_else(|| {
                    StoreError::Corrupt(format!("bulk action's replay job {id} is missing"))
                })?;
                bulk.job = Some(job);
            }
            tracing::warn!(
                bulk_action = bulk.id,
                kind = bulk.kind.name(),
                done = bulk.done,
                "resuming a bulk action that was interrupted"
            );
            self.run_bulk(bulk).await?;
            finished += 1;
        }
        Ok(finished)
    }
}

/// The in-memory state of an interrupted action, from its row (and its job, for a replay).
///
/// Errors: `Corrupt` for an unknown kind or an unreadable actor or filter.
fn resume_state(r: ResumeRow) -> Result<Bulk, StoreError> {
    let kind = BulkKind::parse(&r.kind)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown bulk action kind `{}`", r.kind)))?;
    let actor: Actor = serde_json::from_str(&r.actor_json)
        .map_err(|e| StoreError::Corrupt(format!("bulk action {}: actor: {e}", r.id)))?;
    let filter: Filter = serde_json::from_str(&r.filter)
        .map_err(|e| StoreError::Corrupt(format!("bulk action {}: filter: {e}", r.id)))?;
    Ok(Bulk {
        id: Some(r.id),
        kind,
        actor,
        filter,
        reason: r.reason,
        job: None,
        label: r.label,
        max_id: r.max_id,
        cursor: r.cursor_id,
        done: r.done,
        skipped: r.skipped,
        skipped_without_target: r.skipped_without_target,
        chunks: r.chunks,
        resumed: true,
        cancelled: false,
        approval: None,
    })
}

#[cfg(test)]
#[path = "bulk_job_tests.rs"]
mod job_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::ReplayRequest;
    use crate::model::{Convention, NewDeadLetter, Normalized, RawRecord, Status};

    fn dead_letter(offset: i64) -> NewDeadLetter {
        NewDeadLetter {
            record: RawRecord {
                dlq_topic: "orders.DLT".into(),
                dlq_partition: 0,
                dlq_offset: offset,
                timestamp_ms: Some(1_000),
                key: None,
                value: Some(b"v".to_vec()),
                headers: vec![],
            },
            convention: Convention::Unknown,
            fingerprint: "f".into(),
            normalized: Normalized {
                source_topic: Some("orders".into()),
                ..Normalized::default()
            },
            dead_lettered_at_ms: 1_000,
            ingested_at_ms: 1_000,
        }
    }

    pub(super) fn eve() -> Actor {
        Actor {
            client_ip: Some("192.0.2.7".into()),
            ..Actor::operator("eve")
        }
    }

    impl Store {
        pub(super) async fn audit_count_for_test(&self, action: &str) -> usize {
            let q = crate::actions::AuditQuery {
                actor: None,
                action: Some(action.to_string()),
                from_ms: None,
                to_ms: None,
                limit: 100,
                before_id: None,
            };
            self.audit(&q).await.unwrap().items.len()
        }
    }

    /// A store in a temporary file with `n` dead letters (removed when the directory is
    /// dropped).
    pub(super) async fn store_with(n: i64) -> (Store, tempfile::TempDir) {
        let (store, dir) = crate::store::test_file::sqlite_store("t.db").await;
        let rows: Vec<NewDeadLetter> = (0..n).map(dead_letter).collect();
        for chunk in rows.chunks(1000) {
            store.insert_batch(chunk).await.unwrap();
        }
        (store, dir)
    }

    /// A delete over a filter that is interrupted after 2 of its 3 chunks (as a crash would
    /// leave it): visible as `running` with its progress, and no audit row yet; resumed, it
    /// finishes the rest once, and ONE audit row carries the final count.
    #[tokio::test]
    async fn an_interrupted_bulk_delete_is_visible_and_resumed_with_one_audit_row() {
        let n = (2 * CHUNK_ROWS + 500) as i64;
        let (store, _dir) = store_with(n).await;
        let max_id = store.max_dead_letter_id().await.unwrap();
        let bulk = Bulk::new(
            BulkKind::Delete,
            &eve(),
            &Filter::default(),
            Some("cleanup".into()),
            None,
            max_id,
        );
        let half = store.run_bulk_chunks(bulk, 2).await.unwrap();
        assert_eq!(half.done, 2 * CHUNK_ROWS as i64);
        let listed = store.bulk_actions(10).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].status.as_str(), listed[0].done, listed[0].chunks),
            ("running", 2 * CHUNK_ROWS as i64, 2)
        );
        assert_eq!(store.audit_count_for_test("delete").await, 0);

        // Not stale yet: left alone. Stale: resumed and finished.
        assert_eq!(store.resume_bulk_actions(STALE_AFTER_MS).await.unwrap(), 0);
        assert_eq!(store.resume_bulk_actions(0).await.unwrap(), 1);
        let listed = store.bulk_actions(10).await.unwrap();
        assert_eq!((listed[0].status.as_str(), listed[0].done), ("done", n));
        assert_eq!(listed[0].resumed, 1);
        let deleted = Filter {
            status: Some(Status::Deleted),
            ..Filter::default()
        };
        assert_eq!(store.count(&deleted).await.unwrap(), n);
        assert_eq!(store.audit_count_for_test("delete").await, 1);
        assert!(longest_bulk_transaction() > std::time::Duration::ZERO);
    }

    /// A replay over a filter interrupted half-way publishes nothing (its job is
    /// `preparing`); resumed, the job becomes `running` with every row queued once.
    #[tokio::test]
    async fn an_interrupted_bulk_replay_stays_preparing_until_resumed() {
        let n = (CHUNK_ROWS + 10) as i64;
        let (store, _dir) = store_with(n).await;
        let job = ReplayJob {
            id: uuid::Uuid::new_v4().to_string(),
            status: JobStatus::Preparing,
            created_by: "eve".into(),
            created_at_ms: 1,
            started_at_ms: None,
            finished_at_ms: None,
            target_topic: Some("orders".into()),
            rate_per_sec: None,
            reason: None,
            total: 0,
            published: 0,
            failed: 0,
            cancelled: 0,
            skipped: 0,
            skipped_without_target: 0,
            last_error: None,
            selection: serde_json::to_string(
                &ReplayRequest {
                    selection: Selection::Filter(Filter::default()),
                    target_topic: None,
                    rate_per_sec: None,
                    reason: None,
                    options: Default::default(),
                }
                .selection,
            )
            .unwrap(),
            options: Default::default(),
            transform: Default::default(),
            refailed: 0,
            canary: None,
            lag: Default::default(),
        };
        let max_id = store.max_dead_letter_id().await.unwrap();
        let bulk = Bulk::new(
            BulkKind::Replay,
            &eve(),
            &Filter::default(),
            None,
            Some(job.clone()),
            max_id,
        );
        store.run_bulk_chunks(bulk, 1).await.unwrap();
        let j = store.job(&job.id).await.unwrap().unwrap();
        assert_eq!(
            (j.status, j.total),
            (JobStatus::Preparing, CHUNK_ROWS as i64)
        );
        assert!(
            store.active_jobs().await.unwrap().is_empty(),
            "nothing to publish yet"
        );
        assert_eq!(store.resume_bulk_actions(0).await.unwrap(), 1);
        let j = store.job(&job.id).await.unwrap().unwrap();
        assert_eq!((j.status, j.total, j.skipped), (JobStatus::Running, n, 0));
        assert_eq!(store.audit_count_for_test("replay").await, 1);
    }
}
