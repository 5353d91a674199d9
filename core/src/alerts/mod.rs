//! Built-in alerts (`docs/alerts.md`): rules from `redrive.toml` ([`rules`]), the state machine
//! of one rule × scope ([`state`]), the versioned notification document ([`payload`]), what the
//! store keeps ([`model`], migration 0007) and, on the server, the evaluator
//! ([`evaluate`]) with its live counters ([`status`]).
//!
//! Data flow: store (+ ingest status) → evaluator (leader only) → one store transaction per
//! evaluation (states, events, audit rows, pending deliveries) → the server's dispatcher sends
//! the deliveries (webhook, Slack, PagerDuty) with retries. The evaluator never waits for a
//! notifier.

pub mod model;
pub mod payload;
pub mod rules;
pub mod state;

#[cfg(feature = "server")]
pub mod evaluate;
#[cfg(feature = "server")]
pub mod status;

pub use model::{AlertEvent, AlertState, Delivery, DeliveryStatus, EventKind, ScopeState};
pub use rules::{AlertsConfig, NotifierConfig, NotifierKind, RuleConfig, RuleKind};
