//! Slack incoming webhooks (api.slack.com/messaging/webhooks): a JSON body with `text` (the
//! notification's fallback and screen-reader text) and `blocks` (a section with the summary in
//! `mrkdwn`, a context line with the rule, scope and links). Slack answers 200 `ok`.

use redrive_core::alerts::payload::AlertPayload;
use redrive_core::alerts::{EventKind, NotifierConfig};
use serde_json::{json, Value};

use super::{post, SendError};

/// Slack's `mrkdwn` control characters escaped (api.slack.com, "Formatting text": `&`, `<`, `>`).
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The message body for `p`.
pub fn body(p: &AlertPayload) -> Value {
    let head = match p.event {
        EventKind::Fired => format!(":rotating_light: [{}] FIRING", p.severity.as_str()),
        EventKind::Resolved => ":white_check_mark: RESOLVED".to_string(),
        EventKind::Test => ":information_source: TEST".to_string(),
        EventKind::NotificationFailed => ":warning: NOTIFICATION FAILED".to_string(),
    };
    let text = format!("{head} {}", p.summary);
    let mut context = format!(
        "rule `{}` · {} · {}",
        escape(&p.rule),
        escape(&p.scope),
        p.at
    );
    for l in &p.links {
        context.push_str(&format!(" · <{}|{}>", escape(&l.href), escape(&l.text)));
    }
    json!({
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": format!("*{}* {}", head, escape(&p.summary))}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]}
        ]
    })
}

pub async fn send(
    client: &reqwest::Client,
    notifier: &NotifierConfig,
    p: &AlertPayload,
) -> Result<(), SendError> {
    let bytes = serde_json::to_vec(&body(p))
        .map_err(|e| SendError::permanent(format!("building the Slack body: {e}")))?;
    post(client, &notifier.url, bytes, &[]).await
}
