//! The JSON API of the automation rules (`docs/automation.md`, "API"): the active rule set
//! with each rule's state, its versions, saving a new version, a dry run, and pausing or
//! resuming a transient rule.
//!
//! | route | who | answer |
//! |---|---|---|
//! | `GET /api/v1/automation/rules` | viewer | the active version (`version`, `source`, ...; `null` before any), the rules in order with `state`, `tiers` (live dead letters per tier, `null` = unsorted) |
//! | `PUT /api/v1/automation/rules` | `manage_rules` | body `{"source", "reason"}`: 201 the new version; 422 with the rule set's message |
//! | `GET /api/v1/automation/versions` | viewer | `{"items": [version, ...]}` newest first (`limit` ≤ 500, default 50) |
//! | `GET /api/v1/automation/versions/{n}` | viewer | the version with `source` and `diff` against n-1 |
//! | `POST /api/v1/automation/dry-run` | `manage_rules` | body `{"source"}`: what it would do to the stored dead letters (nothing written) |
//! | `POST /api/v1/automation/rules/{name}/pause` | `manage_rules` | body `{"reason"}` (optional): the rule's state |
//! | `POST /api/v1/automation/rules/{name}/resume` | `manage_rules` | the same |
//!
//! Refusals, as JSON `{"error"}`: 400 not JSON, 403 without `manage_rules` (audited
//! `denied`), 404 no such version or rule, 422 a rule set that does not compile, a reason
//! `[reasons]` refuses, or pausing a rule that is not transient.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redrive_core::automation::dry_run::{DryRun, MAX_DRY_RUN_ROWS};
use redrive_core::automation::view::{AutomationOverview, RuleState, VersionInfo, VersionText};
use redrive_core::automation::RuleSet;
use redrive_core::permission::Permission;
use redrive_core::store::{version_info, RuleSetOrigin};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{rfc3339, AppState};
use crate::api_actions::parse_body;
use crate::api_error::ApiError;
use crate::auth::{require_permission, Caller};

/// Versions listed when no `limit` is given.
pub const DEFAULT_VERSIONS: u32 = 50;

/// The routes of this module, state applied.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/automation/rules", get(get_rules).put(put_rules))
        .route("/api/v1/automation/versions", get(list_versions))
        .route("/api/v1/automation/versions/{n}", get(get_version))
        .route("/api/v1/automation/dry-run", post(dry_run))
        .route("/api/v1/automation/rules/{name}/pause", post(pause))
        .route("/api/v1/automation/rules/{name}/resume", post(resume))
        .with_state(state)
}

/// `PUT /api/v1/automation/rules` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveBody {
    /// The rule set as TOML text (`docs/automation.md`, "Rules").
    pub source: String,
    #[serde(default)]
    pub reason: Option<String>,
}

/// `POST /api/v1/automation/dry-run` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DryRunBody {
    pub source: String,
}

/// Pause and resume body.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseBody {
    #[serde(default)]
    pub reason: Option<String>,
}

/// A version as listed: [`VersionInfo`] plus `created_at` (RFC 3339 UTC).
fn version_item(v: &VersionInfo) -> Value {
    let mut item = serde_json::to_value(v).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut item {
        m.insert(
            "created_at".into(),
            rfc3339(v.created_at_ms).map_or(Value::Null, Value::String),
        );
    }
    item
}

/// `GET /api/v1/automation/rules` answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RulesAnswer {
    /// The active version (`null` before any), with `source`.
    pub version: Option<Value>,
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub overview: AutomationOverview,
}

/// `GET /api/v1/automation/rules` (any signed-in caller).
pub async fn get_rules(
    State(state): State<AppState>,
    Caller(_actor): Caller,
) -> Result<Json<RulesAnswer>, ApiError> {
    let overview = state
        .store
        .automation_overview()
        .await
        .map_err(|e| state.action_failed("automation_overview", e))?;
    let version = overview.active.as_ref().map(|v| {
        let mut item = version_item(v);
        if let Value::Object(m) = &mut item {
            m.insert("source".into(), Value::String(overview.source.clone()));
        }
        item
    });
    Ok(Json(RulesAnswer { version, overview }))
}

