//! The rule set as written (TOML or JSON): the serde types of `[automation]` and of one
//! rule, and the defaults of the fields left out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::actions::LagGate;
use crate::automation::tier::Tier;

/// A rule set as written (TOML or JSON). [`RuleSet::compile`] checks and compiles it.
///
/// [`RuleSet::compile`]: super::RuleSet::compile
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSetSpec {
    /// The tier of a dead letter no rule matches (default `manual`).
    #[serde(default = "default_tier")]
    pub default_tier: Tier,
    /// Records the conventions mark non-retryable ([`poison_signal`]) never get the
    /// `transient` tier, and go to `poison` unless a non-transient rule takes them (default
    /// true).
    ///
    /// [`poison_signal`]: super::poison_signal
    #[serde(default = "yes")]
    pub poison_by_convention: bool,
    /// A dead letter that came back this many times after replays (manual or automatic) is
    /// taken out of automation: its rule no longer replays it, and a manual replay of it
    /// needs the `approve` permission and a reason (default 3; 0 turns the guard off).
    #[serde(default = "default_loop_guard")]
    pub loop_guard_returns: u32,
    /// The rules, tried in order (TOML `[[rule]]`).
    #[serde(default, rename = "rule", skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleSpec>,
}

impl Default for RuleSetSpec {
    fn default() -> Self {
        RuleSetSpec {
            default_tier: default_tier(),
            poison_by_convention: true,
            loop_guard_returns: default_loop_guard(),
            rules: Vec::new(),
        }
    }
}

fn default_tier() -> Tier {
    Tier::Manual
}
fn yes() -> bool {
    true
}
fn default_loop_guard() -> u32 {
    3
}

/// One rule as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Unique in the set; `[A-Za-z0-9._-]`, 1 to [`MAX_RULE_NAME_BYTES`] bytes. A rule's
    /// state (paused, last round) and the tiers it gave are kept under this name.
    ///
    /// [`MAX_RULE_NAME_BYTES`]: super::MAX_RULE_NAME_BYTES
    pub name: String,
    /// The tier the rule gives.
    pub tier: Tier,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A disabled rule matches nothing and runs no rounds (kept in the set for later).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    /// What the rule matches (TOML `match.*`).
    #[serde(default, rename = "match")]
    pub matches: MatchSpec,
    /// Scheduled reprocessing; `transient` rules only (a transient rule without one gets the
    /// defaults of [`ScheduleSpec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleSpec>,
    /// Health gate checked before each round; `transient` rules only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateSpec>,
    /// Move the dead letters this rule sorted to another tier after they spent this long in
    /// it (e.g. manual → archive after 10 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub move_after: Option<MoveSpec>,
}

/// What a rule matches. Every field is optional; see the module docs for AND/OR.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    /// DLQ topics: exact names, `*` globs or `^` regular expressions (the syntax of a role's
    /// topic scope, `crate::permission::TopicPattern`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dlq_topics: Vec<String>,
    /// Source topics, same syntax.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_topics: Vec<String>,
    /// Consumer groups, exact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumer_groups: Vec<String>,
    /// Error classes: exact, or a glob with `*` (`*.SocketTimeoutException`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_classes: Vec<String>,
    /// Case-insensitive substrings of the error message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_messages: Vec<String>,
    /// Error fingerprints (error groups), 16 hex chars.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fingerprints: Vec<String>,
    /// Header conventions by name (`spring_dlt`, `seed`, ... as `Convention::as_str`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conventions: Vec<String>,
    /// Header name → value: the record's last header of that name has exactly this UTF-8
    /// value (`"*"`: the header is present, whatever its value). All must hold.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Triage labels (its own or its error group's); any one matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// At least this old (since it was dead-lettered), e.g. `"1h"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_age: Option<String>,
    /// At most this old.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<String>,
}

