//! The JSON API for users, one's own account and sessions, and API tokens (issue 10, "Users
//! and tokens, managed"). The operations are `redrive_core::accounts`'; this is the surface.
//!
//! | route | who | answer |
//! |---|---|---|
//! | `GET /api/v1/users` | `manage_users` | `{"items": [user, ...]}` by name |
//! | `POST /api/v1/users` `{"name", "role", "password"}` | `manage_users` | 201 user |
//! | `POST /api/v1/users/{name}/disable` | `manage_users` | user (sessions ended, tokens revoked) |
//! | `POST /api/v1/users/{name}/enable` | `manage_users` | user |
//! | `POST /api/v1/users/{name}/role` `{"role"}` | `manage_users` | user |
//! | `POST /api/v1/users/{name}/password` `{"password"}` | `manage_users` | `{"sessions_ended"}` |
//! | `POST /api/v1/account/password` `{"current_password", "new_password"}` | self | `{"sessions_ended"}` (every other session) |
//! | `GET /api/v1/sessions` | self | `{"items": [session, ...]}`, `"current": true` on the asking one |
//! | `POST /api/v1/sessions/{handle}/end` | self | `{"ended": 1}` |
//! | `POST /api/v1/sessions/end-others` | self | `{"ended": n}` |
//! | `GET /api/v1/tokens` | self; `?user=NAME` or `?all=true`: `manage_users` | `{"items": [token, ...]}` newest first |
//! | `POST /api/v1/tokens` `{"name", "expires_in", "scope", "user"}` | self; another `user`: `manage_users` | 201 token with `"token"` (shown once) |
//! | `POST /api/v1/tokens/{id}/revoke`, `DELETE /api/v1/tokens/{id}` | self (own token); another's: `manage_users` | token |
//!
//! "self" means any signed-in user acting on their own account, but never a `read_only` API
//! token (403, audited `denied`: it changes nothing at all). A user is `{"name", "role",
//! "disabled", "created_at", "created_at_ms"}`; a session `{"handle", "user", "created_at",
//! "last_seen_at", "ip", "user_agent", "current"}` (times also as `_ms`); a token `{"id",
//! "user", "name", "scope", "created_at", "last_used_at", "expires_at", "revoked_at",
//! "expired"}` (times also as `_ms`, `null` when none). `expires_in` is `30d`, `12h`, `90m`,
//! a date `2027-01-31`, an RFC 3339 time, or `never` (absent = never); `scope` is `role` (the
//! user's current role, the default) or `read_only`. Refusals are `{"error"}`: 400 (not
//! JSON), 422 (a bad name, role, password, expiry, scope), 403 (no permission, a read-only
//! token, a wrong current password), 404, 409 (a taken name, acting on oneself), 503.

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use redrive_core::accounts::{self, AccountError};
use redrive_core::actions::{Actor, NewAuditEntry};
use redrive_core::auth::{ApiToken, SessionListing, User};
use redrive_core::permission::Permission;
use serde::{Deserialize, Serialize};

use crate::api::{rfc3339, AppState};
use crate::api_actions::parse_body;
use crate::api_error::ApiError;
use crate::auth::{now_ms, require_not_read_only, require_permission, Caller, SessionHandle};

/// The routes of this module, state applied.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/users", get(list_users).post(create_user))
        .route("/api/v1/users/{name}/disable", post(disable_user))
        .route("/api/v1/users/{name}/enable", post(enable_user))
        .route("/api/v1/users/{name}/role", post(set_role))
        .route("/api/v1/users/{name}/password", post(reset_password))
        .route("/api/v1/account/password", post(change_password))
        .route("/api/v1/sessions", get(list_sessions))
        .route("/api/v1/sessions/end-others", post(end_other_sessions))
        .route("/api/v1/sessions/{handle}/end", post(end_session))
        .route("/api/v1/tokens", get(list_tokens).post(create_token))
        .route("/api/v1/tokens/{id}", axum::routing::delete(revoke_token))
        .route("/api/v1/tokens/{id}/revoke", post(revoke_token))
        .with_state(state)
}

// ---------------------------------------------------------------------------------------------
// DTOs

/// A user.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct UserItem {
    pub name: String,
    pub role: String,
    pub disabled: bool,
    /// RFC 3339 UTC.
    pub created_at: Option<String>,
    pub created_at_ms: i64,
}

/// A browser session.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SessionItem {
    /// Names the session in `POST /api/v1/sessions/{handle}/end`.
    pub handle: String,
    pub user: String,
    pub created_at: Option<String>,
    pub created_at_ms: i64,
    pub last_seen_at: Option<String>,
    pub last_seen_ms: i64,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    /// True for the session this request came with.
    pub current: bool,
}

