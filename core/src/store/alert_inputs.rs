//! What the alert evaluator reads from the dead letters, the quarantine and the replay jobs.
//!
//! Cost at 10M rows (see `docs/alerts.md`, "Cost"): arrivals and new error groups read only the
//! rows added since the last evaluation (a primary-key range after the `dead_letters.id`
//! watermark, plus one index probe per new fingerprint); the rate reads the index range of the
//! last window (`dead_letters_by_time`); the quarantine and replay jobs are small tables.
//!
//! Live size and oldest age (`dlq_size`, `oldest_age`) come from the maintained aggregates of
//! migration 0006 (`Store::stats`, `docs/stats.md`) when a rule groups and filters by DLQ
//! topic and source topic only. Only a rule grouping or filtering by fingerprint or consumer
//! group falls back to [`Store::alert_live_by`], which aggregates the matching live dead
//! letters — O(matching rows), seconds at 10M rows without a narrowing filter; the evaluator
//! calls it at most once per evaluation for all rules with the same grouping and filters.

use sqlx::QueryBuilder;

use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::alerts::rules::GroupBy;

/// The statuses of a live dead letter: not yet replayed or deleted.
pub const LIVE_STATUSES: &str = "('new', 'replay_pending', 'replay_failed')";

/// Most new fingerprints one evaluation checks (the rest wait for the next one).
pub const MAX_NEW_FINGERPRINTS: usize = 1_000;

/// Exact-match filters of a rule on the dead letters (or the quarantine: `dlq_topic` only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AlertFilter {
    pub dlq_topic: Option<String>,
    pub source_topic: Option<String>,
    pub fingerprint: Option<String>,
    pub consumer_group: Option<String>,
}

fn push_filter<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, f: &'a AlertFilter) {
    for (col, v) in [
        ("dlq_topic", &f.dlq_topic),
        ("source_topic", &f.source_topic),
        ("fingerprint", &f.fingerprint),
        ("consumer_group", &f.consumer_group),
    ] {
        if let Some(v) = v {
            qb.push(format!(" AND {col} = "));
            DB::bind(qb, Val::Text(Some(v.as_str())));
        }
    }
}

/// One group of an aggregate: the scope value (`None` for NULL), a count and a time.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct GroupCount {
    pub value: Option<String>,
    pub count: i64,
    /// Epoch ms: the oldest `dead_lettered_at_ms` (live), or the newest `ingested_at_ms`
    /// (arrivals).
    pub at_ms: Option<i64>,
}

