//! Ingest: an rdkafka consumer on the DLQ topics that stores every record and commits its
//! offset only after the store transaction holding it has committed.
//!
//! # Flow
//! `recv` → [`RawRecord`](crate::model::RawRecord) (bytes exactly as received) →
//! [`conventions::decode`](crate::conventions::decode) → [`fingerprint`](crate::fingerprint) →
//! batch (up to `batch_size` records or `linger_ms`) → [`Store::insert_batch`] (one
//! transaction) → **then** commit the offsets (`IngestLoop::commit_stored`, the safety point).
//!
//! # Failure behaviour
//! - **Store down** (a transient [`StoreError`](crate::store::StoreError): connection, pool,
//!   lock, timeout, disk full; see `StoreError::is_transient`): the batch is kept, nothing is
//!   committed, the assigned partitions are paused while the consumer keeps being polled (so the
//!   group membership survives), and the write is retried with exponential backoff
//!   (200 ms doubling to 30 s, with jitter). Consumption resumes after the first success.
//! - **A record the store refuses** (any other store error: a value too long for an index, an
//!   encoding, a constraint): the batch is split and the others stored; the offender is stored
//!   in reduced form or, failing that, quarantined (`salvage.rs`). Its offset then moves on
//!   like any other: no record stops ingest, and none is silently lost.
//! - **Crash** anywhere: offsets never run ahead of the store, so the records after the last
//!   commit are re-read; the store ignores a (topic, partition, offset) it already has.
//! - **Rebalance**: the batch in hand is still stored, but offsets are committed only for
//!   partitions still assigned at commit time. A revoked partition's records are re-read by
//!   its next owner: redelivery, never loss, and no duplicate rows. This avoids running the
//!   store from inside librdkafka's rebalance callback.
//! - **Graceful shutdown**: the batch in hand is stored and committed, then `run` returns
//!   `Ok`. If the store is down at that moment, ingest retries for up to
//!   [`SHUTDOWN_GRACE`] and then returns without committing those records (they are re-read
//!   at the next start).

mod backpressure;
mod batch;
mod commit;
mod config;
mod kafka;
mod paused_lag;
mod record;
mod retry;
mod salvage;
mod status;

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::FromClientConfigAndContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::store::Store;

pub use config::{
    default_batch_size, default_brokers, default_group_id, default_linger_ms, IngestConfig,
};
pub use retry::retry_quarantined;
pub use status::{AssignedPartition, IngestSnapshot, IngestStatus, PartitionLag};

use batch::Batch;
use kafka::{IngestContext, Subscription};

/// How long graceful shutdown keeps retrying a failing store write before giving up (the
/// records are then not committed, so they are re-read at the next start).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// First retry delay after a failed store write, ms (doubles up to [`MAX_BACKOFF_MS`]).
pub const MIN_BACKOFF_MS: u64 = 200;
/// Longest retry delay after failed store writes, ms.
pub const MAX_BACKOFF_MS: u64 = 30_000;

/// How often the idle loop retries failed offset commits and re-checks an unreachable
/// cluster, ms.
const TICK_MS: u64 = 5_000;

/// Errors that stop ingest (bad configuration). Store outages do not: ingest waits them out.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("Kafka client error: {0}")]
    Kafka(String),
    #[error("bad DLQ topic pattern `{0}`: {1}")]
    BadPattern(String, String),
    /// The topic list is empty (after trimming): set `REDRIVE_DLQ_TOPICS`.
    #[error("no DLQ topics configured: set REDRIVE_DLQ_TOPICS (comma list; `^regex` allowed)")]
    NoTopics,
}

type IngestConsumer = StreamConsumer<IngestContext>;

