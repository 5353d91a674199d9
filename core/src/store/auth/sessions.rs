//! Sessions: creating them at sign-in, looking one up under its lifetimes, touching,
//! listing, ending and purging them.

use sqlx::QueryBuilder;

use super::{bind, role};
use crate::actions::{NewAuditEntry, Role};
use crate::auth::{session_handle, SessionListing};
use crate::store::audit::insert_audit;
use crate::store::dialect::{store_error, Val};
use crate::store::{Pool, Store, StoreError};

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
struct SessionListRow {
    id_hash: String,
    name: String,
    created_at_ms: i64,
    last_seen_ms: i64,
    ip: Option<String>,
    user_agent: Option<String>,
}

impl Store {
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
