//! `redrive demo`'s pipeline against the real broker, in-process, on fresh topics:
//! transient failures reach the DLQ after exactly the configured retries with growing delays,
//! poison at once with none; every dead letter carries the seed convention's headers and its
//! original key and value; nothing is lost; replaying the dead letters through redrive itself
//! (ingest into a fresh store, `Store::request_replay` to each source topic, the real relay
//! in-process) finishes the job with every row published and processes each message once,
//! even when a relayed record is published a second time with the same idempotency key; and
//! redrive's ingest reads them as the seed convention with the right source topic and retry
//! count.
//!
//! Run with `--nocapture` to see the observed retry delays.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Headers;
use rdkafka::{Message, Offset, TopicPartitionList};
use redrive_core::actions::{Actor, JobStatus, ReplayRequest, Selection};
use redrive_core::ingest::{IngestConfig, IngestStatus};
use redrive_core::model::Convention;
use redrive_core::replay::{RelayConfig, RelayStatus};
use redrive_core::{Filter, ListQuery};
use redrive_demo::{Control, DemoConfig, DemoError, Ledger, OutageMode};
use redrive_testkit::ingest::ingest_all;
use redrive_testkit::{fresh_store, kafka_brokers, produce, unique, wait_for, Backend, TestRecord};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const PARTITIONS: i32 = 2;
const MAX_RETRIES: u32 = 3;
const BACKOFF_BASE_MS: u64 = 150;
const JITTER: f64 = 0.2;

/// The seed convention's headers every dead letter must carry.
const SEED_HEADERS: [&str; 10] = [
    "original_topic",
    "retry_count",
    "error",
    "message_id",
    "original_partition",
    "original_offset",
    "consumer_group",
    "error_class",
    "traceback",
    "failed_at",
];

/// A consumed record, bytes as Kafka gave them.
#[derive(Debug, Clone)]
struct Rec {
    partition: i32,
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Rec {
    fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .filter_map(|(_, v)| v.as_deref())
            .map(|v| std::str::from_utf8(v).expect("demo headers are text"))
            .collect()
    }

    fn h(&self, name: &str) -> &str {
        self.all(name)
            .last()
            .copied()
            .unwrap_or_else(|| panic!("header `{name}` missing on {self:?}"))
    }

    fn message_id(&self) -> String {
        self.h("message_id").to_string()
    }

    fn transient(&self) -> bool {
        self.h("retryable") == "true"
    }
}

/// Reads a whole topic from the beginning (assigned, no group), accumulating records.
struct TopicReader {
    consumer: StreamConsumer,
    records: Vec<Rec>,
}

impl TopicReader {
    fn new(topic: &str) -> TopicReader {
        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", kafka_brokers())
            .set("group.id", unique("demo_test_reader"))
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "50")
            .create()
            .expect("a test consumer");
        let mut tpl = TopicPartitionList::new();
        for p in 0..PARTITIONS {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .expect("partition");
        }
        consumer.assign(&tpl).expect("assign");
        TopicReader {
            consumer,
            records: Vec::new(),
        }
    }

    /// Takes in whatever arrives within `ms`.
    async fn drain(&mut self, ms: u64) {
        while let Ok(Ok(m)) =
            tokio::time::timeout(Duration::from_millis(ms), self.consumer.recv()).await
        {
            self.records.push(Rec {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
                headers: m
                    .headers()
                    .map(|hs| {
                        hs.iter()
                            .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default(),
            });
        }
    }

    /// Reads until `done(records)` holds, or fails after `secs`.
    async fn until(&mut self, what: &str, secs: u64, done: impl Fn(&[Rec]) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            self.drain(100).await;
            if done(&self.records) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out after {secs} s waiting for {what}; have {} records",
                self.records.len()
            );
        }
    }
}

/// A running demo pipeline on fresh topics.
struct Pipeline {
    config: DemoConfig,
    control: Control,
    stop: CancellationToken,
    task: JoinHandle<Result<(), DemoError>>,
}

impl Pipeline {
    fn start(config: DemoConfig) -> Pipeline {
        let control = Control::new(&config);
        let stop = CancellationToken::new();
        let task = tokio::spawn(redrive_demo::run_with(
            config.clone(),
            control.clone(),
            stop.clone(),
        ));
        Pipeline {
            config,
            control,
            stop,
            task,
        }
    }

    async fn stop(self) -> DemoConfig {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("the demo stops within 20 s")
            .expect("the demo task does not panic")
            .expect("the demo stops without error");
        self.config
    }
}

