//! Several instances on one PostgreSQL (issue 12, item 8; `docs/deployment.md`): three real
//! `redrive serve` processes share one database and one consumer group, and one of them is
//! killed with SIGKILL in the middle of the work.
//!
//! - **Ingest**: a DLQ topic of 6 partitions, 2 per instance. The leader is killed once it
//!   has stored part (not all) of its partitions' records, while records keep coming; its
//!   partitions move to the survivors (their `/readyz` assignment), a survivor takes over the
//!   leadership, a restarted instance rejoins and ingests. Every record ends stored exactly
//!   once: by (partition, offset) and by the unique id each record carries, and the group's
//!   committed offsets never ran ahead of the store.
//! - **Replay**: a throttled replay job of 3,000 dead letters; an instance is frozen
//!   (SIGSTOP) until it is seen holding claimed outbox rows, then killed. The survivors take
//!   those rows over when their lease expires; the job finishes with the right counts; the
//!   target topic, read back with a real consumer, holds every record, and a record
//!   published twice carries the same idempotency key both times.
//!
//! No sleep synchronises anything: every wait polls observable state (the store, `/readyz`,
//! `/metrics`, Kafka's offsets) with a deadline.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use rdkafka::message::{Headers, Message};
use redrive_core::actions::{JobStatus, ReplayOptions, ReplayRequest, Selection};
use redrive_core::replay::{HEADER_DEAD_LETTER_ID, HEADER_IDEMPOTENCY_KEY};
use redrive_core::Filter;
use redrive_testkit::fixtures::stored_dead_letter;
use redrive_testkit::ingest::{committed_offsets, end_offsets};
use redrive_testkit::{
    consume, create_topic, kafka_brokers, produce_with, unique, wait_for, Backend, TestRecord,
};
use sqlx::PgPool;

use crate::support::replay::{ann, record_count, wait_job};
use crate::support::{eventually, Auth, TestApp};

const PARTITIONS: i32 = 6;

