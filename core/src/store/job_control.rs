//! Pausing and resuming a replay job (issue 9 item 2). A paused job keeps its outbox rows:
//! the relay claims none of them while it is `paused` (the claim re-checks the job's status
//! in its own transaction, `outbox.rs`), and a relay publishing a throttled batch of it hands
//! the unsent rows back (`pending`, same idempotency key) when it sees the pause. Rows being
//! published at the moment of the pause finish and are recorded once, under their claim
//! token. The status lives in the store, so a relay restart keeps a paused job paused;
//! `resume` makes it `running` and the relay goes on from the rows still pending.

use sqlx::QueryBuilder;

use super::actions::{clean_text, now_ms};
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, JobStatus, NewAuditEntry, ReplayJob, MAX_REASON_CHARS};

/// What a resumed job becomes: `preparing` again when it was paused while its bulk action
/// was still queueing rows (that action's last chunk turns it `running` with the audit row,
/// so nothing is published early), else `running`.
const RESUMED_STATUS: &str = "CASE WHEN EXISTS (SELECT 1 FROM bulk_actions b WHERE b.job_id = \
     replay_jobs.id AND b.status = 'running') THEN 'preparing' ELSE 'running' END";

/// `SELECT status FROM replay_jobs WHERE id = job_id`: the job's status now, or no row.
pub(super) fn job_status_query<'a, DB: Dialect>(job_id: &'a str) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new("SELECT status FROM replay_jobs WHERE id = ");
    DB::bind(&mut qb, Val::Text(Some(job_id)));
    qb
}

/// Why a guarded change of a job's status hit no row: `NotFound` when the job does not exist
/// (`status` is `None`), else `Conflict` with `conflict(status)`.
pub(super) fn refused_job_change(
    job_id: &str,
    status: Option<String>,
    conflict: impl FnOnce(&str) -> String,
) -> StoreError {
    match status {
        None => StoreError::NotFound(format!("replay job {job_id}")),
        Some(s) => StoreError::Conflict(conflict(&s)),
    }
}

impl Store {
    /// Pauses a `preparing`, `running` or `waiting` job, with one audit row (`pause_job`, the
    /// reason). A job paused while preparing finishes queueing its rows and stays `paused`.
    ///
    /// Errors: `NotFound`, `Conflict` (not preparing, running or waiting), `Invalid` (reason
    /// too long), `Unavailable`, `Database`.
    pub async fn pause_job(
        &self,
        actor: &Actor,
        job_id: &str,
        reason: Option<&str>,
    ) -> Result<ReplayJob, StoreError> {
        self.set_job_state(
            actor,
            job_id,
            reason,
            "pause_job",
            &["preparing", "running", "waiting"],
            "paused",
        )
        .await
    }

    /// Resumes a `paused` job (it becomes `running`, or `preparing` again while its rows are
    /// still being queued), with one audit row (`resume_job`).
    ///
    /// Errors: `NotFound`, `Conflict` (not paused), `Invalid`, `Unavailable`, `Database`.
    pub async fn resume_job(
        &self,
        actor: &Actor,
        job_id: &str,
        reason: Option<&str>,
    ) -> Result<ReplayJob, StoreError> {
        self.set_job_state(actor, job_id, reason, "resume_job", &["paused"], "running")
            .await
    }

    /// The job's status now (`None`: no such job): what a relay checks while it publishes a
    /// throttled batch.
    pub(crate) async fn job_status(&self, job_id: &str) -> Result<Option<JobStatus>, StoreError> {
        let s: Option<String> = on_pool!(self, |pool, DB| {
            job_status_query::<DB>(job_id)
                .build_query_scalar()
                .fetch_optional(pool)
                .await
        })
        .map_err(store_error)?;
        Ok(s.as_deref().and_then(JobStatus::parse))
    }

    #[allow(clippy::too_many_arguments)]
    async fn set_job_state(
        &self,
        actor: &Actor,
        job_id: &str,
        reason: Option<&str>,
        action: &'static str,
        from: &'static [&'static str],
        to: &'static str,
    ) -> Result<ReplayJob, StoreError> {
        let reason = reason.map(str::trim).filter(|r| !r.is_empty());
        if reason.is_some_and(|r| r.chars().count() > MAX_REASON_CHARS) {
            return Err(StoreError::Invalid(format!(
                "the reason is longer than {MAX_REASON_CHARS} characters"
            )));
        }
        let now = now_ms();
        let user = clean_text(&actor.user);
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE replay_jobs SET status = ");
            if to == "running" {
                qb.push(RESUMED_STATUS);
            } else {
                qb.push("'").push(to).push("'");
            }
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::Text(Some(job_id)));
            qb.push(" AND status IN (");
            for (i, s) in from.iter().enumerate() {
                if i > 0 {
                    qb.push(", ");
                }
                qb.push("'").push(*s).push("'");
            }
            qb.push(") RETURNING id");
            let hit: Option<String> = qb
                .build_query_scalar()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
            if hit.is_none() {
                let status: Option<String> = job_status_query::<DB>(job_id)
                    .build_query_scalar()
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_error)?;
                return Err(refused_job_change(job_id, status, |s| {
                    format!(
                        "replay job {job_id} is {s}; only a {} job can be {}",
                        from.join(" or "),
                        if to == "paused" { "paused" } else { "resumed" }
                    )
                }));
            }
            let audit = NewAuditEntry {
                job_id: Some(job_id.to_string()),
                reason: reason.map(str::to_string),
                ..NewAuditEntry::by(actor, action, "ok")
            };
            super::audit::insert_audit::<DB>(&audit, now)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<(), StoreError>(())
        })?;
        tracing::info!(job = %job_id, actor = %user, action, "replay job {to}");
        self.job(job_id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("replay job {job_id}")))
    }
}
