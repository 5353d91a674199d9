//! The quarantine API: records the store refused even in reduced form (see `docs/limits.md`).
//!
//! | route | role | answer |
//! |---|---|---|
//! | `GET /api/v1/quarantine` | viewer | `{"total", "items": [...], "next_before"}` newest first (`limit` ≤ 500, `before` = an id) |
//! | `GET /api/v1/quarantine/{id}` | viewer | one item plus `record` (key, value, headers as base64; `null` when not kept) |
//! | `POST /api/v1/quarantine/retry` | operator | body `{"ids": [..]}` or `{"all": true}`; `{"tried", "stored", "stored_reduced", "already_stored", "still_quarantined", "without_payload"}` |
//!
//! A retry decodes each record with this version of redrive and stores it (in full, else in
//! reduced form); each one stored leaves quarantine. It is audited (`quarantine_retry`).

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use redrive_core::actions::NewAuditEntry;
use redrive_core::permission::Permission;
use redrive_core::quarantine::{QuarantinedRecord, RetryReport, MAX_LIST_LIMIT};
use redrive_core::store::StoreError;
use redrive_core::RawRecord;
use serde::{Deserialize, Serialize};

use crate::api::{rfc3339, AppState, HeaderItem};
use crate::api_error::ApiError;
use crate::auth::{require_permission, Caller};

/// Most ids one retry may name.
pub const MAX_RETRY_IDS: usize = 10_000;

/// The routes of this module, state applied.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/quarantine", get(list))
        .route("/api/v1/quarantine/retry", post(retry))
        .route("/api/v1/quarantine/{id}", get(one))
        .with_state(state)
}

/// One quarantined record (`GET /api/v1/quarantine`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct QuarantineItem {
    /// Quarantine id (not a dead-letter id).
    pub id: i64,
    pub dlq_topic: String,
    pub dlq_partition: i32,
    pub dlq_offset: i64,
    /// The DLQ record's timestamp, RFC 3339 UTC, if it had one (and it is in chrono's range).
    pub dlq_timestamp: Option<String>,
    /// RFC 3339 UTC.
    pub quarantined_at: Option<String>,
    /// Why the store refused it.
    pub error: String,
    /// Key + value + header names and values, bytes.
    pub record_bytes: i64,
    /// False when even the raw record could not be kept: read it from Kafka at its
    /// coordinates while retention allows.
    pub payload_kept: bool,
    pub attempts: i32,
    /// RFC 3339 UTC.
    pub last_attempt_at: Option<String>,
}

impl From<&QuarantinedRecord> for QuarantineItem {
    fn from(q: &QuarantinedRecord) -> Self {
        QuarantineItem {
            id: q.id,
            dlq_topic: q.dlq_topic.clone(),
            dlq_partition: q.dlq_partition,
            dlq_offset: q.dlq_offset,
            dlq_timestamp: q.record_timestamp_ms.and_then(rfc3339),
            quarantined_at: rfc3339(q.quarantined_at_ms),
            error: q.error.clone(),
            record_bytes: q.record_bytes,
            payload_kept: q.payload_kept,
            attempts: q.attempts,
            last_attempt_at: rfc3339(q.last_attempt_at_ms),
        }
    }
}

/// `GET /api/v1/quarantine`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct QuarantinePage {
    /// Records in quarantine, all pages.
    pub total: i64,
    pub items: Vec<QuarantineItem>,
    /// Pass as `before` for the next (older) page; `null` on the last page.
    pub next_before: Option<i64>,
}

/// The kept raw record of a quarantined one.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct QuarantinedRaw {
    /// Base64; `null` for a null key.
    pub key: Option<String>,
    /// Base64; `null` for a tombstone.
    pub value: Option<String>,
    pub headers: Vec<HeaderItem>,
}

/// `GET /api/v1/quarantine/{id}`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct QuarantineDetail {
    #[serde(flatten)]
    pub item: QuarantineItem,
    /// `null` when the record was not kept.
    pub record: Option<QuarantinedRaw>,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl From<&RawRecord> for QuarantinedRaw {
    fn from(r: &RawRecord) -> Self {
        QuarantinedRaw {
            key: r.key.as_deref().map(b64),
            value: r.value.as_deref().map(b64),
            headers: r.headers.iter().map(HeaderItem::from).collect(),
        }
    }
}

fn failed(state: &AppState, operation: &'static str, e: StoreError) -> ApiError {
    state.telemetry.store_error(operation, &e);
    ApiError::Unavailable
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    limit: Option<u32>,
    before: Option<i64>,
}

