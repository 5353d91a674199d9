//! What compiling a rule set gives: the checked [`RuleSet`] and its rules, schedules, gates
//! and age moves, as the sorter and the scheduler use them (durations in ms).

use super::RuleSetSpec;
use crate::actions::LagGate;
use crate::automation::matcher::Matcher;
use crate::automation::tier::Tier;

/// A checked, compiled rule set: what the sorter and the scheduler use.
#[derive(Debug, Clone)]
pub struct RuleSet {
    /// The spec it was compiled from (shown, serialised back, diffed).
    pub spec: RuleSetSpec,
    pub rules: Vec<TierRule>,
}

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct TierRule {
    pub name: String,
    pub tier: Tier,
    pub disabled: bool,
    /// Position in the set, from 1 (shown in reasons).
    pub position: usize,
    pub(super) matcher: Matcher,
    /// `Some` exactly for transient rules.
    pub schedule: Option<Schedule>,
    pub gate: Gate,
    pub move_after: Option<AgeMove>,
}

/// A compiled schedule; durations in ms.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub every_ms: u64,
    pub max_attempts: u32,
    pub backoff_ms: u64,
    pub backoff_max_ms: u64,
    pub backoff_multiplier: f64,
    pub jitter: f64,
    /// msgs/s.
    pub rate_per_sec: u32,
    pub batch_size: u32,
    pub target_topic: Option<String>,
    pub pause_when_refailed_over: f64,
    pub pause_min_replayed: u32,
}

impl Schedule {
    /// Wait before automatic attempt `attempt` (1 = the first), ms: `backoff ×
    /// multiplier^(attempt-1)` capped at `backoff_max`, then spread by `jitter` with
    /// `unit_random` in `[0, 1)` (0.5 = no spread). Never negative.
    pub fn delay_ms(&self, attempt: u32, unit_random: f64) -> u64 {
        let exp = attempt.saturating_sub(1).min(64) as i32;
        let base = (self.backoff_ms as f64) * self.backoff_multiplier.powi(exp);
        let base = base.min(self.backoff_max_ms as f64);
        let spread = 1.0 + self.jitter * (2.0 * unit_random.clamp(0.0, 1.0) - 1.0);
        (base * spread).max(0.0).round() as u64
    }
}

/// A compiled health gate; empty = always passes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gate {
    pub http: Option<HttpGate>,
    pub lag: Option<LagGate>,
    pub quiet_for_ms: Option<u64>,
}

impl Gate {
    /// True when the gate checks nothing.
    pub fn is_open(&self) -> bool {
        self.http.is_none() && self.lag.is_none() && self.quiet_for_ms.is_none()
    }
}

/// A compiled HTTP check.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpGate {
    pub url: url::Url,
    pub timeout_ms: u64,
}

/// A compiled age-based move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgeMove {
    pub after_ms: u64,
    pub to: Tier,
}
