//! A replay job's rate limit, shared by every relay instance through the store (issue 12
//! item 8; `docs/replay.md`, "Rate limit"; migration 0026, table `replay_rate`).
//!
//! The job's token bucket is kept as a GCRA state ("generic cell rate algorithm", the
//! virtual-scheduling form of a token bucket used by ATM networks and by rate limiters such
//! as `governor`): one number, the theoretical arrival time `tat_us`, the end of the last
//! slot granted. A relay about to send `k` records of a job throttled at `rate` msgs/s takes
//! a *slot* with one UPSERT:
//!
//! ```text
//! start  = max(tat_us, now - tolerance)        (tolerance = the burst a job may catch up)
//! tat_us = start + k * 10^6 / rate
//! ```
//!
//! and sends record `i` of the slot at `start + i * 10^6 / rate`. Slots never overlap and
//! each is as long as its records take at the job's rate, so however many instances take
//! slots, the records granted up to any time `t` are at most `rate × (t − first) + rate ×
//! tolerance + k`: the job publishes at its rate, together, not at the rate per instance.
//! The UPSERT is one atomic statement (PostgreSQL locks the row for its duration, SQLite has
//! one writer), so two instances never get the same slot.
//!
//! The clock is the store's on PostgreSQL (`clock_timestamp()`, so that instances whose
//! clocks disagree still share one timeline: each waits `start − store_now` on its own
//! clock), and the relay's on SQLite (one file, one host).

use sqlx::QueryBuilder;

use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};

/// One slot of a throttled job (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RateSlot {
    /// µs to wait, from when the store answered, before the slot's first record may go
    /// (`start − now` on the store's clock; negative: already due).
    pub(crate) wait_us: i64,
    /// µs between two records of the slot (`10^6 / rate`).
    pub(crate) interval_us: i64,
}

/// What the store recorded of a job's rate limit (for tests and the bench).
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct RateState {
    /// End of the last slot granted, µs since the epoch.
    pub tat_us: i64,
    /// Records granted so far.
    pub granted: i64,
    /// Slots granted so far.
    pub slots: i64,
    /// The first slot's start, µs since the epoch.
    pub first_us: i64,
}

/// The store's clock in µs since the epoch, as SQL: PostgreSQL's (shared by every instance);
/// on SQLite the relay binds its own (see the module docs).
fn now_us_sql<DB: Dialect>() -> Option<&'static str> {
    if DB::ONE_WRITER {
        None
    } else {
        Some("CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)")
    }
}

