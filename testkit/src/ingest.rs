//! Helpers for tests that run ingest: start it in-process against a store, wait for rows,
//! read back what was stored, read a group's committed offsets, make PostgreSQL unavailable.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureProducer;
use rdkafka::{Offset, TopicPartitionList};
use redrive_core::ingest::{IngestConfig, IngestError, IngestStatus};
use redrive_core::model::{DeadLetter, DeadLetterSummary};
use redrive_core::store::Store;
use redrive_core::{Filter, ListQuery};
use sqlx::Connection;
use tokio_util::sync::CancellationToken;

use crate::{kafka_brokers, postgres_admin_url, wait_for};

/// An ingest configuration for the test broker: the given topics (`^regex` allowed) and
/// group, small batches and a short linger so tests see rows quickly.
pub fn ingest_config(topics: &[&str], group: &str) -> IngestConfig {
    IngestConfig {
        brokers: kafka_brokers(),
        topics: topics.iter().map(|t| t.to_string()).collect(),
        group_id: group.to_string(),
        batch_size: 500,
        linger_ms: 50,
        kafka_properties: vec![],
        backpressure: None,
    }
}

/// Ingest running in-process (a tokio task), as `redrive serve` runs it.
pub struct RunningIngest {
    /// Live status (the same object `/readyz` reads).
    pub status: Arc<IngestStatus>,
    shutdown: CancellationToken,
    handle: tokio::task::JoinHandle<Result<(), IngestError>>,
}

/// Starts `redrive_core::ingest::run` with `config` against `store`.
pub fn start_ingest(store: &Store, config: IngestConfig) -> RunningIngest {
    let status = Arc::new(IngestStatus::default());
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(redrive_core::ingest::run(
        config,
        store.clone(),
        status.clone(),
        shutdown.clone(),
    ));
    RunningIngest {
        status,
        shutdown,
        handle,
    }
}

impl RunningIngest {
    /// Requests graceful shutdown and waits (at most 60 s) for `run` to return; fails if it
    /// returned an error or panicked.
    pub async fn stop(self) -> Result<()> {
        self.shutdown.cancel();
        let joined = tokio::time::timeout(Duration::from_secs(60), self.handle)
            .await
            .context("ingest did not stop within 60 s of shutdown")?;
        joined
            .context("ingest task panicked")?
            .context("ingest returned an error")?;
        Ok(())
    }

    /// True if `run` has returned (it should not before `stop`).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// What ingest was doing, for a failure message: whether its task has returned, and its
    /// status snapshot as JSON (connected, assigned partitions, records and batches stored,
    /// store failures, last error, lag). "Never assigned a partition" and "assigned but the
    /// store kept failing" are different bugs.
    pub fn describe(&self) -> String {
        let snapshot = serde_json::to_string(&self.status.snapshot())
            .unwrap_or_else(|e| format!("(status not serialisable: {e})"));
        let task = if self.is_finished() {
            "returned (early: see stop() for its result)"
        } else {
            "running"
        };
        format!("ingest task {task}; status {snapshot}")
    }

    /// [`wait_for_count`], with [`describe`](Self::describe) in the error when it times out.
    pub async fn wait_for_count(
        &self,
        store: &Store,
        dlq_topic: &str,
        n: i64,
        timeout: Duration,
    ) -> Result<i64> {
        wait_for_count(store, dlq_topic, n, timeout)
            .await
            .map_err(|e| e.context(self.describe()))
    }
}

fn topic_filter(dlq_topic: &str) -> Filter {
    Filter {
        dlq_topic: Some(dlq_topic.to_string()),
        ..Filter::default()
    }
}

/// How many dead letters the store holds for `dlq_topic`.
pub async fn count_in(store: &Store, dlq_topic: &str) -> Result<i64> {
    Ok(store.count(&topic_filter(dlq_topic)).await?)
}

/// Waits (polling) until the store holds at least `n` dead letters of `dlq_topic`; returns
/// the count seen.
pub async fn wait_for_count(
    store: &Store,
    dlq_topic: &str,
    n: i64,
    timeout: Duration,
) -> Result<i64> {
    // The last answer, for the failure message: "stuck at 20" and "the store kept failing"
    // are different bugs.
    let last = std::sync::Mutex::new(String::from("no answer yet"));
    let found = wait_for(
        &format!("{n} dead letters from {dlq_topic}"),
        timeout,
        || async {
            let answer = store.count(&topic_filter(dlq_topic)).await;
            let seen = match &answer {
                Ok(c) => format!("{c} stored"),
                Err(e) => format!("count failed: {e}"),
            };
            *last.lock().unwrap() = seen;
            match answer {
                Ok(c) if c >= n => Some(c),
                _ => None,
            }
        },
    )
    .await;
    let last = last.into_inner().unwrap();
    found.map_err(|e| e.context(format!("last seen: {last}")))
}

