//! Alert state, alert events and notification deliveries (migration 0007, `docs/alerts.md`).
//!
//! The evaluator writes one [`AlertCycle`] per evaluation in ONE transaction: the changed
//! rule × scope rows, the events with their audit rows and one pending delivery per event and
//! notifier, and the watermarks it read up to. A crash before the commit re-evaluates the same
//! input; after it, nothing fires twice. Deliveries are then sent by the dispatcher, which
//! claims due rows (the due time doubles as a lease) and records every attempt.

use sqlx::QueryBuilder;

use super::audit::insert_audit;
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::NewAuditEntry;
use crate::alerts::model::{
    AlertEvent, AlertState, Delivery, DeliveryStatus, EventKind, ScopeState,
    MAX_DELIVERY_ERROR_CHARS,
};

/// The actor of the evaluator's audit rows.
pub const ALERTS_ACTOR: &str = "redrive-alerts";

/// Most state rows [`Store::alert_states`] returns (pruning keeps far fewer).
pub const MAX_STATE_ROWS: i64 = 20_000;

/// An event to record; its payload is built once its id is known.
#[derive(Debug, Clone)]
pub struct NewAlertEvent {
    pub rule: String,
    pub scope: String,
    pub kind: EventKind,
    pub value: i64,
    pub summary: String,
    /// The `redrive.alert.v1` document with `event_id` 0; the store sets the id.
    pub payload: crate::alerts::payload::AlertPayload,
    /// One pending delivery per notifier name.
    pub notifiers: Vec<String>,
    /// Who the audit row names ([`ALERTS_ACTOR`] for the evaluator).
    pub audit: NewAuditEntry,
}

/// Everything one evaluation changes, written in one transaction.
#[derive(Debug, Clone, Default)]
pub struct AlertCycle {
    pub now_ms: i64,
    pub states: Vec<ScopeState>,
    pub events: Vec<NewAlertEvent>,
    pub watermarks: Vec<(String, i64)>,
    /// Remove events (their deliveries cascade) and `ok` state rows older than this.
    pub prune_before_ms: Option<i64>,
}

