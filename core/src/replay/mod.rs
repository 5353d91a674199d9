//! The replay relay: publishes the outbox to Kafka and records what became of each row.
//!
//! # Flow
//! Every `poll_interval_ms` the relay asks the store for jobs with work
//! ([`Store`] `active_jobs`) and runs one worker per job (at most `max_parallel_jobs`), so a
//! throttled job never holds up another. A worker loops: claim up to `batch_size` due rows
//! under a lease → build each record (original key, value and application headers, minus the
//! convention's diagnostics, plus the five `redrive-*` headers) → send them all through one
//! idempotent producer (`enable.idempotence=true`, `acks=all`), paced by the job's token
//! bucket → await every delivery report → record the batch in ONE store transaction (outbox
//! rows published with partition/offset, dead letters `replayed` with `replay_count + 1`,
//! history events, job counters). Marking a batch overlaps with claiming and publishing the
//! next one (on SQLite the relay's claims and marks take turns for the single writer lock;
//! on PostgreSQL two marks may run at once). A worker walks its job in outbox-id order with a
//! cursor, then makes one more pass from the start for retries that came due.
//!
//! # Failures
//! - **Kafka unreachable** (timeouts, all brokers down, no leader): the rows go back to
//!   `pending` without counting an attempt, the job shows `waiting` with the error, and the
//!   relay retries after an exponential backoff with full jitter (`backoff_base_ms` ..
//!   `backoff_max_ms`). It resumes by itself when Kafka is back.
//! - **A record's own error** (unknown topic, too large, not authorised): attempts + 1 and a
//!   retry after a backoff with full jitter; after `max_attempts` the row is `failed`, the
//!   dead letter `replay_failed` with the error, the job's `failed` + 1.
//! - **Crash between publish and mark**: the rows stay `claimed` until their lease expires,
//!   then are claimed and published again with the SAME `redrive-idempotency-key`
//!   (at-least-once). A row is counted once, by the mark that moves it out of `claimed`, so
//!   the job's counts stay right.
//! - **Store unavailable while marking**: retried until shortly before the lease expires.
//! - **Shutdown**: no new claims; records not yet handed to librdkafka's network thread are
//!   purged and handed back; in-flight ones are awaited and marked.
//!
//! # Test hook
//! [`FAULT_ABORT_AFTER_PUBLISH_ENV`]: when `REDRIVE_FAULT_RELAY_ABORT_AFTER_PUBLISH=N` is set,
//! the process calls `std::process::abort()` right after the N-th successful delivery report
//! and before marking it. It exists for the crash-safety test; never set it in production.

mod backoff;
mod kafka;
mod record;
mod status;

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::future_producer::DeliveryFuture;
use rdkafka::producer::{FutureRecord, Producer, PurgeConfig};
use rdkafka::types::RDKafkaErrorCode;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::store::{
    ActiveJob, Claim, ClaimedRow, Failed, MarkBatch, Published, Retry, Store, StoreError,
};

use self::backoff::{full_jitter_ms, random_unit};
use self::kafka::{classify, create_producer, Failure, ProducerSlot, RelayProducer};
use self::record::{replay_headers, ReplayIds};

pub use self::record::{
    HEADER_DEAD_LETTER_ID, HEADER_IDEMPOTENCY_KEY, HEADER_REPLAYED_BY, HEADER_REPLAY_COUNT,
    HEADER_REPLAY_ID, REDRIVE_HEADER_PREFIX,
};
pub use self::status::{RelaySnapshot, RelayStatus};

/// Test hook (see the module docs): abort the process after this many delivery reports.
pub const FAULT_ABORT_AFTER_PUBLISH_ENV: &str = "REDRIVE_FAULT_RELAY_ABORT_AFTER_PUBLISH";