/// A transient rule's schedule as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// How often a round runs (default `"10m"`, at least 1 s).
    #[serde(default = "default_every")]
    pub every: String,
    /// Most automatic replays of one record (default 3, 1 to 100); a record that comes back
    /// after the last is escalated to `manual` with an alert.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// Wait before the first automatic attempt, after arrival (default `"1m"`); attempt n
    /// waits `backoff × backoff_multiplier^(n-1)`, at most `backoff_max`, ± `jitter`.
    #[serde(default = "default_backoff")]
    pub backoff: String,
    /// Longest wait between attempts (default `"1h"`).
    #[serde(default = "default_backoff_max")]
    pub backoff_max: String,
    /// Growth of the wait per attempt (default 2.0, 1.0 to 10.0).
    #[serde(default = "default_multiplier")]
    pub backoff_multiplier: f64,
    /// Random spread of each wait, a fraction (default 0.2 = ±20 %, 0.0 to 1.0).
    #[serde(default = "default_jitter")]
    pub jitter: f64,
    /// Throttle of a round's replay job, msgs/s (default 100; absent in JSON = default).
    #[serde(default = "default_rate")]
    pub rate_per_sec: u32,
    /// Most records one round replays (default 500, 1 to [`MAX_BATCH_SIZE`]).
    ///
    /// [`MAX_BATCH_SIZE`]: super::MAX_BATCH_SIZE
    #[serde(default = "default_batch")]
    pub batch_size: u32,
    /// Publish to this topic instead of each record's source topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_topic: Option<String>,
    /// The rule pauses itself when more than this fraction of what it replayed (since it was
    /// last paused) came back already (default 0.5), once it published at least
    /// `pause_min_replayed` records (`docs/automation.md`, "Rule self-pause").
    #[serde(default = "default_pause_ratio")]
    pub pause_when_refailed_over: f64,
    /// See `pause_when_refailed_over` (default 10).
    #[serde(default = "default_pause_min")]
    pub pause_min_replayed: u32,
}

impl Default for ScheduleSpec {
    fn default() -> Self {
        ScheduleSpec {
            every: default_every(),
            max_attempts: default_max_attempts(),
            backoff: default_backoff(),
            backoff_max: default_backoff_max(),
            backoff_multiplier: default_multiplier(),
            jitter: default_jitter(),
            rate_per_sec: default_rate(),
            batch_size: default_batch(),
            target_topic: None,
            pause_when_refailed_over: default_pause_ratio(),
            pause_min_replayed: default_pause_min(),
        }
    }
}

fn default_every() -> String {
    "10m".into()
}
fn default_max_attempts() -> u32 {
    3
}
fn default_backoff() -> String {
    "1m".into()
}
fn default_backoff_max() -> String {
    "1h".into()
}
fn default_multiplier() -> f64 {
    2.0
}
fn default_jitter() -> f64 {
    0.2
}
fn default_rate() -> u32 {
    100
}
fn default_batch() -> u32 {
    500
}
fn default_pause_ratio() -> f64 {
    0.5
}
fn default_pause_min() -> u32 {
    10
}

/// A health gate as written: every check given must pass before a round runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSpec {
    /// An HTTP GET that must answer 2xx within its timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpGateSpec>,
    /// The consumer group reading the target topic must be at most this far behind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<LagGate>,
    /// The error groups (fingerprints) of the records due must have had no new dead letter
    /// for this long (e.g. `"10m"`): the failure has stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_for: Option<String>,
}

/// An HTTP health check as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpGateSpec {
    /// `http://` or `https://` URL.
    pub url: String,
    /// Default `"5s"`, at most `"60s"`.
    #[serde(default = "default_http_timeout")]
    pub timeout: String,
}

fn default_http_timeout() -> String {
    "5s".into()
}

/// Age-based movement as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveSpec {
    /// Time in the rule's tier, e.g. `"10d"`.
    pub after: String,
    /// The tier to move to (not the rule's own).
    pub to: Tier,
}
