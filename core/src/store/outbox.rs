//! The relay's side of the outbox: find jobs with work and claim due rows under a lease
//! (`outbox_mark.rs` records what became of each publish) — all in the store, so that the
//! relay itself keeps no state a crash could lose.
//!
//! # Claims and leases
//! A claim moves due rows (`pending` with `next_attempt_at_ms <= now`, or `claimed` with an
//! expired lease: their relay died) to `claimed`, with `lease_until_ms = now + lease` and a
//! fresh `claim_token`. Every later mark names the token and only touches rows still
//! `claimed` under it, so a relay whose lease ran out cannot count a row twice: a row is
//! counted once, by the mark that moves it out of `claimed`. On PostgreSQL the claim uses
//! `FOR UPDATE SKIP LOCKED`, so several relays can share one outbox.

use sqlx::QueryBuilder;

use super::actions::{ids_json, now_ms};
use super::canary::Room;
use super::codec::decode_headers;
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::model::{Convention, Header};

/// A job with work for the relay: running or waiting, or holding a row whose lease expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActiveJob {
    pub(crate) id: String,
    /// The user who requested it: the `redrive-replayed-by` header and the events' actor.
    pub(crate) created_by: String,
    /// msgs/s; `None` = unthrottled.
    pub(crate) rate_per_sec: Option<u32>,
    /// When its current outage began (epoch ms); `None` while it publishes.
    pub(crate) waiting_since_ms: Option<i64>,
    /// Its publishing options (`replay_jobs.options`).
    pub(crate) options: crate::actions::ReplayOptions,
    /// `running` or `waiting`: it publishes. `false` for a job the relay visits only to settle
    /// claims whose lease expired (cancelled, paused, finished): gates that hold back new
    /// publishes (the lag gate) must not keep those claims from being settled.
    pub(crate) publishing: bool,
}

/// One claimed outbox row with what the relay needs to build the record.
#[derive(Debug, Clone)]
pub(crate) struct ClaimedRow {
    pub(crate) outbox_id: i64,
    pub(crate) dead_letter_id: i64,
    pub(crate) idempotency_key: String,
    pub(crate) target_topic: String,
    /// Failed attempts before this one.
    pub(crate) attempts: i32,
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) value: Option<Vec<u8>>,
    pub(crate) headers: Vec<Header>,
    pub(crate) convention: Convention,
    /// Replays so far (this one not counted yet).
    pub(crate) replay_count: i32,
    /// The edited version whose key, value and headers these are (`versions.rs`); 0 = the
    /// original.
    pub(crate) version: i32,
    /// The partition the record came from, as its convention decoded it (for
    /// `ReplayOptions::original_partition`).
    pub(crate) source_partition: Option<i32>,
}

/// The rows of one claim and the token that holds them.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub(crate) token: String,
    pub(crate) rows: Vec<ClaimedRow>,
}

#[derive(Debug, sqlx::FromRow)]
struct ActiveRow {
    id: String,
    created_by: String,
    rate_per_sec: Option<i32>,
    waiting_since_ms: Option<i64>,
    options: String,
    status: String,
}

impl TryFrom<ActiveRow> for ActiveJob {
    type Error = StoreError;

    /// Errors: `Corrupt` for options this version cannot read.
    fn try_from(r: ActiveRow) -> Result<ActiveJob, StoreError> {
        let options = crate::actions::ReplayOptions::from_json(&r.options)
            .map_err(|e| StoreError::Corrupt(format!("replay job `{}` options: {e}", r.id)))?;
        Ok(ActiveJob {
            id: r.id,
            created_by: r.created_by,
            rate_per_sec: r.rate_per_sec.and_then(|n| u32::try_from(n).ok()),
            waiting_since_ms: r.waiting_since_ms,
            options,
            publishing: matches!(r.status.as_str(), "running" | "waiting"),
        })
    }
}

#[derive(Debug, sqlx::FromRow)]
struct ClaimRow {
    outbox_id: i64,
    dead_letter_id: i64,
    idempotency_key: String,
    target_topic: String,
    attempts: i32,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: String,
    /// The `stack_trace` column, which the headers may refer to (`codec::decode_headers`).
    stack_trace: Option<String>,
    convention: String,
    replay_count: i32,
    version: i32,
    source_partition: Option<i32>,
}

