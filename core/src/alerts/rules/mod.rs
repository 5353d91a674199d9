//! Alert rules and notifiers as written in `redrive.toml` (`[alerts]`, `[[alerts.rules]]`,
//! `[alerts.notifiers.NAME]`), and their validation. The user documentation of every key is
//! `docs/alerts.md`; the rules are checked once at start-up ([`AlertsConfig::validate`]) and a
//! bad one stops `serve` with a message naming it.
//!
//! The parts: `spec`, the configuration as written (serde types, their defaults and
//! accessors); `validate`, the start-up checks ([`RuleError`]); `urls`, notifier URLs
//! ([`check_http_url`], [`redact_notifier_url`] and [`AlertsConfig::redacted`]).

mod spec;
#[cfg(test)]
mod tests;
mod urls;
mod validate;

pub use self::spec::{
    AlertsConfig, GroupBy, NotifierConfig, NotifierKind, PerMinute, RuleConfig, RuleKind, Severity,
    DEFAULT_MAX_FIRING, MAX_NAME_BYTES, MAX_RULES, OVERFLOW_LABEL, PAGERDUTY_EVENTS_URL,
};
pub use self::urls::{check_http_url, redact_notifier_url, REDACTED_URL_PART};
pub use self::validate::RuleError;
