//! What the automation page (`/automation`) and `GET /api/v1/automation/rules` show: the
//! active rule set version, each rule in order with its state, and the dead letters per tier
//! (`docs/automation.md`, "Editing rules"). Plain data (serialisable, no store types), built
//! on the server by `Store::automation_overview`.

use serde::{Deserialize, Serialize};

use super::rules::{GateSpec, MatchSpec, MoveSpec, RuleSet, ScheduleSpec};
use super::tier::Tier;

/// One stored rule set version, as listed (its text in [`VersionText`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// 1, 2, ...; the highest is active.
    pub version: i64,
    /// `config` (from `redrive.toml`), `ui` or `api`.
    pub origin: String,
    /// User name, or `(config)`.
    pub created_by: String,
    /// Epoch ms.
    pub created_at_ms: i64,
    pub reason: Option<String>,
    /// SHA-256 of the text, lowercase hex.
    pub sha256: String,
}

/// One version with its text and the line diff against the version before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionText {
    pub info: VersionInfo,
    /// The TOML text as saved.
    pub source: String,
    /// Against version N-1; `None` for version 1 (or when N-1 is not stored).
    pub diff: Option<super::version_diff::VersionDiff>,
}

/// One rule's row of `rule_states` (the scheduler writes the round columns; pausing writes
/// the pause columns).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleState {
    pub rule_name: String,
    /// A paused rule runs no rounds (it still sorts dead letters into its tier).
    pub paused: bool,
    pub paused_reason: Option<String>,
    /// Who paused it (a user, or the scheduler when too many replays came back).
    pub paused_by: Option<String>,
    /// Epoch ms.
    pub paused_at_ms: Option<i64>,
    /// Epoch ms of the last round that ran or was skipped.
    pub last_round_at_ms: Option<i64>,
    /// `ran`, `gate_closed`, `nothing_due`, `paused`, `error` (in words:
    /// [`round_outcome_label`]).
    pub last_round_outcome: Option<String>,
    /// What the gate said, or why the round did nothing.
    pub last_round_message: Option<String>,
    /// The replay job of the last round that ran.
    pub last_job_id: Option<String>,
    pub rounds_run: i64,
    pub rounds_skipped: i64,
    /// Dead letters its rounds replayed, and of those, how many came back.
    pub replayed_total: i64,
    pub refailed_total: i64,
}

/// A round outcome as stored in `rule_states.last_round_outcome` (`ran`, `gate_closed`,
/// `nothing_due`, `paused`, `error`), in words for the UI; an unknown one as stored.
pub fn round_outcome_label(outcome: &str) -> &str {
    match outcome {
        "ran" => "ran",
        "gate_closed" => "gate closed",
        "nothing_due" => "nothing due",
        "paused" => "paused",
        "error" => "error",
        other => other,
    }
}

/// Live dead letters of one tier (`None`: not sorted yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierTotal {
    pub tier: Option<Tier>,
    pub count: i64,
}

/// One rule of the active set, as written, with its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleView {
    /// Position in the set, from 1.
    pub position: usize,
    pub name: String,
    pub tier: Tier,
    pub description: Option<String>,
    pub disabled: bool,
    #[serde(rename = "match")]
    pub matches: MatchSpec,
    /// The schedule in force (a transient rule without one has the defaults); `None` for
    /// other tiers.
    pub schedule: Option<ScheduleSpec>,
    pub gate: Option<GateSpec>,
    pub move_after: Option<MoveSpec>,
    /// `None`: the rule was never paused nor ran a round.
    pub state: Option<RuleState>,
}

/// Everything `/automation` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutomationOverview {
    /// The active version; `None` before any was saved.
    pub active: Option<VersionInfo>,
    /// The active version's text (empty before any).
    pub source: String,
    /// Set when the stored active version no longer compiles (then `rules` is empty).
    pub compile_error: Option<String>,
    pub default_tier: Tier,
    pub poison_by_convention: bool,
    pub loop_guard_returns: u32,
    pub rules: Vec<RuleView>,
    /// Live dead letters per tier (every status but `deleted`), tiers with none absent.
    pub tiers: Vec<TierTotal>,
}

