//! Server functions of the admin page (`/admin/users`) and the account page (`/account`):
//! users, passwords, sessions and API tokens. The operations are `redrive_core::accounts`';
//! these are their UI surface.
//!
//! - Another user's account needs the `manage_users` permission ([`Permission::ManageUsers`],
//!   refusals audited `denied`); one's own (password, sessions, tokens) needs only to be
//!   signed in, and never works with a `read_only` API token.
//! - The changing ones are POST server functions driven by `ActionForm`s (plain forms without
//!   JavaScript) with a `csrf` argument the middleware checks, and redirect back with a
//!   `done=CODE` notice ([`AccountNotice`]).
//! - A new API token is not made here: its form posts to `POST /account/tokens` (the server's
//!   `token_form`), which answers a page showing the token once — a server function's answer
//!   cannot carry it through a plain form's redirect.
//!
//! [`Permission::ManageUsers`]: redrive_core::permission::Permission::ManageUsers

use leptos::prelude::*;
use redrive_core::auth::{ApiToken, SessionListing, User};
use serde::{Deserialize, Serialize};

/// What `/admin/users` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsersView {
    /// Every user, by name.
    pub users: Vec<User>,
    /// Every user's API tokens (revoked ones too), newest first.
    pub tokens: Vec<ApiToken>,
    /// The role names a user can be given, for the role selects.
    pub roles: Vec<String>,
    /// Who is looking (they cannot disable themselves or change their own role).
    pub me: String,
    /// The server's clock, epoch ms (to tell expired tokens).
    pub now_ms: i64,
}

/// What `/account` shows: the signed-in user's own sessions and tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountView {
    pub user: String,
    pub role: String,
    /// Their unexpired sessions, the one asking marked `current`.
    pub sessions: Vec<SessionListing>,
    /// Their API tokens (revoked ones too), newest first.
    pub tokens: Vec<ApiToken>,
    /// The server's clock, epoch ms.
    pub now_ms: i64,
}

/// The notice shown after a change, from the URL's `done=CODE`: only known codes (the URL
/// cannot make the page say anything else).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccountNotice {
    UserAdded,
    UserDisabled,
    UserEnabled,
    RoleSet,
    PasswordReset,
    PasswordChanged,
    SessionEnded,
    SessionsEnded,
    TokenRevoked,
}

impl AccountNotice {
    const ALL: [AccountNotice; 9] = [
        AccountNotice::UserAdded,
        AccountNotice::UserDisabled,
        AccountNotice::UserEnabled,
        AccountNotice::RoleSet,
        AccountNotice::PasswordReset,
        AccountNotice::PasswordChanged,
        AccountNotice::SessionEnded,
        AccountNotice::SessionsEnded,
        AccountNotice::TokenRevoked,
    ];

    /// The `done` value.
    pub fn code(self) -> &'static str {
        match self {
            AccountNotice::UserAdded => "user_added",
            AccountNotice::UserDisabled => "user_disabled",
            AccountNotice::UserEnabled => "user_enabled",
            AccountNotice::RoleSet => "role_set",
            AccountNotice::PasswordReset => "password_reset",
            AccountNotice::PasswordChanged => "password_changed",
            AccountNotice::SessionEnded => "session_ended",
            AccountNotice::SessionsEnded => "sessions_ended",
            AccountNotice::TokenRevoked => "token_revoked",
        }
    }

    /// Parses a `done` value.
    pub fn parse(v: &str) -> Option<AccountNotice> {
        AccountNotice::ALL.into_iter().find(|n| n.code() == v)
    }

    /// The sentence shown.
    pub fn sentence(self) -> &'static str {
        match self {
            AccountNotice::UserAdded => "The user was added.",
            AccountNotice::UserDisabled => {
                "The user was disabled: their sessions ended and their API tokens were revoked."
            }
            AccountNotice::UserEnabled => "The user was enabled; they can sign in again.",
            AccountNotice::RoleSet => {
                "The role was changed; it applies to the user's next request."
            }
            AccountNotice::PasswordReset => {
                "The password was reset and the user's sessions were ended."
            }
            AccountNotice::PasswordChanged => {
                "Your password was changed; your other sessions were ended."
            }
            AccountNotice::SessionEnded => "The session was ended.",
            AccountNotice::SessionsEnded => "Your other sessions were ended.",
            AccountNotice::TokenRevoked => "The API token was revoked.",
        }
    }
}

/// The admin page's data. Needs `manage_users` (a refusal is audited `user_list` `denied`).
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_users() -> Result<UsersView, ServerFnError> {
    let actor = seam::manager("user_list").await?;
    let store = seam::store()?;
    let users = store
        .users()
        .await
        .map_err(|e| seam::failed("read the users", e))?;
    let tokens = store
        .api_tokens(None)
        .await
        .map_err(|e| seam::failed("read the API tokens", e))?;
    Ok(UsersView {
        users,
        tokens,
        roles: redrive_core::permission::installed_roles()
            .names()
            .map(str::to_string)
            .collect(),
        me: actor.user,
        now_ms: seam::now_ms(),
    })
}