/// Relay settings (the server maps its configuration onto this).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayConfig {
    /// Bootstrap servers, e.g. `127.0.0.1:9092`.
    pub brokers: String,
    /// Extra librdkafka properties (SASL/SSL, compression, ...). Applied after redrive's own,
    /// except `enable.idempotence=true` and `acks=all`, which always win.
    pub kafka_properties: Vec<(String, String)>,
    /// Most outbox rows one claim takes (rows; default 1000). A throttled job claims at most
    /// what it can publish in a quarter of the lease.
    pub batch_size: usize,
    /// How long a claim holds its rows, ms (default 30000). If the relay dies, another (or
    /// the same after a restart) publishes them again after this. Must exceed a batch's
    /// publish time: the delivery timeout is capped at half of it.
    pub lease_ms: u64,
    /// Publish attempts per record before it is given up as `replay_failed` (default 10).
    /// Outages (Kafka unreachable) do not count.
    pub max_attempts: u32,
    /// First retry delay ceiling, ms (default 500); doubles per attempt, with full jitter.
    pub backoff_base_ms: u64,
    /// Largest retry delay ceiling, ms (default 60000).
    pub backoff_max_ms: u64,
    /// Forward the recognised convention's diagnostic headers (exception, original topic,
    /// retry counters) with the replayed record. Default `false`: the consumer sees the
    /// record as its producer sent it, and a retry counter does not send it straight back.
    pub forward_diagnostic_headers: bool,
    /// How often the relay looks for new work, ms (default 250): the delay between a replay
    /// request and its first publish.
    pub poll_interval_ms: u64,
    /// How long one record may wait for its delivery report before it counts as an outage,
    /// ms (librdkafka `message.timeout.ms`; default 10000, at most half the lease).
    pub delivery_timeout_ms: u64,
    /// Jobs worked on at the same time (default 4).
    pub max_parallel_jobs: usize,
}

/// Default [`RelayConfig::brokers`].
pub fn default_brokers() -> String {
    "127.0.0.1:9092".to_string()
}
/// Default [`RelayConfig::batch_size`], rows: enough to keep thousands of records in flight
/// and amortise the mark transaction, small enough to mark in well under a second.
pub fn default_batch_size() -> usize {
    1000
}
/// Default [`RelayConfig::lease_ms`], ms: several delivery timeouts plus a mark.
pub fn default_lease_ms() -> u64 {
    30_000
}
/// Default [`RelayConfig::max_attempts`].
pub fn default_max_attempts() -> u32 {
    10
}
/// Default [`RelayConfig::backoff_base_ms`], ms.
pub fn default_backoff_base_ms() -> u64 {
    500
}
/// Default [`RelayConfig::backoff_max_ms`], ms.
pub fn default_backoff_max_ms() -> u64 {
    60_000
}
/// Default [`RelayConfig::poll_interval_ms`], ms.
pub fn default_poll_interval_ms() -> u64 {
    250
}
/// Default [`RelayConfig::delivery_timeout_ms`], ms: long enough for a leader election,
/// short enough that an outage shows on the job page within seconds.
pub fn default_delivery_timeout_ms() -> u64 {
    10_000
}
/// Default [`RelayConfig::max_parallel_jobs`].
pub fn default_max_parallel_jobs() -> usize {
    4
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            brokers: default_brokers(),
            kafka_properties: Vec::new(),
            batch_size: default_batch_size(),
            lease_ms: default_lease_ms(),
            max_attempts: default_max_attempts(),
            backoff_base_ms: default_backoff_base_ms(),
            backoff_max_ms: default_backoff_max_ms(),
            forward_diagnostic_headers: false,
            poll_interval_ms: default_poll_interval_ms(),
            delivery_timeout_ms: default_delivery_timeout_ms(),
            max_parallel_jobs: default_max_parallel_jobs(),
        }
    }
}

/// Shortest accepted lease, ms.
const MIN_LEASE_MS: u64 = 2_000;
/// How long before its lease ends a claim stops trying to mark (so that a mark never races
/// a reclaim), ms.
const LEASE_MARGIN_MS: u64 = 1_000;

impl RelayConfig {
    /// The delivery timeout actually used, ms: within [1 s, lease / 2].
    pub fn effective_delivery_timeout_ms(&self) -> u64 {
        self.delivery_timeout_ms
            .clamp(1_000, (self.lease_ms / 2).max(1_000))
    }

    /// Rows one claim of a job with this rate takes.
    fn claim_size(&self, rate_per_sec: Option<u32>) -> usize {
        let max = self.batch_size.max(1);
        match rate_per_sec {
            None => max,
            Some(r) => {
                let quarter_lease = (u64::from(r) * self.lease_ms / 4_000).max(1);
                max.min(usize::try_from(quarter_lease).unwrap_or(max))
            }
        }
    }

