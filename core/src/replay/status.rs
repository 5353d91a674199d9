//! What the relay reports to `/readyz` and `/metrics`: counters and the last error, updated
//! by the relay, read lock-free (except the last error's text) by the server.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Live relay state, shared between the relay task and the server (`Arc<RelayStatus>`).
#[derive(Debug, Default)]
pub struct RelayStatus {
    running: AtomicBool,
    /// 0 unknown (nothing published or failed yet), 1 reachable, 2 unreachable.
    kafka: AtomicU8,
    published_total: AtomicU64,
    failed_total: AtomicU64,
    retried_total: AtomicU64,
    released_total: AtomicU64,
    rejected_total: AtomicU64,
    active_jobs: AtomicU64,
    cycles_total: AtomicU64,
    last_error: Mutex<Option<(i64, String)>>,
}

/// A point-in-time copy of [`RelayStatus`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelaySnapshot {
    /// The relay task is running (between start-up and shutdown).
    pub running: bool,
    /// Whether Kafka answered the last publish: `None` before the first one.
    pub kafka_reachable: Option<bool>,
    /// Records published and marked (each outbox row once), since start.
    pub published_total: u64,
    /// Outbox rows marked `failed` (dead letter `replay_failed`): refused for good, or given
    /// up after `max_attempts`, since start.
    pub failed_total: u64,
    /// Failed publish attempts that will be retried, since start.
    pub retried_total: u64,
    /// Rows handed back without an attempt counted (Kafka unreachable), since start.
    pub released_total: u64,
    /// Records Kafka refused for good (too large, not authorised, no such topic), failed at
    /// once without a retry, since start. Each is also in `failed_total` once marked.
    #[serde(default)]
    pub rejected_total: u64,
    /// Jobs being worked on now.
    pub active_jobs: u64,
    /// Poll cycles of the relay's main loop (each reads the active jobs once, after reaping
    /// the workers that ended), since start: a test waits for a few to pass instead of
    /// sleeping.
    #[serde(default)]
    pub cycles_total: u64,
    /// The last error (Kafka or store) and when, epoch ms.
    pub last_error: Option<String>,
    pub last_error_at_ms: Option<i64>,
}

impl RelayStatus {
    /// A copy of the current state.
    pub fn snapshot(&self) -> RelaySnapshot {
        let (last_error_at_ms, last_error) = match self.last_error.lock() {
            Ok(g) => g
                .clone()
                .map_or((None, None), |(at, e)| (Some(at), Some(e))),
            Err(p) => p
                .into_inner()
                .clone()
                .map_or((None, None), |(at, e)| (Some(at), Some(e))),
        };
        RelaySnapshot {
            running: self.running.load(Ordering::Relaxed),
            kafka_reachable: match self.kafka.load(Ordering::Relaxed) {
                1 => Some(true),
                2 => Some(false),
                _ => None,
            },
            published_total: self.published_total.load(Ordering::Relaxed),
            failed_total: self.failed_total.load(Ordering::Relaxed),
            retried_total: self.retried_total.load(Ordering::Relaxed),
            released_total: self.released_total.load(Ordering::Relaxed),
            rejected_total: self.rejected_total.load(Ordering::Relaxed),
            active_jobs: self.active_jobs.load(Ordering::Relaxed),
            cycles_total: self.cycles_total.load(Ordering::Relaxed),
            last_error,
            last_error_at_ms,
        }
    }

    pub(crate) fn set_running(&self, running: bool) {
        self.running.store(running, Ordering::Relaxed);
    }

    pub(crate) fn set_kafka_reachable(&self, reachable: bool) {
        self.kafka
            .store(if reachable { 1 } else { 2 }, Ordering::Relaxed);
    }

    pub(crate) fn add_cycle(&self) {
        self.cycles_total.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn set_active_jobs(&self, n: usize) {
        self.active_jobs.store(n as u64, Ordering::Relaxed);
    }

    /// Adds what one mark recorded.
    pub(crate) fn add_marked(&self, published: u64, failed: u64, retried: u64, released: u64) {
        self.published_total.fetch_add(published, Ordering::Relaxed);
        self.failed_total.fetch_add(failed, Ordering::Relaxed);
        self.retried_total.fetch_add(retried, Ordering::Relaxed);
        self.released_total.fetch_add(released, Ordering::Relaxed);
    }

    /// Counts records refused for good.
    pub(crate) fn add_rejected(&self, n: u64) {
        self.rejected_total.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn record_error(&self, error: String) {
        let now = super::now_ms();
        match self.last_error.lock() {
            Ok(mut g) => *g = Some((now, error)),
            Err(p) => *p.into_inner() = Some((now, error)),
        }
    }
}
