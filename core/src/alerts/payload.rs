//! The alert event as notifiers receive it: the versioned JSON document of `docs/alerts.md`
//! ("Webhook schema", `schema = "redrive.alert.v1"`). The webhook sends exactly these bytes
//! (and signs them); Slack and PagerDuty bodies are derived from the same document.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::model::EventKind;
use super::rules::{RuleConfig, Severity};

/// The `schema` value of this version of the document. A change that removes or retypes a
/// field gets a new version; fields may be added within one.
pub const SCHEMA_V1: &str = "redrive.alert.v1";

/// One alert event, as sent (`redrive.alert.v1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertPayload {
    /// Always [`SCHEMA_V1`].
    pub schema: String,
    /// `alert_events.id`: unique per event, so a receiver can drop a redelivered one.
    pub event_id: i64,
    /// `fired`, `resolved` or `test`.
    pub event: EventKind,
    /// Epoch ms and RFC 3339 (UTC) of the event.
    pub at_ms: i64,
    pub at: String,
    pub rule: String,
    /// The rule's kind (`dlq_size`, ...); `test` for a test notification.
    pub kind: String,
    pub severity: Severity,
    /// `label=value`, the scope within the rule (`dlq_topic=orders.DLT`).
    pub scope: String,
    /// The scope as an object (`{"dlq_topic": "orders.DLT"}`).
    pub scope_labels: serde_json::Map<String, serde_json::Value>,
    /// The measured value (unit in `unit`) and the rule's threshold in the same unit, if any.
    pub value: i64,
    pub threshold: Option<f64>,
    /// `records`, `ms`, `records_in_window` (`dead_letter_rate`), `bool`.
    pub unit: String,
    /// One line for humans.
    pub summary: String,
    /// Stable for the rule × scope (the same on fire and resolve): PagerDuty's `dedup_key`.
    pub dedup_key: String,
    /// Epoch ms the alert fired (on `resolved`: when it had fired).
    pub fired_at_ms: Option<i64>,
    /// The alert page and the matching dead letters, when `alerts.public_url` is set.
    pub links: Vec<Link>,
}

/// A link in a notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub href: String,
    pub text: String,
}

/// `redrive-` and the first 32 hex digits of SHA-256 over `rule`, a newline and `scope`:
/// stable for a rule × scope, at most 40 characters (PagerDuty allows 255), never reused by
/// another rule × scope in practice.
pub fn dedup_key(rule: &str, scope: &str) -> String {
    let mut h = Sha256::new();
    h.update(rule.as_bytes());
    h.update(b"\n");
    h.update(scope.as_bytes());
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("redrive-{}", &hex[..32])
}

/// `label=value` → `{"label": "value"}`.
pub fn scope_labels(scope: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    if let Some((k, v)) = scope.split_once('=') {
        m.insert(k.to_string(), serde_json::Value::String(v.to_string()));
    }
    m
}

/// The unit of a rule's value and its threshold in that unit.
pub fn unit_and_threshold(rule: &RuleConfig) -> (&'static str, Option<f64>) {
    use super::rules::RuleKind::*;
    match rule.kind {
        DlqSize | Quarantined | IngestLag => ("records", Some(rule.threshold_or_zero() as f64)),
        // The value is the count in the window; the threshold is the rate scaled to it.
        DeadLetterRate => (
            "records_in_window",
            rule.rate_per_min
                .map(|r| r.0 * rule.window() as f64 / 60_000.0),
        ),
        OldestAge => ("ms", rule.max_age_ms.map(|a| a as f64)),
        NewArrival | NewErrorGroup | ReplayFailed | CanaryFailed | PoisonArrived | Escalated => {
            ("records", None)
        }
        IngestStalled | RulePaused => ("bool", None),
    }
}

/// RFC 3339 of epoch ms (UTC, ms precision).
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// Links for `scope` under `public_url` (none when it is empty).
pub fn links(public_url: &str, scope: &str) -> Vec<Link> {
    if public_url.is_empty() {
        return Vec::new();
    }
    let base = public_url.trim_end_matches('/');
    let mut out = vec![Link {
        href: format!("{base}/alerts"),
        text: "Alerts in redrive".into(),
    }];
    if let Some((k, v)) = scope.split_once('=') {
        if matches!(
            k,
            "dlq_topic" | "source_topic" | "fingerprint" | "consumer_group"
        ) {
            let v: String = v
                .bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect();
            out.push(Link {
                href: format!("{base}/?{k}={v}"),
                text: "The dead letters".into(),
            });
        } else if let Some(job) = scope.strip_prefix("job=") {
            out.push(Link {
                href: format!("{base}/jobs/{job}"),
                text: "The replay job".into(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_keys_are_stable_and_distinct() {
        let a = dedup_key("depth", "dlq_topic=orders.DLT");
        assert_eq!(a, dedup_key("depth", "dlq_topic=orders.DLT"));
        assert_ne!(a, dedup_key("depth", "dlq_topic=payments.DLT"));
        assert_eq!(a.len(), 40);
        assert!(a.starts_with("redrive-"));
    }

    #[test]
    fn links_escape_the_scope() {
        let l = links("https://r.example/", "dlq_topic=a b&c");
        assert_eq!(l[1].href, "https://r.example/?dlq_topic=a%20b%26c");
        assert!(links("", "dlq_topic=x").is_empty());
    }
}
