//! The `[alerts]` section as written: rules, notifiers, their kinds, defaults and accessors.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// PagerDuty's Events API v2 endpoint (developer.pagerduty.com, "Events API v2 Overview").
pub const PAGERDUTY_EVENTS_URL: &str = "https://events.pagerduty.com/v2/enqueue";

/// Longest rule or notifier name (bytes): names go into URLs, metric labels and dedup keys.
pub const MAX_NAME_BYTES: usize = 64;

/// Most rules one configuration may hold (the `redrive_alerts{rule,state}` series stay bounded).
pub const MAX_RULES: usize = 200;

/// The `[alerts]` section. Default: no rule, no notifier (nothing is evaluated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertsConfig {
    /// How often the leader evaluates every rule, ms (at least 100). Default 15000.
    #[serde(default = "default_interval_ms")]
    pub interval_ms: u64,
    /// Base URL of this redrive as on-call engineers reach it (`https://redrive.example`),
    /// for the links in notifications. Default empty: notifications carry no links.
    #[serde(default)]
    pub public_url: String,
    /// How long one notification request may take, ms (at least 100). Default 10000.
    #[serde(default = "default_notify_timeout_ms")]
    pub notify_timeout_ms: u64,
    /// Attempts per notification before it is given up as failed (at least 1). Default 6.
    #[serde(default = "default_notify_max_attempts")]
    pub notify_max_attempts: u32,
    /// First retry delay ceiling, ms; doubles per attempt, full jitter. Default 1000.
    #[serde(default = "default_notify_backoff_base_ms")]
    pub notify_backoff_base_ms: u64,
    /// Largest retry delay ceiling, ms (at least `notify_backoff_base_ms`). Default 60000.
    #[serde(default = "default_notify_backoff_max_ms")]
    pub notify_backoff_max_ms: u64,
    /// Alert events (and their deliveries) older than this are removed, ms. Default 30 days.
    #[serde(default = "default_history_ms")]
    pub history_ms: u64,
    /// Notifiers by name (`[alerts.notifiers.oncall]`).
    #[serde(default)]
    pub notifiers: BTreeMap<String, NotifierConfig>,
    /// The rules (`[[alerts.rules]]`), evaluated in this order.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
}

impl Default for AlertsConfig {
    fn default() -> Self {
        AlertsConfig {
            interval_ms: default_interval_ms(),
            public_url: String::new(),
            notify_timeout_ms: default_notify_timeout_ms(),
            notify_max_attempts: default_notify_max_attempts(),
            notify_backoff_base_ms: default_notify_backoff_base_ms(),
            notify_backoff_max_ms: default_notify_backoff_max_ms(),
            history_ms: default_history_ms(),
            notifiers: BTreeMap::new(),
            rules: Vec::new(),
        }
    }
}

fn default_interval_ms() -> u64 {
    15_000
}
fn default_notify_timeout_ms() -> u64 {
    10_000
}
fn default_notify_max_attempts() -> u32 {
    6
}
fn default_notify_backoff_base_ms() -> u64 {
    1_000
}
fn default_notify_backoff_max_ms() -> u64 {
    60_000
}
fn default_history_ms() -> u64 {
    30 * 24 * 60 * 60 * 1000
}
fn default_cooldown_ms() -> u64 {
    5 * 60 * 1000
}

/// Where notifications go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifierKind {
    /// A generic HTTPS endpoint: the JSON event of `docs/alerts.md` ("Webhook schema"), signed
    /// with HMAC-SHA256.
    Webhook,
    /// A Slack incoming webhook (`text` + `blocks`).
    Slack,
    /// PagerDuty Events API v2 (trigger / resolve with a stable `dedup_key`).
    Pagerduty,
}

impl NotifierKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NotifierKind::Webhook => "webhook",
            NotifierKind::Slack => "slack",
            NotifierKind::Pagerduty => "pagerduty",
        }
    }
}

/// One `[alerts.notifiers.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifierConfig {
    pub kind: NotifierKind,
    /// Webhook and Slack: the URL to POST to. PagerDuty: unused (see `events_url`).
    #[serde(default)]
    pub url: String,
    /// Webhook: the HMAC-SHA256 key of the `X-Redrive-Signature-256` header. Required for a
    /// webhook (an unsigned body cannot be trusted by the receiver). Redacted by `redrive config`.
    #[serde(default)]
    pub secret: String,
    /// PagerDuty: the integration's routing key (32 characters). Redacted by `redrive config`.
    #[serde(default)]
    pub routing_key: String,
    /// PagerDuty: the events endpoint. Default [`PAGERDUTY_EVENTS_URL`].
    #[serde(default = "default_events_url")]
    pub events_url: String,
}

