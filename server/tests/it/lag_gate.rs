//! Lag-aware replay (issue 9 item 4, `docs/replay.md` "Lag-aware replay") through the real
//! binary on the real broker, on SQLite and PostgreSQL: a replay gated on a real consumer
//! group that is behind publishes nothing (the topic's record count stays as it was across
//! several lag readings, the job JSON and page show the lag and since when it is held); a real
//! consumer of that group catches up and the replay publishes every record exactly once; a
//! group the cluster does not know holds the job with the reason, and pause and cancel work on
//! a held job; bad lag gates are a 422 (API) or the form's error (no-JS confirmation page) and
//! change nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use redrive_core::model::{NewDeadLetter, Status};
use redrive_core::replay::HEADER_DEAD_LETTER_ID;
use redrive_testkit::{consume, create_topic, kafka_brokers, produce, unique, Backend, TestRecord};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::support::replay::{dead_letter, header_text, headers_of, record_count};
use crate::support::{eventually, Auth, Csrf, TestApp};
use crate::ui_actions::{job_id, Browser, ACT_ON_FILTER, OPERATOR};

const FINGERPRINT: &str = "0000000000a9a90f";

fn records(n: i64, fingerprint: &str) -> Vec<NewDeadLetter> {
    (0..n)
        .map(|i| {
            let mut d = dead_letter(
                i,
                Some(format!("key-{i}").into_bytes()),
                Some(format!("{{\"n\": {i}}}").into_bytes()),
                vec![],
            );
            d.fingerprint = fingerprint.to_string();
            d
        })
        .collect()
}

/// The binary with its relay on the real broker, polling jobs every 50 ms and lag every 100 ms.
async fn app(backend: Backend, records: &[NewDeadLetter]) -> TestApp {
    let brokers = kafka_brokers();
    TestApp::with_records(
        backend,
        records,
        &[
            ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
            ("REDRIVE_RELAY_POLL_INTERVAL_MS", "50"),
            ("REDRIVE_RELAY_LAG_POLL_MS", "100"),
            ("REDRIVE_RELAY_BACKOFF_BASE_MS", "50"),
            ("REDRIVE_RELAY_BACKOFF_MAX_MS", "200"),
        ],
    )
    .await
}

async fn json_of(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let body = res.json::<Value>().await.unwrap_or(Value::Null);
    (status, body)
}

async fn job(app: &TestApp, token: &str, id: &str) -> Value {
    json_of(
        app.get(&format!("/api/v1/replays/{id}"), Auth::Bearer(token))
            .await,
    )
    .await
    .1
}

/// Waits until `check` holds for the job's JSON; returns it.
async fn job_when(
    app: &TestApp,
    token: &str,
    id: &str,
    what: &str,
    deadline: Duration,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let last = Arc::new(Mutex::new(Value::Null));
    let check = &check;
    eventually(what, deadline, || {
        let last = last.clone();
        async move {
            let j = job(app, token, id).await;
            let ok = check(&j);
            *last.lock().expect("lock") = j;
            ok
        }
    })
    .await;
    let j = last.lock().expect("lock").clone();
    j
}

/// Commits `offsets` (partition, next offset to read) for `group` on `topic` as a consumer
/// that never joins the group would (the group exists from then on, `Empty`).
async fn commit(group: &str, topic: &str, offsets: &[(i32, i64)]) {
    let (group, topic, offsets) = (group.to_string(), topic.to_string(), offsets.to_vec());
    tokio::task::spawn_blocking(move || {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", kafka_brokers())
            .set("group.id", &group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let mut tpl = TopicPartitionList::new();
        for (p, o) in offsets {
            tpl.add_partition_offset(&topic, p, Offset::Offset(o))
                .expect("offset");
        }
        c.commit(&tpl, CommitMode::Sync).expect("commit");
    })
    .await
    .expect("join");
}

/// A real consumer of `group` on `topic` (auto commit every 100 ms) until `stop`; every record
/// it reads is kept.
fn run_consumer(
    group: &str,
    topic: &str,
    stop: CancellationToken,
) -> (Arc<Mutex<Vec<OwnedMessage>>>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let c: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka_brokers())
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", "100")
        .create()
        .expect("consumer");
    c.subscribe(&[topic]).expect("subscribe");
    let kept = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                m = c.recv() => match m {
                    Ok(m) => kept.lock().expect("lock").push(m.detach()),
                    Err(e) => panic!("consumer: {e}"),
                },
            }
        }
        // Commit what was read before leaving, so the group's offsets are final.
        let _ = c.commit_consumer_state(CommitMode::Sync);
    });
    (seen, task)
}

