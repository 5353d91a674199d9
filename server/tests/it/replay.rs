//! Replay end to end on the real broker, on SQLite and PostgreSQL: the record that reaches
//! the target topic (key, value, application headers byte-exact, diagnostics dropped, the five
//! `redrive-*` headers), a 10,000-record replay by filter published once each, a throttled
//! replay that takes as long as it should, a Kafka outage the relay waits out, an outage that
//! never ends (bounded per job), records Kafka refuses for good (too large for the topic, an
//! invalid topic: failed at once while the others publish), and a relay crash between
//! publish and mark (the real binary, aborted by its test hook, then restarted).

use std::collections::HashSet;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use rdkafka::message::Message;
use redrive_core::actions::{JobStatus, ReplayJob, ReplayRequest, Selection};
use redrive_core::model::{Header, NewDeadLetter, Status};
use redrive_core::replay::{
    RelayConfig, FAULT_ABORT_AFTER_PUBLISH_ENV, HEADER_DEAD_LETTER_ID, HEADER_IDEMPOTENCY_KEY,
    HEADER_REPLAYED_BY, HEADER_REPLAY_COUNT, HEADER_REPLAY_ID,
};
use redrive_core::store::Store;
use redrive_core::{Filter, ListQuery};
use redrive_testkit::{
    consume, create_topic, fresh_database, fresh_sqlite_url, kafka_brokers, unique, wait_for,
    Backend,
};

use crate::support::redrive_std_command;
use crate::support::replay::{
    ann, dead_letter, fast_relay, header_text, headers_of, record_count, store_with_throttled_job,
    wait_job, RunningRelay,
};

fn h(name: &str, value: Option<&[u8]>) -> Header {
    Header {
        name: name.to_string(),
        value: value.map(<[u8]>::to_vec),
    }
}