/// An API token (never the token itself, except `token` right after creation).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TokenItem {
    pub id: i64,
    pub user: String,
    pub name: Option<String>,
    /// `role` or `read_only`.
    pub scope: &'static str,
    pub created_at: Option<String>,
    pub created_at_ms: i64,
    pub last_used_at: Option<String>,
    pub last_used_ms: Option<i64>,
    pub expires_at: Option<String>,
    pub expires_at_ms: Option<i64>,
    pub revoked_at: Option<String>,
    pub revoked_at_ms: Option<i64>,
    /// Past its expiry now (refused with 401).
    pub expired: bool,
    /// The token, only in the answer that created it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// A list.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Items<T> {
    pub items: Vec<T>,
}

/// How many sessions an action ended.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Ended {
    pub ended: u64,
}

/// How many sessions a password change or reset ended.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PasswordSet {
    pub sessions_ended: u64,
}

fn user_item(u: User) -> UserItem {
    UserItem {
        created_at: rfc3339(u.created_at_ms),
        name: u.name,
        role: u.role.as_str().to_string(),
        disabled: u.disabled,
        created_at_ms: u.created_at_ms,
    }
}

fn session_item(s: SessionListing) -> SessionItem {
    SessionItem {
        created_at: rfc3339(s.created_at_ms),
        last_seen_at: rfc3339(s.last_seen_ms),
        handle: s.handle,
        user: s.user,
        created_at_ms: s.created_at_ms,
        last_seen_ms: s.last_seen_ms,
        ip: s.ip,
        user_agent: s.user_agent,
        current: s.current,
    }
}

fn token_item(t: ApiToken, now: i64, token: Option<String>) -> TokenItem {
    TokenItem {
        scope: t.scope.as_str(),
        created_at: rfc3339(t.created_at_ms),
        last_used_at: t.last_used_ms.and_then(rfc3339),
        expires_at: t.expires_at_ms.and_then(rfc3339),
        revoked_at: t.revoked_at_ms.and_then(rfc3339),
        expired: t.expires_at_ms.is_some_and(|at| at <= now),
        id: t.id,
        user: t.user,
        name: t.name,
        created_at_ms: t.created_at_ms,
        last_used_ms: t.last_used_ms,
        expires_at_ms: t.expires_at_ms,
        revoked_at_ms: t.revoked_at_ms,
        token,
    }
}

// ---------------------------------------------------------------------------------------------
// Bodies

/// Body of `POST /api/v1/users`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewUserBody {
    pub name: String,
    pub role: String,
    pub password: String,
}

/// Body of `POST /api/v1/users/{name}/role`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleBody {
    pub role: String,
}

/// Body of `POST /api/v1/users/{name}/password`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordBody {
    pub password: String,
}

/// Body of `POST /api/v1/account/password`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangePasswordBody {
    pub current_password: String,
    pub new_password: String,
}

/// Body of `POST /api/v1/tokens` (every field optional).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTokenBody {
    /// A label.
    pub name: Option<String>,
    /// `30d`, `2027-01-31`, `never` ...; absent = never.
    pub expires_in: Option<String>,
    /// `role` (default) or `read_only`.
    pub scope: Option<String>,
    /// Whose token; absent = the caller's own.
    pub user: Option<String>,
}

/// Query of `GET /api/v1/tokens`.
#[derive(Debug, Default, Deserialize)]
pub struct TokensQuery {
    pub user: Option<String>,
    pub all: Option<bool>,
}

// ---------------------------------------------------------------------------------------------
// Errors

fn failed(state: &AppState, e: AccountError) -> ApiError {
    match e {
        AccountError::Invalid(m) => ApiError::Unprocessable(m),
        AccountError::NotFound(m) => ApiError::NotFound(m),
        AccountError::Conflict(m) => ApiError::Conflict(m),
        AccountError::WrongPassword => ApiError::Forbidden("the current password is wrong".into()),
        AccountError::Store(e) => state.action_failed("accounts", e),
    }
}

fn by(actor: &Actor) -> NewAuditEntry {
    NewAuditEntry::by(actor, "", "")
}

fn name_of(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    path.map(|Path(s)| s)
        .map_err(|_| ApiError::BadRequest("the user name in the path is not valid".into()))
}

async fn user_now(state: &AppState, name: &str) -> Result<UserItem, ApiError> {
    state
        .store
        .user(name)
        .await
        .map_err(|e| state.action_failed("accounts", e))?
        .map(user_item)
        .ok_or_else(|| ApiError::NotFound(format!("there is no user `{name}`")))
}

// ---------------------------------------------------------------------------------------------
// Users (manage_users)

