//! The alert events: what a fired or resolved alert says (its summary and its notification
//! document, `docs/alerts.md`), and the test notification an operator asks for.

use crate::actions::NewAuditEntry;
use crate::alerts::model::{EventKind, ScopeState};
use crate::alerts::payload::{self, AlertPayload, SCHEMA_V1};
use crate::alerts::rules::{AlertsConfig, RuleConfig, RuleKind, OVERFLOW_LABEL};
use crate::alerts::state::Transition;
use crate::store::{NewAlertEvent, ALERTS_ACTOR};

/// What the value means, for humans.
fn describe(rule: &RuleConfig, scope: &str, value: i64) -> String {
    if let Some(column) = scope.strip_prefix(&format!("{OVERFLOW_LABEL}=")) {
        return format!(
            "{value} more {column} group(s) firing beyond this rule's max_firing = {} \
             (those page one by one; see /alerts for the rest)",
            rule.max_firing
        );
    }
    match rule.kind {
        RuleKind::DlqSize => format!(
            "{value} live dead letter(s) in {scope} (threshold {})",
            rule.threshold_or_zero()
        ),
        RuleKind::DeadLetterRate => {
            let per_min = value as f64 * 60_000.0 / rule.window() as f64;
            format!(
                "{per_min:.2} dead letters/min in {scope} over the last {} s (threshold {}/min)",
                rule.window() / 1000,
                rule.rate_per_min.map_or(0.0, |r| r.0)
            )
        }
        RuleKind::NewArrival => format!("{value} new dead letter(s) in {scope}"),
        RuleKind::OldestAge => format!(
            "the oldest live dead letter in {scope} is {} s old (threshold {} s)",
            value / 1000,
            rule.max_age_ms.unwrap_or(0) / 1000
        ),
        RuleKind::NewErrorGroup => {
            format!("a new error group appeared: {scope} ({value} dead letter(s))")
        }
        RuleKind::IngestStalled => {
            format!("ingest is not running with Kafka and the store reachable ({scope})")
        }
        RuleKind::ReplayFailed => format!("replay {scope} finished with {value} failed record(s)"),
        RuleKind::CanaryFailed => format!(
            "the canary of replay {scope} failed: {value} of its record(s) came back as dead \
             letters; the job paused itself"
        ),
        RuleKind::PoisonArrived => format!(
            "{value} dead letter(s) in {scope} went to the poison tier: they can never succeed \
             as they are and are never replayed automatically"
        ),
        RuleKind::Escalated => format!(
            "{value} dead letter(s) in {scope} came back after their automatic attempts and \
             were escalated to the manual tier"
        ),
        RuleKind::RulePaused => format!(
            "automatic replay rule {scope} paused itself: most of what it replayed came back \
             as dead letters; resume it once the cause is fixed"
        ),
        RuleKind::IngestLag => format!(
            "ingest is {value} record(s) behind in {scope} (threshold {})",
            rule.threshold_or_zero()
        ),
        RuleKind::Quarantined => format!(
            "{value} record(s) in quarantine for {scope} (threshold {})",
            rule.threshold_or_zero()
        ),
    }
}

pub(super) fn event_for(
    config: &AlertsConfig,
    rule: &RuleConfig,
    scope: &str,
    t: Transition,
    value: i64,
    now_ms: i64,
    before: Option<&ScopeState>,
) -> NewAlertEvent {
    let (kind, summary, fired_at) = match t {
        Transition::Fired => (
            EventKind::Fired,
            format!("{}: {}", rule.name, describe(rule, scope, value)),
            Some(now_ms),
        ),
        Transition::Resolved => (
            EventKind::Resolved,
            format!("{}: resolved for {scope}", rule.name),
            before.and_then(|b| b.fired_at_ms),
        ),
    };
    let (unit, threshold) = if scope.starts_with(&format!("{OVERFLOW_LABEL}=")) {
        // The summary alert counts the scopes over the cap.
        ("groups", Some(f64::from(rule.max_firing)))
    } else {
        payload::unit_and_threshold(rule)
    };
    let doc = AlertPayload {
        schema: SCHEMA_V1.to_string(),
        event_id: 0,
        event: kind,
        at_ms: now_ms,
        at: payload::rfc3339(now_ms),
        rule: rule.name.clone(),
        kind: rule.kind.as_str().to_string(),
        severity: rule.severity,
        scope: scope.to_string(),
        scope_labels: payload::scope_labels(scope),
        value,
        threshold,
        unit: unit.to_string(),
        summary: summary.clone(),
        dedup_key: payload::dedup_key(&rule.name, scope),
        fired_at_ms: fired_at,
        links: payload::links(&config.public_url, scope),
    };
    NewAlertEvent {
        rule: rule.name.clone(),
        scope: scope.to_string(),
        kind,
        value,
        summary,
        payload: doc,
        notifiers: rule
            .notifiers(&config.notifiers)
            .into_iter()
            .map(str::to_string)
            .collect(),
        audit: NewAuditEntry {
            actor: ALERTS_ACTOR.to_string(),
            action: kind.audit_action().to_string(),
            outcome: "ok".to_string(),
            ..NewAuditEntry::default()
        },
    }
}

/// The test notification an operator asks for: an event of kind `test` for `notifier` by
/// `actor` (its audit row names the operator).
pub fn test_event(
    config: &AlertsConfig,
    notifier: &str,
    audit: NewAuditEntry,
    now_ms: i64,
) -> NewAlertEvent {
    let scope = format!("notifier={notifier}");
    let summary = format!("redrive test notification to {notifier}: delivery works");
    NewAlertEvent {
        rule: "test".to_string(),
        scope: scope.clone(),
        kind: EventKind::Test,
        value: 0,
        summary: summary.clone(),
        payload: AlertPayload {
            schema: SCHEMA_V1.to_string(),
            event_id: 0,
            event: EventKind::Test,
            at_ms: now_ms,
            at: payload::rfc3339(now_ms),
            rule: "test".to_string(),
            kind: "test".to_string(),
            severity: crate::alerts::rules::Severity::Info,
            scope: scope.clone(),
            scope_labels: payload::scope_labels(&scope),
            value: 0,
            threshold: None,
            unit: "bool".to_string(),
            summary,
            dedup_key: payload::dedup_key("test", &format!("{scope}@{now_ms}")),
            fired_at_ms: Some(now_ms),
            links: payload::links(&config.public_url, ""),
        },
        notifiers: vec![notifier.to_string()],
        audit,
    }
}
