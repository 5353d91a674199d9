//! Replay test helpers shared by the integration tests: an operator actor, dead letters as
//! ingest stores them, an in-process relay, a store holding a throttled job, and what the
//! target topic received (record counts, headers).

use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message, OwnedMessage};
use redrive_core::actions::{
    Actor, AuditEntry, AuditQuery, JobStatus, ReplayJob, ReplayRequest, Selection,
};
use redrive_core::conventions;
use redrive_core::model::{Header, NewDeadLetter, RawRecord};
use redrive_core::replay::{self, RelayConfig, RelayStatus};
use redrive_core::store::Store;
use redrive_core::Filter;
use redrive_testkit::{create_topic, kafka_brokers, unique, wait_for, Backend};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub(crate) fn ann() -> Actor {
    Actor::operator("ann").with_client("192.0.2.10", "redrive-test")
}

/// A dead letter as ingest would store it: decoded by the real conventions.
pub(crate) fn dead_letter(
    dlq_offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<Header>,
) -> NewDeadLetter {
    let record = RawRecord {
        dlq_topic: "payments.DLT".to_string(),
        dlq_partition: 0,
        dlq_offset,
        timestamp_ms: Some(1_796_104_900_000 + dlq_offset),
        key,
        value,
        headers,
    };
    let (convention, normalized) = conventions::decode(&record);
    NewDeadLetter {
        record,
        convention,
        normalized,
        fingerprint: "00000000000000aa".to_string(),
        dead_lettered_at_ms: 1_796_104_900_000 + dlq_offset,
        ingested_at_ms: 1_796_104_900_100 + dlq_offset,
    }
}

/// A relay running in-process until [`RunningRelay::stop`].
pub(crate) struct RunningRelay {
    shutdown: CancellationToken,
    pub(crate) status: Arc<RelayStatus>,
    task: JoinHandle<Result<(), replay::RelayError>>,
}

impl RunningRelay {
    pub(crate) fn start(store: &Store, config: RelayConfig) -> RunningRelay {
        let shutdown = CancellationToken::new();
        let status = Arc::new(RelayStatus::default());
        let task = tokio::spawn(replay::run(
            config,
            store.clone(),
            status.clone(),
            shutdown.clone(),
        ));
        RunningRelay {
            shutdown,
            status,
            task,
        }
    }

    pub(crate) async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("the relay stops within 60 s")
            .expect("join")
            .expect("relay");
    }
}

/// A fresh, migrated store of `backend` holding `n` dead letters (values of `value_len`
/// bytes) and one replay job of all of them to a new topic named after `prefix`, throttled at
/// `rate` msgs/s. Returns the store, its directory guard, the target topic and the job.
pub(crate) async fn store_with_throttled_job(
    backend: Backend,
    prefix: &str,
    n: i64,
    value_len: usize,
    rate: u32,
) -> (Store, redrive_testkit::TestDatabase, String, ReplayJob) {
    let (store, dir) = redrive_testkit::fresh_store(backend)
        .await
        .expect("fresh store");
    let target = unique(prefix);
    create_topic(&target, 1, &[]).await.expect("topic");
    let batch: Vec<NewDeadLetter> = (0..n)
        .map(|i| dead_letter(i, None, Some(vec![b'x'; value_len]), vec![]))
        .collect();
    store.insert_batch(&batch).await.expect("insert");
    let job = store
        .request_replay(
            &ann(),
            &ReplayRequest {
                selection: Selection::Filter(Filter::default()),
                target_topic: Some(target.clone()),
                rate_per_sec: Some(rate),
                reason: None,
                options: Default::default(),
            },
        )
        .await
        .expect("replay");
    assert_eq!(job.total, n);
    (store, dir, target, job)
}

pub(crate) fn fast_relay() -> RelayConfig {
    RelayConfig {
        brokers: kafka_brokers(),
        poll_interval_ms: 50,
        backoff_base_ms: 50,
        backoff_max_ms: 1_000,
        ..RelayConfig::default()
    }
}

/// `n` dead letters for a chunked replay: keys `k0`..`k6` in turn (so per-key order has
/// something to keep), values `v0`, `v1`, ... (DLQ offsets 0..n).
pub(crate) fn keyed_dead_letters(n: usize) -> Vec<NewDeadLetter> {
    (0..n as i64)
        .map(|i| {
            let key = Some(format!("k{}", i % 7).into_bytes());
            dead_letter(i, key, Some(format!("v{i}").into_bytes()), vec![])
        })
        .collect()
}

/// The newest audit rows of `action` (at most 10), newest first.
pub(crate) async fn audit_rows(store: &Store, action: &str) -> Vec<AuditEntry> {
    store
        .audit(&AuditQuery {
            action: Some(action.into()),
            limit: 10,
            ..AuditQuery::default()
        })
        .await
        .expect("audit")
        .items
}

pub(crate) async fn wait_job(
    store: &Store,
    id: &str,
    timeout: Duration,
    want: JobStatus,
) -> ReplayJob {
    wait_for(&format!("job {id} to be {want:?}"), timeout, || async {
        let j = store.job(id).await.ok().flatten()?;
        (j.status == want).then_some(j)
    })
    .await
    .expect("job status")
}

/// How many records `topic` holds (sum of its partitions' watermarks; an idempotent,
/// non-transactional producer writes no control records).
pub(crate) fn record_count(topic: &str, partitions: i32) -> i64 {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka_brokers())
        .create()
        .expect("consumer");
    (0..partitions)
        .map(|p| {
            let (lo, hi) = c
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .expect("watermarks");
            hi - lo
        })
        .sum()
}

/// The record's headers as the model's ordered list.
pub(crate) fn headers_of(m: &OwnedMessage) -> Vec<Header> {
    m.headers()
        .map(|hs| {
            hs.iter()
                .map(|x| Header {
                    name: x.key.to_string(),
                    value: x.value.map(<[u8]>::to_vec),
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn header_text(headers: &[Header], name: &str) -> String {
    let values: Vec<&Header> = headers.iter().filter(|x| x.name == name).collect();
    assert_eq!(values.len(), 1, "exactly one {name}: {headers:?}");
    String::from_utf8(values[0].value.clone().expect("a value")).expect("UTF-8")
}
