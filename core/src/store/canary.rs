//! Canary replay in the store (issue 9, item 3; migration 0017; `docs/replay.md`, "Canary
//! replay"). Everything the canary knows is in `replay_jobs.canary_*` and `outbox.canary`, so
//! a relay restart, or another relay on the same PostgreSQL, continues it where it was:
//!
//! ```text
//! starting ──(job runs: size fixed)──> publishing ──(every canary row final)──> watching
//!     watching ──(wait_ms over, at most max_refailed came back)──> passed  (job goes on)
//!     publishing | watching ──(more than max_refailed came back)──> failed (job paused)
//! ```
//!
//! - **The claim** ([`claim_gate`], [`Room`]; `outbox.rs`): while `starting` or `watching`
//!   nothing of the job is claimed; while `publishing` a claim takes the canary's own rows
//!   again (retries, outage releases) and new rows only up to the canary's size, flagging them
//!   `outbox.canary = 1`. The job's row is locked first (`UPDATE … SET canary_state =
//!   canary_state`), so two relays on PostgreSQL cannot both fill the last places.
//! - **The step** ([`Store::canary_step`]), called by the relay before it claims: fixes the
//!   size when the job first runs, moves `publishing` → `watching` when every canary row is
//!   published or failed, and gives the verdict. Each transition is one guarded `UPDATE`
//!   (`WHERE canary_state = <the state read>`), so it happens once however many relays try.
//! - **A failed canary** pauses the job in the same transaction, with an audit row
//!   (`pause_job`, actor [`CANARY_ACTOR`], the verdict as reason). A resume goes on without a
//!   second canary; the `canary_failed` alert rule reads the failed ones.
//! - A job does not finish while its canary is `starting`, `publishing` or `watching`
//!   ([`FINISH_GUARD`]): a canary covering the whole job still gets its verdict.

use sqlx::QueryBuilder;

use super::actions::{clean_text, now_ms};
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::NewAuditEntry;
use crate::canary::{duration_text, CanaryOptions, CanaryState, CanaryStatus};

/// The audit actor of a pause the canary made.
pub const CANARY_ACTOR: &str = "(canary)";

/// Appended to the finish condition (`outbox_mark.rs`): a job whose canary is not decided yet is
/// not finished.
pub(super) const FINISH_GUARD: &str =
    " AND (canary_state IS NULL OR canary_state IN ('passed', 'failed'))";

/// What a claim may take of a job, by its canary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Room {
    /// No canary, or decided: the claim as usual.
    Open,
    /// `starting` or `watching`: claim nothing.
    Hold,
    /// `publishing`: the canary's own rows, and at most this many new ones.
    Canary(i64),
}

/// Locks the job's row when it has an undecided canary and returns `(canary_state,
/// canary_size)`; no row = [`Room::Open`]. First statement of the claim's transaction.
pub(super) fn claim_gate<'a, DB: Dialect>(job_id: &'a str) -> QueryBuilder<'a, DB> {
    let mut qb =
        QueryBuilder::new("UPDATE replay_jobs SET canary_state = canary_state WHERE id = ");
    DB::bind(&mut qb, Val::Text(Some(job_id)));
    qb.push(
        " AND canary_state IN ('starting', 'publishing', 'watching') \
         RETURNING canary_state, canary_size",
    );
    qb
}

/// How many rows the canary of `job_id` holds (`outbox.canary = 1`), after [`claim_gate`]
/// locked the job (a statement of its own: on PostgreSQL it then sees what a concurrent
/// claim committed before the lock was granted).
pub(super) fn taken<'a, DB: Dialect>(job_id: &'a str) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new("SELECT COUNT(*) FROM outbox WHERE job_id = ");
    DB::bind(&mut qb, Val::Text(Some(job_id)));
    qb.push(" AND canary = 1");
    qb
}

/// The room a claim has, from [`claim_gate`]'s row and (when publishing) [`taken`].
pub(super) fn room(gate: Option<&(String, Option<i64>)>, taken: i64) -> Room {
    match gate {
        None => Room::Open,
        Some((state, Some(size))) if state == "publishing" => {
            Room::Canary(size.saturating_sub(taken).max(0))
        }
        Some(_) => Room::Hold,
    }
}

