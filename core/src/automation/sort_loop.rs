//! The leader's sorter loop (`docs/automation.md`, "Sorting"): sorts unsorted dead letters
//! with the active rule set version, batch after batch while there are any, then once a
//! second. Runs on every instance but works only while [`crate::leader`] says this one
//! leads; a batch sorted twice around a failover writes nothing the second time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::RuleSet;
use crate::store::{SortReport, Store, SORT_BATCH};

/// Wait between passes when nothing was left unsorted.
pub const IDLE_WAIT: Duration = Duration::from_secs(1);

/// What the sorter did, for metrics and the automation page. Shared with the server.
#[derive(Debug, Default)]
pub struct SorterStatus {
    /// Dead letters sorted since start, all tiers.
    pub sorted_total: AtomicU64,
    /// The rule set version in use (0: none stored yet).
    pub version: AtomicU64,
    /// The last error (a stored version that does not compile, the store unavailable);
    /// cleared by the next good pass.
    pub last_error: Mutex<Option<String>>,
}

impl SorterStatus {
    fn set_error(&self, e: Option<String>) {
        if let Ok(mut g) = self.last_error.lock() {
            *g = e;
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
                    status
                        .sorted_total
                        .fetch_add(report.sorted, Ordering::Relaxed);
                    if report.sorted > 0 {
                        tracing::debug!(sorted = report.sorted, "dead letters sorted into tiers");
                        on_batch(&report);
                    }
                    more = report.read >= u64::from(SORT_BATCH);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot sort dead letters into tiers yet");
                    status.set_error(Some(e));
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
