//! Retention and archive API (`docs/retention.md`).
//!
//! | route | role | answer |
//! |---|---|---|
//! | `GET /api/v1/retention` | viewer | `{"paused_topics": [...], "runs": [...]}`: backpressure now, the last 50 purge/archive runs |
//! | `POST /api/v1/archives` | operator | body `{"filter": {...}}` (the list's filter names); 201 `{"run_id", "records", "manifest"}` |
//!
//! An archive needs `[retention.archive]`; without it the answer is 409. It is audited
//! (`archive`), and its manifest location is what `redrive archive restore` takes.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redrive_core::actions::NewAuditEntry;
use redrive_core::archive::{ArchiveError, ArchiveLocation, ArchiveTarget};
use redrive_core::permission::Permission;
use redrive_core::retention::{Backpressure, PausedTopic, RetentionConfig, RetentionStatus};
use redrive_core::store::RetentionRun;
use serde::{Deserialize, Serialize};

use crate::api::AppState;
use crate::api_actions::filter_from_json;
use crate::api_error::ApiError;
use crate::auth::{require_permission, Caller};

/// Retention's shared state in the server.
#[derive(Clone)]
pub struct RetentionHealth {
    pub config: RetentionConfig,
    pub backpressure: Arc<Backpressure>,
    pub status: Arc<RetentionStatus>,
}

/// The `retention` part of `/readyz`: which DLQ topics are paused at a limit, and why.
#[derive(Debug, Serialize)]
pub struct RetentionReadiness {
    pub paused_topics: Vec<PausedTopic>,
}

impl RetentionHealth {
    pub fn readiness(&self) -> RetentionReadiness {
        RetentionReadiness {
            paused_topics: self.backpressure.paused(),
        }
    }
}

/// The routes of this module, state applied.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/retention", get(overview))
        .route("/api/v1/archives", post(create))
        .with_state(state)
}

/// Answer of `GET /api/v1/retention`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RetentionOverview {
    #[schema(value_type = Vec<Object>)]
    pub paused_topics: Vec<PausedTopic>,
    #[schema(value_type = Vec<Object>)]
    pub runs: Vec<RetentionRun>,
}

/// `GET /api/v1/retention` (viewer).
pub async fn overview(
    State(state): State<AppState>,
    Caller(_actor): Caller,
) -> Result<Json<RetentionOverview>, ApiError> {
    let runs = state.store.retention_runs(50).await.map_err(|e| {
        state.telemetry.store_error("retention_runs", &e);
        ApiError::Unavailable
    })?;
    Ok(Json(RetentionOverview {
        paused_topics: state.retention.backpressure.paused(),
        runs,
    }))
}

/// `POST /api/v1/archives` body: the list's filter parameters as an object.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveBody {
    #[schema(value_type = Object)]
    pub filter: serde_json::Map<String, serde_json::Value>,
}

/// `POST /api/v1/archives` (operator): archives every dead letter matching the filter.
pub async fn create(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    require_permission(&state.auth, &actor, Permission::Delete, "archive").await?;
    let b: ArchiveBody = serde_json::from_slice(&body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the body is not valid ({e}); send {{\"filter\": {{\"dlq_topic\": \"orders.DLT\"}}}}"
        ))
    })?;
    let mut filter = filter_from_json(&b.filter)?;
    state
        .store
        .limit_to_scope(&actor, &mut filter)
        .await
        .map_err(|e| {
            state.telemetry.store_error("archive", &e);
            ApiError::Unavailable
        })?;
    let Some(config) = state.retention.config.archive.clone() else {
        return Err(ApiError::Conflict(
            "no archive is configured: set [retention.archive] location in redrive.toml".into(),
        ));
    };
    let target = ArchiveLocation::parse(&config.location)
        .and_then(|loc| ArchiveTarget::open(&loc, &config))
        .map_err(|e| ApiError::Conflict(format!("the archive cannot be opened: {e}")))?;
    let audit = NewAuditEntry::by(&actor, "archive", "");
    match redrive_core::archive::export::archive_filter(&state.store, &target, &filter, audit).await
    {
        Ok(report) => Ok((StatusCode::CREATED, Json(report)).into_response()),
        Err(ArchiveError::Store(e)) => {
            state.telemetry.store_error("archive", &e);
            Err(ApiError::Unavailable)
        }
        Err(e) => {
            tracing::warn!(error = %e, "on-demand archive failed");
            Err(ApiError::BadGateway(format!("archiving failed: {e}")))
        }
    }
}
