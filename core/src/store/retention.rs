//! The store side of retention (`docs/retention.md`): usage per DLQ topic, the candidates of
//! each limit, the chunked purge, and the `retention_runs` record of each run (migration 0008).
//!
//! A purge chunk is ONE short write transaction over at most `retention.chunk_rows` ids: it
//! re-checks which of them still have a status the limit may purge (a dead letter restored or
//! queued for replay meanwhile is left alone), deletes their dependent rows first
//! ([`DEPENDENT_TABLES`]), then the dead letters, and moves the run's counters in the same
//! commit. Nothing is deleted without its run's record; the run's audit row is written when it
//! ends ([`Store::finish_retention_run`]), or by the next run if its process died.

use sqlx::QueryBuilder;

use super::actions::{ids_json, now_ms};
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::NewAuditEntry;

/// Tables whose rows reference a dead letter (table, column): deleted before it. A feature
/// that adds such a table adds it here (or declares `ON DELETE CASCADE`).
pub const DEPENDENT_TABLES: &[(&str, &str)] = &[
    ("outbox", "dead_letter_id"),
    ("dead_letter_events", "dead_letter_id"),
    // After the outbox rows, which reference versions (`outbox.version_id`).
    ("dead_letter_versions", "dead_letter_id"),
];

/// A run that has not moved for this long is taken to be interrupted (its process died), ms.
pub const RUN_STALE_AFTER_MS: i64 = 10 * 60 * 1000;

/// Dead letters of one DLQ topic with one status, and their bytes.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StatusUsage {
    pub status: String,
    pub count: i64,
    /// key + value, bytes.
    pub bytes: i64,
}

/// One purge candidate: its id, the time its age is measured from (epoch ms) and its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct Candidate {
    pub id: i64,
    pub at_ms: i64,
    pub bytes: i64,
}

/// Which dead letters a candidate query selects.
#[derive(Debug, Clone, Copy)]
pub enum CandidateQuery<'a> {
    /// `status` (`deleted` or `replayed`) whose status changed before `before_ms`, oldest
    /// change first.
    Done { status: &'a str, before_ms: i64 },
    /// Any of `statuses`, oldest dead-lettering first (the live limits walk these); only
    /// those dead-lettered before `before_ms` when it is set.
    Live {
        statuses: &'a [&'a str],
        before_ms: Option<i64>,
    },
    /// In the `archive` automation tier since before `before_ms` (`dead_letter_tiers.
    /// tier_at_ms`), any status but `replay_pending`, longest there first.
    ArchiveTier { before_ms: i64 },
}

/// A `retention_runs` row.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct RetentionRun {
    pub id: i64,
    /// `purge` or `archive`.
    pub kind: String,
    /// `running`, `done`, `failed` or `interrupted`.
    pub status: String,
    pub actor: String,
    pub started_at_ms: i64,
    pub updated_at_ms: i64,
    pub finished_at_ms: Option<i64>,
    pub purged: i64,
    pub archived: i64,
    /// Delete transactions committed.
    pub chunks: i64,
    pub archive_location: Option<String>,
    /// JSON: per DLQ topic and reason, the count and id/time ranges.
    pub detail: String,
    pub error: Option<String>,
}

const RUN_COLUMNS: &str = "id, kind, status, actor, started_at_ms, updated_at_ms, finished_at_ms, \
     purged, archived, chunks, archive_location, detail, error";

fn push_statuses<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, statuses: &'a [&'a str]) {
    qb.push(" IN (");
    for (i, s) in statuses.iter().enumerate() {
        if i > 0 {
            qb.push(", ");
        }
        DB::bind(qb, Val::Text(Some(s)));
    }
    if statuses.is_empty() {
        qb.push("NULL");
    }
    qb.push(")");
}

