//! Reading replay jobs (the job page, the list of recent jobs, `GET /api/v1/replays/{id}`).

use sqlx::QueryBuilder;

use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::{JobQueueing, JobStatus, ReplayJob, MAX_JOBS_LIMIT};

/// The columns of a [`JobRow`] over `replay_jobs`: its counters as they are now, with the
/// tally rows of marks not yet folded into the row (`job_tallies.rs`).
fn job_columns() -> &'static str {
    static COLUMNS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    COLUMNS.get_or_init(|| {
        let c = |name: &str| format!("{} AS {name}", super::job_tallies::counter(name));
        format!(
            "id, status, created_by, created_at_ms, started_at_ms, finished_at_ms, \
             target_topic, rate_per_sec, reason, total, skipped, skipped_without_target, \
             {}, {}, {}, last_error, selection, options, {}, {}, {}, refailed, canary_state, \
             canary_size, canary_watch_until_ms, canary_published, canary_refailed, \
             canary_decided_at_ms, canary_reason, lag_records, lag_read_at_ms, \
             lag_held_since_ms, lag_error",
            c("published"),
            c("failed"),
            c("cancelled"),
            c("transformed"),
            c("skipped_by_script"),
            c("failed_by_script"),
        )
    })
}

#[derive(Debug, sqlx::FromRow)]
pub(crate) struct JobRow {
    id: String,
    status: String,
    created_by: String,
    created_at_ms: i64,
    started_at_ms: Option<i64>,
    finished_at_ms: Option<i64>,
    target_topic: Option<String>,
    rate_per_sec: Option<i32>,
    reason: Option<String>,
    total: i64,
    skipped: i64,
    skipped_without_target: i64,
    published: i64,
    failed: i64,
    cancelled: i64,
    last_error: Option<String>,
    selection: String,
    options: String,
    transformed: i64,
    skipped_by_script: i64,
    failed_by_script: i64,
    refailed: i64,
    canary_state: Option<String>,
    canary_size: Option<i64>,
    canary_watch_until_ms: Option<i64>,
    canary_published: Option<i64>,
    canary_refailed: Option<i64>,
    canary_decided_at_ms: Option<i64>,
    canary_reason: Option<String>,
    lag_records: Option<i64>,
    lag_read_at_ms: Option<i64>,
    lag_held_since_ms: Option<i64>,
    lag_error: Option<String>,
}

impl JobRow {
    /// Errors: `Corrupt` for an unknown status.
    pub(crate) fn into_job(self) -> Result<ReplayJob, StoreError> {
        let status = JobStatus::parse(&self.status).ok_or_else(|| {
            StoreError::Corrupt(format!("unknown replay job status `{}`", self.status))
        })?;
        let options = crate::actions::ReplayOptions::from_json(&self.options)
            .map_err(|e| StoreError::Corrupt(format!("replay job `{}` options: {e}", self.id)))?;
        Ok(ReplayJob {
            id: self.id,
            status,
            created_by: self.created_by,
            created_at_ms: self.created_at_ms,
            started_at_ms: self.started_at_ms,
            finished_at_ms: self.finished_at_ms,
            target_topic: self.target_topic,
            rate_per_sec: self.rate_per_sec.and_then(|r| u32::try_from(r).ok()),
            reason: self.reason,
            total: self.total,
            published: self.published,
            failed: self.failed,
            cancelled: self.cancelled,
            skipped: self.skipped,
            skipped_without_target: self.skipped_without_target,
            last_error: self.last_error,
            selection: self.selection,
            options,
            transform: crate::actions::TransformCounts {
                transformed: self.transformed,
                skipped: self.skipped_by_script,
                failed: self.failed_by_script,
            },
            refailed: self.refailed,
            canary: super::canary::status_from_columns(
                self.canary_state.as_deref(),
                self.canary_size,
                self.canary_watch_until_ms,
                self.canary_published,
                self.canary_refailed,
                self.canary_decided_at_ms,
                self.canary_reason,
            ),
            lag: crate::actions::JobLag {
                records: self.lag_records,
                read_at_ms: self.lag_read_at_ms,
                held_since_ms: self.lag_held_since_ms,
                error: self.lag_error,
            },
            queueing: None,
        })
    }
}

