//! The JSON API for triage labels and notes, on one dead letter, on one error group, and a
//! label added to or removed from many dead letters at once.
//!
//! | route | role | answer |
//! |---|---|---|
//! | `GET /api/v1/dead-letters/{id}/labels` | viewer | `{"fingerprint", "labels", "note", "group": {"labels", "note"}}` |
//! | `POST /api/v1/dead-letters/{id}/labels` `{"label"}` | operator | `{"changed", "labels", "note"}` |
//! | `POST /api/v1/dead-letters/{id}/labels/remove` `{"label"}` | operator | the same |
//! | `PUT /api/v1/dead-letters/{id}/note` `{"note"}` (`""` clears) | operator | the same |
//! | `GET /api/v1/error-groups/{fingerprint}/labels` | viewer | `{"labels", "note"}` |
//! | `POST /api/v1/error-groups/{fingerprint}/labels`, `.../labels/remove`, `PUT .../note` | operator | `{"changed", "labels", "note"}` |
//! | `POST /api/v1/dead-letters/labels` `{"ids"} or {"filter"}` + `{"add"} or {"remove"}` | operator | `{"changed", "skipped"}` |
//!
//! A label is `{"label": "...", "added_at", "added_at_ms", "added_by"}`, a note `{"text",
//! "updated_at", "updated_at_ms", "updated_by"}` or `null`. Refusals are JSON `{"error"}`:
//! 400 for a body that is not JSON or a bad id, 422 for a label or note the rules refuse
//! (`docs/limits.md`), 404 for no such dead letter or group, 403 for a viewer (audited
//! `denied`).

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use redrive_core::labels::{Annotations, LabelInfo, LabelOp, NoteInfo, Target};
use redrive_core::permission::Permission;
use redrive_core::store::there_is_no;
use serde::{Deserialize, Serialize};

use crate::api::{rfc3339, AppState};
use crate::api_actions::{confirm_all, parse_body, selection};
use crate::api_error::ApiError;
use crate::auth::{require_permission, Caller};

/// The routes of this module, state applied.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/api/v1/dead-letters/{id}/labels",
            get(get_record).post(add_record_label),
        )
        .route(
            "/api/v1/dead-letters/{id}/labels/remove",
            post(remove_record_label),
        )
        .route("/api/v1/dead-letters/{id}/note", put(set_record_note))
        .route(
            "/api/v1/error-groups/{fingerprint}/labels",
            get(get_group).post(add_group_label),
        )
        .route(
            "/api/v1/error-groups/{fingerprint}/labels/remove",
            post(remove_group_label),
        )
        .route(
            "/api/v1/error-groups/{fingerprint}/note",
            put(set_group_note),
        )
        .route("/api/v1/dead-letters/labels", post(bulk_label))
        .with_state(state)
}

// ---------------------------------------------------------------------------------------------
// DTOs

/// One label.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LabelItem {
    pub label: String,
    /// RFC 3339 UTC.
    pub added_at: Option<String>,
    pub added_at_ms: i64,
    pub added_by: String,
}

/// A note.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NoteItem {
    pub text: String,
    /// RFC 3339 UTC.
    pub updated_at: Option<String>,
    pub updated_at_ms: i64,
    pub updated_by: String,
}

/// The labels and note of one dead letter or group; `changed` after a change request (false
/// when it changed nothing: the label was already there, or the note already said that).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AnnotationsItem {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<bool>,
    pub labels: Vec<LabelItem>,
    pub note: Option<NoteItem>,
}

/// A dead letter's triage, with its error group's.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TriageItem {
    pub fingerprint: String,
    pub labels: Vec<LabelItem>,
    pub note: Option<NoteItem>,
    pub group: AnnotationsItem,
}

/// Answer of the bulk label change.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LabelOutcomeItem {
    /// Dead letters that got (or lost) the label.
    pub changed: i64,
    /// Selected but unchanged: they already had it (or lacked it), or have the most labels.
    pub skipped: i64,
}