/// Every stored summary of `dlq_topic` (all pages), sorted by (partition, offset).
pub async fn summaries_in(store: &Store, dlq_topic: &str) -> Result<Vec<DeadLetterSummary>> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list(&ListQuery {
                filter: topic_filter(dlq_topic),
                limit: redrive_core::filter::MAX_LIMIT,
                cursor,
            })
            .await?;
        out.extend(page.items);
        match page.next_cursor {
            Some(c) => cursor = Some(redrive_core::Cursor::decode(&c)?),
            None => break,
        }
    }
    out.sort_by_key(|s| (s.dlq_partition, s.dlq_offset));
    Ok(out)
}

/// Every stored dead letter of `dlq_topic`, whole (raw record included), sorted by
/// (partition, offset).
pub async fn dead_letters_in(store: &Store, dlq_topic: &str) -> Result<Vec<DeadLetter>> {
    let mut out = Vec::new();
    for s in summaries_in(store, dlq_topic).await? {
        let d = store
            .get(s.id)
            .await?
            .ok_or_else(|| anyhow!("dead letter {} listed but not found", s.id))?;
        out.push(d);
    }
    Ok(out)
}

/// The stored dead letter at (`dlq_topic`, `partition`, `offset`).
pub async fn dead_letter_at(
    store: &Store,
    dlq_topic: &str,
    partition: i32,
    offset: i64,
) -> Result<DeadLetter> {
    let s = summaries_in(store, dlq_topic)
        .await?
        .into_iter()
        .find(|s| s.dlq_partition == partition && s.dlq_offset == offset)
        .ok_or_else(|| anyhow!("nothing stored at {dlq_topic}/{partition}@{offset}"))?;
    store
        .get(s.id)
        .await?
        .ok_or_else(|| anyhow!("dead letter {} listed but not found", s.id))
}

/// The committed offsets of `group` on `topic`: partition -> next offset to read. A partition
/// without a committed offset is absent.
pub async fn committed_offsets(group: &str, topic: &str) -> Result<BTreeMap<i32, i64>> {
    let group = group.to_string();
    let topic = topic.to_string();
    tokio::task::spawn_blocking(move || -> Result<BTreeMap<i32, i64>> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", kafka_brokers())
            .set("group.id", &group)
            .set("enable.auto.commit", "false")
            .create()?;
        let md = consumer.fetch_metadata(Some(&topic), Duration::from_secs(10))?;
        let partitions = md
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .map(|t| t.partitions().len())
            .ok_or_else(|| anyhow!("topic {topic} not in metadata"))?;
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions as i32 {
            tpl.add_partition(&topic, p);
        }
        let committed = consumer.committed_offsets(tpl, Duration::from_secs(10))?;
        let mut out = BTreeMap::new();
        for e in committed.elements() {
            if let Offset::Offset(o) = e.offset() {
                out.insert(e.partition(), o);
            }
        }
        Ok(out)
    })
    .await?
}

/// The end offsets (high watermarks) of `topic`: partition -> offset after the last record.
pub async fn end_offsets(topic: &str) -> Result<BTreeMap<i32, i64>> {
    let topic = topic.to_string();
    tokio::task::spawn_blocking(move || -> Result<BTreeMap<i32, i64>> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", kafka_brokers())
            .create()?;
        let md = consumer.fetch_metadata(Some(&topic), Duration::from_secs(10))?;
        let t = md
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .ok_or_else(|| anyhow!("topic {topic} not in metadata"))?;
        let mut out = BTreeMap::new();
        for p in t.partitions() {
            let (_, high) = consumer.fetch_watermarks(&topic, p.id(), Duration::from_secs(10))?;
            out.insert(p.id(), high);
        }
        Ok(out)
    })
    .await?
}

/// A transactional producer (transactions initialised) with the given `transactional.id`.
pub async fn transactional_producer(transactional_id: &str) -> Result<FutureProducer> {
    let p = crate::producer(&[("transactional.id", transactional_id)])?;
    let p2 = p.clone();
    tokio::task::spawn_blocking(move || {
        rdkafka::producer::Producer::init_transactions(&p2, Duration::from_secs(30))
    })
    .await??;
    Ok(p)
}

