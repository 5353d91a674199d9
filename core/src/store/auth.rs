//! Users, sessions and API tokens (tables of `0003_auth.sql`).
//!
//! Every secret arrives here already hashed: passwords as argon2id PHC strings, session and API
//! tokens as [`crate::auth::secret_hash`]. Times are epoch ms, passed in by the caller (one
//! clock, the server's; tests can move it).

use sqlx::QueryBuilder;

use super::audit::insert_audit;
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::{NewAuditEntry, Role};
use crate::auth::{session_handle, ApiToken, SessionListing, TokenScope, User};

/// A user to create.
#[derive(Debug, Clone)]
pub struct NewUser<'a> {
    /// Checked by [`crate::auth::validate_user_name`] before it gets here.
    pub name: &'a str,
    pub role: Role,
    /// argon2id PHC string ([`crate::auth::hash_password`]).
    pub password_hash: &'a str,
    pub created_at_ms: i64,
}

/// What signing in needs to know about a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserCredentials {
    pub id: i64,
    pub name: String,
    pub role: Role,
    pub password_hash: String,
    pub disabled: bool,
}

/// A session to create at sign-in.
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    /// SHA-256 hex of the cookie value.
    pub id_hash: &'a str,
    pub user_id: i64,
    pub csrf_token: &'a str,
    /// Epoch ms; also the first `last_seen_ms`.
    pub created_at_ms: i64,
    pub ip: Option<&'a str>,
    pub user_agent: Option<&'a str>,
}

/// A valid (unexpired) session and its user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub user_id: i64,
    pub user: String,
    pub role: Role,
    pub csrf_token: String,
    pub created_at_ms: i64,
    pub last_seen_ms: i64,
}

/// Session lifetimes, ms: a session ends `idle_ms` after its last request, and `absolute_ms`
/// after sign-in whatever happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    pub idle_ms: i64,
    pub absolute_ms: i64,
}

/// The user an unrevoked API token acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOwner {
    pub token_id: i64,
    pub user_id: i64,
    pub user: String,
    pub role: Role,
    pub last_used_ms: Option<i64>,
    /// Epoch ms; `None` = never. The caller refuses a token past it (with its own message).
    pub expires_at_ms: Option<i64>,
    pub scope: TokenScope,
}

/// An API token to store ([`Store::create_scoped_api_token`]).
#[derive(Debug, Clone)]
pub struct NewApiToken<'a> {
    /// The user it acts as.
    pub user_id: i64,
    /// Free label, checked by [`crate::auth::validate_token_name`].
    pub name: Option<&'a str>,
    /// [`crate::auth::secret_hash`] of the token.
    pub token_hash: &'a str,
    /// Epoch ms.
    pub created_at_ms: i64,
    /// Epoch ms; `None` = never.
    pub expires_at_ms: Option<i64>,
    pub scope: TokenScope,
}

#[derive(Debug, sqlx::FromRow)]
struct CredentialsRow {
    id: i64,
    name: String,
    role: String,
    password_hash: String,
    disabled: i32,
}

#[derive(Debug, sqlx::FromRow)]
struct UserRow {
    id: i64,
    name: String,
    role: String,
    created_at_ms: i64,
    disabled: i32,
}

#[derive(Debug, sqlx::FromRow)]
struct SessionRow {
    user_id: i64,
    name: String,
    role: String,
    csrf_token: String,
    created_at_ms: i64,
    last_seen_ms: i64,
}

#[derive(Debug, sqlx::FromRow)]
struct TokenOwnerRow {
    token_id: i64,
    user_id: i64,
    name: String,
    role: String,
    last_used_ms: Option<i64>,
    expires_at_ms: Option<i64>,
    scope: String,
}

#[derive(Debug, sqlx::FromRow)]
struct TokenRow {
    id: i64,
    user_name: String,
    name: Option<String>,
    created_at_ms: i64,
    last_used_ms: Option<i64>,
    revoked_at_ms: Option<i64>,
    expires_at_ms: Option<i64>,
    scope: String,
}

#[derive(Debug, sqlx::FromRow)]
struct SessionListRow {
    id_hash: String,
    name: String,
    created_at_ms: i64,
    last_seen_ms: i64,
    ip: Option<String>,
    user_agent: Option<String>,
}

