//! Managing users, passwords, sessions and API tokens (issue 10, "Users and tokens, managed"):
//! the operations the admin page, the account page, the JSON API and the CLI share. Each
//! validates its input, changes the store and writes its audit row in the same transaction.
//!
//! Who may call what is decided by the surface before it calls (the `manage_users` permission
//! for another user's account; a session or a `role` token for one's own), never here. Every
//! operation takes `by`, the audit row's actor fields (`NewAuditEntry::by(actor, ..)` or the
//! CLI's `(cli)`); it sets the action and outcome itself. No secret ever reaches an audit row:
//! neither passwords nor tokens, only names, roles, ids and counts.
//!
//! | operation | audit action | outcome |
//! |---|---|---|
//! | [`create_user`] | `user_add` | `ok: added NAME (ROLE)` |
//! | [`set_disabled`] | `user_disable` / `user_enable` | `ok: NAME disabled (...)` |
//! | [`set_role`] | `user_role_set` | `ok: NAME is ROLE (was ROLE)`, detail before/after |
//! | [`reset_password`] | `user_password_reset` | `ok: NAME, N sessions ended` |
//! | [`change_password`] | `password_change` | `ok: N other sessions ended` / `failed: ...` |
//! | [`end_session`], [`end_other_sessions`] | `session_end` | `ok: N sessions of NAME ended` |
//! | [`create_token`] | `token_create` | `ok: token ID for NAME (scope, expiry)` |
//! | [`revoke_token`] | `token_revoke` | `ok: token ID of NAME` |

use crate::actions::{NewAuditEntry, Role};
use crate::auth::{
    looks_like_session_handle, new_api_token, parse_role, parse_token_expiry, secret_hash,
    validate_password, validate_token_name, validate_user_name, ApiToken, AuthError, TokenScope,
    User,
};
use crate::store::{NewApiToken, NewUser, Store, StoreError};

/// Why an account operation was refused or failed. Messages are for the person who asked.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// The input cannot be used (a bad name, role, password, expiry, scope, handle): 422.
    #[error("{0}")]
    Invalid(String),
    /// No such user, session or token: 404.
    #[error("{0}")]
    NotFound(String),
    /// The current state does not allow it (the name is taken, acting on oneself): 409.
    #[error("{0}")]
    Conflict(String),
    /// The current password given is wrong: 403.
    #[error("the current password is wrong")]
    WrongPassword,
    /// The store failed (or a secret could not be made): 503 / 500, the cause is logged.
    #[error("{0}")]
    Store(#[from] StoreError),
}

impl From<AuthError> for AccountError {
    fn from(e: AuthError) -> AccountError {
        match e {
            AuthError::Crypto(m) => AccountError::Store(StoreError::Database(m)),
            other => AccountError::Invalid(other.to_string()),
        }
    }
}

/// A token just created: its listing, and the token itself (shown once, never stored).
#[derive(Debug, Clone)]
pub struct CreatedToken {
    pub token: String,
    pub listing: ApiToken,
}

fn row(by: &NewAuditEntry, action: &str, outcome: String, user: &str) -> NewAuditEntry {
    NewAuditEntry {
        action: action.to_string(),
        outcome,
        detail: Some(serde_json::json!({ "user": user }).to_string()),
        ..by.clone()
    }
}

/// Hashes within the process-wide bound on concurrent password work.
async fn hash(password: String) -> Result<String, AccountError> {
    crate::password_work::PasswordWork::global()
        .hash(password)
        .await
        .map_err(AccountError::from)
}

fn no_user(name: &str) -> AccountError {
    AccountError::NotFound(format!("there is no user `{name}`"))
}

/// Creates user `name` with `role` (a role name, checked by [`parse_role`]) and `password`.
///
/// Errors: `Invalid` (name, role, password), `Conflict` (the name is taken), `Store`.
pub async fn create_user(
    store: &Store,
    by: &NewAuditEntry,
    name: &str,
    role: &str,
    password: &str,
    now_ms: i64,
) -> Result<User, AccountError> {
    let name = name.trim();
    validate_user_name(name)?;
    let role = parse_role(role.trim())?;
    validate_password(password)?;
    let phc = hash(password.to_string()).await?;
    let audit = row(
        by,
        "user_add",
        format!("ok: added {name} ({})", role.as_str()),
        name,
    );
    let id = store
        .create_user_audited(
            &NewUser {
                name,
                role: role.clone(),
                password_hash: &phc,
                created_at_ms: now_ms,
            },
            &audit,
        )
        .await?
        .ok_or_else(|| AccountError::Conflict(format!("a user named `{name}` already exists")))?;
    Ok(User {
        id,
        name: name.to_string(),
        role,
        created_at_ms: now_ms,
        disabled: false,
    })
}

