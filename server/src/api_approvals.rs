//! Four-eyes approval and required reasons in the JSON API (`docs/replay.md`, "Four-eyes
//! approval and required reasons").
//!
//! | route | who | answer |
//! |---|---|---|
//! | `GET /api/v1/requests` | viewer | `{"items": [request, ...]}` newest first (`status`, `limit` ≤ 500) |
//! | `GET /api/v1/requests/{id}` | viewer | the request, with `count_now` / `per_topic_now` while pending |
//! | `POST /api/v1/requests/{id}/approve` | `approve` permission, not the requester | `{"request", "affected", "job_id"}`; body optional `{"reason"}` |
//! | `POST /api/v1/requests/{id}/decline` | `approve` permission, not the requester | the request; body `{"reason"}` (required) |
//! | `POST /api/v1/requests/{id}/cancel` | the requester | the request; body optional `{"reason"}` |
//!
//! A replay, delete or restore that needs approval (`[approval]`) answers 202
//! `{"request_id", "status": "pending_approval", ...}` from its own route ([`gate`]), and
//! nothing is written but the request and its audit row. Refusals: 403 for the requester
//! approving or declining their own request (and for anyone else cancelling it; audited
//! `denied`), 404, 409 for a request that is not pending (expired included), 422 for a reason
//! missing or not matching `[reasons] pattern`.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redrive_core::actions::{Actor, NewAuditEntry, ReplayRequest};
use redrive_core::approval::{ActionKind, ApprovalRequest, RequestStatus, MAX_REQUESTS_LISTED};
use redrive_core::permission::Permission;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{rfc3339, AppState};
use crate::api_actions::{parse_body, JobItem};
use crate::api_error::ApiError;
use crate::auth::{require_permission, Caller};

/// Requests listed when no `limit` is given.
pub const DEFAULT_REQUESTS: u32 = 50;

/// The routes of this module, state applied.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/requests", get(list))
        .route("/api/v1/requests/{id}", get(one))
        .route("/api/v1/requests/{id}/approve", post(approve))
        .route("/api/v1/requests/{id}/decline", post(decline))
        .route("/api/v1/requests/{id}/cancel", post(cancel))
        .with_state(state)
}

/// `Ok` if `reason` satisfies `[reasons]`; else 422 naming the pattern.
pub(crate) fn check_reason(state: &AppState, reason: Option<&str>) -> Result<(), ApiError> {
    state
        .approval
        .check_reason(reason)
        .map_err(ApiError::Unprocessable)
}

/// The approval gate of a replay, delete or restore: checks the reason (422), then, when the
/// action needs approval, stores it as a pending request and answers 202
/// `{"request_id", "status": "pending_approval", ...}` (`Some`); `None` = carry it out now.
pub(crate) async fn gate(
    state: &AppState,
    actor: &Actor,
    kind: ActionKind,
    req: &ReplayRequest,
) -> Result<Option<Response>, ApiError> {
    check_reason(state, req.reason.as_deref())?;
    if !state.approval.approval_on() {
        return Ok(None);
    }
    let Some(r) = state
        .store
        .submit_for_approval(&state.approval, actor, kind, req)
        .await
        .map_err(|e| state.action_failed("submit_for_approval", e))?
    else {
        return Ok(None);
    };
    let body = Pending {
        request_id: r.id,
        status: "pending_approval",
        kind: r.kind.as_str(),
        count: r.count,
        per_topic: topic_counts(&r.per_topic),
        why: r.why.clone(),
        expires_at: rfc3339(r.expires_at_ms),
        url: format!("/approvals#request-{}", r.id),
    };
    let mut res = (StatusCode::ACCEPTED, Json(body)).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("/api/v1/requests/{}", r.id)) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    Ok(Some(res))
}

/// The 202 answer of an action that waits for approval.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Pending {
    pub request_id: i64,
    /// Always `pending_approval`.
    pub status: &'static str,
    /// `replay`, `delete`, `restore`.
    pub kind: &'static str,
    /// Dead letters it would change (now).
    pub count: i64,
    pub per_topic: Vec<TopicCount>,
    /// Why it needs approval.
    pub why: String,
    /// RFC 3339 UTC.
    pub expires_at: Option<String>,
    /// The page where it is approved.
    pub url: String,
}

