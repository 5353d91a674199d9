//! Users, sessions and API tokens (tables of `0003_auth.sql`).
//!
//! Every secret arrives here already hashed: passwords as argon2id PHC strings, session and API
//! tokens as [`crate::auth::secret_hash`]. Times are epoch ms, passed in by the caller (one
//! clock, the server's; tests can move it).
//!
//! One file per table: `users.rs`, `sessions.rs`, `tokens.rs` (`api_tokens`); this one holds
//! what they share (reading a stored role, binding a value).

mod sessions;
mod tokens;
mod users;

use sqlx::QueryBuilder;

use super::dialect::{Dialect, Val};
use super::StoreError;
use crate::actions::Role;

pub use self::sessions::{NewSession, SessionLimits, SessionRecord};
pub use self::tokens::{NewApiToken, TokenOwner};
pub use self::users::{NewUser, UserCredentials};

/// The role stored in `users.role`, resolved against the installed roles. A name no longer
/// configured resolves to a role with no permission and an empty scope (`Role::named`): its
/// users are refused everything with a message, the store does not fail.
fn role(s: &str) -> Result<Role, StoreError> {
    Ok(Role::named(s))
}

fn bind<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, v: Val<'a>) {
    DB::bind(qb, v);
}