/// Fresh topics and group, fast backoff, outage on from the start.
fn test_config(dir: &tempfile::TempDir) -> DemoConfig {
    let source = unique("demo_requests");
    DemoConfig {
        brokers: kafka_brokers(),
        retry_topic_prefix: format!("{source}.retry"),
        source_topic: source,
        dlq_topic: unique("demo_dlq"),
        create_topics: true,
        partitions: PARTITIONS,
        group_id: unique("demo_agent"),
        interval_ms: 60,
        poison_ratio: 0.2,
        count: Some(40),
        failure_ratio: 0.3,
        llm_latency_ms: 10,
        llm_timeout_ms: 60,
        outage: true,
        outage_down_ms: 0,
        max_retries: MAX_RETRIES,
        backoff_base_ms: BACKOFF_BASE_MS,
        backoff_max_ms: 5_000,
        jitter: JITTER,
        max_in_flight: 8,
        breaker_failures: 5,
        breaker_cooldown_ms: 200,
        database_url: format!("sqlite:{}", dir.path().join("demo-agent.db").display()),
        control_listen: None,
        ..DemoConfig::default()
    }
}

async fn rows<T>(ledger: &Ledger, sql: &str) -> Vec<T>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + Send + Unpin,
{
    sqlx::query_as::<_, T>(sql)
        .fetch_all(ledger.pool())
        .await
        .expect("ledger query")
}

