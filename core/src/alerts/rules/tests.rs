//! Tests of the `[alerts]` configuration: parsing, defaults, validation and redaction.

use serde::Deserialize;

use super::*;

fn parse(text: &str) -> AlertsConfig {
    #[derive(Deserialize)]
    struct Doc {
        alerts: AlertsConfig,
    }
    serde_json::from_value::<Doc>(toml_like(text))
        .map(|d| d.alerts)
        .unwrap()
}

/// The tests write JSON (core has no TOML parser); the server's tests read real TOML.
fn toml_like(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

fn rule(kind: RuleKind) -> RuleConfig {
    RuleConfig {
        name: "r".into(),
        kind,
        threshold: None,
        rate_per_min: None,
        max_age_ms: None,
        window_ms: None,
        for_ms: 0,
        cooldown_ms: 0,
        group_by: GroupBy::DlqTopic,
        dlq_topic: None,
        source_topic: None,
        fingerprint: None,
        consumer_group: None,
        notify: vec![],
        severity: Severity::Warning,
        max_firing: DEFAULT_MAX_FIRING,
    }
}

#[test]
fn defaults_and_parse() {
    let c = parse(
        r#"{"alerts": {"rules": [{"name": "depth", "kind": "dlq_size", "threshold": 10}],
            "notifiers": {"hook": {"kind": "webhook", "url": "http://x", "secret": "s"}}}}"#,
    );
    assert_eq!(c.interval_ms, 15_000);
    assert_eq!(c.rules[0].cooldown_ms, 300_000);
    assert_eq!(c.notifiers["hook"].events_url, PAGERDUTY_EVENTS_URL);
    c.validate().unwrap();
    assert_eq!(c.rules[0].notifiers(&c.notifiers), vec!["hook"]);
}

#[test]
fn bad_rules_name_themselves() {
    let mut c = AlertsConfig::default();
    c.rules.push(rule(RuleKind::DlqSize));
    let e = c.validate().unwrap_err().0;
    assert!(
        e.contains("alert rule `r`") && e.contains("threshold"),
        "{e}"
    );

    let mut r = rule(RuleKind::OldestAge);
    r.max_age_ms = Some(1);
    r.threshold = Some(3);
    c.rules = vec![r];
    let e = c.validate().unwrap_err().0;
    assert!(e.contains("`threshold` does not apply"), "{e}");

    let mut r = rule(RuleKind::Quarantined);
    r.notify = vec!["nope".into()];
    c.rules = vec![r];
    assert!(c.validate().unwrap_err().0.contains("`nope`"));

    c.rules = vec![rule(RuleKind::Quarantined), rule(RuleKind::Quarantined)];
    assert!(c.validate().unwrap_err().0.contains("used twice"));

    let mut r = rule(RuleKind::DeadLetterRate);
    r.rate_per_min = Some(PerMinute(f64::NAN));
    c.rules = vec![r];
    assert!(c.validate().unwrap_err().0.contains("rate_per_min"));

    c.rules = vec![];
    c.notifiers.insert(
        "hook".into(),
        NotifierConfig {
            kind: NotifierKind::Webhook,
            url: "http://x".into(),
            secret: String::new(),
            routing_key: String::new(),
            events_url: PAGERDUTY_EVENTS_URL.into(),
        },
    );
    let e = c.validate().unwrap_err().0;
    assert!(
        e.contains("alert notifier `hook`") && e.contains("secret"),
        "{e}"
    );
}

#[test]
fn every_kind_validates_with_its_parameters() {
    for kind in RuleKind::ALL {
        let mut r = rule(kind);
        match kind {
            RuleKind::DlqSize | RuleKind::IngestLag => r.threshold = Some(1),
            RuleKind::DeadLetterRate => r.rate_per_min = Some(PerMinute(0.5)),
            RuleKind::OldestAge => r.max_age_ms = Some(1),
            _ => {}
        }
        let c = AlertsConfig {
            rules: vec![r],
            ..AlertsConfig::default()
        };
        c.validate().unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    }
}

fn hook(url: &str) -> AlertsConfig {
    let mut c = AlertsConfig::default();
    c.notifiers.insert(
        "hook".into(),
        NotifierConfig {
            kind: NotifierKind::Webhook,
            url: url.into(),
            secret: "s".into(),
            routing_key: String::new(),
            events_url: PAGERDUTY_EVENTS_URL.into(),
        },
    );
    c
}