/// Spring DLPR diagnostics naming `source` as the original topic, with application headers
/// (a trace context, a null-valued and a repeated header, non-UTF-8 bytes) between them.
fn spring_headers(source: &str) -> Vec<Header> {
    vec![
        h(
            "traceparent",
            Some(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ),
        h("kafka_dlt-original-topic", Some(source.as_bytes())),
        h("kafka_dlt-original-partition", Some(&1i32.to_be_bytes())),
        h("kafka_dlt-original-offset", Some(&1001i64.to_be_bytes())),
        h(
            "kafka_dlt-original-timestamp",
            Some(&1_796_104_800_000i64.to_be_bytes()),
        ),
        h("x-tenant", None),
        h(
            "kafka_dlt-exception-fqcn",
            Some(b"org.springframework.kafka.listener.ListenerExecutionFailedException"),
        ),
        h(
            "kafka_dlt-exception-cause-fqcn",
            Some(b"java.lang.IllegalStateException"),
        ),
        h(
            "kafka_dlt-exception-message",
            Some(b"Listener method threw exception; Payment 4711 declined by provider"),
        ),
        h(
            "kafka_dlt-exception-stacktrace",
            Some(b"java.lang.IllegalStateException: Payment 4711 declined\n\tat x.Y(Y.java:42)\n"),
        ),
        h("x-tenant", Some(b"acme")),
        h("x-bin", Some(&[0x00, 0xff, 0xc3, 0x28])),
    ]
}

/// The application headers [`spring_headers`] carries, in order.
fn application_headers() -> Vec<Header> {
    vec![
        h(
            "traceparent",
            Some(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ),
        h("x-tenant", None),
        h("x-tenant", Some(b"acme")),
        h("x-bin", Some(&[0x00, 0xff, 0xc3, 0x28])),
    ]
}

async fn all_ids(store: &Store, filter: Filter) -> Vec<i64> {
    store
        .list(&ListQuery {
            filter,
            limit: 500,
            cursor: None,
        })
        .await
        .expect("list")
        .items
        .iter()
        .map(|s| s.id)
        .collect()
}

#[tokio::test]
async fn replayed_records_are_byte_exact_with_redrive_headers() {
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.expect("database");
        let store = Store::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        // The Spring headers name this fresh topic as the source: the default target.
        let source = unique("payments");
        create_topic(&source, 3, &[]).await.expect("topic");
        let binary: Vec<u8> = (0..=255u8).rev().collect();
        store
            .insert_batch(&[
                dead_letter(1, None, Some(binary.clone()), spring_headers(&source)),
                dead_letter(
                    2,
                    Some(b"order-4712".to_vec()),
                    None,
                    spring_headers(&source),
                ),
            ])
            .await
            .expect("insert");
        let ids = all_ids(&store, Filter::default()).await;
        assert_eq!(ids.len(), 2);
        let dry = store
            .dry_run(&Selection::Ids(ids.clone()), None)
            .await
            .expect("dry run");
        assert_eq!(dry.per_target, vec![(source.clone(), 2)], "{backend:?}");

        let job = store
            .request_replay(
                &ann(),
                &ReplayRequest {
                    selection: Selection::Ids(ids.clone()),
                    target_topic: None,
                    rate_per_sec: None,
                    reason: Some("payment provider fixed".into()),
                    options: Default::default(),
                },
            )
            .await
            .expect("replay");
        assert_eq!(job.total, 2);
        let relay = RunningRelay::start(&store, fast_relay());
        let done = wait_job(
            &store,
            &job.id,
            Duration::from_secs(60),
            JobStatus::Finished,
        )
        .await;
        // After stop: the relay has finished recording what it marked.
        let status = relay.status.clone();
        relay.stop().await;
        let snapshot = status.snapshot();
        assert_eq!((done.published, done.failed, done.cancelled), (2, 0, 0));
        assert!(done.started_at_ms.is_some() && done.finished_at_ms.is_some());
        assert_eq!(snapshot.published_total, 2);
        assert_eq!(snapshot.kafka_reachable, Some(true));

        assert_eq!(
            record_count(&source, 3),
            2,
            "{backend:?}: each published once"
        );
        let messages = consume(&source, 2).await.expect("the replayed records");
        let mut keys = HashSet::new();
        for m in &messages {
            let headers = headers_of(m);
            let dl_id: i64 = header_text(&headers, HEADER_DEAD_LETTER_ID)
                .parse()
                .expect("decimal id");
            let original = store.get(dl_id).await.expect("get").expect("exists");
            assert_eq!(m.key(), original.record.key.as_deref(), "key byte-exact");
            assert_eq!(
                m.payload(),
                original.record.value.as_deref(),
                "value byte-exact"
            );
            assert!(
                m.key().is_none() || m.payload().is_none(),
                "one has a null key, the other is a tombstone"
            );
            let n_app = application_headers().len();
            assert_eq!(headers.len(), n_app + 5, "{headers:?}");
            assert_eq!(
                headers[..n_app],
                application_headers()[..],
                "application headers in order, diagnostics dropped"
            );
            assert!(!headers.iter().any(|x| x.name.starts_with("kafka_dlt-")));
            assert_eq!(header_text(&headers, HEADER_REPLAY_ID), job.id);
            assert_eq!(header_text(&headers, HEADER_REPLAY_COUNT), "1");
            assert_eq!(header_text(&headers, HEADER_REPLAYED_BY), "ann");
            let key = header_text(&headers, HEADER_IDEMPOTENCY_KEY);
            assert_eq!(key.len(), 36, "a UUID: {key}");
            assert_eq!(&key[14..15], "4", "version 4: {key}");
            keys.insert(key);

            assert_eq!(original.summary.status, Status::Replayed);
            assert_eq!(original.replay_count, 1);
            let history = store.history(dl_id).await.expect("history");
            let last = history.last().expect("events");
            assert_eq!(last.kind, "published");
            assert_eq!(
                last.detail.as_deref(),
                Some(
                    format!(
                        "to {source} partition {} offset {}",
                        m.partition(),
                        m.offset()
                    )
                    .as_str()
                )
            );
        }
        assert_eq!(keys.len(), 2, "one idempotency key per record");
        assert_eq!(
            messages.iter().map(|m| m.key()).collect::<HashSet<_>>(),
            HashSet::from([None, Some(&b"order-4712"[..])])
        );
    }
}

#[tokio::test]
async fn ten_thousand_by_filter_are_each_published_once() {
    const N: usize = 10_000;
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.expect("database");
        let store = Store::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        let target = unique("bulk_replay");
        create_topic(&target, 3, &[]).await.expect("topic");
        let batch: Vec<NewDeadLetter> = (0..N as i64)
            .map(|i| {
                let mut d = dead_letter(
                    i,
                    Some(format!("key-{i}").into_bytes()),
                    Some(format!("{{\"n\":{i}}}").into_bytes()),
                    vec![h("seq", Some(i.to_string().as_bytes()))],
                );
                d.fingerprint = "00000000000bb0bb".to_string();
                d
            })
            .collect();
        for chunk in batch.chunks(2_000) {
            store.insert_batch(chunk).await.expect("insert");
        }
        let filter = Filter {
            fingerprint: Some("00000000000bb0bb".to_string()),
            ..Filter::default()
        };
        let dry = store
            .dry_run(&Selection::Filter(filter.clone()), Some(&target))
            .await
            .expect("dry run");
        assert_eq!(dry.queued(), N as i64);

        let asked = Instant::now();
        let job = store
            .request_replay(
                &ann(),
                &ReplayRequest {
                    selection: Selection::Filter(filter.clone()),
                    target_topic: Some(target.clone()),
                    rate_per_sec: None,
                    reason: None,
                    options: Default::default(),
                },
            )
            .await
            .expect("replay");
        let request_ms = asked.elapsed().as_millis();
        assert_eq!(job.total, N as i64);
        let relay = RunningRelay::start(&store, fast_relay());
        let done = wait_job(
            &store,
            &job.id,
            Duration::from_secs(300),
            JobStatus::Finished,
        )
        .await;
        relay.stop().await;
        assert_eq!((done.published, done.failed), (N as i64, 0), "{backend:?}");
        let (Some(start), Some(end)) = (done.started_at_ms, done.finished_at_ms) else {
            panic!("timestamps: {done:?}");
        };
        let secs = ((end - start) as f64 / 1000.0).max(0.001);
        println!(
            "{backend:?}: request_replay of {N} by filter took {request_ms} ms; relay published \
             {N} in {secs:.2} s = {:.0} msgs/s",
            N as f64 / secs
        );

        assert_eq!(
            record_count(&target, 3),
            N as i64,
            "no duplicates, none missing"
        );
        let messages = consume(&target, N).await.expect("the replayed records");
        let keys: HashSet<String> = messages
            .iter()
            .map(|m| header_text(&headers_of(m), HEADER_IDEMPOTENCY_KEY))
            .collect();
        let dead_letters: HashSet<String> = messages
            .iter()
            .map(|m| header_text(&headers_of(m), HEADER_DEAD_LETTER_ID))
            .collect();
        assert_eq!(keys.len(), N, "distinct idempotency keys");
        assert_eq!(dead_letters.len(), N, "every dead letter once");
        let replayed = Filter {
            status: Some(Status::Replayed),
            ..filter
        };
        assert_eq!(store.count(&replayed).await.expect("count"), N as i64);
    }
}