/// `redrive_leader` from `/metrics` (public in these tests).
async fn is_leader(app: &TestApp) -> Option<bool> {
    let text = reqwest::get(app.url("/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("redrive_leader "))
        .map(|v| v.trim() == "1")
}

/// The partitions of `topic` assigned to `app`'s ingest, from `/readyz` (signed in).
async fn assigned(app: &TestApp, token: &str, topic: &str) -> Option<BTreeSet<i32>> {
    let res = app.get("/readyz", Auth::Bearer(token)).await;
    let body: serde_json::Value = res.json().await.ok()?;
    let parts = body["ingest"]["assigned_partitions"].as_array()?;
    Some(
        parts
            .iter()
            .filter(|p| p["topic"] == topic)
            .filter_map(|p| p["partition"].as_i64())
            .map(|p| p as i32)
            .collect(),
    )
}

/// The assignments of `apps` when they split every partition between them, each holding
/// some; `None` otherwise (a rebalance in progress, a member not joined yet).
async fn split(apps: &[&TestApp], token: &str, topic: &str) -> Option<Vec<BTreeSet<i32>>> {
    let mut sets = Vec::new();
    for app in apps {
        sets.push(assigned(app, token, topic).await?);
    }
    let total: usize = sets.iter().map(BTreeSet::len).sum();
    let union: BTreeSet<i32> = sets.iter().flatten().copied().collect();
    let whole: BTreeSet<i32> = (0..PARTITIONS).collect();
    (sets.iter().all(|s| !s.is_empty()) && total == union.len() && union == whole).then_some(sets)
}

/// The record with unique id `i`: key `id-{i}`, the id in the value and in a header, on
/// partition `i % 6`.
fn record(i: usize) -> TestRecord {
    TestRecord {
        key: Some(format!("id-{i}").into_bytes()),
        value: Some(format!("{{\"id\":{i},\"amount\":\"12.50\"}}").into_bytes()),
        headers: vec![
            ("x-test-id".into(), Some(i.to_string().into_bytes())),
            (
                "kafka_dlt-exception-message".into(),
                Some(format!("timeout talking to shard {}", i % 7).into_bytes()),
            ),
        ],
        partition: Some((i % PARTITIONS as usize) as i32),
        timestamp_ms: None,
    }
}

/// Produces the records `ids` with an idempotent producer (a retried send never makes a
/// second copy, so a duplicate id in the store can only be redrive's), in chunks.
async fn produce_ids(topic: &str, ids: std::ops::Range<usize>) -> anyhow::Result<()> {
    let p = redrive_testkit::producer(&[
        ("enable.idempotence", "true"),
        ("linger.ms", "20"),
        ("batch.num.messages", "5000"),
        ("queue.buffering.max.messages", "1000000"),
    ])?;
    let mut i = ids.start;
    while i < ids.end {
        let end = (i + 2_000).min(ids.end);
        let chunk: Vec<TestRecord> = (i..end).map(record).collect();
        produce_with(&p, topic, &chunk).await?;
        i = end;
    }
    Ok(())
}

/// Rows of `topic` stored on `partitions`.
async fn stored_on(pool: &PgPool, topic: &str, partitions: &BTreeSet<i32>) -> i64 {
    let parts: Vec<i32> = partitions.iter().copied().collect();
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM dead_letters WHERE dlq_topic = $1 AND dlq_partition = ANY($2)",
    )
    .bind(topic)
    .bind(&parts)
    .fetch_one(pool)
    .await
    .expect("count")
}

/// Every stored row of `topic`: (partition, offset, key).
async fn stored_rows(pool: &PgPool, topic: &str) -> Vec<(i32, i64, Option<Vec<u8>>)> {
    sqlx::query_as("SELECT dlq_partition, dlq_offset, key FROM dead_letters WHERE dlq_topic = $1")
        .bind(topic)
        .fetch_all(pool)
        .await
        .expect("rows")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_ingest_once_through_a_sigkill_and_a_rejoin() {
    const BEFORE: usize = 18_000; // produced while the victim dies
    const AFTER: usize = 12_000; // produced after it died
    const REJOINED: usize = 600; // produced once a restarted instance has rejoined
    const TOTAL: usize = BEFORE + AFTER + REJOINED;

    let topic = unique("instances.DLT");
    let group = unique("instances");
    create_topic(&topic, PARTITIONS, &[]).await.expect("topic");
    let brokers = kafka_brokers();
    let env = [
        ("REDRIVE_INGEST_ENABLED", "true"),
        ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
        ("REDRIVE_DLQ_TOPICS", topic.as_str()),
        ("REDRIVE_GROUP_ID", group.as_str()),
        ("REDRIVE_METRICS_PUBLIC", "true"),
        // The killed member leaves the group when its session times out: 6 s (the broker's
        // minimum) instead of librdkafka's 45 s.
        ("REDRIVE_KAFKA__SESSION_TIMEOUT_MS", "6000"),
    ];
    let first = TestApp::start_on(Backend::Postgres, &env).await;
    let second = first.another_instance(&env).await;
    let third = first.another_instance(&env).await;
    let token = first.admin_token().await;
    let pool = PgPool::connect(&first.db_url).await.expect("pool");

    // Before any record exists: three members, two partitions each, and one leader.
    let apps = vec![first, second, third];
    let sets = wait_for(
        "the three instances to split the partitions",
        Duration::from_secs(90),
        || async { split(&[&apps[0], &apps[1], &apps[2]], &token, &topic).await },
    )
    .await
    .expect("a split");
    let v = wait_for("one leader", Duration::from_secs(30), || async {
        let mut l = Vec::new();
        for app in &apps {
            l.push(is_leader(app).await == Some(true));
        }
        if l.iter().filter(|x| **x).count() != 1 {
            return None;
        }
        l.iter().position(|x| *x)
    })
    .await
    .expect("a leader");
    let mut apps = apps;
    let victim_parts = sets[v].clone();
    let victim_share = (BEFORE / PARTITIONS as usize) as i64 * victim_parts.len() as i64;

    // Records arrive; the leader dies once it has stored some of its partitions' records.
    let producing = {
        let topic = topic.clone();
        tokio::spawn(async move { produce_ids(&topic, 0..BEFORE).await })
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while stored_on(&pool, &topic, &victim_parts).await < 500 {
        assert!(
            Instant::now() < deadline,
            "the victim stored nothing in 120 s\n{}",
            apps[v].log()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    apps[v].kill().await;
    // Its partitions stay with the dead member until its session times out (6 s): nothing
    // changes on them before then.
    let stored_at_kill = stored_on(&pool, &topic, &victim_parts).await;
    assert!(
        stored_at_kill < victim_share,
        "the victim stored all of its {victim_share} records before the kill; the test proved \
         nothing"
    );
    // At every moment the committed offsets are covered by stored rows (committed read
    // first: the store only grows).
    let committed = committed_offsets(&group, &topic).await.expect("committed");
    let stored: BTreeSet<(i32, i64)> = stored_rows(&pool, &topic)
        .await
        .into_iter()
        .map(|(p, o, _)| (p, o))
        .collect();
    for (partition, next) in &committed {
        for offset in 0..*next {
            assert!(
                stored.contains(&(*partition, offset)),
                "offset {offset} of partition {partition} committed ({next}) but not stored"
            );
        }
    }
    eprintln!(
        "killed the leader holding partitions {victim_parts:?} with {stored_at_kill} of its \
         {victim_share} records stored ({} in all); committed then: {committed:?}",
        stored.len()
    );
    producing.await.expect("producer task").expect("produce");
    // More records keep coming.
    produce_ids(&topic, BEFORE..BEFORE + AFTER)
        .await
        .expect("produce");
    let victim = apps.remove(v);
    drop(victim);

    // The survivors split every partition, and one of them leads.
    let survivors = [&apps[0], &apps[1]];
    eventually(
        "the survivors to take the dead instance's partitions",
        Duration::from_secs(90),
        || async { split(&survivors, &token, &topic).await.is_some() },
    )
    .await;
    eventually("a survivor to lead", Duration::from_secs(30), || async {
        let a = is_leader(survivors[0]).await;
        let b = is_leader(survivors[1]).await;
        matches!(
            (a, b),
            (Some(true), Some(false)) | (Some(false), Some(true))
        )
    })
    .await;
    let store = apps[0].store.clone();
    let count = || async {
        redrive_testkit::ingest::count_in(&store, &topic)
            .await
            .unwrap_or(0)
    };
    eventually(
        "every record produced so far stored",
        Duration::from_secs(180),
        || async { count().await >= (BEFORE + AFTER) as i64 },
    )
    .await;

    // A restarted instance rejoins: the three split the partitions again, and records on
    // every partition (so on the newcomer's) are stored.
    let rejoined = apps[0].another_instance(&env).await;
    apps.push(rejoined);
    let all = [&apps[0], &apps[1], &apps[2]];
    eventually(
        "the restarted instance to rejoin with partitions",
        Duration::from_secs(90),
        || async { split(&all, &token, &topic).await.is_some() },
    )
    .await;
    produce_ids(&topic, BEFORE + AFTER..TOTAL)
        .await
        .expect("produce");
    eventually("every record stored", Duration::from_secs(120), || async {
        count().await >= TOTAL as i64
    })
    .await;
    let end = end_offsets(&topic).await.expect("end offsets");
    assert_eq!(end.values().sum::<i64>(), TOTAL as i64);
    eventually(
        "offsets committed to the end",
        Duration::from_secs(60),
        || async { committed_offsets(&group, &topic).await.ok().as_ref() == Some(&end) },
    )
    .await;

    // Exactly once: one row per (partition, offset), one per unique id, every id.
    let rows = stored_rows(&pool, &topic).await;
    assert_eq!(rows.len(), TOTAL, "rows");
    let positions: BTreeSet<(i32, i64)> = rows.iter().map(|(p, o, _)| (*p, *o)).collect();
    assert_eq!(positions.len(), TOTAL, "distinct (partition, offset)");
    for (partition, high) in &end {
        let have = positions.iter().filter(|(p, _)| p == partition).count() as i64;
        assert_eq!(have, *high, "partition {partition}: offsets 0..{high}");
    }
    let ids: BTreeSet<Vec<u8>> = rows.iter().filter_map(|(_, _, k)| k.clone()).collect();
    let want: BTreeSet<Vec<u8>> = (0..TOTAL).map(|i| format!("id-{i}").into_bytes()).collect();
    assert_eq!(ids.len(), TOTAL, "distinct unique ids");
    assert!(ids == want, "the stored ids are exactly the produced ones");
}

/// Claim tokens an instance logged (`rows claimed ... claim=TOKEN`, debug).
fn claim_tokens(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("rows claimed"))
        .filter_map(|l| l.split("claim=").nth(1))
        .filter_map(|t| t.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Outbox rows still claimed under `tokens` that no open transaction is changing, with
/// their lease: `SKIP LOCKED` leaves out a row whose mark (or claim) is in flight, whose
/// outcome is not known yet. Read while the instance is frozen, these are rows it holds
/// and would leave behind if it died now.
async fn held_rows(pool: &PgPool, tokens: &[String]) -> BTreeMap<i64, i64> {
    if tokens.is_empty() {
        return BTreeMap::new();
    }
    let mut tx = pool.begin().await.expect("begin");
    let rows: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT id, lease_until_ms FROM outbox WHERE status = 'claimed' \
         AND claim_token = ANY($1) FOR UPDATE SKIP LOCKED",
    )
    .bind(tokens)
    .fetch_all(&mut *tx)
    .await
    .expect("held rows");
    tx.rollback().await.expect("rollback");
    rows.into_iter().collect()
}

fn header(m: &rdkafka::message::OwnedMessage, name: &str) -> String {
    let hs = m.headers().expect("headers");
    let values: Vec<String> = hs
        .iter()
        .filter(|h| h.key == name)
        .filter_map(|h| h.value)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert_eq!(values.len(), 1, "exactly one {name}");
    values[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_finish_a_replay_when_one_dies_holding_claims() {
    const RECORDS: i64 = 3_000;
    const LEASE_MS: &str = "4000";
    let dlq = unique("instances_replay.DLT");
    let target = unique("instances_target");
    create_topic(&target, 3, &[]).await.expect("topic");
    let records: Vec<_> = (0..RECORDS)
        .map(|o| stored_dead_letter(&dlq, o, Default::default()))
        .collect();
    let brokers = kafka_brokers();
    let env = [
        ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
        ("REDRIVE_METRICS_PUBLIC", "true"),
        // A dead relay's claims are taken over after the lease: 4 s, not the default.
        ("REDRIVE_RELAY_LEASE_MS", LEASE_MS),
        ("REDRIVE_RELAY_DELIVERY_TIMEOUT_MS", "2000"),
        ("REDRIVE_RELAY_POLL_INTERVAL_MS", "50"),
    ];
    let first = TestApp::with_records(Backend::Postgres, &records, &env).await;
    let second = first.another_instance(&env).await;
    let third = first.another_instance(&env).await;
    let mut apps = vec![first, second, third];
    let store = apps[0].store.clone();
    let pool = PgPool::connect(&apps[0].db_url).await.expect("pool");

    // Throttled, so that each claim is held while its records go out (a claim is a quarter
    // lease's worth of the rate: 300 rows, a second of publishing).
    let job = store
        .request_replay(
            &ann(),
            &ReplayRequest {
                selection: Selection::Filter(Filter {
                    dlq_topic: Some(dlq.clone()),
                    ..Filter::default()
                }),
                target_topic: Some(target.clone()),
                rate_per_sec: Some(300),
                reason: Some("several instances".into()),
                options: ReplayOptions::default(),
            },
        )
        .await
        .expect("replay");
    assert_eq!(job.total, RECORDS);

    // Mid-job: a quarter published.
    wait_for(
        "a quarter of the job published",
        Duration::from_secs(120),
        || async {
            let j = store.job(&job.id).await.ok().flatten()?;
            (j.published >= RECORDS / 4).then_some(())
        },
    )
    .await
    .expect("progress");
    // Freeze each instance in turn until one is caught holding claimed rows; kill it then.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (v, held) = 'found: loop {
        for (i, app) in apps.iter().enumerate() {
            app.signal("STOP");
            let tokens = claim_tokens(&app.log());
            let held = held_rows(&pool, &tokens).await;
            if !held.is_empty() {
                break 'found (i, held);
            }
            app.signal("CONT");
        }
        let j = store.job(&job.id).await.expect("job").expect("a job");
        assert!(
            j.status == JobStatus::Running && Instant::now() < deadline,
            "no instance was seen holding claims ({:?}, {} published)",
            j.status,
            j.published
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut victim = apps.remove(v);
    victim.kill().await;
    let at_kill = store.job(&job.id).await.expect("job").expect("a job");
    // Dead now, it can settle nothing: what it held stays claimed until the lease ends and
    // a survivor claims it again (checked below: each was marked after its lease).
    eprintln!(
        "killed an instance holding {} claimed rows ({} of {RECORDS} published then)",
        held.len(),
        at_kill.published
    );
    drop(victim);

    let done = wait_job(
        &store,
        &job.id,
        Duration::from_secs(180),
        JobStatus::Finished,
    )
    .await;
    assert_eq!(
        (done.published, done.failed),
        (RECORDS, 0),
        "the job's counts: {done:?}"
    );

    // The survivors took the dead instance's rows over once their lease had expired.
    let outbox: Vec<(i64, i64, String, String, Option<i64>)> = sqlx::query_as(
        "SELECT id, dead_letter_id, idempotency_key, status, published_at_ms FROM outbox \
         WHERE job_id = $1",
    )
    .bind(&job.id)
    .fetch_all(&pool)
    .await
    .expect("outbox");
    assert_eq!(outbox.len() as i64, RECORDS);
    let mut key_of: HashMap<String, String> = HashMap::new();
    for (id, dead_letter_id, key, status, published_at) in &outbox {
        assert_eq!(status, "published", "outbox row {id}");
        if let Some(lease_until) = held.get(id) {
            let at = published_at.expect("published_at_ms");
            assert!(
                at > *lease_until,
                "row {id} held by the dead instance was marked at {at}, before its lease \
                 ended at {lease_until}"
            );
        }
        key_of.insert(dead_letter_id.to_string(), key.clone());
    }
    // Counted once each: one replay per dead letter.
    let counts: Vec<(i32, i64)> = sqlx::query_as(
        "SELECT replay_count, COUNT(*) FROM dead_letters WHERE dlq_topic = $1 \
         GROUP BY replay_count",
    )
    .bind(&dlq)
    .fetch_all(&pool)
    .await
    .expect("replay counts");
    assert_eq!(
        counts,
        vec![(1, RECORDS)],
        "replay_count of the dead letters"
    );

    // On the target topic: every record at least once, each copy with its row's key.
    let on_topic = record_count(&target, 3);
    assert!(on_topic >= RECORDS, "{on_topic} of {RECORDS} on the topic");
    let messages = consume(&target, on_topic as usize)
        .await
        .expect("the replayed records");
    let mut copies: HashMap<String, Vec<String>> = HashMap::new();
    for m in &messages {
        copies
            .entry(header(m, HEADER_DEAD_LETTER_ID))
            .or_default()
            .push(header(m, HEADER_IDEMPOTENCY_KEY));
    }
    assert_eq!(
        copies.len() as i64,
        RECORDS,
        "distinct dead letters on the topic"
    );
    let mut republished = 0;
    for (dead_letter, keys) in &copies {
        let want = key_of
            .get(dead_letter)
            .unwrap_or_else(|| panic!("dead letter {dead_letter} is not in the job"));
        assert!(
            keys.iter().all(|k| k == want),
            "dead letter {dead_letter}: keys {keys:?}, its outbox row's is {want}"
        );
        republished += keys.len() - 1;
    }
    eprintln!(
        "replay under SIGKILL: {RECORDS} published, {} claimed rows taken over after the \
         lease, {republished} records republished (same idempotency key)",
        held.len()
    );
}
