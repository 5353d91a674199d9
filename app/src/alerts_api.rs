//! The `/alerts` page's server functions: the rules with their live state, history and
//! notifier deliveries, and "send a test notification" (operator, CSRF-checked, audited).
//!
//! The rules come from the server's configuration, put in context by the site router as an
//! `Arc<AlertsConfig>` (secrets redacted); their state, history and deliveries from the store
//! (migration 0007, written by the leader's evaluator and dispatcher).

use leptos::prelude::*;
use redrive_core::alerts::{AlertEvent, AlertState, Delivery, ScopeState};
use serde::{Deserialize, Serialize};

/// Most scopes listed per rule (firing and pending first); the rest are counted.
pub const SCOPES_SHOWN: usize = 50;
/// Events shown per rule.
pub const HISTORY_PER_RULE: i64 = 10;
/// Deliveries shown per notifier.
pub const DELIVERIES_PER_NOTIFIER: i64 = 5;

/// One rule as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleView {
    pub name: String,
    pub kind: String,
    pub severity: String,
    /// The condition in words (`live dead letters > 1000, grouped by dlq_topic`).
    pub condition: String,
    pub for_ms: u64,
    pub cooldown_ms: u64,
    pub notify: Vec<String>,
    /// The worst state of its scopes (`ok` when none holds).
    pub state: AlertState,
    pub firing: usize,
    pub pending: usize,
    /// Scopes, firing first, at most [`SCOPES_SHOWN`].
    pub scopes: Vec<ScopeState>,
    pub scopes_total: usize,
    pub last_fired_ms: Option<i64>,
    pub last_resolved_ms: Option<i64>,
    pub history: Vec<AlertEvent>,
}

/// One notifier as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotifierView {
    pub name: String,
    pub kind: String,
    /// Scheme and host only (a Slack URL's path is its secret).
    pub target: String,
    /// The newest deliveries, at most [`DELIVERIES_PER_NOTIFIER`].
    pub deliveries: Vec<Delivery>,
}

/// Everything the page shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertsOverview {
    pub rules: Vec<RuleView>,
    pub notifiers: Vec<NotifierView>,
    pub interval_ms: u64,
    pub as_of_ms: i64,
}

/// The rules, their state and history, and the notifiers' recent deliveries.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_alerts() -> Result<AlertsOverview, ServerFnError> {
    seam::overview().await
}

/// Sends a test notification to `notifier` (a configured name): recorded as an alert event of
/// kind `test` with one delivery and an audit row `alert_test_notification`, then sent by the
/// dispatcher like any notification. Back to `/alerts` with a notice.
#[server(endpoint = "ui/alert-test")]
pub async fn send_test_notification(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    notifier: String,
) -> Result<i64, ServerFnError> {
    let _ = csrf;
    seam::send_test(notifier.trim()).await
}

#[cfg(feature = "ssr")]
mod seam {
    use std::sync::Arc;

    use leptos::prelude::*;
    use redrive_core::actions::NewAuditEntry;
    use redrive_core::alerts::rules::RuleKind;
    use redrive_core::alerts::{AlertState, AlertsConfig, RuleConfig};
    use redrive_core::permission::Permission;
    use redrive_core::store::{Store, StoreError};

    use super::*;
    use crate::auth_context;
    use crate::http_status::HttpStatus;

    fn store() -> Result<Store, ServerFnError> {
        use_context::<Store>()
            .ok_or_else(|| ServerFnError::new("redrive is misconfigured: no store in context"))
    }

    fn config() -> Arc<AlertsConfig> {
        use_context::<Arc<AlertsConfig>>().unwrap_or_default()
    }

    fn failed(what: &str, e: StoreError) -> ServerFnError {
        tracing::error!(error = %e, "{what} failed");
        let hint = match e {
            StoreError::Unavailable(_) => "the database is unavailable; try again in a moment",
            _ => "see the server log for the cause",
        };
        ServerFnError::new(format!("Could not {what}: {hint}."))
    }