#[tokio::test]
async fn a_throttled_replay_takes_as_long_as_its_rate_says() {
    const N: i64 = 400;
    const RATE: u32 = 200;
    for backend in Backend::ALL {
        let (store, _dir, target, job) =
            store_with_throttled_job(backend, "throttled", N, 100, RATE).await;
        let relay = RunningRelay::start(&store, fast_relay());
        let done = wait_job(
            &store,
            &job.id,
            Duration::from_secs(60),
            JobStatus::Finished,
        )
        .await;
        relay.stop().await;
        assert_eq!(done.published, N);
        let (Some(start), Some(end)) = (done.started_at_ms, done.finished_at_ms) else {
            panic!("timestamps: {done:?}");
        };
        let secs = (end - start) as f64 / 1000.0;
        println!(
            "{backend:?}: {N} records at {RATE} msgs/s took {secs:.2} s = {:.1} msgs/s measured",
            N as f64 / secs
        );
        // Nominally 2 s; generous bounds, the precise figure belongs to the benchmark.
        assert!(
            secs >= 1.2,
            "{backend:?}: too fast for {RATE} msgs/s: {secs:.2} s"
        );
        assert!(secs < 20.0, "{backend:?}: far too slow: {secs:.2} s");
        assert_eq!(record_count(&target, 1), N);
    }
}

