//! Concurrency on SQLite (docs/replay.md, "Concurrency on SQLite"): ingest from a real DLQ
//! topic, a bulk delete and a bulk replay over tens of thousands of dead letters, the relay
//! publishing that replay, and 20 concurrent readers of pages and the API, all at once
//! against one SQLite file through the real binary — with zero "database is locked" and no
//! failed request.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redrive_core::actions::JobStatus;
use redrive_core::model::{Convention, NewDeadLetter, Normalized, RawRecord, Status};
use redrive_core::Filter;
use redrive_testkit::{create_topic, kafka_brokers, unique, wait_for, Backend, TestRecord};
use serde_json::{json, Value};

use crate::support::{Auth, Csrf, TestApp};

/// Dead letters in the store before the run: `fingerprint` "del" ones to delete, "rep" ones
/// to replay.
const TO_DELETE: i64 = 20_000;
const TO_REPLAY: i64 = 10_000;
/// Records ingest stores during the run.
const INGESTED: usize = 2_000;
const READERS: usize = 20;

fn seeded(i: i64, fingerprint: &str, source: &str) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: "seed.DLT".into(),
            dlq_partition: 0,
            dlq_offset: i,
            timestamp_ms: Some(1_796_104_900_000 + i),
            key: Some(i.to_be_bytes().to_vec()),
            value: Some(format!("{{\"n\":{i}}}").into_bytes()),
            headers: vec![],
        },
        convention: Convention::Unknown,
        fingerprint: fingerprint.into(),
        normalized: Normalized {
            source_topic: Some(source.into()),
            error_class: Some("java.lang.IllegalStateException".into()),
            error_message: Some(format!("boom {}", i % 7)),
            ..Normalized::default()
        },
        dead_lettered_at_ms: 1_796_104_900_000 + i,
        ingested_at_ms: 1_796_104_900_000 + i,
    }
}

