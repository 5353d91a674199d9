//! Single sign-on in the store: OpenID Connect sign-ins in progress (`oidc_flows`, migration
//! 0021) and the local user row of someone an identity provider signed in.
//!
//! Times are epoch ms, passed in by the caller.

use sqlx::QueryBuilder;

use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::Role;

/// The `password_hash` of a user created by single sign-on: not a PHC string, so no password
/// ever matches it (password sign-in verifies against it and fails). Such a user signs in only
/// through the identity provider, until an admin sets a password.
pub const SSO_PASSWORD_HASH: &str = "!sso";

/// An OpenID Connect sign-in in progress, as `GET /auth/oidc/start` leaves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcFlow {
    /// SHA-256 hex of the `state` sent to the provider (the key).
    pub state_hash: String,
    /// The PKCE code verifier (RFC 7636), secret until the token request.
    pub pkce_verifier: String,
    /// The nonce the ID token must carry.
    pub nonce: String,
    /// A path on this site to go to once signed in.
    pub next_path: String,
    pub created_at_ms: i64,
}

#[derive(Debug, sqlx::FromRow)]
struct FlowRow {
    state_hash: String,
    pkce_verifier: String,
    nonce: String,
    next_path: String,
    created_at_ms: i64,
}

/// The local user that an identity provider's sign-in resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SsoUser {
    pub id: i64,
    pub name: String,
    /// The role now stored (the mapped one, unless the user is disabled).
    pub role: Role,
    /// A user disabled locally stays refused, whatever the provider says.
    pub disabled: bool,
    /// The user did not exist before this sign-in.
    pub created: bool,
    /// The stored role before this sign-in, when it differed (and was changed).
    pub previous_role: Option<Role>,
}

#[derive(Debug, sqlx::FromRow)]
struct UserRow {
    id: i64,
    name: String,
    role: String,
    disabled: i32,
}

fn bind<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, v: Val<'a>) {
    DB::bind(qb, v);
}

impl Store {
    /// Stores a sign-in in progress, and removes those started before `expired_before_ms`
    /// (abandoned at the provider).
    ///
    /// Errors: `Unavailable`, `Database` (e.g. the same state twice).
    pub async fn create_oidc_flow(
        &self,
        flow: &OidcFlow,
        expired_before_ms: i64,
    ) -> Result<(), StoreError> {
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb = QueryBuilder::<DB>::new("DELETE FROM oidc_flows WHERE created_at_ms < ");
            bind(&mut qb, Val::I64(Some(expired_before_ms)));
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            let mut qb = QueryBuilder::<DB>::new(
                "INSERT INTO oidc_flows (state_hash, pkce_verifier, nonce, next_path, \
                 created_at_ms) VALUES (",
            );
            bind(&mut qb, Val::Text(Some(&flow.state_hash)));
            qb.push(", ");
            bind(&mut qb, Val::Text(Some(&flow.pkce_verifier)));
            qb.push(", ");
            bind(&mut qb, Val::Text(Some(&flow.nonce)));
            qb.push(", ");
            bind(&mut qb, Val::Text(Some(&flow.next_path)));
            qb.push(", ");
            bind(&mut qb, Val::I64(Some(flow.created_at_ms)));
            qb.push(")");
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<(), StoreError>(())
        })
    }

    /// Takes (reads and deletes, once) the sign-in in progress whose state hashes to
    /// `state_hash`, if it was started at or after `expired_before_ms`. A second callback with
    /// the same state finds nothing.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn take_oidc_flow(
        &self,
        state_hash: &str,
        expired_before_ms: i64,
    ) -> Result<Option<OidcFlow>, StoreError> {
        let row: Option<FlowRow> = on_write_conn!(self, |conn, DB| {
            let mut qb = QueryBuilder::<DB>::new("DELETE FROM oidc_flows WHERE state_hash = ");
            bind(&mut qb, Val::Text(Some(state_hash)));
            qb.push(" RETURNING state_hash, pkce_verifier, nonce, next_path, created_at_ms");
            qb.build_query_as().fetch_optional(&mut *conn).await
        })
        .map_err(store_error)?;
        Ok(row
            .filter(|r| r.created_at_ms >= expired_before_ms)
            .map(|r| OidcFlow {
                state_hash: r.state_hash,
                pkce_verifier: r.pkce_verifier,
                nonce: r.nonce,
                next_path: r.next_path,
                created_at_ms: r.created_at_ms,
            }))
    }

    /// The local user `name` for a single sign-on with `role`: created (with
    /// [`SSO_PASSWORD_HASH`]) when missing, its role set to `role` when it differs. A disabled
    /// user is returned as it is (role unchanged), for the caller to refuse.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt` (an unknown stored role).
    pub async fn sso_user(
        &self,
        name: &str,
        role: Role,
        now_ms: i64,
    ) -> Result<SsoUser, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb = QueryBuilder::<DB>::new(
                "INSERT INTO users (name, role, password_hash, created_at_ms) VALUES (",
            );
            bind(&mut qb, Val::Text(Some(name)));
            qb.push(", ");
            bind(&mut qb, Val::Text(Some(role.as_str())));
            qb.push(", ");
            bind(&mut qb, Val::Text(Some(SSO_PASSWORD_HASH)));
            qb.push(", ");
            bind(&mut qb, Val::I64(Some(now_ms)));
            qb.push(") ON CONFLICT (name) DO NOTHING RETURNING id");
            let created: Option<i64> = qb
                .build_query_scalar::<i64>()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
            if let Some(id) = created {
                tx.commit().await.map_err(store_error)?;
                return Ok(SsoUser {
                    id,
                    name: name.to_string(),
                    role,
                    disabled: false,
                    created: true,
                    previous_role: None,
                });
            }
            let mut qb =
                QueryBuilder::<DB>::new("SELECT id, name, role, disabled FROM users WHERE name = ");
            bind(&mut qb, Val::Text(Some(name)));
            let row: UserRow = qb
                .build_query_as()
                .fetch_one(&mut *tx)
                .await
                .map_err(store_error)?;
            // A role gone from the configuration resolves to one that can do nothing.
            let stored = Role::parse(&row.role).unwrap_or_else(|| Role::named(&row.role));
            let disabled = row.disabled != 0;
            let change = !disabled && stored != role;
            if change {
                let mut qb = QueryBuilder::<DB>::new("UPDATE users SET role = ");
                bind(&mut qb, Val::Text(Some(role.as_str())));
                qb.push(" WHERE id = ");
                bind(&mut qb, Val::I64(Some(row.id)));
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<SsoUser, StoreError>(SsoUser {
                id: row.id,
                name: row.name,
                role: if change { role } else { stored.clone() },
                disabled,
                created: false,
                previous_role: change.then_some(stored),
            })
        })
    }
}