    fn condition(r: &RuleConfig) -> String {
        let by = r.group_by.column();
        let mut c = match r.kind {
            RuleKind::DlqSize => format!("live dead letters > {} per {by}", r.threshold_or_zero()),
            RuleKind::DeadLetterRate => format!(
                "more than {}/min dead-lettered over {} s, per {by}",
                r.rate_per_min.map_or(0.0, |x| x.0),
                r.window() / 1000
            ),
            RuleKind::NewArrival => format!(
                "any new dead letter, per {by}; resolves {} s after the last",
                r.window() / 1000
            ),
            RuleKind::OldestAge => format!(
                "oldest live dead letter older than {} s, per {by}",
                r.max_age_ms.unwrap_or(0) / 1000
            ),
            RuleKind::NewErrorGroup => format!(
                "an error group never seen before; resolves after {} s",
                r.window() / 1000
            ),
            RuleKind::IngestStalled => {
                "ingest not running with Kafka and the store reachable".to_string()
            }
            RuleKind::IngestLag => format!(
                "consumer lag > {} records per dlq_topic",
                r.threshold_or_zero()
            ),
            RuleKind::ReplayFailed => format!(
                "a replay job finished with failed records; resolves after {} s",
                r.window() / 1000
            ),
            RuleKind::CanaryFailed => format!(
                "a replay job's canary failed and paused the job; resolves after {} s",
                r.window() / 1000
            ),
            RuleKind::PoisonArrived => format!(
                "dead letters sorted into the poison tier, per dlq_topic; resolves after {} s",
                r.window() / 1000
            ),
            RuleKind::Escalated => format!(
                "dead letters escalated to manual after their automatic attempts, per \
                 dlq_topic; resolves after {} s",
                r.window() / 1000
            ),
            RuleKind::RulePaused => {
                "an automatic replay rule paused itself (most of what it replayed came back); \
                 resolves when it is resumed"
                    .to_string()
            }
            RuleKind::Quarantined => {
                format!(
                    "records in quarantine > {} per dlq_topic",
                    r.threshold_or_zero()
                )
            }
        };
        for (k, v) in [
            ("dlq_topic", &r.dlq_topic),
            ("source_topic", &r.source_topic),
            ("fingerprint", &r.fingerprint),
            ("consumer_group", &r.consumer_group),
        ] {
            if let Some(v) = v {
                c.push_str(&format!(", {k} = {v}"));
            }
        }
        c
    }

    /// Scheme and host (and port) of a notifier URL, for viewers: never its user:password,
    /// path or query (a Slack webhook's path and a webhook's query token are secrets).
    fn target(url: &str) -> String {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let scheme = url.split_once("://").map_or("", |(s, _)| s);
        format!("{scheme}://{host}")
    }

    pub async fn overview() -> Result<AlertsOverview, ServerFnError> {
        let store = store()?;
        let config = config();
        let states = store
            .alert_states()
            .await
            .map_err(|e| failed("read the alert states", e))?;
        let mut rules = Vec::with_capacity(config.rules.len());
        for r in &config.rules {
            let mut scopes: Vec<ScopeState> = states
                .iter()
                .filter(|s| s.rule == r.name)
                .cloned()
                .collect();
            scopes.sort_by(|a, b| {
                b.state
                    .cmp(&a.state)
                    .then(b.updated_at_ms.cmp(&a.updated_at_ms))
            });
            let firing = scopes
                .iter()
                .filter(|s| s.state == AlertState::Firing)
                .count();
            let pending = scopes
                .iter()
                .filter(|s| s.state == AlertState::Pending)
                .count();
            let state = scopes.first().map_or(AlertState::Ok, |s| s.state);
            let last_fired_ms = scopes.iter().filter_map(|s| s.fired_at_ms).max();
            let last_resolved_ms = scopes.iter().filter_map(|s| s.resolved_at_ms).max();
            let scopes_total = scopes.len();
            scopes.truncate(SCOPES_SHOWN);
            let history = store
                .recent_alert_events(Some(&r.name), HISTORY_PER_RULE)
                .await
                .map_err(|e| failed("read the alert history", e))?;
            rules.push(RuleView {
                name: r.name.clone(),
                kind: r.kind.as_str().to_string(),
                severity: r.severity.as_str().to_string(),
                condition: condition(r),
                for_ms: r.for_ms,
                cooldown_ms: r.cooldown_ms,
                notify: r
                    .notifiers(&config.notifiers)
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
                state,
                firing,
                pending,
                scopes,
                scopes_total,
                last_fired_ms,
                last_resolved_ms,
                history,
            });
        }
        let mut notifiers = Vec::with_capacity(config.notifiers.len());
        for (name, n) in &config.notifiers {
            let deliveries = store
                .recent_alert_deliveries(Some(name), DELIVERIES_PER_NOTIFIER)
                .await
                .map_err(|e| failed("read the notification deliveries", e))?;
            notifiers.push(NotifierView {
                name: name.clone(),
                kind: n.kind.as_str().to_string(),
                target: target(if n.kind == redrive_core::alerts::NotifierKind::Pagerduty {
                    &n.events_url
                } else {
                    &n.url
                }),
                deliveries,
            });
        }
        Ok(AlertsOverview {
            rules,
            notifiers,
            interval_ms: config.interval_ms,
            as_of_ms: chrono::Utc::now().timestamp_millis(),
        })
    }

    pub async fn send_test(notifier: &str) -> Result<i64, ServerFnError> {
        let status = HttpStatus::current();
        let actor =
            auth_context::authorize_permission(Permission::ManageRules, "alert_test_notification")
                .await
                .inspect_err(|_| status.set(403))?;
        let config = config();
        if !config.notifiers.contains_key(notifier) {
            status.set(400);
            return Err(ServerFnError::new(format!(
                "There is no notifier named `{notifier}`; the configured ones are listed on this page."
            )));
        }
        let event = redrive_core::alerts::evaluate::test_event(
            &config,
            notifier,
            NewAuditEntry::by(&actor, "alert_test_notification", "ok"),
            chrono::Utc::now().timestamp_millis(),
        );
        let store = store()?;
        let id = store
            .record_test_notification(&event)
            .await
            .map_err(|e| failed("record the test notification", e))?;
        leptos_axum::redirect(&format!("/alerts?test={}", crate::query::encode(notifier)));
        Ok(id)
    }
}
