//! Notifier URLs: parsed and checked as http(s) URLs, and redacted for display.

use super::{AlertsConfig, PAGERDUTY_EVENTS_URL};

/// Checks that `url` (the value of key `key`) is an absolute `http`/`https` URL with a host,
/// parsed by the `url` crate (WHATWG URL Standard): `http://` alone, `https:///x`, `ftp://h`,
/// `hooks.example/x` and text with spaces are refused. The message never repeats the URL (it
/// may carry a secret).
pub fn check_http_url(key: &str, url: &str) -> Result<url::Url, String> {
    let parsed = url::Url::parse(url.trim())
        .map_err(|e| format!("`{key}` is not a URL ({e}); give an http:// or https:// URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "`{key}` must be an http:// or https:// URL (its scheme is `{}`)",
            parsed.scheme()
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!(
            "`{key}` has no host (e.g. https://hooks.example/redrive)"
        ));
    }
    Ok(parsed)
}

/// What [`redact_notifier_url`] puts in place of a URL's path, query and credentials.
pub const REDACTED_URL_PART: &str = "<redacted>";

/// `url` as `scheme://host[:port]/<redacted>`: everything past the host (user:password, path,
/// query, fragment) is replaced, since any of it may be the secret (a Slack webhook's path, a
/// `?token=`). A URL with nothing past its host is returned as parsed; text that is not a URL
/// becomes `<redacted>`.
pub fn redact_notifier_url(url: &str) -> String {
    let Ok(u) = url::Url::parse(url.trim()) else {
        return REDACTED_URL_PART.to_string();
    };
    let Some(host) = u.host_str().filter(|h| !h.is_empty()) else {
        return REDACTED_URL_PART.to_string();
    };
    let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
    let bare = u.username().is_empty()
        && u.password().is_none()
        && matches!(u.path(), "" | "/")
        && u.query().is_none()
        && u.fragment().is_none();
    if bare {
        format!("{}://{host}{port}/", u.scheme())
    } else {
        format!("{}://{host}{port}/{REDACTED_URL_PART}", u.scheme())
    }
}

impl AlertsConfig {
    /// A copy with notifier secrets and routing keys replaced by `redacted`, and notifier URLs
    /// cut to their scheme and host ([`redact_notifier_url`]): a Slack webhook's path, a
    /// webhook's query token or `user:password@` are secrets. PagerDuty's public default
    /// `events_url` is kept.
    pub fn redacted(&self, redacted: &str) -> AlertsConfig {
        let mut out = self.clone();
        for n in out.notifiers.values_mut() {
            if !n.secret.is_empty() {
                n.secret = redacted.to_string();
            }
            if !n.routing_key.is_empty() {
                n.routing_key = redacted.to_string();
            }
            if !n.url.is_empty() {
                n.url = redact_notifier_url(&n.url);
            }
            if n.events_url != PAGERDUTY_EVENTS_URL {
                n.events_url = redact_notifier_url(&n.events_url);
            }
        }
        out
    }
}