/// The account page's data: the signed-in user's sessions and tokens.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_account() -> Result<AccountView, ServerFnError> {
    let actor = crate::auth_context::signed_in()?;
    let store = seam::store()?;
    let now = seam::now_ms();
    let current = seam::session_key();
    let sessions = store
        .sessions_of(Some(&actor.user), now, seam::limits())
        .await
        .map_err(|e| seam::failed("read your sessions", e))?
        .into_iter()
        .map(|(hash, mut s)| {
            s.current = current.as_deref() == Some(hash.as_str());
            s
        })
        .collect();
    let tokens = store
        .api_tokens(Some(&actor.user))
        .await
        .map_err(|e| seam::failed("read your API tokens", e))?;
    Ok(AccountView {
        user: actor.user,
        role: actor.role.as_str().to_string(),
        sessions,
        tokens,
        now_ms: now,
    })
}

/// Adds user `name` with `role` and `password` (`manage_users`). Back to the admin page.
#[server(endpoint = "ui/users/add")]
pub async fn add_user(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    #[server(default)] name: String,
    #[server(default)] role: String,
    #[server(default)] password: String,
) -> Result<(), ServerFnError> {
    let _ = csrf;
    let actor = seam::manager("user_add").await?;
    redrive_core::accounts::create_user(
        &seam::store()?,
        &seam::by(&actor),
        &name,
        &role,
        &password,
        seam::now_ms(),
    )
    .await
    .map_err(seam::refused)?;
    seam::done("/admin/users", AccountNotice::UserAdded);
    Ok(())
}

/// Changes user `name` (`manage_users`): `op` = `disable` (ends their sessions and revokes
/// their tokens), `enable`, `set_role` (to `role`) or `reset_password` (to `password`, ending
/// their sessions). Back to the admin page.
#[server(endpoint = "ui/users/change")]
pub async fn change_user(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    name: String,
    op: String,
    #[server(default)] role: String,
    #[server(default)] password: String,
) -> Result<(), ServerFnError> {
    use redrive_core::accounts;
    let _ = csrf;
    let action = match op.as_str() {
        "disable" => "user_disable",
        "enable" => "user_enable",
        "set_role" => "user_role_set",
        "reset_password" => "user_password_reset",
        _ => {
            return Err(crate::refusal::refused(
                crate::refusal::INVALID,
                "Unknown change: disable, enable, set a role or reset a password.",
            ))
        }
    };
    let actor = seam::manager(action).await?;
    let store = seam::store()?;
    let by = seam::by(&actor);
    let now = seam::now_ms();
    let me = Some(actor.user.as_str());
    let notice = match op.as_str() {
        "disable" | "enable" => {
            let disabled = op == "disable";
            accounts::set_disabled(&store, &by, me, &name, disabled, now)
                .await
                .map_err(seam::refused)?;
            if disabled {
                AccountNotice::UserDisabled
            } else {
                AccountNotice::UserEnabled
            }
        }
        "set_role" => {
            accounts::set_role(&store, &by, me, &name, &role, now)
                .await
                .map_err(seam::refused)?;
            AccountNotice::RoleSet
        }
        _ => {
            let keep = seam::session_key().filter(|_| name == actor.user);
            accounts::reset_password(&store, &by, &name, &password, keep.as_deref(), now)
                .await
                .map_err(seam::refused)?;
            AccountNotice::PasswordReset
        }
    };
    seam::done("/admin/users", notice);
    Ok(())
}

/// The signed-in user changes their own password (`current_password` must be right); their
/// other sessions end. Back to the account page.
#[server(endpoint = "ui/account/password")]
pub async fn change_password(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    #[server(default)] current_password: String,
    #[server(default)] new_password: String,
) -> Result<(), ServerFnError> {
    let _ = csrf;
    let actor = seam::own("password_change").await?;
    redrive_core::accounts::change_password(
        &seam::store()?,
        &seam::by(&actor),
        &actor.user,
        &current_password,
        &new_password,
        seam::session_key().as_deref(),
        seam::now_ms(),
    )
    .await
    .map_err(seam::refused)?;
    seam::done("/account", AccountNotice::PasswordChanged);
    Ok(())
}

/// Ends one of the signed-in user's sessions (`handle`, as listed), or every one but this
/// (`handle` = `others`). Back to the account page.
#[server(endpoint = "ui/account/end-session")]
pub async fn end_session(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    handle: String,
) -> Result<(), ServerFnError> {
    use redrive_core::accounts;
    let _ = csrf;
    let actor = seam::own("session_end").await?;
    let store = seam::store()?;
    let by = seam::by(&actor);
    let now = seam::now_ms();
    let notice = if handle == "others" {
        let keep = seam::session_key();
        accounts::end_other_sessions(&store, &by, &actor.user, keep.as_deref(), now)
            .await
            .map_err(seam::refused)?;
        AccountNotice::SessionsEnded
    } else {
        accounts::end_session(&store, &by, &actor.user, &handle, now)
            .await
            .map_err(seam::refused)?;
        AccountNotice::SessionEnded
    };
    // Ending this very session signs out: the next page asks to sign in.
    seam::done("/account", notice);
    Ok(())
}

