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

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::matcher::{Matcher, TopicLikePattern};
pub use super::poison::poison_signal;
use super::tier::Tier;
use crate::actions::LagGate;
use crate::model::{Convention, Header};
use crate::permission::TopicPattern;

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

/// A rule set as written (TOML or JSON). [`RuleSet::compile`] checks and compiles it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSetSpec {
    /// The tier of a dead letter no rule matches (default `manual`).
    #[serde(default = "default_tier")]
    pub default_tier: Tier,
    /// Records the conventions mark non-retryable ([`poison_signal`]) never get the
    /// `transient` tier, and go to `poison` unless a non-transient rule takes them (default
    /// true).
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
    #[serde(default = "default_batch")]
    pub batch_size: u32,
    /// Publish to this topic instead of each record's source topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_topic: Option<String>,
    /// The rule pauses itself when more than this fraction of what it replayed came back
    /// (default 0.5), judged once at least `pause_min_replayed` records have had their
    /// outcome window.
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
    matcher: Matcher,
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

/// What a rule is matched against: one dead letter's fields as stored.
#[derive(Debug, Clone, Copy)]
pub struct MatchInput<'a> {
    pub dlq_topic: &'a str,
    pub source_topic: Option<&'a str>,
    pub consumer_group: Option<&'a str>,
    pub error_class: Option<&'a str>,
    pub error_message: Option<&'a str>,
    pub fingerprint: &'a str,
    pub convention: Convention,
    /// The raw headers, in record order.
    pub headers: &'a [Header],
    /// Its own and its error group's labels.
    pub labels: &'a [String],
    /// Now − dead-lettered-at, ms.
    pub age_ms: i64,
}

/// The tier a rule set gives one dead letter, and why (shown on its page and in its
/// history).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub tier: Tier,
    /// The rule that matched; `None` for the default tier or a poison signal.
    pub rule: Option<String>,
    /// One line, e.g. ``rule `llm-timeouts` (#1): error class TimeoutError``.
    pub reason: String,
}

/// Parses a humantime duration (`"10m"`); `what` names the field in the error.
pub fn parse_duration_ms(what: &str, text: &str) -> Result<u64, RuleSetError> {
    humantime::parse_duration(text.trim())
        .map(|d| d.as_millis().min(u64::MAX as u128) as u64)
        .map_err(|e| {
            RuleSetError(format!(
                "{what}: `{text}` is not a duration (write e.g. \"90s\", \"10m\", \"1h\", \"10d\"): {e}"
            ))
        })
}

fn check_list(rule: &str, what: &str, list: &[String]) -> Result<(), RuleSetError> {
    if list.len() > MAX_MATCH_ENTRIES {
        return err(format!(
            "rule `{rule}`: match.{what} has {} entries; at most {MAX_MATCH_ENTRIES}",
            list.len()
        ));
    }
    if list.iter().any(|e| e.trim().is_empty()) {
        return err(format!("rule `{rule}`: match.{what} has an empty entry"));
    }
    Ok(())
}

