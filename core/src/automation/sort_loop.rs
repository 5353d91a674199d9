//! The leader's sorter loop (`docs/automation.md`, "Sorting"): sorts unsorted dead letters
//! with the active rule set version, batch after batch while there are any, then once a
//! second. Runs on every instance but works only while [`crate::leader`] says this one
//! leads; a batch sorted twice around a failover writes nothing the second time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{RuleSet, Tier};
use crate::store::{SortReport, Store, MOVE_BATCH, SORT_BATCH};

/// Longest wait between age-move passes; a rule with a shorter `move_after.after` is
/// checked every half of it, at least once a second.
pub const MOVE_INTERVAL: Duration = Duration::from_secs(60);

/// Wait between passes when nothing was left unsorted.
pub const IDLE_WAIT: Duration = Duration::from_secs(1);

/// What the sorter did, for metrics (`docs/metrics.md`, `redrive_tier_*`) and the
/// automation page. Shared with the server.
#[derive(Debug, Default)]
pub struct SorterStatus {
    /// Dead letters sorted since start, all tiers.
    pub sorted_total: AtomicU64,
    /// Dead letters sorted since start, per tier in [`Tier::ALL`] order.
    pub sorted_by_tier: [AtomicU64; 4],
    /// Dead letters moved by age since start.
    pub moved_total: AtomicU64,
    /// Passes that failed since start (the store unavailable, a version that does not
    /// compile).
    pub errors_total: AtomicU64,
    /// The rule set version in use (0: none stored yet).
    pub version: AtomicU64,
    /// The last error (a stored version that does not compile, the store unavailable);
    /// cleared by the next good pass.
    pub last_error: Mutex<Option<String>>,
}

impl SorterStatus {
    fn set_error(&self, e: Option<String>) {
        if e.is_some() {
            self.errors_total.fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(mut g) = self.last_error.lock() {
            *g = e;
        }
    }

    /// Dead letters sorted into `tier` since start.
    pub fn sorted_into(&self, tier: Tier) -> u64 {
        let i = Tier::ALL.iter().position(|t| *t == tier).unwrap_or(0);
        self.sorted_by_tier[i].load(Ordering::Relaxed)
    }

    /// Adds a batch's sorted dead letters (the sorter's, or ingest's: `store/ingest_tiers.rs`).
    pub(crate) fn count(&self, report: &SortReport) {
        self.sorted_total
            .fetch_add(report.sorted, Ordering::Relaxed);
        for (tier, n) in &report.per_tier {
            let i = Tier::ALL.iter().position(|t| t == tier).unwrap_or(0);
            self.sorted_by_tier[i].fetch_add(*n, Ordering::Relaxed);
        }
    }
}

/// Runs until `shutdown`. `on_batch` sees each batch's report (alerts on poison and
/// escalations hang off it).
pub async fn run(
    store: Store,
    is_leader: impl Fn() -> bool + Send + 'static,
    status: Arc<SorterStatus>,
    on_batch: impl Fn(&SortReport) + Send + 'static,
    shutdown: CancellationToken,
) {
    let mut compiled: Option<(i64, RuleSet)> = None;
    let mut next_move = tokio::time::Instant::now();
    // The version the next move time was planned with: a new version plans again at once
    // (its `move_after` may be shorter).
    let mut move_version: Option<i64> = None;
    loop {
        let mut more = false;
        if is_leader() {
            match pass(&store, &mut compiled).await {
                Ok(report) => {
                    status.set_error(None);
                    status.version.store(
                        compiled.as_ref().map_or(0, |c| c.0) as u64,
                        Ordering::Relaxed,
                    );
                    status.count(&report);
                    if report.sorted > 0 {
                        tracing::debug!(sorted = report.sorted, "dead letters sorted into tiers");
                        if !report.poison.is_empty() || !report.escalated.is_empty() {
                            tracing::info!(
                                poison = report.poison.len(),
                                escalated = report.escalated.len(),
                                loop_guarded = report.loop_guarded.len(),
                                "dead letters sorted into poison or escalated to manual"
                            );
                        }
                        on_batch(&report);
                    }
                    more = report.read >= u64::from(SORT_BATCH);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot sort dead letters into tiers yet");
                    status.set_error(Some(e));
                }
            }
            // Age-based movement, between sort batches (`docs/automation.md`).
            let version_now = compiled.as_ref().map(|c| c.0);
            if tokio::time::Instant::now() >= next_move || version_now != move_version {
                if let Some((v, set)) = &compiled {
                    move_version = Some(*v);
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as i64);
                    match store.move_aged(set, now, MOVE_BATCH).await {
                        Ok(m) => {
                            status.moved_total.fetch_add(m.moved, Ordering::Relaxed);
                            for (rule, from, to, n) in &m.per_rule {
                                tracing::info!(rule, %from, %to, moved = n, "dead letters moved by age");
                            }
                            next_move = tokio::time::Instant::now()
                                + if m.more {
                                    IDLE_WAIT
                                } else {
                                    move_interval(set)
                                };
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot move aged dead letters yet");
                            status.set_error(Some(e.to_string()));
                            next_move = tokio::time::Instant::now() + IDLE_WAIT;
                        }
                    }
                }
            }
        }
        if more {
            tokio::task::yield_now().await;
            if shutdown.is_cancelled() {
                return;
            }
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(IDLE_WAIT) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// How long until the next age-move pass: [`MOVE_INTERVAL`], or half the shortest enabled
/// `move_after.after`, at least [`IDLE_WAIT`].
pub fn move_interval(set: &RuleSet) -> Duration {
    set.rules
        .iter()
        .filter(|r| !r.disabled)
        .filter_map(|r| r.move_after)
        .map(|m| Duration::from_millis(m.after_ms / 2))
        .min()
        .unwrap_or(MOVE_INTERVAL)
        .clamp(IDLE_WAIT, MOVE_INTERVAL)
}

/// One batch with the active version (compiled again only when the version changed).
async fn pass(store: &Store, compiled: &mut Option<(i64, RuleSet)>) -> Result<SortReport, String> {
    let active = store.active_rule_set().await.map_err(|e| e.to_string())?;
    let version = active.as_ref().map(|v| v.version);
    if compiled.as_ref().map(|c| c.0) != Some(version.unwrap_or(0)) {
        let set = match &active {
            Some(v) => v
                .compile()
                .map_err(|e| format!("rule set version {} does not compile: {e}", v.version))?,
            None => RuleSet::compile(super::RuleSetSpec::default()).map_err(|e| e.0)?,
        };
        *compiled = Some((version.unwrap_or(0), set));
    }
    let (_, set) = compiled.as_ref().expect("compiled above");
    store
        .sort_unsorted(set, version, SORT_BATCH)
        .await
        .map_err(|e| e.to_string())
}
