//! API tokens: storing them (with expiry, scope and audit), resolving one to the user it acts
//! as, listing, touching and revoking them.

use sqlx::QueryBuilder;

use super::{bind, role};
use crate::actions::{NewAuditEntry, Role};
use crate::auth::{ApiToken, TokenScope};
use crate::store::audit::insert_audit;
use crate::store::dialect::{store_error, Val};
use crate::store::{Pool, Store, StoreError};

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

impl Store {
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
}
