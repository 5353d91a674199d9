//! Alert rules and notifiers as written in `redrive.toml` (`[alerts]`, `[[alerts.rules]]`,
//! `[alerts.notifiers.NAME]`), and their validation. The user documentation of every key is
//! `docs/alerts.md`; the rules are checked once at start-up ([`AlertsConfig::validate`]) and a
//! bad one stops `serve` with a message naming it.

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

    /// The rule named `name`.
    pub fn rule(&self, name: &str) -> Option<&RuleConfig> {
        self.rules.iter().find(|r| r.name == name)
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> AlertsConfig {
        #[derive(Deserialize)]
        struct Doc {
            alerts: AlertsConfig,
        }
        serde_json::from_value::<Doc>(toml_like(text))
            .map(|d| d.alerts)
            .unwrap()
    }

    /// The tests write JSON (core has no TOML parser); the server's tests read real TOML.
    fn toml_like(text: &str) -> serde_json::Value {
        serde_json::from_str(text).unwrap()
    }

    fn rule(kind: RuleKind) -> RuleConfig {
        RuleConfig {
            name: "r".into(),
            kind,
            threshold: None,
            rate_per_min: None,
            max_age_ms: None,
            window_ms: None,
            for_ms: 0,
            cooldown_ms: 0,
            group_by: GroupBy::DlqTopic,
            dlq_topic: None,
            source_topic: None,
            fingerprint: None,
            consumer_group: None,
            notify: vec![],
            severity: Severity::Warning,
            max_firing: DEFAULT_MAX_FIRING,
        }
    }

    #[test]
    fn defaults_and_parse() {
        let c = parse(
            r#"{"alerts": {"rules": [{"name": "depth", "kind": "dlq_size", "threshold": 10}],
            "notifiers": {"hook": {"kind": "webhook", "url": "http://x", "secret": "s"}}}}"#,
        );
        assert_eq!(c.interval_ms, 15_000);
        assert_eq!(c.rules[0].cooldown_ms, 300_000);
        assert_eq!(c.notifiers["hook"].events_url, PAGERDUTY_EVENTS_URL);
        c.validate().unwrap();
        assert_eq!(c.rules[0].notifiers(&c.notifiers), vec!["hook"]);
    }

    #[test]
    fn bad_rules_name_themselves() {
        let mut c = AlertsConfig::default();
        c.rules.push(rule(RuleKind::DlqSize));
        let e = c.validate().unwrap_err().0;
        assert!(
            e.contains("alert rule `r`") && e.contains("threshold"),
            "{e}"
        );

        let mut r = rule(RuleKind::OldestAge);
        r.max_age_ms = Some(1);
        r.threshold = Some(3);
        c.rules = vec![r];
        let e = c.validate().unwrap_err().0;
        assert!(e.contains("`threshold` does not apply"), "{e}");

        let mut r = rule(RuleKind::Quarantined);
        r.notify = vec!["nope".into()];
        c.rules = vec![r];
        assert!(c.validate().unwrap_err().0.contains("`nope`"));

        c.rules = vec![rule(RuleKind::Quarantined), rule(RuleKind::Quarantined)];
        assert!(c.validate().unwrap_err().0.contains("used twice"));

        let mut r = rule(RuleKind::DeadLetterRate);
        r.rate_per_min = Some(PerMinute(f64::NAN));
        c.rules = vec![r];
        assert!(c.validate().unwrap_err().0.contains("rate_per_min"));

        c.rules = vec![];
        c.notifiers.insert(
            "hook".into(),
            NotifierConfig {
                kind: NotifierKind::Webhook,
                url: "http://x".into(),
                secret: String::new(),
                routing_key: String::new(),
                events_url: PAGERDUTY_EVENTS_URL.into(),
            },
        );
        let e = c.validate().unwrap_err().0;
        assert!(
            e.contains("alert notifier `hook`") && e.contains("secret"),
            "{e}"
        );
    }

    #[test]
    fn every_kind_validates_with_its_parameters() {
        for kind in RuleKind::ALL {
            let mut r = rule(kind);
            match kind {
                RuleKind::DlqSize | RuleKind::IngestLag => r.threshold = Some(1),
                RuleKind::DeadLetterRate => r.rate_per_min = Some(PerMinute(0.5)),
                RuleKind::OldestAge => r.max_age_ms = Some(1),
                _ => {}
            }
            let c = AlertsConfig {
                rules: vec![r],
                ..AlertsConfig::default()
            };
            c.validate().unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        }
    }

    fn hook(url: &str) -> AlertsConfig {
        let mut c = AlertsConfig::default();
        c.notifiers.insert(
            "hook".into(),
            NotifierConfig {
                kind: NotifierKind::Webhook,
                url: url.into(),
                secret: "s".into(),
                routing_key: String::new(),
                events_url: PAGERDUTY_EVENTS_URL.into(),
            },
        );
        c
    }

    #[test]
    fn notifier_urls_are_parsed_not_prefix_checked() {
        for bad in [
            "http://",
            "https://",
            "http:// spaces.example/x",
            "ftp://files.example/x",
            "hooks.example/redrive",
            "",
            "mailto:ops@example.com",
        ] {
            let e = hook(bad).validate().unwrap_err().0;
            assert!(
                e.contains("alert notifier `hook`") && e.contains("`url`"),
                "{bad:?}: {e}"
            );
        }
        for good in [
            "http://127.0.0.1:9000/hook",
            "https://hooks.slack.com/services/T000/B000/XXXX",
            "https://ops:pw@hooks.example/x?token=1",
        ] {
            hook(good)
                .validate()
                .unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        let mut c = AlertsConfig::default();
        c.notifiers.insert(
            "pd".into(),
            NotifierConfig {
                kind: NotifierKind::Pagerduty,
                url: String::new(),
                secret: String::new(),
                routing_key: "k".into(),
                events_url: "https://".into(),
            },
        );
        let e = c.validate().unwrap_err().0;
        assert!(
            e.contains("alert notifier `pd`") && e.contains("events_url"),
            "{e}"
        );
        c.notifiers.clear();
        c.public_url = "http://".into();
        assert!(c.validate().unwrap_err().0.contains("public_url"));
    }

    #[test]
    fn max_firing_defaults_to_20_and_must_be_positive() {
        let c =
            parse(r#"{"alerts": {"rules": [{"name": "d", "kind": "dlq_size", "threshold": 1}]}}"#);
        assert_eq!(c.rules[0].max_firing, 20);
        let mut r = rule(RuleKind::Quarantined);
        r.max_firing = 0;
        let c = AlertsConfig {
            rules: vec![r],
            ..AlertsConfig::default()
        };
        assert!(c.validate().unwrap_err().0.contains("max_firing"));
    }

    #[test]
    fn a_dlq_topic_scope_must_be_ingested() {
        let mut r = rule(RuleKind::DlqSize);
        r.name = "orders-depth".into();
        r.threshold = Some(1);
        r.dlq_topic = Some("orders.DLQ".into());
        let c = AlertsConfig {
            rules: vec![r],
            ..AlertsConfig::default()
        };
        let topics = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let e = c
            .check_dlq_scopes(&topics(&["orders.DLT", "^pay-.*-dlt$"]))
            .unwrap_err()
            .0;
        assert!(
            e.contains("alert rule `orders-depth`")
                && e.contains("orders.DLQ")
                && e.contains("`orders.DLT`, `^pay-.*-dlt$`"),
            "{e}"
        );
        c.check_dlq_scopes(&topics(&["orders.DLQ"])).unwrap();
        c.check_dlq_scopes(&topics(&["x", r"^.*\.DLQ$"])).unwrap();
        let mut rules = c.clone();
        rules.rules[0].dlq_topic = None;
        rules.check_dlq_scopes(&topics(&["x"])).unwrap();
    }

    #[test]
    fn redaction_keeps_scheme_and_host_only() {
        assert_eq!(
            redact_notifier_url("https://hooks.slack.com/services/T000/B000/XXXX"),
            "https://hooks.slack.com/<redacted>"
        );
        assert_eq!(
            redact_notifier_url("https://ops:Hunter2@hooks.example:8443/x?token=Q#f"),
            "https://hooks.example:8443/<redacted>"
        );
        assert_eq!(
            redact_notifier_url("http://hooks.example"),
            "http://hooks.example/"
        );
        assert_eq!(redact_notifier_url("not a url"), "<redacted>");
        let mut c = hook("https://u:p@hooks.example/secret-path?token=T");
        c.notifiers.insert(
            "pd".into(),
            NotifierConfig {
                kind: NotifierKind::Pagerduty,
                url: String::new(),
                secret: String::new(),
                routing_key: "R0UTING".into(),
                events_url: PAGERDUTY_EVENTS_URL.into(),
            },
        );
        let r = c.redacted("REDACTED");
        let text = format!("{r:?}");
        for secret in ["u:p", "secret-path", "token=T", "R0UTING"] {
            assert!(!text.contains(secret), "{secret}: {text}");
        }
        assert_eq!(r.notifiers["pd"].events_url, PAGERDUTY_EVENTS_URL);
        // Still a configuration that validates (what `redrive config` prints can be read back).
        r.validate().unwrap();
    }
}