#[test]
fn notifier_urls_are_parsed_not_prefix_checked() {
    for bad in [
        "http://",
        "https://",
        "http:// spaces.example/x",
        "ftp://files.example/x",
        "hooks.example/redrive",
        "",
        "mailto:ops@example.com",
    ] {
        let e = hook(bad).validate().unwrap_err().0;
        assert!(
            e.contains("alert notifier `hook`") && e.contains("`url`"),
            "{bad:?}: {e}"
        );
    }
    for good in [
        "http://127.0.0.1:9000/hook",
        "https://hooks.slack.com/services/T000/B000/XXXX",
        "https://ops:pw@hooks.example/x?token=1",
    ] {
        hook(good)
            .validate()
            .unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    let mut c = AlertsConfig::default();
    c.notifiers.insert(
        "pd".into(),
        NotifierConfig {
            kind: NotifierKind::Pagerduty,
            url: String::new(),
            secret: String::new(),
            routing_key: "k".into(),
            events_url: "https://".into(),
        },
    );
    let e = c.validate().unwrap_err().0;
    assert!(
        e.contains("alert notifier `pd`") && e.contains("events_url"),
        "{e}"
    );
    c.notifiers.clear();
    c.public_url = "http://".into();
    assert!(c.validate().unwrap_err().0.contains("public_url"));
}

#[test]
fn max_firing_defaults_to_20_and_must_be_positive() {
    let c = parse(r#"{"alerts": {"rules": [{"name": "d", "kind": "dlq_size", "threshold": 1}]}}"#);
    assert_eq!(c.rules[0].max_firing, 20);
    let mut r = rule(RuleKind::Quarantined);
    r.max_firing = 0;
    let c = AlertsConfig {
        rules: vec![r],
        ..AlertsConfig::default()
    };
    assert!(c.validate().unwrap_err().0.contains("max_firing"));
}

#[test]
fn a_dlq_topic_scope_must_be_ingested() {
    let mut r = rule(RuleKind::DlqSize);
    r.name = "orders-depth".into();
    r.threshold = Some(1);
    r.dlq_topic = Some("orders.DLQ".into());
    let c = AlertsConfig {
        rules: vec![r],
        ..AlertsConfig::default()
    };
    let topics = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let e = c
        .check_dlq_scopes(&topics(&["orders.DLT", "^pay-.*-dlt$"]))
        .unwrap_err()
        .0;
    assert!(
        e.contains("alert rule `orders-depth`")
            && e.contains("orders.DLQ")
            && e.contains("`orders.DLT`, `^pay-.*-dlt$`"),
        "{e}"
    );
    c.check_dlq_scopes(&topics(&["orders.DLQ"])).unwrap();
    c.check_dlq_scopes(&topics(&["x", r"^.*\.DLQ$"])).unwrap();
    let mut rules = c.clone();
    rules.rules[0].dlq_topic = None;
    rules.check_dlq_scopes(&topics(&["x"])).unwrap();
}

#[test]
fn redaction_keeps_scheme_and_host_only() {
    assert_eq!(
        redact_notifier_url("https://hooks.slack.com/services/T000/B000/XXXX"),
        "https://hooks.slack.com/<redacted>"
    );
    assert_eq!(
        redact_notifier_url("https://ops:Hunter2@hooks.example:8443/x?token=Q#f"),
        "https://hooks.example:8443/<redacted>"
    );
    assert_eq!(
        redact_notifier_url("http://hooks.example"),
        "http://hooks.example/"
    );
    assert_eq!(redact_notifier_url("not a url"), "<redacted>");
    let mut c = hook("https://u:p@hooks.example/secret-path?token=T");
    c.notifiers.insert(
        "pd".into(),
        NotifierConfig {
            kind: NotifierKind::Pagerduty,
            url: String::new(),
            secret: String::new(),
            routing_key: "R0UTING".into(),
            events_url: PAGERDUTY_EVENTS_URL.into(),
        },
    );
    let r = c.redacted("REDACTED");
    let text = format!("{r:?}");
    for secret in ["u:p", "secret-path", "token=T", "R0UTING"] {
        assert!(!text.contains(secret), "{secret}: {text}");
    }
    assert_eq!(r.notifiers["pd"].events_url, PAGERDUTY_EVENTS_URL);
    // Still a configuration that validates (what `redrive config` prints can be read back).
    r.validate().unwrap();
}