    fn check(&self) -> Result<(), RelayError> {
        if self.brokers.trim().is_empty() {
            return Err(RelayError::BadConfig("no Kafka brokers configured".into()));
        }
        if self.lease_ms < MIN_LEASE_MS {
            return Err(RelayError::BadConfig(format!(
                "lease_ms must be at least {MIN_LEASE_MS} (got {})",
                self.lease_ms
            )));
        }
        if self.backoff_base_ms > self.backoff_max_ms {
            return Err(RelayError::BadConfig(format!(
                "backoff_base_ms ({}) must not exceed backoff_max_ms ({})",
                self.backoff_base_ms, self.backoff_max_ms
            )));
        }
        Ok(())
    }
}

/// Errors that stop the relay at start-up (bad configuration). Outages of Kafka or the
/// store do not: the relay waits them out and reports them in [`RelayStatus`].
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("Kafka producer error: {0}")]
    Kafka(String),
    #[error("bad relay configuration: {0}")]
    BadConfig(String),
}

/// Milliseconds since the Unix epoch, now.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Runs the relay until `shutdown` is cancelled; then stops claiming, finishes and marks the
/// batches in hand (records not yet sent are handed back), and returns.
///
/// Returns `Err` only for configuration problems found at start-up (a property librdkafka
/// refuses, no brokers, a lease under 2 s). Everything later is logged, shown in `status`
/// and waited out.
pub async fn run(
    config: RelayConfig,
    store: Store,
    status: Arc<RelayStatus>,
    shutdown: CancellationToken,
) -> Result<(), RelayError> {
    config.check()?;
    let abort_after = fault_point();
    let producer = create_producer(&config, status.clone())?;
    tracing::info!(
        brokers = %config.brokers,
        batch_size = config.batch_size,
        lease_ms = config.lease_ms,
        "replay relay started"
    );
    let poll = Duration::from_millis(config.poll_interval_ms.max(10));
    let max_jobs = config.max_parallel_jobs.max(1);
    let store_backend = store.backend();
    let relay = Arc::new(Relay {
        config,
        store,
        status: status.clone(),
        producer: ProducerSlot::new(producer),
        shutdown: shutdown.clone(),
        abort_after,
        delivered: AtomicU64::new(0),
        outage_streak: AtomicU32::new(0),
        write_turn: (store_backend == "sqlite").then(|| tokio::sync::Mutex::new(())),
        marks_in_flight: if store_backend == "sqlite" { 1 } else { 2 },
    });
    status.set_running(true);

    let mut workers: JoinSet<()> = JoinSet::new();
    let mut working: HashMap<tokio::task::Id, String> = HashMap::new();
    let mut active: HashSet<String> = HashSet::new();
    // Expired leases only appear when a relay died: look for them at start-up and then
    // every quarter lease, not on every poll (on PostgreSQL that lookup walks index entries
    // of every row ever claimed until vacuum removes them).
    let expiry_check = Duration::from_millis(relay.config.lease_ms / 4);
    let mut next_expiry_check = Instant::now();
    loop {
        while let Some(done) = workers.try_join_next_with_id() {
            reap(done, &mut working, &mut active, &status);
        }
        if shutdown.is_cancelled() {
            break;
        }
        let mut jobs = relay.store.active_jobs().await;
        if Instant::now() >= next_expiry_check {
            next_expiry_check = Instant::now() + expiry_check;
            if let Ok(js) = &mut jobs {
                match relay.store.jobs_with_expired_claims(now_ms()).await {
                    Ok(expired) => js.extend(expired),
                    Err(e) => status.record_error(format!("store: {e}")),
                }
            }
        }
        match jobs {
            Ok(jobs) => {
                for job in jobs {
                    if active.len() >= max_jobs {
                        break;
                    }
                    if active.contains(&job.id) {
                        continue;
                    }
                    active.insert(job.id.clone());
                    let span = tracing::info_span!("replay_job", job = %job.id);
                    let id = job.id.clone();
                    let handle = workers.spawn(relay.clone().work_on(job).instrument(span));
                    working.insert(handle.id(), id);
                }
            }
            Err(e) => {
                tracing::warn!(target: "redrive::replay", error = %e, "cannot read replay jobs; retrying");
                status.record_error(format!("store: {e}"));
            }
        }
        status.set_active_jobs(active.len());
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = shutdown.cancelled() => {}
        }
    }
    while let Some(done) = workers.join_next_with_id().await {
        reap(done, &mut working, &mut active, &status);
    }
    status.set_active_jobs(0);
    // Everything sent was awaited; dropping the producer may still block briefly on its
    // threads, so keep it off the async workers.
    let closed = tokio::task::spawn_blocking(move || drop(relay)).await;
    if let Err(e) = closed {
        tracing::warn!(target: "redrive::replay", error = %e, "closing the producer failed");
    }
    status.set_running(false);
    tracing::info!("replay relay stopped");
    Ok(())
}

