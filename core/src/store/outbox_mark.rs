//! The relay's marks (`outbox.rs` has the claims): what became of each publish of one claim,
//! recorded in ONE transaction, and the job's `finished` when nothing is left. Only rows still
//! held under the claim's token are touched and counted (see `outbox.rs`, "Claims and
//! leases").

use sqlx::QueryBuilder;

use super::actions::{clean_text, ids_json, now_ms};
use super::dialect::{store_error, Dialect, Val};
use super::job_tallies;
use super::{Pool, Store, StoreError};

/// A delivery report that came back: where the record landed.
#[derive(Debug, Clone)]
pub(crate) struct Published {
    pub(crate) outbox_id: i64,
    pub(crate) partition: i32,
    pub(crate) offset: i64,
}

/// A publish that failed for this record: try again at `next_attempt_at_ms`.
#[derive(Debug, Clone)]
pub(crate) struct Retry {
    pub(crate) outbox_id: i64,
    pub(crate) next_attempt_at_ms: i64,
    pub(crate) error: String,
}

/// A publish that failed for the last time (`max_attempts` reached).
#[derive(Debug, Clone)]
pub(crate) struct Failed {
    pub(crate) outbox_id: i64,
    pub(crate) dead_letter_id: i64,
    pub(crate) error: String,
}

/// Everything that became of one claim, recorded in ONE transaction by [`Store::mark`].
#[derive(Debug, Clone, Default)]
pub(crate) struct MarkBatch {
    pub(crate) job_id: String,
    pub(crate) claim_token: String,
    /// The job's requester (events' actor).
    pub(crate) actor: String,
    pub(crate) published: Vec<Published>,
    pub(crate) retry: Vec<Retry>,
    pub(crate) failed: Vec<Failed>,
    /// Rows handed back without an attempt counted (Kafka unreachable, or not sent before
    /// shutdown), due again at `release_at_ms`.
    pub(crate) released: Vec<i64>,
    pub(crate) release_at_ms: i64,
    /// Why they were released (Kafka unreachable), the job's `last_error`.
    pub(crate) release_error: Option<String>,
    /// The batch met an outage (counted or not): the job is `waiting`, and its outage clock
    /// (`waiting_since_ms`) starts if it was not running already.
    pub(crate) outage: bool,
    /// Probably the job's last batch (its claim came back short): check whether the job is
    /// done. (Checking after every batch would cost more than the batch on a big job.)
    pub(crate) last: bool,
    /// What the job's transform did (skipped rows, counters); empty for a plain replay.
    pub(crate) script: super::transform_marks::ScriptMarks,
}

/// What [`Store::mark`] changed (rows whose claim had been lost are not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MarkSummary {
    pub(crate) published: u64,
    pub(crate) retried: u64,
    pub(crate) failed: u64,
    pub(crate) released: u64,
    /// The job has no pending or claimed rows left and is now `finished`.
    pub(crate) finished: bool,
}

#[derive(Debug, sqlx::FromRow)]
struct MarkedRow {
    id: i64,
    dead_letter_id: i64,
}

/// `UPDATE outbox<hint> SET <set>` for a mark, which finds its rows by primary key whatever
/// the statistics say. SQLite: `NOT INDEXED` (rowid lookups stay allowed): under an empty
/// outbox's statistics it would otherwise read the partial index of claimed rows
/// (`outbox_leases`, migration 0034) once per marked row (docs/bench.md "2026-12-06 (7)").
/// PostgreSQL plans the claimed rows' index or the primary key by its estimates, both a few
/// rows (claimed rows are only the relay's in-flight claims).
fn update_outbox<'a, DB: Dialect>(set: &str) -> QueryBuilder<'a, DB> {
    let hint = if DB::INDEXED_BY { " NOT INDEXED" } else { "" };
    QueryBuilder::new(format!("UPDATE outbox{hint} SET {set}"))
}

/// Appends `WHERE id IN (ids) AND claim_token = token AND status = 'claimed'`.
fn push_held<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, ids: &[i64], token: &'a str) {
    qb.push(" WHERE id IN ");
    DB::push_json_ids(qb, ids_json(ids));
    qb.push(" AND claim_token = ");
    DB::bind(qb, Val::Text(Some(token)));
    qb.push(" AND status = 'claimed'");
}

