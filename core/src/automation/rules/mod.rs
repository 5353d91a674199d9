//! The rule set that sorts dead letters into tiers (`docs/automation.md`, "Rules").
//!
//! Written as TOML: the `[automation]` table of `redrive.toml`, or the text a user with the
//! `manage_rules` permission saves in the UI (each save is a new version in the store,
//! audited). The same [`RuleSetSpec`] reads both:
//!
//! ```toml
//! default_tier = "manual"          # no rule matched
//! poison_by_convention = true      # records the conventions mark non-retryable: poison
//! loop_guard_returns = 3           # came back this many times: no more automation
//!
//! [[rule]]
//! name = "llm-timeouts"
//! tier = "transient"
//! match.dlq_topics = ["llm.requests.dlq"]
//! match.error_classes = ["TimeoutError", "*.SocketTimeoutException"]
//! schedule = { every = "10m", max_attempts = 3, backoff = "1m", rate_per_sec = 100 }
//! gate.http = { url = "http://llm:8080/health", timeout = "5s" }
//! move_after = { after = "10d", to = "archive" }
//! ```
//!
//! Matching: every condition given must hold (AND); within one list any entry may match (OR);
//! an empty or absent condition matches everything. Rules are tried in order; the first
//! enabled rule that matches gives the tier. A record with a poison signal
//! ([`poison_signal`]) never gets the `transient` tier: transient rules are skipped for it,
//! and when no other rule takes it, it is `poison`.
//!
//! Durations are humantime text (`"90s"`, `"10m"`, `"1h 30m"`, `"10d"`).
//!
//! The parts: `spec`, the rule set as written (serde types and their defaults);
//! `compile`, its checks and compilation (and the TOML text in and out); `compiled`, what
//! compiling gives ([`RuleSet`], [`TierRule`], [`Schedule`], [`Gate`]); `assign`, the tier
//! of one dead letter ([`MatchInput`] → [`Assignment`]).

mod assign;
mod compile;
mod compiled;
#[cfg(all(test, feature = "server"))]
mod corpus_tests;
mod spec;
#[cfg(test)]
mod tests;

pub use self::assign::{Assignment, MatchInput};
pub use self::compile::parse_duration_ms;
pub use self::compiled::{AgeMove, Gate, HttpGate, RuleSet, Schedule, TierRule};
pub use self::spec::{
    GateSpec, HttpGateSpec, MatchSpec, MoveSpec, RuleSetSpec, RuleSpec, ScheduleSpec,
};
pub use super::poison::poison_signal;

/// Most rules in one rule set.
pub const MAX_RULES: usize = 200;
/// Longest rule name, bytes (names are `[A-Za-z0-9._-]`).
pub const MAX_RULE_NAME_BYTES: usize = 64;
/// Largest batch a scheduled round may replay, records.
pub const MAX_BATCH_SIZE: u32 = 10_000;
/// Largest rule set text accepted, bytes.
pub const MAX_RULE_SET_BYTES: usize = 256 * 1024;
/// Shortest `move_after.after`, ms: the leader's age-move pass runs at most once a second.
pub const MIN_MOVE_AFTER_MS: u64 = 1_000;
/// Most entries in one match list (topics, classes, ...).
pub const MAX_MATCH_ENTRIES: usize = 100;

/// Why a rule set was refused; the message says what to change (shown under the editor, in
/// a 422 from the API, and at start-up for `redrive.toml`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RuleSetError(pub String);

pub(super) fn err<T>(msg: impl Into<String>) -> Result<T, RuleSetError> {
    Err(RuleSetError(msg.into()))
}
