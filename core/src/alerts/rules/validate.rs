//! Start-up checks of the `[alerts]` section: every rule and notifier, and rules' DLQ topic
//! scopes against what ingest subscribes to.

use std::collections::BTreeMap;

use super::{
    check_http_url, AlertsConfig, GroupBy, NotifierConfig, NotifierKind, PerMinute, RuleConfig,
    RuleKind, MAX_NAME_BYTES, MAX_RULES,
};

/// A rule that cannot work; the message names the rule (or notifier) and what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RuleError(pub String);

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= MAX_NAME_BYTES
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl RuleConfig {
    fn check(&self, notifiers: &BTreeMap<String, NotifierConfig>) -> Result<(), String> {
        let kind = self.kind.as_str();
        let need = |what: &str| Err(format!("kind `{kind}` needs `{what}`"));
        let unused = |what: &str| Err(format!("`{what}` does not apply to kind `{kind}`"));
        match self.kind {
            RuleKind::DlqSize | RuleKind::IngestLag if self.threshold.is_none() => {
                return need("threshold")
            }
            RuleKind::DeadLetterRate => match self.rate_per_min {
                None => return need("rate_per_min"),
                Some(PerMinute(r)) if !(r.is_finite() && r >= 0.0) => {
                    return Err("`rate_per_min` must be a number of at least 0".into())
                }
                _ => {}
            },
            RuleKind::OldestAge if self.max_age_ms.is_none() => return need("max_age_ms"),
            _ => {}
        }
        if self.threshold.is_some()
            && !matches!(
                self.kind,
                RuleKind::DlqSize | RuleKind::Quarantined | RuleKind::IngestLag
            )
        {
            return unused("threshold");
        }
        if self.rate_per_min.is_some() && self.kind != RuleKind::DeadLetterRate {
            return unused("rate_per_min");
        }
        if self.max_age_ms.is_some() && self.kind != RuleKind::OldestAge {
            return unused("max_age_ms");
        }
        if self.window_ms.is_some()
            && !(self.kind.is_event() || self.kind == RuleKind::DeadLetterRate)
        {
            return unused("window_ms");
        }
        if self.window_ms == Some(0) {
            return Err("`window_ms` must be at least 1".into());
        }
        if self.group_by != GroupBy::DlqTopic && !self.kind.groups_dead_letters() {
            return unused("group_by");
        }
        if self.max_firing == 0 {
            return Err("`max_firing` must be at least 1".into());
        }
        let filters = [
            ("dlq_topic", &self.dlq_topic),
            ("source_topic", &self.source_topic),
            ("fingerprint", &self.fingerprint),
            ("consumer_group", &self.consumer_group),
        ];
        for (name, value) in filters {
            let Some(v) = value else { continue };
            if v.trim().is_empty() {
                return Err(format!(
                    "`{name}` is empty (leave it out to match every value)"
                ));
            }
            let applies = match self.kind {
                RuleKind::IngestStalled
                | RuleKind::ReplayFailed
                | RuleKind::CanaryFailed
                | RuleKind::RulePaused => false,
                RuleKind::Quarantined
                | RuleKind::IngestLag
                | RuleKind::PoisonArrived
                | RuleKind::Escalated => name == "dlq_topic",
                RuleKind::NewErrorGroup => name != "fingerprint",
                _ => true,
            };
            if !applies {
                return unused(name);
            }
        }
        for n in &self.notify {
            if !notifiers.contains_key(n) {
                return Err(format!(
                    "`notify` names `{n}`, which is not a notifier (define [alerts.notifiers.{n}])"
                ));
            }
        }
        Ok(())
    }
}

