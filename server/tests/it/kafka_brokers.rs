//! A Kafka client that a broker's controlled shutdown left with no broker at all
//! (librdkafka issue #5301; `core/src/kafka_brokers.rs`, `docs/deployment.md`) connects again
//! once the broker is back, because [`BrokerWatch`] puts its bootstrap servers back.
//!
//! The window is real and short: while a KRaft broker shuts down it answers Metadata with no
//! broker listed, and a client that asks then forgets the broker. Four threads ask the
//! consumer for metadata during each stop to meet it; without the watch the consumer of
//! some round stayed disconnected for the whole minute (this is what CI's
//! `alerts_ingest::ingest_stalled_…` met under load).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::statistics::Statistics;
use redrive_core::kafka_brokers::BrokerWatch;

use crate::support::broker::OwnBroker;

/// Stop/start rounds. The window was met in about half the rounds when measured.
const ROUNDS: usize = 4;

#[derive(Default)]
struct Watched {
    brokers: BrokerWatch,
    /// A report showed no broker at all (the window was met).
    orphaned_seen: AtomicBool,
}

impl ClientContext for Watched {
    fn stats(&self, statistics: Statistics) {
        if !redrive_core::kafka_brokers::knows_a_broker(&statistics) {
            self.orphaned_seen.store(true, Ordering::SeqCst);
        }
        self.brokers.observe(&statistics);
    }
}
impl ConsumerContext for Watched {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_left_with_no_broker_connects_again_when_the_broker_is_back() {
    let broker = OwnBroker::start().await;
    let topic = redrive_testkit::unique("orphan");
    broker.create_topic(&topic, 1).await;
    broker.produce(&topic, &["one"]).await;
    let consumer: Arc<BaseConsumer<Watched>> = Arc::new(
        ClientConfig::new()
            .set("bootstrap.servers", &broker.brokers)
            .set("group.id", redrive_testkit::unique("orphan_group"))
            .set("statistics.interval.ms", "200")
            .set("enable.auto.commit", "false")
            .create_with_context(Watched::default())
            .expect("consumer"),
    );
    consumer.subscribe(&[&topic]).expect("subscribe");
    // The application's side: poll, and put the bootstrap servers back when needed (what
    // ingest's tick and the relay's loop do).
    let stop = Arc::new(AtomicBool::new(false));
    let rejoined = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // The control: `REDRIVE_TEST_NO_REJOIN=1` leaves the bootstrap servers out, to see the
    // consumer stay disconnected (librdkafka alone).
    let control = std::env::var_os("REDRIVE_TEST_NO_REJOIN").is_some();
    let poller = {
        let (c, stop, rejoined, bootstrap) = (
            consumer.clone(),
            stop.clone(),
            rejoined.clone(),
            broker.brokers.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let _ = c.poll(Duration::from_millis(100));
                if !control && c.context().brokers.rejoin(c.client(), &bootstrap) {
                    rejoined.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
    };
    let metadata_ok = |c: &BaseConsumer<Watched>| {
        c.fetch_metadata(Some(&topic), Duration::from_secs(2))
            .map(|m| !m.brokers().is_empty())
            .unwrap_or(false)
    };
    for round in 1..=ROUNDS {
        let start = Instant::now();
        while !metadata_ok(&consumer) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "round {round}: the consumer did not reach the broker within 60 s of its \
                 start (rejoined {} times so far)",
                rejoined.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let asking = Arc::new(AtomicBool::new(true));
        let askers: Vec<_> = (0..4)
            .map(|_| {
                let (c, asking, topic) = (consumer.clone(), asking.clone(), topic.clone());
                std::thread::spawn(move || {
                    while asking.load(Ordering::SeqCst) {
                        let _ = c.fetch_metadata(Some(&topic), Duration::from_secs(1));
                    }
                })
            })
            .collect();
        broker.stop().await;
        asking.store(false, Ordering::SeqCst);
        for a in askers {
            a.join().expect("asker");
        }
        broker.restart().await;
    }
    let start = Instant::now();
    while !metadata_ok(&consumer) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the consumer did not reach the broker within 60 s of its last start"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.store(true, Ordering::SeqCst);
    poller.join().expect("poller");
    eprintln!(
        "{ROUNDS} rounds: a report without a broker seen: {}, bootstrap servers added again {} \
         times",
        consumer.context().orphaned_seen.load(Ordering::SeqCst),
        rejoined.load(Ordering::SeqCst)
    );
}

/// The repair itself, deterministically: a consumer created with no bootstrap servers has no
/// broker (what the window leaves), its statistics say so, and once the watch has added the
/// servers it reaches the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_no_broker_reaches_the_cluster_once_the_watch_adds_its_servers() {
    let consumer: BaseConsumer<Watched> = ClientConfig::new()
        .set("group.id", redrive_testkit::unique("no_broker_group"))
        .set("statistics.interval.ms", "100")
        .create_with_context(Watched::default())
        .expect("consumer");
    assert!(
        consumer
            .fetch_metadata(None, Duration::from_millis(500))
            .is_err(),
        "no broker, no metadata"
    );
    let bootstrap = redrive_testkit::kafka_brokers();
    let start = Instant::now();
    while !consumer
        .context()
        .brokers
        .rejoin(consumer.client(), &bootstrap)
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no statistics report showed the client without a broker"
        );
        let _ = consumer.poll(Duration::from_millis(100));
    }
    assert!(consumer.context().orphaned_seen.load(Ordering::SeqCst));
    let md = consumer
        .fetch_metadata(None, Duration::from_secs(30))
        .expect("metadata once the bootstrap servers are back");
    assert!(!md.brokers().is_empty());
    // Known brokers: the next reports do not ask again.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(500) {
        let _ = consumer.poll(Duration::from_millis(100));
    }
    assert!(!consumer
        .context()
        .brokers
        .rejoin(consumer.client(), &bootstrap));
}

