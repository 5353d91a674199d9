//! A role as resolved for a user ([`Role`]): the built-in roles, resolution of a name against
//! the installed roles, and how a role is serialised and read back.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::install_roles;
use super::{installed_roles, Permission, Permissions};
#[cfg(doc)]
use crate::actions::Actor;

/// A role as resolved for a user: its name, the permissions it grants and its DLQ-topic scope.
/// The built-in roles are the constants [`Role::Viewer`], [`Role::Operator`], [`Role::Admin`]
/// (unscoped); [`Role::parse`] resolves any name against the installed roles, which may scope
/// the built-in ones too. Serialised as a struct for the UI (which hides what the role may not
/// do); the store keeps only the name ([`Role::as_str`]) in `users.role`. Deserialises from
/// that struct or from a bare name (`"operator"`, how an [`Actor`] stored before permissions
/// existed spells it, e.g. in `bulk_actions.actor_json`), resolved with [`Role::named`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "RoleRepr")]
pub struct Role {
    pub(super) name: Cow<'static, str>,
    pub(super) permissions: Permissions,
    /// `None`: every DLQ topic; `Some(patterns)`: only matching ones (none if empty).
    pub(super) dlq_topics: Option<Vec<String>>,
    /// False for a name this process's configuration does not define.
    pub(super) defined: bool,
}

/// The forms a [`Role`] is read from.
#[derive(Deserialize)]
#[serde(untagged)]
enum RoleRepr {
    Name(String),
    Full {
        name: String,
        permissions: Permissions,
        dlq_topics: Option<Vec<String>>,
        defined: bool,
    },
}

impl From<RoleRepr> for Role {
    fn from(r: RoleRepr) -> Role {
        match r {
            RoleRepr::Name(name) => Role::named(&name),
            RoleRepr::Full {
                name,
                permissions,
                dlq_topics,
                defined,
            } => Role {
                name: Cow::Owned(name),
                permissions,
                dlq_topics,
                defined,
            },
        }
    }
}

#[allow(non_upper_case_globals)]
impl Role {
    /// Reads everything, changes nothing.
    pub const Viewer: Role = Role::built_in("viewer", Permissions::NONE);
    /// Every permission but [`Permission::ManageUsers`].
    pub const Operator: Role = Role::built_in(
        "operator",
        Permissions::ALL.without(Permission::ManageUsers),
    );
    /// Every permission.
    pub const Admin: Role = Role::built_in("admin", Permissions::ALL);

    /// The built-in roles, least powerful first.
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Operator, Role::Admin];

    const fn built_in(name: &'static str, permissions: Permissions) -> Role {
        Role {
            name: Cow::Borrowed(name),
            permissions,
            dlq_topics: None,
            defined: true,
        }
    }

    /// A custom role (as `[roles.NAME]` defines it).
    pub fn custom(name: &str, permissions: Permissions, dlq_topics: Option<Vec<String>>) -> Role {
        Role {
            name: Cow::Owned(name.to_string()),
            permissions,
            dlq_topics,
            defined: true,
        }
    }

    /// The role named `name` in the installed roles ([`install_roles`]; the built-in ones
    /// until then), or `None`.
    pub fn parse(name: &str) -> Option<Role> {
        installed_roles().get(name).cloned()
    }

    /// [`Role::parse`], or for a name not (or no longer) configured, a role of that name
    /// with no permission and an empty scope ([`Role::is_defined`] false). For names read
    /// back from the store: a role removed from the configuration locks its users out of
    /// everything, never panics.
    pub fn named(name: &str) -> Role {
        Role::parse(name).unwrap_or_else(|| Role {
            name: Cow::Owned(name.to_string()),
            permissions: Permissions::NONE,
            dlq_topics: Some(Vec::new()),
            defined: false,
        })
    }

    /// The name (`operator`, `payments-oncall`), as stored in `users.role`.
    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// Whether this role grants `p`.
    pub fn grants(&self, p: Permission) -> bool {
        self.permissions.contains(p)
    }

    /// Every permission this role grants.
    pub fn permissions(&self) -> Permissions {
        self.permissions
    }

    /// The DLQ-topic patterns this role is limited to; `None` for every topic.
    pub fn dlq_topics(&self) -> Option<&[String]> {
        self.dlq_topics.as_deref()
    }

    /// False if the name is not defined in this process's configuration (see [`Role::named`]).
    pub fn is_defined(&self) -> bool {
        self.defined
    }

    /// Whether this is one of the three built-in roles (by name).
    pub fn is_built_in(&self) -> bool {
        Role::ALL.iter().any(|r| r.name == self.name)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
