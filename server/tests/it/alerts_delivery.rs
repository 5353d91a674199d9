//! Alert delivery through the real binary (`docs/alerts.md`, "Where it runs"): notifiers are
//! isolated from one another (a receiver that hangs holds only its own send slots), and a rule
//! grouping by a column with thousands of values pages a bounded number of times (the
//! per-rule cap and its summary alert).

use redrive_core::alerts::DeliveryStatus;
use redrive_core::model::RawRecord;
use redrive_testkit::Backend;

use crate::alerts::{write_config, DEADLINE, SECRET};
use crate::support::receiver::{Hanging, Receiver};
use crate::support::{eventually, TestApp};

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
        || async { healthy.requests("/pd/v2/enqueue").len() == EVENTS },
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