const TOKEN_COLUMNS: &str = "t.id, u.name AS user_name, t.name, t.created_at_ms, \
     t.last_used_ms, t.revoked_at_ms, t.expires_at_ms, t.scope";

fn token(r: TokenRow) -> Result<ApiToken, StoreError> {
    Ok(ApiToken {
        scope: scope(&r.scope)?,
        id: r.id,
        user: r.user_name,
        name: r.name,
        created_at_ms: r.created_at_ms,
        last_used_ms: r.last_used_ms,
        revoked_at_ms: r.revoked_at_ms,
        expires_at_ms: r.expires_at_ms,
    })
}

fn scope(s: &str) -> Result<TokenScope, StoreError> {
    TokenScope::parse(s)
        .map_err(|_| StoreError::Corrupt(format!("unknown token scope `{s}` in api_tokens")))
}

/// The role stored in `users.role`, resolved against the installed roles. A name no longer
/// configured resolves to a role with no permission and an empty scope (`Role::named`): its
/// users are refused everything with a message, the store does not fail.
fn role(s: &str) -> Result<Role, StoreError> {
    Ok(Role::named(s))
}

fn bind<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, v: Val<'a>) {
    DB::bind(qb, v);
}

impl Store {
    /// How many users exist (disabled ones included).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn count_users(&self) -> Result<i64, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb = QueryBuilder::<DB>::new("SELECT COUNT(*) FROM users");
            qb.build_query_scalar::<i64>().fetch_one(pool).await
        })
        .map_err(store_error)
    }

    /// Creates a user; `Ok(None)` when the name is taken (nothing changes), else its id.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn create_user(&self, user: &NewUser<'_>) -> Result<Option<i64>, StoreError> {
        on_write_conn!(self, |conn, DB| {
            let mut qb = QueryBuilder::<DB>::new(
                "INSERT INTO users (name, role, password_hash, created_at_ms) VALUES (",
            );
            bind(&mut qb, Val::Text(Some(user.name)));
            qb.push(", ");
            bind(&mut qb, Val::Text(Some(user.role.as_str())));
            qb.push(", ");
            bind(&mut qb, Val::Text(Some(user.password_hash)));
            qb.push(", ");
            bind(&mut qb, Val::I64(Some(user.created_at_ms)));
            qb.push(") ON CONFLICT (name) DO NOTHING RETURNING id");
            qb.build_query_scalar::<i64>()
                .fetch_optional(&mut *conn)
                .await
        })
        .map_err(store_error)
    }

    /// The user `name` with its password hash, for signing in; `None` if there is none.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn user_credentials(
        &self,
        name: &str,
    ) -> Result<Option<UserCredentials>, StoreError> {
        let row: Option<CredentialsRow> = on_pool!(self, |pool, DB| {
            let mut qb = QueryBuilder::<DB>::new(
                "SELECT id, name, role, password_hash, disabled FROM users WHERE name = ",
            );
            bind(&mut qb, Val::Text(Some(name)));
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        row.map(|r| {
            Ok(UserCredentials {
                role: role(&r.role)?,
                id: r.id,
                name: r.name,
                password_hash: r.password_hash,
                disabled: r.disabled != 0,
            })
        })
        .transpose()
    }

    /// Every user, by name.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn users(&self) -> Result<Vec<User>, StoreError> {
        let rows: Vec<UserRow> = on_pool!(self, |pool, DB| {
            let mut qb = QueryBuilder::<DB>::new(
                "SELECT id, name, role, created_at_ms, disabled FROM users ORDER BY name",
            );
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        rows.into_iter()
            .map(|r| {
                Ok(User {
                    role: role(&r.role)?,
                    id: r.id,
                    name: r.name,
                    created_at_ms: r.created_at_ms,
                    disabled: r.disabled != 0,
                })
            })
            .collect()
    }

    /// Stores a new session.
    ///
    /// Errors: `Unavailable`, `Database` (e.g. the user no longer exists).
    pub async fn create_session(&self, s: &NewSession<'_>) -> Result<(), StoreError> {
        on_write_conn!(self, |conn, DB| {
            let mut qb = QueryBuilder::<DB>::new(
                "INSERT INTO sessions (id_hash, user_id, csrf_token, created_at_ms, last_seen_ms, \
                 ip, user_agent) VALUES (",
            );
            bind(&mut qb, Val::Text(Some(s.id_hash)));
            qb.push(", ");
            bind(&mut qb, Val::I64(Some(s.user_id)));
            qb.push(", ");
            bind(&mut qb, Val::Text(Some(s.csrf_token)));
            qb.push(", ");
            bind(&mut qb, Val::I64(Some(s.created_at_ms)));
            qb.push(", ");
            bind(&mut qb, Val::I64(Some(s.created_at_ms)));
            qb.push(", ");
            bind(&mut qb, Val::Text(s.ip));
            qb.push(", ");
            bind(&mut qb, Val::Text(s.user_agent));
            qb.push(")");
            qb.build().execute(&mut *conn).await.map(|_| ())
        })
        .map_err(store_error)
    }

    /// The session whose cookie hashes to `id_hash`, if it exists, has been used within
    /// `limits.idle_ms`, was created within `limits.absolute_ms` of `now_ms`, and its user is
    /// not disabled. An expired session is not returned (and is removed by
    /// [`Store::purge_sessions`]).
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn session(
        &self,
        id_hash: &str,
        now_ms: i64,
        limits: SessionLimits,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let row: Option<SessionRow> = on_pool!(self, |pool, DB| {
            let mut qb = QueryBuilder::<DB>::new(
                "SELECT s.user_id, u.name, u.role, s.csrf_token, s.created_at_ms, s.last_seen_ms \
                 FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id_hash = ",
            );
            bind(&mut qb, Val::Text(Some(id_hash)));
            qb.push(" AND s.last_seen_ms > ");
            bind(
                &mut qb,
                Val::I64(Some(now_ms.saturating_sub(limits.idle_ms))),
            );
            qb.push(" AND s.created_at_ms > ");
            bind(
                &mut qb,
                Val::I64(Some(now_ms.saturating_sub(limits.absolute_ms))),
            );
            qb.push(" AND u.disabled = 0");
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        row.map(|r| {
            Ok(SessionRecord {
                role: role(&r.role)?,
                user_id: r.user_id,
                user: r.name,
                csrf_token: r.csrf_token,
                created_at_ms: r.created_at_ms,
                last_seen_ms: r.last_seen_ms,
            })
        })
        .transpose()
    }

    /// Records activity on a session (moves its idle expiry).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn touch_session(&self, id_hash: &str, now_ms: i64) -> Result<(), StoreError> {
        on_write_conn!(self, |conn, DB| {
            let mut qb = QueryBuilder::<DB>::new("UPDATE sessions SET last_seen_ms = ");
            bind(&mut qb, Val::I64(Some(now_ms)));
            qb.push(" WHERE id_hash = ");
            bind(&mut qb, Val::Text(Some(id_hash)));
            // Never move it backwards (two requests racing).
            qb.push(" AND last_seen_ms < ");
            bind(&mut qb, Val::I64(Some(now_ms)));
            qb.build().execute(&mut *conn).await.map(|_| ())
        })
        .map_err(store_error)
    }

    /// Ends a session (sign-out). `Ok(false)` if there was none.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn delete_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        on_write_conn!(self, |conn, DB| {
            let mut qb = QueryBuilder::<DB>::new("DELETE FROM sessions WHERE id_hash = ");
            bind(&mut qb, Val::Text(Some(id_hash)));
            qb.build()
                .execute(&mut *conn)
                .await
                .map(|r| r.rows_affected() > 0)
        })
        .map_err(store_error)
    }

    /// Removes every session expired at `now_ms`; returns how many.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn purge_sessions(
        &self,
        now_ms: i64,
        limits: SessionLimits,
    ) -> Result<u64, StoreError> {
        on_write_conn!(self, |conn, DB| {
            let mut qb = QueryBuilder::<DB>::new("DELETE FROM sessions WHERE last_seen_ms <= ");
            bind(
                &mut qb,
                Val::I64(Some(now_ms.saturating_sub(limits.idle_ms))),
            );
            qb.push(" OR created_at_ms <= ");
            bind(
                &mut qb,
                Val::I64(Some(now_ms.saturating_sub(limits.absolute_ms))),
            );
            qb.build()
                .execute(&mut *conn)
                .await
                .map(|r| r.rows_affected())
        })
        .map_err(store_error)
    }

    /// Stores an API token (its hash) acting as `user_id` with its user's role, never
    /// expiring; returns its id. ([`Store::create_scoped_api_token`] sets expiry and scope.)
    ///
    /// Errors: `Unavailable`, `Database` (e.g. the same hash twice, or no such user).
    pub async fn create_api_token(
        &self,
        user_id: i64,
        name: Option<&str>,
        token_hash: &str,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        self.create_scoped_api_token(
            &NewApiToken {
                user_id,
                name,
                token_hash,
                created_at_ms: now_ms,
                expires_at_ms: None,
                scope: TokenScope::Role,
            },
            None,
        )
        .await
    }

    /// The user an unrevoked token with hash `token_hash` acts as, with the token's expiry
    /// and scope (an expired token is returned: the caller says why it is refused); `None`
    /// for an unknown or revoked token, or a disabled user.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn api_token_owner(
        &self,
        token_hash: &str,
    ) -> Result<Option<TokenOwner>, StoreError> {
        let row: Option<TokenOwnerRow> = on_pool!(self, |pool, DB| {
            let mut qb = QueryBuilder::<DB>::new(
                "SELECT t.id AS token_id, u.id AS user_id, u.name, u.role, t.last_used_ms, \
                 t.expires_at_ms, t.scope \
                 FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = ",
            );
            bind(&mut qb, Val::Text(Some(token_hash)));
            qb.push(" AND t.revoked_at_ms IS NULL AND u.disabled = 0");
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        row.map(|r| {
            Ok(TokenOwner {
                role: role(&r.role)?,
                scope: scope(&r.scope)?,
                token_id: r.token_id,
                user_id: r.user_id,
                user: r.name,
                last_used_ms: r.last_used_ms,
                expires_at_ms: r.expires_at_ms,
            })
        })
        .transpose()
    }

    /// Records that token `id` was used at `now_ms`.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn touch_api_token(&self, id: i64, now_ms: i64) -> Result<(), StoreError> {
        on_write_conn!(self, |conn, DB| {
            let mut qb = QueryBuilder::<DB>::new("UPDATE api_tokens SET last_used_ms = ");
            bind(&mut qb, Val::I64(Some(now_ms)));
            qb.push(" WHERE id = ");
            bind(&mut qb, Val::I64(Some(id)));
            qb.build().execute(&mut *conn).await.map(|_| ())
        })
        .map_err(store_error)
    }

    /// Revokes token `id` at `now_ms`. `Ok(false)` if there is no such token or it was
    /// already revoked (nothing changes).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn revoke_api_token(&self, id: i64, now_ms: i64) -> Result<bool, StoreError> {
        on_write_conn!(self, |conn, DB| {
            let mut qb = QueryBuilder::<DB>::new("UPDATE api_tokens SET revoked_at_ms = ");
            bind(&mut qb, Val::I64(Some(now_ms)));
            qb.push(" WHERE id = ");
            bind(&mut qb, Val::I64(Some(id)));
            qb.push(" AND revoked_at_ms IS NULL");
            qb.build()
                .execute(&mut *conn)
                .await
                .map(|r| r.rows_affected() > 0)
        })
        .map_err(store_error)
    }

    /// API tokens (revoked ones too), newest first; only `user`'s when given.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn api_tokens(&self, user: Option<&str>) -> Result<Vec<ApiToken>, StoreError> {
        let rows: Vec<TokenRow> = on_pool!(self, |pool, DB| {
            let mut qb = QueryBuilder::<DB>::new(format!(
                "SELECT {TOKEN_COLUMNS} FROM api_tokens t JOIN users u ON u.id = t.user_id"
            ));
            if let Some(u) = user {
                qb.push(" WHERE u.name = ");
                bind(&mut qb, Val::Text(Some(u)));
            }
            qb.push(" ORDER BY t.id DESC");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        rows.into_iter().map(token).collect()
    }

    /// The API token `id` (revoked or not), if there is one.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn api_token(&self, id: i64) -> Result<Option<ApiToken>, StoreError> {
        let row: Option<TokenRow> = on_pool!(self, |pool, DB| {
            let mut qb = QueryBuilder::<DB>::new(format!(
                "SELECT {TOKEN_COLUMNS} FROM api_tokens t JOIN users u ON u.id = t.user_id \
                 WHERE t.id = "
            ));
            bind(&mut qb, Val::I64(Some(id)));
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        row.map(token).transpose()
    }

    /// Stores an API token with its expiry and scope, and `audit` (if given, its row in the
    /// same transaction); returns the token's id.
    ///
    /// Errors: `Unavailable`, `Database` (e.g. the same hash twice, or no such user).
    pub async fn create_scoped_api_token(
        &self,
        t: &NewApiToken<'_>,
        audit: Option<&NewAuditEntry>,
    ) -> Result<i64, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb = QueryBuilder::<DB>::new(
                "INSERT INTO api_tokens (user_id, name, token_hash, created_at_ms, \
                 expires_at_ms, scope) VALUES (",
            );
            bind(&mut qb, Val::I64(Some(t.user_id)));
            qb.push(", ");
            bind(&mut qb, Val::Text(t.name));
            qb.push(", ");
            bind(&mut qb, Val::Text(Some(t.token_hash)));
            qb.push(", ");
            bind(&mut qb, Val::I64(Some(t.created_at_ms)));
            qb.push(", ");
            bind(&mut qb, Val::I64(t.expires_at_ms));
            qb.push(", ");
            bind(&mut qb, Val::Text(Some(t.scope.as_str())));
            qb.push(") RETURNING id");
            let id = qb
                .build_query_scalar::<i64>()
                .fetch_one(&mut *tx)
                .await
                .map_err(store_error)?;
            if let Some(a) = audit {
                let mut a = a.clone();
                a.outcome = a.outcome.replace("{id}", &id.to_string());
                insert_audit::<DB>(&a, t.created_at_ms)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<i64, StoreError>(id)
        })
    }

    /// Revokes token `id` at `now_ms` and writes `audit` in the same transaction; only
    /// `user`'s token when `user` is given. `Ok(false)` if there is no such (unrevoked) token
    /// (nothing changes, nothing is audited).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn revoke_api_token_audited(
        &self,
        id: i64,
        user: Option<&str>,
        now_ms: i64,
        audit: &NewAuditEntry,
    ) -> Result<bool, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb = QueryBuilder::<DB>::new("UPDATE api_tokens SET revoked_at_ms = ");
            bind(&mut qb, Val::I64(Some(now_ms)));
            qb.push(" WHERE id = ");
            bind(&mut qb, Val::I64(Some(id)));
            qb.push(" AND revoked_at_ms IS NULL");
            if let Some(u) = user {
                qb.push(" AND user_id IN (SELECT id FROM users WHERE name = ");
                bind(&mut qb, Val::Text(Some(u)));
                qb.push(")");
            }
            let done = qb
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?
                .rows_affected()
                > 0;
            if done {
                insert_audit::<DB>(audit, now_ms)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<bool, StoreError>(done)
        })
    }

    /// The user `name` as listed, if there is one.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn user(&self, name: &str) -> Result<Option<User>, StoreError> {
        let row: Option<UserRow> = on_pool!(self, |pool, DB| {
            let mut qb = QueryBuilder::<DB>::new(
                "SELECT id, name, role, created_at_ms, disabled FROM users WHERE name = ",
            );
            bind(&mut qb, Val::Text(Some(name)));
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        row.map(|r| {
            Ok(User {
                role: role(&r.role)?,
                id: r.id,
                name: r.name,
                created_at_ms: r.created_at_ms,
                disabled: r.disabled != 0,
            })
        })
        .transpose()
    }

    /// Creates a user and writes `audit` in the same transaction; `Ok(None)` when the name is
    /// taken (nothing changes, nothing is audited), else its id.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn create_user_audited(
        &self,
        user: &NewUser<'_>,
        audit: &NewAuditEntry,
    ) -> Result<Option<i64>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb = QueryBuilder::<DB>::new(
                "INSERT INTO users (name, role, password_hash, created_at_ms) VALUES (",
            );
            bind(&mut qb, Val::Text(Some(user.name)));
            qb.push(", ");
            bind(&mut qb, Val::Text(Some(user.role.as_str())));
            qb.push(", ");
            bind(&mut qb, Val::Text(Some(user.password_hash)));
            qb.push(", ");
            bind(&mut qb, Val::I64(Some(user.created_at_ms)));
            qb.push(") ON CONFLICT (name) DO NOTHING RETURNING id");
            let id = qb
                .build_query_scalar::<i64>()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
            if id.is_some() {
                insert_audit::<DB>(audit, user.created_at_ms)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<Option<i64>, StoreError>(id)
        })
    }

    /// Disables (`disabled`) or re-enables the user `name`, writing `audit` in the same
    /// transaction. Disabling ends every session of the user and revokes every token of
    /// theirs at `now_ms`, at once: the next request with any of them is refused, and
    /// enabling the user again brings none back (they sign in anew). `Ok(None)` if there is
    /// no such user; else `Some(changed)`, false when it already was so (nothing audited).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn set_user_disabled_audited(
        &self,
        name: &str,
        disabled: bool,
        now_ms: i64,
        audit: &NewAuditEntry,
    ) -> Result<Option<bool>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb = QueryBuilder::<DB>::new("SELECT disabled FROM users WHERE name = ");
            bind(&mut qb, Val::Text(Some(name)));
            let Some(was) = qb
                .build_query_scalar::<i32>()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?
            else {
                return Ok(None);
            };
            if (was != 0) == disabled {
                return Ok(Some(false));
            }
            let mut qb = QueryBuilder::<DB>::new("UPDATE users SET disabled = ");
            bind(&mut qb, Val::I32(Some(i32::from(disabled))));
            qb.push(" WHERE name = ");
            bind(&mut qb, Val::Text(Some(name)));
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            if disabled {
                let mut qb = QueryBuilder::<DB>::new(
                    "DELETE FROM sessions WHERE user_id IN (SELECT id FROM users WHERE name = ",
                );
                bind(&mut qb, Val::Text(Some(name)));
                qb.push(")");
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
                let mut qb = QueryBuilder::<DB>::new("UPDATE api_tokens SET revoked_at_ms = ");
                bind(&mut qb, Val::I64(Some(now_ms)));
                qb.push(
                    " WHERE revoked_at_ms IS NULL AND user_id IN \
                     (SELECT id FROM users WHERE name = ",
                );
                bind(&mut qb, Val::Text(Some(name)));
                qb.push(")");
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
            }
            insert_audit::<DB>(audit, now_ms)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<Option<bool>, StoreError>(Some(true))
        })
    }

    /// Sets the role of user `name`, writing `audit` in the same transaction (its `detail`
    /// gets the role before and after). The role applies to the user's sessions and `role`
    /// tokens from their next request. `Ok(None)` if there is no such user, else the role it
    /// had (equal to `new_role` when nothing changed; nothing audited then).
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn set_user_role_audited(
        &self,
        name: &str,
        new_role: Role,
        now_ms: i64,
        audit: &NewAuditEntry,
    ) -> Result<Option<Role>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb = QueryBuilder::<DB>::new("SELECT role FROM users WHERE name = ");
            bind(&mut qb, Val::Text(Some(name)));
            let Some(was) = qb
                .build_query_scalar::<String>()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?
            else {
                return Ok(None);
            };
            let was = role(&was)?;
            if was == new_role {
                return Ok(Some(was));
            }
            let mut qb = QueryBuilder::<DB>::new("UPDATE users SET role = ");
            bind(&mut qb, Val::Text(Some(new_role.as_str())));
            qb.push(" WHERE name = ");
            bind(&mut qb, Val::Text(Some(name)));
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            let mut a = audit.clone();
            a.detail = Some(
                serde_json::json!({
                    "user": name,
                    "role": {"before": was.as_str(), "after": new_role.as_str()},
                })
                .to_string(),
            );
            insert_audit::<DB>(&a, now_ms)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<Option<Role>, StoreError>(Some(was))
        })
    }

    /// Replaces the password hash of user `name` and ends every session of theirs except
    /// `keep_session` (the `id_hash` of the session that changed its own password), writing
    /// `audit` in the same transaction (its outcome may say `{ended}`, replaced by the number
    /// of sessions ended). API tokens are not touched. `Ok(None)` if there is no such user,
    /// else how many sessions were ended.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn set_password_audited(
        &self,
        name: &str,
        password_hash: &str,
        keep_session: Option<&str>,
        now_ms: i64,
        audit: &NewAuditEntry,
    ) -> Result<Option<u64>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb = QueryBuilder::<DB>::new("UPDATE users SET password_hash = ");
            bind(&mut qb, Val::Text(Some(password_hash)));
            qb.push(" WHERE name = ");
            bind(&mut qb, Val::Text(Some(name)));
            let found = qb
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?
                .rows_affected()
                > 0;
            if !found {
                return Ok(None);
            }
            let mut qb = QueryBuilder::<DB>::new(
                "DELETE FROM sessions WHERE user_id IN (SELECT id FROM users WHERE name = ",
            );
            bind(&mut qb, Val::Text(Some(name)));
            qb.push(")");
            if let Some(keep) = keep_session {
                qb.push(" AND id_hash <> ");
                bind(&mut qb, Val::Text(Some(keep)));
            }
            let ended = qb
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?
                .rows_affected();
            let mut a = audit.clone();
            a.outcome = a.outcome.replace("{ended}", &ended.to_string());
            insert_audit::<DB>(&a, now_ms)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<Option<u64>, StoreError>(Some(ended))
        })
    }

    /// The unexpired sessions (at `now_ms`, under `limits`) of `user`, or of every user when
    /// `None`; newest activity first. `current` is false in every item (the caller marks its
    /// own).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn sessions_of(
        &self,
        user: Option<&str>,
        now_ms: i64,
        limits: SessionLimits,
    ) -> Result<Vec<(String, SessionListing)>, StoreError> {
        let rows: Vec<SessionListRow> = on_pool!(self, |pool, DB| {
            let mut qb = QueryBuilder::<DB>::new(
                "SELECT s.id_hash, u.name, s.created_at_ms, s.last_seen_ms, s.ip, s.user_agent \
                 FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.last_seen_ms > ",
            );
            bind(
                &mut qb,
                Val::I64(Some(now_ms.saturating_sub(limits.idle_ms))),
            );
            qb.push(" AND s.created_at_ms > ");
            bind(
                &mut qb,
                Val::I64(Some(now_ms.saturating_sub(limits.absolute_ms))),
            );
            if let Some(u) = user {
                qb.push(" AND u.name = ");
                bind(&mut qb, Val::Text(Some(u)));
            }
            qb.push(" ORDER BY s.last_seen_ms DESC, s.id_hash");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let listing = SessionListing {
                    handle: session_handle(&r.id_hash),
                    user: r.name,
                    created_at_ms: r.created_at_ms,
                    last_seen_ms: r.last_seen_ms,
                    ip: r.ip,
                    user_agent: r.user_agent,
                    current: false,
                };
                (r.id_hash, listing)
            })
            .collect())
    }

    /// Ends sessions of user `name` and writes `audit` in the same transaction (its outcome
    /// may say `{ended}`, replaced by the count): the one whose public handle is `handle`
    /// ([`session_handle`]) when given, else every one but `keep` (an `id_hash`). Returns how
    /// many ended; nothing is audited when none did.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn end_sessions_audited(
        &self,
        name: &str,
        handle: Option<&str>,
        keep: Option<&str>,
        now_ms: i64,
        audit: &NewAuditEntry,
    ) -> Result<u64, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb = QueryBuilder::<DB>::new(
                "DELETE FROM sessions WHERE user_id IN (SELECT id FROM users WHERE name = ",
            );
            bind(&mut qb, Val::Text(Some(name)));
            qb.push(")");
            if let Some(h) = handle {
                // A handle is 16 hex characters (checked by the caller): no LIKE wildcards.
                qb.push(" AND id_hash LIKE ");
                bind(&mut qb, Val::OwnedText(Some(format!("{h}%"))));
            }
            if let Some(k) = keep {
                qb.push(" AND id_hash <> ");
                bind(&mut qb, Val::Text(Some(k)));
            }
            let ended = qb
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?
                .rows_affected();
            if ended > 0 {
                let mut a = audit.clone();
                a.outcome = a.outcome.replace("{ended}", &ended.to_string());
                insert_audit::<DB>(&a, now_ms)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<u64, StoreError>(ended)
        })
    }
}