async fn list_users(
    State(state): State<AppState>,
    Caller(actor): Caller,
) -> Result<Json<Items<UserItem>>, ApiError> {
    require_permission(&state.auth, &actor, Permission::ManageUsers, "user_list").await?;
    let users = state
        .store
        .users()
        .await
        .map_err(|e| state.action_failed("accounts", e))?;
    Ok(Json(Items {
        items: users.into_iter().map(user_item).collect(),
    }))
}

async fn create_user(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    require_permission(&state.auth, &actor, Permission::ManageUsers, "user_add").await?;
    let b: NewUserBody = parse_body(&body)?;
    let user = accounts::create_user(
        &state.store,
        &by(&actor),
        &b.name,
        &b.role,
        &b.password,
        now_ms(),
    )
    .await
    .map_err(|e| failed(&state, e))?;
    Ok((StatusCode::CREATED, Json(user_item(user))).into_response())
}

async fn set_disabled(
    state: AppState,
    actor: Actor,
    path: Result<Path<String>, PathRejection>,
    disabled: bool,
) -> Result<Json<UserItem>, ApiError> {
    let action = if disabled {
        "user_disable"
    } else {
        "user_enable"
    };
    require_permission(&state.auth, &actor, Permission::ManageUsers, action).await?;
    let name = name_of(path)?;
    accounts::set_disabled(
        &state.store,
        &by(&actor),
        Some(&actor.user),
        &name,
        disabled,
        now_ms(),
    )
    .await
    .map_err(|e| failed(&state, e))?;
    Ok(Json(user_now(&state, &name).await?))
}

