//! Users: creating, listing and reading them (with their credentials for signing in), and
//! the audited changes an admin makes (disable, role, password).

use sqlx::QueryBuilder;

use super::{bind, role};
use crate::actions::{NewAuditEntry, Role};
use crate::auth::User;
use crate::store::audit::insert_audit;
use crate::store::dialect::{store_error, Val};
use crate::store::{Pool, Store, StoreError};

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
}
