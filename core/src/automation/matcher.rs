//! A rule's `match` conditions, compiled ([`Matcher`]), and their test against one dead
//! letter, with the one-line reason shown on its page (`docs/automation.md`, "Rules").

use super::rules::{err, MatchInput, RuleSetError};
use crate::model::{Convention, Header};
use crate::permission::TopicPattern;

#[derive(Debug, Clone, Default)]
pub(super) struct Matcher {
    pub(super) dlq_topics: Vec<TopicPattern>,
    pub(super) source_topics: Vec<TopicPattern>,
    pub(super) consumer_groups: Vec<String>,
    pub(super) error_classes: Vec<TopicLikePattern>,
    pub(super) error_messages: Vec<String>,
    pub(super) fingerprints: Vec<String>,
    pub(super) conventions: Vec<Convention>,
    pub(super) headers: Vec<(String, Option<String>)>,
    pub(super) labels: Vec<String>,
    pub(super) min_age_ms: Option<u64>,
    pub(super) max_age_ms: Option<u64>,
}

/// An error class pattern: exact, or a `*` glob.
#[derive(Debug, Clone)]
pub(super) enum TopicLikePattern {
    Exact(String),
    Glob(regex::Regex),
}

impl TopicLikePattern {
    pub(super) fn parse(s: &str) -> Result<TopicLikePattern, RuleSetError> {
        let s = s.trim();
        if s.is_empty() {
            return err("an error class pattern is empty");
        }
        if !s.contains('*') {
            return Ok(TopicLikePattern::Exact(s.to_string()));
        }
        let re = format!(
            "^{}$",
            s.split('*')
                .map(regex::escape)
                .collect::<Vec<_>>()
                .join(".*")
        );
        regex::Regex::new(&re)
            .map(TopicLikePattern::Glob)
            .map_err(|e| RuleSetError(format!("`{s}` is not a valid pattern: {e}")))
    }
    fn matches(&self, v: &str) -> bool {
        match self {
            TopicLikePattern::Exact(e) => e == v,
            TopicLikePattern::Glob(re) => re.is_match(v),
        }
    }
}

/// The last header named `name`, as UTF-8 text.
pub(super) fn header_text<'a>(headers: &'a [Header], name: &str) -> Option<&'a str> {
    let h = headers.iter().rev().find(|h| h.name == name)?;
    std::str::from_utf8(h.value.as_deref()?).ok()
}

impl Matcher {
    /// Whether a condition reads the dead letter's labels (own or its error group's).
    pub(super) fn reads_labels(&self) -> bool {
        !self.labels.is_empty()
    }

    /// `Some(why)` when every condition holds: the conditions that narrowed it, joined
    /// (`"any dead letter"` when the rule has none).
    pub(super) fn explain(&self, d: &MatchInput<'_>) -> Option<String> {
        let mut why: Vec<String> = Vec::new();
        if !self.dlq_topics.is_empty() {
            if !self.dlq_topics.iter().any(|p| p.matches(d.dlq_topic)) {
                return None;
            }
            why.push(format!("DLQ topic {}", d.dlq_topic));
        }
        if !self.source_topics.is_empty() {
            let t = d.source_topic?;
            if !self.source_topics.iter().any(|p| p.matches(t)) {
                return None;
            }
            why.push(format!("source topic {t}"));
        }
        if !self.consumer_groups.is_empty() {
            let g = d.consumer_group?;
            if !self.consumer_groups.iter().any(|x| x == g) {
                return None;
            }
            why.push(format!("consumer group {g}"));
        }
        if !self.error_classes.is_empty() {
            let c = d.error_class?;
            if !self.error_classes.iter().any(|p| p.matches(c)) {
                return None;
            }
            why.push(format!("error class {c}"));
        }
        if !self.error_messages.is_empty() {
            let m = d.error_message?.to_lowercase();
            let hit = self
                .error_messages
                .iter()
                .find(|s| m.contains(s.as_str()))?;
            why.push(format!("error message contains \"{hit}\""));
        }
        if !self.fingerprints.is_empty() {
            if !self.fingerprints.iter().any(|f| f == d.fingerprint) {
                return None;
            }
            why.push(format!("error group {}", d.fingerprint));
        }
        if !self.conventions.is_empty() {
            if !self.conventions.contains(&d.convention) {
                return None;
            }
            why.push(format!("convention {}", d.convention.as_str()));
        }
        for (name, want) in &self.headers {
            let got = header_text(d.headers, name)?;
            match want {
                Some(v) if v != got => return None,
                Some(v) => why.push(format!("header {name}={v}")),
                None => why.push(format!("header {name} present")),
            }
        }
        if !self.labels.is_empty() {
            let l = self.labels.iter().find(|l| d.labels.contains(l))?;
            why.push(format!("label {l}"));
        }
        if let Some(min) = self.min_age_ms {
            if d.age_ms < min as i64 {
                return None;
            }
            why.push(format!(
                "older than {}",
                humantime::format_duration(std::time::Duration::from_millis(min))
            ));
        }
        if let Some(max) = self.max_age_ms {
            if d.age_ms > max as i64 {
                return None;
            }
            why.push(format!(
                "younger than {}",
                humantime::format_duration(std::time::Duration::from_millis(max))
            ));
        }
        Some(if why.is_empty() {
            "any dead letter".to_string()
        } else {
            why.join(", ")
        })
    }
}
