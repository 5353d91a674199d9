//! Live counters of the alert evaluator and the notification dispatcher, read by `/metrics`
//! (`redrive_alerts`, `redrive_alert_notifications_*`; `docs/metrics.md`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

/// Shared as `Arc<AlertStatus>` between the evaluator, the dispatcher and the metrics.
#[derive(Debug, Default)]
pub struct AlertStatus {
    /// The configured rule names: the `redrive_alerts` series (rule × state, zeros included).
    rules: Vec<String>,
    /// Scopes per (rule, state), as last read from the store (every instance reads it, so
    /// every instance's `/metrics` agrees).
    states: Mutex<Vec<(String, String, i64)>>,
    /// This instance evaluates (it holds the leadership).
    leader: AtomicBool,
    evaluations: AtomicU64,
    evaluation_failures: AtomicU64,
    /// Epoch ms of the last successful evaluation (0 = none).
    last_evaluation_ms: AtomicI64,
    /// Per notifier: (delivered, failed attempts that will be retried, given up).
    notifications: Mutex<BTreeMap<String, (u64, u64, u64)>>,
}

/// One delivery attempt's outcome, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptOutcome {
    Delivered,
    Retried,
    GaveUp,
}

/// A copy of the counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlertStatusSnapshot {
    pub rules: Vec<String>,
    pub states: Vec<(String, String, i64)>,
    pub leader: bool,
    pub evaluations: u64,
    pub evaluation_failures: u64,
    pub last_evaluation_ms: Option<i64>,
    /// notifier → (delivered, retried, failed).
    pub notifications: BTreeMap<String, (u64, u64, u64)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AlertStatus {
    /// Names the configured rules.
    pub fn with_rules<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> AlertStatus {
        self.rules = names.into_iter().map(str::to_string).collect();
        self
    }

    /// Registers the configured notifiers (so their counters read 0 before the first send).
    pub fn with_notifiers<'a>(self, names: impl IntoIterator<Item = &'a str>) -> AlertStatus {
        {
            let mut m = lock(&self.notifications);
            for n in names {
                m.entry(n.to_string()).or_default();
            }
        }
        self
    }

    pub fn snapshot(&self) -> AlertStatusSnapshot {
        let last = self.last_evaluation_ms.load(Ordering::Relaxed);
        AlertStatusSnapshot {
            rules: self.rules.clone(),
            states: lock(&self.states).clone(),
            leader: self.leader.load(Ordering::Relaxed),
            evaluations: self.evaluations.load(Ordering::Relaxed),
            evaluation_failures: self.evaluation_failures.load(Ordering::Relaxed),
            last_evaluation_ms: (last > 0).then_some(last),
            notifications: lock(&self.notifications).clone(),
        }
    }

    pub fn set_states(&self, states: Vec<(String, String, i64)>) {
        *lock(&self.states) = states;
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Relaxed);
    }

    pub fn evaluated(&self, now_ms: i64) {
        self.evaluations.fetch_add(1, Ordering::Relaxed);
        self.last_evaluation_ms.store(now_ms, Ordering::Relaxed);
    }

    pub fn evaluation_failed(&self) {
        self.evaluation_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one delivery attempt to `notifier`.
    pub fn attempt(&self, notifier: &str, outcome: AttemptOutcome) {
        let mut m = lock(&self.notifications);
        let e = m.entry(notifier.to_string()).or_default();
        match outcome {
            AttemptOutcome::Delivered => e.0 += 1,
            AttemptOutcome::Retried => e.1 += 1,
            AttemptOutcome::GaveUp => e.2 += 1,
        }
    }
}