fn ms_of(rfc3339: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .unwrap_or_else(|e| panic!("`{rfc3339}` is not RFC 3339: {e}"))
        .timestamp_millis()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_retries_dead_letters_loses_nothing_and_replays_once() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = Pipeline::start(test_config(&dir));
    let cfg = pipeline.config.clone();
    let produced_total = cfg.count.unwrap() as usize;
    let mut dlq = TopicReader::new(&cfg.dlq_topic);

    // The outage is on: the first requests fail every attempt. Once a few have been
    // dead-lettered, end it, so the rest are processed (some after retries).
    dlq.until("4 transient dead letters during the outage", 30, |r| {
        r.iter().filter(|r| r.transient()).count() >= 4
    })
    .await;
    pipeline.control.set_outage(OutageMode::Off);

    let ledger = Ledger::open(&cfg.database_url).await.unwrap();
    // Every produced request ends up processed or dead-lettered: nothing is lost.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    let (produced, processed) = loop {
        dlq.drain(100).await;
        let produced: Vec<(String, String)> =
            rows(&ledger, "SELECT message_id, kind FROM produced").await;
        let processed: Vec<(String, i64)> =
            rows(&ledger, "SELECT message_id, attempts FROM processed").await;
        let outcomes: BTreeSet<String> = processed
            .iter()
            .map(|(id, _)| id.clone())
            .chain(dlq.records.iter().map(Rec::message_id))
            .collect();
        if produced.len() == produced_total && produced.iter().all(|(id, _)| outcomes.contains(id))
        {
            break (produced, processed);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "requests without an outcome after 40 s: produced {}, processed {}, dead letters {}",
            produced.len(),
            processed.len(),
            dlq.records.len()
        );
    };
    let snapshot = pipeline.control.snapshot();
    let cfg = pipeline.stop().await;
    dlq.drain(300).await;

    // Exactly one outcome per request: processed once or dead-lettered once, never both.
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for id in processed
        .iter()
        .map(|(id, _)| id.clone())
        .chain(dlq.records.iter().map(Rec::message_id))
    {
        *outcomes.entry(id).or_default() += 1;
    }
    let produced_ids: BTreeSet<String> = produced.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(
        outcomes.keys().cloned().collect::<BTreeSet<_>>(),
        produced_ids
    );
    assert!(
        outcomes.values().all(|&n| n == 1),
        "a request with two outcomes: {outcomes:?}"
    );
    let poison_ids: BTreeSet<String> = produced
        .iter()
        .filter(|(_, kind)| kind != "valid")
        .map(|(id, _)| id.clone())
        .collect();
    assert_eq!(poison_ids.len(), 8, "20 % of 40 requests are poison");

    // Key and value are the source record's, byte for byte.
    let mut source = TopicReader::new(&cfg.source_topic);
    source
        .until("every produced request", 20, |r| r.len() >= produced_total)
        .await;
    let by_position: BTreeMap<(i32, i64), &Rec> = source
        .records
        .iter()
        .map(|r| ((r.partition, r.offset), r))
        .collect();

    let mut delays_seen = Vec::new();
    for d in &dlq.records {
        for name in SEED_HEADERS {
            assert!(!d.h(name).is_empty(), "empty `{name}` on {d:?}");
        }
        assert_eq!(d.h("original_topic"), cfg.source_topic);
        assert_eq!(d.h("consumer_group"), cfg.group_id);
        ms_of(d.h("failed_at"));
        assert!(d.h("traceback").contains(d.h("error_class")));
        let origin = (
            d.h("original_partition").parse::<i32>().unwrap(),
            d.h("original_offset").parse::<i64>().unwrap(),
        );
        let original = by_position
            .get(&origin)
            .unwrap_or_else(|| panic!("no source record at {origin:?}"));
        assert_eq!(d.key, original.key, "key unchanged");
        assert_eq!(d.value, original.value, "value unchanged");
        assert_eq!(
            d.key.as_deref(),
            Some(d.message_id().as_bytes()),
            "keyed by id"
        );

        let failed_at: Vec<i64> = d
            .all("attempt_failed_at")
            .iter()
            .map(|t| ms_of(t))
            .collect();
        if d.transient() {
            assert!(!poison_ids.contains(&d.message_id()));
            assert_eq!(d.h("retry_count"), MAX_RETRIES.to_string());
            assert_eq!(d.h("dlq_reason"), "max_retries_exceeded");
            assert_eq!(failed_at.len(), MAX_RETRIES as usize + 1, "attempts: {d:?}");
            let planned: Vec<i64> = d
                .all("retry_delay_ms")
                .iter()
                .map(|s| s.parse().unwrap())
                .collect();
            assert_eq!(planned.len(), MAX_RETRIES as usize);
            let gaps: Vec<i64> = failed_at.windows(2).map(|w| w[1] - w[0]).collect();
            for (i, (&gap, &plan)) in gaps.iter().zip(&planned).enumerate() {
                let nominal = (BACKOFF_BASE_MS << i) as f64;
                assert!(
                    (nominal * (1.0 - JITTER)..=nominal * (1.0 + JITTER)).contains(&(plan as f64)),
                    "retry {} planned {plan} ms, nominal {nominal} ms",
                    i + 1
                );
                assert!(
                    gap >= plan,
                    "retry {} came {gap} ms after, before its {plan} ms backoff",
                    i + 1
                );
            }
            assert!(
                gaps.windows(2).all(|w| w[1] > w[0]),
                "retry delays must grow: {gaps:?}"
            );
            delays_seen.push(gaps);
        } else {
            assert!(poison_ids.contains(&d.message_id()));
            assert_eq!(d.h("retry_count"), "0");
            assert_eq!(d.h("dlq_reason"), "non_retryable");
            assert!(
                ["JsonDecodeError", "ValidationError"].contains(&d.h("error_class")),
                "{d:?}"
            );
            assert_eq!(failed_at.len(), 1, "poison is tried once");
            assert!(d.all("retry_delay_ms").is_empty());
        }
    }
    let transient: Vec<Rec> = dlq
        .records
        .iter()
        .filter(|r| r.transient())
        .cloned()
        .collect();
    let poison: Vec<Rec> = dlq
        .records
        .iter()
        .filter(|r| !r.transient())
        .cloned()
        .collect();
    assert_eq!(poison.len(), 8);
    assert!(transient.len() >= 4);
    let retried_then_processed = processed.iter().filter(|(_, a)| *a > 1).count();
    println!("a transient dead letter's headers:");
    for (name, value) in &transient[0].headers {
        let v = value
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        println!("  {name}: {v}");
    }
    println!(
        "phase 1: {} produced, {} processed ({} after retries), {} transient + {} poison dead letters; \
         breaker opened {} times; observed gaps between attempts (ms): {delays_seen:?}",
        produced.len(),
        processed.len(),
        retried_then_processed,
        transient.len(),
        poison.len(),
        snapshot.breaker_opened,
    );

    // Replay through redrive itself: ingest the dead letters into a fresh store, request a
    // replay of all of them to their source topic, and let the real relay publish the outbox.
    let replay = Pipeline::start(DemoConfig {
        count: Some(0),
        failure_ratio: 0.0,
        outage: false,
        ..cfg.clone()
    });
    let first_phase_dead_letters = dlq.records.len();
    let (store, _store_dir, stored) = ingest_all(
        Backend::Sqlite,
        &cfg.dlq_topic,
        first_phase_dead_letters as i64,
    )
    .await
    .unwrap();
    let actor = Actor::operator("demo-test");
    let job = store
        .request_replay(
            &actor,
            &ReplayRequest {
                selection: Selection::Ids(stored.iter().map(|d| d.summary.id).collect()),
                target_topic: None,
                rate_per_sec: None,
                reason: Some("demo pipeline test".to_string()),
                options: Default::default(),
            },
        )
        .await
        .unwrap();
    assert_eq!(job.total as usize, first_phase_dead_letters, "{job:?}");
    let replay_id = job.id.clone();
    let relay_stop = CancellationToken::new();
    let relay = tokio::spawn(redrive_core::replay::run(
        RelayConfig {
            brokers: kafka_brokers(),
            poll_interval_ms: 50,
            backoff_base_ms: 50,
            backoff_max_ms: 1_000,
            ..RelayConfig::default()
        },
        store.clone(),
        Arc::new(RelayStatus::default()),
        relay_stop.clone(),
    ));
    let job = wait_for("the replay job to finish", Duration::from_secs(20), || {
        let (store, id) = (store.clone(), replay_id.clone());
        async move {
            let j = store.job(&id).await.ok().flatten()?;
            (j.status == JobStatus::Finished).then_some(j)
        }
    })
    .await
    .unwrap();
    relay_stop.cancel();
    tokio::time::timeout(Duration::from_secs(20), relay)
        .await
        .expect("the relay stops within 20 s")
        .expect("the relay task does not panic")
        .expect("the relay stops without error");
    assert_eq!(job.published, job.total, "{job:?}");
    assert_eq!(job.failed, 0, "{job:?}");

    let transient_ids: BTreeSet<String> = transient.iter().map(|r| r.message_id()).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        dlq.drain(100).await;
        let done: Vec<(String,)> = rows(&ledger, "SELECT message_id FROM processed").await;
        let done: BTreeSet<String> = done.into_iter().map(|(id,)| id).collect();
        let again = dlq.records.len() - first_phase_dead_letters;
        if transient_ids.is_subset(&done) && again >= poison.len() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "replay not handled after 30 s: {} of {} replayed requests processed, \
             {again} poison dead-lettered again (want {})",
            transient_ids.intersection(&done).count(),
            transient_ids.len(),
            poison.len()
        );
    }

    // Publish two of the relay's records a second time, byte for byte (same
    // `redrive-idempotency-key`), as a relay crash between publish and mark would: one
    // transient (processed by now), one poison (dead-lettered again by now).
    let published_by_relay = |r: &Rec| r.all("redrive-replay-id").contains(&replay_id.as_str());
    source
        .until("every replayed record on the source topic", 20, |r| {
            r.iter().filter(|r| published_by_relay(r)).count() >= first_phase_dead_letters
        })
        .await;
    let relayed: Vec<Rec> = source
        .records
        .iter()
        .filter(|r| published_by_relay(r))
        .cloned()
        .collect();
    assert_eq!(relayed.len(), first_phase_dead_letters, "each row once");
    let mut resend = Vec::new();
    for original in [&transient[0], &poison[0]] {
        let r = relayed
            .iter()
            .find(|r| r.key == original.key)
            .unwrap_or_else(|| panic!("no replayed record for {}", original.message_id()));
        assert_eq!(r.value, original.value, "the relay keeps the value");
        assert_eq!(r.all("redrive-idempotency-key").len(), 1);
        resend.push(TestRecord {
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r.headers.clone(),
            partition: Some(r.partition),
            ..TestRecord::default()
        });
    }
    produce(&cfg.source_topic, &resend).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        dlq.drain(100).await;
        let dups: Vec<(i64,)> = rows(&ledger, "SELECT id FROM duplicates").await;
        if dups.len() >= 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "re-published records not dropped after 20 s: {} duplicates (want 2)",
            dups.len()
        );
    }
    let replay_stats = replay.control.snapshot();
    replay.stop().await;
    dlq.drain(300).await;

    // Each replayed request processed exactly once, on its first attempt, as the replay.
    let replayed: Vec<(String, i64, Option<String>, Option<String>)> = rows(
        &ledger,
        "SELECT message_id, attempts, replay_id, idempotency_key FROM processed WHERE replay_id IS NOT NULL",
    )
    .await;
    assert_eq!(
        replayed
            .iter()
            .map(|r| r.0.clone())
            .collect::<BTreeSet<_>>(),
        transient_ids
    );
    assert_eq!(
        replayed.len(),
        transient_ids.len(),
        "one row per message_id"
    );
    assert!(replayed
        .iter()
        .all(|r| r.1 == 1 && r.2.as_deref() == Some(replay_id.as_str()) && r.3.is_some()));
    // The doubled transient replay was dropped by message_id, the doubled poison by its key.
    let dups: Vec<(Option<String>, Option<String>)> = rows(
        &ledger,
        "SELECT message_id, idempotency_key FROM duplicates",
    )
    .await;
    assert_eq!(dups.len(), 2, "{dups:?}");
    let dup_ids: BTreeSet<String> = dups.iter().filter_map(|d| d.0.clone()).collect();
    assert!(dup_ids.contains(&transient[0].message_id()));
    assert!(dup_ids.contains(&poison[0].message_id()));
    assert_eq!(replay_stats.duplicates, 2);
    assert_eq!(replay_stats.processed as usize, transient_ids.len());
    // Poison comes back to the DLQ once per replayed row (not twice for the doubled one),
    // with the same message_id so redrive links it to the earlier dead letter, and the
    // replay's headers carried along.
    let again = &dlq.records[first_phase_dead_letters..];
    assert_eq!(again.len(), poison.len(), "{again:?}");
    assert_eq!(
        again.iter().map(Rec::message_id).collect::<BTreeSet<_>>(),
        poison
            .iter()
            .map(|r| r.message_id())
            .collect::<BTreeSet<_>>()
    );
    for d in again {
        assert_eq!(d.h("retry_count"), "0");
        assert_eq!(d.h("redrive-replay-id"), replay_id);
        assert_eq!(
            d.all("attempt_failed_at").len(),
            1,
            "a replay starts afresh"
        );
    }
    println!(
        "replay: {} requests processed once each, {} duplicate deliveries dropped, {} poison dead-lettered again",
        replayed.len(),
        dups.len(),
        again.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_dead_letters_ingest_as_the_seed_convention() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = Pipeline::start(DemoConfig {
        count: Some(6),
        poison_ratio: 0.5,
        interval_ms: 20,
        backoff_base_ms: 50,
        ..test_config(&dir)
    });
    let cfg = pipeline.config.clone();
    let mut dlq = TopicReader::new(&cfg.dlq_topic);
    dlq.until("6 dead letters", 30, |r| r.len() >= 6).await;
    pipeline.stop().await;
    let sent: BTreeMap<String, Rec> = dlq
        .records
        .iter()
        .map(|r| (r.message_id(), r.clone()))
        .collect();

    let (store, _store_dir) = fresh_store(Backend::Sqlite).await.unwrap();
    let stop = CancellationToken::new();
    let ingest = tokio::spawn(redrive_core::ingest::run(
        IngestConfig {
            brokers: kafka_brokers(),
            topics: vec![cfg.dlq_topic.clone()],
            group_id: unique("redrive_demo_test"),
            batch_size: 100,
            linger_ms: 50,
            kafka_properties: Vec::new(),
            backpressure: None,
        },
        store.clone(),
        Arc::new(IngestStatus::default()),
        stop.clone(),
    ));
    let filter = Filter {
        dlq_topic: Some(cfg.dlq_topic.clone()),
        ..Filter::default()
    };
    wait_for("6 dead letters ingested", Duration::from_secs(30), || {
        let (store, filter) = (store.clone(), filter.clone());
        async move { (store.count(&filter).await.ok()? >= 6).then_some(()) }
    })
    .await
    .unwrap();
    stop.cancel();
    ingest.await.unwrap().unwrap();

    let page = store
        .list(&ListQuery {
            filter,
            limit: 100,
            cursor: None,
        })
        .await
        .unwrap();
    assert_eq!(page.items.len(), 6);
    for s in &page.items {
        let d = store.get(s.id).await.unwrap().expect("stored");
        let id = d.normalized.message_id.clone().expect("message_id decoded");
        let rec = &sent[&id];
        assert_eq!(s.convention, Convention::Seed);
        assert_eq!(s.source_topic.as_deref(), Some(cfg.source_topic.as_str()));
        assert_eq!(s.consumer_group.as_deref(), Some(cfg.group_id.as_str()));
        assert_eq!(
            s.retry_count,
            Some(if rec.transient() {
                MAX_RETRIES as i32
            } else {
                0
            })
        );
        assert_eq!(s.error_class.as_deref(), Some(rec.h("error_class")));
        assert_eq!(
            s.source_offset,
            Some(rec.h("original_offset").parse().unwrap())
        );
        assert_eq!(d.normalized.failed_at_ms, Some(ms_of(rec.h("failed_at"))));
        assert_eq!(d.record.value, rec.value);
        assert!(!s.malformed, "{:?}", d.normalized.decode_warnings);
    }
}