/// `UPDATE outbox ... FROM <(id, partition, offset) rows>`: one statement marks a chunk
/// published, each row with its own position (see [`Dialect::push_triples`]), among the rows
/// this claim holds that are in `status`: `claimed`, or `cancelled` for a row whose job was
/// cancelled while its publish was in flight (what happened is recorded: it was published).
fn mark_published_chunk<'a, DB: Dialect>(
    chunk: &[Published],
    token: &'a str,
    now: i64,
    status: &'static str,
) -> QueryBuilder<'a, DB> {
    let mut qb = update_outbox::<DB>(
        "status = 'published', published_partition = v.column2, \
         published_offset = v.column3, published_at_ms = ",
    );
    DB::bind(&mut qb, Val::I64(Some(now)));
    qb.push(", lease_until_ms = NULL, last_error = NULL FROM ");
    let rows: Vec<(i64, i32, i64)> = chunk
        .iter()
        .map(|p| (p.outbox_id, p.partition, p.offset))
        .collect();
    DB::push_triples(&mut qb, &rows);
    qb.push(" AS v WHERE outbox.id = v.column1 AND outbox.claim_token = ");
    DB::bind(&mut qb, Val::Text(Some(token)));
    qb.push(" AND outbox.status = '")
        .push(status)
        .push("' RETURNING id, dead_letter_id");
    qb
}

/// Multi-row `INSERT` of history events (dead letter id, kind, detail) at `now`.
fn insert_events<'a, DB: Dialect>(
    events: &'a [(i64, &'static str, String)],
    actor: &'a str,
    job_id: &'a str,
    now: i64,
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(
        "INSERT INTO dead_letter_events (dead_letter_id, at_ms, kind, actor, detail, job_id) \
         VALUES ",
    );
    for (i, (id, kind, detail)) in events.iter().enumerate() {
        if i > 0 {
            qb.push(", ");
        }
        qb.push("(");
        DB::bind(&mut qb, Val::I64(Some(*id)));
        qb.push(", ");
        DB::bind(&mut qb, Val::I64(Some(now)));
        qb.push(", ");
        DB::bind(&mut qb, Val::Text(Some(kind)));
        qb.push(", ");
        DB::bind(&mut qb, Val::Text(Some(actor)));
        qb.push(", ");
        DB::bind(&mut qb, Val::Text(Some(detail.as_str())));
        qb.push(", ");
        DB::bind(&mut qb, Val::Text(Some(job_id)));
        qb.push(")");
    }
    qb
}

/// `UPDATE replay_jobs SET status = 'finished'` when no row of the job is pending or claimed
/// and no bulk action is still queueing rows for it (a job published while queueing,
/// `ReplayOptions::publishes_while_queueing`, may have none left between two chunks; its
/// last chunk finishes it when the relay was faster).
pub(super) fn finish_if_done<'a, DB: Dialect>(job_id: &'a str, now: i64) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new("UPDATE replay_jobs SET status = 'finished', finished_at_ms = ");
    DB::bind(&mut qb, Val::I64(Some(now)));
    qb.push(" WHERE id = ");
    DB::bind(&mut qb, Val::Text(Some(job_id)));
    qb.push(
        " AND status IN ('running', 'waiting') AND NOT EXISTS (SELECT 1 FROM outbox \
         WHERE outbox.job_id = replay_jobs.id AND outbox.status IN ('pending', 'claimed')) \
         AND NOT EXISTS (SELECT 1 FROM bulk_actions b WHERE b.job_id = replay_jobs.id \
         AND b.status = 'running')",
    );
    qb.push(super::canary::FINISH_GUARD);
    qb
}

/// Inside the write transaction `$tx` (of the `DB` in scope): marks job `$job` `finished`
/// when it has no pending or claimed rows left ([`finish_if_done`]) and then folds its tally
/// rows into its row (`job_tallies.rs`). Evaluates to whether it finished; a `?` in it returns
/// the enclosing fn's `StoreError`.
macro_rules! finish_in_tx {
    ($tx:ident, $job:expr, $now:expr) => {{
        let done = $crate::store::outbox_mark::finish_if_done::<DB>($job, $now)
            .build()
            .execute(&mut *$tx)
            .await
            .map_err($crate::store::dialect::store_error)?;
        let finished = done.rows_affected() > 0;
        if finished {
            for mut qb in $crate::store::job_tallies::fold::<DB>($job) {
                qb.build()
                    .execute(&mut *$tx)
                    .await
                    .map_err($crate::store::dialect::store_error)?;
            }
        }
        finished
    }};
}
pub(super) use finish_in_tx;