/// Whose pending deliveries [`Store::claim_alert_deliveries`] claims.
#[derive(Debug, Clone, Copy)]
pub enum ClaimFor<'a> {
    /// Every notifier's.
    Any,
    /// One notifier's.
    Notifier(&'a str),
    /// Those of notifiers not in this list (no longer configured: they are given up).
    NoneOf(&'a [String]),
}

/// A claimed delivery with the event document it sends.
#[derive(Debug, Clone)]
pub struct DueDelivery {
    pub delivery: Delivery,
    /// The exact `redrive.alert.v1` JSON text stored with the event.
    pub payload: String,
}

#[derive(Debug, sqlx::FromRow)]
struct StateRow {
    rule: String,
    scope: String,
    state: String,
    value: i64,
    since_ms: i64,
    last_event_ms: Option<i64>,
    fired_at_ms: Option<i64>,
    resolved_at_ms: Option<i64>,
    updated_at_ms: i64,
}

impl StateRow {
    fn into_state(self) -> Result<ScopeState, StoreError> {
        Ok(ScopeState {
            state: AlertState::parse(&self.state)
                .ok_or_else(|| StoreError::Corrupt(format!("alert state `{}`", self.state)))?,
            rule: self.rule,
            scope: self.scope,
            value: self.value,
            since_ms: self.since_ms,
            last_event_ms: self.last_event_ms,
            fired_at_ms: self.fired_at_ms,
            resolved_at_ms: self.resolved_at_ms,
            updated_at_ms: self.updated_at_ms,
        })
    }
}

#[derive(Debug, sqlx::FromRow)]
struct EventRow {
    id: i64,
    at_ms: i64,
    rule: String,
    scope: String,
    kind: String,
    value: i64,
    summary: String,
}

impl EventRow {
    fn into_event(self) -> Result<AlertEvent, StoreError> {
        Ok(AlertEvent {
            kind: EventKind::parse(&self.kind)
                .ok_or_else(|| StoreError::Corrupt(format!("alert event kind `{}`", self.kind)))?,
            id: self.id,
            at_ms: self.at_ms,
            rule: self.rule,
            scope: self.scope,
            value: self.value,
            summary: self.summary,
        })
    }
}

#[derive(Debug, sqlx::FromRow)]
struct DeliveryRow {
    id: i64,
    event_id: i64,
    notifier: String,
    status: String,
    attempts: i32,
    last_error: Option<String>,
    next_attempt_at_ms: i64,
    created_at_ms: i64,
    finished_at_ms: Option<i64>,
    rule: String,
    scope: String,
    kind: String,
}

impl DeliveryRow {
    fn into_delivery(self) -> Result<Delivery, StoreError> {
        Ok(Delivery {
            status: DeliveryStatus::parse(&self.status)
                .ok_or_else(|| StoreError::Corrupt(format!("delivery status `{}`", self.status)))?,
            event_kind: EventKind::parse(&self.kind)
                .ok_or_else(|| StoreError::Corrupt(format!("alert event kind `{}`", self.kind)))?,
            id: self.id,
            event_id: self.event_id,
            notifier: self.notifier,
            attempts: self.attempts,
            last_error: self.last_error,
            next_attempt_at_ms: self.next_attempt_at_ms,
            created_at_ms: self.created_at_ms,
            finished_at_ms: self.finished_at_ms,
            rule: self.rule,
            scope: self.scope,
        })
    }
}

const STATE_COLUMNS: &str = "rule, scope, state, value, since_ms, last_event_ms, fired_at_ms, \
     resolved_at_ms, updated_at_ms";
const DELIVERY_COLUMNS: &str = "d.id, d.event_id, d.notifier, d.status, d.attempts, \
     d.last_error, d.next_attempt_at_ms, d.created_at_ms, d.finished_at_ms, e.rule, e.scope, e.kind";

fn cut(s: &str, max: usize) -> String {
    s.chars()
        .take(max)
        .collect::<String>()
        .replace('\0', "\u{FFFD}")
}

/// Inserts event `$e` (its payload carrying the new id), its deliveries and its audit row in
/// transaction `$tx` of database type `$DB` at `$now`; evaluates to the event id. A macro so
/// that it expands inside `on_pool!`'s arms (one body for both databases).
macro_rules! insert_event {
    ($tx:ident, $DB:ident, $e:expr, $now:expr) => {{
        let e: &NewAlertEvent = $e;
        let now_ms: i64 = $now;
        let mut qb: QueryBuilder<'_, $DB> = QueryBuilder::new(
            "INSERT INTO alert_events (at_ms, rule, scope, kind, value, summary, payload) VALUES (",
        );
        let vals = [
            Val::I64(Some(now_ms)),
            Val::Text(Some(&e.rule)),
            Val::Text(Some(&e.scope)),
            Val::Text(Some(e.kind.as_str())),
            Val::I64(Some(e.value)),
            Val::OwnedText(Some(cut(&e.summary, 2_000))),
            Val::Text(Some("{}")),
        ];
        for (i, v) in vals.into_iter().enumerate() {
            if i > 0 {
                qb.push(", ");
            }
            $DB::bind(&mut qb, v);
        }
        qb.push(") RETURNING id");
        let id: i64 = qb
            .build_query_scalar()
            .fetch_one(&mut *$tx)
            .await
            .map_err(store_error)?;
        let mut payload = e.payload.clone();
        payload.event_id = id;
        let text = serde_json::to_string(&payload)
            .map_err(|err| StoreError::Invalid(format!("alert payload: {err}")))?;
        let mut qb: QueryBuilder<'_, $DB> = QueryBuilder::new("UPDATE alert_events SET payload = ");
        $DB::bind(&mut qb, Val::OwnedText(Some(text)));
        qb.push(" WHERE id = ");
        $DB::bind(&mut qb, Val::I64(Some(id)));
        qb.build().execute(&mut *$tx).await.map_err(store_error)?;
        for n in &e.notifiers {
            let mut qb: QueryBuilder<'_, $DB> = QueryBuilder::new(
                "INSERT INTO alert_deliveries (event_id, notifier, status, attempts, \
                 next_attempt_at_ms, created_at_ms) VALUES (",
            );
            $DB::bind(&mut qb, Val::I64(Some(id)));
            qb.push(", ");
            $DB::bind(&mut qb, Val::Text(Some(n)));
            qb.push(", 'pending', 0, ");
            $DB::bind(&mut qb, Val::I64(Some(now_ms)));
            qb.push(", ");
            $DB::bind(&mut qb, Val::I64(Some(now_ms)));
            qb.push(")");
            qb.build().execute(&mut *$tx).await.map_err(store_error)?;
        }
        let mut audit = e.audit.clone();
        audit.filter = Some(
            serde_json::json!({"rule": e.rule, "scope": e.scope, "event_id": id}).to_string(),
        );
        if audit.reason.is_none() {
            audit.reason = Some(cut(&e.summary, 500));
        }
        insert_audit::<$DB>(&audit, now_ms)
            .build()
            .execute(&mut *$tx)
            .await
            .map_err(store_error)?;
        id
    }};
}