fn default_events_url() -> String {
    PAGERDUTY_EVENTS_URL.to_string()
}

/// What a rule watches. See `docs/alerts.md` ("Rule kinds") for each one's condition, scope and
/// parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// Live dead letters (status new, replay_pending, replay_failed) over `threshold`.
    DlqSize,
    /// More than `rate_per_min` dead letters per minute on average over `window_ms`.
    DeadLetterRate,
    /// Any dead letter arrived; resolves after `window_ms` without one.
    NewArrival,
    /// The oldest live dead letter is older than `max_age_ms`.
    OldestAge,
    /// An error group (fingerprint) never seen before appeared; resolves after `window_ms`.
    NewErrorGroup,
    /// Ingest is not running with Kafka reachable and the store writable.
    IngestStalled,
    /// Consumer lag (high watermark − committed offset, summed over a DLQ topic's partitions
    /// assigned to the evaluating instance) over `threshold` records.
    IngestLag,
    /// A replay job finished with failed records; resolves after `window_ms`.
    ReplayFailed,
    /// Records in quarantine over `threshold` (default 0).
    Quarantined,
    /// A replay job's canary failed (too many of its records came back) and the job paused
    /// itself; resolves after `window_ms` (`docs/replay.md`, "Canary replay").
    CanaryFailed,
    /// Dead letters entered the poison tier (`docs/automation.md`): per DLQ topic; resolves
    /// after `window_ms` without one.
    PoisonArrived,
    /// Dead letters came back after their automatic attempts were used up and were escalated
    /// to the manual tier (`docs/automation.md`): per DLQ topic; resolves after `window_ms`.
    Escalated,
    /// A transient rule of automatic reprocessing paused itself because most of what it
    /// replayed came back (`docs/automation.md`, "Rule self-pause"); one scope per rule
    /// (`rule=<name>`), resolves when the rule is resumed.
    RulePaused,
}

impl RuleKind {
    pub const ALL: [RuleKind; 13] = [
        RuleKind::DlqSize,
        RuleKind::DeadLetterRate,
        RuleKind::NewArrival,
        RuleKind::OldestAge,
        RuleKind::NewErrorGroup,
        RuleKind::IngestStalled,
        RuleKind::IngestLag,
        RuleKind::ReplayFailed,
        RuleKind::Quarantined,
        RuleKind::CanaryFailed,
        RuleKind::PoisonArrived,
        RuleKind::Escalated,
        RuleKind::RulePaused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::DlqSize => "dlq_size",
            RuleKind::DeadLetterRate => "dead_letter_rate",
            RuleKind::NewArrival => "new_arrival",
            RuleKind::OldestAge => "oldest_age",
            RuleKind::NewErrorGroup => "new_error_group",
            RuleKind::IngestStalled => "ingest_stalled",
            RuleKind::IngestLag => "ingest_lag",
            RuleKind::ReplayFailed => "replay_failed",
            RuleKind::Quarantined => "quarantined",
            RuleKind::CanaryFailed => "canary_failed",
            RuleKind::PoisonArrived => "poison_arrived",
            RuleKind::Escalated => "escalated",
            RuleKind::RulePaused => "rule_paused",
        }
    }

    /// True for the kinds that fire on an event (an arrival, a new group, a failed job) and
    /// resolve `window_ms` after the last one, rather than on a level.
    pub fn is_event(self) -> bool {
        matches!(
            self,
            RuleKind::NewArrival
                | RuleKind::NewErrorGroup
                | RuleKind::ReplayFailed
                | RuleKind::CanaryFailed
                | RuleKind::PoisonArrived
                | RuleKind::Escalated
        )
    }

    /// True for the kinds whose scope is a column of the dead letters (`group_by`).
    pub fn groups_dead_letters(self) -> bool {
        matches!(
            self,
            RuleKind::DlqSize
                | RuleKind::DeadLetterRate
                | RuleKind::NewArrival
                | RuleKind::OldestAge
        )
    }
}

/// The dead-letter column a rule's scopes are taken from.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    #[default]
    DlqTopic,
    SourceTopic,
    Fingerprint,
    ConsumerGroup,
}