impl Store {
    /// The replay job `id`, or `None` if there is none; a canary still running carries its
    /// live counts (published, failed, came back so far).
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn job(&self, id: &str) -> Result<Option<ReplayJob>, StoreError> {
        let row: Option<JobRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {} FROM replay_jobs WHERE id = ",
                job_columns()
            ));
            DB::bind(&mut qb, Val::Text(Some(id)));
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        let Some(mut job) = row.map(JobRow::into_job).transpose()? else {
            return Ok(None);
        };
        // A running canary's counts are live (the list shows the stored ones).
        job.canary = self.live_canary(&job.id, job.canary.take()).await?;
        if !job.status.is_final() {
            job.queueing = self.job_queueing(&job.id).await?;
        }
        Ok(Some(job))
    }

    /// How far the bulk action still queueing job `id`'s outbox rows has come: its
    /// `bulk_actions` row while `running` (one probe of `bulk_actions_by_status`, which holds
    /// the few running actions). `None` when no action queues for the job.
    ///
    /// Errors: `Unavailable`, `Database`.
    async fn job_queueing(&self, id: &str) -> Result<Option<JobQueueing>, StoreError> {
        let row: Option<(i64, i64, i64, i64)> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT cursor_id, max_id, chunks, updated_at_ms FROM bulk_actions \
                 WHERE status = 'running' AND job_id = ",
            );
            DB::bind(&mut qb, Val::Text(Some(id)));
            qb.push(" ORDER BY id DESC LIMIT 1");
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        Ok(row.map(queueing_of))
    }

    /// The most recent replay jobs, newest first, at most `limit` (0 means 50; capped at
    /// [`MAX_JOBS_LIMIT`]), each with its stored counts and, while its bulk action still
    /// queues rows, [`ReplayJob::queueing`] (one more statement over the running bulk
    /// actions, which are few).
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn jobs(&self, limit: u32) -> Result<Vec<ReplayJob>, StoreError> {
        let limit = match limit {
            0 => 50,
            n => n.min(MAX_JOBS_LIMIT),
        };
        let rows: Vec<JobRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {} FROM replay_jobs ORDER BY created_at_ms DESC, id DESC LIMIT ",
                job_columns()
            ));
            DB::bind(&mut qb, Val::I64(Some(i64::from(limit))));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let mut jobs = rows
            .into_iter()
            .map(JobRow::into_job)
            .collect::<Result<Vec<_>, _>>()?;
        if jobs.iter().any(|j| !j.status.is_final()) {
            let queueing = self.all_queueing().await?;
            for job in jobs.iter_mut().filter(|j| !j.status.is_final()) {
                job.queueing = queueing.get(&job.id).copied();
            }
        }
        Ok(jobs)
    }

    /// [`JobQueueing`] of every job a running bulk action queues rows for, by job id (the
    /// newest action of a job, as [`Store::job`] reads it): one range of
    /// `bulk_actions_by_status`.
    ///
    /// Errors: `Unavailable`, `Database`.
    async fn all_queueing(
        &self,
    ) -> Result<std::collections::HashMap<String, JobQueueing>, StoreError> {
        let rows: Vec<(String, i64, i64, i64, i64)> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT job_id, cursor_id, max_id, chunks, updated_at_ms FROM bulk_actions \
                 WHERE status = 'running' AND job_id IS NOT NULL ORDER BY id",
            );
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        // In id order, so a job's newest action is the one kept.
        Ok(rows
            .into_iter()
            .map(|(job_id, cursor, max, chunks, at)| {
                (job_id, queueing_of((cursor, max, chunks, at)))
            })
            .collect())
    }
}

/// A running `bulk_actions` row's `(cursor_id, max_id, chunks, updated_at_ms)` as the
/// [`JobQueueing`] of its job.
fn queueing_of((cursor_id, max_id, chunks, updated_at_ms): (i64, i64, i64, i64)) -> JobQueueing {
    JobQueueing {
        cursor_id,
        max_id,
        chunks,
        updated_at_ms,
    }
}
