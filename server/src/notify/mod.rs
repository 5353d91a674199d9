//! Alert notifications (`docs/alerts.md`): the dispatcher ([`dispatch`]) sends the pending
//! deliveries the evaluator (or an operator's test) recorded, to a generic webhook
//! ([`webhook`]), a Slack incoming webhook ([`slack`]) or PagerDuty Events API v2
//! ([`pagerduty`]), with retries and exponential backoff with full jitter.

pub mod dispatch;
pub mod pagerduty;
pub mod slack;
pub mod webhook;

use std::time::Duration;

use redrive_core::alerts::payload::AlertPayload;
use redrive_core::alerts::{NotifierConfig, NotifierKind};

/// Why one attempt failed, and whether another may succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SendError {
    pub message: String,
    /// True for connection errors, timeouts, 408, 429 and 5xx; false for other 4xx answers
    /// and bodies that cannot be built (retrying would fail the same way).
    pub retryable: bool,
}

impl SendError {
    fn permanent(message: impl Into<String>) -> SendError {
        SendError {
            message: message.into(),
            retryable: false,
        }
    }
}

/// The HTTP client every notifier uses: a per-request timeout of `timeout`, no redirects
/// (a webhook that redirects is misconfigured, and a redirect would drop the signature).
pub fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("redrive/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// Sends one event document (`payload_text`, the exact stored `redrive.alert.v1` JSON) to
/// `notifier`. `delivery_id` goes into the webhook's `X-Redrive-Delivery` header.
///
/// Errors: [`SendError`], saying whether a retry may help.
pub async fn send(
    client: &reqwest::Client,
    notifier: &NotifierConfig,
    payload_text: &str,
    delivery_id: i64,
) -> Result<(), SendError> {
    let payload: AlertPayload = serde_json::from_str(payload_text)
        .map_err(|e| SendError::permanent(format!("the stored alert event does not parse: {e}")))?;
    match notifier.kind {
        NotifierKind::Webhook => {
            webhook::send(client, notifier, payload_text, &payload, delivery_id).await
        }
        NotifierKind::Slack => slack::send(client, notifier, &payload).await,
        NotifierKind::Pagerduty => pagerduty::send(client, notifier, &payload).await,
    }
}

/// POSTs `body` (JSON) with `headers` and classifies the answer: 2xx is delivered.
async fn post(
    client: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
    headers: &[(&str, String)],
) -> Result<(), SendError> {
    let mut req = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    // `without_url`: reqwest's error text names the whole URL, and a Slack webhook's path or
    // a webhook's query token is its secret; the message is shown on /alerts and audited.
    let res = req.send().await.map_err(|e| SendError {
        message: format!("POST {}: {}", redact(url), describe(&e.without_url())),
        retryable: true,
    })?;
    let status = res.status();
    if status.is_success() {
        return Ok(());
    }
    let text = res.text().await.unwrap_or_default();
    let text: String = text.chars().take(200).collect();
    Err(SendError {
        message: format!("POST {} answered {status}: {}", redact(url), text.trim()),
        retryable: status.is_server_error()
            || status == reqwest::StatusCode::TOO_MANY_REQUESTS
            || status == reqwest::StatusCode::REQUEST_TIMEOUT,
    })
}

/// A reqwest error with its causes (`error sending request: ... Connection refused`); pass it
/// `without_url` so that the text carries no secret, and the causes are scrubbed of any URL
/// the transport mentions too.
fn describe(e: &reqwest::Error) -> String {
    let mut out = if e.is_timeout() {
        "timed out".to_string()
    } else {
        e.to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&scrub_urls(&s.to_string()));
        source = s.source();
    }
    out
}

/// `text` with every `scheme://...` cut down to its scheme and host, as [`redact`] does.
fn scrub_urls(text: &str) -> String {
    text.split(' ')
        .map(|w| {
            if w.contains("://") {
                redact(w.trim_matches(|c: char| "()<>\"',".contains(c)))
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The URL without its path and query (a Slack webhook URL's path is its secret).
fn redact(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => format!(
            "{}://{}{}/…",
            u.scheme(),
            u.host_str().unwrap_or(""),
            u.port().map(|p| format!(":{p}")).unwrap_or_default()
        ),
        Err(_) => "(invalid URL)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_never_carry_a_notifier_secret() {
        let slack = "https://hooks.slack.com/services/T000/B000/SECRETPATH";
        assert_eq!(redact(slack), "https://hooks.slack.com/…");
        assert_eq!(
            redact("https://ops:Hunter2@hooks.example/x?token=Q"),
            "https://hooks.example/…"
        );
        let text = format!(
            "dns error for url ({slack}): failed to lookup https://a:b@h.example:8443/p?token=Q"
        );
        let scrubbed = scrub_urls(&text);
        for secret in ["SECRETPATH", "T000", "token=Q", "a:b"] {
            assert!(!scrubbed.contains(secret), "{scrubbed}");
        }
        assert!(scrubbed.contains("https://h.example:8443/…"), "{scrubbed}");
    }

    #[tokio::test]
    async fn a_failed_send_names_only_scheme_and_host() {
        // Port 9 on loopback refuses the connection; the error must not echo the path.
        let client = reqwest::Client::new();
        let err = post(
            &client,
            "http://127.0.0.1:9/services/T/B/SECRETPATH?token=Q",
            b"{}".to_vec(),
            &[],
        )
        .await
        .expect_err("refused");
        assert!(
            !err.message.contains("SECRETPATH") && !err.message.contains("token=Q"),
            "{}",
            err.message
        );
        assert!(err.message.contains("127.0.0.1:9"), "{}", err.message);
    }
}
