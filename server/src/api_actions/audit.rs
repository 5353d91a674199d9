//! The audit trail (`GET /api/v1/audit`, JSON, and `/audit.csv`) and each dead letter's
//! history (`GET /api/v1/dead-letters/{id}/history`), with their public shapes.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use axum::Json;
use redrive_core::actions::{AuditEntry, AuditQuery, HistoryEvent};
use serde::Serialize;
use serde_json::Value;

use super::json_text;
use super::request::query_pairs;
use crate::api::{rfc3339, AppState};
use crate::auth::{ApiError, Caller};

/// One audit row.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuditItem {
    pub id: i64,
    /// RFC 3339 UTC.
    pub at: Option<String>,
    pub at_ms: i64,
    pub actor: String,
    pub action: String,
    pub count: i64,
    /// The ids acted on, when given as ids.
    pub ids: Option<Value>,
    /// The filter acted on, when given as a filter.
    pub filter: Option<Value>,
    pub reason: Option<String>,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
    /// `ok...`, `denied`, `failed: ...`.
    pub outcome: String,
    pub job_id: Option<String>,
    /// The API token's id, when the actor used one.
    pub via_token: Option<i64>,
    /// What changed, before and after (labels, notes), or an export's row count.
    pub detail: Option<Value>,
}

/// A page of the audit trail, newest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuditPage {
    pub items: Vec<AuditItem>,
    /// Pass as `cursor` for the next (older) page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// One event of a dead letter's history.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HistoryItem {
    pub at: Option<String>,
    pub at_ms: i64,
    /// `ingested`, `replay_requested`, `published`, `replay_failed`, `re_failed`, `replay_cancelled`,
    /// `deleted`, `restored`.
    pub kind: String,
    pub actor: Option<String>,
    pub detail: Option<String>,
    pub job_id: Option<String>,
}

/// A dead letter's history, oldest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HistoryList {
    pub items: Vec<HistoryItem>,
}

impl From<&AuditEntry> for AuditItem {
    fn from(a: &AuditEntry) -> Self {
        AuditItem {
            id: a.id,
            at: rfc3339(a.at_ms),
            at_ms: a.at_ms,
            actor: a.actor.clone(),
            action: a.action.clone(),
            count: a.count,
            ids: a.ids.as_deref().map(json_text),
            filter: a.filter.as_deref().map(json_text),
            reason: a.reason.clone(),
            client_ip: a.client_ip.clone(),
            user_agent: a.user_agent.clone(),
            outcome: a.outcome.clone(),
            job_id: a.job_id.clone(),
            via_token: a.via_token,
            detail: a.detail.as_deref().map(json_text),
        }
    }
}

impl From<&HistoryEvent> for HistoryItem {
    fn from(h: &HistoryEvent) -> Self {
        HistoryItem {
            at: rfc3339(h.at_ms),
            at_ms: h.at_ms,
            kind: h.kind.clone(),
            actor: h.actor.clone(),
            detail: h.detail.clone(),
            job_id: h.job_id.clone(),
        }
    }
}

/// `GET /api/v1/dead-letters/{id}/history` (viewer).
pub async fn history(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<HistoryList>, ApiError> {
    let raw = path
        .map(|Path(s)| s)
        .map_err(|_| ApiError::BadRequest("the dead-letter id is not valid".into()))?;
    let id = raw.trim().parse::<i64>().map_err(|_| {
        ApiError::BadRequest(format!(
            "`{raw}` is not a dead-letter id: ids are whole numbers"
        ))
    })?;
    state
        .store
        .check_ids_in_scope(&actor, &[id])
        .await
        .map_err(|e| state.action_failed("history", e))?;
    let events = state
        .store
        .history(id)
        .await
        .map_err(|e| state.action_failed("history", e))?;
    Ok(Json(HistoryList {
        items: events.iter().map(HistoryItem::from).collect(),
    }))
}

/// The audit page's query: `actor`, `action` (exact), `from`, `to` (the list's time forms),
/// `limit` (1 to 1000), `cursor` (a previous page's `next_cursor`). Empty values are unset.
pub fn audit_query(raw: Option<&str>) -> Result<AuditQuery, ApiError> {
    let pairs = query_pairs(raw)?;
    AuditQuery::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(ApiError::BadRequest)
}

/// `GET /api/v1/audit` (viewer): a page, newest first.
pub async fn audit(
    State(state): State<AppState>,
    Caller(_actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<AuditPage>, ApiError> {
    let q = audit_query(raw.as_deref())?;
    let page = state
        .store
        .audit(&q)
        .await
        .map_err(|e| state.action_failed("audit", e))?;
    Ok(Json(AuditPage {
        items: page.items.iter().map(AuditItem::from).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// `GET /api/v1/audit.csv` (viewer): every row matching the filters (`limit` is the page size
/// used internally; `cursor` starts below an id), newest first, as `text/csv`, streamed.
pub async fn audit_csv(
    State(state): State<AppState>,
    Caller(_actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = audit_query(raw.as_deref())?;
    // Streamed page by page (`audit_csv.rs`).
    crate::audit_csv::respond(&state, q).await
}