#[tokio::test]
async fn an_unreachable_kafka_makes_the_job_wait_and_it_resumes() {
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.expect("database");
        let store = Store::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        let target = unique("after_outage");
        create_topic(&target, 1, &[]).await.expect("topic");
        let batch: Vec<NewDeadLetter> = (0..20)
            .map(|i| dead_letter(i, Some(vec![i as u8]), Some(vec![7; 10]), vec![]))
            .collect();
        store.insert_batch(&batch).await.expect("insert");
        let job = store
            .request_replay(
                &ann(),
                &ReplayRequest {
                    selection: Selection::Filter(Filter::default()),
                    target_topic: Some(target.clone()),
                    rate_per_sec: None,
                    reason: None,
                    options: Default::default(),
                },
            )
            .await
            .expect("replay");

        // A port nobody listens on.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let down = RunningRelay::start(
            &store,
            RelayConfig {
                brokers: format!("127.0.0.1:{closed}"),
                delivery_timeout_ms: 1_000,
                ..fast_relay()
            },
        );
        let waiting = wait_job(&store, &job.id, Duration::from_secs(60), JobStatus::Waiting).await;
        let status = down.status.clone();
        down.stop().await;
        let snapshot = status.snapshot();
        assert!(
            waiting
                .last_error
                .as_deref()
                .unwrap_or("")
                .contains("Kafka unreachable"),
            "{backend:?}: {waiting:?}"
        );
        assert_eq!((waiting.published, waiting.failed), (0, 0));
        assert_eq!(snapshot.kafka_reachable, Some(false));
        assert!(snapshot.last_error.is_some());
        assert!(snapshot.released_total > 0);
        assert_eq!(snapshot.failed_total, 0, "an outage costs no attempts");

        // The same store, now pointed at the real broker: it resumes by itself.
        let up = RunningRelay::start(&store, fast_relay());
        let done = wait_job(
            &store,
            &job.id,
            Duration::from_secs(60),
            JobStatus::Finished,
        )
        .await;
        up.stop().await;
        assert_eq!((done.published, done.failed), (20, 0), "{backend:?}");
        assert_eq!(record_count(&target, 1), 20);
    }
}

/// Replays everything in `store` to `target` (`None`: each record's source topic).
async fn replay_all(store: &Store, target: Option<&str>) -> ReplayJob {
    store
        .request_replay(
            &ann(),
            &ReplayRequest {
                selection: Selection::Filter(Filter::default()),
                target_topic: target.map(str::to_string),
                rate_per_sec: None,
                reason: None,
                options: Default::default(),
            },
        )
        .await
        .expect("replay")
}

/// The detail of the last history event of every `replay_failed` dead letter.
async fn failure_details(store: &Store) -> Vec<String> {
    let failed = all_ids(
        store,
        Filter {
            status: Some(Status::ReplayFailed),
            ..Filter::default()
        },
    )
    .await;
    let mut out = Vec::new();
    for id in failed {
        let history = store.history(id).await.expect("history");
        let last = history.last().expect("events");
        assert_eq!(last.kind, "replay_failed");
        out.push(last.detail.clone().unwrap_or_default());
    }
    out
}

#[tokio::test]
async fn a_record_too_large_for_its_topic_fails_at_once_and_the_others_publish() {
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.expect("database");
        let store = Store::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        let target = unique("too_large");
        // The broker refuses record batches over 4 KB on this topic.
        create_topic(&target, 1, &[("max.message.bytes", "4096")])
            .await
            .expect("topic");
        let mut batch: Vec<NewDeadLetter> = (0..8)
            .map(|i| dead_letter(i, Some(vec![i as u8]), Some(vec![b'x'; 300]), vec![]))
            .collect();
        // Refused by the broker (the topic's limit) ...
        batch.push(dead_letter(100, None, Some(vec![1u8; 20_000]), vec![]));
        // ... and by the producer itself (over its 1 MB message.max.bytes).
        batch.push(dead_letter(101, None, Some(vec![2u8; 1_200_000]), vec![]));
        store.insert_batch(&batch).await.expect("insert");
        let job = replay_all(&store, Some(&target)).await;
        // Ten attempts with backoff would take minutes; a permanent error takes none.
        let relay = RunningRelay::start(&store, fast_relay());
        let done = wait_job(
            &store,
            &job.id,
            Duration::from_secs(60),
            JobStatus::Finished,
        )
        .await;
        let status = relay.status.clone();
        relay.stop().await;
        let snapshot = status.snapshot();
        assert_eq!(
            (done.published, done.failed),
            (8, 2),
            "{backend:?}: {done:?}"
        );
        assert_eq!(snapshot.retried_total, 0, "{backend:?}: no retry spent");
        assert_eq!(snapshot.rejected_total, 2, "{backend:?}");
        assert_eq!(snapshot.failed_total, 2, "{backend:?}");
        let details = failure_details(&store).await;
        assert_eq!(details.len(), 2);
        for d in &details {
            assert!(
                d.contains("too large") && d.contains("not retried"),
                "{backend:?}: {d}"
            );
        }
        assert!(done.last_error.unwrap_or_default().contains("too large"));
        assert_eq!(record_count(&target, 1), 8, "{backend:?}");
    }
}

