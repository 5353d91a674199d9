//! PagerDuty Events API v2 (developer.pagerduty.com, "Send an Alert Event"): POST to
//! `events_url` (default `https://events.pagerduty.com/v2/enqueue`) with the integration's
//! `routing_key`; `event_action` `trigger` when an alert fires and `resolve` when it clears,
//! both with the same `dedup_key` (derived from rule × scope, see
//! `redrive_core::alerts::payload::dedup_key`), so PagerDuty keeps one incident per alert.
//! PagerDuty answers 202. A test notification triggers and then resolves its own key.

use redrive_core::alerts::payload::AlertPayload;
use redrive_core::alerts::{EventKind, NotifierConfig};
use serde_json::{json, Value};

use super::{post, SendError};

/// PagerDuty's limit on `payload.summary` (characters).
const MAX_SUMMARY: usize = 1024;

/// The `trigger` body for `p`.
pub fn trigger(routing_key: &str, p: &AlertPayload) -> Value {
    let summary: String = p.summary.chars().take(MAX_SUMMARY).collect();
    json!({
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": p.dedup_key,
        "client": "redrive",
        "payload": {
            "summary": summary,
            "source": "redrive",
            "severity": p.severity.as_str(),
            "timestamp": p.at,
            "component": p.scope,
            "group": p.rule,
            "class": p.kind,
            "custom_details": {
                "event_id": p.event_id,
                "scope": p.scope_labels,
                "value": p.value,
                "threshold": p.threshold,
                "unit": p.unit,
            }
        },
        "links": p.links.iter().map(|l| json!({"href": l.href, "text": l.text})).collect::<Vec<_>>(),
    })
}

/// The `resolve` body for `p`.
pub fn resolve(routing_key: &str, p: &AlertPayload) -> Value {
    json!({
        "routing_key": routing_key,
        "event_action": "resolve",
        "dedup_key": p.dedup_key,
    })
}

pub async fn send(
    client: &reqwest::Client,
    notifier: &NotifierConfig,
    p: &AlertPayload,
) -> Result<(), SendError> {
    let bodies = match p.event {
        EventKind::Fired => vec![trigger(&notifier.routing_key, p)],
        EventKind::Resolved => vec![resolve(&notifier.routing_key, p)],
        EventKind::Test => vec![
            trigger(&notifier.routing_key, p),
            resolve(&notifier.routing_key, p),
        ],
        EventKind::NotificationFailed => return Ok(()),
    };
    for b in bodies {
        let bytes = serde_json::to_vec(&b)
            .map_err(|e| SendError::permanent(format!("building the PagerDuty body: {e}")))?;
        post(client, &notifier.events_url, bytes, &[]).await?;
    }
    Ok(())
}