fn valid_rule_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= MAX_RULE_NAME_BYTES
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl RuleSet {
    /// Parses TOML text (the editor's, or a stored version's) and compiles it.
    ///
    /// Errors: text over [`MAX_RULE_SET_BYTES`], TOML syntax, unknown fields, and every
    /// check of [`RuleSet::compile`], each naming the rule and field to fix.
    pub fn parse_toml(text: &str) -> Result<RuleSet, RuleSetError> {
        if text.len() > MAX_RULE_SET_BYTES {
            return err(format!(
                "the rule set is {} bytes; at most {MAX_RULE_SET_BYTES}",
                text.len()
            ));
        }
        let spec: RuleSetSpec =
            toml::from_str(text).map_err(|e| RuleSetError(format!("not a valid rule set: {e}")))?;
        RuleSet::compile(spec)
    }

    /// The spec as TOML text (what a first version made from `redrive.toml` stores).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(&self.spec).unwrap_or_default()
    }

    /// Checks and compiles a spec.
    ///
    /// Errors: more than [`MAX_RULES`] rules; a bad or repeated name; a bad pattern,
    /// convention, fingerprint or duration; a schedule or gate on a rule that is not
    /// `transient`; limits out of range; a `move_after` to the rule's own tier.
    pub fn compile(spec: RuleSetSpec) -> Result<RuleSet, RuleSetError> {
        if spec.rules.len() > MAX_RULES {
            return err(format!(
                "{} rules; a rule set has at most {MAX_RULES}",
                spec.rules.len()
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        let mut rules = Vec::with_capacity(spec.rules.len());
        for (i, r) in spec.rules.iter().enumerate() {
            if !valid_rule_name(&r.name) {
                return err(format!(
                    "rule #{}: name `{}` must be 1 to {MAX_RULE_NAME_BYTES} characters of \
                     letters, digits, `.`, `_` and `-`",
                    i + 1,
                    r.name
                ));
            }
            if !names.insert(r.name.as_str()) {
                return err(format!("rule name `{}` is used twice", r.name));
            }
            rules.push(compile_rule(r, i + 1)?);
        }
        Ok(RuleSet { spec, rules })
    }

    /// The rule named `name`.
    pub fn rule(&self, name: &str) -> Option<&TierRule> {
        self.rules.iter().find(|r| r.name == name)
    }

    /// The tier of one dead letter: the first enabled rule that matches (transient rules
    /// skipped for a record with a poison signal), else `poison` for a poison signal, else
    /// the default tier.
    pub fn assign(&self, input: &MatchInput<'_>) -> Assignment {
        let poison = if self.spec.poison_by_convention {
            poison_signal(input)
        } else {
            None
        };
        for r in &self.rules {
            if r.disabled || (poison.is_some() && r.tier == Tier::Transient) {
                continue;
            }
            if let Some(why) = r.matcher.explain(input) {
                return Assignment {
                    tier: r.tier,
                    rule: Some(r.name.clone()),
                    reason: format!("rule `{}` (#{}): {why}", r.name, r.position),
                };
            }
        }
        if let Some(signal) = poison {
            return Assignment {
                tier: Tier::Poison,
                rule: None,
                reason: format!("poison: {signal}"),
            };
        }
        Assignment {
            tier: self.spec.default_tier,
            rule: None,
            reason: format!("no rule matched: default tier {}", self.spec.default_tier),
        }
    }
}

fn compile_rule(r: &RuleSpec, position: usize) -> Result<TierRule, RuleSetError> {
    let name = r.name.as_str();
    let m = &r.matches;
    for (what, list) in [
        ("dlq_topics", &m.dlq_topics),
        ("source_topics", &m.source_topics),
        ("consumer_groups", &m.consumer_groups),
        ("error_classes", &m.error_classes),
        ("error_messages", &m.error_messages),
        ("fingerprints", &m.fingerprints),
        ("conventions", &m.conventions),
        ("labels", &m.labels),
    ] {
        check_list(name, what, list)?;
    }
    let topics = |what: &str, list: &[String]| -> Result<Vec<TopicPattern>, RuleSetError> {
        list.iter()
            .map(|e| {
                TopicPattern::parse(e)
                    .map_err(|x| RuleSetError(format!("rule `{name}`: match.{what}: {x}")))
            })
            .collect()
    };
    let mut conventions = Vec::new();
    for c in &m.conventions {
        let conv = Convention::parse(c.trim());
        if conv == Convention::Unknown && c.trim() != "unknown" {
            return err(format!(
                "rule `{name}`: match.conventions: `{c}` is not a convention; known: {}",
                Convention::ALL.map(|c| c.as_str()).join(", ")
            ));
        }
        conventions.push(conv);
    }
    for f in &m.fingerprints {
        let f = f.trim();
        if f.len() != 16 || !f.bytes().all(|b| b.is_ascii_hexdigit()) {
            return err(format!(
                "rule `{name}`: match.fingerprints: `{f}` is not a fingerprint (16 hex characters)"
            ));
        }
    }
    if m.headers.len() > MAX_MATCH_ENTRIES {
        return err(format!(
            "rule `{name}`: match.headers has more than {MAX_MATCH_ENTRIES} entries"
        ));
    }
    let age = |what: &str, v: &Option<String>| -> Result<Option<u64>, RuleSetError> {
        v.as_deref()
            .map(|t| parse_duration_ms(&format!("rule `{name}`: match.{what}"), t))
            .transpose()
    };
    let matcher = Matcher {
        dlq_topics: topics("dlq_topics", &m.dlq_topics)?,
        source_topics: topics("source_topics", &m.source_topics)?,
        consumer_groups: m
            .consumer_groups
            .iter()
            .map(|g| g.trim().to_string())
            .collect(),
        error_classes: m
            .error_classes
            .iter()
            .map(|c| TopicLikePattern::parse(c))
            .collect::<Result<_, _>>()
            .map_err(|e| RuleSetError(format!("rule `{name}`: match.error_classes: {e}")))?,
        error_messages: m.error_messages.iter().map(|s| s.to_lowercase()).collect(),
        fingerprints: m
            .fingerprints
            .iter()
            .map(|f| f.trim().to_lowercase())
            .collect(),
        conventions,
        headers: m
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), (v != "*").then(|| v.clone())))
            .collect(),
        labels: m
            .labels
            .iter()
            .map(|l| {
                crate::labels::parse_label(l)
                    .map_err(|e| RuleSetError(format!("rule `{name}`: match.labels: {e}")))
            })
            .collect::<Result<_, _>>()?,
        min_age_ms: age("min_age", &m.min_age)?,
        max_age_ms: age("max_age", &m.max_age)?,
    };
    if let (Some(lo), Some(hi)) = (matcher.min_age_ms, matcher.max_age_ms) {
        if lo > hi {
            return err(format!(
                "rule `{name}`: match.min_age is more than match.max_age"
            ));
        }
    }
    let transient = r.tier == Tier::Transient;
    if !transient && (r.schedule.is_some() || r.gate.is_some()) {
        return err(format!(
            "rule `{name}`: only a transient rule has a schedule or a gate (this one gives `{}`)",
            r.tier
        ));
    }
    let schedule = if transient {
        Some(compile_schedule(
            name,
            r.schedule.as_ref().unwrap_or(&ScheduleSpec::default()),
        )?)
    } else {
        None
    };
    let gate = match &r.gate {
        Some(g) => compile_gate(name, g)?,
        None => Gate::default(),
    };
    let move_after = match &r.move_after {
        Some(mv) => {
            if mv.to == r.tier {
                return err(format!(
                    "rule `{name}`: move_after.to is the rule's own tier `{}`",
                    r.tier
                ));
            }
            let after_ms =
                parse_duration_ms(&format!("rule `{name}`: move_after.after"), &mv.after)?;
            if after_ms < MIN_MOVE_AFTER_MS {
                return err(format!(
                    "rule `{name}`: move_after.after must be at least 1s"
                ));
            }
            if mv.to == Tier::Transient {
                return err(format!(
                    "rule `{name}`: move_after.to cannot be `transient` (automatic replay \
                     belongs to the transient rule that sorted a record; move to manual, \
                     poison or archive)"
                ));
            }
            Some(AgeMove {
                after_ms,
                to: mv.to,
            })
        }
        None => None,
    };
    Ok(TierRule {
        name: name.to_string(),
        tier: r.tier,
        disabled: r.disabled,
        position,
        matcher,
        schedule,
        gate,
        move_after,
    })
}