/// Dead letters of one DLQ topic.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TopicCount {
    pub dlq_topic: String,
    pub count: i64,
}

fn topic_counts(per_topic: &[(String, i64)]) -> Vec<TopicCount> {
    per_topic
        .iter()
        .map(|(t, n)| TopicCount {
            dlq_topic: t.clone(),
            count: *n,
        })
        .collect()
}

/// An approval request, as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RequestItem {
    pub id: i64,
    /// `replay`, `delete`, `restore`.
    pub kind: &'static str,
    /// `pending`, `approved`, `declined`, `expired`, `cancelled`.
    pub status: &'static str,
    /// `{"ids": [...]}` or `{"filter": {...}}`, as asked.
    pub selection: Value,
    /// A filter acts only on dead letters with an id at or below this (`null` for ids).
    pub max_id: Option<i64>,
    pub target_topic: Option<String>,
    pub rate_per_sec: Option<u32>,
    #[schema(value_type = Object)]
    pub options: redrive_core::actions::ReplayOptions,
    pub reason: Option<String>,
    pub requested_by: String,
    /// Dead letters it would change, and per DLQ topic, when it was asked for.
    pub count: i64,
    pub per_topic: Vec<TopicCount>,
    /// The same now (pending requests only; `null` otherwise).
    pub count_now: Option<i64>,
    pub per_topic_now: Option<Vec<TopicCount>>,
    pub why: String,
    pub created_at: Option<String>,
    pub expires_at: Option<String>,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub decision_reason: Option<String>,
    /// An approved replay's job.
    pub job_id: Option<String>,
}

impl From<&ApprovalRequest> for RequestItem {
    fn from(r: &ApprovalRequest) -> Self {
        RequestItem {
            id: r.id,
            kind: r.kind.as_str(),
            status: r.status.as_str(),
            selection: serde_json::to_value(&r.request.selection).unwrap_or(Value::Null),
            max_id: r.max_id,
            target_topic: r.request.target_topic.clone(),
            rate_per_sec: r.request.rate_per_sec,
            options: r.request.options.clone(),
            reason: r.request.reason.clone(),
            requested_by: r.requested_by.user.clone(),
            count: r.count,
            per_topic: topic_counts(&r.per_topic),
            count_now: None,
            per_topic_now: None,
            why: r.why.clone(),
            created_at: rfc3339(r.created_at_ms),
            expires_at: rfc3339(r.expires_at_ms),
            decided_by: r.decided_by.clone(),
            decided_at: r.decided_at_ms.and_then(rfc3339),
            decision_reason: r.decision_reason.clone(),
            job_id: r.job_id.clone(),
        }
    }
}

/// `GET /api/v1/requests` answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RequestList {
    pub items: Vec<RequestItem>,
}

/// `POST .../approve` answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Approved {
    pub request: RequestItem,
    /// Dead letters deleted, restored, or queued for replay.
    pub affected: i64,
    pub job_id: Option<String>,
    /// The replay job, for a replay.
    pub job: Option<JobItem>,
}

/// Body of approve, decline and cancel.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    pub reason: Option<String>,
}

fn decision(body: &Bytes) -> Result<DecisionBody, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(DecisionBody::default());
    }
    parse_body(body)
}

fn request_id(path: Result<Path<String>, PathRejection>) -> Result<i64, ApiError> {
    let raw = path
        .map(|Path(s)| s)
        .map_err(|_| ApiError::BadRequest("the request id is not valid".into()))?;
    raw.trim().parse::<i64>().map_err(|_| {
        ApiError::BadRequest(format!(
            "`{raw}` is not an approval request id: ids are whole numbers"
        ))
    })
}

/// The request, or 404.
async fn load(state: &AppState, id: i64) -> Result<ApprovalRequest, ApiError> {
    state
        .store
        .approval_request(id)
        .await
        .map_err(|e| state.action_failed("approval_request", e))?
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "no approval request {id} (list them at /api/v1/requests)"
            ))
        })
}

/// 403 (audited `denied` as `action`) for a person the request does not let decide.
async fn refuse(state: &AppState, actor: &Actor, action: &str, message: String) -> ApiError {
    state
        .auth
        .audit(NewAuditEntry::by(actor, action, "denied"))
        .await;
    ApiError::Forbidden(message)
}