impl Store {
    /// Takes the next slot of `k` records (at least 1) of job `job_id` throttled at `rate`
    /// msgs/s, allowing the job to catch up at most `tolerance_us` µs of unused time (its
    /// burst): one UPSERT on `replay_rate`. The slot is granted only if it starts at most
    /// `latest_start_us` µs from now (the relay's lease would end before it otherwise):
    /// `Ok(None)` then, and the bucket is left as it was, so a relay that cannot use a slot
    /// never pushes the job's slots further out.
    ///
    /// Errors: `Unavailable`, `Database` (no slot was taken: send nothing).
    pub(crate) async fn take_rate_slot(
        &self,
        job_id: &str,
        k: u32,
        rate: u32,
        tolerance_us: i64,
        latest_start_us: i64,
    ) -> Result<Option<RateSlot>, StoreError> {
        let k = i64::from(k.max(1));
        let interval_us = 1_000_000 / i64::from(rate.max(1));
        // The slot's length in µs, exact for any rate (not k × the rounded interval).
        let span_us = k * 1_000_000 / i64::from(rate.max(1));
        let local_now = super::actions::now_ms().saturating_mul(1_000);
        let answer: Option<(i64, i64)> = on_write_conn!(self, |conn, DB| {
            let push_now = |qb: &mut QueryBuilder<'_, DB>| match now_us_sql::<DB>() {
                Some(sql) => {
                    qb.push(sql);
                }
                None => DB::bind(qb, Val::I64(Some(local_now))),
            };
            let greatest = if DB::ONE_WRITER { "MAX" } else { "GREATEST" };
            // The first slot starts now; a later one where the last ended, or (after an idle
            // spell) no earlier than `now - tolerance`.
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "INSERT INTO replay_rate (job_id, tat_us, granted, slots, first_us) SELECT ",
            );
            DB::bind(&mut qb, Val::Text(Some(job_id)));
            qb.push(", n.now_us + ");
            DB::bind(&mut qb, Val::I64(Some(span_us)));
            qb.push(", ");
            DB::bind(&mut qb, Val::I64(Some(k)));
            qb.push(", 1, n.now_us FROM (SELECT ");
            push_now(&mut qb);
            // `WHERE true`: SQLite cannot otherwise tell the upsert's ON from a join's.
            qb.push(" AS now_us) n WHERE true ON CONFLICT (job_id) DO UPDATE SET tat_us = ")
                .push(greatest)
                .push("(replay_rate.tat_us, ");
            push_now(&mut qb);
            qb.push(" - ");
            DB::bind(&mut qb, Val::I64(Some(tolerance_us.max(0))));
            qb.push(") + ");
            DB::bind(&mut qb, Val::I64(Some(span_us)));
            qb.push(", granted = replay_rate.granted + ");
            DB::bind(&mut qb, Val::I64(Some(k)));
            // Only a slot that starts in time: otherwise no row is updated, none returned.
            qb.push(", slots = replay_rate.slots + 1 WHERE ")
                .push(greatest)
                .push("(replay_rate.tat_us, ");
            push_now(&mut qb);
            qb.push(" - ");
            DB::bind(&mut qb, Val::I64(Some(tolerance_us.max(0))));
            qb.push(") <= ");
            push_now(&mut qb);
            qb.push(" + ");
            DB::bind(&mut qb, Val::I64(Some(latest_start_us)));
            qb.push(" RETURNING tat_us, ");
            push_now(&mut qb);
            qb.build_query_as().fetch_optional(&mut *conn).await
        })
        .map_err(store_error)?;
        Ok(answer.map(|(tat, now)| RateSlot {
            wait_us: tat - span_us - now,
            interval_us,
        }))
    }

    /// What the store recorded of job `job_id`'s shared rate limit; `None` before its first
    /// slot (or for an unthrottled job).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn replay_rate_state(&self, job_id: &str) -> Result<Option<RateState>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT tat_us, granted, slots, first_us FROM replay_rate WHERE job_id = ",
            );
            DB::bind(&mut qb, Val::Text(Some(job_id)));
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use crate::actions::{Actor, ReplayOptions, ReplayRequest, Selection};

    /// Slots of one job never overlap and are counted: ten slots of 5 records at 100 msgs/s
    /// cover at least 500 ms, whenever they are taken.
    #[tokio::test]
    async fn slots_follow_each_other_at_the_rate() {
        let url = std::env::var("REDRIVE_ORDER_TEST_URL")
            .unwrap_or_else(|_| "sqlite::memory:".to_string());
        let store = Store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        let actor = Actor::operator("eve");
        let job = store
            .request_replay(
                &actor,
                &ReplayRequest {
                    selection: Selection::Ids(vec![]),
                    target_topic: Some("t".into()),
                    rate_per_sec: Some(100),
                    reason: None,
                    options: ReplayOptions::default(),
                },
            )
            .await
            .unwrap();
        assert_eq!(store.replay_rate_state(&job.id).await.unwrap(), None);
        // 10 slots of 5 records at 100 msgs/s: 50 ms each, back to back.
        let mut waits = Vec::new();
        for _ in 0..10 {
            let s = store
                .take_rate_slot(&job.id, 5, 100, 0, 60_000_000)
                .await
                .unwrap()
                .expect("a slot within a minute");
            assert_eq!(s.interval_us, 10_000);
            waits.push(s.wait_us);
        }
        assert!(waits[0] <= 0, "the first slot starts now: {waits:?}");
        let state = store.replay_rate_state(&job.id).await.unwrap().unwrap();
        assert_eq!(state.granted, 50);
        assert_eq!(state.slots, 10);
        // Never faster than the rate: the ten slots span at least 500 ms of the store's clock.
        assert!(state.tat_us - state.first_us >= 500_000, "{state:?}");
        // A slot that would start later than the relay can use it is refused, and the bucket
        // is left as it was: after a slot of 60 s worth, none starts within the next second.
        store
            .take_rate_slot(&job.id, 6_000, 100, 0, 60_000_000)
            .await
            .unwrap()
            .expect("a slot that starts within a minute");
        let state = store.replay_rate_state(&job.id).await.unwrap();
        let refused = store
            .take_rate_slot(&job.id, 5, 100, 0, 1_000_000)
            .await
            .unwrap();
        assert_eq!(refused, None);
        assert_eq!(store.replay_rate_state(&job.id).await.unwrap(), state);
    }
}
