//! Lag-aware replay's side of the store (`ReplayOptions::lag_gate`, `docs/replay.md`,
//! "Lag-aware replay"): the target topics whose lag the relay reads for a job, and what it
//! read, written to migration 0016's `replay_jobs.lag_*` columns for the job page and
//! `GET /api/v1/replays/{id}`.

use sqlx::QueryBuilder;

use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};

/// Most distinct target topics a lag-gated job may have: the relay reads every partition's
/// offsets of each on every reading, so a "to source" replay over hundreds of topics is
/// refused by the gate (held, with the reason) rather than read slowly.
pub(crate) const MAX_LAG_TOPICS: usize = 100;

/// One reading of a job's lag gate, as [`Store::record_job_lag`] writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LagWrite<'a> {
    /// The lag read, records; `None` when it could not be read (the last value is kept).
    pub(crate) records: Option<i64>,
    /// When it was read (or failed to be), epoch ms.
    pub(crate) read_at_ms: i64,
    /// The job is held back now (lag at or over the limit, or unreadable).
    pub(crate) held: bool,
    /// Why the lag could not be read; `None` = it was read.
    pub(crate) error: Option<&'a str>,
}

impl Store {
    /// The distinct target topics of `job_id`'s outbox rows, sorted: what its lag gate
    /// reads. At most [`MAX_LAG_TOPICS`] + 1 (the caller refuses more).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub(crate) async fn job_target_topics(&self, job_id: &str) -> Result<Vec<String>, StoreError> {
        let rows: Vec<(String,)> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("SELECT DISTINCT target_topic FROM outbox WHERE job_id = ");
            DB::bind(&mut qb, Val::Text(Some(job_id)));
            qb.push(" ORDER BY target_topic LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(MAX_LAG_TOPICS as i64 + 1)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        Ok(rows.into_iter().map(|(t,)| t).collect())
    }

    /// Records a lag reading on the job (only while it is `running` or `waiting`):
    /// `lag_records` (kept when the read failed), `lag_read_at_ms`, `lag_error`, and
    /// `lag_held_since_ms` — kept from an earlier hold, set to the read time when the job
    /// becomes held, cleared when it publishes again. Returns whether the job row was
    /// changed (false: the job is no longer active).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub(crate) async fn record_job_lag(
        &self,
        job_id: &str,
        w: &LagWrite<'_>,
    ) -> Result<bool, StoreError> {
        let n = on_write_conn!(self, |conn, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE replay_jobs SET lag_records = COALESCE(");
            DB::bind(&mut qb, Val::I64(w.records));
            qb.push(", lag_records), lag_read_at_ms = ");
            DB::bind(&mut qb, Val::I64(Some(w.read_at_ms)));
            qb.push(", lag_error = ");
            DB::bind(&mut qb, Val::Text(w.error));
            if w.held {
                qb.push(", lag_held_since_ms = COALESCE(lag_held_since_ms, ");
                DB::bind(&mut qb, Val::I64(Some(w.read_at_ms)));
                qb.push(")");
            } else {
                qb.push(", lag_held_since_ms = NULL");
            }
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::Text(Some(job_id)));
            qb.push(" AND status IN ('running', 'waiting')");
            qb.build()
                .execute(&mut *conn)
                .await
                .map(|d| d.rows_affected())
        })
        .map_err(store_error)?;
        Ok(n > 0)
    }
}