/// Rows per statement so that `binds_per_row` binds each stay under the database's limit.
fn chunk_rows<DB: Dialect>(binds_per_row: usize) -> usize {
    ((DB::MAX_BINDS - 8) / binds_per_row).clamp(1, 5_000)
}

impl Store {
    /// Records the outcome of one claim in ONE transaction: published rows (position, dead
    /// letter `replayed` with `replay_count + 1`, a `published` event), retries (attempts + 1,
    /// next attempt), final failures (dead letter `replay_failed`, a `replay_failed` event
    /// with the error), released rows (back to `pending`, job `waiting` when it is an
    /// outage), the job's counters, and `finished` when nothing is left. Rows no longer held
    /// under the batch's claim token are left alone and not counted.
    ///
    /// Errors: `Unavailable`, `Database`. On error nothing is recorded (the rows stay claimed
    /// until their lease expires).
    pub(crate) async fn mark(&self, b: &MarkBatch) -> Result<MarkSummary, StoreError> {
        let now = now_ms();
        let token = b.claim_token.as_str();
        let job = b.job_id.as_str();
        let actor = clean_text(&b.actor);
        let mut summary = MarkSummary::default();
        let mut published_after_cancel = 0i64;
        let last_error = b
            .failed
            .last()
            .map(|f| f.error.clone())
            .or_else(|| b.retry.last().map(|r| r.error.clone()))
            .or_else(|| b.release_error.clone())
            .map(|e| clean_text(&e));
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            // The job's counters go to a tally row (`job_tallies.rs`), so most marks never
            // touch the job's row and run side by side. A mark that must write it (its
            // status, last error, or `finished`) locks it first, then its outbox rows, in the
            // order `cancel_job`, pause and the bulk actions take them: taking the outbox rows
            // first and the job's row at the end could deadlock against a cancel on
            // PostgreSQL.
            // A job's last batch may finish it, unless a bulk action still queues rows for
            // it (published while queueing): then it cannot finish, and locking its row would
            // only make this mark and the action's chunk (which locks it first) wait for each
            // other. The action's last chunk, or the relay's next pass, finishes it.
            let finishing = b.last && {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "SELECT id FROM bulk_actions WHERE status = 'running' AND job_id = ",
                );
                DB::bind(&mut qb, Val::Text(Some(job)));
                qb.build_query_scalar::<i64>()
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_error)?
                    .is_none()
            };
            let writes_job = finishing
                || b.outage
                || last_error.is_some()
                || (!b.published.is_empty()
                    && super::job_control::job_status_query::<DB>(job)
                        .build_query_scalar::<String>()
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(store_error)?
                        .as_deref()
                        == Some("waiting"));
            if writes_job {
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("UPDATE replay_jobs SET status = status WHERE id = ");
                DB::bind(&mut qb, Val::Text(Some(job)));
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
            }

            // Published: outbox rows, then their dead letters and history events, each one
            // statement for the whole batch.
            if !b.published.is_empty() {
                let mut marked: Vec<MarkedRow> = Vec::with_capacity(b.published.len());
                for chunk in b.published.chunks(chunk_rows::<DB>(3)) {
                    let rows: Vec<MarkedRow> =
                        mark_published_chunk::<DB>(chunk, token, now, "claimed")
                            .build_query_as()
                            .persistent(false)
                            .fetch_all(&mut *tx)
                            .await
                            .map_err(store_error)?;
                    let all_claimed = rows.len() == chunk.len();
                    marked.extend(rows);
                    if all_claimed {
                        continue;
                    }
                    // Rare: the job was cancelled while these were in flight.
                    let rows: Vec<MarkedRow> =
                        mark_published_chunk::<DB>(chunk, token, now, "cancelled")
                            .build_query_as()
                            .persistent(false)
                            .fetch_all(&mut *tx)
                            .await
                            .map_err(store_error)?;
                    published_after_cancel += rows.len() as i64;
                    marked.extend(rows);
                }
                if !marked.is_empty() {
                    let outbox_ids: Vec<i64> = marked.iter().map(|m| m.id).collect();
                    let dl_ids: Vec<i64> = marked.iter().map(|m| m.dead_letter_id).collect();
                    let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                        "UPDATE dead_letters SET status = 'replayed', status_before = NULL, \
                         replay_count = replay_count + 1",
                    );
                    super::actions::push_status_changed_at(&mut qb, "'replayed'", now);
                    qb.push(" WHERE id IN ");
                    DB::push_json_ids(&mut qb, ids_json(&dl_ids));
                    qb.build().execute(&mut *tx).await.map_err(store_error)?;
                    // Replay outcome: a record that already came back ends `re_failed`.
                    let came_back: Vec<i64> =
                        super::outcome::came_back_before_mark::<DB>(ids_json(&outbox_ids))
                            .build_query_scalar()
                            .persistent(false)
                            .fetch_all(&mut *tx)
                            .await
                            .map_err(store_error)?;
                    if !came_back.is_empty() {
                        super::outcome::settle_re_failed::<DB>(ids_json(&came_back))
                            .build()
                            .persistent(false)
                            .execute(&mut *tx)
                            .await
                            .map_err(store_error)?;
                    }
                    let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                        "INSERT INTO dead_letter_events \
                         (dead_letter_id, at_ms, kind, actor, detail, job_id) \
                         SELECT dead_letter_id, ",
                    );
                    DB::bind(&mut qb, Val::I64(Some(now)));
                    qb.push(", 'published', ");
                    DB::bind(&mut qb, Val::Text(Some(&actor)));
                    qb.push(
                        ", 'to ' || target_topic || ' partition ' \
                         || CAST(published_partition AS TEXT) || ' offset ' \
                         || CAST(published_offset AS TEXT), job_id FROM outbox WHERE id IN ",
                    );
                    DB::push_json_ids(&mut qb, ids_json(&outbox_ids));
                    qb.push(" ORDER BY id");
                    qb.build().execute(&mut *tx).await.map_err(store_error)?;
                    // Per-key order: the next record of each key may go now (when any
                    // record of the job still waits).
                    let held: Option<i32> = super::order::any_held::<DB>(job)
                        .build_query_scalar()
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    if held.is_some() {
                        super::order::release_next::<DB>(&outbox_ids)
                            .build()
                            .persistent(false)
                            .execute(&mut *tx)
                            .await
                            .map_err(store_error)?;
                    }
                }
                summary.published = marked.len() as u64;
            }

            // Retries: each row its own next attempt.
            for r in &b.retry {
                let mut qb = update_outbox::<DB>(
                    "status = 'pending', attempts = attempts + 1, \
                     lease_until_ms = NULL, claim_token = NULL, next_attempt_at_ms = ",
                );
                DB::bind(&mut qb, Val::I64(Some(r.next_attempt_at_ms)));
                qb.push(", last_error = ");
                DB::bind(&mut qb, Val::OwnedText(Some(clean_text(&r.error))));
                push_held(&mut qb, &[r.outbox_id], token);
                let done = qb.build().execute(&mut *tx).await.map_err(store_error)?;
                summary.retried += done.rows_affected();
            }

            // Final failures.
            let mut failed_events: Vec<(i64, &'static str, String)> = Vec::new();
            let mut failed_by_script = 0i64;
            for f in &b.failed {
                let error = clean_text(&f.error);
                let mut qb = update_outbox::<DB>(
                    "status = 'failed', attempts = attempts + 1, \
                     lease_until_ms = NULL, last_error = ",
                );
                DB::bind(&mut qb, Val::OwnedText(Some(error.clone())));
                push_held(&mut qb, &[f.outbox_id], token);
                let done = qb.build().execute(&mut *tx).await.map_err(store_error)?;
                if done.rows_affected() == 0 {
                    continue;
                }
                failed_by_script += i64::from(b.script.failed.contains(&f.outbox_id));
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "UPDATE dead_letters SET status = 'replay_failed', status_before = NULL \
                     WHERE id = ",
                );
                DB::bind(&mut qb, Val::I64(Some(f.dead_letter_id)));
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
                failed_events.push((f.dead_letter_id, "replay_failed", error));
                // Per-key order: the later records of its key fail with it, not overtake it.
                let held: Vec<i64> = super::order::fail_held::<DB>(f.outbox_id, f.dead_letter_id)
                    .build_query_scalar()
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(store_error)?;
                if !held.is_empty() {
                    let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                        "UPDATE dead_letters SET status = 'replay_failed', status_before = NULL \
                         WHERE id IN ",
                    );
                    DB::push_json_ids(&mut qb, ids_json(&held));
                    qb.build().execute(&mut *tx).await.map_err(store_error)?;
                    let why = super::order::held_back_error(f.dead_letter_id);
                    failed_events.extend(
                        held.into_iter()
                            .map(|id| (id, "replay_failed", why.clone())),
                    );
                }
            }
            for chunk in failed_events.chunks(chunk_rows::<DB>(6)) {
                insert_events::<DB>(chunk, &actor, job, now)
                    .build()
                    .persistent(false)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            summary.failed = failed_events.len() as u64;

            // Released without an attempt counted.
            if !b.released.is_empty() {
                let mut qb = update_outbox::<DB>(
                    "status = 'pending', lease_until_ms = NULL, \
                     claim_token = NULL, next_attempt_at_ms = ",
                );
                DB::bind(&mut qb, Val::I64(Some(b.release_at_ms)));
                qb.push(", last_error = COALESCE(");
                DB::bind(
                    &mut qb,
                    Val::OwnedText(b.release_error.as_deref().map(clean_text)),
                );
                qb.push(", last_error)");
                push_held(&mut qb, &b.released, token);
                let done = qb.build().execute(&mut *tx).await.map_err(store_error)?;
                summary.released = done.rows_affected();
            }

            // What the transform did: rows it skipped (`transform_marks.rs`).
            let mut skipped_by_script = 0i64;
            if !b.script.is_empty() {
                use super::transform_marks as tm;
                let mut skipped: Vec<MarkedRow> = Vec::new();
                for mut qb in tm::skip_rows::<DB>(&b.script.skipped, token) {
                    let rows: Vec<MarkedRow> = qb
                        .build_query_as()
                        .persistent(false)
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    skipped.extend(rows);
                }
                if !skipped.is_empty() {
                    let outbox_ids: Vec<i64> = skipped.iter().map(|m| m.id).collect();
                    let dl_ids: Vec<i64> = skipped.iter().map(|m| m.dead_letter_id).collect();
                    for mut qb in tm::after_skip::<DB>(&outbox_ids, &dl_ids, &actor, now) {
                        qb.build().execute(&mut *tx).await.map_err(store_error)?;
                    }
                    // Per-key order: a record the script skipped is done; the next of its
                    // key may go.
                    super::order::release_next::<DB>(&outbox_ids)
                        .build()
                        .persistent(false)
                        .execute(&mut *tx)
                        .await
                        .map_err(store_error)?;
                }
                skipped_by_script = skipped.len() as i64;
            }

            // The job's counters: one tally row. Only rows still held count (a batch whose
            // lease was lost changes nothing).
            let tally = job_tallies::Tally {
                published: summary.published as i64,
                failed: summary.failed as i64,
                cancelled: -published_after_cancel,
                skipped_by_script,
                failed_by_script,
            };
            let transformed = Some((b.script.transformed.as_slice(), token, now));
            if let Some(mut qb) = job_tallies::insert::<DB>(job, tally, transformed) {
                qb.build()
                    .persistent(false)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }

            // The job's row: waiting <-> running, last error, finished.
            if writes_job {
                let outage = b.outage
                    && summary.published == 0
                    && summary.released + summary.retried + summary.failed > 0;
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("UPDATE replay_jobs SET last_error = COALESCE(");
                DB::bind(&mut qb, Val::OwnedText(last_error.clone()));
                qb.push(", last_error)");
                if outage {
                    qb.push(
                        ", status = CASE WHEN status = 'running' THEN 'waiting' ELSE status END, \
                         waiting_since_ms = COALESCE(waiting_since_ms, ",
                    );
                    DB::bind(&mut qb, Val::I64(Some(now)));
                    qb.push(")");
                } else if summary.published > 0 {
                    qb.push(
                        ", status = CASE WHEN status = 'waiting' THEN 'running' ELSE status END, \
                         waiting_since_ms = NULL",
                    );
                }
                qb.push(" WHERE id = ");
                DB::bind(&mut qb, Val::Text(Some(job)));
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
            }

            // Done: `finished`, and its tally rows folded into its row.
            if finishing {
                summary.finished = finish_in_tx!(tx, job, now);
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<(), StoreError>(())
        })?;
        Ok(summary)
    }

    /// Marks `job_id` `finished` if it is running or waiting and has no pending or claimed
    /// rows left, its tally rows folded into its row (`job_tallies.rs`), in one transaction.
    /// Returns whether it did.
    pub(crate) async fn finish_job_if_done(&self, job_id: &str) -> Result<bool, StoreError> {
        let now = now_ms();
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let finished = finish_in_tx!(tx, job_id, now);
            tx.commit().await.map_err(store_error)?;
            Ok::<bool, StoreError>(finished)
        })
    }
}

#[cfg(test)]
#[path = "outbox_mark_plan_tests.rs"]
mod plan_tests;