fn replay_body(target: &str, fingerprint: &str, lag_gate: Value) -> Value {
    json!({
        "filter": {"fingerprint": fingerprint},
        "target_topic": target,
        "options": {"unordered": true, "lag_gate": lag_gate},
    })
}

async fn start_replay(app: &TestApp, token: &str, body: &Value) -> String {
    let (status, accepted) = json_of(
        app.post_json("/api/v1/replays", Auth::Bearer(token), Csrf::Missing, body)
            .await,
    )
    .await;
    assert_eq!(status, 202, "{accepted}\n{}", app.log());
    accepted["job_id"].as_str().expect("job id").to_string()
}

/// Waits for `n` more lag readings of the job (its `lag.read_at` moves each time) and
/// returns the job as last read.
async fn readings(app: &TestApp, token: &str, id: &str, n: usize) -> Value {
    let mut last = job(app, token, id).await;
    for i in 0..n {
        let before = last["lag"]["read_at"].clone();
        last = job_when(
            app,
            token,
            id,
            &format!("lag reading {i} of {n}"),
            Duration::from_secs(30),
            |j| j["lag"]["read_at"] != before && !j["lag"]["read_at"].is_null(),
        )
        .await;
    }
    last
}

async fn gated_replay_waits_for_a_real_consumer_group(backend: Backend) {
    const N: i64 = 30;
    const MAX_LAG: i64 = 10;
    let app = app(backend, &records(N, FINGERPRINT)).await;
    let token = app.admin_token().await;
    let target = unique("lag_target");
    create_topic(&target, 2, &[]).await.expect("topic");
    // The target's own traffic: 20 records per partition; the group has read 0 of partition
    // 0 and 5 of partition 1, so it is 20 + 15 = 35 records behind.
    let existing: Vec<TestRecord> = (0..40)
        .map(|i| TestRecord {
            partition: Some(i % 2),
            ..TestRecord::new(&format!("live {i}"), &[])
        })
        .collect();
    produce(&target, &existing).await.expect("produce");
    let group = unique("orders-service");
    commit(&group, &target, &[(0, 0), (1, 5)]).await;

    let gate = json!({"group": group, "max_lag": MAX_LAG});
    let id = start_replay(
        &app,
        &token,
        &replay_body(&target, FINGERPRINT, gate.clone()),
    )
    .await;
    let held = job_when(
        &app,
        &token,
        &id,
        "the job held back by the group's lag",
        Duration::from_secs(30),
        |j| j["lag"]["held"] == true && j["lag"]["records"] == 35,
    )
    .await;
    assert_eq!(held["status"], "running", "{held}");
    assert_eq!(held["lag"]["group"], group.as_str());
    assert_eq!(held["lag"]["max_lag"], MAX_LAG);
    assert!(held["lag"]["error"].is_null(), "{held}");
    assert!(held["lag"]["held_since"].is_string(), "{held}");
    assert_eq!(held["options"]["lag_gate"], gate);
    // Several readings later: still held since the same moment, nothing published.
    let later = readings(&app, &token, &id, 5).await;
    assert_eq!(later["lag"]["held"], true, "{later}");
    assert_eq!(later["lag"]["held_since"], held["lag"]["held_since"]);
    assert_eq!(later["published"], 0, "{later}");
    assert_eq!(
        record_count(&target, 2),
        40,
        "{backend:?}: published while held"
    );

    // The job page shows it, live (an operator's session; no JavaScript needed).
    app.add_user(OPERATOR.0, "operator", OPERATOR.1).await;
    let op = Browser::sign_in(&app, OPERATOR).await;
    let (status, html) = op.page(&format!("/jobs/{id}")).await;
    assert_eq!(status, 200);
    assert!(html.contains("Lag gate") && html.contains(&group), "{html}");
    assert!(html.contains("35 records behind"), "{html}");
    assert!(html.contains("Held back"), "{html}");

    // A real consumer of the group reads the backlog and then what the replay publishes.
    let stop = CancellationToken::new();
    let (seen, consumer) = run_consumer(&group, &target, stop.clone());
    let done = job_when(
        &app,
        &token,
        &id,
        "the replay finished once the group caught up",
        Duration::from_secs(120),
        |j| j["status"] == "finished",
    )
    .await;
    assert_eq!(done["published"], N, "{done}");
    assert_eq!(done["failed"], 0, "{done}");
    assert_eq!(done["lag"]["held"], false, "{done}");
    assert!(done["lag"]["held_since"].is_null(), "{done}");
    // The consumer sees every replayed record once (35 + 30 after its committed offsets).
    eventually(
        "the consumer read everything",
        Duration::from_secs(60),
        || {
            let seen = seen.clone();
            async move { seen.lock().expect("lock").len() >= 35 + N as usize }
        },
    )
    .await;
    stop.cancel();
    consumer.await.expect("consumer task");
    assert_eq!(seen.lock().expect("lock").len(), 35 + N as usize);

    // On the topic: the 40 records it had and each dead letter exactly once.
    assert_eq!(record_count(&target, 2), 40 + N, "{backend:?}");
    let mut per_dead_letter: HashMap<String, usize> = HashMap::new();
    for m in consume(&target, 40 + N as usize)
        .await
        .expect("the replayed records")
    {
        let headers = headers_of(&m);
        if headers.iter().any(|h| h.name == HEADER_DEAD_LETTER_ID) {
            *per_dead_letter
                .entry(header_text(&headers, HEADER_DEAD_LETTER_ID))
                .or_default() += 1;
        } else {
            assert!(m.payload().is_some_and(|p| p.starts_with(b"live ")));
        }
    }
    assert_eq!(per_dead_letter.len(), N as usize, "{per_dead_letter:?}");
    assert!(
        per_dead_letter.values().all(|&n| n == 1),
        "{per_dead_letter:?}"
    );
    let replayed = redrive_core::Filter {
        fingerprint: Some(FINGERPRINT.into()),
        status: Some(Status::Replayed),
        ..Default::default()
    };
    assert_eq!(app.store.count(&replayed).await.expect("count"), N);
}