fn compile_schedule(name: &str, s: &ScheduleSpec) -> Result<Schedule, RuleSetError> {
    let d = |what: &str, t: &str| parse_duration_ms(&format!("rule `{name}`: schedule.{what}"), t);
    let every_ms = d("every", &s.every)?;
    if every_ms < 1_000 {
        return err(format!("rule `{name}`: schedule.every must be at least 1s"));
    }
    let backoff_ms = d("backoff", &s.backoff)?;
    let backoff_max_ms = d("backoff_max", &s.backoff_max)?;
    if backoff_max_ms < backoff_ms {
        return err(format!(
            "rule `{name}`: schedule.backoff_max is less than schedule.backoff"
        ));
    }
    if !(1..=100).contains(&s.max_attempts) {
        return err(format!(
            "rule `{name}`: schedule.max_attempts must be 1 to 100 (got {})",
            s.max_attempts
        ));
    }
    if !(1.0..=10.0).contains(&s.backoff_multiplier) {
        return err(format!(
            "rule `{name}`: schedule.backoff_multiplier must be 1.0 to 10.0"
        ));
    }
    if !(0.0..=1.0).contains(&s.jitter) {
        return err(format!("rule `{name}`: schedule.jitter must be 0.0 to 1.0"));
    }
    if s.rate_per_sec == 0 {
        return err(format!(
            "rule `{name}`: schedule.rate_per_sec must be at least 1 msg/s"
        ));
    }
    if !(1..=MAX_BATCH_SIZE).contains(&s.batch_size) {
        return err(format!(
            "rule `{name}`: schedule.batch_size must be 1 to {MAX_BATCH_SIZE}"
        ));
    }
    if let Some(t) = &s.target_topic {
        if !crate::actions::valid_topic_name(t) {
            return err(format!(
                "rule `{name}`: schedule.target_topic `{t}` is not a topic name"
            ));
        }
    }
    if !(0.0..=1.0).contains(&s.pause_when_refailed_over) {
        return err(format!(
            "rule `{name}`: schedule.pause_when_refailed_over must be 0.0 to 1.0"
        ));
    }
    Ok(Schedule {
        every_ms,
        max_attempts: s.max_attempts,
        backoff_ms,
        backoff_max_ms,
        backoff_multiplier: s.backoff_multiplier,
        jitter: s.jitter,
        rate_per_sec: s.rate_per_sec,
        batch_size: s.batch_size,
        target_topic: s.target_topic.clone(),
        pause_when_refailed_over: s.pause_when_refailed_over,
        pause_min_replayed: s.pause_min_replayed,
    })
}