/// What [`Store::canary_step`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// The relay may claim (no canary, decided, or publishing with room).
    Claim,
    /// Nothing to claim now (`starting` on a job not running, or `watching`).
    Wait,
    /// The canary failed just now: the job is paused; the verdict.
    Failed(String),
}

#[derive(Debug, sqlx::FromRow)]
struct StepRow {
    status: String,
    total: i64,
    canary_state: Option<String>,
    canary_size: Option<i64>,
    canary_watch_until_ms: Option<i64>,
}

/// The canary rows of a job, counted (`outbox_canary` index).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub(super) struct Counts {
    taken: i64,
    published: i64,
    failed: i64,
    open: i64,
    refailed: i64,
}

fn counts_query<'a, DB: Dialect>(job_id: &'a str) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(
        "SELECT COUNT(*) AS taken, \
         COALESCE(SUM(CASE WHEN status = 'published' THEN 1 ELSE 0 END), 0) AS published, \
         COALESCE(SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), 0) AS failed, \
         COALESCE(SUM(CASE WHEN status IN ('pending', 'claimed') THEN 1 ELSE 0 END), 0) AS open, \
         COALESCE(SUM(CASE WHEN refailed_by_id IS NOT NULL THEN 1 ELSE 0 END), 0) AS refailed \
         FROM outbox WHERE canary = 1 AND job_id = ",
    );
    DB::bind(&mut qb, Val::Text(Some(job_id)));
    qb
}

/// A transition to write: the guarded `UPDATE` of the job's canary columns.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Transition {
    from: &'static str,
    to: CanaryState,
    size: Option<i64>,
    watch_until_ms: Option<i64>,
    /// Decided: the counts judged and the verdict.
    verdict: Option<(Counts, String)>,
}

/// The canary's next transition from what the store holds now, or `None` (stay).
/// `can_grow`: while publishing, rows outside the canary are still pending (they can join it).
fn next(
    opts: &CanaryOptions,
    row: &StepRow,
    counts: Counts,
    can_grow: bool,
    now: i64,
) -> Option<Transition> {
    let state = row.canary_state.as_deref().and_then(CanaryState::parse)?;
    let wait = opts.wait_ms();
    let over = counts.refailed > i64::try_from(opts.max_refailed).unwrap_or(i64::MAX);
    let fail = |from, reason: String| Transition {
        from,
        to: CanaryState::Failed,
        size: None,
        watch_until_ms: None,
        verdict: Some((counts, reason)),
    };
    let over_reason = || {
        format!(
            "canary: {} of {} published record{} came back as dead letters within the {} \
             watch, more than the {} allowed; the job paused itself (resume it to go on \
             without a canary, or cancel it)",
            counts.refailed,
            counts.published,
            if counts.published == 1 { "" } else { "s" },
            duration_text(wait),
            opts.max_refailed
        )
    };
    match state {
        CanaryState::Starting => {
            let size = opts.size_for(row.total);
            Some(Transition {
                from: "starting",
                to: CanaryState::Publishing,
                size: Some(size),
                watch_until_ms: None,
                verdict: None,
            })
        }
        CanaryState::Publishing if over => Some(fail("publishing", over_reason())),
        CanaryState::Publishing => {
            let size = row.canary_size.unwrap_or(0);
            // Every canary row is final, and the canary is full (or nothing more can join
            // it: the job has no other pending row, e.g. a key's later rows failed with it).
            let full = counts.taken >= size || !can_grow;
            (counts.open == 0 && full).then(|| Transition {
                from: "publishing",
                to: CanaryState::Watching,
                size: None,
                watch_until_ms: Some(now.saturating_add(i64::try_from(wait).unwrap_or(0))),
                verdict: None,
            })
        }
        CanaryState::Watching if over => Some(fail("watching", over_reason())),
        CanaryState::Watching => {
            if row.canary_watch_until_ms.is_some_and(|t| now < t) {
                return None;
            }
            if counts.published == 0 && counts.taken > 0 {
                return Some(fail(
                    "watching",
                    format!(
                        "canary: none of its {} record{} could be published ({} failed), so \
                         nothing shows whether the replay works; the job paused itself",
                        counts.taken,
                        if counts.taken == 1 { "" } else { "s" },
                        counts.failed
                    ),
                ));
            }
            Some(Transition {
                from: "watching",
                to: CanaryState::Passed,
                size: None,
                watch_until_ms: None,
                verdict: Some((
                    counts,
                    format!(
                        "canary passed: {} of {} published record{} came back within the {} \
                         watch (at most {} allowed); the job goes on",
                        counts.refailed,
                        counts.published,
                        if counts.published == 1 { "" } else { "s" },
                        duration_text(wait),
                        opts.max_refailed
                    ),
                )),
            })
        }
        CanaryState::Passed | CanaryState::Failed => None,
    }
}

