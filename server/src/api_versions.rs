//! The JSON API of edit and replay (`docs/replay.md`, "Edit and replay"): save an edited
//! key, value and headers of one dead letter as a new version (optionally replaying it in
//! the same transaction), list its versions with their diffs, read one version's record.
//!
//! | route | role | answer |
//! |---|---|---|
//! | `POST /api/v1/dead-letters/{id}/versions` | operator | 201 the version (with `diff`) and `job_id` when `"replay": true` |
//! | `GET /api/v1/dead-letters/{id}/versions` | viewer | `{"latest": n, "items": [version, ...]}` newest first (at most 50) |
//! | `GET /api/v1/dead-letters/{id}/versions/{n}` | viewer | `{"version": n, "key", "value", "headers"}` (0 = the original) |
//!
//! The edit body: `key` and `value` are `null` or one of `{"text": "..."}`,
//! `{"json": "<JSON text>"}` (checked; or any JSON value, stored compact), `{"base64": "..."}`,
//! `{"hex": "..."}`; `headers` is the whole new list, in order, each
//! `{"name": "...", "value": <the same>}`. A field left out keeps what the latest version
//! has. `base_version` (the version the edit was made from: refused with 409 if another edit
//! was saved since), `reason`, `replay` (`true`: queue the new version for replay at once),
//! `target_topic` (with `replay`; default the source topic). Unknown fields are refused.
//!
//! Refusals, as JSON `{"error"}`: 400 not JSON, 413 a body over 64 MiB, 422 an edit that
//! breaks a limit (`redrive_core::edit`: invalid JSON for `json`, bad base64 or hex, an empty
//! header name, a value over 16 MiB, ...) or changes nothing, 404, 409 (deleted, waiting in a
//! replay job, or an edit saved meanwhile).

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redrive_core::edit::{
    diff::DiffSummary, EditError, EditRequest, Payload, RecordEdit, ReplayEdited, VersionInfo,
    MAX_EDIT_BODY_BYTES,
};
use redrive_core::model::Header;
use redrive_core::permission::Permission;
use redrive_core::store::there_is_no;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::api::{rfc3339, AppState};
use crate::api_actions::parse_body;
use crate::api_error::ApiError;
use crate::auth::{require_permission, Caller};

/// The routes of this module, state applied.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/api/v1/dead-letters/{id}/versions",
            post(create_version)
                .get(list_versions)
                .layer(DefaultBodyLimit::max(MAX_EDIT_BODY_BYTES)),
        )
        .route(
            "/api/v1/dead-letters/{id}/versions/{version}",
            get(get_version),
        )
        .with_state(state)
}

/// A field that may be absent (keep), `null` (set null) or a value: `Some(Value::Null)` for
/// `null`, `None` when absent (with `#[serde(default)]`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `POST /api/v1/dead-letters/{id}/versions` body (see the module doc).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EditBody {
    #[serde(default, deserialize_with = "present")]
    pub key: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub value: Option<Value>,
    #[serde(default)]
    pub headers: Option<Vec<HeaderBody>>,
    #[serde(default)]
    pub base_version: Option<i32>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub replay: bool,
    #[serde(default)]
    pub target_topic: Option<String>,
}

/// One header of an edit: its name and `null` or a payload object.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeaderBody {
    pub name: String,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub value: Option<Payload>,
}

/// A key or value field: `null` or a payload object.
fn payload_field(what: &str, v: Value) -> Result<Option<Vec<u8>>, ApiError> {
    if v.is_null() {
        return Ok(None);
    }
    let p: Payload = serde_json::from_value(v).map_err(|e| {
        ApiError::Unprocessable(format!(
            "`{what}` must be null or one of {{\"text\": ...}}, {{\"json\": ...}}, \
             {{\"base64\": ...}}, {{\"hex\": ...}} ({e})"
        ))
    })?;
    p.bytes(&format!("the {what}"))
        .map(Some)
        .map_err(|EditError(m)| ApiError::Unprocessable(m))
}

impl EditBody {
    /// The store's request. Errors: 422 for a payload that does not decode, a `target_topic`
    /// without `replay`.
    pub fn into_request(self) -> Result<EditRequest, ApiError> {
        let key = self.key.map(|v| payload_field("key", v)).transpose()?;
        let value = self.value.map(|v| payload_field("value", v)).transpose()?;
        let headers = self
            .headers
            .map(|hs| {
                hs.into_iter()
                    .enumerate()
                    .map(|(i, h)| {
                        let value = h
                            .value
                            .map(|p| p.bytes(&format!("header {} (`{}`)", i + 1, h.name)))
                            .transpose()
                            .map_err(|EditError(m)| ApiError::Unprocessable(m))?;
                        Ok(Header {
                            name: h.name,
                            value,
                        })
                    })
                    .collect::<Result<Vec<Header>, ApiError>>()
            })
            .transpose()?;
        if self.target_topic.is_some() && !self.replay {
            return Err(ApiError::Unprocessable(
                "`target_topic` is for the replay: add \"replay\": true, or leave it out".into(),
            ));
        }
        Ok(EditRequest {
            edit: RecordEdit {
                key,
                value,
                headers,
            },
            base_version: self.base_version,
            reason: self.reason,
            replay: self.replay.then_some(ReplayEdited {
                target_topic: self.target_topic,
            }),
        })
    }
}

/// A saved version, as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct VersionItem {
    pub dead_letter_id: i64,
    pub version: i32,
    pub created_at: Option<String>,
    pub created_by: String,
    pub reason: Option<String>,
    pub value_bytes: i64,
    pub value_sha256: Option<String>,
    #[schema(value_type = Object)]
    pub diff: DiffSummary,
}

