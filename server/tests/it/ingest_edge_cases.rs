//! Awkward records, subscriptions and failures, against the real broker and real stores:
//! every odd record is stored exactly; an aborted transaction never is; a regex subscription
//! finds its topics; graceful shutdown commits; a store outage commits nothing until the
//! store is back, and then loses nothing.

use std::time::Duration;

use rdkafka::producer::Producer;
use redrive_core::model::Convention;
use redrive_testkit::ingest::{
    assert_stored_exactly, committed_offsets, count_in, dead_letters_in, end_offsets, ingest_all,
    ingest_config, start_ingest, transactional_producer, wait_for_count,
};
use redrive_testkit::{
    create_topic, fresh_database, fresh_store, produce, produce_with, producer, unique, wait_for,
    Backend, TestRecord,
};

fn h(name: &str, value: &[u8]) -> (String, Option<Vec<u8>>) {
    (name.to_string(), Some(value.to_vec()))
}

fn plain(value: &str) -> TestRecord {
    TestRecord {
        key: Some(b"k".to_vec()),
        value: Some(value.as_bytes().to_vec()),
        partition: Some(0),
        ..TestRecord::default()
    }
}

/// Produces `records` to a fresh one-partition topic (with `configs`), ingests them into
/// both backends and asserts each is stored exactly; returns nothing, panics on a mismatch.
async fn assert_round_trip(prefix: &str, configs: &[(&str, &str)], records: Vec<TestRecord>) {
    let topic = unique(prefix);
    create_topic(&topic, 1, configs).await.unwrap();
    produce(&topic, &records).await.unwrap();
    for backend in Backend::ALL {
        let (_store, _dir, stored) = ingest_all(backend, &topic, records.len() as i64)
            .await
            .unwrap_or_else(|e| panic!("{backend:?}: {e:#}"));
        for (sent, d) in records.iter().zip(&stored) {
            assert_stored_exactly(sent, &d.record);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn awkward_records_are_stored_exactly() {
    let records = vec![
        // A tombstone (null value) with a key.
        TestRecord {
            key: Some(b"user-17".to_vec()),
            value: None,
            headers: vec![h("original_topic", b"users")],
            partition: Some(0),
            timestamp_ms: None,
        },
        // A null key.
        TestRecord {
            key: None,
            ..plain("null key")
        },
        // Empty key and value: empty is not null.
        TestRecord {
            key: Some(vec![]),
            value: Some(vec![]),
            partition: Some(0),
            ..TestRecord::default()
        },
        // The same header name three times, order kept; an empty and a null value.
        TestRecord {
            headers: vec![
                h("kafka_dlt-original-topic", b"first"),
                h("x-trace", b"1"),
                h("kafka_dlt-original-topic", b"second"),
                h("kafka_dlt-original-topic", b"third"),
                h("x-empty", b""),
                ("x-null".to_string(), None),
            ],
            ..plain("duplicate headers")
        },
        // Invalid UTF-8 in a header value (and in the value and key).
        TestRecord {
            key: Some(vec![0xff, 0xfe, 0x00]),
            value: Some(vec![0xc3, 0x28, 0x00, 0xa0, 0xa1]),
            headers: vec![h("trace-id", &[0xc3, 0x28]), h("error", &[0xc3, 0x28])],
            partition: Some(0),
            timestamp_ms: None,
        },
        // NUL bytes and control characters inside text the decoder reads (PostgreSQL's
        // TEXT cannot hold NUL).
        TestRecord {
            headers: vec![
                h("original_topic", b"nul\0topic"),
                h("error", b"bad\0byte \x01\x7f"),
                h("error_class", b"Nul\0Error"),
                h("traceback", b"line1\0\nline2"),
            ],
            ..plain("nul in headers")
        },
        // A record with no recognised headers at all.
        TestRecord {
            headers: vec![h("some-app-header", b"whatever")],
            ..plain("no convention")
        },
        // And one with no headers at all.
        plain("no headers"),
    ];
    let topic = unique("dlq_awkward");
    create_topic(&topic, 1, &[]).await.unwrap();
    produce(&topic, &records).await.unwrap();
    for backend in Backend::ALL {
        let (_store, _dir, stored) = ingest_all(backend, &topic, records.len() as i64)
            .await
            .unwrap_or_else(|e| panic!("{backend:?}: {e:#}"));
        for (sent, d) in records.iter().zip(&stored) {
            assert_stored_exactly(sent, &d.record);
        }
        assert_eq!(stored[0].record.value, None, "tombstone stays null");
        assert_eq!(stored[1].record.key, None, "null key stays null");
        assert_eq!(stored[2].record.value, Some(vec![]), "empty stays empty");
        assert_eq!(stored[6].summary.convention, Convention::Unknown);
        assert_eq!(stored[7].summary.convention, Convention::Unknown);
        assert!(stored[7].record.headers.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mib_value_with_a_60_kib_stack_trace() {
    let mut stack = String::from("java.lang.IllegalStateException: boom\n");
    let mut i = 0;
    while stack.len() < 60 * 1024 {
        stack.push_str(&format!(
            "\tat com.example.deep.Frame{i}.call(Frame{i}.java:{i})\n"
        ));
        i += 1;
    }
    let value: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
    let records = vec![TestRecord {
        key: Some(b"big".to_vec()),
        value: Some(value),
        headers: vec![
            h("kafka_dlt-original-topic", b"bulk"),
            h(
                "kafka_dlt-exception-fqcn",
                b"java.lang.IllegalStateException",
            ),
            h("kafka_dlt-exception-stacktrace", stack.as_bytes()),
        ],
        partition: Some(0),
        timestamp_ms: None,
    }];
    assert_round_trip("dlq_big", &[("max.message.bytes", "4194304")], records).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lz4_and_zstd_batches() {
    let topic = unique("dlq_compressed");
    create_topic(&topic, 1, &[]).await.unwrap();
    let make = |codec: &str| -> Vec<TestRecord> {
        (0..20)
            .map(|i| TestRecord {
                headers: vec![
                    h("codec", codec.as_bytes()),
                    h("error", b"repetitive ".repeat(20).as_slice()),
                ],
                ..plain(&format!("{codec} record {i} {}", "x".repeat(200)))
            })
            .collect()
    };
    let lz4 = make("lz4");
    let zstd = make("zstd");
    let p = producer(&[("compression.type", "lz4")]).unwrap();
    produce_with(&p, &topic, &lz4).await.unwrap();
    let p = producer(&[("compression.type", "zstd")]).unwrap();
    produce_with(&p, &topic, &zstd).await.unwrap();
    let all: Vec<TestRecord> = lz4.into_iter().chain(zstd).collect();
    for backend in Backend::ALL {
        let (_store, _dir, stored) = ingest_all(backend, &topic, all.len() as i64)
            .await
            .unwrap_or_else(|e| panic!("{backend:?}: {e:#}"));
        for (sent, d) in all.iter().zip(&stored) {
            assert_stored_exactly(sent, &d.record);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_transaction_is_never_stored() {
    let topic = unique("dlq_txn");
    create_topic(&topic, 1, &[]).await.unwrap();
    let p = transactional_producer(&unique("txn")).await.unwrap();
    p.begin_transaction().unwrap();
    produce_with(&p, &topic, &[plain("aborted 1"), plain("aborted 2")])
        .await
        .unwrap();
    let p2 = p.clone();
    tokio::task::spawn_blocking(move || p2.abort_transaction(Duration::from_secs(30)))
        .await
        .unwrap()
        .unwrap();
    p.begin_transaction().unwrap();
    produce_with(&p, &topic, &[plain("committed marker")])
        .await
        .unwrap();
    let p2 = p.clone();
    tokio::task::spawn_blocking(move || p2.commit_transaction(Duration::from_secs(30)))
        .await
        .unwrap()
        .unwrap();
    for backend in Backend::ALL {
        // Waits for the marker (the only committed record), then stops ingest gracefully,
        // which stores everything consumed: had the aborted records been delivered, they
        // (being earlier in the partition) would be stored too.
        let (_store, _dir, stored) = ingest_all(backend, &topic, 1)
            .await
            .unwrap_or_else(|e| panic!("{backend:?}: {e:#}"));
        assert_eq!(stored.len(), 1);
        assert_eq!(
            stored[0].record.value.as_deref(),
            Some(&b"committed marker"[..])
        );
    }
    // The aborted records did occupy offsets (0, 1, then an abort marker at 2).
    assert!(end_offsets(&topic).await.unwrap()[&0] >= 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regex_subscription_picks_up_two_topics() {
    let prefix = unique("rx");
    let a = format!("{prefix}_orders.DLT");
    let b = format!("{prefix}_payments.DLT");
    create_topic(&a, 1, &[]).await.unwrap();
    create_topic(&b, 2, &[]).await.unwrap();
    produce(&a, &[plain("a1"), plain("a2")]).await.unwrap();
    produce(&b, &[plain("b1")]).await.unwrap();
    let (store, _dir) = fresh_store(Backend::Sqlite).await.unwrap();
    let pattern = format!("^{prefix}_.*");
    let ingest = start_ingest(&store, ingest_config(&[&pattern], &unique("group")));
    ingest
        .wait_for_count(&store, &a, 2, Duration::from_secs(60))
        .await
        .unwrap();
    ingest
        .wait_for_count(&store, &b, 1, Duration::from_secs(60))
        .await
        .unwrap();
    let assigned = ingest.status.assigned_partitions();
    assert!(assigned.contains(&(a.clone(), 0)), "{assigned:?}");
    assert!(assigned.contains(&(b.clone(), 1)), "{assigned:?}");
    ingest.stop().await.unwrap();
}

/// A DLQ topic named exactly in the configuration but created only after ingest subscribed
/// (Spring Kafka creates its DLT with the first dead letter) is picked up at the next metadata
/// refresh (10 s), not librdkafka's default 5 minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exact_topic_created_after_start_is_picked_up() {
    let topic = unique("late.DLT");
    let (store, _dir) = fresh_store(Backend::Sqlite).await.unwrap();
    let ingest = start_ingest(&store, ingest_config(&[&topic], &unique("group")));
    wait_for("ingest to run", Duration::from_secs(30), || async {
        ingest.status.snapshot().ready.then_some(())
    })
    .await
    .unwrap();
    create_topic(&topic, 1, &[]).await.unwrap();
    produce(&topic, &[plain("late")]).await.unwrap();
    ingest
        .wait_for_count(&store, &topic, 1, Duration::from_secs(45))
        .await
        .unwrap();
    ingest.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_regex_is_a_configuration_error() {
    let (store, _dir) = fresh_store(Backend::Sqlite).await.unwrap();
    let ingest = start_ingest(&store, ingest_config(&["^dlq_(unclosed"], &unique("group")));
    let err = ingest.stop().await.unwrap_err();
    assert!(
        format!("{err:#}").contains("bad DLQ topic pattern"),
        "{err:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_commits_and_a_restart_rereads_nothing() {
    let topic = unique("dlq_restart");
    create_topic(&topic, 3, &[]).await.unwrap();
    let records: Vec<TestRecord> = (0..30)
        .map(|i| TestRecord {
            partition: Some(i % 3),
            ..plain(&format!("r{i}"))
        })
        .collect();
    produce(&topic, &records).await.unwrap();
    let (store, _dir) = fresh_store(Backend::Sqlite).await.unwrap();
    let group = unique("group");

    let first = start_ingest(&store, ingest_config(&[&topic], &group));
    first
        .wait_for_count(&store, &topic, 30, Duration::from_secs(60))
        .await
        .unwrap();
    let first_status = first.status.clone();
    let snap = first_status.snapshot();
    assert!(
        snap.ready && snap.running && snap.kafka_connected && snap.store_ok,
        "{snap:?}"
    );
    assert_eq!(snap.assigned_partitions.len(), 3, "{snap:?}");
    assert!(snap.records_ingested >= 30 && snap.batches >= 1 && snap.last_store_write_ms.is_some());
    first.stop().await.unwrap();
    let snap = first_status.snapshot();
    assert!(
        !snap.running && !snap.ready && snap.assigned_partitions.is_empty(),
        "{snap:?}"
    );
    let end = end_offsets(&topic).await.unwrap();
    assert_eq!(committed_offsets(&group, &topic).await.unwrap(), end);

    // Same group again: it starts at the committed offsets, so it reads only what is new.
    let second = start_ingest(&store, ingest_config(&[&topic], &group));
    produce(&topic, &[plain("after restart")]).await.unwrap();
    second
        .wait_for_count(&store, &topic, 31, Duration::from_secs(60))
        .await
        .unwrap();
    let status = second.status.clone();
    second.stop().await.unwrap();
    assert_eq!(
        status.records_ingested(),
        1,
        "the restarted consumer re-read records"
    );
    assert_eq!(count_in(&store, &topic).await.unwrap(), 31);
    assert_eq!(
        committed_offsets(&group, &topic).await.unwrap(),
        end_offsets(&topic).await.unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_outage_commits_nothing_and_loses_nothing() {
    crate::support::log_to_test_output();
    let topic = unique("dlq_outage");
    create_topic(&topic, 2, &[]).await.unwrap();
    let (url, _dir) = fresh_database(Backend::Postgres).await.unwrap();
    let store = redrive_core::store::Store::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let group = unique("group");
    let ingest = start_ingest(&store, ingest_config(&[&topic], &group));

    let before: Vec<TestRecord> = (0..6)
        .map(|i| TestRecord {
            partition: Some(i % 2),
            ..plain(&format!("before {i}"))
        })
        .collect();
    produce(&topic, &before).await.unwrap();
    ingest
        .wait_for_count(&store, &topic, 6, Duration::from_secs(60))
        .await
        .unwrap();
    let committed_before = wait_for(
        "offsets of the first records",
        Duration::from_secs(30),
        || {
            let (group, topic) = (group.clone(), topic.clone());
            async move {
                let c = committed_offsets(&group, &topic).await.ok()?;
                (c.values().sum::<i64>() == 6).then_some(c)
            }
        },
    )
    .await
    .unwrap();

    // Outage: the database refuses connections and its sessions are terminated.
    redrive_testkit::ingest::set_postgres_available(&url, false)
        .await
        .unwrap();
    let during: Vec<TestRecord> = (0..40)
        .map(|i| TestRecord {
            partition: Some(i % 2),
            ..plain(&format!("during {i}"))
        })
        .collect();
    produce(&topic, &during).await.unwrap();
    let status = ingest.status.clone();
    // Ingest must have tried (and failed) to store at least twice: it is retrying.
    wait_for("failed store writes", Duration::from_secs(60), || {
        let s = status.snapshot();
        async move { (s.store_failures >= 2).then_some(()) }
    })
    .await
    .unwrap();
    let snap = status.snapshot();
    assert!(!snap.store_ok && !snap.ready && snap.paused, "{snap:?}");
    assert!(snap.last_error.is_some());
    assert_eq!(
        committed_offsets(&group, &topic).await.unwrap(),
        committed_before,
        "offsets were committed while the store was down"
    );

    redrive_testkit::ingest::set_postgres_available(&url, true)
        .await
        .unwrap();
    ingest
        .wait_for_count(&store, &topic, 46, Duration::from_secs(90))
        .await
        .unwrap();
    let end = end_offsets(&topic).await.unwrap();
    wait_for(
        "offsets committed after recovery",
        Duration::from_secs(30),
        || {
            let (group, topic, end) = (group.clone(), topic.clone(), end.clone());
            async move { (committed_offsets(&group, &topic).await.ok()? == end).then_some(()) }
        },
    )
    .await
    .unwrap();
    let snap = status.snapshot();
    assert!(snap.store_ok && !snap.paused, "{snap:?}");
    ingest.stop().await.unwrap();

    let stored = dead_letters_in(&store, &topic).await.unwrap();
    assert_eq!(stored.len(), 46);
    let mut values: Vec<String> = stored
        .iter()
        .map(|d| String::from_utf8(d.record.value.clone().unwrap()).unwrap())
        .collect();
    values.sort();
    let mut expected: Vec<String> = before
        .iter()
        .chain(&during)
        .map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap())
        .collect();
    expected.sort();
    assert_eq!(values, expected);
}

/// A PostgreSQL database that refuses sessions answers with a FATAL error whose code (55000,
/// "not currently accepting connections") says nothing about transience. The store must
/// still call it an outage: ingest then pauses and retries. Called a refusal of the data, it
/// sent ingest into salvage, which stored records in reduced form or quarantined them if the
/// database came back half-way (the race behind an intermittent failure of the outage test).
#[tokio::test]
async fn a_database_refusing_sessions_is_an_outage_not_a_refused_record() {
    let (url, _dir) = fresh_database(Backend::Postgres).await.unwrap();
    let store = redrive_core::store::Store::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let d = redrive_testkit::fixtures::stored_dead_letter(
        "dlq_refusing",
        0,
        redrive_core::Normalized::default(),
    );

    redrive_testkit::ingest::set_postgres_available(&url, false)
        .await
        .unwrap();
    let e = store
        .insert_batch(std::slice::from_ref(&d))
        .await
        .unwrap_err();
    assert!(e.is_transient(), "insert during the outage: {e:?}");
    let e = store.ping().await.unwrap_err();
    assert!(e.is_transient(), "ping during the outage: {e:?}");

    redrive_testkit::ingest::set_postgres_available(&url, true)
        .await
        .unwrap();
    assert_eq!(
        store.insert_batch(std::slice::from_ref(&d)).await.unwrap(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_in_one_group_survive_rebalances() {
    let topic = unique("dlq_rebalance");
    create_topic(&topic, 4, &[]).await.unwrap();
    let wave = |w: usize| -> Vec<TestRecord> {
        (0..100)
            .map(|i| TestRecord {
                partition: Some(i % 4),
                ..plain(&format!("wave {w} record {i}"))
            })
            .collect()
    };
    let (store, _dir) = fresh_store(Backend::Sqlite).await.unwrap();
    let group = unique("group");

    produce(&topic, &wave(0)).await.unwrap();
    let a = start_ingest(&store, ingest_config(&[&topic], &group));
    a.wait_for_count(&store, &topic, 100, Duration::from_secs(60))
        .await
        .unwrap();

    // B joins: the partitions are split between A and B.
    let b = start_ingest(&store, ingest_config(&[&topic], &group));
    let b_status = b.status.clone();
    wait_for("B to get partitions", Duration::from_secs(60), || {
        let s = b_status.clone();
        async move { (!s.assigned_partitions().is_empty()).then_some(()) }
    })
    .await
    .unwrap();
    produce(&topic, &wave(1)).await.unwrap();
    wait_for_count(&store, &topic, 200, Duration::from_secs(60))
        .await
        .unwrap();

    // A leaves: B takes everything over from the committed offsets.
    a.stop().await.unwrap();
    produce(&topic, &wave(2)).await.unwrap();
    b.wait_for_count(&store, &topic, 300, Duration::from_secs(60))
        .await
        .unwrap();
    wait_for("B to own all partitions", Duration::from_secs(60), || {
        let s = b_status.clone();
        async move { (s.assigned_partitions().len() == 4).then_some(()) }
    })
    .await
    .unwrap();
    b.stop().await.unwrap();

    let stored = dead_letters_in(&store, &topic).await.unwrap();
    assert_eq!(stored.len(), 300);
    let distinct: std::collections::BTreeSet<_> = stored
        .iter()
        .map(|d| (d.record.dlq_partition, d.record.dlq_offset))
        .collect();
    assert_eq!(distinct.len(), 300);
    assert_eq!(
        committed_offsets(&group, &topic).await.unwrap(),
        end_offsets(&topic).await.unwrap()
    );
}