impl Store {
    /// One step of `job_id`'s canary (see the module docs) at `now` (epoch ms): reads the job
    /// and its canary rows and writes at most the transitions that are due, each a guarded
    /// `UPDATE`. A job that is not `running` or `waiting`, or has no canary, is left alone
    /// ([`Step::Claim`]: the claim's own checks apply).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub(crate) async fn canary_step(
        &self,
        job_id: &str,
        opts: &CanaryOptions,
        now: i64,
    ) -> Result<Step, StoreError> {
        // Starting → publishing → watching can happen in one step (a canary whose rows are
        // all final already, e.g. after a restart); at most three transitions.
        for _ in 0..3 {
            let Some(row) = self.canary_row(job_id).await? else {
                return Ok(Step::Claim);
            };
            if !matches!(row.status.as_str(), "running" | "waiting") {
                return Ok(Step::Claim);
            }
            let Some(state) = row.canary_state.as_deref().and_then(CanaryState::parse) else {
                return Ok(Step::Claim);
            };
            if state.is_decided() {
                return Ok(Step::Claim);
            }
            let counts = if state == CanaryState::Starting {
                Counts::default()
            } else {
                self.canary_counts(job_id).await?
            };
            // A canary short of its size with every row final: can more rows still join it
            // (a pending row outside it), or is this all it will get?
            let can_grow = state == CanaryState::Publishing
                && counts.open == 0
                && counts.taken < row.canary_size.unwrap_or(0)
                && self.pending_outside_canary(job_id).await?;
            let Some(t) = next(opts, &row, counts, can_grow, now) else {
                return Ok(match state {
                    CanaryState::Watching | CanaryState::Starting => Step::Wait,
                    _ => Step::Claim,
                });
            };
            let failed = t.to == CanaryState::Failed;
            let reason = t.verdict.as_ref().map(|(_, r)| r.clone());
            let applied = self.apply_transition(job_id, &t, now).await?;
            if !applied {
                // Another relay moved it first: read again.
                continue;
            }
            tracing::info!(
                target: "redrive::replay",
                job = %job_id,
                from = t.from,
                to = t.to.as_str(),
                reason = reason.as_deref().unwrap_or(""),
                "canary"
            );
            if failed {
                return Ok(Step::Failed(reason.unwrap_or_default()));
            }
        }
        Ok(Step::Claim)
    }

    async fn canary_row(&self, job_id: &str) -> Result<Option<StepRow>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT status, total, canary_state, canary_size, canary_watch_until_ms \
                 FROM replay_jobs WHERE id = ",
            );
            DB::bind(&mut qb, Val::Text(Some(job_id)));
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)
    }

    pub(super) async fn canary_counts(&self, job_id: &str) -> Result<Counts, StoreError> {
        on_pool!(self, |pool, DB| {
            counts_query::<DB>(job_id)
                .build_query_as()
                .fetch_one(pool)
                .await
        })
        .map_err(store_error)
    }

    async fn pending_outside_canary(&self, job_id: &str) -> Result<bool, StoreError> {
        let hit: Option<i64> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("SELECT id FROM outbox WHERE job_id = ");
            DB::bind(&mut qb, Val::Text(Some(job_id)));
            qb.push(" AND status = 'pending' AND canary = 0 LIMIT 1");
            qb.build_query_scalar().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        Ok(hit.is_some())
    }

    /// Writes `t` if the canary is still in `t.from`; a failure also pauses the job (if it is
    /// running or waiting) and writes its audit row, in the same transaction. Returns whether
    /// it applied.
    async fn apply_transition(
        &self,
        job_id: &str,
        t: &Transition,
        now: i64,
    ) -> Result<bool, StoreError> {
        let reason = t.verdict.as_ref().map(|(_, r)| clean_text(r));
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE replay_jobs SET canary_state = ");
            DB::bind(&mut qb, Val::Text(Some(t.to.as_str())));
            if let Some(size) = t.size {
                qb.push(", canary_size = ");
                DB::bind(&mut qb, Val::I64(Some(size)));
            }
            if let Some(until) = t.watch_until_ms {
                qb.push(", canary_watch_until_ms = ");
                DB::bind(&mut qb, Val::I64(Some(until)));
            }
            if let Some((c, _)) = &t.verdict {
                qb.push(", canary_published = ");
                DB::bind(&mut qb, Val::I64(Some(c.published)));
                qb.push(", canary_refailed = ");
                DB::bind(&mut qb, Val::I64(Some(c.refailed)));
                qb.push(", canary_decided_at_ms = ");
                DB::bind(&mut qb, Val::I64(Some(now)));
                qb.push(", canary_reason = ");
                DB::bind(&mut qb, Val::OwnedText(reason.clone()));
            }
            let failed = t.to == CanaryState::Failed;
            if failed {
                qb.push(
                    ", status = CASE WHEN status IN ('running', 'waiting') THEN 'paused' \
                     ELSE status END",
                );
            }
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::Text(Some(job_id)));
            qb.push(" AND canary_state = ");
            DB::bind(&mut qb, Val::Text(Some(t.from)));
            qb.push(" RETURNING status");
            let hit: Option<String> = qb
                .build_query_scalar()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
            let Some(status) = hit else {
                tx.rollback().await.map_err(store_error)?;
                return Ok(false);
            };
            if failed && status == "paused" {
                let audit = NewAuditEntry {
                    actor: CANARY_ACTOR.to_string(),
                    action: "pause_job".to_string(),
                    outcome: "ok".to_string(),
                    job_id: Some(job_id.to_string()),
                    reason: reason.clone(),
                    detail: t.verdict.as_ref().map(|(c, _)| {
                        serde_json::json!({"canary": {
                            "published": c.published,
                            "refailed": c.refailed,
                            "failed": c.failed,
                        }})
                        .to_string()
                    }),
                    ..NewAuditEntry::default()
                };
                super::audit::insert_audit::<DB>(&audit, now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<bool, StoreError>(true)
        })
    }

    /// `job`'s canary with live counts while it runs (the stored ones once decided): what
    /// [`Store::job`] returns. `None` without a canary.
    pub(super) async fn live_canary(
        &self,
        job_id: &str,
        stored: Option<CanaryStatus>,
    ) -> Result<Option<CanaryStatus>, StoreError> {
        let Some(mut c) = stored else {
            return Ok(None);
        };
        if matches!(c.state, CanaryState::Publishing | CanaryState::Watching) {
            let n = self.canary_counts(job_id).await?;
            c.published = n.published;
            c.failed = n.failed;
            c.refailed = n.refailed;
        }
        Ok(Some(c))
    }
}

/// The job row's canary columns as [`CanaryStatus`]; `None` without a canary.
#[allow(clippy::too_many_arguments)]
pub(super) fn status_from_columns(
    state: Option<&str>,
    size: Option<i64>,
    watch_until_ms: Option<i64>,
    published: Option<i64>,
    refailed: Option<i64>,
    decided_at_ms: Option<i64>,
    reason: Option<String>,
) -> Option<CanaryStatus> {
    let state = CanaryState::parse(state?)?;
    Some(CanaryStatus {
        state,
        size,
        published: published.unwrap_or(0),
        failed: 0,
        refailed: refailed.unwrap_or(0),
        watch_until_ms,
        decided_at_ms,
        reason,
    })
}

/// Now, epoch ms (for the relay's hook).
pub(crate) fn now() -> i64 {
    now_ms()
}

#[cfg(test)]
#[path = "canary_tests.rs"]
pub(super) mod tests;