fn label_item(l: LabelInfo) -> LabelItem {
    LabelItem {
        added_at: rfc3339(l.added_at_ms),
        label: l.label,
        added_at_ms: l.added_at_ms,
        added_by: l.added_by,
    }
}

fn note_item(n: NoteInfo) -> NoteItem {
    NoteItem {
        updated_at: rfc3339(n.updated_at_ms),
        text: n.text,
        updated_at_ms: n.updated_at_ms,
        updated_by: n.updated_by,
    }
}

fn annotations_item(a: Annotations, changed: Option<bool>) -> AnnotationsItem {
    AnnotationsItem {
        changed,
        labels: a.labels.into_iter().map(label_item).collect(),
        note: a.note.map(note_item),
    }
}

// ---------------------------------------------------------------------------------------------
// Bodies and paths

/// Body of the label routes.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelBody {
    pub label: String,
}

/// Body of the note routes.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteBody {
    /// The whole note; empty clears it.
    pub note: String,
}

/// Body of `POST /api/v1/dead-letters/labels`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkLabelBody {
    pub ids: Option<Vec<i64>>,
    #[schema(value_type = Option<Object>)]
    pub filter: Option<serde_json::Map<String, serde_json::Value>>,
    /// The label to add.
    pub add: Option<String>,
    /// The label to remove.
    pub remove: Option<String>,
    /// With an empty filter: the number of dead letters it matches now
    /// (`api_actions`' module doc, "An empty filter").
    pub confirm_all: Option<i64>,
}

fn dead_letter(path: Result<Path<String>, PathRejection>) -> Result<Target, ApiError> {
    let raw = path
        .map(|Path(s)| s)
        .map_err(|_| ApiError::BadRequest("the dead-letter id is not valid".into()))?;
    raw.trim()
        .parse::<i64>()
        .map(Target::DeadLetter)
        .map_err(|_| {
            ApiError::BadRequest(format!(
                "`{raw}` is not a dead-letter id: ids are whole numbers"
            ))
        })
}

fn group(path: Result<Path<String>, PathRejection>) -> Result<Target, ApiError> {
    let fp = path
        .map(|Path(s)| s)
        .map_err(|_| ApiError::BadRequest("the fingerprint is not valid".into()))?;
    Ok(Target::Group(fp.trim().to_string()))
}

// ---------------------------------------------------------------------------------------------
// Handlers

async fn read(state: &AppState, target: &Target) -> Result<Annotations, ApiError> {
    state
        .store
        .annotations(target)
        .await
        .map_err(|e| state.action_failed("annotations", e))
}

async fn label(
    state: AppState,
    actor: redrive_core::actions::Actor,
    target: Target,
    body: Bytes,
    op: LabelOp,
) -> Result<Json<AnnotationsItem>, ApiError> {
    require_permission(&state.auth, &actor, Permission::Annotate, op.audit_action()).await?;
    let b: LabelBody = parse_body(&body)?;
    let changed = state
        .store
        .change_label(&actor, &target, &b.label, op)
        .await
        .map_err(|e| state.action_failed("change_label", e))?;
    let now = read(&state, &target).await?;
    Ok(Json(annotations_item(now, Some(changed))))
}

async fn note(
    state: AppState,
    actor: redrive_core::actions::Actor,
    target: Target,
    body: Bytes,
) -> Result<Json<AnnotationsItem>, ApiError> {
    require_permission(&state.auth, &actor, Permission::Annotate, "note_set").await?;
    let b: NoteBody = parse_body(&body)?;
    let before = read(&state, &target).await?.note.map(|n| n.text);
    let after = state
        .store
        .set_note(&actor, &target, &b.note)
        .await
        .map_err(|e| state.action_failed("set_note", e))?;
    let changed = before != after.as_ref().map(|n| n.text.clone());
    let now = read(&state, &target).await?;
    Ok(Json(annotations_item(now, Some(changed))))
}