/// `PUT /api/v1/automation/rules` (`manage_rules`): 201 the new version.
pub async fn put_rules(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    require_permission(
        &state.auth,
        &actor,
        Permission::ManageRules,
        "rule_set_save",
    )
    .await?;
    let b: SaveBody = parse_body(&body)?;
    state
        .approval
        .check_reason(b.reason.as_deref())
        .map_err(ApiError::Unprocessable)?;
    let v = state
        .store
        .save_rule_set(&actor, RuleSetOrigin::Api, &b.source, b.reason.as_deref())
        .await
        .map_err(|e| state.action_failed("save_rule_set", e))?;
    let mut item = version_item(&version_info(&v));
    if let Value::Object(m) = &mut item {
        m.insert("source".into(), Value::String(v.source.clone()));
    }
    Ok((StatusCode::CREATED, Json(item)).into_response())
}

/// `GET /api/v1/automation/versions` (any signed-in caller): newest first.
pub async fn list_versions(
    State(state): State<AppState>,
    Caller(_actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw.as_deref().unwrap_or(""))
        .map_err(|_| ApiError::BadRequest("the query string is not valid URL encoding".into()))?;
    let mut limit = DEFAULT_VERSIONS;
    for (k, v) in pairs {
        match k.as_str() {
            "limit" => {
                limit = v
                    .trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=500).contains(n))
                    .ok_or_else(|| {
                        ApiError::BadRequest("`limit` must be a whole number from 1 to 500".into())
                    })?
            }
            other => {
                return Err(ApiError::BadRequest(format!(
                    "unknown parameter `{other}`; versions take `limit`"
                )))
            }
        }
    }
    let items = state
        .store
        .rule_set_versions(limit)
        .await
        .map_err(|e| state.action_failed("rule_set_versions", e))?;
    let items: Vec<Value> = items
        .iter()
        .map(|v| version_item(&version_info(v)))
        .collect();
    Ok(Json(serde_json::json!({ "items": items })))
}

/// `GET /api/v1/automation/versions/{n}` (any signed-in caller).
pub async fn get_version(
    State(state): State<AppState>,
    Caller(_actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let raw = path
        .map(|Path(s)| s)
        .map_err(|_| ApiError::BadRequest("the version is not valid".into()))?;
    let n: i64 = raw.trim().parse().map_err(|_| {
        ApiError::BadRequest(format!(
            "`{raw}` is not a rule set version: versions are whole numbers"
        ))
    })?;
    let VersionText { info, source, diff } = state
        .store
        .rule_set_version_text(n)
        .await
        .map_err(|e| state.action_failed("rule_set_version_text", e))?
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "no rule set version {n} (list them at /api/v1/automation/versions)"
            ))
        })?;
    let mut item = version_item(&info);
    if let Value::Object(m) = &mut item {
        m.insert("source".into(), Value::String(source));
        m.insert(
            "diff".into(),
            serde_json::to_value(diff).unwrap_or(Value::Null),
        );
    }
    Ok(Json(item))
}

/// `POST /api/v1/automation/dry-run` (`manage_rules`): nothing is written.
pub async fn dry_run(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Json<DryRun>, ApiError> {
    require_permission(
        &state.auth,
        &actor,
        Permission::ManageRules,
        "rule_set_dry_run",
    )
    .await?;
    let b: DryRunBody = parse_body(&body)?;
    let set = RuleSet::parse_toml(&b.source).map_err(|e| ApiError::Unprocessable(e.0))?;
    let run = state
        .store
        .dry_run_rule_set(
            &set,
            chrono::Utc::now().timestamp_millis(),
            MAX_DRY_RUN_ROWS,
        )
        .await
        .map_err(|e| state.action_failed("dry_run_rule_set", e))?;
    Ok(Json(run))
}

async fn set_paused(
    state: AppState,
    actor: redrive_core::actions::Actor,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
    paused: bool,
) -> Result<Json<RuleState>, ApiError> {
    let action = if paused { "rule_pause" } else { "rule_resume" };
    require_permission(&state.auth, &actor, Permission::ManageRules, action).await?;
    let name = path
        .map(|Path(s)| s)
        .map_err(|_| ApiError::BadRequest("the rule name is not valid".into()))?;
    let b: PauseBody = if body.iter().all(u8::is_ascii_whitespace) {
        PauseBody::default()
    } else {
        parse_body(&body)?
    };
    let s = state
        .store
        .set_rule_paused(&actor, name.trim(), paused, b.reason.as_deref())
        .await
        .map_err(|e| state.action_failed("set_rule_paused", e))?;
    Ok(Json(s))
}

/// `POST /api/v1/automation/rules/{name}/pause` (`manage_rules`).
pub async fn pause(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<RuleState>, ApiError> {
    set_paused(state, actor, path, body, true).await
}

/// `POST /api/v1/automation/rules/{name}/resume` (`manage_rules`).
pub async fn resume(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<RuleState>, ApiError> {
    set_paused(state, actor, path, body, false).await
}