impl NotifierConfig {
    fn check(&self) -> Result<(), String> {
        match self.kind {
            NotifierKind::Webhook | NotifierKind::Slack => {
                check_http_url("url", &self.url)?;
                if self.kind == NotifierKind::Webhook && self.secret.is_empty() {
                    return Err(
                        "a webhook needs `secret` (the HMAC-SHA256 key receivers verify)".into(),
                    );
                }
                if self.kind == NotifierKind::Slack && !self.secret.is_empty() {
                    return Err("`secret` does not apply to Slack".into());
                }
                if !self.routing_key.is_empty() {
                    return Err("`routing_key` applies to PagerDuty only".into());
                }
            }
            NotifierKind::Pagerduty => {
                if self.routing_key.trim().is_empty() {
                    return Err("PagerDuty needs `routing_key` (the integration key)".into());
                }
                check_http_url("events_url", &self.events_url)?;
                if !self.url.is_empty() || !self.secret.is_empty() {
                    return Err(
                        "PagerDuty takes `routing_key` and `events_url`, not `url`/`secret`".into(),
                    );
                }
            }
        }
        Ok(())
    }
}

impl AlertsConfig {
    /// Checks every notifier and rule. Errors: the first problem, naming the rule or notifier.
    pub fn validate(&self) -> Result<(), RuleError> {
        let bad = |m: String| Err(RuleError(m));
        if self.interval_ms < 100 {
            return bad("`alerts.interval_ms` must be at least 100".into());
        }
        if self.notify_timeout_ms < 100 {
            return bad("`alerts.notify_timeout_ms` must be at least 100".into());
        }
        if self.notify_max_attempts == 0 {
            return bad("`alerts.notify_max_attempts` must be at least 1".into());
        }
        if self.notify_backoff_max_ms < self.notify_backoff_base_ms {
            return bad(
                "`alerts.notify_backoff_max_ms` must be at least `notify_backoff_base_ms`".into(),
            );
        }
        if !self.public_url.is_empty() {
            if let Err(m) = check_http_url("alerts.public_url", &self.public_url) {
                return bad(m);
            }
        }
        for (name, n) in &self.notifiers {
            if !valid_name(name) {
                return bad(format!(
                    "alert notifier `{name}`: a name is 1-{MAX_NAME_BYTES} letters, digits, `.`, `_` or `-`"
                ));
            }
            n.check()
                .or_else(|m| bad(format!("alert notifier `{name}`: {m}")))?;
        }
        if self.rules.len() > MAX_RULES {
            return bad(format!(
                "at most {MAX_RULES} alert rules, {} given",
                self.rules.len()
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, r) in self.rules.iter().enumerate() {
            if !valid_name(&r.name) {
                return bad(format!(
                    "alert rule #{} (`{}`): a name is 1-{MAX_NAME_BYTES} letters, digits, `.`, `_` or `-`",
                    i + 1,
                    r.name
                ));
            }
            if !seen.insert(r.name.as_str()) {
                return bad(format!("alert rule `{}`: the name is used twice", r.name));
            }
            r.check(&self.notifiers)
                .or_else(|m| bad(format!("alert rule `{}`: {m}", r.name)))?;
        }
        Ok(())
    }

    /// Checks that every rule's `dlq_topic` filter can match a topic ingest subscribes to:
    /// `dlq_topics` entries are exact names, or regular expressions when they start with `^`
    /// (librdkafka's subscription syntax, `docs/configuration.md`). A filter no entry covers
    /// would never see a dead letter. Errors name the rule, its topic and the entries.
    pub fn check_dlq_scopes(&self, dlq_topics: &[String]) -> Result<(), RuleError> {
        let entries: Vec<&str> = dlq_topics
            .iter()
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .collect();
        let covers = |topic: &str| {
            entries.iter().any(|e| {
                if e.starts_with('^') {
                    regex::Regex::new(e).is_ok_and(|re| re.is_match(topic))
                } else {
                    *e == topic
                }
            })
        };
        for r in &self.rules {
            let Some(topic) = r.dlq_topic.as_deref().map(str::trim) else {
                continue;
            };
            if !covers(topic) {
                let listed = entries
                    .iter()
                    .map(|e| format!("`{e}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(RuleError(format!(
                    "alert rule `{}`: `dlq_topic = \"{topic}\"` is not among the DLQ topics \
                     redrive ingests (`dlq_topics`: {listed}), so it would never match; add \
                     the topic to `dlq_topics` or fix the rule",
                    r.name
                )));
            }
        }
        Ok(())
    }
}
