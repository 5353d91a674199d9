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

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::actions::Actor;

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

/// Why a role definition or a DLQ-topic pattern was refused; the message names the entry and
/// says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RoleError(pub String);

/// One entry of a DLQ-topic scope: an exact topic name, a glob with `*`, or a regular
/// expression starting with `^` (the module docs).
#[derive(Debug, Clone)]
pub enum TopicPattern {
    Exact(String),
    /// A glob (compiled to an anchored regex) or a `^` regular expression.
    Regex(regex::Regex),
}

impl TopicPattern {
    /// Parses one entry (surrounding spaces trimmed).
    ///
    /// Errors: an invalid regular expression, or an entry that is neither a legal topic name
    /// (`[a-zA-Z0-9._-]`, 1 to 249 bytes) nor a glob nor a `^` expression.
    pub fn parse(entry: &str) -> Result<TopicPattern, RoleError> {
        let e = entry.trim();
        if e.starts_with('^') {
            return regex::Regex::new(e)
                .map(TopicPattern::Regex)
                .map_err(|err| {
                    RoleError(format!("`{e}` is not a valid regular expression: {err}"))
                });
        }
        if e.contains('*') {
            let body: Vec<&str> = e.split('*').collect();
            let legal = body.iter().all(|part| {
                part.is_empty()
                    || crate::actions::valid_topic_name(part)
                    || part.bytes().all(|b| b == b'.')
            });
            if !legal {
                return Err(bad_pattern(e));
            }
            let re = format!(
                "^{}$",
                body.iter()
                    .map(|part| regex::escape(part))
                    .collect::<Vec<_>>()
                    .join(".*")
            );
            return regex::Regex::new(&re)
                .map(TopicPattern::Regex)
                .map_err(|_| bad_pattern(e));
        }
        if crate::actions::valid_topic_name(e) {
            Ok(TopicPattern::Exact(e.to_string()))
        } else {
            Err(bad_pattern(e))
        }
    }

    /// Whether `topic` matches.
    pub fn matches(&self, topic: &str) -> bool {
        match self {
            TopicPattern::Exact(t) => t == topic,
            TopicPattern::Regex(re) => re.is_match(topic),
        }
    }
}

fn bad_pattern(e: &str) -> RoleError {
    RoleError(format!(
        "`{e}` is not a DLQ-topic pattern: give a topic name (`orders.DLT`), a glob with `*` \
         (`payments.*`) or a regular expression starting with `^` (`^orders-.*-dlt$`)"
    ))
}

/// A compiled DLQ-topic scope ([`Role::dlq_topics`]): the topics an actor sees and acts on.
#[derive(Debug, Clone)]
pub struct TopicScope {
    patterns: Vec<TopicPattern>,
}

impl TopicScope {
    /// Compiles `entries`. An entry that does not parse matches nothing (start-up validation
    /// refused such entries already; a scope never widens by error).
    pub fn compile<S: AsRef<str>>(entries: &[S]) -> TopicScope {
        TopicScope {
            patterns: entries
                .iter()
                .filter_map(|e| TopicPattern::parse(e.as_ref()).ok())
                .collect(),
        }
    }

    /// Whether `topic` is in the scope.
    pub fn matches(&self, topic: &str) -> bool {
        self.patterns.iter().any(|p| p.matches(topic))
    }

    /// The members of `topics` in the scope, in their order.
    pub fn select(&self, topics: &[String]) -> Vec<String> {
        topics.iter().filter(|t| self.matches(t)).cloned().collect()
    }
}

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
    name: Cow<'static, str>,
    permissions: Permissions,
    /// `None`: every DLQ topic; `Some(patterns)`: only matching ones (none if empty).
    dlq_topics: Option<Vec<String>>,
    /// False for a name this process's configuration does not define.
    defined: bool,
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

static INSTALLED: RwLock<Option<Arc<Roles>>> = RwLock::new(None);

/// Makes `roles` the roles of this process (`serve` and the CLI call it once at start-up, from
/// the configuration). Later calls replace them.
pub fn install_roles(roles: Roles) {
    let mut slot = INSTALLED.write().unwrap_or_else(|e| e.into_inner());
    *slot = Some(Arc::new(roles));
}

