//! Retention backpressure across a rebalance (`docs/retention.md`, "Backpressure"): two
//! `redrive serve` instances share one PostgreSQL and one consumer group; the DLQ topic
//! reaches its `max_count` and both pause their partitions. One instance is killed (SIGKILL);
//! once the group gives its partitions to the other, that one keeps them paused — nothing is
//! ingested past the limit, the records stay in Kafka, uncommitted. The killed one restarts
//! and joins while the topic is still over its limit: it ingests nothing of it either. When
//! space is freed they resume and ingest every record, each once.

use std::time::Duration;

use redrive_core::model::Status;
use redrive_core::store::Store;
use redrive_core::Filter;
use redrive_testkit::ingest::{committed_offsets, end_offsets};
use redrive_testkit::{create_topic, kafka_brokers, produce, unique, Backend, TestRecord};
use serde_json::json;

use crate::support::{eventually, Auth, Csrf, TestApp};

const RECORDS: i32 = 100;
const PARTITIONS: i32 = 4;
const MAX_COUNT: i64 = 30;

async fn count(store: &Store, topic: &str, status: Option<Status>) -> i64 {
    store
        .count(&Filter {
            dlq_topic: Some(topic.to_string()),
            status,
            ..Filter::default()
        })
        .await
        .expect("count")
}

/// Every status (the list's default hides `deleted`).
async fn total(store: &Store, topic: &str) -> i64 {
    count(store, topic, None).await + count(store, topic, Some(Status::Deleted)).await
}

/// `name value` of an exposition line starting with `series`.
fn sample(text: &str, series: &str) -> Option<i64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

async fn metrics(app: &TestApp, token: &str) -> String {
    app.get("/metrics", Auth::Bearer(token))
        .await
        .text()
        .await
        .unwrap_or_default()
}

async fn committed(group: &str, topic: &str) -> i64 {
    committed_offsets(group, topic)
        .await
        .expect("committed offsets")
        .values()
        .sum()
}

/// One record on each of the control topic's two partitions.
fn control_records(from: i32) -> Vec<TestRecord> {
    (0..2)
        .map(|p| TestRecord {
            value: Some(format!("{{\"control\":{}}}", from + p).into_bytes()),
            partition: Some(p),
            ..TestRecord::default()
        })
        .collect()
}