/// `GET /api/v1/dead-letters/{id}/labels` (viewer): 404 if there is no such dead letter.
pub async fn get_record(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<TriageItem>, ApiError> {
    let Target::DeadLetter(id) = dead_letter(path)? else {
        return Err(ApiError::BadRequest("not a dead-letter id".into()));
    };
    state
        .store
        .check_ids_in_scope(&actor, &[id])
        .await
        .map_err(|e| state.action_failed("triage", e))?;
    let t = state
        .store
        .triage(id)
        .await
        .map_err(|e| state.action_failed("triage", e))?
        .ok_or_else(|| ApiError::NotFound(there_is_no(&format!("dead letter {id}"))))?;
    let record = annotations_item(t.record, None);
    Ok(Json(TriageItem {
        fingerprint: t.fingerprint,
        labels: record.labels,
        note: record.note,
        group: annotations_item(t.group, None),
    }))
}

/// `POST /api/v1/dead-letters/{id}/labels` `{"label"}` (operator).
pub async fn add_record_label(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<AnnotationsItem>, ApiError> {
    label(state, actor, dead_letter(path)?, body, LabelOp::Add).await
}

/// `POST /api/v1/dead-letters/{id}/labels/remove` `{"label"}` (operator).
pub async fn remove_record_label(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<AnnotationsItem>, ApiError> {
    label(state, actor, dead_letter(path)?, body, LabelOp::Remove).await
}

/// `PUT /api/v1/dead-letters/{id}/note` `{"note"}` (operator).
pub async fn set_record_note(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<AnnotationsItem>, ApiError> {
    note(state, actor, dead_letter(path)?, body).await
}

/// `GET /api/v1/error-groups/{fingerprint}/labels` (viewer); empty for a group without triage.
pub async fn get_group(
    State(state): State<AppState>,
    Caller(_actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<AnnotationsItem>, ApiError> {
    let target = group(path)?;
    Ok(Json(annotations_item(read(&state, &target).await?, None)))
}

/// `POST /api/v1/error-groups/{fingerprint}/labels` `{"label"}` (operator).
pub async fn add_group_label(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<AnnotationsItem>, ApiError> {
    label(state, actor, group(path)?, body, LabelOp::Add).await
}

/// `POST /api/v1/error-groups/{fingerprint}/labels/remove` `{"label"}` (operator).
pub async fn remove_group_label(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<AnnotationsItem>, ApiError> {
    label(state, actor, group(path)?, body, LabelOp::Remove).await
}

/// `PUT /api/v1/error-groups/{fingerprint}/note` `{"note"}` (operator).
pub async fn set_group_note(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<AnnotationsItem>, ApiError> {
    note(state, actor, group(path)?, body).await
}

/// `POST /api/v1/dead-letters/labels` (operator): `{"ids": [...]}` or `{"filter": {...}}`
/// with exactly one of `"add": "label"` and `"remove": "label"`.
pub async fn bulk_label(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Json<LabelOutcomeItem>, ApiError> {
    let b: BulkLabelBody = parse_body(&body)?;
    let (op, label) = match (b.add, b.remove) {
        (Some(l), None) => (LabelOp::Add, l),
        (None, Some(l)) => (LabelOp::Remove, l),
        _ => {
            return Err(ApiError::Unprocessable(
                "give exactly one of `add` and `remove` (the label to add or remove)".into(),
            ))
        }
    };
    require_permission(&state.auth, &actor, Permission::Annotate, op.audit_action()).await?;
    let sel = selection(b.ids, b.filter)?;
    confirm_all(&state, &sel, b.confirm_all, "label change").await?;
    let o = state
        .store
        .label_selection(&actor, &sel, &label, op)
        .await
        .map_err(|e| state.action_failed("label_selection", e))?;
    Ok(Json(LabelOutcomeItem {
        changed: o.changed,
        skipped: o.skipped,
    }))
}
