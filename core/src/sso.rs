//! Single sign-on: from what an identity provider says about a user (an OpenID Connect ID
//! token's claims, or a trusted reverse proxy's headers) to a redrive user name and role.
//!
//! - [`RoleMapping`]: the groups an IdP reports → one role. Several mapped groups give the
//!   role with the most permissions ([`crate::permission::Permission`]); no mapped group gives
//!   `default_role`, or a refusal when there is none.
//! - [`groups_from_claim`] reads a groups claim in the shapes IdPs send (a JSON array of
//!   strings, or one string, comma-separated).
//! - [`user_name_from_claims`] picks the user name (the configured claim, then `sub`, then
//!   `email`) and checks it like any redrive user name.
//!
//! No web or crypto here: the server's `auth::oidc` and `auth::proxy` modules do the protocol.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::actions::Role;
use crate::auth::{parse_role, validate_user_name, AuthError};
use crate::permission::Permission;

/// How this redrive can be signed in to, for the sign-in page
/// (`GET /api/auth/sign-in-options`, public).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SignInOptions {
    /// "Sign in with SSO" (`[oidc]` is set): a link to `/auth/oidc/start`.
    pub sso: bool,
    /// The user name and password form (unless `[oidc] disable_password_sign_in`).
    pub password: bool,
}

impl Default for SignInOptions {
    fn default() -> Self {
        SignInOptions {
            sso: false,
            password: true,
        }
    }
}

/// Most groups read from one claim or header; the rest are ignored (a hostile or broken IdP
/// cannot make redrive work through a million groups).
pub const MAX_GROUPS: usize = 1000;

/// The groups → role table of `[oidc] role_mapping` (shared by `[proxy_auth]`), parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleMapping {
    /// Group name (exact, case-sensitive) → role.
    pub groups: BTreeMap<String, Role>,
    /// The role of a user none of whose groups is mapped; `None` refuses them.
    pub default_role: Option<Role>,
}

/// Why [`RoleMapping::role_for`] gave no role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "none of your groups ({groups}) is given a role in redrive, and there is no default role; \
     ask an admin to map one of them (`[oidc] role_mapping`)"
)]
pub struct NoMappedGroup {
    /// The user's groups, comma-separated (`-` when none), at most 20 of them.
    pub groups: String,
}

impl RoleMapping {
    /// Parses `group = "role"` pairs and the default role (empty or `none` = no default).
    /// Role names go through [`parse_role`].
    ///
    /// Errors: `BadRole` naming the first unknown role.
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        default_role: &str,
    ) -> Result<RoleMapping, AuthError> {
        let mut groups = BTreeMap::new();
        for (group, role) in pairs {
            groups.insert(group.to_string(), parse_role(role.trim())?);
        }
        let default_role = match default_role.trim() {
            "" | "none" => None,
            r => Some(parse_role(r)?),
        };
        Ok(RoleMapping {
            groups,
            default_role,
        })
    }

    /// The role of a user in `groups`: of the mapped ones, the role granting the most
    /// permissions (ties: the higher built-in role); else `default_role`.
    ///
    /// Errors: [`NoMappedGroup`] when no group is mapped and there is no default role.
    pub fn role_for(&self, groups: &[String]) -> Result<Role, NoMappedGroup> {
        groups
            .iter()
            .filter_map(|g| self.groups.get(g))
            .max_by_key(|r| (power(r), r.is_built_in(), r.as_str().to_string()))
            .cloned()
            .or_else(|| self.default_role.clone())
            .ok_or_else(|| NoMappedGroup {
                groups: if groups.is_empty() {
                    "-".to_string()
                } else {
                    groups
                        .iter()
                        .take(20)
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            })
    }
}

/// How many permissions `role` grants.
fn power(role: &Role) -> usize {
    Permission::ALL.iter().filter(|p| role.grants(**p)).count()
}

/// The groups in a claim's value: an array of strings (non-strings skipped), or one string
/// split at commas; blank entries dropped; at most [`MAX_GROUPS`]. Anything else: none.
pub fn groups_from_claim(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .take(MAX_GROUPS)
            .map(str::to_string)
            .collect(),
        Some(Value::String(s)) => groups_from_list(s),
        _ => Vec::new(),
    }
}