const HELD: &str = "newly assigned partitions of a DLQ topic at its retention limit stay paused";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backpressure_holds_when_the_partitions_move_to_the_other_instance() {
    let topic = unique("bprb.DLT");
    // A second DLQ topic without limits: a record produced to it after the rebalance and
    // stored proves the consumer has been fetching since (see below).
    let control = unique("bprb_control.DLT");
    let group = unique("bprb-group");
    create_topic(&topic, PARTITIONS, &[]).await.expect("topic");
    create_topic(&control, 2, &[]).await.expect("control topic");
    let topics = format!("{topic},{control}");
    let records: Vec<TestRecord> = (0..RECORDS)
        .map(|i| TestRecord {
            key: Some(format!("k{i}").into_bytes()),
            value: Some(format!("v{i}").into_bytes()),
            partition: Some(i % PARTITIONS),
            ..TestRecord::default()
        })
        .collect();
    produce(&topic, &records).await.expect("produce");
    let cfg_dir = tempfile::tempdir().expect("tempdir");
    let cfg = cfg_dir.path().join("redrive.toml");
    std::fs::write(
        &cfg,
        format!(
            "[retention]\ninterval_ms = 200\n[retention.topics.\"{topic}\"]\n\
             max_count = {MAX_COUNT}\naction = \"backpressure\"\n"
        ),
    )
    .expect("config");
    let brokers = kafka_brokers();
    let cfg_s = cfg.to_str().expect("path").to_string();
    let env = [
        ("REDRIVE_CONFIG", cfg_s.as_str()),
        ("REDRIVE_INGEST_ENABLED", "true"),
        ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
        ("REDRIVE_DLQ_TOPICS", topics.as_str()),
        ("REDRIVE_GROUP_ID", group.as_str()),
        ("REDRIVE_INGEST_BATCH_SIZE", "10"),
        // The killed member leaves the group when its session times out: 6 s (the broker's
        // minimum) instead of librdkafka's 45 s.
        ("REDRIVE_KAFKA__SESSION_TIMEOUT_MS", "6000"),
    ];
    let mut first = TestApp::start_on(Backend::Postgres, &env).await;
    let second = first.another_instance(&env).await;
    let token = first.admin_token().await;
    let store = first.store.clone();

    // Both in the group, both paused at the limit.
    eventually(
        "both instances hold partitions and the topic is paused on both",
        Duration::from_secs(90),
        || async {
            let a = sample(
                &metrics(&first, &token).await,
                "redrive_ingest_assigned_partitions",
            );
            let b = sample(
                &metrics(&second, &token).await,
                "redrive_ingest_assigned_partitions",
            );
            a.is_some_and(|n| n > 0)
                && b.is_some_and(|n| n > 0)
                && first.retention_paused(&token).await
                && second.retention_paused(&token).await
        },
    )
    .await;
    let live = count(&store, &topic, None).await;
    assert!(
        (MAX_COUNT..=MAX_COUNT + 20).contains(&live),
        "{live} live: at most one batch over per instance"
    );
    let before = committed(&group, &topic).await;
    assert!(
        before < i64::from(RECORDS),
        "records wait in Kafka ({before} committed)"
    );
    let held_before = second.log().matches(HELD).count();

    // The first instance dies; its partitions go to the second, which holds them paused.
    first.kill().await;
    eventually(
        "the second instance owns every partition",
        Duration::from_secs(90),
        || async {
            sample(
                &metrics(&second, &token).await,
                "redrive_ingest_assigned_partitions",
            ) == Some(i64::from(PARTITIONS) + 2)
        },
    )
    .await;
    eventually(
        "the reassigned partitions are paused as they are assigned",
        Duration::from_secs(30),
        || async { second.log().matches(HELD).count() > held_before },
    )
    .await;
    // One broker serves every partition in the same fetch requests: once a record produced
    // to the control topic now is stored, the consumer has fetched since the rebalance, and
    // the waiting records of any unpaused partition of the topic would have come with it.
    produce(&control, &control_records(0))
        .await
        .expect("produce control");
    eventually(
        "the control records are stored by the second instance",
        Duration::from_secs(60),
        || async { total(&store, &control).await == 2 },
    )
    .await;
    assert_eq!(
        total(&store, &topic).await,
        live,
        "nothing ingested past the limit after the rebalance"
    );
    assert!(second.retention_paused(&token).await, "still paused");
    let after = committed(&group, &topic).await;
    assert_eq!(
        after, before,
        "nothing more committed: the records stay in Kafka"
    );

    // The killed instance comes back while the topic is over its limit: it joins the group,
    // takes half of the partitions (one control partition each, range assignment), and
    // ingests nothing of the topic either, from its first assignment on.
    let third = second.another_instance(&env).await;
    eventually(
        "the restarted instance holds partitions",
        Duration::from_secs(90),
        || async {
            let b = sample(&metrics(&second, &token).await, "redrive_ingest_assigned_partitions");
            let c = sample(&metrics(&third, &token).await, "redrive_ingest_assigned_partitions");
            matches!((b, c), (Some(b), Some(c)) if b > 0 && c > 0 && b + c == i64::from(PARTITIONS) + 2)
        },
    )
    .await;
    produce(&control, &control_records(2))
        .await
        .expect("produce control");
    eventually(
        "both instances fetch: a control record on each one's partition is stored",
        Duration::from_secs(60),
        || async { total(&store, &control).await == 4 },
    )
    .await;
    assert_eq!(
        total(&store, &topic).await,
        live,
        "nothing ingested past the limit by the instance that joined"
    );
    assert!(
        third.retention_paused(&token).await,
        "paused on the restarted instance too"
    );
    assert_eq!(committed(&group, &topic).await, before);

    // Space freed: the second instance resumes, pausing again at each limit, until every
    // record is stored once and committed.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while total(&store, &topic).await < i64::from(RECORDS) {
        assert!(
            std::time::Instant::now() < deadline,
            "stuck at {}",
            total(&store, &topic).await
        );
        let res = second
            .post_json(
                "/api/v1/dead-letters/delete",
                Auth::Bearer(&token),
                Csrf::Missing,
                &json!({"filter": {"dlq_topic": topic}}),
            )
            .await;
        assert!(
            res.status().is_success(),
            "{}",
            res.text().await.unwrap_or_default()
        );
        eventually(
            "ingest resumed and paused again, or done",
            Duration::from_secs(60),
            || async {
                total(&store, &topic).await == i64::from(RECORDS)
                    || (count(&store, &topic, None).await >= MAX_COUNT
                        && second.retention_paused(&token).await)
            },
        )
        .await;
    }
    assert_eq!(total(&store, &topic).await, i64::from(RECORDS));
    let end: i64 = end_offsets(&topic)
        .await
        .expect("end offsets")
        .values()
        .sum();
    eventually(
        "every offset committed",
        Duration::from_secs(60),
        || async { committed(&group, &topic).await == end },
    )
    .await;
    let (code, log) = second.terminate(Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{log}");
    let (code, log) = third.terminate(Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{log}");
}