/// Disables (`disabled`) or enables user `name`. Disabling ends their sessions and revokes
/// their tokens at once (see [`Store::set_user_disabled_audited`]). `actor` is the user
/// asking (`None` from the CLI): nobody disables themselves here, so whoever manages users
/// cannot lock the last door behind them. Returns false when it already was so.
///
/// Errors: `NotFound`, `Conflict` (oneself), `Store`.
pub async fn set_disabled(
    store: &Store,
    by: &NewAuditEntry,
    actor: Option<&str>,
    name: &str,
    disabled: bool,
    now_ms: i64,
) -> Result<bool, AccountError> {
    if disabled && actor == Some(name) {
        return Err(AccountError::Conflict(
            "you cannot disable yourself: ask another user who manages users".into(),
        ));
    }
    let (action, outcome) = if disabled {
        (
            "user_disable",
            format!("ok: {name} disabled, their sessions ended and tokens revoked"),
        )
    } else {
        ("user_enable", format!("ok: {name} enabled"))
    };
    store
        .set_user_disabled_audited(name, disabled, now_ms, &row(by, action, outcome, name))
        .await?
        .ok_or_else(|| no_user(name))
}

/// Gives user `name` the role `role` (a role name, checked by [`parse_role`]); it applies to
/// their sessions and `role` tokens from their next request. Nobody changes their own role
/// here (`actor`, `None` from the CLI). Returns the role they had.
///
/// Errors: `Invalid` (role), `NotFound`, `Conflict` (oneself), `Store`.
pub async fn set_role(
    store: &Store,
    by: &NewAuditEntry,
    actor: Option<&str>,
    name: &str,
    role: &str,
    now_ms: i64,
) -> Result<Role, AccountError> {
    let role = parse_role(role.trim())?;
    if actor == Some(name) {
        return Err(AccountError::Conflict(
            "you cannot change your own role: ask another user who manages users".into(),
        ));
    }
    // The outcome names the old role too; the store fills the detail with both.
    let was = store.user(name).await?.ok_or_else(|| no_user(name))?.role;
    let audit = row(
        by,
        "user_role_set",
        format!("ok: {name} is {} (was {})", role.as_str(), was.as_str()),
        name,
    );
    store
        .set_user_role_audited(name, role, now_ms, &audit)
        .await?
        .ok_or_else(|| no_user(name))
}

/// Sets a new password for user `name` (an administrator's reset) and ends all their
/// sessions but `keep_session` (the `id_hash` of the caller's own session, when they reset
/// their own). Their API tokens keep working. Returns how many sessions ended.
///
/// Errors: `Invalid` (password), `NotFound`, `Store`.
pub async fn reset_password(
    store: &Store,
    by: &NewAuditEntry,
    name: &str,
    password: &str,
    keep_session: Option<&str>,
    now_ms: i64,
) -> Result<u64, AccountError> {
    validate_password(password)?;
    let phc = hash(password.to_string()).await?;
    let audit = row(
        by,
        "user_password_reset",
        format!("ok: new password for {name}, {{ended}} sessions ended"),
        name,
    );
    store
        .set_password_audited(name, &phc, keep_session, now_ms, &audit)
        .await?
        .ok_or_else(|| no_user(name))
}

/// User `name` changes their own password: `current` must be their password now. Ends every
/// other session of theirs (`keep_session`, the `id_hash` of the one asking, stays). A wrong
/// current password is audited (`failed: ...`) and refused. Returns how many sessions ended.
///
/// Errors: `WrongPassword`, `Invalid` (the new password), `NotFound`, `Store`.
pub async fn change_password(
    store: &Store,
    by: &NewAuditEntry,
    name: &str,
    current: &str,
    new_password: &str,
    keep_session: Option<&str>,
    now_ms: i64,
) -> Result<u64, AccountError> {
    let creds = store
        .user_credentials(name)
        .await?
        .ok_or_else(|| no_user(name))?;
    let phc = creds.password_hash;
    let current = current.to_string();
    // An over-long "password" is wrong without being hashed.
    let matches = current.len() <= crate::auth::MAX_PASSWORD_BYTES
        && crate::password_work::PasswordWork::global()
            .verify(current, phc)
            .await;
    if !matches {
        store
            .record_audit(&row(
                by,
                "password_change",
                "failed: the current password is wrong".into(),
                name,
            ))
            .await?;
        return Err(AccountError::WrongPassword);
    }
    validate_password(new_password)?;
    let phc = hash(new_password.to_string()).await?;
    let audit = row(
        by,
        "password_change",
        "ok: {ended} other sessions ended".into(),
        name,
    );
    store
        .set_password_audited(name, &phc, keep_session, now_ms, &audit)
        .await?
        .ok_or_else(|| no_user(name))
}