/// The relay's side, through the real binary: a throttled replay job runs while its broker
/// (a broker of the test's own) is stopped and started twice. The job finishes with every
/// record published and none failed, and every dead letter's record is on the topic under one
/// idempotency key (a record republished after a delivery timeout carries the same key; the
/// idempotent producer adds no copy of its own). The producer did not meet the no-broker
/// window in 4 runs (it printed 0 re-adds each time), so this covers the restarts themselves;
/// the watch is the consumer's, tested above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_job_finishes_across_broker_restarts() {
    use rdkafka::message::{Headers, Message};
    use redrive_core::actions::{JobStatus, ReplayRequest, Selection};
    use redrive_core::model::NewDeadLetter;

    const N: i64 = 120;
    let broker = OwnBroker::start().await;
    let target = redrive_testkit::unique("restarts");
    broker.create_topic(&target, 1).await;
    let env = [
        ("REDRIVE_KAFKA_BROKERS", broker.brokers.as_str()),
        ("REDRIVE_RELAY_POLL_INTERVAL_MS", "100"),
    ];
    let records: Vec<NewDeadLetter> = (0..N)
        .map(|i| {
            crate::support::replay::dead_letter(i, Some(format!("k{i}").into_bytes()), None, vec![])
        })
        .collect();
    let app =
        crate::support::TestApp::with_records(redrive_testkit::Backend::Sqlite, &records, &env)
            .await;
    let job = app
        .store
        .request_replay(
            &crate::support::replay::ann(),
            &ReplayRequest {
                selection: Selection::Filter(redrive_core::Filter::default()),
                target_topic: Some(target.clone()),
                // 120 records at 10 msgs/s: the job spans both restarts.
                rate_per_sec: Some(10),
                reason: None,
                options: Default::default(),
            },
        )
        .await
        .expect("replay");
    assert_eq!(job.total, N);
    for _ in 0..2 {
        crate::support::eventually("the relay publishing", Duration::from_secs(60), || async {
            app.store
                .job(&job.id)
                .await
                .ok()
                .flatten()
                .is_some_and(|j| j.status == JobStatus::Running && j.published > 0)
        })
        .await;
        broker.stop().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        broker.restart().await;
    }
    let done = crate::support::replay::wait_job(
        &app.store,
        &job.id,
        Duration::from_secs(300),
        JobStatus::Finished,
    )
    .await;
    assert_eq!((done.published, done.failed), (N, 0), "{done:?}");

    // Every dead letter's record is on the topic, each under one idempotency key.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker.brokers)
        .set("group.id", redrive_testkit::unique("restarts_read"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    consumer.subscribe(&[&target]).expect("subscribe");
    let mut keys_by_record: std::collections::BTreeMap<
        Vec<u8>,
        std::collections::BTreeSet<Vec<u8>>,
    > = Default::default();
    let start = Instant::now();
    while (keys_by_record.len() as i64) < N && start.elapsed() < Duration::from_secs(60) {
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(500)) else {
            continue;
        };
        let key = m
            .headers()
            .and_then(|h| {
                h.iter()
                    .find(|h| h.key == "redrive-idempotency-key")
                    .and_then(|h| h.value.map(<[u8]>::to_vec))
            })
            .expect("an idempotency key on every replayed record");
        keys_by_record
            .entry(m.key().expect("the record key").to_vec())
            .or_default()
            .insert(key);
    }
    assert_eq!(keys_by_record.len() as i64, N, "every record on the topic");
    assert!(
        keys_by_record.values().all(|k| k.len() == 1),
        "one idempotency key per record: {:?}",
        keys_by_record
            .iter()
            .filter(|(_, k)| k.len() > 1)
            .collect::<Vec<_>>()
    );
    let log = app.log();
    eprintln!(
        "bootstrap servers added again to the relay's producer: {} times",
        log.matches("had no broker left").count()
    );
}
