//! A replay job's rate limit is the job's, not each instance's (issue 12 item 8;
//! `docs/replay.md`, "Rate limit"): three `redrive serve` processes on one PostgreSQL publish
//! one throttled job together at its rate, coordinated through the store's `replay_rate` row.
//!
//! Assertions are on counts and on what the store recorded, never on how long something
//! took: every record was granted by a slot of the shared bucket; the slots cover at least
//! `granted / rate` of the store's clock; and no record reached the broker before its slot's
//! time, so the job's records granted up to its last record's broker timestamp stay within
//! `rate × elapsed + burst` (three instances each throttled on their own would have
//! published the same records in a third of that time).

use std::time::Duration;

use rdkafka::message::Message;
use redrive_core::actions::{JobStatus, ReplayRequest, Selection};
use redrive_core::model::NewDeadLetter;
use redrive_core::Filter;
use redrive_testkit::{consume, create_topic, kafka_brokers, unique, Backend};

use crate::support::replay::{ann, dead_letter, record_count, wait_job};
use crate::support::TestApp;

/// `redrive_relay_published_total` from an instance's `/metrics` (0 when absent).
async fn published_by(app: &TestApp) -> u64 {
    let text = reqwest::get(app.url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .find_map(|l| l.strip_prefix("redrive_relay_published_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

#[tokio::test]
async fn three_instances_share_one_jobs_rate() {
    const N: i64 = 300;
    const RATE: u32 = 50;
    let target = unique("shared_rate");
    create_topic(&target, 1, &[]).await.expect("topic");
    let brokers = kafka_brokers();
    let env = [
        ("REDRIVE_METRICS_PUBLIC", "true"),
        ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
        ("REDRIVE_RELAY_POLL_INTERVAL_MS", "100"),
    ];
    let records: Vec<NewDeadLetter> = (0..N)
        .map(|i| {
            dead_letter(
                i,
                Some(format!("k{i}").into_bytes()),
                Some(vec![b'x'; 64]),
                vec![],
            )
        })
        .collect();
    let first = TestApp::with_records(Backend::Postgres, &records, &env).await;
    let second = first.another_instance(&env).await;
    let third = first.another_instance(&env).await;
    let apps = [&first, &second, &third];

    let job = first
        .store
        .request_replay(
            &ann(),
            &ReplayRequest {
                selection: Selection::Filter(Filter::default()),
                target_topic: Some(target.clone()),
                rate_per_sec: Some(RATE),
                reason: None,
                options: Default::default(),
            },
        )
        .await
        .expect("replay");
    assert_eq!(job.total, N);
    let done = wait_job(
        &first.store,
        &job.id,
        Duration::from_secs(180),
        JobStatus::Finished,
    )
    .await;
    assert_eq!(done.published, N, "{done:?}");
    assert_eq!(record_count(&target, 1), N);

    // Several instances published the job (each holds claims of one second's worth).
    let mut by_instance = Vec::new();
    for app in apps {
        by_instance.push(published_by(app).await);
    }
    assert_eq!(by_instance.iter().sum::<u64>(), N as u64, "{by_instance:?}");
    assert!(
        by_instance.iter().filter(|n| **n > 0).count() >= 2,
        "the job was shared: {by_instance:?}"
    );

    // Every record was granted a place in the job's one bucket, and the slots granted cover
    // at least `granted / rate` of the store's clock.
    let state = first
        .store
        .replay_rate_state(&job.id)
        .await
        .expect("rate state")
        .expect("a throttled job that published has a rate row");
    assert!(state.granted >= N, "{state:?}");
    let granted_span_us = state.granted * 1_000_000 / i64::from(RATE);
    assert!(
        state.tat_us - state.first_us >= granted_span_us,
        "slots never overlap: {state:?}"
    );

    // No record went before its slot: the last record's broker timestamp (CreateTime, set
    // by the relay when it hands the record over) is at least (N - burst) / rate after the
    // first slot began. Burst: the catch-up tolerance (1/20 s) and one slot (1/20 s).
    let got = consume(&target, N as usize)
        .await
        .expect("the replayed records");
    let last_ms = got
        .iter()
        .filter_map(|m| m.timestamp().to_millis())
        .max()
        .expect("timestamps");
    let elapsed_ms = last_ms - state.first_us / 1_000;
    let burst = i64::from(RATE / 20).max(1) * 2;
    // +1 ms: the broker's timestamp has ms resolution, the store's clock µs.
    assert!(
        N <= i64::from(RATE) * (elapsed_ms + 1) / 1_000 + burst,
        "{N} records within {elapsed_ms} ms of the first slot exceed {RATE} msgs/s + a burst \
         of {burst}: {state:?}, per instance {by_instance:?}"
    );
    for app in apps {
        let log = app.log();
        assert!(!log.contains("cannot take a rate slot"), "{log}");
    }
}
