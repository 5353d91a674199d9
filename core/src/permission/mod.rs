//! Permissions: the separate powers a role grants (issue 10, "Permissions"), the roles that
//! bundle them, and the DLQ-topic scope a role may be limited to.
//!
//! A route or server function that changes something asks for one [`Permission`], never for a
//! role: `actor.can(Permission::Replay)`. Roles are named bundles of permissions; the three
//! built-in ones keep the powers they had before permissions existed, and `redrive.toml` may
//! define more (`[roles.NAME]`, [`RoleConfig`], `docs/access.md`):
//!
//! | permission | viewer | operator | admin |
//! |---|---|---|---|
//! | [`Permission::Replay`] (replay, edit-and-replay's publish, cancel / pause / resume jobs, retry quarantined) | | ✓ | ✓ |
//! | [`Permission::Delete`] (delete, restore, archive) | | ✓ | ✓ |
//! | [`Permission::Edit`] (save an edited version of a record) | | ✓ | ✓ |
//! | [`Permission::Annotate`] (labels and notes) | | ✓ | ✓ |
//! | [`Permission::Approve`] (approve or decline another user's pending request) | | ✓ | ✓ |
//! | [`Permission::ManageRules`] (alert test notifications; reprocessing rules) | | ✓ | ✓ |
//! | [`Permission::ManageUsers`] (users, roles, every user's tokens and sessions) | | | ✓ |
//!
//! Reading is not a permission: every signed-in user reads, within the role's DLQ-topic scope
//! where one applies ([`Role::dlq_topics`]). A scope is a list of [`TopicPattern`]s, written
//! as `REDRIVE_DLQ_TOPICS` entries are: an exact topic name, or a regular expression when the
//! entry starts with `^` (unanchored at the end, as librdkafka reads subscriptions) — plus a
//! glob, an entry with `*` (any run of characters, e.g. `payments.*`), which cannot be a topic
//! name since Kafka does not allow `*` in one.
//!
//! The roles of this process (built-in plus configured) are installed once at start-up
//! ([`install_roles`]); [`Role::parse`] and `crate::auth::parse_role` resolve names against
//! them. A user whose stored role is no longer configured resolves to a role with no
//! permission and an empty scope ([`Role::is_defined`] false): it can do and read nothing.

mod actor;
mod config;
mod error;
mod installed;
mod permissions;
mod role;
mod scope;
#[cfg(test)]
mod tests;

pub use self::config::{RoleConfig, Roles, MAX_ROLE_NAME_CHARS};
pub use self::error::RoleError;
pub use self::installed::{install_roles, installed_roles, role_names};
pub use self::permissions::{Permission, Permissions};
pub use self::role::Role;
pub use self::scope::{TopicPattern, TopicScope};
