//! Delete and restore: `POST /api/v1/dead-letters/delete` and `/restore`, their body, answer
//! and approval gate.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use redrive_core::actions::{ReplayRequest, Selection};
use redrive_core::approval::ActionKind;
use redrive_core::model::Status;
use redrive_core::permission::Permission;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::request::{confirm_all, parse_body, selection};
use crate::api::AppState;
use crate::auth::{require_permission, ApiError, Caller};

/// Body of `POST /api/v1/dead-letters/delete` and `/restore`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeBody {
    pub ids: Option<Vec<i64>>,
    #[schema(value_type = Option<Object>)]
    pub filter: Option<serde_json::Map<String, Value>>,
    pub reason: Option<String>,
    /// With an empty filter: the number of dead letters it matches now (see the module doc).
    pub confirm_all: Option<i64>,
}

/// Answer of delete and restore.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Affected {
    pub affected: u64,
}

/// `POST /api/v1/dead-letters/delete` (operator).
pub async fn delete(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    require_permission(&state.auth, &actor, Permission::Delete, "delete").await?;
    let b: ChangeBody = parse_body(&body)?;
    let sel = selection(b.ids, b.filter)?;
    confirm_all(&state, &sel, b.confirm_all, "delete").await?;
    if let Some(pending) =
        approval_gate(&state, &actor, ActionKind::Delete, &sel, &b.reason).await?
    {
        return Ok(pending);
    }
    let n = state
        .store
        .delete(&actor, &sel, b.reason.as_deref())
        .await
        .map_err(|e| state.action_failed("delete", e))?;
    Ok(Json(Affected { affected: n }).into_response())
}

/// `POST /api/v1/dead-letters/restore` (operator).
pub async fn restore(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    require_permission(&state.auth, &actor, Permission::Delete, "restore").await?;
    let b: ChangeBody = parse_body(&body)?;
    let sel = selection(b.ids, b.filter)?;
    confirm_all(&state, &sel, b.confirm_all, "restore").await?;
    check_restorable(&sel)?;
    if let Some(pending) =
        approval_gate(&state, &actor, ActionKind::Restore, &sel, &b.reason).await?
    {
        return Ok(pending);
    }
    let n = state
        .store
        .restore(&actor, &sel, b.reason.as_deref())
        .await
        .map_err(|e| state.action_failed("restore", e))?;
    Ok(Json(Affected { affected: n }).into_response())
}

/// A restore over a filter must select deleted dead letters: a filter leaves them out unless
/// its `status` is `deleted`, so any other filter restores nothing, and "restored 0" after a
/// confirmation reads like success (a fresh user's `redrive restore --tier poison --yes`).
/// 422, nothing done.
fn check_restorable(sel: &Selection) -> Result<(), ApiError> {
    match sel {
        Selection::Filter(f) if f.status != Some(Status::Deleted) => Err(ApiError::Unprocessable(
            "a restore brings back deleted dead letters, and a filter leaves them out \
                 unless it has \"status\": \"deleted\": add it (with the CLI, --status \
                 deleted); nothing was restored"
                .into(),
        )),
        _ => Ok(()),
    }
}

/// [`crate::api_approvals::gate`] for a delete or restore (`kind`).
async fn approval_gate(
    state: &AppState,
    actor: &redrive_core::actions::Actor,
    kind: ActionKind,
    sel: &Selection,
    reason: &Option<String>,
) -> Result<Option<Response>, ApiError> {
    let req = ReplayRequest {
        selection: sel.clone(),
        target_topic: None,
        rate_per_sec: None,
        reason: reason.clone(),
        options: Default::default(),
    };
    crate::api_approvals::gate(state, actor, kind, &req).await
}