/// `GET /api/v1/requests` (viewer).
pub async fn list(
    State(state): State<AppState>,
    Caller(_actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<RequestList>, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw.as_deref().unwrap_or(""))
        .map_err(|_| ApiError::BadRequest("the query string is not valid URL encoding".into()))?;
    let (mut status, mut limit) = (None, DEFAULT_REQUESTS);
    for (k, v) in pairs {
        match k.as_str() {
            "status" if v.trim().is_empty() => {}
            "status" => {
                status = Some(RequestStatus::parse(v.trim()).ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "`status` must be one of pending, approved, declined, expired, \
                         cancelled (got `{v}`)"
                    ))
                })?)
            }
            "limit" => {
                limit = v
                    .trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_REQUESTS_LISTED).contains(n))
                    .ok_or_else(|| {
                        ApiError::BadRequest(format!(
                            "`limit` must be a whole number from 1 to {MAX_REQUESTS_LISTED}"
                        ))
                    })?
            }
            other => {
                return Err(ApiError::BadRequest(format!(
                    "unknown parameter `{other}`; requests take `status` and `limit`"
                )))
            }
        }
    }
    let items = state
        .store
        .approval_requests(status, limit)
        .await
        .map_err(|e| state.action_failed("approval_requests", e))?;
    Ok(Json(RequestList {
        items: items.iter().map(RequestItem::from).collect(),
    }))
}

/// `GET /api/v1/requests/{id}` (viewer): with the count now, while pending.
pub async fn one(
    State(state): State<AppState>,
    Caller(_actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<RequestItem>, ApiError> {
    let id = request_id(path)?;
    let r = load(&state, id).await?;
    let mut item = RequestItem::from(&r);
    if r.status == RequestStatus::Pending {
        let now = state
            .store
            .action_breakdown(r.kind, &r.request, r.max_id)
            .await
            .map_err(|e| state.action_failed("action_breakdown", e))?;
        item.count_now = Some(now.iter().map(|(_, n)| n).sum());
        item.per_topic_now = Some(topic_counts(&now));
    }
    Ok(Json(item))
}

/// `POST /api/v1/requests/{id}/approve` (`approve` permission; not the requester).
pub async fn approve(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<Approved>, ApiError> {
    require_permission(&state.auth, &actor, Permission::Approve, "approval_approve").await?;
    let id = request_id(path)?;
    let b = decision(&body)?;
    let r = load(&state, id).await?;
    if let Err(m) = r.check_decider(&actor.user) {
        return Err(refuse(&state, &actor, "approval_approve", m).await);
    }
    let out = state
        .store
        .approve_request(&actor, id, b.reason.as_deref())
        .await
        .map_err(|e| state.action_failed("approve_request", e))?;
    Ok(Json(Approved {
        request: RequestItem::from(&out.request),
        affected: out.affected,
        job_id: out.job.as_ref().map(|j| j.id.clone()),
        job: out.job.as_ref().map(JobItem::from),
    }))
}

/// `POST /api/v1/requests/{id}/decline` (`approve` permission; not the requester).
pub async fn decline(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<RequestItem>, ApiError> {
    require_permission(&state.auth, &actor, Permission::Approve, "approval_decline").await?;
    let id = request_id(path)?;
    let b = decision(&body)?;
    let r = load(&state, id).await?;
    if let Err(m) = r.check_decider(&actor.user) {
        return Err(refuse(&state, &actor, "approval_decline", m).await);
    }
    let out = state
        .store
        .decline_request(&actor, id, b.reason.as_deref())
        .await
        .map_err(|e| state.action_failed("decline_request", e))?;
    Ok(Json(RequestItem::from(&out)))
}

/// `POST /api/v1/requests/{id}/cancel` (its requester only).
pub async fn cancel(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<RequestItem>, ApiError> {
    let id = request_id(path)?;
    let b = decision(&body)?;
    let r = load(&state, id).await?;
    if let Err(m) = r.check_canceller(&actor.user) {
        return Err(refuse(&state, &actor, "approval_cancel", m).await);
    }
    let out = state
        .store
        .cancel_request(&actor, id, b.reason.as_deref())
        .await
        .map_err(|e| state.action_failed("cancel_request", e))?;
    Ok(Json(RequestItem::from(&out)))
}
