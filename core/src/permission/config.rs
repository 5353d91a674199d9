//! Role definitions of `redrive.toml` ([`RoleConfig`]) and the roles of one process built from
//! them, with their validation ([`Roles::from_config`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::Permission;
use super::{Permissions, Role, RoleError, TopicPattern};

/// One `[roles.NAME]` table of `redrive.toml`.
///
/// ```toml
/// [roles.payments-oncall]
/// permissions = ["replay", "annotate"]
/// dlq_topics = ["payments.*", "^orders-.*-dlt$"]
///
/// [roles.operator]            # a built-in role: only its scope may be set
/// dlq_topics = ["orders.DLT"]
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleConfig {
    /// Permission names ([`Permission::as_str`]). Not allowed on the built-in roles, whose
    /// permissions are fixed; default none (a scoped viewer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Vec<String>>,
    /// DLQ-topic patterns ([`TopicPattern`]); absent means every topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dlq_topics: Option<Vec<String>>,
}

/// Longest role name, in characters.
pub const MAX_ROLE_NAME_CHARS: usize = 64;

/// The roles of one process: the built-in ones plus the configured ones, by name.
#[derive(Debug, Clone)]
pub struct Roles {
    by_name: BTreeMap<String, Role>,
}

impl Default for Roles {
    fn default() -> Self {
        Roles::built_in()
    }
}

impl Roles {
    /// Only the built-in roles, unscoped.
    pub fn built_in() -> Roles {
        Roles {
            by_name: Role::ALL
                .into_iter()
                .map(|r| (r.as_str().to_string(), r))
                .collect(),
        }
    }

    /// The built-in roles plus `config` (`[roles]` of `redrive.toml`).
    ///
    /// Errors (naming the role): a bad name (1 to [`MAX_ROLE_NAME_CHARS`] of letters, digits,
    /// `.`, `_`, `-`), an unknown permission, `permissions` on a built-in role, an empty
    /// `dlq_topics`, a bad topic pattern.
    pub fn from_config(config: &BTreeMap<String, RoleConfig>) -> Result<Roles, RoleError> {
        let mut roles = Roles::built_in();
        for (name, def) in config {
            let fail = |m: String| RoleError(format!("role `{name}`: {m}"));
            let ok_name = !name.is_empty()
                && name.chars().count() <= MAX_ROLE_NAME_CHARS
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !ok_name {
                return Err(fail(format!(
                    "a role name is 1 to {MAX_ROLE_NAME_CHARS} letters, digits, `.`, `_` or `-`"
                )));
            }
            if let Some(topics) = &def.dlq_topics {
                if topics.is_empty() {
                    return Err(fail(
                        "`dlq_topics` is empty, so the role would see nothing; leave it out \
                         for every topic"
                            .into(),
                    ));
                }
                for t in topics {
                    TopicPattern::parse(t).map_err(|e| fail(format!("`dlq_topics`: {e}")))?;
                }
            }
            let dlq_topics = def
                .dlq_topics
                .as_ref()
                .map(|ts| ts.iter().map(|t| t.trim().to_string()).collect());
            let role = match roles.by_name.get(name) {
                Some(built_in) => {
                    if def.permissions.is_some() {
                        return Err(fail(
                            "the permissions of a built-in role are fixed; only `dlq_topics` \
                             may be set (define a role of another name for other permissions)"
                                .into(),
                        ));
                    }
                    Role {
                        dlq_topics,
                        ..built_in.clone()
                    }
                }
                None => {
                    let permissions =
                        Permissions::from_names(def.permissions.as_deref().unwrap_or(&[]))
                            .map_err(|e| fail(format!("`permissions`: {e}")))?;
                    Role::custom(name, permissions, dlq_topics)
                }
            };
            roles.by_name.insert(name.clone(), role);
        }
        Ok(roles)
    }

    /// The role named `name`.
    pub fn get(&self, name: &str) -> Option<&Role> {
        self.by_name.get(name)
    }

    /// Every role name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// Every role, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Role> {
        self.by_name.values()
    }
}