/// Revokes API token `id`: one's own, or anyone's with `manage_users`. Back to `back` (the
/// account or the admin page).
#[server(endpoint = "ui/tokens/revoke")]
pub async fn revoke_token(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    id: String,
    #[server(default)] back: String,
) -> Result<(), ServerFnError> {
    let _ = csrf;
    let id: i64 = id.trim().parse().map_err(|_| {
        crate::refusal::refused(crate::refusal::INVALID, "That is not an API token id.")
    })?;
    let store = seam::store()?;
    let actor = crate::auth_context::signed_in()?;
    let own = store
        .api_token(id)
        .await
        .map_err(|e| seam::failed("read the API token", e))?
        .is_some_and(|t| t.user == actor.user);
    let (actor, owner) = if own {
        (seam::own("token_revoke").await?, Some(actor.user.clone()))
    } else {
        (seam::manager("token_revoke").await?, None)
    };
    redrive_core::accounts::revoke_token(
        &store,
        &seam::by(&actor),
        id,
        owner.as_deref(),
        seam::now_ms(),
    )
    .await
    .map_err(seam::refused)?;
    let back = if back == "/admin/users" {
        "/admin/users"
    } else {
        "/account"
    };
    seam::done(back, AccountNotice::TokenRevoked);
    Ok(())
}

#[cfg(feature = "ssr")]
mod seam {
    use leptos::prelude::*;
    use leptos::server_fn::http_export::request::Parts;
    use redrive_core::accounts::AccountError;
    use redrive_core::actions::{Actor, NewAuditEntry};
    use redrive_core::auth::SessionKey;
    use redrive_core::permission::Permission;
    use redrive_core::store::{SessionLimits, StoreError};

    use super::AccountNotice;
    use crate::auth_context;
    use crate::http_status::HttpStatus;
    use crate::refusal::refused as refuse;

    pub use crate::actions_api::failed_for_labels as failed;
    pub use crate::actions_api::store_for_labels as store;

    /// Epoch ms now (the server's clock).
    pub fn now_ms() -> i64 {
        chrono::Utc::now().timestamp_millis()
    }

    /// Who may manage users, or 403 (audited `denied` for `action`).
    pub async fn manager(action: &str) -> Result<Actor, ServerFnError> {
        let status = HttpStatus::current();
        auth_context::authorize_permission(Permission::ManageUsers, action)
            .await
            .inspect_err(|_| status.set(403))
    }

    /// The signed-in user acting on their own account: anyone but a `read_only` token (403,
    /// audited `denied` for `action`).
    pub async fn own(action: &str) -> Result<Actor, ServerFnError> {
        let actor = auth_context::signed_in()?;
        if !actor.read_only {
            return Ok(actor);
        }
        if let Ok(store) = store() {
            if let Err(e) = store
                .record_audit(&NewAuditEntry::by(&actor, action, "denied"))
                .await
            {
                tracing::error!(error = %e, action, "could not write the audit row");
            }
        }
        Err(refuse(
            403,
            "Not allowed: this API token is read-only; it changes nothing.",
        ))
    }

    /// The audit row's actor fields for `actor`.
    pub fn by(actor: &Actor) -> NewAuditEntry {
        NewAuditEntry::by(actor, "", "")
    }

    /// The `id_hash` of the current request's session, if it has one.
    pub fn session_key() -> Option<String> {
        use_context::<Parts>().and_then(|p| p.extensions.get::<SessionKey>().map(|k| k.0.clone()))
    }

    /// The server's session lifetimes (the middleware puts them in each request).
    pub fn limits() -> SessionLimits {
        use_context::<Parts>()
            .and_then(|p| p.extensions.get::<SessionLimits>().copied())
            .unwrap_or(SessionLimits {
                idle_ms: i64::MAX / 4,
                absolute_ms: i64::MAX / 4,
            })
    }

    /// An operation's refusal as the user reads it, with its status (422, 404, 409, 403).
    pub fn refused(e: AccountError) -> ServerFnError {
        match e {
            AccountError::Invalid(m) => refuse(crate::refusal::INVALID, capital(&m)),
            AccountError::NotFound(m) => refuse(crate::refusal::NOT_FOUND, capital(&m)),
            AccountError::Conflict(m) => refuse(crate::refusal::CONFLICT, capital(&m)),
            AccountError::WrongPassword => {
                refuse(403, "The current password is wrong; nothing changed.")
            }
            AccountError::Store(e) => store_failed(e),
        }
    }

    /// A store failure (`failed` sets its status).
    fn store_failed(e: StoreError) -> ServerFnError {
        failed("save the change", e)
    }

    fn capital(m: &str) -> String {
        let mut c = m.chars();
        match c.next() {
            Some(f) => format!("{}{}.", f.to_uppercase(), c.as_str()),
            None => String::new(),
        }
    }

    /// Redirects to `path` with the notice.
    pub fn done(path: &str, notice: AccountNotice) {
        leptos_axum::redirect(&format!("{path}?done={}", notice.code()));
    }
}