/// Runs ingest until `shutdown` is cancelled; then finishes the batch in hand, commits, returns.
///
/// Returns `Err` only for configuration problems found at start-up (bad pattern, no topics,
/// a consumer that cannot be created or subscribed). Everything later (broker or store
/// outages, odd records) is logged, shown in `status`, and waited out.
pub async fn run(
    config: IngestConfig,
    store: Store,
    status: Arc<IngestStatus>,
    shutdown: CancellationToken,
) -> Result<(), IngestError> {
    let sub = Subscription::parse(&config.topics)?;
    let client_config = kafka::client_config(&config, &sub);
    let consumer: IngestConsumer = StreamConsumer::from_config_and_context(
        &client_config,
        IngestContext::new(status.clone(), config.backpressure.clone()),
    )
    .map_err(|e| IngestError::Kafka(e.to_string()))?;
    let topics: Vec<&str> = sub.entries.iter().map(String::as_str).collect();
    consumer
        .subscribe(&topics)
        .map_err(|e| IngestError::Kafka(e.to_string()))?;
    tracing::info!(
        topics = ?sub.entries,
        group = %config.group_id,
        brokers = %config.brokers,
        "ingest started"
    );

    let consumer = Arc::new(consumer);
    status.set_running(true);
    let mut ingest = IngestLoop {
        consumer: consumer.clone(),
        store,
        status: status.clone(),
        shutdown,
        batch_size: config.batch_size.max(1),
        linger: Duration::from_millis(config.linger_ms),
        batch: Batch::default(),
        commits: commit::Commits::default(),
        shutdown_deadline: None,
        bp_changes: config.backpressure.as_ref().map(|b| b.subscribe()),
        backpressure: config.backpressure.clone(),
        bp_seen: std::sync::atomic::AtomicU64::new(0),
        received_since_tick: false,
        probe_topic: sub.entries.iter().find(|t| !t.starts_with('^')).cloned(),
        bootstrap: client_config
            .get("bootstrap.servers")
            .unwrap_or(&config.brokers)
            .to_string(),
        paused_lag: paused_lag::PausedLagProbe::default(),
    };
    ingest.probe_store().await;
    ingest.probe_kafka().await;
    ingest.run().await;
    drop(ingest);

    status.set_running(false);
    // Closing leaves the group (and may wait for the coordinator): keep it off the async
    // workers.
    let closed = tokio::task::spawn_blocking(move || drop(consumer)).await;
    if let Err(e) = closed {
        tracing::warn!(error = %e, "closing the Kafka consumer failed");
    }
    status.clear_assigned();
    status.set_kafka_connected(false);
    tracing::info!("ingest stopped");
    Ok(())
}

/// The consumer loop and its state.
struct IngestLoop {
    consumer: Arc<IngestConsumer>,
    store: Store,
    status: Arc<IngestStatus>,
    shutdown: CancellationToken,
    batch_size: usize,
    linger: Duration,
    batch: Batch,
    /// Offsets of stored records not committed yet, and the commit in flight. Retried on
    /// the next flush and on the idle tick.
    commits: commit::Commits,
    /// Set when shutdown was requested while the store was failing: give up retrying then.
    shutdown_deadline: Option<Instant>,
    /// Retention backpressure (see `backpressure.rs`), its change notifications, and the
    /// generation last applied.
    backpressure: Option<Arc<crate::retention::Backpressure>>,
    bp_changes: Option<tokio::sync::watch::Receiver<u64>>,
    bp_seen: std::sync::atomic::AtomicU64,
    /// A record arrived since the last tick (then Kafka is evidently reachable).
    received_since_tick: bool,
    /// The topic an idle probe asks metadata for: the first exact subscription entry (a
    /// small request), or every topic when the subscription is patterns only.
    probe_topic: Option<String>,
    /// The consumer's `bootstrap.servers`, added again when it has no broker left
    /// ([`crate::kafka_brokers`]).
    bootstrap: String,
    /// Reads the watermarks of paused partitions, which librdkafka does not fetch.
    paused_lag: paused_lag::PausedLagProbe,
}

/// Why [`IngestLoop::wait_serving`] returned.
enum Waited {
    Elapsed,
    Shutdown,
}