/// Forgets a finished worker (also one that panicked: its job is picked up again).
fn reap(
    done: Result<(tokio::task::Id, ()), tokio::task::JoinError>,
    working: &mut HashMap<tokio::task::Id, String>,
    active: &mut HashSet<String>,
    status: &RelayStatus,
) {
    let id = match done {
        Ok((id, ())) => id,
        Err(e) => {
            tracing::error!(target: "redrive::replay", error = %e, "a replay worker failed");
            status.record_error(format!("replay worker failed: {e}"));
            e.id()
        }
    };
    if let Some(job) = working.remove(&id) {
        active.remove(&job);
    }
}

/// The test hook's N, if set (an unparsable value is ignored with a warning).
fn fault_point() -> Option<u64> {
    let v = std::env::var(FAULT_ABORT_AFTER_PUBLISH_ENV).ok()?;
    match v.trim().parse::<u64>() {
        Ok(n) if n > 0 => {
            tracing::warn!(
                "{FAULT_ABORT_AFTER_PUBLISH_ENV}={n}: the process will abort after the {n}th \
                 delivery report (test hook)"
            );
            Some(n)
        }
        _ => {
            tracing::warn!("ignoring {FAULT_ABORT_AFTER_PUBLISH_ENV}={v}: not a positive number");
            None
        }
    }
}

/// State shared by the supervisor loop and the job workers.
struct Relay {
    config: RelayConfig,
    store: Store,
    status: Arc<RelayStatus>,
    producer: ProducerSlot,
    shutdown: CancellationToken,
    abort_after: Option<u64>,
    /// Successful delivery reports so far (for the test hook).
    delivered: AtomicU64,
    /// Consecutive batches that met an outage: the backoff exponent.
    outage_streak: AtomicU32,
    /// SQLite has one writer at a time, and a writer that finds the database locked polls
    /// with sleeps of several ms: the relay's own claims and marks take turns here instead.
    /// `None` on PostgreSQL, where they run side by side.
    write_turn: Option<tokio::sync::Mutex<()>>,
    /// Batches being marked at once per job: 1 on SQLite (one writer anyway), 2 on PostgreSQL.
    marks_in_flight: usize,
}

