//! Checking and compiling a rule set: TOML text in and out, every limit and pattern check
//! (each error naming the rule and field to fix), and the compilation of a rule's match,
//! schedule, gate and age move.

use super::{
    err, AgeMove, Gate, GateSpec, HttpGate, RuleSet, RuleSetError, RuleSetSpec, RuleSpec, Schedule,
    ScheduleSpec, TierRule, MAX_BATCH_SIZE, MAX_MATCH_ENTRIES, MAX_RULES, MAX_RULE_NAME_BYTES,
    MAX_RULE_SET_BYTES, MIN_MOVE_AFTER_MS,
};
use crate::automation::matcher::{Matcher, TopicLikePattern};
use crate::automation::tier::Tier;
use crate::model::Convention;
use crate::permission::TopicPattern;

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