#[tokio::test]
async fn an_invalid_source_topic_fails_at_once() {
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.expect("database");
        let store = Store::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        let good = unique("valid_source");
        create_topic(&good, 1, &[]).await.expect("topic");
        // Kafka refuses this name (a space, `!`): no override, so the replay goes "to
        // source" and only the relay finds out.
        let bad = format!("{} not a topic!", unique("x"));
        store
            .insert_batch(&[
                dead_letter(1, None, Some(b"bad".to_vec()), spring_headers(&bad)),
                dead_letter(2, None, Some(b"good".to_vec()), spring_headers(&good)),
            ])
            .await
            .expect("insert");
        let job = replay_all(&store, None).await;
        assert_eq!(job.total, 2, "{backend:?}: {job:?}");
        let relay = RunningRelay::start(&store, fast_relay());
        let done = wait_job(
            &store,
            &job.id,
            Duration::from_secs(60),
            JobStatus::Finished,
        )
        .await;
        let status = relay.status.clone();
        relay.stop().await;
        assert_eq!(
            (done.published, done.failed),
            (1, 1),
            "{backend:?}: {done:?}"
        );
        assert_eq!(status.snapshot().retried_total, 0, "{backend:?}");
        let details = failure_details(&store).await;
        assert!(
            details[0].contains("not retried") && details[0].contains("topic"),
            "{backend:?}: {details:?}"
        );
        assert_eq!(record_count(&good, 1), 1);
    }
}

#[tokio::test]
async fn an_outage_that_does_not_end_is_bounded_per_job() {
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.expect("database");
        let store = Store::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        let batch: Vec<NewDeadLetter> = (0..5)
            .map(|i| dead_letter(i, None, Some(vec![7; 10]), vec![]))
            .collect();
        store.insert_batch(&batch).await.expect("insert");
        let job = replay_all(&store, Some("never_reached")).await;
        // A broker that is gone for good: a port nobody listens on.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let relay = RunningRelay::start(
            &store,
            RelayConfig {
                brokers: format!("127.0.0.1:{closed}"),
                delivery_timeout_ms: 1_000,
                outage_max_ms: 2_000,
                max_attempts: 2,
                ..fast_relay()
            },
        );
        let waiting = wait_job(&store, &job.id, Duration::from_secs(60), JobStatus::Waiting).await;
        assert_eq!(
            waiting.failed, 0,
            "{backend:?}: within the bound nothing fails"
        );
        let done = wait_job(
            &store,
            &job.id,
            Duration::from_secs(120),
            JobStatus::Finished,
        )
        .await;
        let status = relay.status.clone();
        relay.stop().await;
        assert_eq!(
            (done.published, done.failed),
            (0, 5),
            "{backend:?}: {done:?}"
        );
        let snapshot = status.snapshot();
        assert!(snapshot.released_total > 0, "{backend:?}: waited first");
        assert_eq!(snapshot.kafka_reachable, Some(false));
        for d in failure_details(&store).await {
            assert!(
                d.contains("Kafka unreachable for more than 2 s")
                    && d.contains("gave up after 2 attempts"),
                "{backend:?}: {d}"
            );
        }
    }
}

/// `redrive serve` on `db_url`, with `extra` environment; stdout/stderr to `log`.
fn spawn_redrive(db_url: &str, extra: &[(&str, &str)], log: &std::path::Path) -> Child {
    let log_file = std::fs::File::create(log).expect("log file");
    let log_err = log_file.try_clone().expect("log file");
    let mut cmd = redrive_std_command();
    cmd.arg("serve")
        .env("REDRIVE_DATABASE_URL", db_url)
        .env("REDRIVE_KAFKA_BROKERS", kafka_brokers())
        .env("REDRIVE_DLQ_TOPICS", unique("unused_dlq"))
        .env("REDRIVE_LISTEN", "127.0.0.1:0")
        .env_remove(FAULT_ABORT_AFTER_PUBLISH_ENV)
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn redrive")
}