impl Relay {
    /// Publishes the job's due rows batch by batch until none are due, an outage, or shutdown.
    async fn work_on(self: Arc<Self>, job: ActiveJob) {
        let limiter = job.rate_per_sec.and_then(NonZeroU32::new).map(token_bucket);
        let claim_size = self.config.claim_size(job.rate_per_sec);
        let lease = Duration::from_millis(self.config.lease_ms);
        let margin = Duration::from_millis(LEASE_MARGIN_MS);
        let mut marking: std::collections::VecDeque<tokio::task::JoinHandle<()>> =
            std::collections::VecDeque::new();
        // Walk the job in outbox-id order; when the walk runs dry, one more pass from the
        // start picks up retries that came due and leases that expired.
        let mut cursor: Option<i64> = None;
        let mut reclaim = true;
        loop {
            if self.shutdown.is_cancelled() {
                break;
            }
            let claimed_at = Instant::now();
            let claimed = {
                let _turn = self.write_turn().await;
                self.store
                    .claim(&job.id, claim_size, self.config.lease_ms, cursor, reclaim)
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
                break;
            };
            cursor = Some(last_id);
            let claim_ms = claimed_at.elapsed().as_millis() as u64;
            let rows = claim.rows.len();
            let mut batch = self.publish(&job, claim, limiter.as_ref()).await;
            batch.last = rows < claim_size;
            tracing::debug!(
                target: "redrive::replay",
                rows,
                claim_ms,
                publish_ms = claimed_at.elapsed().as_millis() as u64 - claim_ms,
                "batch published"
            );
            let outage = batch.release_error.is_some();
            // A bounded number of marks in flight: a slow store slows the relay down
            // instead of piling up claims (and held leases).
            while marking.len() >= self.marks_in_flight {
                if let Some(m) = marking.pop_front() {
                    let _ = m.await;
                }
            }
            let relay = self.clone();
            let deadline = claimed_at + lease.saturating_sub(margin);
            marking.push_back(tokio::spawn(
                async move { relay.mark(batch, deadline).await }.in_current_span(),
            ));
            if outage {
                break;
            }
        }
        for m in marking {
            let _ = m.await;
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
        limiter: Option<&DefaultDirectRateLimiter>,
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
        let mut rows = claim.rows.into_iter();
        for row in rows.by_ref() {
            if let Some(l) = limiter {
                tokio::select! {
                    _ = l.until_ready() => {}
                    _ = self.shutdown.cancelled() => {}
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

        let mut purged = false;
        for (row, mut delivery) in in_flight {
            let report = loop {
                tokio::select! {
                    r = &mut delivery => break r,
                    _ = self.shutdown.cancelled(), if !purged => {
                        // Records still in the local queue were never sent: fail them now
                        // (they come back as `Purged`) instead of waiting out a timeout.
                        purged = true;
                        producer.purge(PurgeConfig::default().queue());
                    }
                }
            };
            match report {
                Ok(Ok(d)) => {
                    self.delivered_one();
                    batch.published.push(Published {
                        outbox_id: row.outbox_id,
                        partition: d.partition,
                        offset: d.offset,
                    });
                }
                Ok(Err((e, _))) => failures.push((row, classify(&e))),
                Err(_) => failures.push((
                    row,
                    Failure::Outage("the producer closed before the delivery report".into()),
                )),
            }
        }

        let now = now_ms();
        let max = self.config.max_attempts.max(1);
        for (row, failure) in failures {
            match failure {
                Failure::Purged => batch.released.push(row.outbox_id),
                Failure::Outage(e) => {
                    batch.released.push(row.outbox_id);
                    batch.release_error = Some(format!("Kafka unreachable: {e}"));
                }
                Failure::Record(e) => {
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
        } else if !batch.published.is_empty() {
            self.outage_streak.store(0, Ordering::Relaxed);
            self.status.set_kafka_reachable(true);
        }
        if batch.release_error.is_some() || !batch.retry.is_empty() || !batch.failed.is_empty() {
            if let Some(e) = batch.retry.last().map(|r| r.error.clone()) {
                self.status.record_error(e);
            }
            self.producer
                .replace_if_fatal(&producer, &self.config, &self.status);
        }
        batch
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
                Err((e, _)) => return Err(classify(&e)),
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

/// The job's token bucket: `rate` msgs/s, bursts of at most 1/20 s worth, so the pace is even
/// from the first record and a burst never exceeds 5 % of a second's budget.
fn token_bucket(rate: NonZeroU32) -> DefaultDirectRateLimiter {
    let burst = NonZeroU32::new(rate.get() / 20).unwrap_or(NonZeroU32::MIN);
    RateLimiter::direct(Quota::per_second(rate).allow_burst(burst))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttled_claims_fit_the_lease() {
        let c = RelayConfig::default();
        assert_eq!(c.claim_size(None), 1000);
        assert_eq!(c.claim_size(Some(10)), 75); // 7.5 s of publishing in a 30 s lease
        assert_eq!(c.claim_size(Some(1_000_000)), 1000);
        let tiny = RelayConfig {
            lease_ms: 2_000,
            ..RelayConfig::default()
        };
        assert_eq!(tiny.claim_size(Some(1)), 1);
    }

    #[test]
    fn delivery_timeout_stays_under_half_the_lease() {
        let c = RelayConfig {
            lease_ms: 4_000,
            delivery_timeout_ms: 10_000,
            ..RelayConfig::default()
        };
        assert_eq!(c.effective_delivery_timeout_ms(), 2_000);
        assert!(RelayConfig {
            lease_ms: 100,
            ..RelayConfig::default()
        }
        .check()
        .is_err());
        assert!(RelayConfig::default().check().is_ok());
    }
}
