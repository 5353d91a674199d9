//! One job's worker: claim due rows, publish them, await their delivery reports, and say
//! what became of each (the batch the store marks in one transaction).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::future_producer::DeliveryFuture;
use rdkafka::producer::{FutureRecord, Producer, PurgeConfig};
use rdkafka::types::RDKafkaErrorCode;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::store::{
    ActiveJob, Claim, ClaimedRow, Failed, MarkBatch, Published, Retry, Store, StoreError,
};

use super::backoff::{full_jitter_ms, random_unit};
use super::kafka::{batch_level, classify, Failure, ProducerSlot, RelayProducer};
use super::pace::Pace;
use super::record::{replay_headers, ReplayIds};
use super::transform_batch::JobTransform;
use super::{now_ms, RelayConfig, RelayStatus, FAULT_ABORT_AFTER_PUBLISH_ENV, LEASE_MARGIN_MS};

/// State shared by the supervisor loop and the job workers.
pub(super) struct Relay {
    pub(super) config: RelayConfig,
    pub(super) store: Store,
    pub(super) status: Arc<RelayStatus>,
    pub(super) producer: ProducerSlot,
    pub(super) shutdown: CancellationToken,
    pub(super) abort_after: Option<u64>,
    /// Successful delivery reports so far (for the test hook).
    pub(super) delivered: AtomicU64,
    /// Consecutive batches that met an outage: the backoff exponent.
    pub(super) outage_streak: AtomicU32,
    /// SQLite has one writer at a time, and a writer that finds the database locked polls
    /// with sleeps of several ms: the relay's own claims and marks take turns here instead.
    /// `None` on PostgreSQL, where they run side by side.
    pub(super) write_turn: Option<Arc<tokio::sync::Mutex<()>>>,
    /// Batches being marked at once per job: 1 on SQLite (one writer anyway), 2 on PostgreSQL.
    pub(super) marks_in_flight: usize,
    /// Batches of one unthrottled job in flight at once (claimed, sent, awaiting delivery
    /// reports or their mark): the claim of the next overlaps the broker's and the store's
    /// round trips of the last.
    pub(super) batches_in_flight: usize,
    /// Target topics' partition counts, for jobs that publish to original partitions.
    pub(super) partitions: super::placement::PartitionCounts,
    /// Lag-aware replay: consumer group lag readings and each gated job's headroom.
    pub(super) lag: super::lag_gate::LagGates,
}

/// How often a worker publishing a throttled batch re-reads its job's status (pause, cancel).
const PAUSE_CHECK: Duration = Duration::from_millis(250);