impl Store {
    /// The largest dead-letter id (0 for an empty store): the arrivals watermark.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn alert_max_dead_letter_id(&self) -> Result<i64, StoreError> {
        on_pool!(self, |pool, _DB| {
            sqlx::query_scalar::<_, i64>("SELECT COALESCE(MAX(id), 0) FROM dead_letters")
                .fetch_one(pool)
                .await
        })
        .map_err(store_error)
    }

    /// Live dead letters per `by` value matching `filter`, with the oldest one's
    /// `dead_lettered_at_ms`, counted from the dead letters themselves (see the module doc for
    /// when the evaluator uses this instead of the aggregates).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn alert_live_by(
        &self,
        by: GroupBy,
        filter: &AlertFilter,
    ) -> Result<Vec<GroupCount>, StoreError> {
        let col = by.column();
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {col} AS value, COUNT(*) AS count, MIN(dead_lettered_at_ms) AS at_ms \
                 FROM dead_letters WHERE status IN {LIVE_STATUSES}"
            ));
            push_filter(&mut qb, filter);
            qb.push(format!(" GROUP BY {col}"));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)
    }

    /// Dead letters per `by` value dead-lettered at or after `since_ms` (the rate window), any
    /// status: an index range read of the window.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn alert_dead_lettered_since(
        &self,
        by: GroupBy,
        filter: &AlertFilter,
        since_ms: i64,
    ) -> Result<Vec<GroupCount>, StoreError> {
        let col = by.column();
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {col} AS value, COUNT(*) AS count, MAX(dead_lettered_at_ms) AS at_ms \
                 FROM dead_letters WHERE dead_lettered_at_ms >= "
            ));
            DB::bind(&mut qb, Val::I64(Some(since_ms)));
            push_filter(&mut qb, filter);
            qb.push(format!(" GROUP BY {col}"));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)
    }

    /// Dead letters stored with `after_id < id <= upto_id` (the arrivals since the last
    /// evaluation) per `by` value, with the newest `ingested_at_ms`: a primary-key range.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn alert_arrivals(
        &self,
        by: GroupBy,
        filter: &AlertFilter,
        after_id: i64,
        upto_id: i64,
    ) -> Result<Vec<GroupCount>, StoreError> {
        let col = by.column();
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {col} AS value, COUNT(*) AS count, MAX(ingested_at_ms) AS at_ms \
                 FROM dead_letters WHERE id > "
            ));
            DB::bind(&mut qb, Val::I64(Some(after_id)));
            qb.push(" AND id <= ");
            DB::bind(&mut qb, Val::I64(Some(upto_id)));
            push_filter(&mut qb, filter);
            qb.push(format!(" GROUP BY {col}"));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)
    }

    /// Error groups (fingerprints) among the dead letters with `after_id < id <= upto_id`
    /// matching `filter` that no dead letter with `id <= after_id` has: new groups, with the
    /// count and the first `ingested_at_ms`. At most [`MAX_NEW_FINGERPRINTS`] are checked.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn alert_new_fingerprints(
        &self,
        filter: &AlertFilter,
        after_id: i64,
        upto_id: i64,
    ) -> Result<Vec<GroupCount>, StoreError> {
        let arrived: Vec<GroupCount> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT fingerprint AS value, COUNT(*) AS count, MIN(ingested_at_ms) AS at_ms \
                 FROM dead_letters WHERE id > ",
            );
            DB::bind(&mut qb, Val::I64(Some(after_id)));
            qb.push(" AND id <= ");
            DB::bind(&mut qb, Val::I64(Some(upto_id)));
            push_filter(&mut qb, filter);
            qb.push(" GROUP BY fingerprint LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(MAX_NEW_FINGERPRINTS as i64)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let mut out = Vec::new();
        for g in arrived {
            let Some(fp) = g.value.as_deref() else {
                continue;
            };
            let seen: Option<i64> = on_pool!(self, |pool, DB| {
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("SELECT id FROM dead_letters WHERE fingerprint = ");
                DB::bind(&mut qb, Val::Text(Some(fp)));
                qb.push(" AND id <= ");
                DB::bind(&mut qb, Val::I64(Some(after_id)));
                qb.push(" LIMIT 1");
                qb.build_query_scalar().fetch_optional(pool).await
            })
            .map_err(store_error)?;
            if seen.is_none() {
                out.push(g);
            }
        }
        Ok(out)
    }

    /// Records in quarantine per DLQ topic (a small table).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn alert_quarantine_by_topic(
        &self,
        dlq_topic: Option<&str>,
    ) -> Result<Vec<GroupCount>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT dlq_topic AS value, COUNT(*) AS count, MAX(quarantined_at_ms) AS at_ms \
                 FROM quarantine WHERE 1 = 1",
            );
            if let Some(t) = dlq_topic {
                qb.push(" AND dlq_topic = ");
                DB::bind(&mut qb, Val::Text(Some(t)));
            }
            qb.push(" GROUP BY dlq_topic");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)
    }

    /// Replay jobs that finished (or were cancelled) with `after_ms < finished_at_ms <=
    /// upto_ms` and at least one failed record: (job id, failed records, finished at).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn alert_failed_jobs(
        &self,
        after_ms: i64,
        upto_ms: i64,
    ) -> Result<Vec<GroupCount>, StoreError> {
        on_pool!(self, |pool, DB| {
            let failed = super::job_tallies::counter("failed");
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT id AS value, {failed} AS count, finished_at_ms AS at_ms FROM replay_jobs \
                 WHERE {failed} > 0 AND finished_at_ms > "
            ));
            DB::bind(&mut qb, Val::I64(Some(after_ms)));
            qb.push(" AND finished_at_ms <= ");
            DB::bind(&mut qb, Val::I64(Some(upto_ms)));
            qb.push(" ORDER BY finished_at_ms LIMIT 1000");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)
    }

    /// Replay jobs whose canary failed (the job paused itself) with `after_ms <
    /// canary_decided_at_ms <= upto_ms`: (job id, canary records that came back, verdict
    /// time). The partial index `replay_jobs_canary_failed` (migration 0017).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn alert_failed_canaries(
        &self,
        after_ms: i64,
        upto_ms: i64,
    ) -> Result<Vec<GroupCount>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT id AS value, COALESCE(canary_refailed, 0) AS count, \
                 canary_decided_at_ms AS at_ms FROM replay_jobs \
                 WHERE canary_state = 'failed' AND canary_decided_at_ms > ",
            );
            DB::bind(&mut qb, Val::I64(Some(after_ms)));
            qb.push(" AND canary_decided_at_ms <= ");
            DB::bind(&mut qb, Val::I64(Some(upto_ms)));
            qb.push(" ORDER BY canary_decided_at_ms LIMIT 1000");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)
    }
}