impl IngestLoop {
    async fn run(&mut self) {
        let mut linger: Pin<Box<Sleep>> = Box::pin(tokio::time::sleep(Duration::ZERO));
        let mut linger_armed = false;
        let mut tick = tokio::time::interval(Duration::from_millis(TICK_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A message borrows the consumer; a local handle keeps `self` free to take it.
        let consumer = self.consumer.clone();
        loop {
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => break,
                // The tick and backpressure changes come before records: with `biased`, a
                // backlog keeps a record or a full batch ready at every turn, and below them
                // the tick never fired while it lasted (a paused topic's lag figure froze, a
                // failed offset commit waited for the backlog's end). Each is ready at most
                // once per change or per `TICK_MS`.
                _ = tick.tick() => {
                    // Also covers any race between a rebalance and a backpressure change.
                    self.apply_backpressure();
                    let paused = self.paused_partitions();
                    self.paused_lag.tick(&self.consumer, &self.status, paused);
                    self.commits.commit_now(&self.consumer, &self.status).await;
                    // Idle (or disconnected): ask the cluster. A consumer whose broker went
                    // away gets no error of its own for a long while (librdkafka reconnects
                    // quietly; the group session only times out after `session.timeout.ms`),
                    // so without this `/readyz` and `ingest_stalled` would say "connected".
                    if !self.status.kafka_connected() || !self.received_since_tick {
                        self.probe_kafka().await;
                    }
                    // A consumer that a broker's Metadata response left with no broker at all
                    // never reconnects by itself (librdkafka issue #5301).
                    let ctx = self.consumer.context();
                    if ctx.brokers.rejoin(self.consumer.client(), &self.bootstrap) {
                        self.status.record_error(
                            "Kafka: the consumer had no broker left; its bootstrap servers were \
                             added again"
                                .to_string(),
                        );
                    }
                    self.received_since_tick = false;
                    // With nothing to write, only a ping can tell that a failed store is back.
                    if !self.status.store_ok() && self.batch.is_empty() {
                        self.probe_store().await;
                    }
                }
                _ = bp_changed(&mut self.bp_changes) => {
                    if let Some(bp) = &self.backpressure {
                        if bp.is_changed_for(&self.bp_seen) {
                            self.apply_backpressure();
                        }
                    }
                }
                // A batch that filled while the last one was written: written now (after
                // the turn above, for shutdown), not after one more record nor at the
                // linger timer's next tick. A 501st record cost each of the batch's four
                // tables a one-row statement of its own, prepared anew.
                _ = std::future::ready(()), if self.batch.len() >= self.batch_size => {
                    linger_armed = false;
                    self.flush_overlapped().await;
                    self.rearm(&mut linger, &mut linger_armed).await;
                }
                _ = &mut linger, if linger_armed => {
                    linger_armed = false;
                    self.flush_overlapped().await;
                    self.rearm(&mut linger, &mut linger_armed).await;
                }
                msg = consumer.recv(), if self.batch.len() < self.batch_size => {
                    self.accept(msg);
                    if self.batch.len() >= self.batch_size {
                        linger_armed = false;
                        self.flush_overlapped().await;
                    }
                    self.rearm(&mut linger, &mut linger_armed).await;
                }
            }
        }
        // Graceful shutdown: store and commit what is in hand.
        if !self.batch.is_empty() {
            self.flush().await;
        }
        self.commits.commit_now(&self.consumer, &self.status).await;
        if !self.batch.is_empty() {
            tracing::warn!(
                records = self.batch.len(),
                partitions = %self.batch.describe(),
                "shutting down with records not stored (the store is failing); their offsets \
                 were not committed, so they will be read again at the next start"
            );
        }
    }

    /// Adds a consumed message to the batch (or logs a consumer error).
    fn accept(
        &mut self,
        msg: Result<rdkafka::message::BorrowedMessage<'_>, rdkafka::error::KafkaError>,
    ) {
        match msg {
            Ok(m) => {
                self.received_since_tick = true;
                self.status.set_kafka_connected(true);
                let (raw, warnings) = record::raw_record(&m);
                self.batch
                    .push(record::new_dead_letter(raw, warnings, record::now_ms()));
            }
            Err(e) => {
                // Consumer errors (unknown topic, broker transport) are transient or a
                // configuration matter the operator sees in the log and on /readyz; the
                // consumer keeps going.
                tracing::warn!(error = %e, "Kafka consume error");
                self.status.record_error(format!("Kafka: {e}"));
            }
        }
    }

    /// After a flush (or a record): flushes once more if the batch that filled during the
    /// last write is full, then arms the linger timer for a batch in hand (if that one is
    /// full again, the loop's `select!` writes it after a turn for shutdown).
    async fn rearm(&mut self, linger: &mut Pin<Box<Sleep>>, armed: &mut bool) {
        if self.batch.len() >= self.batch_size && !self.shutdown.is_cancelled() {
            *armed = false;
            self.flush_overlapped().await;
        }
        if !*armed {
            if let Some(started) = self.batch.started() {
                linger
                    .as_mut()
                    .reset(Instant::from_std(started) + self.linger);
                *armed = true;
            }
        }
    }

    /// [`IngestLoop::flush`] with the next batch consumed and decoded while the batch in
    /// hand is written (`docs/invariants.md`, 1): the batch in hand moves into the
    /// write, and records keep being received into a new batch, up to `batch_size`, until the
    /// write returns. Offsets are still committed only for the written batch, after its
    /// transaction committed ([`IngestLoop::commit_stored`]); the new batch waits for its own
    /// write. If the write fails, both batches become one again and [`IngestLoop::flush`]
    /// takes over (retry with consumption paused, or salvage). Not overlapped while a retention
    /// backpressure policy exists (a paused topic stays at most one batch over its limit).
    async fn flush_overlapped(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let writing = std::mem::take(&mut self.batch);
        let store = self.store.clone();
        let span = tracing::info_span!(
            "ingest_batch",
            records = writing.len(),
            partitions = %writing.describe(),
            attempt = 1u32,
            new = tracing::field::Empty,
            ms = tracing::field::Empty,
        );
        let started = std::time::Instant::now();
        // With a retention backpressure policy, a topic stops at most one batch over its
        // limit (`docs/retention.md`): the batch decoded meanwhile would be a second one, so
        // such a configuration writes without the overlap.
        let overlap = self.backpressure.as_ref().is_none_or(|bp| !bp.any_policy());
        let consumer = self.consumer.clone();
        // The write is a task of its own, which the runtime polls (and wakes on its socket's
        // answers) while this one decodes the next batch. Polled from this loop instead, each
        // of its round trips to PostgreSQL waited for the decoding in between: 8 ms a batch
        // before its first statement (`docs/bench.md`, "2026-12-04").
        let mut write = tokio::spawn(
            async move {
                let result = store
                    .insert_prepared(writing.records(), writing.prepared())
                    .await;
                (writing, result)
            }
            .instrument(span.clone()),
        );
        // A task spawned from a runtime worker waits in that worker's LIFO slot, which the
        // other worker cannot steal, until this task yields; this loop yields only when the
        // next batch is full. So the write began only after the next batch had been decoded
        // (3.8 ms of a 19.8 ms batch on SQLite, `docs/bench.md` "2026-12-06"), and nothing
        // was decoded while it ran. Yielding once lets it start now; from its first await on,
        // its wake-ups come from the store's threads or the I/O driver and any idle worker
        // takes it.
        tokio::task::yield_now().await;
        let (writing, result) = loop {
            tokio::select! {
                biased;
                done = &mut write => match done {
                    Ok(done) => break done,
                    // A panic in the write stays a panic of ingest, as when it ran in this
                    // task: its records were not committed, and nothing after them may be.
                    Err(e) => match e.try_into_panic() {
                        Ok(panic) => std::panic::resume_unwind(panic),
                        Err(e) => panic!("the ingest write task ended without a result: {e}"),
                    },
                },
                msg = consumer.recv(), if overlap && self.batch.len() < self.batch_size
                    && !self.shutdown.is_cancelled() => {
                    self.accept(msg);
                    // A wake-up of the write from this worker lands in the LIFO slot too:
                    // yield at the runtime's cooperative budget (every 128 records or so).
                    tokio::task::coop::consume_budget().await;
                }
            }
        };
        span.record("ms", started.elapsed().as_millis() as u64);
        match result {
            Ok(new) => {
                span.record("new", new);
                span.in_scope(|| tracing::debug!("batch stored"));
                let now = record::now_ms();
                self.status
                    .record_store_write(writing.len() as u64, new, now);
                if writing.len() >= self.batch_size {
                    self.status.record_full_batch(now);
                }
                self.resume();
                self.record_backpressure(writing.records());
                let stored: Vec<_> = writing.next_offsets().collect();
                self.commit_stored(stored).await;
                // Freeing a batch's records (a few MiB for 500 Spring records) is work the
                // next write need not wait for.
                tokio::task::spawn_blocking(move || drop(writing));
            }
            Err(e) => {
                span.in_scope(|| {
                    tracing::debug!(error = %e, "the overlapped write failed; retrying it as a whole")
                });
                // The failed batch first, then what arrived meanwhile (duplicates dropped).
                let arrived = std::mem::replace(&mut self.batch, writing);
                for record in arrived.into_records() {
                    self.batch.push(record);
                }
                self.flush().await;
            }
        }
    }

    /// Stores the batch in hand (retrying while the store fails, with consumption paused),
    /// then commits its offsets. Returns with the batch empty, unless shutdown gave up.
    async fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let mut backoff = Backoff::new();
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let span = tracing::info_span!(
                "ingest_batch",
                records = self.batch.len(),
                partitions = %self.batch.describe(),
                attempt,
                new = tracing::field::Empty,
                ms = tracing::field::Empty,
            );
            let started = std::time::Instant::now();
            let result = match self
                .store
                .insert_prepared(self.batch.records(), self.batch.prepared())
                .instrument(span.clone())
                .await
            {
                Ok(new) => Ok(salvage::Salvaged {
                    new,
                    ..salvage::Salvaged::default()
                }),
                Err(e) if !e.is_transient() => {
                    span.in_scope(|| {
                        tracing::warn!(
                            error = %e,
                            "the store refused the batch; splitting it to store every record"
                        )
                    });
                    let salvaged =
                        salvage::salvage(&self.store, self.batch.records(), e, record::now_ms())
                            .instrument(span.clone())
                            .await;
                    if let Ok(s) = &salvaged {
                        self.status.record_salvage(s.reduced, s.quarantined);
                    }
                    salvaged
                }
                Err(e) => Err(e),
            };
            let ms = started.elapsed().as_millis() as u64;
            span.record("ms", ms);
            match result {
                Ok(salvage::Salvaged { new, .. }) => {
                    span.record("new", new);
                    span.in_scope(|| tracing::debug!("batch stored"));
                    let now = record::now_ms();
                    self.status
                        .record_store_write(self.batch.len() as u64, new, now);
                    if self.batch.len() >= self.batch_size {
                        self.status.record_full_batch(now);
                    }
                    if attempt > 1 {
                        tracing::info!(attempts = attempt, "store is back; resuming consumption");
                    }
                    self.resume();
                    self.record_backpressure(self.batch.records());
                    let stored: Vec<_> = self.batch.next_offsets().collect();
                    self.batch.clear();
                    self.commit_stored(stored).await;
                    return;
                }
                Err(e) => {
                    let delay = backoff.next_delay();
                    span.in_scope(|| {
                        tracing::warn!(
                            error = %e,
                            retry_in_ms = delay.as_millis() as u64,
                            "storing a batch failed; consumption paused, nothing committed"
                        )
                    });
                    self.status.record_store_failure(format!("store: {e}"));
                    self.pause();
                    if let Some(deadline) = self.shutdown_deadline {
                        if Instant::now() >= deadline {
                            return;
                        }
                    }
                    if let Waited::Shutdown = self.wait_serving(delay).await {
                        // Keep retrying briefly: a store that is merely slow to come back
                        // should not cost a re-read at the next start.
                        self.shutdown_deadline = Some(Instant::now() + SHUTDOWN_GRACE);
                    }
                }
            }
        }
    }

    /// THE SAFETY POINT: the only place offsets are committed.
    ///
    /// `stored` lists, per partition, the next offset after records that `insert_batch` has
    /// just returned `Ok` for — i.e. that are durable in the store. Committing them can only
    /// make Kafka skip records the store already has, so nothing is lost even if the process
    /// dies right after. Offsets are committed only for partitions still assigned: after a
    /// rebalance the new owner re-reads from the old commit, and the store ignores duplicates.
    /// The commit overlaps the next batch's write (`commit.rs`).
    async fn commit_stored(&mut self, stored: Vec<((String, i32), i64)>) {
        self.commits.add_stored(stored);
        self.commits.start(&self.consumer, &self.status).await;
    }

    /// Waits `delay` while still polling the consumer (librdkafka needs a poll at least every
    /// `max.poll.interval.ms` to keep the group membership, and rebalances are served here).
    /// A message that still arrives (fetched before the pause, or from a partition assigned
    /// meanwhile) joins the batch: it is not committed until stored, so it is safe.
    async fn wait_serving(&mut self, delay: Duration) -> Waited {
        let until = match self.shutdown_deadline {
            Some(deadline) => (Instant::now() + delay).min(deadline),
            None => Instant::now() + delay,
        };
        let watch_shutdown = self.shutdown_deadline.is_none();
        let consumer = self.consumer.clone();
        loop {
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled(), if watch_shutdown => return Waited::Shutdown,
                _ = tokio::time::sleep_until(until) => return Waited::Elapsed,
                msg = consumer.recv() => {
                    self.accept(msg);
                    // A partition assigned meanwhile is paused by the context; pausing again
                    // covers any race with that.
                    self.pause();
                }
            }
        }
    }

    fn pause(&self) {
        self.consumer.context().paused.store(true, Ordering::SeqCst);
        self.status.set_paused(true);
        match self.consumer.assignment() {
            Ok(tpl) => {
                if let Err(e) = self.consumer.pause(&tpl) {
                    tracing::warn!(error = %e, "could not pause consumption");
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not read the assignment to pause it"),
        }
    }

    fn resume(&self) {
        if !self.consumer.context().paused.swap(false, Ordering::SeqCst) {
            return;
        }
        self.status.set_paused(false);
        match self.consumer.assignment() {
            Ok(tpl) => {
                if let Err(e) = self.consumer.resume(&tpl) {
                    tracing::warn!(error = %e, "could not resume consumption");
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not read the assignment to resume it"),
        }
        // Resuming after a store failure must not lift retention backpressure.
        self.consumer
            .context()
            .bp_applied
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.apply_backpressure();
    }

    /// The assigned partitions ingest has paused now: all of them while the store fails,
    /// else those of DLQ topics held by retention backpressure.
    fn paused_partitions(&self) -> Vec<(String, i32)> {
        let assigned = self.status.assigned_partitions();
        let ctx = self.consumer.context();
        if ctx.paused.load(Ordering::SeqCst) {
            return assigned;
        }
        let held = ctx.bp_applied.lock().unwrap_or_else(|p| p.into_inner());
        assigned
            .into_iter()
            .filter(|(topic, _)| held.contains(topic))
            .collect()
    }

    /// Pings the store (the start-up check, and while idle after a failure).
    async fn probe_store(&self) {
        match self.store.ping().await {
            Ok(()) => self.status.set_store_ok(true),
            Err(e) => self.status.record_error(format!("store: {e}")),
        }
    }

    /// Asks the cluster for metadata (at most 3 s; of [`IngestLoop::probe_topic`]) to learn
    /// whether it is reachable.
    async fn probe_kafka(&self) {
        let consumer = self.consumer.clone();
        let topic = self.probe_topic.clone();
        let result = tokio::task::spawn_blocking(move || {
            consumer
                .fetch_metadata(topic.as_deref(), Duration::from_secs(3))
                .map(|_| ())
        })
        .await;
        match result {
            Ok(Ok(())) => self.status.set_kafka_connected(true),
            Ok(Err(e)) => {
                self.status.set_kafka_connected(false);
                self.status.record_error(format!("Kafka: {e}"));
            }
            Err(e) => tracing::warn!(error = %e, "Kafka probe task failed"),
        }
    }
}

/// Resolves when backpressure changed; pending forever without backpressure.
async fn bp_changed(rx: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    match rx {
        Some(rx) => {
            if rx.changed().await.is_err() {
                // The sender is gone (shutdown): stop listening.
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

/// Exponential backoff with "equal jitter": each delay is between half and all of the
/// current step; the step doubles from [`MIN_BACKOFF_MS`] up to [`MAX_BACKOFF_MS`].
struct Backoff {
    step_ms: u64,
    rng: u64,
}

impl Backoff {
    fn new() -> Backoff {
        // Jitter only needs to spread retries of several instances apart; the clock's
        // nanoseconds are random enough and avoid a dependency.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64)
            .unwrap_or(0x9E37_79B9);
        Backoff {
            step_ms: MIN_BACKOFF_MS,
            rng: seed | 1,
        }
    }

    fn next_delay(&mut self) -> Duration {
        // xorshift64
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let half = self.step_ms / 2;
        let delay = half + self.rng % (half + 1);
        self.step_ms = (self.step_ms * 2).min(MAX_BACKOFF_MS);
        Duration::from_millis(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_with_jitter() {
        let mut b = Backoff::new();
        let mut step = MIN_BACKOFF_MS;
        for _ in 0..20 {
            let d = b.next_delay().as_millis() as u64;
            assert!(
                d >= step / 2 && d <= step,
                "{d} not in [{}, {step}]",
                step / 2
            );
            step = (step * 2).min(MAX_BACKOFF_MS);
        }
        assert_eq!(b.step_ms, MAX_BACKOFF_MS);
    }
}
