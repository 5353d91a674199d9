//! Tests of permissions, roles, role configuration and DLQ-topic scopes.

use std::collections::BTreeMap;

use super::*;
use crate::actions::Actor;

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
fn config(entries: &[(&str, Option<&[&str]>, Option<&[&str]>)]) -> BTreeMap<String, RoleConfig> {
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
    let old =
        r#"{"user":"ops","role":"operator","via_token":null,"client_ip":null,"user_agent":null}"#;
    let a: Actor = serde_json::from_str(old).unwrap();
    assert_eq!(a.role, Role::Operator);
    assert!(a.can(Permission::Replay) && !a.can(Permission::ManageUsers));
    let gone: Actor = serde_json::from_str(&old.replace("operator", "vanished")).unwrap();
    assert!(!gone.role.is_defined() && !gone.can(Permission::Replay));
}
