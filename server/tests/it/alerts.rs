//! Built-in alerts through the real binary (`docs/alerts.md`): a real broker feeding ingest,
//! SQLite and PostgreSQL, and a real HTTP receiver ([`Receiver`]) standing in for the
//! webhook, Slack and PagerDuty endpoints. Every rule kind fires once, stays de-duplicated
//! while its condition holds (across a restart too), and resolves; the webhook body is signed;
//! PagerDuty gets trigger and resolve with one `dedup_key`; a receiver that is down gets
//! retries and then a visible failure (page, audit trail, metric).

use std::collections::BTreeMap;
use std::time::Duration;

use hmac::{Hmac, Mac};
use redrive_core::alerts::{AlertState, EventKind};
use redrive_core::model::RawRecord;
use redrive_testkit::{create_topic, kafka_brokers, produce, unique, Backend, TestRecord};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::support::receiver::{refused_url, Receiver};
use crate::support::{eventually, Auth, Csrf, TestApp};

pub(crate) const DEADLINE: Duration = Duration::from_secs(90);
pub(crate) const SECRET: &str = "s3cret-webhook-key";

/// The `[alerts]` section shared by the tests: fast evaluations and retries.
pub(crate) fn alerts_head(public_url: &str) -> String {
    format!(
        r#"
[alerts]
interval_ms = 200
public_url = "{public_url}"
notify_timeout_ms = 2000
notify_max_attempts = 3
notify_backoff_base_ms = 50
notify_backoff_max_ms = 200
"#
    )
}

fn notifiers(base: &str) -> String {
    format!(
        r#"
[alerts.notifiers.hook]
kind = "webhook"
url = "{base}/hook"
secret = "{SECRET}"

[alerts.notifiers.slack]
kind = "slack"
url = "{base}/slack/T000/B000/XXXX"

[alerts.notifiers.pd]
kind = "pagerduty"
routing_key = "R0UT1NGKEY0123456789abcdefABCDEF"
events_url = "{base}/pd/v2/enqueue"
"#
    )
}

fn every_kind(topic: &str) -> String {
    format!(
        r#"
[[alerts.rules]]
name = "depth"
kind = "dlq_size"
threshold = 2
dlq_topic = "{topic}"
severity = "critical"

[[alerts.rules]]
name = "rate"
kind = "dead_letter_rate"
# The window counts from each record's dead-letter time (its Kafka timestamp), so it must
# cover produce → consumer-group join → stored → evaluated even under CI load (a 3 s window
# raced the group's first rebalance): 3 records in 30 s is 6/min > 4.
rate_per_min = 4
window_ms = 30000
dlq_topic = "{topic}"

[[alerts.rules]]
name = "arrival"
kind = "new_arrival"
window_ms = 2000
dlq_topic = "{topic}"

[[alerts.rules]]
name = "oldest"
kind = "oldest_age"
max_age_ms = 1500
dlq_topic = "{topic}"

[[alerts.rules]]
name = "newgroup"
kind = "new_error_group"
window_ms = 2000
dlq_topic = "{topic}"

[[alerts.rules]]
name = "replayfail"
kind = "replay_failed"
window_ms = 2000

[[alerts.rules]]
name = "quarantine"
kind = "quarantined"
dlq_topic = "{topic}"
"#
    )
}

const RULES: [&str; 7] = [
    "depth",
    "rate",
    "arrival",
    "oldest",
    "newgroup",
    "replayfail",
    "quarantine",
];