/// `GET /api/v1/quarantine` (viewer).
pub async fn list(
    State(state): State<AppState>,
    Caller(actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<QuarantinePage>, ApiError> {
    let params: ListParams =
        serde_urlencoded::from_str(raw.as_deref().unwrap_or("")).map_err(|e| {
            ApiError::BadRequest(format!(
                "bad query ({e}); use `limit` (1-{MAX_LIST_LIMIT}) and `before` (a quarantine id)"
            ))
        })?;
    let limit = params.limit.unwrap_or(50);
    if limit == 0 || limit > MAX_LIST_LIMIT {
        return Err(ApiError::BadRequest(format!(
            "`limit` must be between 1 and {MAX_LIST_LIMIT}"
        )));
    }
    let total = state
        .store
        .quarantine_count()
        .await
        .map_err(|e| failed(&state, "quarantine_count", e))?;
    // One more than the page tells whether another follows.
    let mut rows = state
        .store
        .list_quarantine(limit + 1, params.before)
        .await
        .map_err(|e| failed(&state, "quarantine_list", e))?;
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    // A role limited to some DLQ topics sees their quarantined records only.
    if let Some(scope) = actor.topic_scope() {
        rows.retain(|q| scope.matches(&q.dlq_topic));
    }
    Ok(Json(QuarantinePage {
        total,
        next_before: rows.last().filter(|_| more).map(|q| q.id),
        items: rows.iter().map(QuarantineItem::from).collect(),
    }))
}

/// `GET /api/v1/quarantine/{id}` (viewer): 404 for an unknown id.
pub async fn one(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<QuarantineDetail>, ApiError> {
    let raw = path.map(|Path(s)| s).unwrap_or_default();
    let id: i64 = raw.trim().parse().map_err(|_| {
        ApiError::BadRequest(format!(
            "`{raw}` is not a quarantine id: ids are whole numbers, as in /api/v1/quarantine/3"
        ))
    })?;
    match state.store.quarantined(id).await {
        Ok(Some((q, record))) if actor.sees_topic(&q.dlq_topic) => Ok(Json(QuarantineDetail {
            item: QuarantineItem::from(&q),
            record: record.as_ref().map(QuarantinedRaw::from),
        })),
        Ok(_) => Err(ApiError::NotFound(format!(
            "no quarantined record with id {id} (it may have been retried and stored; list \
             them at /api/v1/quarantine)"
        ))),
        Err(e) => Err(failed(&state, "quarantine_get", e)),
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetryBody {
    ids: Option<Vec<i64>>,
    #[serde(default)]
    all: bool,
}

/// `POST /api/v1/quarantine/retry` (operator).
pub async fn retry(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Json<RetryReport>, ApiError> {
    require_permission(&state.auth, &actor, Permission::Replay, "quarantine_retry").await?;
    let b: RetryBody = serde_json::from_slice(&body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the body is not valid ({e}); send {{\"ids\": [1, 2]}} or {{\"all\": true}}"
        ))
    })?;
    let ids = match (b.ids, b.all) {
        (Some(ids), false) if !ids.is_empty() && ids.len() <= MAX_RETRY_IDS => Some(ids),
        (None, true) => None,
        _ => {
            return Err(ApiError::Unprocessable(format!(
                "give exactly one of `ids` (1 to {MAX_RETRY_IDS} quarantine ids) and \
                 `\"all\": true`"
            )))
        }
    };
    if actor.topic_scope().is_some() {
        // A role limited to some DLQ topics retries its own quarantined records only.
        let Some(ids) = &ids else {
            return Err(ApiError::Unprocessable(
                "your role is limited to some DLQ topics: retry by `ids`, not `all`".into(),
            ));
        };
        for id in ids {
            let topic = state
                .store
                .quarantined(*id)
                .await
                .map_err(|e| failed(&state, "quarantine_retry", e))?
                .map(|(q, _)| q.dlq_topic);
            if topic.is_some_and(|t| !actor.sees_topic(&t)) {
                return Err(ApiError::NotFound(format!(
                    "no quarantined record with id {id}"
                )));
            }
        }
    }
    let report = redrive_core::ingest::retry_quarantined(&state.store, ids.as_deref())
        .await
        .map_err(|e| failed(&state, "quarantine_retry", e))?;
    let mut entry = NewAuditEntry::by(
        &actor,
        "quarantine_retry",
        &format!(
            "ok: tried {}, stored {}, reduced {}, already stored {}, still refused {}",
            report.tried,
            report.stored,
            report.stored_reduced,
            report.already_stored,
            report.still_quarantined
        ),
    );
    entry.count = i64::try_from(report.tried).unwrap_or(i64::MAX);
    entry.ids = ids.map(|ids| serde_json::to_string(&ids).unwrap_or_default());
    if let Err(e) = state.store.record_audit(&entry).await {
        // The retry itself is done; a missing audit row is logged, not hidden.
        state.telemetry.store_error("audit", &e);
    }
    Ok(Json(report))
}
