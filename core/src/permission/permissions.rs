//! The permissions: each separate power ([`Permission`]) with its `snake_case` name, and sets
//! of them ([`Permissions`]).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::RoleError;

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

/// A set of [`Permission`]s. Serialised as a list of names (`["replay", "annotate"]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Permissions(u8);

impl Permissions {
    /// No permission (a viewer).
    pub const NONE: Permissions = Permissions(0);
    /// Every permission (an admin).
    pub const ALL: Permissions = Permissions(0b111_1111);

    const fn bit(p: Permission) -> u8 {
        1 << (p as u8)
    }

    /// This set plus `p`.
    pub const fn with(self, p: Permission) -> Permissions {
        Permissions(self.0 | Self::bit(p))
    }

    /// This set without `p`.
    pub const fn without(self, p: Permission) -> Permissions {
        Permissions(self.0 & !Self::bit(p))
    }

    /// Whether `p` is in the set.
    pub const fn contains(self, p: Permission) -> bool {
        self.0 & Self::bit(p) != 0
    }

    /// The permissions in the set, in [`Permission::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Permission> {
        Permission::ALL
            .into_iter()
            .filter(move |p| self.contains(*p))
    }

    /// Parses permission names as `redrive.toml` spells them.
    ///
    /// Errors: the first unknown name, with the list of known ones.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<Permissions, RoleError> {
        let mut set = Permissions::NONE;
        for n in names {
            let n = n.as_ref().trim();
            let p = Permission::parse(n).ok_or_else(|| {
                RoleError(format!(
                    "`{n}` is not a permission; use {}",
                    Permission::ALL.map(Permission::as_str).join(", ")
                ))
            })?;
            set = set.with(p);
        }
        Ok(set)
    }
}

impl FromIterator<Permission> for Permissions {
    fn from_iter<I: IntoIterator<Item = Permission>>(iter: I) -> Self {
        iter.into_iter().fold(Permissions::NONE, Permissions::with)
    }
}

impl Serialize for Permissions {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Permissions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Vec::<Permission>::deserialize(d)?.into_iter().collect())
    }
}
