//! A throttled batch's pacing (`docs/replay.md`, "Rate limit"): slots of the job's rate taken
//! from the store (`store/replay_rate.rs`, one bucket shared by every relay instance), each
//! record sent at its place in its slot.
//!
//! Slots are taken **ahead**: while the batch sends, the next slot is already being asked for
//! in a task of its own, so that the batch holds [`LOOKAHEAD`] of granted slots before it
//! needs them. A store round trip (on SQLite, waiting for the relay's turn to write while a
//! mark commits; on PostgreSQL, a slow statement) then costs the job nothing, as long as it
//! is shorter than the lookahead. Before (one slot asked for when the last was used up),
//! every round trip longer than the catch-up tolerance was lost for good: the 2026-12-02
//! bench measured 893 and 852 msgs/s for a job throttled at 1,000 (`docs/bench.md`).
//!
//! The lookahead does not change what the job may send: the slots are the bucket's, granted
//! back to back, and a record never goes before its place in its slot. Slots taken ahead and
//! not used (a pause, a shutdown) are lost: the job only goes slower. A slot that would start
//! after the batch must stop sending (half its lease) is refused by the store and costs the
//! bucket nothing, and none is asked for once the granted ones reach that time: relays
//! handing rows back never push the job's slots out of reach (several instances sharing a
//! low rate did that, and stalled the job, before the refusal existed).
//!
//! When every row of the batch has a slot, the pace says so (`all_granted`): the worker then
//! claims the next batch, which takes the slots after these, while this one sends its last
//! records.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::store::{RateSlot, Store, StoreError};

/// How far ahead of its sending a throttled batch holds granted slots: longer than a mark
/// holds SQLite's write turn (50–320 ms in the 2026-12-03 bench), short enough that a pause
/// loses little of the job's budget.
const LOOKAHEAD: Duration = Duration::from_millis(500);

/// How long a throttled job may catch up after falling behind its slots (a store round trip
/// longer than the lookahead, an idle spell), µs: also its largest burst, 1/20 s worth of
/// records, so the pace is even and a burst never exceeds 5 % of a second's budget.
const RATE_TOLERANCE_US: i64 = 50_000;

/// One granted slot, on this process's clock.
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// When its next record may go.
    next: Instant,
    /// Its records' spacing (`1 s / rate`).
    interval: Duration,
    /// Records of it not yet sent.
    left: u32,
}

impl Slot {
    /// Where the slot's records end: after its last record's place.
    fn end(&self) -> Instant {
        self.next + self.interval * self.left
    }
}

/// What a slot request answers: the slot and when the answer arrived (the slot's wait is
/// counted from then).
type Answer = Result<Option<(RateSlot, Instant)>, StoreError>;