impl AutomationOverview {
    /// The overview of `set` (the active version's, compiled) with the rules' `states`.
    pub fn build(
        active: Option<VersionInfo>,
        source: String,
        set: Result<RuleSet, String>,
        states: Vec<RuleState>,
        tiers: Vec<TierTotal>,
    ) -> AutomationOverview {
        let (set, compile_error) = match set {
            Ok(s) => (s, None),
            Err(e) => (
                RuleSet::compile(Default::default()).expect("the empty rule set compiles"),
                Some(e),
            ),
        };
        let rules = set
            .spec
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| RuleView {
                position: i + 1,
                name: r.name.clone(),
                tier: r.tier,
                description: r.description.clone(),
                disabled: r.disabled,
                matches: r.matches.clone(),
                schedule: (r.tier == Tier::Transient)
                    .then(|| r.schedule.clone().unwrap_or_default()),
                gate: r.gate.clone(),
                move_after: r.move_after.clone(),
                state: states.iter().find(|s| s.rule_name == r.name).cloned(),
            })
            .collect();
        AutomationOverview {
            active,
            source,
            compile_error,
            default_tier: set.spec.default_tier,
            poison_by_convention: set.spec.poison_by_convention,
            loop_guard_returns: set.spec.loop_guard_returns,
            rules,
            tiers,
        }
    }
}

/// The conditions of a rule as short lines (`"DLQ topics: a, b"`), for the page; `["any
/// dead letter"]` when it has none.
pub fn describe_match(m: &MatchSpec) -> Vec<String> {
    let mut out = Vec::new();
    let mut list = |what: &str, l: &[String]| {
        if !l.is_empty() {
            out.push(format!("{what}: {}", l.join(", ")));
        }
    };
    list("DLQ topics", &m.dlq_topics);
    list("source topics", &m.source_topics);
    list("consumer groups", &m.consumer_groups);
    list("error classes", &m.error_classes);
    list("error message contains", &m.error_messages);
    list("error groups", &m.fingerprints);
    list("conventions", &m.conventions);
    list("labels", &m.labels);
    for (k, v) in &m.headers {
        if v == "*" {
            out.push(format!("header {k} present"));
        } else {
            out.push(format!("header {k} = {v}"));
        }
    }
    if let Some(a) = &m.min_age {
        out.push(format!("older than {a}"));
    }
    if let Some(a) = &m.max_age {
        out.push(format!("younger than {a}"));
    }
    if out.is_empty() {
        out.push("any dead letter".into());
    }
    out
}

/// A schedule as one line: `every 10m, at most 3 attempts, backoff 1m (×2, max 1h), 100
/// msgs/s, 500 a round`.
pub fn describe_schedule(s: &ScheduleSpec) -> String {
    let mut line = format!(
        "every {}, at most {} attempts, backoff {} (×{}, max {}), {} msgs/s, {} a round",
        s.every,
        s.max_attempts,
        s.backoff,
        s.backoff_multiplier,
        s.backoff_max,
        s.rate_per_sec,
        s.batch_size
    );
    if let Some(t) = &s.target_topic {
        line.push_str(&format!(", to {t}"));
    }
    line
}

/// A gate as one line; `"none (always open)"` for an empty one.
pub fn describe_gate(g: Option<&GateSpec>) -> String {
    let Some(g) = g else {
        return "none (always open)".into();
    };
    let mut parts = Vec::new();
    if let Some(h) = &g.http {
        parts.push(format!(
            "HTTP GET {} answers 2xx within {}",
            h.url, h.timeout
        ));
    }
    if let Some(l) = &g.lag {
        parts.push(format!(
            "consumer group {} at most {} records behind on the target topic",
            l.group, l.max_lag
        ));
    }
    if let Some(q) = &g.quiet_for {
        parts.push(format!("no new dead letter of its error groups for {q}"));
    }
    if parts.is_empty() {
        "none (always open)".into()
    } else {
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::round_outcome_label;

    #[test]
    fn round_outcomes_in_words() {
        assert_eq!(round_outcome_label("ran"), "ran");
        assert_eq!(round_outcome_label("gate_closed"), "gate closed");
        assert_eq!(round_outcome_label("nothing_due"), "nothing due");
        assert_eq!(round_outcome_label("paused"), "paused");
        assert_eq!(round_outcome_label("error"), "error");
        assert_eq!(round_outcome_label("something_new"), "something_new");
    }
}
