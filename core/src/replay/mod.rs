//! The replay relay: publishes the outbox to Kafka and records what became of each row.
//!
//! # Flow
//! Every `poll_interval_ms` the relay asks the store for jobs with work
//! ([`Store`] `active_jobs`) and runs one worker per job (at most `max_parallel_jobs`), so a
//! throttled job never holds up another. A worker loops: claim up to `batch_size` due rows
//! under a lease → build each record (original key, value and application headers, minus the
//! convention's diagnostics, plus the five `redrive-*` headers) → send them all through one
//! idempotent producer (`enable.idempotence=true`, `acks=all`), a throttled job's paced by
//! slots of its rate taken from the store (`store/replay_rate.rs`: one bucket per job,
//! shared by every instance) → await every delivery report → record the batch in ONE store
//! transaction (outbox rows published with partition/offset, dead letters `replayed` with
//! `replay_count + 1`, history events, job counters). Up to `BATCHES_IN_FLIGHT` (3) batches of
//! an unthrottled job are in flight at once: the next claim overlaps the last batch's
//! delivery reports and mark (on SQLite the relay's claims and marks take turns for the
//! single writer lock; on PostgreSQL two marks of a job may run at once). A worker walks its job in outbox-id order with a
//! cursor, then makes one more pass from the start for retries that came due.
//!
//! # Failures
//! Every producer error is classified (`kafka.rs`; the table is in `docs/replay.md`):
//! - **Kafka unreachable** (timeouts, all brokers down, no leader, not enough in-sync
//!   replicas, authentication): the rows go back to `pending` without counting an attempt,
//!   the job shows `waiting` with the error, and the relay retries after an exponential
//!   backoff with full jitter (`backoff_base_ms` .. `backoff_max_ms`). It resumes by itself
//!   when Kafka is back. The wait is bounded per job: once the job has been waiting for
//!   `outage_max_ms` without publishing anything, outage failures count attempts like any
//!   other, so a cluster that never comes back ends the job instead of holding it forever.
//! - **A permanent error** (record too large, not authorised, no such or an invalid topic, a
//!   record the broker calls invalid, a fatal producer error caused by missing
//!   authorisation): the row is `failed` at once with the reason, the dead letter
//!   `replay_failed`; the other records of the job go on.
//! - **Any other error of a record** (a corrupt batch, a fatal producer error such as a
//!   broken sequence): attempts + 1 and a retry after a backoff with full jitter; after
//!   `max_attempts` the row is `failed`, the dead letter `replay_failed` with the error.
//!   After a fatal error the producer is replaced before the retry.
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

pub mod backoff;
mod canary;
mod config;
mod kafka;
mod lag_gate;
pub(crate) mod order;
mod pace;
mod placement;
mod record;
mod status;
pub mod transform;
mod transform_batch;
mod worker;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::store::Store;

use self::kafka::ProducerSlot;
use self::worker::Relay;

pub use self::config::*;
pub use self::lag_gate::read_group_lag;
pub(crate) use self::record::application_headers;
pub use self::record::{
    HEADER_DEAD_LETTER_ID, HEADER_EDIT_VERSION, HEADER_IDEMPOTENCY_KEY, HEADER_REPLAYED_BY,
    HEADER_REPLAY_COUNT, HEADER_REPLAY_ID, REDRIVE_HEADER_PREFIX,
};
pub use self::status::{RelaySnapshot, RelayStatus};

/// Batches of one unthrottled job in flight at once (`worker.rs`): enough that a claim, a
/// batch's delivery reports and a mark overlap; each holds at most `batch_size` claimed rows.
const BATCHES_IN_FLIGHT: usize = 3;

/// Test hook (see the module docs): abort the process after this many delivery reports.
pub const FAULT_ABORT_AFTER_PUBLISH_ENV: &str = "REDRIVE_FAULT_RELAY_ABORT_AFTER_PUBLISH";

pub(crate) use crate::clock::now_ms;

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
    let producer = ProducerSlot::create(&config, status.clone())?;
    let bootstrap = kafka::client_config(&config)
        .get("bootstrap.servers")
        .unwrap_or(&config.brokers)
        .to_string();
    let ignored = kafka::ignored_properties(&config);
    if !ignored.is_empty() {
        tracing::warn!(
            target: "redrive::replay",
            ignored = ?ignored,
            "the replay relay ignores these [kafka] properties: its idempotence, acks and \
             delivery/lease timing are its own (set relay_delivery_timeout_ms instead)"
        );
    }
    tracing::info!(
        brokers = %config.brokers,
        batch_size = config.batch_size,
        lease_ms = config.lease_ms,
        outage_max_ms = config.outage_max_ms,
        "replay relay started"
    );
    let poll = Duration::from_millis(config.poll_interval_ms.max(10));
    let max_jobs = config.max_parallel_jobs.max(1);
    let store_backend = store.backend();
    let relay = Arc::new(Relay {
        config,
        store,
        status: status.clone(),
        producer,
        shutdown: shutdown.clone(),
        abort_after,
        delivered: AtomicU64::new(0),
        outage_streak: AtomicU32::new(0),
        write_turn: (store_backend == "sqlite").then(|| Arc::new(tokio::sync::Mutex::new(()))),
        marks_in_flight: if store_backend == "sqlite" { 1 } else { 2 },
        batches_in_flight: BATCHES_IN_FLIGHT,
        partitions: placement::PartitionCounts::default(),
        lag: lag_gate::LagGates::default(),
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
        status.add_cycle();
        relay.producer.rejoin_if_orphaned(&bootstrap, &status);
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
pub(crate) fn fault_point() -> Option<u64> {
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
