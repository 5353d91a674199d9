//! Permissions: the separate powers a role grants (issue 10, "Permissions").
//!
//! A route or server function that changes something asks for one [`Permission`], never for a
//! role: `actor.can(Permission::Replay)`. Roles are named bundles of permissions; the three
//! built-in ones ([`Role::grants`]) keep the powers they had before permissions existed:
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
//! Reading is not a permission: every signed-in user reads (within their topic scope, where
//! one applies).

use serde::{Deserialize, Serialize};

use crate::actions::{Actor, Role};

/// One power over dead letters or over redrive itself. Serialised in `snake_case`
/// (`"manage_rules"`), the spelling used in `redrive.toml` and in error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Replay dead letters (one, selected, all matching), and cancel, pause and resume replay
    /// jobs; retry quarantined records.
    Replay,
    /// Delete (soft) and restore dead letters; archive.
    Delete,
    /// Save an edited version of a dead letter (edit and replay also needs [`Self::Replay`] to
    /// publish it).
    Edit,
    /// Add and remove labels, set notes, on dead letters and error groups.
    Annotate,
    /// Approve or decline a pending request made by another user (four-eyes).
    Approve,
    /// Manage automation and alerting: send test notifications, edit reprocessing rules.
    ManageRules,
    /// Manage users, roles, API tokens and sessions of every user.
    ManageUsers,
}

impl Permission {
    /// Every permission, in declaration order.
    pub const ALL: [Permission; 7] = [
        Permission::Replay,
        Permission::Delete,
        Permission::Edit,
        Permission::Annotate,
        Permission::Approve,
        Permission::ManageRules,
        Permission::ManageUsers,
    ];

    /// The `snake_case` name (`"manage_rules"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Replay => "replay",
            Permission::Delete => "delete",
            Permission::Edit => "edit",
            Permission::Annotate => "annotate",
            Permission::Approve => "approve",
            Permission::ManageRules => "manage_rules",
            Permission::ManageUsers => "manage_users",
        }
    }

    /// Parses a name as [`Self::as_str`] spells it.
    pub fn parse(s: &str) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Role {
    /// Whether this built-in role grants `p` (the table in the module docs).
    pub fn grants(self, p: Permission) -> bool {
        match self {
            Role::Viewer => false,
            Role::Operator => p != Permission::ManageUsers,
            Role::Admin => true,
        }
    }
}

impl Actor {
    /// Whether this actor holds permission `p`: its role grants it, and it is not a
    /// `read_only` API token (which holds none).
    pub fn can(&self, p: Permission) -> bool {
        !self.read_only && self.role.grants(p)
    }

    /// Whether this actor may do what the role `needed` may (the role checks that predate
    /// permissions): a `read_only` token only what a viewer may.
    pub fn allows(&self, needed: Role) -> bool {
        if self.read_only {
            Role::Viewer.allows(needed)
        } else {
            self.role.allows(needed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Permission::ALL {
            assert_eq!(Permission::parse(p.as_str()), Some(p));
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.as_str()));
        }
        assert_eq!(Permission::parse("root"), None);
    }

    #[test]
    fn built_in_roles_keep_their_powers() {
        for p in Permission::ALL {
            assert!(!Role::Viewer.grants(p));
            assert!(Role::Admin.grants(p));
            assert_eq!(Role::Operator.grants(p), p != Permission::ManageUsers);
        }
    }
}