impl Relay {
    /// Publishes the job's due rows batch by batch until none are due, an outage, or shutdown.
    pub(super) async fn work_on(self: Arc<Self>, job: ActiveJob) {
        // Canary replay (`canary.rs`): its state moves before the claims.
        if !self.canary_allows_claims(&job).await {
            return;
        }
        let claim_size = self.config.claim_size(job.rate_per_sec);
        let lease = Duration::from_millis(self.config.lease_ms);
        let transform = Arc::new(JobTransform::for_job(&job));
        let job = Arc::new(job);
        let margin = Duration::from_millis(LEASE_MARGIN_MS);
        // Batches of this job published and marked at once: while one waits for its delivery
        // reports (or its mark), the next is claimed and sent. A throttled job has two (its
        // pace is the rate's, not the round trips': the next batch is claimed when every row
        // of the last has a slot, and sends while the last is marked). Their marks are
        // bounded apart (`marks_in_flight`): a slow store slows the relay down instead of
        // piling up marks.
        let depth = if job.rate_per_sec.is_some() {
            2
        } else {
            self.batches_in_flight.max(1)
        };
        let marks = Arc::new(tokio::sync::Semaphore::new(self.marks_in_flight.max(1)));
        let mut in_flight: VecDeque<tokio::task::JoinHandle<bool>> = VecDeque::new();
        let mut outage = false;
        // Walk the job in outbox-id order; when the walk runs dry, one more pass from the
        // start picks up retries that came due and leases that expired.
        let mut cursor: Option<i64> = None;
        let mut reclaim = true;
        let mut claimed_any = false;
        loop {
            if self.shutdown.is_cancelled() {
                break;
            }
            // Batches done meanwhile: one that met an outage stops the claims (its rows wait
            // out the backoff; the job is `waiting`).
            while in_flight.front().is_some_and(|b| b.is_finished()) {
                if let Some(b) = in_flight.pop_front() {
                    outage |= b.await.unwrap_or(false);
                }
            }
            if outage {
                break;
            }
            // Lag-aware replay (`lag_gate.rs`): a job whose consumer group is too far behind
            // claims nothing now, and below its limit at most the headroom.
            let Some(limit) = self
                .lag
                .limit(&self.config, &self.store, &job, claim_size)
                .await
            else {
                if !claimed_any {
                    return; // held from the start: nothing claimed, nothing to finish
                }
                break;
            };
            claimed_any = true;
            let claimed_at = Instant::now();
            let claimed = {
                let _turn = self.write_turn().await;
                self.store
                    .claim(&job.id, limit, self.config.lease_ms, cursor, reclaim)
                    .await
            };
            let claim = match claimed {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(target: "redrive::replay", error = %e, "cannot claim outbox rows; retrying later");
                    self.status.record_error(format!("store: {e}"));
                    break;
                }
            };
            reclaim = false;
            let Some(last_id) = claim.rows.last().map(|r| r.outbox_id) else {
                if cursor.take().is_some() {
                    reclaim = true;
                    continue;
                }
                // Batches still in flight may make rows claimable (per-key order: the next
                // record of a key is released when the one before it is marked published).
                if !in_flight.is_empty() {
                    for b in in_flight.drain(..) {
                        outage |= b.await.unwrap_or(false);
                    }
                    continue;
                }
                break;
            };
            cursor = Some(last_id);
            let claim_ms = claimed_at.elapsed().as_millis() as u64;
            let rows = claim.rows.len();
            // The claim token names this instance's rows in the outbox (`claim_token`): an
            // operator (or the several-instances test) can tell who holds what.
            tracing::debug!(target: "redrive::replay", rows, claim = %claim.token, "rows claimed");
            self.lag.claimed(&job.id, rows);
            let relay = self.clone();
            let (job_ref, transform, marks) = (job.clone(), transform.clone(), marks.clone());
            // A throttled batch says when each of its rows has a slot (`pace.rs`); the next
            // is claimed then, not beside it: two batches sending side by side shared the
            // bucket, ended together, and left the job idle while both were marked and the
            // next claimed. The next batch's slots follow this one's.
            let (all_granted, granted) = match job.rate_per_sec {
                Some(_) => {
                    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                    (Some(tx), Some(rx))
                }
                None => (None, None),
            };
            let last = rows < limit;
            in_flight.push_back(tokio::spawn(
                async move {
                    // A throttled claim waits for its job's shared rate (other instances take
                    // slots too): what is not sent by half the lease is handed back, never
                    // republished.
                    let send_by = claimed_at + lease / 2;
                    let mut batch = relay
                        .publish(&job_ref, claim, send_by, &transform, all_granted)
                        .await;
                    batch.last = last;
                    tracing::debug!(
                        target: "redrive::replay",
                        rows,
                        claim_ms,
                        publish_ms = claimed_at.elapsed().as_millis() as u64 - claim_ms,
                        "batch published"
                    );
                    let outage = batch.outage;
                    let deadline = claimed_at + lease.saturating_sub(margin);
                    let _permit = marks.acquire().await;
                    relay.mark(batch, deadline).await;
                    outage
                }
                .in_current_span(),
            ));
            if let Some(granted) = granted {
                // Told, or dropped when the batch ends some other way.
                let _ = granted.await;
            }
            while in_flight.len() >= depth {
                if let Some(b) = in_flight.pop_front() {
                    outage |= b.await.unwrap_or(false);
                }
            }
        }
        for b in in_flight {
            let _ = b.await;
        }
        match self.store.finish_job_if_done(&job.id).await {
            Ok(true) => tracing::info!(target: "redrive::replay", "replay job finished"),
            Ok(false) => {}
            Err(e) => self.status.record_error(format!("store: {e}")),
        }
    }

    /// Sends the claim's records, awaits every delivery report, and says what became of each.
    async fn publish(
        &self,
        job: &ActiveJob,
        claim: Claim,
        send_by: Instant,
        transform: &JobTransform,
        all_granted: Option<tokio::sync::oneshot::Sender<()>>,
    ) -> MarkBatch {
        let producer = self.producer.get();
        let mut batch = MarkBatch {
            job_id: job.id.clone(),
            claim_token: claim.token,
            actor: job.created_by.clone(),
            release_at_ms: now_ms(),
            ..MarkBatch::default()
        };
        let mut in_flight: Vec<(ClaimedRow, DeliveryFuture)> = Vec::with_capacity(claim.rows.len());
        let mut failures: Vec<(ClaimedRow, Failure)> = Vec::new();
        // Transform on replay (`transform_batch.rs`): what the script returned is sent; rows
        // it skipped or failed on are not.
        let applied = transform
            .apply(claim.rows, self.config.forward_diagnostic_headers)
            .await;
        for (row, e) in applied.retry {
            self.count_attempt(&mut batch, row, e, now_ms());
        }
        batch.failed.extend(applied.failed);
        batch.script = applied.marks;
        let mut rows = applied.rows.into_iter();
        // A throttled batch takes a while to send: every PAUSE_CHECK the job's status is read,
        // and a job paused (or cancelled) meanwhile gets its unsent rows handed back.
        let mut next_check = Instant::now() + PAUSE_CHECK;
        let mut pace = job.rate_per_sec.filter(|r| *r > 0).map(|r| {
            let turn = self.write_turn.clone();
            Pace::new(&job.id, r, self.store.clone(), turn, all_granted)
        });
        while let Some(row) = rows.next() {
            if let Some(p) = pace.as_mut() {
                let left = rows.len() + 1;
                let at = p.next_send_at(left, send_by).await.unwrap_or_else(|e| {
                    tracing::warn!(target: "redrive::replay", error = %e, "cannot take a rate slot; unsent rows handed back");
                    self.status.record_error(format!("store: {e}"));
                    None
                });
                let Some(at) = at else {
                    // No slot (the store is unavailable) or the lease's half is spent: the
                    // unsent rows go back, due again shortly.
                    batch.released.push(row.outbox_id);
                    batch.release_at_ms = now_ms().saturating_add(1_000);
                    break;
                };
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = self.shutdown.cancelled() => {}
                }
                if Instant::now() >= next_check {
                    next_check = Instant::now() + PAUSE_CHECK;
                    if let Ok(Some(s)) = self.store.job_status(&job.id).await {
                        if !s.is_active() {
                            tracing::info!(target: "redrive::replay", status = s.as_str(), "job no longer active; unsent rows handed back");
                            batch.released.push(row.outbox_id);
                            break;
                        }
                    }
                }
            }
            if self.shutdown.is_cancelled() {
                batch.released.push(row.outbox_id);
                break;
            }
            match self.send(&producer, job, &row).await {
                Ok(f) => in_flight.push((row, f)),
                Err(failure) => failures.push((row, failure)),
            }
        }
        // Not sent because of shutdown: handed back, due at once.
        batch.released.extend(rows.map(|r| r.outbox_id));
        drop(pace);

        let mut purged = false;
        // Records refused with an error the broker gives a whole batch (too large, invalid):
        // the record may only have shared a batch with the culprit, so each is sent again
        // alone before it counts as refused.
        let mut suspects: Vec<ClaimedRow> = Vec::new();
        for (row, delivery) in in_flight {
            match self.await_report(&producer, delivery, &mut purged).await {
                Ok(p) => batch.published.push(Published {
                    outbox_id: row.outbox_id,
                    ..p
                }),
                Err((Failure::Permanent(_), true)) if !self.shutdown.is_cancelled() => {
                    suspects.push(row)
                }
                Err((failure, _)) => failures.push((row, failure)),
            }
        }
        for row in suspects {
            if self.shutdown.is_cancelled() {
                batch.released.push(row.outbox_id);
                continue;
            }
            let sent = match self.send(&producer, job, &row).await {
                Ok(delivery) => self
                    .await_report(&producer, delivery, &mut purged)
                    .await
                    .map_err(|(f, _)| f),
                Err(f) => Err(f),
            };
            match sent {
                Ok(p) => batch.published.push(Published {
                    outbox_id: row.outbox_id,
                    ..p
                }),
                Err(failure) => failures.push((row, failure)),
            }
        }

        let now = now_ms();
        // Past the job's outage bound, an outage costs attempts like any other error.
        let outage_counts = self.config.outage_max_ms == 0
            || job.waiting_since_ms.is_some_and(|since| {
                now.saturating_sub(since)
                    >= i64::try_from(self.config.outage_max_ms).unwrap_or(i64::MAX)
            });
        for (row, failure) in failures {
            match failure {
                Failure::Purged => batch.released.push(row.outbox_id),
                Failure::Outage(e) if !outage_counts => {
                    batch.outage = true;
                    batch.released.push(row.outbox_id);
                    batch.release_error = Some(format!("Kafka unreachable: {e}"));
                }
                Failure::Outage(e) => {
                    batch.outage = true;
                    let waited_s = self.config.outage_max_ms / 1000;
                    let e = format!(
                        "Kafka unreachable for more than {waited_s} s (outage_max_ms), attempts \
                         are counted: {e}"
                    );
                    self.count_attempt(&mut batch, row, e, now);
                }
                Failure::Record(e) => self.count_attempt(&mut batch, row, e, now),
                Failure::Permanent(e) => {
                    self.status.add_rejected(1);
                    batch.failed.push(Failed {
                        outbox_id: row.outbox_id,
                        dead_letter_id: row.dead_letter_id,
                        error: format!("{e}; not retried (this error does not pass by itself)"),
                    });
                }
            }
        }
        if let Some(e) = &batch.release_error {
            let streak = self.outage_streak.fetch_add(1, Ordering::Relaxed) + 1;
            // At least the base delay: an outage is not worth hammering.
            let delay = full_jitter_ms(
                streak,
                self.config.backoff_base_ms,
                self.config.backoff_max_ms,
                random_unit(),
            )
            .max(self.config.backoff_base_ms);
            batch.release_at_ms = now.saturating_add(delay as i64);
            self.status.set_kafka_reachable(false);
            self.status.record_error(e.clone());
            tracing::warn!(target: "redrive::replay", error = %e, retry_in_ms = delay, "Kafka unreachable; the job waits");
        } else if batch.outage {
            self.status.set_kafka_reachable(false);
        } else if !batch.published.is_empty() {
            self.outage_streak.store(0, Ordering::Relaxed);
            self.status.set_kafka_reachable(true);
        }
        if batch.release_error.is_some() || !batch.retry.is_empty() || !batch.failed.is_empty() {
            if let Some(e) = batch
                .failed
                .last()
                .map(|f| f.error.clone())
                .or_else(|| batch.retry.last().map(|r| r.error.clone()))
            {
                self.status.record_error(e);
            }
            self.producer
                .replace_if_fatal(&producer, &self.config, &self.status);
        }
        batch
    }

    /// Awaits one delivery report (purging the local queue once if shutdown comes first).
    /// `Ok` carries the record's partition and offset (its `outbox_id` is 0, for the caller
    /// to fill in); `Err` the failure and whether the broker may have refused the record
    /// only for the batch it was in ([`batch_level`]).
    async fn await_report(
        &self,
        producer: &RelayProducer,
        mut delivery: DeliveryFuture,
        purged: &mut bool,
    ) -> Result<Published, (Failure, bool)> {
        let report = loop {
            tokio::select! {
                r = &mut delivery => break r,
                _ = self.shutdown.cancelled(), if !*purged => {
                    // Records still in the local queue were never sent: fail them now
                    // (they come back as `Purged`) instead of waiting out a timeout.
                    *purged = true;
                    producer.purge(PurgeConfig::default().queue());
                }
            }
        };
        match report {
            Ok(Ok(d)) => {
                self.delivered_one();
                Ok(Published {
                    outbox_id: 0,
                    partition: d.partition,
                    offset: d.offset,
                })
            }
            Ok(Err((e, _))) => Err((
                classify(&e, || producer.client().fatal_error()),
                batch_level(&e),
            )),
            Err(_) => Err((
                Failure::Outage("the producer closed before the delivery report".into()),
                false,
            )),
        }
    }

    /// A failed attempt that counts: a retry after a backoff with full jitter, or `failed`
    /// once `max_attempts` are spent.
    fn count_attempt(&self, batch: &mut MarkBatch, row: ClaimedRow, e: String, now: i64) {
        let max = self.config.max_attempts.max(1);
        let attempt = u32::try_from(row.attempts).unwrap_or(0).saturating_add(1);
        if attempt >= max {
            batch.failed.push(Failed {
                outbox_id: row.outbox_id,
                dead_letter_id: row.dead_letter_id,
                error: format!("{e} (gave up after {attempt} attempts)"),
            });
        } else {
            let delay = full_jitter_ms(
                attempt,
                self.config.backoff_base_ms,
                self.config.backoff_max_ms,
                random_unit(),
            );
            batch.retry.push(Retry {
                outbox_id: row.outbox_id,
                next_attempt_at_ms: now.saturating_add(delay as i64),
                error: format!("attempt {attempt} of {max}: {e}"),
            });
        }
    }

    /// Hands one record to the producer (waiting while its local queue is full).
    async fn send(
        &self,
        producer: &RelayProducer,
        job: &ActiveJob,
        row: &ClaimedRow,
    ) -> Result<DeliveryFuture, Failure> {
        let ids = ReplayIds {
            job_id: &job.id,
            dead_letter_id: row.dead_letter_id,
            replay_count: i64::from(row.replay_count) + 1,
            replayed_by: &job.created_by,
            idempotency_key: &row.idempotency_key,
            edit_version: row.version,
        };
        let headers = replay_headers(
            &row.headers,
            row.convention,
            self.config.forward_diagnostic_headers,
            &ids,
        );
        let mut owned = OwnedHeaders::new_with_capacity(headers.len());
        for h in &headers {
            owned = owned.insert(KafkaHeader {
                key: &h.name,
                value: h.value.as_deref(),
            });
        }
        let mut record: FutureRecord<'_, [u8], [u8]> =
            FutureRecord::to(&row.target_topic).headers(owned);
        if let Some(k) = &row.key {
            record = record.key(k.as_slice());
        }
        if let Some(v) = &row.value {
            record = record.payload(v.as_slice());
        }
        if job.options.original_partition {
            let p = self
                .partitions
                .partition_for(producer, &row.target_topic, row.source_partition)
                .await?;
            record = record.partition(p);
        }
        loop {
            match producer.send_result(record) {
                Ok(f) => return Ok(f),
                Err((e, back))
                    if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull)
                        && !self.shutdown.is_cancelled() =>
                {
                    record = back;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((e, _)) => return Err(classify(&e, || producer.client().fatal_error())),
            }
        }
    }

    /// Waits for the relay's turn to write (SQLite only; see `write_turn`).
    async fn write_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.write_turn {
            Some(m) => Some(m.lock().await),
            None => None,
        }
    }

    /// Counts a delivery report; the test hook aborts here, before the batch is marked.
    fn delivered_one(&self) {
        let n = self.delivered.fetch_add(1, Ordering::SeqCst) + 1;
        if self.abort_after == Some(n) {
            eprintln!(
                "{FAULT_ABORT_AFTER_PUBLISH_ENV}={n}: aborting after delivery report {n}, \
                 before marking (test hook)"
            );
            std::process::abort();
        }
    }

    /// Records a batch, retrying while the store is unavailable and the lease still holds.
    async fn mark(&self, batch: MarkBatch, deadline: Instant) {
        let mut delay = Duration::from_millis(200);
        loop {
            let started = Instant::now();
            let marked = {
                let _turn = self.write_turn().await;
                self.store.mark(&batch).await
            };
            match marked {
                Ok(s) => {
                    tracing::debug!(
                        target: "redrive::replay",
                        rows = s.published + s.retried + s.failed + s.released,
                        mark_ms = started.elapsed().as_millis() as u64,
                        "batch marked"
                    );
                    self.status
                        .add_marked(s.published, s.failed, s.retried, s.released);
                    let lost = batch.published.len() as u64
                        - s.published.min(batch.published.len() as u64);
                    if lost > 0 {
                        tracing::warn!(target: "redrive::replay", lost, "rows were reclaimed before they were marked (lease expired); they are published again");
                    }
                    if s.finished {
                        tracing::info!(target: "redrive::replay", "replay job finished");
                    }
                    return;
                }
                Err(e @ StoreError::Unavailable(_)) if Instant::now() + delay < deadline => {
                    tracing::warn!(target: "redrive::replay", error = %e, "cannot record published rows yet; retrying");
                    self.status.record_error(format!("store: {e}"));
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
                Err(e) => {
                    // The rows stay claimed; after the lease they are published again with
                    // the same idempotency keys and counted then.
                    tracing::error!(target: "redrive::replay", error = %e, "cannot record published rows; they will be republished after the lease");
                    self.status.record_error(format!("store: {e}"));
                    return;
                }
            }
        }
    }
}