async fn disable_user(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<UserItem>, ApiError> {
    set_disabled(state, actor, path, true).await
}

async fn enable_user(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<UserItem>, ApiError> {
    set_disabled(state, actor, path, false).await
}

async fn set_role(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<UserItem>, ApiError> {
    require_permission(
        &state.auth,
        &actor,
        Permission::ManageUsers,
        "user_role_set",
    )
    .await?;
    let name = name_of(path)?;
    let b: RoleBody = parse_body(&body)?;
    accounts::set_role(
        &state.store,
        &by(&actor),
        Some(&actor.user),
        &name,
        &b.role,
        now_ms(),
    )
    .await
    .map_err(|e| failed(&state, e))?;
    Ok(Json(user_now(&state, &name).await?))
}

async fn reset_password(
    State(state): State<AppState>,
    Caller(actor): Caller,
    session: Option<Extension<SessionHandle>>,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<PasswordSet>, ApiError> {
    require_permission(
        &state.auth,
        &actor,
        Permission::ManageUsers,
        "user_password_reset",
    )
    .await?;
    let name = name_of(path)?;
    let b: PasswordBody = parse_body(&body)?;
    // Resetting one's own password keeps the session that did it.
    let keep = session
        .as_ref()
        .filter(|_| name == actor.user)
        .map(|Extension(s)| s.id_hash.as_str());
    let ended = accounts::reset_password(
        &state.store,
        &by(&actor),
        &name,
        &b.password,
        keep,
        now_ms(),
    )
    .await
    .map_err(|e| failed(&state, e))?;
    Ok(Json(PasswordSet {
        sessions_ended: ended,
    }))
}

// ---------------------------------------------------------------------------------------------
// One's own account

async fn change_password(
    State(state): State<AppState>,
    Caller(actor): Caller,
    session: Option<Extension<SessionHandle>>,
    body: Bytes,
) -> Result<Json<PasswordSet>, ApiError> {
    require_not_read_only(&state.auth, &actor, "password_change").await?;
    let b: ChangePasswordBody = parse_body(&body)?;
    let keep = session.as_ref().map(|Extension(s)| s.id_hash.as_str());
    let ended = accounts::change_password(
        &state.store,
        &by(&actor),
        &actor.user,
        &b.current_password,
        &b.new_password,
        keep,
        now_ms(),
    )
    .await
    .map_err(|e| failed(&state, e))?;
    Ok(Json(PasswordSet {
        sessions_ended: ended,
    }))
}

/// The sessions of `user` at `now`, the one with `current_hash` marked.
pub(crate) async fn sessions_listed(
    state: &AppState,
    user: &str,
    current_hash: Option<&str>,
) -> Result<Vec<SessionListing>, ApiError> {
    let rows = state
        .store
        .sessions_of(Some(user), now_ms(), state.auth.settings.limits)
        .await
        .map_err(|e| state.action_failed("accounts", e))?;
    Ok(rows
        .into_iter()
        .map(|(hash, mut s)| {
            s.current = current_hash == Some(hash.as_str());
            s
        })
        .collect())
}

async fn list_sessions(
    State(state): State<AppState>,
    Caller(actor): Caller,
    session: Option<Extension<SessionHandle>>,
) -> Result<Json<Items<SessionItem>>, ApiError> {
    let current = session.as_ref().map(|Extension(s)| s.id_hash.as_str());
    let items = sessions_listed(&state, &actor.user, current).await?;
    Ok(Json(Items {
        items: items.into_iter().map(session_item).collect(),
    }))
}

async fn end_session(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Ended>, ApiError> {
    require_not_read_only(&state.auth, &actor, "session_end").await?;
    let handle = path
        .map(|Path(s)| s)
        .map_err(|_| ApiError::BadRequest("the session handle is not valid".into()))?;
    accounts::end_session(&state.store, &by(&actor), &actor.user, &handle, now_ms())
        .await
        .map_err(|e| failed(&state, e))?;
    Ok(Json(Ended { ended: 1 }))
}

async fn end_other_sessions(
    State(state): State<AppState>,
    Caller(actor): Caller,
    session: Option<Extension<SessionHandle>>,
) -> Result<Json<Ended>, ApiError> {
    require_not_read_only(&state.auth, &actor, "session_end").await?;
    let keep = session.as_ref().map(|Extension(s)| s.id_hash.as_str());
    let ended =
        accounts::end_other_sessions(&state.store, &by(&actor), &actor.user, keep, now_ms())
            .await
            .map_err(|e| failed(&state, e))?;
    Ok(Json(Ended { ended }))
}

// ---------------------------------------------------------------------------------------------
// Tokens

async fn list_tokens(
    State(state): State<AppState>,
    Caller(actor): Caller,
    query: Result<Query<TokensQuery>, QueryRejection>,
) -> Result<Json<Items<TokenItem>>, ApiError> {
    let Query(q) = query.map_err(|e| {
        ApiError::BadRequest(format!(
            "the query is not valid ({e}): give `user=NAME` or `all=true`"
        ))
    })?;
    let user = match (q.user, q.all.unwrap_or(false)) {
        (_, true) => None,
        (Some(u), false) => Some(u),
        (None, false) => Some(actor.user.clone()),
    };
    if user.as_deref() != Some(actor.user.as_str()) {
        require_permission(&state.auth, &actor, Permission::ManageUsers, "token_list").await?;
    }
    let tokens = state
        .store
        .api_tokens(user.as_deref())
        .await
        .map_err(|e| state.action_failed("accounts", e))?;
    let now = now_ms();
    Ok(Json(Items {
        items: tokens
            .into_iter()
            .map(|t| token_item(t, now, None))
            .collect(),
    }))
}

async fn create_token(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: NewTokenBody = if body.iter().all(u8::is_ascii_whitespace) {
        NewTokenBody::default()
    } else {
        parse_body(&body)?
    };
    let user = b.user.clone().unwrap_or_else(|| actor.user.clone());
    if user == actor.user {
        require_not_read_only(&state.auth, &actor, "token_create").await?;
    } else {
        require_permission(&state.auth, &actor, Permission::ManageUsers, "token_create").await?;
    }
    let now = now_ms();
    let created = accounts::create_token(
        &state.store,
        &by(&actor),
        &user,
        b.name.as_deref(),
        b.expires_in.as_deref().unwrap_or(""),
        b.scope.as_deref().unwrap_or(""),
        now,
    )
    .await
    .map_err(|e| failed(&state, e))?;
    Ok((
        StatusCode::CREATED,
        Json(token_item(created.listing, now, Some(created.token))),
    )
        .into_response())
}

async fn revoke_token(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<TokenItem>, ApiError> {
    let raw = path
        .map(|Path(s)| s)
        .map_err(|_| ApiError::BadRequest("the token id is not valid".into()))?;
    let id: i64 = raw.trim().parse().map_err(|_| {
        ApiError::BadRequest(format!("`{raw}` is not a token id: ids are whole numbers"))
    })?;
    let token = state
        .store
        .api_token(id)
        .await
        .map_err(|e| state.action_failed("accounts", e))?;
    let own = token.as_ref().is_some_and(|t| t.user == actor.user);
    let owner = if own {
        require_not_read_only(&state.auth, &actor, "token_revoke").await?;
        Some(actor.user.as_str())
    } else {
        // Someone else's (or no such) token: only who manages users learns which.
        require_permission(&state.auth, &actor, Permission::ManageUsers, "token_revoke").await?;
        None
    };
    let now = now_ms();
    accounts::revoke_token(&state.store, &by(&actor), id, owner, now)
        .await
        .map_err(|e| failed(&state, e))?;
    let token = state
        .store
        .api_token(id)
        .await
        .map_err(|e| state.action_failed("accounts", e))?
        .ok_or_else(|| ApiError::NotFound(format!("there is no API token {id}")))?;
    Ok(Json(token_item(token, now, None)))
}