/// A producer tuned for volume: large batches, lz4, long linger.
pub fn bulk_producer() -> Result<FutureProducer> {
    crate::producer(&[
        ("linger.ms", "50"),
        ("batch.num.messages", "10000"),
        ("batch.size", "1000000"),
        ("compression.type", "lz4"),
        ("queue.buffering.max.messages", "1000000"),
    ])
}

/// Produces `n` records made by `make(i)` to `topic` in chunks, waiting for every delivery.
pub async fn produce_many(
    topic: &str,
    n: usize,
    make: impl Fn(usize) -> crate::TestRecord,
) -> Result<()> {
    let p = bulk_producer()?;
    let mut i = 0;
    while i < n {
        let end = (i + 5_000).min(n);
        let chunk: Vec<_> = (i..end).map(&make).collect();
        crate::produce_with(&p, topic, &chunk).await?;
        i = end;
    }
    Ok(())
}

/// The database name at the end of a PostgreSQL URL.
fn database_name(url: &str) -> Result<String> {
    let tail = url
        .rsplit_once('/')
        .map(|(_, t)| t)
        .ok_or_else(|| anyhow!("no database in {url}"))?;
    let name = tail.split('?').next().unwrap_or(tail);
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        bail!("unexpected database name in {url}");
    }
    Ok(name.to_string())
}

/// Makes the PostgreSQL database at `url` refuse connections (`ALLOW_CONNECTIONS false`,
/// which binds superusers too, unlike `CONNECTION LIMIT`) and terminates its open sessions;
/// or, with `available = true`, allows connections again. A real, reversible outage.
pub async fn set_postgres_available(url: &str, available: bool) -> Result<()> {
    let name = database_name(url)?;
    let mut admin = sqlx::PgConnection::connect(&postgres_admin_url()).await?;
    sqlx::query(&format!(
        "ALTER DATABASE {name} WITH ALLOW_CONNECTIONS {available}"
    ))
    .execute(&mut admin)
    .await?;
    if !available {
        sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid()",
        )
        .bind(&name)
        .execute(&mut admin)
        .await?;
    }
    Ok(())
}

/// Fails (with a readable diff) unless `stored` holds exactly `sent`'s key, value, headers
/// (names, values, order, duplicates, nulls) and, when `sent` set one, its timestamp.
pub fn assert_stored_exactly(sent: &crate::TestRecord, stored: &redrive_core::model::RawRecord) {
    assert_eq!(
        stored.key, sent.key,
        "key of {}@{}",
        stored.dlq_partition, stored.dlq_offset
    );
    assert_eq!(
        stored.value, sent.value,
        "value of {}@{}",
        stored.dlq_partition, stored.dlq_offset
    );
    let headers: Vec<(String, Option<Vec<u8>>)> = stored
        .headers
        .iter()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect();
    assert_eq!(
        headers, sent.headers,
        "headers of {}@{}",
        stored.dlq_partition, stored.dlq_offset
    );
    if let Some(ts) = sent.timestamp_ms {
        assert_eq!(stored.timestamp_ms, Some(ts), "timestamp");
    }
}

/// Ingests everything in `dlq_topic` (expected: `n` records) into a fresh store of `backend`
/// with a fresh consumer group, stops ingest gracefully, and returns the store (keep the
/// `TempDir` alive while using it) and the stored dead letters sorted by (partition, offset).
pub async fn ingest_all(
    backend: crate::Backend,
    dlq_topic: &str,
    n: i64,
) -> Result<(Store, crate::TestDatabase, Vec<DeadLetter>)> {
    let (store, dir) = crate::fresh_store(backend).await?;
    let ingest = start_ingest(&store, ingest_config(&[dlq_topic], &crate::unique("group")));
    if let Err(e) = ingest
        .wait_for_count(&store, dlq_topic, n, Duration::from_secs(60))
        .await
    {
        // The task's own result says why it stopped early, if it did.
        let stopped = match ingest.stop().await {
            Ok(()) => "stopped cleanly after the wait".to_string(),
            Err(stop) => format!("stop: {stop:#}"),
        };
        return Err(e.context(stopped));
    }
    ingest.stop().await?;
    let stored = dead_letters_in(&store, dlq_topic).await?;
    if stored.len() as i64 != n {
        bail!(
            "expected {n} dead letters in {dlq_topic}, found {}",
            stored.len()
        );
    }
    Ok((store, dir, stored))
}
