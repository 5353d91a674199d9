//! Pausing, resuming and cancelling a replay job (issue 9 item 2). A paused job keeps its
//! outbox rows: the relay claims none of them while it is `paused` (the claim re-checks the
//! job's status in its own transaction, `outbox.rs`), and a relay publishing a throttled batch
//! of it hands the unsent rows back (`pending`, same idempotency key) when it sees the pause.
//! Rows being published at the moment of the pause finish and are recorded once, under their
//! claim token. The status lives in the store, so a relay restart keeps a paused job paused;
//! `resume` makes it `running` and the relay goes on from the rows still pending. A cancel
//! releases the job's `pending` and `claimed` outbox rows in one transaction; a publish
//! already in flight is still recorded as published or failed.

use sqlx::QueryBuilder;

use super::actions::{clean_text, ids_json, insert_events_for_ids, now_ms};
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, JobStatus, NewAuditEntry, ReplayJob, MAX_REASON_CHARS};

/// What a resumed job becomes: `preparing` again when it was paused while its bulk action
/// was still queueing rows (that action's last chunk turns it `running` with the audit row,
/// so nothing is published early), else `running`. A job published while queueing
/// (`ReplayOptions::publishes_while_queueing`) becomes `running` in either case.
const RESUMED_STATUS: &str = "CASE WHEN EXISTS (SELECT 1 FROM bulk_actions b WHERE b.job_id = \
     replay_jobs.id AND b.status = 'running') THEN 'preparing' ELSE 'running' END";

/// `SELECT status FROM replay_jobs WHERE id = job_id`: the job's status now, or no row.
pub(super) fn job_status_query<'a, DB: Dialect>(job_id: &'a str) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new("SELECT status FROM replay_jobs WHERE id = ");
    DB::bind(&mut qb, Val::Text(Some(job_id)));
    qb
}

/// The statuses a job can be cancelled from.
const CANCELLABLE: &[&str] = &["preparing", "running", "waiting", "paused"];

/// `UPDATE replay_jobs SET status = <set> WHERE id = job_id AND status IN (from) RETURNING id`:
/// a change of a job's status guarded by the statuses it may come from (`set` pushes the new
/// status and any further assignments). No row: the job is missing or in another status
/// ([`refused_job_change`] tells which).
fn guarded_job_update<'a, DB: Dialect>(
    job_id: &'a str,
    from: &[&str],
    set: impl FnOnce(&mut QueryBuilder<'a, DB>),
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new("UPDATE replay_jobs SET status = ");
    set(&mut qb);
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
    qb
}

/// Runs `$update` (a [`guarded_job_update`]) in the write transaction `$tx` (of the `DB` in
/// scope); when it hit no row, returns from the enclosing fn with [`refused_job_change`]'s
/// error, `$refusal` wording a `Conflict` from the status the job has.
macro_rules! change_or_refuse {
    ($tx:ident, $job_id:expr, $update:expr, $refusal:expr) => {{
        let hit: Option<String> = $update
            .build_query_scalar()
            .fetch_optional(&mut *$tx)
            .await
            .map_err(store_error)?;
        if hit.is_none() {
            let status: Option<String> = job_status_query::<DB>($job_id)
                .build_query_scalar()
                .fetch_optional(&mut *$tx)
                .await
                .map_err(store_error)?;
            return Err(refused_job_change($job_id, status, $refusal));
        }
    }};
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
        // Options never change after the request: read once, outside the transaction.
        let streams = to == "running"
            && self
                .job(job_id)
                .await?
                .is_some_and(|j| j.options.publishes_while_queueing());
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut update = guarded_job_update::<DB>(job_id, from, |qb| {
                if to == "running" && !streams {
                    qb.push(RESUMED_STATUS);
                } else {
                    qb.push("'").push(to).push("'");
                }
            });
            change_or_refuse!(tx, job_id, update, |s| {
                format!(
                    "replay job {job_id} is {s}; only a {} job can be {}",
                    from.join(" or "),
                    if to == "paused" { "paused" } else { "resumed" }
                )
            });
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

    /// Cancels a preparing, running, waiting or paused replay job, in ONE transaction: its
    /// `pending` outbox rows
    /// become `cancelled`, their dead letters go back to the status they had before the
    /// request (a `replay_cancelled` history event each), the job becomes `cancelled` with
    /// its `cancelled` count, and one audit row (`cancel_job`) is written. Rows a relay is
    /// publishing at this moment finish normally and count as published (or failed). A job
    /// still `preparing` (its bulk action queueing rows over a filter) gets no more rows: the
    /// action's next chunk sees the cancel and ends with the action's audit row (`bulk/`).
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
            let mut update = guarded_job_update::<DB>(job_id, CANCELLABLE, |qb| {
                qb.push("'cancelled', finished_at_ms = ");
                DB::bind(qb, Val::I64(Some(now)));
            });
            change_or_refuse!(tx, job_id, update, |s| {
                format!(
                    "replay job {job_id} is already {s}; only a preparing, running, waiting \
                     or paused job can be cancelled"
                )
            });
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
