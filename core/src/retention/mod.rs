//! Retention (`docs/retention.md`): limits per DLQ topic on the age, count and bytes of live
//! dead letters and on the age of deleted and replayed ones; at a limit, a purge (oldest
//! first, archived first when an archive is configured, in short chunks, audited, counted) or
//! backpressure (ingest of the topic paused until space is free).
//!
//! [`run`] is the background task `serve` starts on every instance: each
//! `retention.interval_ms` it counts each DLQ topic's usage (which backpressure follows, on
//! every instance) and, on the leader only, purges what is over a limit ([`purge`]).

pub mod backpressure;
pub mod policy;
pub mod purge;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use backpressure::{Backpressure, PausedTopic};
pub use policy::{ArchiveConfig, LimitAction, Policy, RetentionConfig, TopicPolicy};
pub use purge::{PurgeReason, PurgeReport};

use crate::store::Store;

/// The actor of retention's runs in the audit trail.
pub const RETENTION_ACTOR: &str = "(retention)";

/// Counters of this instance's retention, read by `/metrics`. Share as `Arc`.
#[derive(Debug, Default)]
pub struct RetentionStatus {
    /// Dead letters purged, by (DLQ topic, reason). Bounded by the topics in the store.
    purged: Mutex<BTreeMap<(String, &'static str), u64>>,
    archived: AtomicU64,
    runs: AtomicU64,
    failures: AtomicU64,
    chunks: AtomicU64,
    last_run_ms: AtomicU64,
}

/// A copy of [`RetentionStatus`].
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RetentionSnapshot {
    /// (DLQ topic, reason, purged).
    pub purged: Vec<(String, String, u64)>,
    pub archived_total: u64,
    pub runs_total: u64,
    pub failures_total: u64,
    pub chunks_total: u64,
    /// Unix time of the last finished purge run, ms (0 = none).
    pub last_run_ms: u64,
}

impl RetentionStatus {
    pub(crate) fn record_purged(&self, topic: &str, reason: PurgeReason, n: u64) {
        if n == 0 {
            return;
        }
        let mut m = self.purged.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry((topic.to_string(), reason.as_str())).or_insert(0) += n;
    }

    pub(crate) fn record_run(&self, archived: u64, chunks: u64, at_ms: i64) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        self.archived.fetch_add(archived, Ordering::Relaxed);
        self.chunks.fetch_add(chunks, Ordering::Relaxed);
        self.last_run_ms
            .store(at_ms.max(0) as u64, Ordering::Relaxed);
    }

    pub(crate) fn record_failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> RetentionSnapshot {
        let purged = self
            .purged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|((t, r), n)| (t.clone(), r.to_string(), *n))
            .collect();
        RetentionSnapshot {
            purged,
            archived_total: self.archived.load(Ordering::Relaxed),
            runs_total: self.runs.load(Ordering::Relaxed),
            failures_total: self.failures.load(Ordering::Relaxed),
            chunks_total: self.chunks.load(Ordering::Relaxed),
            last_run_ms: self.last_run_ms.load(Ordering::Relaxed),
        }
    }
}

/// Runs retention until `shutdown`: every `config.interval_ms`, the usage check (all
/// instances) and, when `is_leader()` says so, a purge run. Errors are logged and counted,
/// and the next tick tries again.
pub async fn run(
    config: RetentionConfig,
    store: Store,
    backpressure: Arc<Backpressure>,
    status: Arc<RetentionStatus>,
    is_leader: impl Fn() -> bool + Send + 'static,
    shutdown: CancellationToken,
) {
    if !config.enabled {
        tracing::info!("retention is disabled (retention.enabled = false)");
        return;
    }
    let target = match purge::archive_target(&config) {
        Ok(t) => t,
        Err(e) => {
            // The configuration was checked at start-up; a directory that cannot be made or
            // an S3 client that cannot be built is logged, and purges that need it wait.
            tracing::error!(error = %e, "the retention archive cannot be opened; purges that archive first are skipped");
            status.record_failure();
            None
        }
    };
    let mut tick = tokio::time::interval(Duration::from_millis(config.interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let leader = is_leader();
        let work = purge::tick(
            &config,
            &store,
            &backpressure,
            &status,
            target.as_ref(),
            leader,
        );
        tokio::select! {
            _ = shutdown.cancelled() => return,
            r = work => {
                if let Err(e) = r {
                    status.record_failure();
                    tracing::warn!(error = %e, "retention run failed; retrying at the next interval");
                }
            }
        }
    }
}