impl Store {
    /// The DLQ topics that have dead letters (at most 10,000), from the maintained aggregates
    /// (`dl_stats_counts`, migration 0006).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn retention_topics(&self) -> Result<Vec<String>, StoreError> {
        on_pool!(self, |pool, _DB| {
            sqlx::query_scalar::<_, String>(
                "SELECT DISTINCT dlq_topic FROM dl_stats_counts WHERE n > 0 \
                 ORDER BY dlq_topic LIMIT 10000",
            )
            .fetch_all(pool)
            .await
        })
        .map_err(store_error)
    }

    /// Dead letters of `dlq_topic` per status, with their bytes (key + value), from the
    /// maintained aggregates (`dl_stats_counts`, kept exact by triggers in the same
    /// transaction as every write): a few rows, whatever the store's size.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn retention_usage(&self, dlq_topic: &str) -> Result<Vec<StatusUsage>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT status, CAST(COALESCE(SUM(n), 0) AS BIGINT) AS count, \
                 CAST(COALESCE(SUM(bytes), 0) AS BIGINT) AS bytes \
                 FROM dl_stats_counts WHERE dlq_topic = ",
            );
            DB::bind(&mut qb, Val::Text(Some(dlq_topic)));
            qb.push(" GROUP BY status ORDER BY status");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)
    }

    /// Up to `limit` purge candidates of `dlq_topic`, oldest first (see [`CandidateQuery`]).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn retention_candidates(
        &self,
        dlq_topic: &str,
        query: CandidateQuery<'_>,
        limit: usize,
    ) -> Result<Vec<Candidate>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new("");
            match query {
                CandidateQuery::Done { status, before_ms } => {
                    qb.push(
                        "SELECT id, COALESCE(status_changed_at_ms, ingested_at_ms) AS at_ms, \
                         CAST(record_bytes AS BIGINT) AS bytes FROM dead_letters WHERE dlq_topic = ",
                    );
                    DB::bind(&mut qb, Val::Text(Some(dlq_topic)));
                    qb.push(" AND status = ");
                    DB::bind(&mut qb, Val::Text(Some(status)));
                    qb.push(" AND status_changed_at_ms < ");
                    DB::bind(&mut qb, Val::I64(Some(before_ms)));
                    qb.push(" ORDER BY status_changed_at_ms, id");
                }
                CandidateQuery::Live {
                    statuses,
                    before_ms,
                } => {
                    qb.push(
                        "SELECT id, dead_lettered_at_ms AS at_ms, \
                         CAST(record_bytes AS BIGINT) AS bytes FROM dead_letters WHERE dlq_topic = ",
                    );
                    DB::bind(&mut qb, Val::Text(Some(dlq_topic)));
                    qb.push(" AND status");
                    push_statuses(&mut qb, statuses);
                    if let Some(t) = before_ms {
                        qb.push(" AND dead_lettered_at_ms < ");
                        DB::bind(&mut qb, Val::I64(Some(t)));
                    }
                    qb.push(" ORDER BY dead_lettered_at_ms, id");
                }
                CandidateQuery::ArchiveTier { before_ms } => {
                    qb.push(
                        "SELECT d.id, t.tier_at_ms AS at_ms, \
                         CAST(d.record_bytes AS BIGINT) AS bytes FROM dead_letters d \
                         JOIN dead_letter_tiers t ON t.dead_letter_id = d.id \
                         WHERE d.dlq_topic = ",
                    );
                    DB::bind(&mut qb, Val::Text(Some(dlq_topic)));
                    // `t.tier` only (the same value as `d.tier`, written together): a `d.tier`
                    // predicate lets stale PostgreSQL statistics nest a tier-index range scan
                    // per row (see `rounds.rs`, `push_due`).
                    qb.push(
                        " AND t.tier = 'archive' \
                         AND d.status <> 'replay_pending' AND t.tier_at_ms < ",
                    );
                    DB::bind(&mut qb, Val::I64(Some(before_ms)));
                    qb.push(" ORDER BY t.tier_at_ms, d.id");
                }
            }
            qb.push(" LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(limit as i64)));
            qb.build_query_as().persistent(false).fetch_all(pool).await
        })
        .map_err(store_error)
    }

    /// Starts a run record (`running`); returns its id.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn start_retention_run(
        &self,
        kind: &str,
        actor: &str,
        archive_location: Option<&str>,
    ) -> Result<i64, StoreError> {
        let now = now_ms();
        on_write_conn!(self, |conn, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "INSERT INTO retention_runs (kind, status, actor, started_at_ms, updated_at_ms, \
                 archive_location) VALUES (",
            );
            DB::bind(&mut qb, Val::Text(Some(kind)));
            qb.push(", 'running', ");
            DB::bind(&mut qb, Val::Text(Some(actor)));
            qb.push(", ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(", ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(", ");
            DB::bind(&mut qb, Val::Text(archive_location));
            qb.push(") RETURNING id");
            qb.build_query_scalar::<i64>().fetch_one(&mut *conn).await
        })
        .map_err(store_error)
    }

    /// Records progress outside a delete (archived rows, the archive's location).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn update_retention_run(
        &self,
        run_id: i64,
        archived: i64,
        archive_location: Option<&str>,
    ) -> Result<(), StoreError> {
        on_write_conn!(self, |conn, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE retention_runs SET archived = ");
            DB::bind(&mut qb, Val::I64(Some(archived)));
            qb.push(", archive_location = COALESCE(");
            DB::bind(&mut qb, Val::Text(archive_location));
            qb.push(", archive_location), updated_at_ms = ");
            DB::bind(&mut qb, Val::I64(Some(now_ms())));
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::I64(Some(run_id)));
            qb.build().execute(&mut *conn).await.map(|_| ())
        })
        .map_err(store_error)
    }

    /// ONE write transaction: of `ids`, those whose status is still one of `statuses` (read
    /// after any other writer holding them commits: on PostgreSQL the chunk waits) lose
    /// their dependent rows ([`DEPENDENT_TABLES`]) and are deleted; the run's counters move in
    /// the same commit (`detail` is the run's detail so far). Returns how many were deleted.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn purge_chunk(
        &self,
        run_id: i64,
        ids: &[i64],
        statuses: &[&str],
        detail: &str,
    ) -> Result<u64, StoreError> {
        let now = now_ms();
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("SELECT id FROM dead_letters WHERE id IN ");
            DB::push_json_ids(&mut qb, ids_json(ids));
            qb.push(" AND status");
            push_statuses(&mut qb, statuses);
            // Wait for a row another writer holds (the tier sorter, a status change) rather
            // than skip it: a skipped row would be left for a later run while this one reports
            // `done`. Locked in id order, as the other multi-row writers go.
            qb.push(" ORDER BY id");
            qb.push(<DB as Dialect>::FOR_UPDATE);
            let still: Vec<i64> = qb
                .build_query_scalar()
                .persistent(false)
                .fetch_all(&mut *tx)
                .await
                .map_err(store_error)?;
            let mut deleted = 0;
            if !still.is_empty() {
                let json = ids_json(&still);
                for (table, column) in DEPENDENT_TABLES {
                    let mut qb: QueryBuilder<'_, DB> =
                        QueryBuilder::new(format!("DELETE FROM {table} WHERE {column} IN "));
                    DB::push_json_ids(&mut qb, json.clone());
                    qb.build()
                        .persistent(false)
                        .execute(&mut *tx)
                        .await
                        .map_err(store_error)?;
                }
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("DELETE FROM dead_letters WHERE id IN ");
                DB::push_json_ids(&mut qb, json);
                deleted = qb
                    .build()
                    .persistent(false)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?
                    .rows_affected();
            }
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE retention_runs SET purged = purged + ");
            DB::bind(&mut qb, Val::I64(Some(deleted as i64)));
            qb.push(", chunks = chunks + 1, updated_at_ms = ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(", detail = ");
            DB::bind(&mut qb, Val::Text(Some(detail)));
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::I64(Some(run_id)));
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok(deleted)
        })
    }

    /// Ends a run: its final state and, in the same transaction, its audit row.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn finish_retention_run(
        &self,
        run_id: i64,
        status: &str,
        detail: &str,
        error: Option<&str>,
        audit: &NewAuditEntry,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE retention_runs SET status = ");
            DB::bind(&mut qb, Val::Text(Some(status)));
            qb.push(", detail = ");
            DB::bind(&mut qb, Val::Text(Some(detail)));
            qb.push(", error = ");
            DB::bind(&mut qb, Val::Text(error));
            qb.push(", updated_at_ms = ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(", finished_at_ms = ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::I64(Some(run_id)));
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            super::audit::insert_audit::<DB>(audit, now)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok(())
        })
    }

    /// Runs, newest first, at most `limit` (capped at 500).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn retention_runs(&self, limit: u32) -> Result<Vec<RetentionRun>, StoreError> {
        let limit = i64::from(limit.clamp(1, 500));
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {RUN_COLUMNS} FROM retention_runs ORDER BY id DESC LIMIT "
            ));
            DB::bind(&mut qb, Val::I64(Some(limit)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)
    }

    /// `running` runs that have not moved for `stale_after_ms` (their process died).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn stale_retention_runs(
        &self,
        stale_after_ms: i64,
    ) -> Result<Vec<RetentionRun>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {RUN_COLUMNS} FROM retention_runs WHERE status = 'running' \
                 AND updated_at_ms <= "
            ));
            DB::bind(&mut qb, Val::I64(Some(now_ms() - stale_after_ms)));
            qb.push(" ORDER BY id");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)
    }
}