impl Store {
    /// Jobs the relay should work on, oldest first: `running` or `waiting` ones.
    pub(crate) async fn active_jobs(&self) -> Result<Vec<ActiveJob>, StoreError> {
        let rows: Vec<ActiveRow> = on_pool!(self, |pool, DB| {
            let qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT id, created_by, rate_per_sec, waiting_since_ms, options, status FROM replay_jobs \
                 WHERE status IN ('running', 'waiting') ORDER BY created_at_ms, id",
            );
            let mut qb = qb;
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        rows.into_iter().map(ActiveJob::try_from).collect()
    }

    /// Jobs of any status holding a claimed row whose lease expired before `now` (a relay
    /// died holding it; for a cancelled job its in-flight rows still have to be accounted
    /// for). Oldest first.
    pub(crate) async fn jobs_with_expired_claims(
        &self,
        now: i64,
    ) -> Result<Vec<ActiveJob>, StoreError> {
        let rows: Vec<ActiveRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT id, created_by, rate_per_sec, waiting_since_ms, options, status FROM replay_jobs WHERE id IN \
                 (SELECT job_id FROM outbox WHERE status = 'claimed' AND lease_until_ms < ",
            );
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(") ORDER BY created_at_ms, id");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        rows.into_iter().map(ActiveJob::try_from).collect()
    }

    /// Claims up to `limit` due rows of `job_id` (oldest first) for `lease_ms`, and loads
    /// their dead letters. With `after_id`, only pending rows after that outbox id: a worker
    /// walks its job with this cursor, so each claim starts where the last one ended instead
    /// of stepping over everything already published (on PostgreSQL, over their dead index
    /// entries too). `reclaim_expired` first takes rows whose lease ran out. An empty claim
    /// means nothing (after the cursor) is due now.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt` (stored headers that do not parse: the
    /// whole claim is refused; its rows are reclaimed after the lease).
    pub(crate) async fn claim(
        &self,
        job_id: &str,
        limit: usize,
        lease_ms: u64,
        after_id: Option<i64>,
        reclaim_expired: bool,
    ) -> Result<Claim, StoreError> {
        let now = now_ms();
        let token = uuid::Uuid::new_v4().to_string();
        let lease_until = now.saturating_add(i64::try_from(lease_ms).unwrap_or(i64::MAX / 2));
        let limit = limit.max(1) as i64;
        let rows: Vec<ClaimRow> = on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            // Canary replay (`canary.rs`): nothing while the canary starts or is watched;
            // while it publishes, its own rows and new ones up to its size (flagged).
            let gate: Option<(String, Option<i64>)> = super::canary::claim_gate::<DB>(job_id)
                .build_query_as()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
            let taken: i64 = match &gate {
                Some((s, _)) if s == "publishing" => super::canary::taken::<DB>(job_id)
                    .build_query_scalar()
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(store_error)?,
                _ => 0,
            };
            let room = super::canary::room(gate.as_ref(), taken);
            // The job's first claim stamps `started_at_ms` (undone by the rollback below if
            // nothing is claimed). Lock order: the job's row before its outbox rows, as
            // `cancel_job`, pause and the bulk actions take them; the other order deadlocked
            // against a cancel on PostgreSQL (CI, 2026-12-02). Once stamped, the WHERE
            // matches nothing and no lock is taken.
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE replay_jobs SET started_at_ms = ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(" WHERE started_at_ms IS NULL AND id = ");
            DB::bind(&mut qb, Val::Text(Some(job_id)));
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            // Rows whose relay died holding them (when asked), then due pending rows: two
            // index ranges on (job_id, status, held, id) instead of one OR that would walk every
            // row the job has already published. The third element: only rows with this
            // `canary` flag (a canary's retries first, then new rows up to its room).
            let mut passes = vec![("claimed", "lease_until_ms", None)];
            match room {
                Room::Open => passes.push(("pending", "next_attempt_at_ms", None)),
                Room::Hold => passes.clear(),
                Room::Canary(_) => {
                    passes.push(("pending", "next_attempt_at_ms", Some(1)));
                    passes.push(("pending", "next_attempt_at_ms", Some(0)));
                }
            }
            let mut ids: Vec<i64> = Vec::new();
            for (condition, deadline_column, canary) in passes {
                let mut want = limit - ids.len() as i64;
                if let (Room::Canary(n), Some(0)) = (room, canary) {
                    want = want.min(n);
                }
                if want <= 0 {
                    break;
                }
                if condition == "claimed" && !reclaim_expired {
                    continue;
                }
                // Expired leases are strictly before now; due attempts are at or before now.
                let op = if condition == "claimed" {
                    " < "
                } else {
                    " <= "
                };
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("UPDATE outbox SET status = 'claimed', lease_until_ms = ");
                DB::bind(&mut qb, Val::I64(Some(lease_until)));
                qb.push(", claim_token = ");
                DB::bind(&mut qb, Val::Text(Some(&token)));
                if canary == Some(0) {
                    qb.push(", canary = 1");
                }
                qb.push(" WHERE id")
                    .push(DB::IDS_OF_OPEN)
                    .push("SELECT id FROM outbox WHERE job_id = ");
                DB::bind(&mut qb, Val::Text(Some(job_id)));
                qb.push(" AND status = '")
                    .push(condition)
                    .push("' AND ")
                    .push(deadline_column)
                    .push(op);
                DB::bind(&mut qb, Val::I64(Some(now)));
                // Per-key order: a row waiting for an earlier one of its key is not due. A
                // claimed row is never held (only pending rows are, `order.rs`), so the
                // expired-lease pass says it too: both passes are then one ordered range of
                // `outbox_claimable (job_id, status, held, id)` (migration 0033).
                qb.push(" AND held = 0");
                if let Some(flag) = canary {
                    qb.push(" AND canary = ").push(flag);
                }
                if let (Some(after), "pending") = (after_id, condition) {
                    qb.push(" AND id > ");
                    DB::bind(&mut qb, Val::I64(Some(after)));
                }
                // Only while the job is running or waiting: a paused (or cancelled) job's rows
                // stay where they are (`job_control.rs`).
                qb.push(
                    " AND EXISTS (SELECT 1 FROM replay_jobs j WHERE j.id = outbox.job_id \
                     AND j.status IN ('running', 'waiting'))",
                );
                qb.push(" ORDER BY id LIMIT ");
                DB::bind(&mut qb, Val::I64(Some(want)));
                qb.push(DB::SKIP_LOCKED)
                    .push(DB::IDS_OF_CLOSE)
                    .push(" RETURNING id");
                let got: Vec<i64> = qb
                    .build_query_scalar()
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(store_error)?;
                ids.extend(got);
            }
            if ids.is_empty() {
                tx.rollback().await.map_err(store_error)?;
                return Ok(Claim {
                    token,
                    rows: Vec::new(),
                });
            }
            ids.sort_unstable();
            tx.commit().await.map_err(store_error)?;
            // Read after the commit: SQLite's write lock is held only for the claim itself.
            // The rows are ours by token until the lease ends.
            // The row's pinned version (an edit) in place of the original, never beside it.
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT o.id AS outbox_id, o.dead_letter_id, o.idempotency_key, o.target_topic, \
                 o.attempts, {}, d.convention, d.replay_count, \
                 d.source_partition \
                 FROM outbox o JOIN dead_letters d ON d.id = o.dead_letter_id {} WHERE o.id IN ",
                super::versions::CLAIM_RECORD_COLUMNS,
                super::versions::CLAIM_VERSION_JOIN
            ));
            DB::push_json_ids(&mut qb, ids_json(&ids));
            qb.push(" ORDER BY o.id");
            qb.build_query_as()
                .fetch_all(pool)
                .await
                .map_err(store_error)
        })?;
        let rows = rows
            .into_iter()
            .map(|r| {
                Ok(ClaimedRow {
                    outbox_id: r.outbox_id,
                    dead_letter_id: r.dead_letter_id,
                    idempotency_key: r.idempotency_key,
                    target_topic: r.target_topic,
                    attempts: r.attempts,
                    key: r.key,
                    value: r.value,
                    headers: decode_headers(&r.headers, r.stack_trace.as_deref())?,
                    convention: Convention::parse(&r.convention),
                    replay_count: r.replay_count,
                    version: r.version,
                    source_partition: r.source_partition,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(Claim { token, rows })
    }
}

#[cfg(test)]
mod tests {
    use super::super::outbox_mark::{MarkBatch, Published, Retry};
    use super::*;
    use crate::actions::{Actor, JobStatus, ReplayRequest, Selection};
    use crate::model::{NewDeadLetter, Status};

    fn dead_letter(offset: i64) -> NewDeadLetter {
        // Distinct keys: per-key order would otherwise claim one at a time.
        crate::store::test_records::dead_letter(offset, Some(format!("k{offset}")))
    }

    /// An in-memory store with `n` dead letters and eve's replay of all of them.
    async fn replay_of(n: i64) -> (Store, Actor, crate::actions::ReplayJob) {
        let store = Store::connect("sqlite::memory:").await.unwrap();
        store.migrate().await.unwrap();
        let batch: Vec<NewDeadLetter> = (0..n).map(dead_letter).collect();
        store.insert_batch(&batch).await.unwrap();
        let actor = Actor::operator("eve");
        let job = store
            .request_replay(
                &actor,
                &ReplayRequest {
                    selection: Selection::Filter(crate::Filter::default()),
                    target_topic: None,
                    rate_per_sec: None,
                    reason: None,
                    options: Default::default(),
                },
            )
            .await
            .unwrap();
        (store, actor, job)
    }

    /// A record that comes back as a dead letter before the relay recorded its delivery
    /// report ends `re_failed` when the mark comes; the other one of the batch `replayed`.
    #[tokio::test]
    async fn a_mark_settles_a_record_that_already_came_back_as_re_failed() {
        let (store, _, job) = replay_of(2).await;
        let claim = store.claim(&job.id, 10, 60_000, None, false).await.unwrap();
        assert_eq!(claim.rows.len(), 2);
        let (back, quiet) = (&claim.rows[0], &claim.rows[1]);
        // The consumer already failed on `back` again: its dead letter carries the key.
        let mut again = dead_letter(10);
        again.record.headers = vec![crate::model::Header {
            name: crate::replay::HEADER_IDEMPOTENCY_KEY.into(),
            value: Some(back.idempotency_key.clone().into_bytes()),
        }];
        store.insert_batch(&[again]).await.unwrap();

        store
            .mark(&MarkBatch {
                job_id: job.id.clone(),
                claim_token: claim.token.clone(),
                actor: "eve".into(),
                published: [back, quiet]
                    .iter()
                    .zip([7, 8])
                    .map(|(r, offset)| Published {
                        outbox_id: r.outbox_id,
                        partition: 0,
                        offset,
                    })
                    .collect(),
                retry: vec![],
                failed: vec![],
                released: vec![],
                release_at_ms: 0,
                release_error: None,
                outage: false,
                last: true,
                script: Default::default(),
            })
            .await
            .unwrap();
        let status = |id| {
            let store = store.clone();
            async move { store.get(id).await.unwrap().unwrap().summary.status }
        };
        assert_eq!(status(back.dead_letter_id).await, Status::ReFailed);
        assert_eq!(status(quiet.dead_letter_id).await, Status::Replayed);
        assert_eq!(store.job(&job.id).await.unwrap().unwrap().refailed, 1);
    }

    /// A job of 3 whose relay has claimed all 3 when it is cancelled: the cancel releases
    /// every dead letter at once (none stays `replay_pending` under a cancelled job), the
    /// relay's later retry or release touches nothing, and the one publish that was already
    /// in flight is recorded as what it was, published, with the job's counts adding up.
    #[tokio::test]
    async fn cancelling_a_claimed_job_releases_its_rows_and_keeps_a_late_publish() {
        let (store, actor, job) = replay_of(3).await;
        let claim = store.claim(&job.id, 10, 60_000, None, false).await.unwrap();
        assert_eq!(claim.rows.len(), 3);

        let cancelled = store.cancel_job(&actor, &job.id).await.unwrap();
        assert_eq!(cancelled.status, JobStatus::Cancelled);
        assert_eq!(cancelled.cancelled, 3);
        for r in &claim.rows {
            let dl = store.get(r.dead_letter_id).await.unwrap().unwrap();
            assert_eq!(dl.summary.status, Status::New, "released at once");
        }

        // The relay comes back: one was published meanwhile, one failed an attempt, one was
        // never sent.
        let (sent, retry, unsent) = (&claim.rows[0], &claim.rows[1], &claim.rows[2]);
        let summary = store
            .mark(&MarkBatch {
                job_id: job.id.clone(),
                claim_token: claim.token.clone(),
                actor: "eve".into(),
                published: vec![Published {
                    outbox_id: sent.outbox_id,
                    partition: 0,
                    offset: 42,
                }],
                retry: vec![Retry {
                    outbox_id: retry.outbox_id,
                    next_attempt_at_ms: 0,
                    error: "timed out".into(),
                }],
                failed: vec![],
                released: vec![unsent.outbox_id],
                release_at_ms: 0,
                release_error: None,
                outage: false,
                last: true,
                script: Default::default(),
            })
            .await
            .unwrap();
        assert_eq!(
            (summary.published, summary.retried, summary.released),
            (1, 0, 0)
        );
        let done = store.job(&job.id).await.unwrap().unwrap();
        assert_eq!(done.status, JobStatus::Cancelled);
        assert_eq!((done.published, done.cancelled), (1, 2));
        let status = |id| {
            let store = store.clone();
            async move { store.get(id).await.unwrap().unwrap().summary.status }
        };
        assert_eq!(status(sent.dead_letter_id).await, Status::Replayed);
        assert_eq!(status(retry.dead_letter_id).await, Status::New);
        assert_eq!(status(unsent.dead_letter_id).await, Status::New);
        // Nothing of a cancelled job can be claimed again.
        let again = store.claim(&job.id, 10, 60_000, None, true).await.unwrap();
        assert!(again.rows.is_empty());
    }

    /// A job's counters while it publishes are its row plus its marks' tally rows
    /// (`job_tallies.rs`); when it finishes, the tally rows are folded into its row and the
    /// counts stay what they were.
    #[tokio::test]
    async fn a_jobs_counts_add_up_from_tally_rows_and_are_folded_when_it_finishes() {
        let (store, _, job) = replay_of(5).await;
        let tally_rows = |store: Store| async move {
            let Pool::Sqlite(pool) = &store.pool else {
                unreachable!()
            };
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM replay_job_tallies")
                .fetch_one(pool)
                .await
                .unwrap()
        };
        let batch = |claim: &Claim, published: &[usize], failed: &[usize], last: bool| MarkBatch {
            job_id: job.id.clone(),
            claim_token: claim.token.clone(),
            actor: "eve".into(),
            published: published
                .iter()
                .map(|i| Published {
                    outbox_id: claim.rows[*i].outbox_id,
                    partition: 0,
                    offset: *i as i64,
                })
                .collect(),
            failed: failed
                .iter()
                .map(|i| super::super::outbox_mark::Failed {
                    outbox_id: claim.rows[*i].outbox_id,
                    dead_letter_id: claim.rows[*i].dead_letter_id,
                    error: "too large".into(),
                })
                .collect(),
            last,
            ..MarkBatch::default()
        };
        let first = store.claim(&job.id, 3, 60_000, None, false).await.unwrap();
        store
            .mark(&batch(&first, &[0, 1], &[2], false))
            .await
            .unwrap();
        let during = store.job(&job.id).await.unwrap().unwrap();
        assert_eq!(
            (during.status, during.published, during.failed),
            (JobStatus::Running, 2, 1)
        );
        assert_eq!(tally_rows(store.clone()).await, 1);

        let rest = store.claim(&job.id, 3, 60_000, None, false).await.unwrap();
        assert_eq!(rest.rows.len(), 2);
        let summary = store.mark(&batch(&rest, &[0, 1], &[], true)).await.unwrap();
        assert!(summary.finished);
        let done = store.job(&job.id).await.unwrap().unwrap();
        assert_eq!(
            (done.status, done.published, done.failed),
            (JobStatus::Finished, 4, 1)
        );
        assert_eq!(
            tally_rows(store.clone()).await,
            0,
            "folded into the job's row"
        );
        assert_eq!(store.job_counts().await.unwrap().published, 4);
    }
}
