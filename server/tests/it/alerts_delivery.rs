//! Alert delivery through the real binary (`docs/alerts.md`, "Where it runs"): notifiers are
//! isolated from one another (a receiver that hangs holds only its own send slots); a rule
//! grouping by a column with thousands of values pages a bounded number of times (the
//! per-rule cap and its summary alert); the no-JS test-notification form answers a bad
//! request with an HTML page; a graceful restart while a notification is in flight records
//! it and does not send it again.

use redrive_core::alerts::{AlertState, DeliveryStatus, EventKind};
use redrive_core::model::RawRecord;
use redrive_core::Normalized;
use redrive_testkit::fixtures::stored_dead_letter;
use redrive_testkit::Backend;
use serde_json::json;

use crate::alerts::{write_config, DEADLINE, SECRET};
use crate::support::receiver::{Hanging, Receiver};
use crate::support::{eventually, Auth, Csrf, TestApp};

/// Events fired at once in the isolation test: more than one notifier's send slots (4), and
/// more than the 8 slots all notifiers used to share.
const EVENTS: usize = 12;

async fn a_hanging_notifier_does_not_delay_another(backend: Backend) {
    let healthy = Receiver::start().await;
    let hanging = Hanging::start().await;
    let dir = tempfile::tempdir().unwrap();
    // A request timeout far past the test's deadline: the hanging receiver's deliveries stay
    // in flight for the whole test.
    let mut text = format!(
        r#"
[alerts]
interval_ms = 200
notify_timeout_ms = 600000
notify_max_attempts = 2

[alerts.notifiers.hang]
kind = "webhook"
url = "{}"
secret = "{SECRET}"

[alerts.notifiers.pd]
kind = "pagerduty"
routing_key = "R0UT1NGKEY0123456789abcdefABCDEF"
events_url = "{}/pd/v2/enqueue"
"#,
        hanging.url, healthy.base
    );
    for i in 0..EVENTS {
        text.push_str(&format!(
            "\n[[alerts.rules]]\nname = \"q{i}\"\nkind = \"quarantined\"\nnotify = [\"hang\", \"pd\"]\n"
        ));
    }
    let config = write_config(&dir, &text);
    let app = TestApp::start_on(backend, &[("REDRIVE_CONFIG", config.as_str())]).await;
    // One quarantined record: every rule fires in the same evaluation, 2 deliveries each,
    // interleaved (hang, pd, hang, pd, ...).
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

    eventually(
        &format!("PagerDuty gets all {EVENTS} triggers while the webhook hangs"),
        DEADLINE,
        || async {
            let delivered = app
                .store
                .recent_alert_deliveries(Some("pd"), 100)
                .await
                .unwrap()
                .iter()
                .filter(|d| d.status == DeliveryStatus::Delivered)
                .count();
            healthy.requests("/pd/v2/enqueue").len() == EVENTS && delivered == EVENTS
        },
    )
    .await;
    let deliveries = app.store.recent_alert_deliveries(None, 100).await.unwrap();
    let of = |n: &str| -> Vec<_> { deliveries.iter().filter(|d| d.notifier == n).collect() };
    assert_eq!(of("pd").len(), EVENTS);
    assert!(
        of("pd")
            .iter()
            .all(|d| d.status == DeliveryStatus::Delivered && d.attempts == 1),
        "{deliveries:?}"
    );
    // Meanwhile not one of the hanging notifier's deliveries got an answer.
    assert_eq!(of("hang").len(), EVENTS);
    assert!(
        of("hang")
            .iter()
            .all(|d| d.status == DeliveryStatus::Pending && d.attempts == 0),
        "{deliveries:?}"
    );
    // Its bound holds: exactly its own send slots are open on it, no more.
    eventually(
        "the hanging receiver holds 4 requests",
        DEADLINE,
        || async { hanging.accepted() >= 4 },
    )
    .await;
    let trigger = healthy.requests("/pd/v2/enqueue").len();
    assert_eq!(trigger, EVENTS, "nothing more was sent to PagerDuty");
    assert_eq!(hanging.accepted(), 4, "4 requests in flight per notifier");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_notifier_does_not_delay_another_on_sqlite() {
    a_hanging_notifier_does_not_delay_another(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_notifier_does_not_delay_another_on_postgres() {
    a_hanging_notifier_does_not_delay_another(Backend::Postgres).await;
}

/// `(scope, kind)` of `rule`'s events, oldest first.
async fn events_of(app: &TestApp, rule: &str) -> Vec<(String, EventKind)> {
    let mut e: Vec<(String, EventKind)> = app
        .store
        .recent_alert_events(Some(rule), 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.scope, e.kind))
        .collect();
    e.reverse();
    e
}

fn count(events: &[(String, EventKind)], kind: EventKind) -> usize {
    events.iter().filter(|(_, k)| *k == kind).count()
}

async fn a_storm_pages_up_to_the_cap_then_once_for_the_rest(backend: Backend) {
    let pd = Receiver::start().await;
    let records: Vec<_> = (0..8)
        .map(|i| {
            stored_dead_letter(
                "storm.DLT",
                i,
                Normalized {
                    source_topic: Some(format!("src{i}")),
                    ..Normalized::default()
                },
            )
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            r#"
[alerts]
interval_ms = 200
notify_timeout_ms = 2000

[alerts.notifiers.pd]
kind = "pagerduty"
routing_key = "R0UT1NGKEY0123456789abcdefABCDEF"
events_url = "{}/pd/v2/enqueue"

[[alerts.rules]]
name = "storm"
kind = "dlq_size"
threshold = 0
group_by = "source_topic"
cooldown_ms = 0
max_firing = 3
"#,
            pd.base
        ),
    );
    let app =
        TestApp::with_records(backend, &records, &[("REDRIVE_CONFIG", config.as_str())]).await;
    let token = app.admin_token().await;
    let summary = "overflow=source_topic".to_string();

    // 8 source topics over the threshold: 3 alerts of their own and ONE summary for 5 more.
    eventually("3 + 1 alerts fired", DEADLINE, || async {
        count(&events_of(&app, "storm").await, EventKind::Fired) == 4
    })
    .await;
    let fired: Vec<String> = events_of(&app, "storm")
        .await
        .into_iter()
        .filter(|(_, k)| *k == EventKind::Fired)
        .map(|(s, _)| s)
        .collect();
    assert_eq!(
        fired,
        [
            "source_topic=src0",
            "source_topic=src1",
            "source_topic=src2",
            &summary
        ]
    );
    let states = app.store.alert_states().await.unwrap();
    let of = |scope: &str| states.iter().find(|s| s.scope == scope).cloned().unwrap();
    assert_eq!(of(&summary).state, AlertState::Firing);
    assert_eq!(of(&summary).value, 5, "5 more groups firing");
    assert_eq!(of("source_topic=src7").state, AlertState::Pending);
    eventually("4 PagerDuty triggers", DEADLINE, || async {
        pd.requests("/pd/v2/enqueue").len() == 4
    })
    .await;
    // Sent concurrently (4 slots): find the summary's trigger among them.
    let last = pd
        .requests("/pd/v2/enqueue")
        .into_iter()
        .map(|r| r.json())
        .find(|v| v["payload"]["component"] == summary.as_str())
        .expect("the summary's trigger");
    assert!(
        last["payload"]["summary"]
            .as_str()
            .unwrap()
            .contains("5 more source_topic group(s) firing"),
        "{last}"
    );
    assert_eq!(last["payload"]["custom_details"]["unit"], "groups");

    // One of the paged groups is dealt with: it resolves and a held-back one pages in its
    // place; the summary now counts 4 (a changed count is not a new page).
    let res = app
        .post_json(
            "/api/v1/dead-letters/delete",
            Auth::Bearer(&token),
            Csrf::Right,
            &json!({"filter": {"source_topic": "src0"}, "reason": "fixed"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    eventually("src0 resolved, src3 fired", DEADLINE, || async {
        let e = events_of(&app, "storm").await;
        e.contains(&("source_topic=src0".into(), EventKind::Resolved))
            && e.contains(&("source_topic=src3".into(), EventKind::Fired))
    })
    .await;
    eventually("the summary counts 4", DEADLINE, || async {
        app.store
            .alert_states()
            .await
            .unwrap()
            .iter()
            .any(|s| s.scope == summary && s.value == 4 && s.state == AlertState::Firing)
    })
    .await;

    // Everything dealt with: every alert resolves, the summary too, with its own key.
    let res = app
        .post_json(
            "/api/v1/dead-letters/delete",
            Auth::Bearer(&token),
            Csrf::Right,
            &json!({"filter": {"dlq_topic": "storm.DLT"}, "reason": "fixed"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    eventually("everything resolved", DEADLINE, || async {
        count(&events_of(&app, "storm").await, EventKind::Resolved) == 5
    })
    .await;
    let e = events_of(&app, "storm").await;
    assert_eq!(count(&e, EventKind::Fired), 5, "{e:?}");
    assert_eq!(e.last().unwrap(), &(summary.clone(), EventKind::Resolved));
    eventually("10 PagerDuty events", DEADLINE, || async {
        pd.requests("/pd/v2/enqueue").len() == 10
    })
    .await;
    let mut open = std::collections::BTreeSet::new();
    for r in pd.requests("/pd/v2/enqueue") {
        let v = r.json();
        let key = v["dedup_key"].as_str().unwrap().to_string();
        match v["event_action"].as_str().unwrap() {
            "trigger" => assert!(open.insert(key), "one trigger per key"),
            _ => assert!(open.remove(&key), "a resolve has its trigger's key"),
        }
    }
    assert!(
        open.is_empty(),
        "every PagerDuty incident resolved: {open:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_pages_up_to_the_cap_then_once_for_the_rest_on_sqlite() {
    a_storm_pages_up_to_the_cap_then_once_for_the_rest(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_pages_up_to_the_cap_then_once_for_the_rest_on_postgres() {
    a_storm_pages_up_to_the_cap_then_once_for_the_rest(Backend::Postgres).await;
}

#[tokio::test]
async fn the_test_notification_form_answers_errors_as_a_page() {
    let receiver = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[alerts.notifiers.team]\nkind = \"slack\"\nurl = \"{}/slack/T/B/X\"\n",
            receiver.base
        ),
    );
    let app = TestApp::start(&[("REDRIVE_CONFIG", config.as_str())]).await;
    app.add_user("olga", "operator", "operator-password").await;
    app.add_user("vic", "viewer", "viewer-password").await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for (user, password, notifier, status, says) in [
        (
            "olga",
            "operator-password",
            "nope",
            400,
            "There is no notifier named `nope`",
        ),
        ("vic", "viewer-password", "team", 403, "Not allowed"),
    ] {
        let session = app.sign_in(user, password).await;
        for referer in [Some(app.url("/alerts?test=x")), None] {
            // A browser without JavaScript submitting the form on /alerts.
            let mut req = client
                .post(app.url("/api/ui/alert-test"))
                .header("Cookie", &session.cookie)
                .header("Accept", "text/html,application/xhtml+xml")
                .form(&[("csrf", session.csrf.as_str()), ("notifier", notifier)]);
            if let Some(r) = &referer {
                req = req.header("Referer", r);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), status, "{user} {referer:?}");
            let content_type = res
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            assert!(content_type.starts_with("text/html"), "{content_type}");
            let html = res.text().await.unwrap();
            assert!(
                html.starts_with("<!DOCTYPE html>") && html.contains(says),
                "{user} {referer:?}: {html}"
            );
            assert!(!html.contains("ServerError|"), "{html}");
            let back = if referer.is_some() {
                "href=\"/alerts?test=x\""
            } else {
                "href=\"/\""
            };
            assert!(html.contains(back), "{html}");
        }
    }
    // The form still works when the input is right.
    let session = app.sign_in("olga", "operator-password").await;
    let res = client
        .post(app.url("/api/ui/alert-test"))
        .header("Cookie", &session.cookie)
        .header("Accept", "text/html,application/xhtml+xml")
        .header("Referer", app.url("/alerts"))
        .form(&[("csrf", session.csrf.as_str()), ("notifier", "team")])
        .send()
        .await
        .unwrap();
    assert!(res.status().is_redirection(), "{}", res.status());
    eventually("the test notification delivered", DEADLINE, || async {
        receiver.requests("/slack/T/B/X").len() == 1
    })
    .await;
}

/// SIGTERM while a notification is in flight (the receiver has it and answers 3 s later):
/// shutdown waits for the answer and records the delivery, so the restarted instance does
/// not send it again once the lease runs out (`notify::dispatch::drain`).
async fn a_graceful_restart_mid_send_notifies_once(backend: Backend) {
    let receiver = Receiver::start().await;
    receiver.answer_after(std::time::Duration::from_secs(3));
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            r#"
[alerts]
interval_ms = 200
notify_timeout_ms = 8000

[alerts.notifiers.hook]
kind = "webhook"
url = "{}/hook"
secret = "{SECRET}"

[[alerts.rules]]
name = "quarantine"
kind = "quarantined"
"#,
            receiver.base
        ),
    );
    let env = [("REDRIVE_CONFIG", config.as_str())];
    let app = TestApp::start_on(backend, &env).await;
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
    eventually("the notification in flight", DEADLINE, || async {
        receiver.requests("/hook").len() == 1
    })
    .await;

    let app = app.restart(&env).await;
    let deliveries = app
        .store
        .recent_alert_deliveries(Some("hook"), 10)
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    assert_eq!(
        (deliveries[0].status, deliveries[0].attempts),
        (DeliveryStatus::Delivered, 1),
        "recorded before the store closed\n{}",
        app.log()
    );
    assert_eq!(receiver.requests("/hook").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_restart_mid_send_notifies_once_on_sqlite() {
    a_graceful_restart_mid_send_notifies_once(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_restart_mid_send_notifies_once_on_postgres() {
    a_graceful_restart_mid_send_notifies_once(Backend::Postgres).await;
}