impl Store {
    /// Every alert state row (at most [`MAX_STATE_ROWS`]), by rule then scope.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn alert_states(&self) -> Result<Vec<ScopeState>, StoreError> {
        let rows: Vec<StateRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {STATE_COLUMNS} FROM alert_state ORDER BY rule, scope LIMIT "
            ));
            DB::bind(&mut qb, Val::I64(Some(MAX_STATE_ROWS)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        rows.into_iter().map(StateRow::into_state).collect()
    }

    /// Scopes per rule and state (`SELECT rule, state, COUNT(*) ... GROUP BY`), for the
    /// `redrive_alerts` gauge.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn alert_state_counts(&self) -> Result<Vec<(String, String, i64)>, StoreError> {
        on_pool!(self, |pool, _DB| {
            sqlx::query_as::<_, (String, String, i64)>(
                "SELECT rule, state, COUNT(*) FROM alert_state GROUP BY rule, state",
            )
            .fetch_all(pool)
            .await
        })
        .map_err(store_error)
    }

    /// The watermark `name`, if one was ever written.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn alert_watermark(&self, name: &str) -> Result<Option<i64>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("SELECT value FROM alert_watermarks WHERE name = ");
            DB::bind(&mut qb, Val::Text(Some(name)));
            qb.build_query_scalar::<i64>().fetch_optional(pool).await
        })
        .map_err(store_error)
    }

    /// Writes one evaluation (see [`AlertCycle`]) in one transaction. Returns the new event ids.
    ///
    /// Errors: `Unavailable` (retry at the next evaluation), `Database`, `Invalid`.
    pub async fn apply_alert_cycle(&self, cycle: &AlertCycle) -> Result<Vec<i64>, StoreError> {
        let now = cycle.now_ms;
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            for s in &cycle.states {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                    "INSERT INTO alert_state ({STATE_COLUMNS}) VALUES ("
                ));
                let vals = [
                    Val::Text(Some(&s.rule)),
                    Val::Text(Some(&s.scope)),
                    Val::Text(Some(s.state.as_str())),
                    Val::I64(Some(s.value)),
                    Val::I64(Some(s.since_ms)),
                    Val::I64(s.last_event_ms),
                    Val::I64(s.fired_at_ms),
                    Val::I64(s.resolved_at_ms),
                    Val::I64(Some(s.updated_at_ms)),
                ];
                for (i, v) in vals.into_iter().enumerate() {
                    if i > 0 {
                        qb.push(", ");
                    }
                    DB::bind(&mut qb, v);
                }
                qb.push(
                    ") ON CONFLICT (rule, scope) DO UPDATE SET state = excluded.state, \
                     value = excluded.value, since_ms = excluded.since_ms, \
                     last_event_ms = excluded.last_event_ms, fired_at_ms = excluded.fired_at_ms, \
                     resolved_at_ms = excluded.resolved_at_ms, updated_at_ms = excluded.updated_at_ms",
                );
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
            }
            let mut ids = Vec::with_capacity(cycle.events.len());
            for e in &cycle.events {
                ids.push(insert_event!(tx, DB, e, now));
            }
            for (name, value) in &cycle.watermarks {
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("INSERT INTO alert_watermarks (name, value) VALUES (");
                DB::bind(&mut qb, Val::Text(Some(name)));
                qb.push(", ");
                DB::bind(&mut qb, Val::I64(Some(*value)));
                qb.push(") ON CONFLICT (name) DO UPDATE SET value = excluded.value");
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
            }
            if let Some(before) = cycle.prune_before_ms {
                // Deliveries first: SQLite enforces the cascade only with foreign keys on.
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "DELETE FROM alert_deliveries WHERE event_id IN \
                     (SELECT id FROM alert_events WHERE at_ms < ",
                );
                DB::bind(&mut qb, Val::I64(Some(before)));
                qb.push(")");
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("DELETE FROM alert_events WHERE at_ms < ");
                DB::bind(&mut qb, Val::I64(Some(before)));
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "DELETE FROM alert_state WHERE state = 'ok' AND updated_at_ms < ",
                );
                DB::bind(&mut qb, Val::I64(Some(before)));
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<_, StoreError>(ids)
        })
    }

    /// Records an operator's test notification to `notifier`: an event of kind `test`, one
    /// pending delivery and the audit row, in one transaction. Returns the event id.
    ///
    /// Errors: `Unavailable`, `Database`, `Invalid`.
    pub async fn record_test_notification(&self, event: &NewAlertEvent) -> Result<i64, StoreError> {
        let now = super::actions::now_ms();
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let id = insert_event!(tx, DB, event, now);
            tx.commit().await.map_err(store_error)?;
            Ok::<_, StoreError>(id)
        })
    }

    /// Claims up to `limit` pending deliveries due at `now_ms`: their due time moves to
    /// `now_ms + lease_ms` (so a dispatcher that dies mid-send retries after the lease), and
    /// they are returned with their event documents, oldest due first. `notifiers`: whose
    /// deliveries ([`ClaimFor`]; the dispatcher claims per notifier, so that a hanging receiver
    /// holding all of its own send slots never keeps another notifier's deliveries waiting).
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn claim_alert_deliveries(
        &self,
        now_ms: i64,
        lease_ms: i64,
        limit: i64,
        notifiers: ClaimFor<'_>,
    ) -> Result<Vec<DueDelivery>, StoreError> {
        let rows: Vec<(DeliveryRow, String)> = on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT id FROM alert_deliveries WHERE status = 'pending' AND next_attempt_at_ms <= ",
            );
            DB::bind(&mut qb, Val::I64(Some(now_ms)));
            match notifiers {
                ClaimFor::Any => {}
                ClaimFor::Notifier(n) => {
                    qb.push(" AND notifier = ");
                    DB::bind(&mut qb, Val::Text(Some(n)));
                }
                ClaimFor::NoneOf(names) => {
                    for n in names {
                        qb.push(" AND notifier <> ");
                        DB::bind(&mut qb, Val::Text(Some(n.as_str())));
                    }
                }
            }
            // One alert's notifications reach a notifier in order: never a resolve while its
            // trigger is still pending or in flight (a claimed delivery stays `pending`).
            qb.push(
                " AND NOT EXISTS (SELECT 1 FROM alert_deliveries p \
                 JOIN alert_events pe ON pe.id = p.event_id \
                 JOIN alert_events me ON me.id = alert_deliveries.event_id \
                 WHERE p.notifier = alert_deliveries.notifier AND p.status = 'pending' \
                 AND p.id < alert_deliveries.id AND pe.rule = me.rule AND pe.scope = me.scope)",
            );
            qb.push(" ORDER BY next_attempt_at_ms, id LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(limit)));
            let ids: Vec<i64> = qb
                .build_query_scalar()
                .fetch_all(&mut *tx)
                .await
                .map_err(store_error)?;
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("UPDATE alert_deliveries SET next_attempt_at_ms = ");
                DB::bind(&mut qb, Val::I64(Some(now_ms.saturating_add(lease_ms))));
                qb.push(" WHERE id = ");
                DB::bind(&mut qb, Val::I64(Some(id)));
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                    "SELECT {DELIVERY_COLUMNS} FROM alert_deliveries d \
                     JOIN alert_events e ON e.id = d.event_id WHERE d.id = "
                ));
                DB::bind(&mut qb, Val::I64(Some(id)));
                let row: DeliveryRow = qb
                    .build_query_as()
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(store_error)?;
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("SELECT payload FROM alert_events WHERE id = ");
                DB::bind(&mut qb, Val::I64(Some(row.event_id)));
                let payload: String = qb
                    .build_query_scalar()
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(store_error)?;
                out.push((row, payload));
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<_, StoreError>(out)
        })?;
        rows.into_iter()
            .map(|(r, payload)| {
                Ok(DueDelivery {
                    delivery: r.into_delivery()?,
                    payload,
                })
            })
            .collect()
    }

    /// Records the outcome of one attempt of delivery `id` (its `attempts` now counts it):
    /// `Ok(())` delivered; `Err((error, Some(next_ms)))` to retry at `next_ms`;
    /// `Err((error, None))` given up — which also records a `notification_failed` event and
    /// its audit row (`alert_notification_failed`) in the same transaction.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn record_alert_attempt(
        &self,
        id: i64,
        attempts: i32,
        outcome: Result<(), (&str, Option<i64>)>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE alert_deliveries SET attempts = ");
            DB::bind(&mut qb, Val::I32(Some(attempts)));
            match outcome {
                Ok(()) => {
                    qb.push(", status = 'delivered', last_error = NULL, finished_at_ms = ");
                    DB::bind(&mut qb, Val::I64(Some(now_ms)));
                }
                Err((error, next)) => {
                    qb.push(", last_error = ");
                    DB::bind(
                        &mut qb,
                        Val::OwnedText(Some(cut(error, MAX_DELIVERY_ERROR_CHARS))),
                    );
                    match next {
                        Some(at) => {
                            qb.push(", next_attempt_at_ms = ");
                            DB::bind(&mut qb, Val::I64(Some(at)));
                        }
                        None => {
                            qb.push(", status = 'failed', finished_at_ms = ");
                            DB::bind(&mut qb, Val::I64(Some(now_ms)));
                        }
                    }
                }
            }
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            if let Err((error, None)) = outcome {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                    "SELECT {DELIVERY_COLUMNS} FROM alert_deliveries d \
                     JOIN alert_events e ON e.id = d.event_id WHERE d.id = "
                ));
                DB::bind(&mut qb, Val::I64(Some(id)));
                let d: Option<DeliveryRow> = qb
                    .build_query_as()
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_error)?;
                if let Some(d) = d {
                    let summary = format!(
                        "notifier {} gave up on the {} notification of {} {} after {attempts} \
                         attempt(s): {}",
                        d.notifier,
                        d.kind,
                        d.rule,
                        d.scope,
                        cut(error, MAX_DELIVERY_ERROR_CHARS)
                    );
                    let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                        "INSERT INTO alert_events (at_ms, rule, scope, kind, value, summary, \
                         payload) VALUES (",
                    );
                    let vals = [
                        Val::I64(Some(now_ms)),
                        Val::Text(Some(&d.rule)),
                        Val::Text(Some(&d.scope)),
                        Val::Text(Some(EventKind::NotificationFailed.as_str())),
                        Val::I64(Some(i64::from(attempts))),
                        Val::OwnedText(Some(cut(&summary, 2_000))),
                        Val::OwnedText(Some(
                            serde_json::json!({"delivery_id": id, "notifier": d.notifier})
                                .to_string(),
                        )),
                    ];
                    for (i, v) in vals.into_iter().enumerate() {
                        if i > 0 {
                            qb.push(", ");
                        }
                        DB::bind(&mut qb, v);
                    }
                    qb.push(")");
                    qb.build().execute(&mut *tx).await.map_err(store_error)?;
                    let audit = NewAuditEntry {
                        actor: ALERTS_ACTOR.to_string(),
                        action: EventKind::NotificationFailed.audit_action().to_string(),
                        outcome: format!("failed: {}", cut(error, 200)),
                        filter: Some(
                            serde_json::json!({
                                "rule": d.rule, "scope": d.scope, "notifier": d.notifier,
                                "delivery_id": id, "event_id": d.event_id,
                            })
                            .to_string(),
                        ),
                        reason: Some(cut(&summary, 500)),
                        ..NewAuditEntry::default()
                    };
                    insert_audit::<DB>(&audit, now_ms)
                        .build()
                        .execute(&mut *tx)
                        .await
                        .map_err(store_error)?;
                }
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<_, StoreError>(())
        })
    }

    /// The newest alert events, at most `limit` (capped at 500), optionally of one rule.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn recent_alert_events(
        &self,
        rule: Option<&str>,
        limit: i64,
    ) -> Result<Vec<AlertEvent>, StoreError> {
        let rows: Vec<EventRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT id, at_ms, rule, scope, kind, value, summary FROM alert_events",
            );
            if let Some(r) = rule {
                qb.push(" WHERE rule = ");
                DB::bind(&mut qb, Val::Text(Some(r)));
            }
            qb.push(" ORDER BY id DESC LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(limit.clamp(1, 500))));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        rows.into_iter().map(EventRow::into_event).collect()
    }

    /// The newest deliveries, at most `limit` (capped at 500), optionally to one notifier.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn recent_alert_deliveries(
        &self,
        notifier: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        let rows: Vec<DeliveryRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {DELIVERY_COLUMNS} FROM alert_deliveries d \
                 JOIN alert_events e ON e.id = d.event_id"
            ));
            if let Some(n) = notifier {
                qb.push(" WHERE d.notifier = ");
                DB::bind(&mut qb, Val::Text(Some(n)));
            }
            qb.push(" ORDER BY d.id DESC LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(limit.clamp(1, 500))));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        rows.into_iter().map(DeliveryRow::into_delivery).collect()
    }
}