impl GroupBy {
    /// The column's name, which is also the scope's label (`dlq_topic=orders.DLT`).
    pub fn column(self) -> &'static str {
        match self {
            GroupBy::DlqTopic => "dlq_topic",
            GroupBy::SourceTopic => "source_topic",
            GroupBy::Fingerprint => "fingerprint",
            GroupBy::ConsumerGroup => "consumer_group",
        }
    }
}

/// How loud a rule is: PagerDuty's `payload.severity` values, also sent to the other notifiers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    Error,
    #[default]
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// A rate in dead letters per minute. A float that compares by its bits, so `Config` stays `Eq`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PerMinute(pub f64);

impl PartialEq for PerMinute {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for PerMinute {}

/// One `[[alerts.rules]]` table. Which parameters a kind needs is in `docs/alerts.md`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Unique name: letters, digits, `.`, `_`, `-`; at most [`MAX_NAME_BYTES`].
    pub name: String,
    pub kind: RuleKind,
    /// `dlq_size`: live dead letters (records); `ingest_lag`: records behind;
    /// `quarantined`: records (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u64>,
    /// `dead_letter_rate`: dead letters per minute (average over `window_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_min: Option<PerMinute>,
    /// `oldest_age`: ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_ms: Option<u64>,
    /// `dead_letter_rate`: the averaging window W, ms (default 300000). Event kinds: how long
    /// after the last event the alert resolves, ms (default 900000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<u64>,
    /// How long the condition must hold before the alert fires, ms. Default 0.
    #[serde(default)]
    pub for_ms: u64,
    /// After a resolve, the same rule × scope does not fire again for this long, ms.
    /// Default 300000 (5 min).
    #[serde(default = "default_cooldown_ms")]
    pub cooldown_ms: u64,
    /// Dead-letter kinds: the column whose values are the scopes. Default `dlq_topic`.
    #[serde(default)]
    pub group_by: GroupBy,
    /// Only dead letters (or quarantined records) of this DLQ topic. Default: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dlq_topic: Option<String>,
    /// Only dead letters from this source topic. Default: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_topic: Option<String>,
    /// Only dead letters of this error group. Default: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Only dead letters of this consumer group. Default: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_group: Option<String>,
    /// Notifier names; empty = every configured notifier.
    #[serde(default)]
    pub notify: Vec<String>,
    #[serde(default)]
    pub severity: Severity,
    /// Most scopes of this rule firing (and notified) one by one at the same time, at least 1.
    /// Past it, the rule's further scopes fire as ONE summary alert, scope
    /// `overflow=<group_by column>` ("N more ... firing"), with a dedup key of its own, which
    /// resolves when none is left over. Default [`DEFAULT_MAX_FIRING`].
    #[serde(default = "default_max_firing")]
    pub max_firing: u32,
}

/// Default of [`RuleConfig::max_firing`]: a rule grouping by source topic over thousands of
/// topics pages 20 times and once more for the rest, not thousands of times.
pub const DEFAULT_MAX_FIRING: u32 = 20;

fn default_max_firing() -> u32 {
    DEFAULT_MAX_FIRING
}

/// The label of a rule's summary scope (`overflow=source_topic`): not a dead-letter column,
/// so it never collides with a real scope.
pub const OVERFLOW_LABEL: &str = "overflow";

impl RuleConfig {
    /// `window_ms` with the kind's default applied.
    pub fn window(&self) -> u64 {
        self.window_ms.unwrap_or(match self.kind {
            RuleKind::DeadLetterRate => 5 * 60 * 1000,
            _ => 15 * 60 * 1000,
        })
    }

    /// `threshold` with the kind's default (0) applied.
    pub fn threshold_or_zero(&self) -> u64 {
        self.threshold.unwrap_or(0)
    }

    /// The notifiers this rule sends to (every one of `all` when `notify` is empty).
    pub fn notifiers<'a>(&'a self, all: &'a BTreeMap<String, NotifierConfig>) -> Vec<&'a str> {
        if self.notify.is_empty() {
            all.keys().map(String::as_str).collect()
        } else {
            self.notify.iter().map(String::as_str).collect()
        }
    }
}

impl AlertsConfig {
    /// The rule named `name`.
    pub fn rule(&self, name: &str) -> Option<&RuleConfig> {
        self.rules.iter().find(|r| r.name == name)
    }
}