/// A throttled batch's pacing (see the module docs).
pub(super) struct Pace {
    job_id: Arc<str>,
    store: Store,
    /// The relay's turn to write on SQLite (`Relay::write_turn`); `None` on PostgreSQL.
    write_turn: Option<Arc<tokio::sync::Mutex<()>>>,
    /// msgs/s.
    rate: u32,
    /// Granted slots, oldest first.
    slots: VecDeque<Slot>,
    /// Records granted and not yet sent (the sum of `slots`' `left`, plus the request in
    /// flight's).
    granted: usize,
    /// Where the last slot granted ends (it may be used up already).
    granted_until: Option<Instant>,
    /// The slot request in flight, and how many records it asks for.
    pending: Option<(u32, JoinHandle<Answer>)>,
    /// No further slot is asked for (a request failed, or the store refused a slot that
    /// would start too late): the granted ones are used up.
    closed: bool,
    /// Told (or dropped) once every row of the batch has a slot, or none will get one.
    all_granted: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Pace {
    /// A pace for one batch of job `job_id` at `rate` msgs/s; `all_granted` is told when
    /// every row of the batch has a slot (see the module docs).
    pub(super) fn new(
        job_id: &str,
        rate: u32,
        store: Store,
        write_turn: Option<Arc<tokio::sync::Mutex<()>>>,
        all_granted: Option<tokio::sync::oneshot::Sender<()>>,
    ) -> Pace {
        Pace {
            job_id: job_id.into(),
            store,
            write_turn,
            rate: rate.max(1),
            slots: VecDeque::new(),
            granted: 0,
            granted_until: None,
            pending: None,
            closed: false,
            all_granted,
        }
    }

    /// Tells the worker that this batch asks for no further slot.
    fn granted_all(&mut self) {
        if let Some(tx) = self.all_granted.take() {
            let _ = tx.send(());
        }
    }

    /// Asks for no further slot: the batch ends with the slots granted so far. `refused`:
    /// records asked for that the store did not grant.
    fn close(&mut self, refused: u32) {
        self.closed = true;
        self.granted -= refused as usize;
        self.granted_all();
    }

    /// When the next record may be sent, `rows_left` counting it and the rows after it in the
    /// batch. Waits for a slot only when none is granted.
    ///
    /// `None`: send nothing more of this batch (hand the rest back): no slot could be taken
    /// (the store is unavailable; the error is returned once in `Err` for the caller's
    /// status first, then `None`), or the next record's place is after `send_by`.
    pub(super) async fn next_send_at(
        &mut self,
        rows_left: usize,
        send_by: Instant,
    ) -> Result<Option<Instant>, StoreError> {
        loop {
            self.collect_answer(false).await?;
            self.ask_ahead(rows_left, send_by);
            if let Some(front) = self.slots.front_mut() {
                let at = front.next;
                if at > send_by {
                    return Ok(None);
                }
                front.next += front.interval;
                front.left -= 1;
                if front.left == 0 {
                    self.slots.pop_front();
                }
                self.granted -= 1;
                // The next request starts now, while the caller sleeps until `at`.
                self.ask_ahead(rows_left - 1, send_by);
                return Ok(Some(at));
            }
            if self.pending.is_none() {
                return Ok(None); // closed: failed, refused, or the lease's half is spent
            }
            self.collect_answer(true).await?;
        }
    }

    /// Takes the answer of the request in flight into `slots`: at once if it has arrived,
    /// or (with `wait`) when it does.
    async fn collect_answer(&mut self, wait: bool) -> Result<(), StoreError> {
        let Some((k, handle)) = self.pending.take() else {
            return Ok(());
        };
        if !wait && !handle.is_finished() {
            self.pending = Some((k, handle));
            return Ok(());
        }
        let answer = handle
            .await
            .unwrap_or_else(|e| Err(StoreError::Unavailable(format!("rate slot request: {e}"))));
        match answer {
            Ok(None) => {
                // Refused: it would start after `send_by`.
                self.close(k);
                Ok(())
            }
            Ok(Some((slot, answered))) => {
                let next = if slot.wait_us >= 0 {
                    answered + Duration::from_micros(slot.wait_us as u64)
                } else {
                    answered
                        .checked_sub(Duration::from_micros(slot.wait_us.unsigned_abs()))
                        .unwrap_or(answered)
                };
                // Slots never overlap in the bucket; on this clock a slot could start up to
                // a clock tick before the last one ends (the store's clock is read in ms on
                // SQLite, across a round trip on PostgreSQL): never before it.
                let next = self.granted_until.map_or(next, |until| next.max(until));
                let slot = Slot {
                    next,
                    interval: Duration::from_micros(slot.interval_us.max(0) as u64),
                    left: k,
                };
                self.granted_until = Some(slot.end());
                self.slots.push_back(slot);
                Ok(())
            }
            Err(e) => {
                self.close(k);
                Err(e)
            }
        }
    }

    /// Asks for the next slot when none is in flight, rows of the batch are not yet granted,
    /// and the granted slots end less than [`LOOKAHEAD`] from now (minus one slot, so that a
    /// request fills the lookahead rather than trickling) and before `send_by`.
    fn ask_ahead(&mut self, rows_left: usize, send_by: Instant) {
        if rows_left <= self.granted {
            self.granted_all();
            return;
        }
        if self.pending.is_some() || self.closed {
            return;
        }
        let now = Instant::now();
        if now >= send_by || self.granted_until.is_some_and(|until| until >= send_by) {
            // No slot asked for now could be used: the batch ends with the granted ones.
            self.close(0);
            return;
        }
        let one_slot = (self.rate / 20).max(1);
        let slot_span =
            Duration::from_micros(u64::from(one_slot) * 1_000_000 / u64::from(self.rate));
        let ahead = self
            .granted_until
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now));
        if ahead + slot_span > LOOKAHEAD && !self.slots.is_empty() {
            return;
        }
        // Enough to fill the lookahead (the first request of a batch), at least one slot's
        // worth, at most the rows not yet granted.
        let fill = (LOOKAHEAD.saturating_sub(ahead).as_micros() as u64 * u64::from(self.rate)
            / 1_000_000) as u32;
        let k = fill
            .max(one_slot)
            .min(u32::try_from(rows_left - self.granted).unwrap_or(u32::MAX))
            .max(1);
        let (store, turn, job_id, rate) = (
            self.store.clone(),
            self.write_turn.clone(),
            self.job_id.clone(),
            self.rate,
        );
        let latest_start_us = send_by.saturating_duration_since(now).as_micros() as i64;
        self.granted += k as usize;
        self.pending = Some((
            k,
            tokio::spawn(async move {
                let _turn = match turn {
                    Some(t) => Some(t.lock_owned().await),
                    None => None,
                };
                let slot = store
                    .take_rate_slot(&job_id, k, rate, RATE_TOLERANCE_US, latest_start_us)
                    .await?;
                Ok(slot.map(|s| (s, Instant::now())))
            }),
        ));
        if rows_left <= self.granted {
            self.granted_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::{Actor, ReplayOptions, ReplayRequest, Selection};

    async fn throttled_job(rate: u32) -> (Store, String) {
        let store = Store::connect("sqlite::memory:").await.unwrap();
        store.migrate().await.unwrap();
        let job = store
            .request_replay(
                &Actor::operator("eve"),
                &ReplayRequest {
                    selection: Selection::Ids(vec![]),
                    target_topic: Some("t".into()),
                    rate_per_sec: Some(rate),
                    reason: None,
                    options: ReplayOptions::default(),
                },
            )
            .await
            .unwrap();
        (store, job.id)
    }

    /// A batch's records get places one interval apart, in order, from slots that grant
    /// exactly the batch's rows: the first request fills the lookahead, the rest follow.
    #[tokio::test]
    async fn places_are_one_interval_apart_and_grant_only_the_batch() {
        let (store, job) = throttled_job(10_000).await;
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let mut pace = Pace::new(&job, 10_000, store.clone(), None, Some(tx));
        let send_by = Instant::now() + Duration::from_secs(60);
        let n = 7_000;
        let mut places = Vec::with_capacity(n);
        for left in (1..=n).rev() {
            places.push(pace.next_send_at(left, send_by).await.unwrap().unwrap());
            if left > 2_001 {
                assert!(rx.try_recv().is_err(), "rows without a slot at {left}");
            }
        }
        assert_eq!(rx.try_recv(), Ok(()), "every row had a slot");
        let state = store.replay_rate_state(&job).await.unwrap().unwrap();
        assert_eq!(state.granted, n as i64, "{state:?}");
        // 500 ms of slots first (5,000 records), then what the batch still needs.
        assert!(state.slots >= 2, "{state:?}");
        assert!(
            state.tat_us - state.first_us >= n as i64 * 100,
            "the slots cover the batch at the rate: {state:?}"
        );
        for w in places.windows(2) {
            assert!(w[1] >= w[0], "places go forward");
        }
        let first_slot = &places[..5_000];
        for w in first_slot.windows(2) {
            assert_eq!(w[1] - w[0], Duration::from_micros(100));
        }
    }

    /// No slot can be taken (the store is gone): the error is said once, then nothing more
    /// of the batch is sent.
    #[tokio::test]
    async fn a_store_that_cannot_grant_stops_the_batch() {
        let (store, job) = throttled_job(1_000).await;
        store.close().await;
        let mut pace = Pace::new(&job, 1_000, store, None, None);
        let send_by = Instant::now() + Duration::from_secs(60);
        assert!(pace.next_send_at(10, send_by).await.is_err());
        assert_eq!(pace.next_send_at(9, send_by).await.unwrap(), None);
    }

    /// The job's slots are taken a minute ahead (by other instances, say): a batch that must
    /// stop sending within a second is refused a slot, says it asks for none, and leaves the
    /// bucket as it was.
    #[tokio::test]
    async fn a_slot_out_of_reach_is_refused_and_costs_nothing() {
        let (store, job) = throttled_job(1_000).await;
        store
            .take_rate_slot(&job, 60_000, 1_000, RATE_TOLERANCE_US, 1_000_000)
            .await
            .unwrap()
            .expect("the first slot starts now");
        let before = store.replay_rate_state(&job).await.unwrap();
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let mut pace = Pace::new(&job, 1_000, store.clone(), None, Some(tx));
        let send_by = Instant::now() + Duration::from_secs(1);
        assert_eq!(pace.next_send_at(10, send_by).await.unwrap(), None);
        assert_eq!(rx.try_recv(), Ok(()));
        assert_eq!(store.replay_rate_state(&job).await.unwrap(), before);
    }

    /// A slot that would start after the lease's half: nothing more is sent.
    #[tokio::test]
    async fn nothing_goes_after_send_by() {
        let (store, job) = throttled_job(1_000).await;
        let mut pace = Pace::new(&job, 1_000, store, None, None);
        assert_eq!(pace.next_send_at(10, Instant::now()).await.unwrap(), None);
    }
}