/// Ends the session of user `name` whose public handle is `handle`
/// ([`crate::auth::session_handle`]).
///
/// Errors: `Invalid` (not a handle), `NotFound` (no such session of theirs), `Store`.
pub async fn end_session(
    store: &Store,
    by: &NewAuditEntry,
    name: &str,
    handle: &str,
    now_ms: i64,
) -> Result<(), AccountError> {
    let handle = handle.trim();
    if !looks_like_session_handle(handle) {
        return Err(AccountError::Invalid(
            "that is not a session handle (16 hexadecimal characters, as listed)".into(),
        ));
    }
    let audit = row(
        by,
        "session_end",
        format!("ok: session {handle} of {name} ended"),
        name,
    );
    match store
        .end_sessions_audited(name, Some(handle), None, now_ms, &audit)
        .await?
    {
        0 => Err(AccountError::NotFound(format!(
            "there is no session {handle} of {name} (it may have ended already)"
        ))),
        _ => Ok(()),
    }
}

/// Ends every session of user `name` except `keep` (the `id_hash` of the one asking; `None`
/// ends them all). Returns how many ended.
///
/// Errors: `Store`.
pub async fn end_other_sessions(
    store: &Store,
    by: &NewAuditEntry,
    name: &str,
    keep: Option<&str>,
    now_ms: i64,
) -> Result<u64, AccountError> {
    let audit = row(
        by,
        "session_end",
        format!("ok: {{ended}} sessions of {name} ended"),
        name,
    );
    Ok(store
        .end_sessions_audited(name, None, keep, now_ms, &audit)
        .await?)
}

/// Creates an API token acting as user `name`: `label` (optional, checked by
/// [`validate_token_name`]), `expires` ([`parse_token_expiry`]: `30d`, a date, `never` or
/// empty), `scope` (`role` or `read_only`; empty = `role`).
///
/// Errors: `Invalid` (label, expiry, scope), `NotFound`, `Conflict` (the user is disabled),
/// `Store`.
pub async fn create_token(
    store: &Store,
    by: &NewAuditEntry,
    name: &str,
    label: Option<&str>,
    expires: &str,
    scope: &str,
    now_ms: i64,
) -> Result<CreatedToken, AccountError> {
    let label = label.map(str::trim).filter(|l| !l.is_empty());
    if let Some(l) = label {
        validate_token_name(l)?;
    }
    let expires_at_ms = parse_token_expiry(expires, now_ms)?;
    let scope = match scope.trim() {
        "" => TokenScope::Role,
        s => TokenScope::parse(s)?,
    };
    let user = store
        .user_credentials(name)
        .await?
        .ok_or_else(|| no_user(name))?;
    if user.disabled {
        return Err(AccountError::Conflict(format!(
            "user `{name}` is disabled: enable them first"
        )));
    }
    let token = new_api_token()?;
    let expiry = match expires_at_ms.and_then(rfc3339) {
        Some(t) => format!("expires {t}"),
        None => "never expires".to_string(),
    };
    let audit = row(
        by,
        "token_create",
        format!(
            "ok: token {{id}} for {name} (scope {}, {expiry})",
            scope.as_str()
        ),
        name,
    );
    let id = store
        .create_scoped_api_token(
            &NewApiToken {
                user_id: user.id,
                name: label,
                token_hash: &secret_hash(&token),
                created_at_ms: now_ms,
                expires_at_ms,
                scope,
            },
            Some(&audit),
        )
        .await?;
    Ok(CreatedToken {
        token,
        listing: ApiToken {
            id,
            user: user.name,
            name: label.map(str::to_string),
            created_at_ms: now_ms,
            last_used_ms: None,
            revoked_at_ms: None,
            expires_at_ms,
            scope,
        },
    })
}

/// Revokes API token `id`; only when it is `owner`'s, if `owner` is given (one's own tokens).
///
/// Errors: `NotFound` (no such unrevoked token, or not `owner`'s), `Store`.
pub async fn revoke_token(
    store: &Store,
    by: &NewAuditEntry,
    id: i64,
    owner: Option<&str>,
    now_ms: i64,
) -> Result<(), AccountError> {
    let user = store
        .api_token(id)
        .await?
        .filter(|t| owner.is_none_or(|o| o == t.user))
        .map(|t| t.user);
    let not_found = || AccountError::NotFound(format!("there is no unrevoked API token {id}"));
    let Some(user) = user else {
        return Err(not_found());
    };
    let audit = row(
        by,
        "token_revoke",
        format!("ok: token {id} of {user}"),
        &user,
    );
    if store
        .revoke_api_token_audited(id, owner, now_ms, &audit)
        .await?
    {
        Ok(())
    } else {
        Err(not_found())
    }
}

/// RFC 3339 UTC of epoch ms (seconds precision), for outcomes.
fn rfc3339(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}
