//! What the alert evaluator keeps in the store (migration 0007) and the `/alerts` page shows:
//! the state of each rule × scope, the history of alert events, and the notification
//! deliveries with their attempts.

use serde::{Deserialize, Serialize};

/// The state of one rule × scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    /// The condition does not hold.
    Ok,
    /// The condition holds, for less than the rule's `for_ms` (or the cooldown has not passed).
    Pending,
    /// Fired and not yet resolved: notified once, not again while the condition holds.
    Firing,
}

impl AlertState {
    pub const ALL: [AlertState; 3] = [AlertState::Ok, AlertState::Pending, AlertState::Firing];

    pub fn as_str(self) -> &'static str {
        match self {
            AlertState::Ok => "ok",
            AlertState::Pending => "pending",
            AlertState::Firing => "firing",
        }
    }

    pub fn parse(s: &str) -> Option<AlertState> {
        AlertState::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// One row of `alert_state`: a rule × scope the evaluator has seen holding at least once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeState {
    pub rule: String,
    /// `label=value`, e.g. `dlq_topic=orders.DLT`, `fingerprint=9f2c…`, `job=<uuid>`.
    pub scope: String,
    pub state: AlertState,
    /// The measured value at the last change (records, ms of age, records per window, 0/1).
    pub value: i64,
    /// Epoch ms since when the condition holds (pending or firing); for `ok`, the last change.
    pub since_ms: i64,
    /// Event kinds: epoch ms of the last event (arrival, new group, failed job) seen.
    pub last_event_ms: Option<i64>,
    pub fired_at_ms: Option<i64>,
    pub resolved_at_ms: Option<i64>,
    pub updated_at_ms: i64,
}

/// What happened to an alert (`alert_events.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Fired,
    Resolved,
    /// A test notification an operator asked for on the `/alerts` page.
    Test,
    /// A notification was given up after its attempts (the detail says which and why).
    NotificationFailed,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Fired => "fired",
            EventKind::Resolved => "resolved",
            EventKind::Test => "test",
            EventKind::NotificationFailed => "notification_failed",
        }
    }

    pub fn parse(s: &str) -> Option<EventKind> {
        [
            EventKind::Fired,
            EventKind::Resolved,
            EventKind::Test,
            EventKind::NotificationFailed,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }

    /// The audit trail's action for this event (`alert_fired`, ...).
    pub fn audit_action(self) -> &'static str {
        match self {
            EventKind::Fired => "alert_fired",
            EventKind::Resolved => "alert_resolved",
            EventKind::Test => "alert_test_notification",
            EventKind::NotificationFailed => "alert_notification_failed",
        }
    }
}

/// One row of `alert_events`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertEvent {
    pub id: i64,
    pub at_ms: i64,
    pub rule: String,
    pub scope: String,
    pub kind: EventKind,
    pub value: i64,
    pub summary: String,
}

/// Where one notification stands (`alert_deliveries.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Not sent yet, or being retried.
    Pending,
    Delivered,
    /// Given up after `notify_max_attempts` (or refused for good by the receiver).
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<DeliveryStatus> {
        [
            DeliveryStatus::Pending,
            DeliveryStatus::Delivered,
            DeliveryStatus::Failed,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// One row of `alert_deliveries`: one event sent to one notifier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub id: i64,
    pub event_id: i64,
    pub notifier: String,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: i32,
    pub last_error: Option<String>,
    /// Epoch ms of the next attempt (pending), else of the last one.
    pub next_attempt_at_ms: i64,
    pub created_at_ms: i64,
    pub finished_at_ms: Option<i64>,
    /// The event's rule, scope and kind, for display.
    pub rule: String,
    pub scope: String,
    pub event_kind: EventKind,
}

/// Most characters of a delivery's `last_error` kept.
pub const MAX_DELIVERY_ERROR_CHARS: usize = 500;