#[tokio::test]
async fn a_lag_gated_replay_waits_while_a_real_consumer_group_is_behind() {
    for backend in Backend::ALL {
        gated_replay_waits_for_a_real_consumer_group(backend).await;
    }
}

async fn unknown_group_holds_with_the_reason(backend: Backend) {
    let app = app(backend, &records(5, FINGERPRINT)).await;
    let token = app.admin_token().await;
    let target = unique("lag_unknown");
    create_topic(&target, 1, &[]).await.expect("topic");
    let group = unique("nobody-reads-this");
    let id = start_replay(
        &app,
        &token,
        &replay_body(
            &target,
            FINGERPRINT,
            json!({"group": group, "max_lag": 1000}),
        ),
    )
    .await;
    let held = job_when(
        &app,
        &token,
        &id,
        "the job held with the reason",
        Duration::from_secs(30),
        |j| j["lag"]["held"] == true && j["lag"]["error"].is_string(),
    )
    .await;
    let error = held["lag"]["error"].as_str().expect("error");
    assert!(
        error.contains(&format!(
            "consumer group `{group}` is unknown to the cluster"
        )),
        "{held}"
    );
    assert!(held["lag"]["records"].is_null(), "{held}");
    let later = readings(&app, &token, &id, 3).await;
    assert_eq!(
        later["published"], 0,
        "{backend:?}: published blind: {later}"
    );
    assert_eq!(record_count(&target, 1), 0);

    // A held job can be paused, resumed and cancelled as any other.
    let path = format!("/api/v1/replays/{id}");
    for (action, want) in [
        ("pause", "paused"),
        ("resume", "running"),
        ("cancel", "cancelled"),
    ] {
        let (status, j) = json_of(
            app.post_json(
                &format!("{path}/{action}"),
                Auth::Bearer(&token),
                Csrf::Missing,
                &json!({}),
            )
            .await,
        )
        .await;
        assert_eq!((status, j["status"].as_str()), (200, Some(want)), "{j}");
    }
    let j = job(&app, &token, &id).await;
    assert_eq!(
        (j["cancelled"].as_i64(), j["published"].as_i64()),
        (Some(5), Some(0))
    );
    assert_eq!(record_count(&target, 1), 0);
}