/// The groups of a comma-separated list (a proxy's groups header), blank entries dropped, at
/// most [`MAX_GROUPS`].
pub fn groups_from_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .take(MAX_GROUPS)
        .map(str::to_string)
        .collect()
}

/// The redrive user name in `claims` (a JSON object): the string claim `user_claim`, else
/// `sub`, else `email`, the first that is a valid user name
/// ([`validate_user_name`]: letters, digits, `.`, `_`, `-`, `@`; at most 64).
///
/// Errors: `BadUserName` when none of them is.
pub fn user_name_from_claims(claims: &Value, user_claim: &str) -> Result<String, AuthError> {
    [user_claim, "sub", "email"]
        .into_iter()
        .filter_map(|c| claims.get(c).and_then(Value::as_str))
        .map(str::trim)
        .find(|n| validate_user_name(n).is_ok())
        .map(str::to_string)
        .ok_or(AuthError::BadUserName)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn mapping(default_role: &str) -> RoleMapping {
        RoleMapping::parse(
            [
                ("redrive-admins", "admin"),
                ("oncall", "operator"),
                ("everyone", "viewer"),
            ],
            default_role,
        )
        .unwrap()
    }

    fn groups(gs: &[&str]) -> Vec<String> {
        gs.iter().map(|g| g.to_string()).collect()
    }

    #[test]
    fn the_most_powerful_mapped_group_wins() {
        let m = mapping("none");
        assert_eq!(m.role_for(&groups(&["oncall"])), Ok(Role::Operator));
        assert_eq!(
            m.role_for(&groups(&["everyone", "redrive-admins", "oncall"])),
            Ok(Role::Admin)
        );
        assert_eq!(
            m.role_for(&groups(&["everyone", "oncall", "x"])),
            Ok(Role::Operator)
        );
        // Exact, case-sensitive names.
        let refused = m.role_for(&groups(&["OnCall", "contractors"])).unwrap_err();
        assert_eq!(refused.groups, "OnCall, contractors");
        assert_eq!(m.role_for(&[]).unwrap_err().groups, "-");
    }

    #[test]
    fn default_role_for_unmapped_users() {
        assert_eq!(
            mapping("viewer").role_for(&groups(&["x"])),
            Ok(Role::Viewer)
        );
        assert_eq!(mapping("").default_role, None);
        assert_eq!(
            RoleMapping::parse([("a", "root")], "none"),
            Err(AuthError::BadRole("root".into()))
        );
        assert!(RoleMapping::parse([], "superuser").is_err());
    }

    #[test]
    fn groups_in_the_shapes_idps_send() {
        assert_eq!(
            groups_from_claim(Some(&json!(["a", " b ", "", 3, "c"]))),
            groups(&["a", "b", "c"])
        );
        assert_eq!(
            groups_from_claim(Some(&json!("a, b,,c"))),
            groups(&["a", "b", "c"])
        );
        assert!(groups_from_claim(Some(&json!({"a": 1}))).is_empty());
        assert!(groups_from_claim(None).is_empty());
        let many: Vec<String> = (0..5000).map(|i| i.to_string()).collect();
        assert_eq!(groups_from_list(&many.join(",")).len(), MAX_GROUPS);
    }

    #[test]
    fn user_name_claim_with_fallbacks() {
        let c = json!({"preferred_username": "alice", "sub": "123", "email": "a@x.org"});
        assert_eq!(
            user_name_from_claims(&c, "preferred_username").unwrap(),
            "alice"
        );
        assert_eq!(user_name_from_claims(&c, "email").unwrap(), "a@x.org");
        // An unusable preferred name falls back to `sub`.
        let c = json!({"preferred_username": "Alice Smith", "sub": "u-42"});
        assert_eq!(
            user_name_from_claims(&c, "preferred_username").unwrap(),
            "u-42"
        );
        let c = json!({"sub": "has space", "email": 3});
        assert_eq!(
            user_name_from_claims(&c, "preferred_username"),
            Err(AuthError::BadUserName)
        );
    }
}