fn compile_gate(name: &str, g: &GateSpec) -> Result<Gate, RuleSetError> {
    let http = match &g.http {
        Some(h) => {
            let url = url::Url::parse(h.url.trim()).map_err(|e| {
                RuleSetError(format!("rule `{name}`: gate.http.url `{}`: {e}", h.url))
            })?;
            if !matches!(url.scheme(), "http" | "https") {
                return err(format!(
                    "rule `{name}`: gate.http.url must be http:// or https://"
                ));
            }
            let timeout_ms =
                parse_duration_ms(&format!("rule `{name}`: gate.http.timeout"), &h.timeout)?;
            if !(1..=60_000).contains(&timeout_ms) {
                return err(format!(
                    "rule `{name}`: gate.http.timeout must be from 1ms to 60s"
                ));
            }
            Some(HttpGate { url, timeout_ms })
        }
        None => None,
    };
    if let Some(l) = &g.lag {
        l.check()
            .map_err(|e| RuleSetError(format!("rule `{name}`: gate.lag: {e}")))?;
    }
    let quiet_for_ms = g
        .quiet_for
        .as_deref()
        .map(|t| parse_duration_ms(&format!("rule `{name}`: gate.quiet_for"), t))
        .transpose()?;
    Ok(Gate {
        http,
        lag: g.lag.clone(),
        quiet_for_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &str, v: &str) -> Header {
        Header {
            name: name.into(),
            value: Some(v.as_bytes().to_vec()),
        }
    }

    fn input<'a>(headers: &'a [Header], labels: &'a [String]) -> MatchInput<'a> {
        MatchInput {
            dlq_topic: "llm.requests.dlq",
            source_topic: Some("llm.requests"),
            consumer_group: Some("agent"),
            error_class: Some("TimeoutError"),
            error_message: Some("LLM call timed out after 30s"),
            fingerprint: "0123456789abcdef",
            convention: Convention::Seed,
            headers,
            labels,
            age_ms: 5_000,
        }
    }

    const SET: &str = r#"
default_tier = "manual"

[[rule]]
name = "llm-timeouts"
tier = "transient"
match.dlq_topics = ["llm.*"]
match.error_classes = ["*Timeout*"]
schedule = { every = "5m", max_attempts = 4, backoff = "30s", backoff_max = "10m" }
gate.http = { url = "http://127.0.0.1:3001/health" }

[[rule]]
name = "old-business"
tier = "manual"
match.error_messages = ["invalid"]
move_after = { after = "10d", to = "archive" }
"#;

    #[test]
    fn first_matching_rule_gives_the_tier_and_says_why() {
        let set = RuleSet::parse_toml(SET).unwrap();
        let a = set.assign(&input(&[], &[]));
        assert_eq!(a.tier, Tier::Transient);
        assert_eq!(a.rule.as_deref(), Some("llm-timeouts"));
        assert!(
            a.reason.contains("error class TimeoutError"),
            "{}",
            a.reason
        );
        let s = set.rule("llm-timeouts").unwrap().schedule.clone().unwrap();
        assert_eq!(
            (s.every_ms, s.max_attempts, s.batch_size),
            (300_000, 4, 500)
        );
        assert_eq!(s.delay_ms(1, 0.5), 30_000);
        assert_eq!(s.delay_ms(3, 0.5), 120_000);
        assert_eq!(s.delay_ms(20, 0.5), 600_000);
        assert_eq!(s.delay_ms(1, 0.0), 24_000);
    }

    #[test]
    fn poison_signal_skips_transient_rules() {
        let set = RuleSet::parse_toml(SET).unwrap();
        let hs = [h("retryable", "false")];
        let a = set.assign(&input(&hs, &[]));
        assert_eq!(a.tier, Tier::Poison);
        assert_eq!(a.rule, None);
        assert!(a.reason.contains("retryable=false"));
    }

    #[test]
    fn no_rule_gives_the_default_tier() {
        let set = RuleSet::parse_toml("default_tier = \"archive\"").unwrap();
        let a = set.assign(&input(&[], &[]));
        assert_eq!(a.tier, Tier::Archive);
        assert!(a.reason.contains("no rule matched"));
    }

    #[test]
    fn mistakes_are_named() {
        for (text, want) in [
            ("[[rule]]\nname = \"a b\"\ntier = \"manual\"", "name `a b`"),
            ("[[rule]]\nname = \"a\"\ntier = \"manual\"\nschedule = {}", "only a transient"),
            ("[[rule]]\nname = \"a\"\ntier = \"transient\"\nschedule = { every = \"soon\" }", "schedule.every"),
            ("[[rule]]\nname = \"a\"\ntier = \"transient\"\nmatch.colour = [\"x\"]", "unknown field"),
            ("[[rule]]\nname = \"a\"\ntier = \"manual\"\n[[rule]]\nname = \"a\"\ntier = \"manual\"", "used twice"),
            ("[[rule]]\nname = \"a\"\ntier = \"manual\"\nmatch.conventions = [\"springy\"]", "not a convention"),
        ] {
            let e = RuleSet::parse_toml(text).unwrap_err().0;
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn toml_round_trips() {
        let set = RuleSet::parse_toml(SET).unwrap();
        let again = RuleSet::parse_toml(&set.to_toml()).unwrap();
        assert_eq!(again.spec, set.spec);
    }
}

/// Poison routing over the real frameworks' captured dead letters (`testkit/corpus/`,
/// `docs/corpus.md`): which records carry which signal (`docs/automation.md`, "Poison
/// routing").
#[cfg(all(test, feature = "server"))]
mod corpus_tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::conventions::decode;
    use crate::corpus::Case;

    fn corpus_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/corpus")
    }

    /// (framework/case, the signal's start, or `None`: not poison).
    const EXPECTED: &[(&str, Option<&str>)] = &[
        // Connect: the converter stage (the exception chain is DataException →
        // SerializationException → Jackson; the decoded class is Connect's own header).
        (
            "kafka-connect/key-converter",
            Some("Kafka Connect converter failure (KEY_CONVERTER)"),
        ),
        (
            "kafka-connect/value-converter",
            Some("Kafka Connect converter failure (VALUE_CONVERTER)"),
        ),
        ("kafka-connect/transformation", None),
        // Spring Kafka with ErrorHandlingDeserializer: the deserializer's SerializationException.
        (
            "spring-kafka/key-deserialization",
            Some("deserialization failure"),
        ),
        (
            "spring-kafka/value-deserialization",
            Some("deserialization failure"),
        ),
        (
            "spring-kafka/value-deserialization-retained-header",
            Some("deserialization failure"),
        ),
        ("spring-kafka/listener-throws", None),
        ("spring-kafka/listener-throws-delivery-attempt-header", None),
        ("spring-kafka/retryable-topic", None),
        ("spring-kafka/tombstone-and-null-key", None),
        ("spring-kafka/dlt-reprocessed-fails-again", None),
        ("spring-cloud-stream/function-throws-dlq", None),
        // Kafka Streams' DeserializationExceptionHandler: SerializationException.
        (
            "kafka-streams/deserialization",
            Some("deserialization failure"),
        ),
        ("kafka-streams/processing", None),
        ("bakdata-kafka-error-handling/error-headers", None),
        ("watermill/poison-queue", None),
    ];

    #[test]
    fn captured_records_carry_the_documented_signals() {
        let cases = Case::load_all(&corpus_dir()).expect("corpus loads");
        let mut seen = Vec::new();
        let mut wrong = Vec::new();
        for (path, case) in &cases {
            let key = format!("{}/{}", case.framework, case.case);
            for r in &case.records {
                let raw = r.raw(path).expect("corpus record decodes");
                let (conv, n) = decode(&raw);
                let input = MatchInput {
                    dlq_topic: &raw.dlq_topic,
                    source_topic: n.source_topic.as_deref(),
                    consumer_group: n.consumer_group.as_deref(),
                    error_class: n.error_class.as_deref(),
                    error_message: n.error_message.as_deref(),
                    fingerprint: "0000000000000000",
                    convention: conv,
                    headers: &raw.headers,
                    labels: &[],
                    age_ms: 0,
                };
                let got = poison_signal(&input);
                match EXPECTED.iter().find(|(k, _)| *k == key) {
                    None => wrong.push(format!("{key}: not in EXPECTED (signal {got:?})")),
                    Some((_, want)) => {
                        let ok = match (want, &got) {
                            (None, None) => true,
                            (Some(w), Some(g)) => g.starts_with(w),
                            _ => false,
                        };
                        if !ok {
                            wrong.push(format!(
                                "{key}: want {want:?}, got {got:?} (class {:?})",
                                n.error_class
                            ));
                        }
                    }
                }
                seen.push(key.clone());
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        for (k, _) in EXPECTED {
            assert!(seen.iter().any(|s| s == k), "case {k} not in the corpus");
        }
    }
}