#[tokio::test]
async fn a_crash_between_publish_and_mark_republishes_with_the_same_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = fresh_sqlite_url(&dir);
    let store = Store::connect(&url).await.expect("connect");
    store.migrate().await.expect("migrate");
    let target = unique("crash_target");
    create_topic(&target, 1, &[]).await.expect("topic");
    store
        .insert_batch(&[dead_letter(
            1,
            Some(b"order-1".to_vec()),
            Some(b"{\"id\":1}".to_vec()),
            spring_headers(&target),
        )])
        .await
        .expect("insert");
    let id = all_ids(&store, Filter::default()).await[0];
    let job = store
        .request_replay(
            &ann(),
            &ReplayRequest {
                selection: Selection::Ids(vec![id]),
                target_topic: None,
                rate_per_sec: None,
                reason: None,
                options: Default::default(),
            },
        )
        .await
        .expect("replay");

    // 1. The relay publishes, gets the delivery report, and dies before marking.
    let log1 = dir.path().join("first.log");
    let mut first = spawn_redrive(&url, &[(FAULT_ABORT_AFTER_PUBLISH_ENV, "1")], &log1);
    let exit = wait_for(
        "the faulted redrive to abort",
        Duration::from_secs(90),
        || {
            let status = first.try_wait().expect("try_wait");
            async move { status }
        },
    )
    .await
    .unwrap_or_else(|e| {
        let _ = first.kill();
        panic!(
            "{e}\n{}",
            std::fs::read_to_string(&log1).unwrap_or_default()
        )
    });
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit.signal(), Some(6), "SIGABRT: {exit:?}");
    }
    assert_eq!(
        record_count(&target, 1),
        1,
        "published once before the crash"
    );
    let mid = store.job(&job.id).await.expect("job").expect("exists");
    assert_eq!(
        (mid.published, mid.status),
        (0, JobStatus::Running),
        "not marked"
    );
    let d = store.get(id).await.expect("get").expect("exists");
    assert_eq!(d.summary.status, Status::ReplayPending);

    // 2. Restarted without the fault: after the lease expires the row is claimed and
    // published again, then marked once.
    let log2 = dir.path().join("second.log");
    let mut second = spawn_redrive(&url, &[], &log2);
    let done = wait_for(
        "the job to finish after restart",
        Duration::from_secs(120),
        || async {
            let j = store.job(&job.id).await.ok().flatten()?;
            (j.status == JobStatus::Finished).then_some(j)
        },
    )
    .await;
    let _ = second.kill();
    let _ = second.wait();
    let done = done.unwrap_or_else(|e| {
        panic!(
            "{e}\n{}",
            std::fs::read_to_string(&log2).unwrap_or_default()
        )
    });
    assert_eq!(
        (done.total, done.published, done.failed),
        (1, 1, 0),
        "counted once"
    );

    assert_eq!(
        record_count(&target, 1),
        2,
        "published twice: at-least-once"
    );
    let messages = consume(&target, 2).await.expect("the replayed records");
    let keys: Vec<String> = messages
        .iter()
        .map(|m| header_text(&headers_of(m), HEADER_IDEMPOTENCY_KEY))
        .collect();
    assert_eq!(keys[0], keys[1], "the same idempotency key both times");
    for m in &messages {
        let headers = headers_of(m);
        assert_eq!(header_text(&headers, HEADER_REPLAY_COUNT), "1");
        assert_eq!(m.key(), Some(&b"order-1"[..]));
        assert_eq!(m.payload(), Some(&b"{\"id\":1}"[..]));
    }
    let d = store.get(id).await.expect("get").expect("exists");
    assert_eq!(d.summary.status, Status::Replayed);
    assert_eq!(d.replay_count, 1, "one replay, however many publishes");
    let published_events = store
        .history(id)
        .await
        .expect("history")
        .iter()
        .filter(|e| e.kind == "published")
        .count();
    assert_eq!(published_events, 1);
}