pub(crate) fn write_config(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("redrive.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A counter or gauge of `/metrics` (the first sample whose line starts with `series`).
pub(crate) async fn metric(app: &TestApp, token: &str, series: &str) -> f64 {
    let text = app
        .get("/metrics", Auth::Bearer(token))
        .await
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Waits until this process has completed `n` more evaluations.
pub(crate) async fn evaluations(app: &TestApp, token: &str, n: f64) {
    let start = metric(app, token, "redrive_alert_evaluations_total").await;
    eventually(&format!("{n} more evaluations"), DEADLINE, || async move {
        metric(app, token, "redrive_alert_evaluations_total").await >= start + n
    })
    .await;
}

/// Event kinds of `rule`, oldest first.
pub(crate) async fn kinds(app: &TestApp, rule: &str) -> Vec<EventKind> {
    let mut k: Vec<EventKind> = app
        .store
        .recent_alert_events(Some(rule), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    k.reverse();
    k
}

pub(crate) async fn state_of(app: &TestApp, rule: &str) -> Vec<AlertState> {
    app.store
        .alert_states()
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.rule == rule)
        .map(|s| s.state)
        .collect()
}

pub(crate) async fn wait_kinds(app: &TestApp, rule: &str, want: &[EventKind]) {
    eventually(&format!("{rule} events {want:?}"), DEADLINE, || async {
        kinds(app, rule).await == want
    })
    .await;
}

pub(crate) fn verify_signature(body: &[u8], header: &str) {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        header,
        format!("sha256={hex}"),
        "the signature covers the exact body"
    );
}

async fn every_kind_fires_once_dedups_and_resolves(backend: Backend) {
    let receiver = Receiver::start().await;
    let topic = unique("alerts_dlq");
    let small = unique("alerts_small");
    create_topic(&topic, 1, &[]).await.unwrap();
    create_topic(&small, 1, &[("max.message.bytes", "1000")])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "{}{}{}",
            alerts_head("http://redrive.test")
                .replace("notify_timeout_ms = 2000", "notify_timeout_ms = 10000"),
            notifiers(&receiver.base),
            every_kind(&topic)
        ),
    );
    let brokers = kafka_brokers();
    let group = unique("alerts_group");
    let env = [
        ("REDRIVE_CONFIG", config.as_str()),
        ("REDRIVE_INGEST_ENABLED", "true"),
        ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
        ("REDRIVE_DLQ_TOPICS", topic.as_str()),
        ("REDRIVE_GROUP_ID", group.as_str()),
    ];
    let app = TestApp::start_on(backend, &env).await;
    let token = app.admin_token().await;
    // The first evaluation sets the arrivals watermark (empty store): only then produce.
    evaluations(&app, &token, 1.0).await;

    let big = "x".repeat(5_000);
    let offsets = produce(
        &topic,
        &[
            TestRecord::new("poison one", &[]),
            TestRecord::new("poison two", &[]),
            TestRecord::new(&big, &[]),
        ],
    )
    .await
    .unwrap();

    for rule in ["depth", "rate", "arrival", "oldest", "newgroup"] {
        wait_kinds(&app, rule, &[EventKind::Fired]).await;
    }
    // De-duplicated while the conditions hold: more evaluations, no second fire.
    evaluations(&app, &token, 3.0).await;
    assert_eq!(kinds(&app, "depth").await, [EventKind::Fired]);
    assert_eq!(kinds(&app, "oldest").await, [EventKind::Fired]);
    assert_eq!(state_of(&app, "depth").await, [AlertState::Firing]);

    // A restart neither re-fires nor forgets the open alerts.
    let app = app.restart(&env).await;
    evaluations(&app, &token, 3.0).await;
    assert_eq!(
        kinds(&app, "depth").await,
        [EventKind::Fired],
        "{}",
        app.log()
    );
    assert_eq!(state_of(&app, "depth").await, [AlertState::Firing]);
    assert_eq!(kinds(&app, "oldest").await, [EventKind::Fired]);

    // A replay that fails for good (the record is over the target's max.message.bytes).
    let big_id = app
        .store
        .list(&redrive_core::ListQuery::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|d| d.dlq_topic == topic && d.dlq_offset == offsets[2].1)
        .map(|d| d.id)
        .expect("the big dead letter");
    let res = app
        .post_json(
            "/api/v1/replays",
            Auth::Bearer(&token),
            Csrf::Right,
            &json!({"ids": [big_id], "target_topic": small}),
        )
        .await;
    assert_eq!(res.status(), 202);
    wait_kinds(&app, "replayfail", &[EventKind::Fired]).await;

    // Quarantine: a level, held until the record is stored again (here: released).
    let raw = RawRecord {
        dlq_topic: topic.clone(),
        dlq_partition: 0,
        dlq_offset: 999_999,
        timestamp_ms: None,
        key: None,
        value: Some(b"refused".to_vec()),
        headers: vec![],
    };
    assert!(app
        .store
        .quarantine_record(&raw, "refused for the test", true, 1)
        .await
        .unwrap());
    wait_kinds(&app, "quarantine", &[EventKind::Fired]).await;
    let q = app.store.list_quarantine(10, None).await.unwrap();
    assert!(app.store.release_quarantined(q[0].id).await.unwrap());

    // Drain the DLQ: size and age resolve; the event kinds resolve after their windows.
    let res = app
        .post_json(
            "/api/v1/dead-letters/delete",
            Auth::Bearer(&token),
            Csrf::Right,
            &json!({"filter": {"dlq_topic": topic}, "reason": "drained"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    for rule in RULES {
        wait_kinds(&app, rule, &[EventKind::Fired, EventKind::Resolved]).await;
    }

    // Every event reached every notifier once: 7 fired + 7 resolved each. Exactly once
    // here, across the restart too: a graceful shutdown lets the sends in flight finish and
    // be recorded (`notify::dispatch::drain`), and the test's 10 s request timeout (the
    // receiver answers at once) leaves no timeout to retry.
    let paths = ["/hook", "/pd/v2/enqueue", "/slack/T000/B000/XXXX"];
    let counts = || paths.map(|p| receiver.requests(p).len());
    let start = std::time::Instant::now();
    while counts() != [14; 3] && start.elapsed() < DEADLINE {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deliveries: Vec<String> = receiver
        .requests("/hook")
        .iter()
        .map(|r| r.header("x-redrive-delivery"))
        .collect();
    assert_eq!(
        counts(),
        [14; 3],
        "deliveries per notifier {paths:?}; webhook delivery ids {deliveries:?}\n{}",
        app.log()
    );
    let mut fired_keys = BTreeMap::new();
    for r in receiver.requests("/hook") {
        verify_signature(&r.body, &r.header("x-redrive-signature-256"));
        let v = r.json();
        assert_eq!(v["schema"], "redrive.alert.v1");
        assert_eq!(r.header("x-redrive-event"), v["event"].as_str().unwrap());
        assert_eq!(r.header("x-redrive-event-id"), v["event_id"].to_string());
        assert!(RULES.contains(&v["rule"].as_str().unwrap()), "{v}");
        assert!(v["links"][0]["href"]
            .as_str()
            .unwrap()
            .starts_with("http://redrive.test/alerts"));
        if v["rule"] == "depth" && v["event"] == "fired" {
            assert_eq!(v["value"], 3);
            assert_eq!(v["threshold"], 2.0);
            assert_eq!(v["severity"], "critical");
            assert_eq!(v["scope"], format!("dlq_topic={topic}"));
            assert_eq!(v["scope_labels"]["dlq_topic"], topic);
        }
    }
    for r in receiver.requests("/pd/v2/enqueue") {
        let v = r.json();
        assert_eq!(v["routing_key"], "R0UT1NGKEY0123456789abcdefABCDEF");
        let key = v["dedup_key"].as_str().unwrap().to_string();
        match v["event_action"].as_str().unwrap() {
            "trigger" => {
                assert_eq!(v["payload"]["source"], "redrive");
                assert!(!v["payload"]["summary"].as_str().unwrap().is_empty());
                let rule = v["payload"]["group"].as_str().unwrap().to_string();
                assert!(
                    fired_keys.insert(key, rule).is_none(),
                    "one trigger per alert"
                );
            }
            "resolve" => {
                assert!(
                    fired_keys.contains_key(&key),
                    "resolve {key} has the trigger's key"
                )
            }
            other => panic!("unexpected event_action {other}"),
        }
    }
    assert_eq!(fired_keys.len(), 7);
    for r in receiver.requests("/slack/T000/B000/XXXX") {
        let v = r.json();
        assert!(v["text"].as_str().unwrap().contains(':'), "{v}");
        assert_eq!(v["blocks"][0]["type"], "section");
    }
    let fired = app.audit_of("alert_fired").await;
    let resolved = app.audit_of("alert_resolved").await;
    assert_eq!((fired.len(), resolved.len()), (7, 7));
    assert!(fired.iter().all(|a| a.actor == "redrive-alerts"));

    // The page and the metric show the states.
    let html = app
        .get("/alerts", Auth::Bearer(&token))
        .await
        .text()
        .await
        .unwrap();
    for rule in RULES {
        assert!(
            html.contains(&format!(r#"data-rule="{rule}" data-state="ok""#)),
            "{rule}"
        );
    }
    assert_eq!(
        metric(&app, &token, r#"redrive_alerts{rule="depth",state="ok"}"#).await,
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_fires_once_dedups_and_resolves_on_sqlite() {
    every_kind_fires_once_dedups_and_resolves(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_fires_once_dedups_and_resolves_on_postgres() {
    every_kind_fires_once_dedups_and_resolves(Backend::Postgres).await;
}

async fn a_receiver_that_is_down_is_retried_then_visible(backend: Backend) {
    let receiver = Receiver::start().await;
    receiver.answer_with(500);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            r#"{}
[alerts.notifiers.broken]
kind = "webhook"
url = "{}/broken"
secret = "{SECRET}"

[alerts.notifiers.down]
kind = "webhook"
url = "{}"
secret = "{SECRET}"

[[alerts.rules]]
name = "quarantine"
kind = "quarantined"
"#,
            alerts_head(""),
            receiver.base,
            refused_url()
        ),
    );
    let app = TestApp::start_on(backend, &[("REDRIVE_CONFIG", config.as_str())]).await;
    let token = app.admin_token().await;
    let raw = RawRecord {
        dlq_topic: "orders.DLT".into(),
        dlq_partition: 0,
        dlq_offset: 1,
        timestamp_ms: None,
        key: None,
        value: Some(b"x".to_vec()),
        headers: vec![],
    };
    app.store
        .quarantine_record(&raw, "refused", false, 1)
        .await
        .unwrap();
    wait_kinds(
        &app,
        "quarantine",
        &[
            EventKind::Fired,
            EventKind::NotificationFailed,
            EventKind::NotificationFailed,
        ],
    )
    .await;

    // Three attempts each (notify_max_attempts), one delivery id across the retries.
    let got = receiver.requests("/broken");
    assert_eq!(got.len(), 3, "retried up to notify_max_attempts");
    assert!(got
        .iter()
        .all(|r| r.header("x-redrive-delivery") == got[0].header("x-redrive-delivery")));
    let failed = app.audit_of("alert_notification_failed").await;
    assert_eq!(failed.len(), 2);
    let reasons: Vec<String> = failed.iter().filter_map(|a| a.reason.clone()).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("broken") && r.contains("500")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("down") && r.to_lowercase().contains("refused")),
        "{reasons:?}"
    );
    let deliveries = app.store.recent_alert_deliveries(None, 10).await.unwrap();
    assert!(deliveries
        .iter()
        .all(|d| d.attempts == 3 && d.last_error.is_some()));

    // Visible on the page (status and error) and in the metric.
    let html = app
        .get("/alerts", Auth::Bearer(&token))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains(r#"data-notifier="broken""#));
    assert!(html.contains("delivery-failed"), "{html}");
    assert!(html.contains("500 Internal Server Error"), "{html}");
    assert_eq!(
        metric(
            &app,
            &token,
            r#"redrive_alert_notifications_failed_total{notifier="broken"}"#
        )
        .await,
        1.0
    );
    assert_eq!(
        metric(
            &app,
            &token,
            r#"redrive_alert_notification_retries_total{notifier="down"}"#
        )
        .await,
        2.0
    );

    // The receiver comes back: a test notification (operator, CSRF) is delivered and audited.
    receiver.answer_with(200);
    app.add_user("olga", "operator", "operator-password").await;
    app.add_user("vic", "viewer", "viewer-password").await;
    let viewer = app.sign_in("vic", "viewer-password").await;
    let res = app
        .post_form(
            "/api/ui/alert-test",
            Auth::Session(&viewer),
            Csrf::Right,
            &[("notifier", "broken")],
        )
        .await;
    assert_eq!(
        res.status(),
        403,
        "a viewer may not send test notifications"
    );
    let operator = app.sign_in("olga", "operator-password").await;
    let res = app
        .post_form(
            "/api/ui/alert-test",
            Auth::Session(&operator),
            Csrf::Missing,
            &[("notifier", "broken")],
        )
        .await;
    assert_eq!(res.status(), 403, "no CSRF token, no test");
    let res = app
        .post_form(
            "/api/ui/alert-test",
            Auth::Session(&operator),
            Csrf::Right,
            &[("notifier", "nope")],
        )
        .await;
    assert_eq!(res.status(), 400, "an unknown notifier is a clear 400");
    let res = app
        .post_form(
            "/api/ui/alert-test",
            Auth::Session(&operator),
            Csrf::Right,
            &[("notifier", "broken")],
        )
        .await;
    assert!(res.status().is_redirection(), "{}", res.status());
    eventually("the test notification delivered", DEADLINE, || async {
        receiver.requests("/broken").len() == 4
    })
    .await;
    let test = receiver.requests("/broken").pop().unwrap();
    verify_signature(&test.body, &test.header("x-redrive-signature-256"));
    let v: Value = test.json();
    assert_eq!(
        (v["event"].as_str(), v["rule"].as_str()),
        (Some("test"), Some("test"))
    );
    let audited = app.audit_of("alert_test_notification").await;
    assert!(audited
        .iter()
        .any(|a| a.actor == "olga" && a.outcome == "ok"));
    assert!(audited
        .iter()
        .any(|a| a.actor == "vic" && a.outcome == "denied"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_is_down_is_retried_then_visible_on_sqlite() {
    a_receiver_that_is_down_is_retried_then_visible(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_is_down_is_retried_then_visible_on_postgres() {
    a_receiver_that_is_down_is_retried_then_visible(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_rule_stops_start_up_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        "[[alerts.rules]]\nname = \"depth\"\nkind = \"dlq_size\"\n",
    );
    let out =
        crate::support::run_redrive(&["config"], &[("REDRIVE_CONFIG", config.as_str())], None)
            .await;
    assert_ne!(out.0, Some(0));
    assert!(
        out.2.contains("alert rule `depth`") && out.2.contains("threshold"),
        "{}",
        out.2
    );
}