#[tokio::test]
async fn ingest_bulk_actions_relay_and_twenty_readers_share_sqlite_without_locks() {
    let dlq = format!("{}.DLT", unique("concurrency"));
    let target = unique("concurrency_target");
    create_topic(&dlq, 1, &[]).await.expect("dlq topic");
    create_topic(&target, 1, &[]).await.expect("target topic");
    let mut records: Vec<NewDeadLetter> =
        (0..TO_DELETE).map(|i| seeded(i, "del", &target)).collect();
    records.extend((TO_DELETE..TO_DELETE + TO_REPLAY).map(|i| seeded(i, "rep", &target)));
    let app = TestApp::with_records(
        Backend::Sqlite,
        &records,
        &[
            ("REDRIVE_INGEST_ENABLED", "true"),
            ("REDRIVE_KAFKA_BROKERS", &kafka_brokers()),
            ("REDRIVE_DLQ_TOPICS", &dlq),
            ("REDRIVE_GROUP_ID", &unique("concurrency")),
            // The 20,000-row delete answers when its last chunk commits; how long that takes
            // on a loaded machine is `make bench`'s concern, not this test's (it asserts no
            // lock error and exact counts), so the request timeout must not be what fails it.
            ("REDRIVE_REQUEST_TIMEOUT_MS", "600000"),
        ],
    )
    .await;
    let token = app.admin_token().await;
    let app = Arc::new(app);

    // 20 readers: the list page, the groups page, the jobs page and the API, round robin.
    let stop = Arc::new(AtomicBool::new(false));
    let requests = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for r in 0..READERS {
        let (app, token, stop, requests) =
            (app.clone(), token.clone(), stop.clone(), requests.clone());
        readers.push(tokio::spawn(async move {
            let paths = [
                "/api/v1/dead-letters?limit=50",
                "/",
                "/api/v1/dead-letters?fingerprint=rep&limit=20",
                "/groups",
                "/jobs",
                "/api/v1/replays",
            ];
            let mut failures = Vec::new();
            let mut i = r;
            while !stop.load(Ordering::Relaxed) {
                let path = paths[i % paths.len()];
                i += 1;
                let res = app.get(path, Auth::Bearer(&token)).await;
                requests.fetch_add(1, Ordering::Relaxed);
                if !res.status().is_success() {
                    let status = res.status();
                    failures.push(format!(
                        "GET {path}: {status} {}",
                        res.text().await.unwrap_or_default()
                    ));
                }
            }
            failures
        }));
    }

    // Ingest: records arriving on the DLQ topic throughout.
    let producing = tokio::spawn({
        let dlq = dlq.clone();
        async move {
            redrive_testkit::ingest::produce_many(&dlq, INGESTED, |i| {
                TestRecord::new(&format!("{{\"live\":{i}}}"), &[])
            })
            .await
        }
    });

    // The two bulk actions, at the same time.
    let delete = {
        let (app, token) = (app.clone(), token.clone());
        tokio::spawn(async move {
            app.post_json(
                "/api/v1/dead-letters/delete",
                Auth::Bearer(&token),
                Csrf::Missing,
                &json!({"filter": {"fingerprint": "del"}, "reason": "concurrency test"}),
            )
            .await
        })
    };
    let replay = app
        .post_json(
            "/api/v1/replays",
            Auth::Bearer(&token),
            Csrf::Missing,
            &json!({"filter": {"fingerprint": "rep"}, "target_topic": target}),
        )
        .await;
    assert_eq!(replay.status(), 202, "{}", app.log());
    let replay: Value = replay.json().await.expect("JSON");
    assert_eq!(replay["total"], TO_REPLAY);
    let job_id = replay["job_id"].as_str().expect("job id").to_string();
    let delete = delete.await.expect("join");
    assert_eq!(delete.status(), 200, "{}", app.log());
    let delete: Value = delete.json().await.expect("JSON");
    assert_eq!(delete["affected"], TO_DELETE);

    producing.await.expect("join").expect("produce");
    let store = app.store.clone();
    let job = wait_for(
        "the replay job to finish",
        Duration::from_secs(300),
        || async {
            let j = store.job(&job_id).await.ok().flatten()?;
            (j.status == JobStatus::Finished).then_some(j)
        },
    )
    .await
    .expect("job");
    redrive_testkit::ingest::wait_for_count(
        &store,
        &dlq,
        INGESTED as i64,
        Duration::from_secs(120),
    )
    .await
    .expect("ingested");

    stop.store(true, Ordering::Relaxed);
    let mut failures = Vec::new();
    for r in readers {
        failures.extend(r.await.expect("join"));
    }
    let log = app.log();
    assert!(
        !log.contains("database is locked"),
        "the log has 'database is locked':\n{log}"
    );
    assert!(
        failures.is_empty(),
        "{} failed reads: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(
        requests.load(Ordering::Relaxed) >= READERS as u64,
        "the readers ran"
    );
    assert_eq!((job.published, job.failed), (TO_REPLAY, 0));
    let deleted = Filter {
        status: Some(Status::Deleted),
        ..Filter::default()
    };
    assert_eq!(store.count(&deleted).await.expect("count"), TO_DELETE);
    // One audit row per action, with the final count, although each ran in chunks.
    let deletes = app.audit_of("delete").await;
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].count, TO_DELETE);
    assert!(
        deletes[0].outcome.contains("chunks"),
        "{}",
        deletes[0].outcome
    );
    let replays = app.audit_of("replay").await;
    assert_eq!((replays.len(), replays[0].count), (1, TO_REPLAY));

    // Every write of the server queued at the write gate (docs/replay.md), and its figures
    // are on /metrics.
    let metrics = app
        .get("/metrics", Auth::Bearer(&token))
        .await
        .text()
        .await
        .expect("metrics");
    let passes = metric_value(&metrics, "redrive_store_write_gate_passes_total");
    assert!(
        passes >= (TO_DELETE + TO_REPLAY) as f64 / redrive_core::store::CHUNK_ROWS as f64,
        "gate passes {passes}:\n{metrics}"
    );
    for name in [
        "redrive_store_write_gate_queued_total",
        "redrive_store_write_gate_wait_seconds_total",
        "redrive_store_write_gate_wait_max_seconds",
        "redrive_store_write_gate_hold_seconds_total",
        "redrive_store_write_gate_hold_max_seconds",
    ] {
        metric_value(&metrics, name);
    }
    // A figure for the record (not asserted: speed is `make bench`'s).
    for l in metrics
        .lines()
        .filter(|l| l.starts_with("redrive_store_write_gate_"))
    {
        eprintln!("{l}");
    }
}

/// The value of the unlabelled sample `name` in a Prometheus text exposition; panics when
/// it is missing.
fn metric_value(exposition: &str, name: &str) -> f64 {
    exposition
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} is not on /metrics:\n{exposition}"))
}