impl From<&VersionInfo> for VersionItem {
    fn from(v: &VersionInfo) -> Self {
        VersionItem {
            dead_letter_id: v.dead_letter_id,
            version: v.version,
            created_at: rfc3339(v.created_at_ms),
            created_by: v.created_by.clone(),
            reason: v.reason.clone(),
            value_bytes: v.value_bytes,
            value_sha256: v.value_sha256.clone(),
            diff: v.diff.clone(),
        }
    }
}

/// `POST` answer: the version, and the replay job when one was asked for.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Created {
    #[serde(flatten)]
    pub version: VersionItem,
    pub job_id: Option<String>,
    /// Set when the replay needs approval (`docs/replay.md`, "Four-eyes approval"): the
    /// edit is saved, the replay waits as this request (no `job_id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<i64>,
}

/// `GET .../versions` answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct VersionList {
    /// The latest version (0 = never edited).
    pub latest: i32,
    pub items: Vec<VersionItem>,
}

/// One header of a version's record.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HeaderItem {
    pub name: String,
    /// `null`, `{"text"}` (UTF-8) or `{"base64"}`.
    #[schema(value_type = Option<Object>)]
    pub value: Option<Payload>,
}

/// `GET .../versions/{n}` answer: the record of that version, byte-exact (text when UTF-8,
/// else base64), what an edit body takes back.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct VersionRecord {
    pub dead_letter_id: i64,
    pub version: i32,
    /// The latest version (what a replay publishes).
    pub latest: i32,
    #[schema(value_type = Option<Object>)]
    pub key: Option<Payload>,
    #[schema(value_type = Option<Object>)]
    pub value: Option<Payload>,
    pub headers: Vec<HeaderItem>,
}

fn dead_letter_id(path: &str) -> Result<i64, ApiError> {
    path.trim().parse::<i64>().map_err(|_| {
        ApiError::BadRequest(format!(
            "`{path}` is not a dead-letter id: ids are whole numbers"
        ))
    })
}

/// `POST /api/v1/dead-letters/{id}/versions` (operator).
pub async fn create_version(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Path(raw) =
        path.map_err(|_| ApiError::BadRequest("the dead-letter id is not valid".into()))?;
    let id = dead_letter_id(&raw)?;
    require_permission(&state.auth, &actor, Permission::Edit, "edit").await?;
    let b: EditBody = parse_body(&body)?;
    if b.replay {
        // Publishing the edited version is a replay.
        require_permission(&state.auth, &actor, Permission::Replay, "edit").await?;
    }
    drop(body);
    let req = b.into_request()?;
    crate::api_approvals::check_reason(&state, req.reason.as_deref())?;
    let (out, pending) = state
        .store
        .edit_dead_letter_gated(&state.approval, &actor, id, &req)
        .await
        .map_err(|e| state.action_failed("edit_dead_letter", e))?;
    let created = Created {
        version: VersionItem::from(&out.version),
        job_id: out.job.as_ref().map(|j| j.id.clone()),
        request_id: pending.map(|r| r.id),
    };
    let mut res = (StatusCode::CREATED, Json(created)).into_response();
    let location = format!("/api/v1/dead-letters/{id}/versions/{}", out.version.version);
    if let Ok(v) = HeaderValue::from_str(&location) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    Ok(res)
}

/// `GET /api/v1/dead-letters/{id}/versions` (viewer).
pub async fn list_versions(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<VersionList>, ApiError> {
    let Path(raw) =
        path.map_err(|_| ApiError::BadRequest("the dead-letter id is not valid".into()))?;
    let id = dead_letter_id(&raw)?;
    state
        .store
        .check_ids_in_scope(&actor, &[id])
        .await
        .map_err(|e| state.action_failed("versions", e))?;
    let latest = state
        .store
        .latest_version(id)
        .await
        .map_err(|e| state.action_failed("versions", e))?
        .ok_or_else(|| ApiError::NotFound(there_is_no(&format!("dead letter {id}"))))?;
    let items = state
        .store
        .versions(id)
        .await
        .map_err(|e| state.action_failed("versions", e))?;
    Ok(Json(VersionList {
        latest,
        items: items.iter().map(VersionItem::from).collect(),
    }))
}

/// `GET /api/v1/dead-letters/{id}/versions/{n}` (viewer).
pub async fn get_version(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<VersionRecord>, ApiError> {
    let Path((raw, raw_version)) =
        path.map_err(|_| ApiError::BadRequest("the path is not valid".into()))?;
    let id = dead_letter_id(&raw)?;
    let version = raw_version.trim().parse::<i32>().map_err(|_| {
        ApiError::BadRequest(format!(
            "`{raw_version}` is not a version: versions are whole numbers (0 = the original)"
        ))
    })?;
    state
        .store
        .check_ids_in_scope(&actor, &[id])
        .await
        .map_err(|e| state.action_failed("versions", e))?;
    let latest = state
        .store
        .latest_version(id)
        .await
        .map_err(|e| state.action_failed("version", e))?
        .ok_or_else(|| ApiError::NotFound(there_is_no(&format!("dead letter {id}"))))?;
    let record = state
        .store
        .version_record(id, version)
        .await
        .map_err(|e| state.action_failed("version", e))?
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "dead letter {id} has no version {version} (the latest is {latest})"
            ))
        })?;
    Ok(Json(VersionRecord {
        dead_letter_id: id,
        version,
        latest,
        key: record.key.as_deref().map(Payload::of),
        value: record.value.as_deref().map(Payload::of),
        headers: record
            .headers
            .iter()
            .map(|h| HeaderItem {
                name: h.name.clone(),
                value: h.value.as_deref().map(Payload::of),
            })
            .collect(),
    }))
}