/// The installed roles ([`install_roles`]); the built-in ones if none were installed.
pub fn installed_roles() -> Arc<Roles> {
    let slot = INSTALLED.read().unwrap_or_else(|e| e.into_inner());
    slot.clone().unwrap_or_else(|| Arc::new(Roles::built_in()))
}

/// The installed role names as a sentence part: `` `admin`, `operator`, `viewer` ``.
pub fn role_names() -> String {
    installed_roles()
        .names()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Actor {
    /// Whether this actor holds permission `p`: its role grants it, and it is not a
    /// `read_only` API token (which holds none).
    pub fn can(&self, p: Permission) -> bool {
        !self.read_only && self.role.grants(p)
    }

    /// The DLQ topics this actor is limited to, compiled; `None` for every topic.
    pub fn topic_scope(&self) -> Option<TopicScope> {
        self.role.dlq_topics().map(TopicScope::compile)
    }

    /// Whether this actor sees and acts on dead letters of DLQ topic `topic`.
    pub fn sees_topic(&self, topic: &str) -> bool {
        self.topic_scope().is_none_or(|s| s.matches(topic))
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
        for r in Role::ALL {
            assert!(r.is_defined() && r.is_built_in() && r.dlq_topics().is_none());
            assert_eq!(Roles::built_in().get(r.as_str()), Some(&r));
        }
    }

    #[test]
    fn permission_sets_serialise_as_names() {
        let set: Permissions = [Permission::Annotate, Permission::Replay]
            .into_iter()
            .collect();
        assert_eq!(
            serde_json::to_string(&set).unwrap(),
            r#"["replay","annotate"]"#
        );
        let back: Permissions = serde_json::from_str(r#"["annotate","replay"]"#).unwrap();
        assert_eq!(back, set);
        assert_eq!(Permissions::ALL.iter().count(), Permission::ALL.len());
        let err = Permissions::from_names(&["replay", "root"]).unwrap_err();
        assert!(err.0.contains("`root` is not a permission"), "{err}");
        assert!(err.0.contains("manage_rules"), "{err}");
    }

    #[test]
    fn topic_patterns() {
        let m = |p: &str, t: &str| TopicPattern::parse(p).unwrap().matches(t);
        // Exact names.
        assert!(m("orders.DLT", "orders.DLT"));
        assert!(!m("orders.DLT", "orders.DLTX"));
        assert!(!m("orders.DLT", "ordersXDLT"));
        // Globs: `*` is any run, everything else literal (`.` too), anchored both ends.
        assert!(m("payments.*", "payments.DLT"));
        assert!(m("payments.*", "payments."));
        assert!(!m("payments.*", "paymentsXDLT"));
        assert!(!m("payments.*", "old.payments.DLT"));
        assert!(m("*-dlt", "orders-dlt"));
        assert!(m("a*b*c", "a-x-b-y-c"));
        // Regexes start with `^`, unanchored at the end unless they say `$`.
        assert!(m("^orders-.*-dlt$", "orders-eu-dlt"));
        assert!(!m("^orders-.*-dlt$", "orders-eu-dlt2"));
        assert!(m("^orders", "orders-anything"));
        assert!(!m("^orders", "my-orders"));
        // Refused, with a message saying what to write.
        for bad in ["", "orders DLT", "a/b", "^(", "pay*ments/x"] {
            let e = TopicPattern::parse(bad).unwrap_err();
            assert!(
                e.0.contains("not a DLQ-topic pattern") || e.0.contains("regular expression"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn scopes_select_known_topics() {
        let s = TopicScope::compile(&["payments.*", "^orders-.*-dlt$", "audit.DLT"]);
        let known: Vec<String> = ["payments.DLT", "orders-eu-dlt", "audit.DLT", "other.DLT"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            s.select(&known),
            ["payments.DLT", "orders-eu-dlt", "audit.DLT"]
        );
        assert!(TopicScope::compile::<&str>(&[]).select(&known).is_empty());
    }

    #[allow(clippy::type_complexity)]
    fn config(
        entries: &[(&str, Option<&[&str]>, Option<&[&str]>)],
    ) -> BTreeMap<String, RoleConfig> {
        let v = |x: Option<&[&str]>| x.map(|x| x.iter().map(|s| s.to_string()).collect());
        entries
            .iter()
            .map(|(n, p, t)| {
                (
                    n.to_string(),
                    RoleConfig {
                        permissions: v(*p),
                        dlq_topics: v(*t),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn custom_roles_resolve() {
        let roles = Roles::from_config(&config(&[
            (
                "payments-oncall",
                Some(&["replay", "annotate"]),
                Some(&["payments.*"]),
            ),
            ("auditor", None, None),
            ("operator", None, Some(&["orders.DLT"])),
        ]))
        .unwrap();
        let on_call = roles.get("payments-oncall").unwrap();
        assert!(on_call.grants(Permission::Replay) && on_call.grants(Permission::Annotate));
        assert!(!on_call.grants(Permission::Delete));
        assert_eq!(on_call.dlq_topics(), Some(&["payments.*".to_string()][..]));
        let auditor = roles.get("auditor").unwrap();
        assert_eq!(auditor.permissions(), Permissions::NONE);
        assert!(auditor.dlq_topics().is_none() && auditor.is_defined());
        // A built-in role keeps its permissions and takes the scope.
        let op = roles.get("operator").unwrap();
        assert_eq!(op.permissions(), Role::Operator.permissions());
        assert_eq!(op.dlq_topics(), Some(&["orders.DLT".to_string()][..]));
        assert_eq!(
            roles.names().collect::<Vec<_>>(),
            ["admin", "auditor", "operator", "payments-oncall", "viewer"]
        );
    }

    #[test]
    fn role_config_errors_are_clear() {
        let err = |c| Roles::from_config(&c).unwrap_err().0;
        let e = err(config(&[("x", Some(&["replay", "rm"]), None)]));
        assert!(
            e.starts_with("role `x`: `permissions`: `rm` is not a permission"),
            "{e}"
        );
        let e = err(config(&[("x", None, Some(&["^("]))]));
        assert!(
            e.starts_with("role `x`: `dlq_topics`: `^(` is not a valid regular"),
            "{e}"
        );
        let e = err(config(&[("x", None, Some(&["a b"]))]));
        assert!(e.contains("not a DLQ-topic pattern"), "{e}");
        let e = err(config(&[("x", None, Some(&[]))]));
        assert!(e.contains("`dlq_topics` is empty"), "{e}");
        let e = err(config(&[("admin", Some(&["replay"]), None)]));
        assert!(
            e.contains("permissions of a built-in role are fixed"),
            "{e}"
        );
        let e = err(config(&[("bad name", None, None)]));
        assert!(e.contains("a role name is"), "{e}");
    }

    #[test]
    fn an_unknown_role_can_do_and_see_nothing() {
        let r = Role::named("gone-team");
        assert!(!r.is_defined());
        assert_eq!(r.as_str(), "gone-team");
        let actor = Actor::new("u", r);
        for p in Permission::ALL {
            assert!(!actor.can(p));
        }
        assert!(!actor.sees_topic("orders.DLT"));
        let admin = Actor {
            role: Role::Admin,
            ..actor
        };
        assert!(admin.sees_topic("orders.DLT") && admin.topic_scope().is_none());
    }

    #[test]
    fn roles_survive_the_ui_round_trip() {
        let r = Role::custom(
            "team",
            [Permission::Replay].into_iter().collect(),
            Some(vec!["payments.*".into()]),
        );
        let json = serde_json::to_string(&r).unwrap();
        let back: Role = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn actors_stored_before_permissions_still_read() {
        let old = r#"{"user":"ops","role":"operator","via_token":null,"client_ip":null,"user_agent":null}"#;
        let a: Actor = serde_json::from_str(old).unwrap();
        assert_eq!(a.role, Role::Operator);
        assert!(a.can(Permission::Replay) && !a.can(Permission::ManageUsers));
        let gone: Actor = serde_json::from_str(&old.replace("operator", "vanished")).unwrap();
        assert!(!gone.role.is_defined() && !gone.can(Permission::Replay));
    }
}