#[tokio::test]
async fn an_unknown_consumer_group_holds_the_replay_with_the_reason() {
    for backend in Backend::ALL {
        unknown_group_holds_with_the_reason(backend).await;
    }
}

#[tokio::test]
async fn bad_lag_gates_are_refused_and_change_nothing() {
    let app = app(Backend::Sqlite, &records(3, FINGERPRINT)).await;
    let token = app.admin_token().await;
    let long = "g".repeat(256);
    let cases = [
        (
            json!({"group": "", "max_lag": 10}),
            "consumer group is empty",
        ),
        (
            json!({"group": "  ", "max_lag": 10}),
            "consumer group is empty",
        ),
        (
            json!({"group": " orders", "max_lag": 10}),
            "starts or ends with a space",
        ),
        (
            json!({"group": "a\u{7}b", "max_lag": 10}),
            "control character",
        ),
        (json!({"group": long, "max_lag": 10}), "at most 255"),
        (
            json!({"group": "orders", "max_lag": 0}),
            "at least 1 record",
        ),
    ];
    for (gate, message) in cases {
        let (status, body) = json_of(
            app.post_json(
                "/api/v1/replays",
                Auth::Bearer(&token),
                Csrf::Missing,
                &replay_body("lag-target", FINGERPRINT, gate.clone()),
            )
            .await,
        )
        .await;
        assert_eq!(status, 422, "{gate}: {body}");
        assert!(body.to_string().contains(message), "{gate}: {body}");
    }
    // Not JSON of a lag gate: a missing limit, a negative one, an unknown field.
    for gate in [
        json!({"group": "orders"}),
        json!({"group": "orders", "max_lag": -1}),
        json!({"group": "orders", "max_lag": 5, "pause": true}),
    ] {
        let res = app
            .post_json(
                "/api/v1/replays",
                Auth::Bearer(&token),
                Csrf::Missing,
                &replay_body("lag-target", FINGERPRINT, gate.clone()),
            )
            .await;
        assert_eq!(res.status().as_u16(), 422, "{gate}");
    }

    // The no-JS confirmation form: a group without a limit is the page's error; both given
    // start a gated job.
    app.add_user(OPERATOR.0, "operator", OPERATOR.1).await;
    let op = Browser::sign_in(&app, OPERATOR).await;
    let filter = format!("fingerprint={FINGERPRINT}");
    let confirm = format!("/confirm?op=replay&{filter}&target_topic=lag-target");
    let (_, html) = op.page(&confirm).await;
    assert!(
        html.contains("name=\"lag_group\"") && html.contains("name=\"lag_max\""),
        "{html}"
    );
    let base = [
        ("op", "replay"),
        ("filter", filter.as_str()),
        ("target_topic", "lag-target"),
    ];
    let mut fields = base.to_vec();
    fields.push(("lag_group", "orders-service"));
    let res = op.submit(&confirm, ACT_ON_FILTER, &fields, None).await;
    assert_eq!(res.status(), 302, "{}", app.log());
    let back = crate::support::location(&res);
    assert!(back.contains("__err="), "{back}");
    let path = back.strip_prefix(&app.base).unwrap_or(&back).to_string();
    let (_, html) = op.page(&path).await;
    assert!(html.contains("Give the most records"), "{html}");
    assert!(app.audit_of("replay").await.is_empty(), "nothing was done");

    fields.push(("lag_max", "250"));
    let res = op.submit(&confirm, ACT_ON_FILTER, &fields, None).await;
    let location = crate::support::location(&res);
    let id = job_id(&location);
    let j = job(&app, &token, &id).await;
    assert_eq!(
        j["options"]["lag_gate"],
        json!({"group": "orders-service", "max_lag": 250}),
        "{j}"
    );
    assert_eq!(j["lag"]["group"], "orders-service");
}
