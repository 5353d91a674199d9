//! The demo's Kafka plumbing: clients with the settings the reliability story needs (idempotent
//! producer with `acks=all`; consumers with manual commits), topic creation, and sending until
//! the broker has acknowledged.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Header, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::Message;
use tokio_util::sync::CancellationToken;

use crate::config::DemoConfig;
use crate::headers::HeaderList;
use crate::DemoError;

fn base(cfg: &DemoConfig) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &cfg.brokers);
    c
}

fn finish(mut c: ClientConfig, cfg: &DemoConfig) -> ClientConfig {
    for (k, v) in &cfg.kafka_properties {
        c.set(k, v);
    }
    c
}

/// The one producer for requests, retries and dead letters: idempotent, `acks=all`, so a
/// broker-side retry never writes a record twice and an acknowledged record is on every
/// in-sync replica.
pub(crate) fn producer(cfg: &DemoConfig) -> Result<FutureProducer, KafkaError> {
    let mut c = base(cfg);
    c.set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        // Surface a dead broker within 30 s; the caller keeps retrying.
        .set("message.timeout.ms", "30000");
    finish(c, cfg).create()
}

/// A consumer in `group` with manual commits: an offset is committed only after its record's
/// outcome (processed, retried or dead-lettered) is durable.
pub(crate) fn consumer(cfg: &DemoConfig, group: &str) -> Result<StreamConsumer, KafkaError> {
    // A stage may hold records for a whole backoff without polling; stay in the group meanwhile.
    let longest_wait_ms =
        (cfg.backoff_max_ms as f64 * (1.0 + cfg.jitter)) as u64 + cfg.llm_timeout_ms + 60_000;
    let mut c = base(cfg);
    c.set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "100")
        .set("session.timeout.ms", "10000")
        .set(
            "max.poll.interval.ms",
            longest_wait_ms.max(300_000).to_string(),
        );
    finish(c, cfg).create()
}

/// Creates the demo's topics that are missing, then waits until the broker's metadata lists
/// them all (so the consumers find them at once).
pub(crate) async fn ensure_topics(cfg: &DemoConfig) -> Result<(), DemoError> {
    let admin: AdminClient<DefaultClientContext> = finish(base(cfg), cfg).create()?;
    let names = cfg.topics();
    // Replication -1 = the broker's default.replication.factor: 1 on a dev broker, more on a
    // real cluster.
    let new: Vec<NewTopic<'_>> = names
        .iter()
        .map(|n| NewTopic::new(n, cfg.partitions, TopicReplication::Fixed(-1)))
        .collect();
    let results = admin
        .create_topics(
            &new,
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, e)) => {
                return Err(DemoError::Kafka(format!("creating topic {t}: {e}")));
            }
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let md = admin
            .inner()
            .fetch_metadata(None, Duration::from_secs(5))
            .map_err(|e| DemoError::Kafka(format!("reading metadata: {e}")))?;
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| {
                !md.topics()
                    .iter()
                    .any(|t| t.name() == n.as_str() && !t.partitions().is_empty())
            })
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(DemoError::Kafka(format!(
                "topics {missing:?} did not appear within 30 s"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A record as consumed: bytes exactly as Kafka gave them.
#[derive(Debug, Clone)]
pub(crate) struct Incoming {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: HeaderList,
}

impl Incoming {
    pub(crate) fn from_message(m: &BorrowedMessage<'_>) -> Incoming {
        let headers = m
            .headers()
            .map(|hs| {
                hs.iter()
                    .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default();
        Incoming {
            topic: m.topic().to_string(),
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            headers,
        }
    }
}

/// A record to produce.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing<'a> {
    pub topic: &'a str,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [(String, Option<Vec<u8>>)],
}

async fn send(p: &FutureProducer, r: &Outgoing<'_>) -> Result<(i32, i64), KafkaError> {
    let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
    for (name, value) in r.headers {
        headers = headers.insert(Header {
            key: name,
            value: value.as_deref(),
        });
    }
    let mut fr: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(r.topic).headers(headers);
    if let Some(k) = r.key {
        fr = fr.key(k);
    }
    if let Some(v) = r.value {
        fr = fr.payload(v);
    }
    p.send(fr, Duration::from_secs(30))
        .await
        .map(|d| (d.partition, d.offset))
        .map_err(|(e, _)| e)
}

/// Sends `r` and waits for the broker's acknowledgement, retrying failed sends (1 s, 2 s, ...
/// capped at 10 s) until one is acknowledged. Returns `None` only if `stop` is cancelled first:
/// the caller then must not commit the offset of the record that caused this send.
pub(crate) async fn send_until_acked(
    p: &FutureProducer,
    r: &Outgoing<'_>,
    stop: &CancellationToken,
) -> Option<(i32, i64)> {
    let mut wait = Duration::from_secs(1);
    loop {
        match send(p, r).await {
            Ok(pos) => return Some(pos),
            Err(e) => {
                tracing::warn!(topic = r.topic, error = %e, "demo: send failed; retrying");
                tokio::select! {
                    _ = stop.cancelled() => return None,
                    _ = tokio::time::sleep(wait) => {}
                }
                wait = (wait * 2).min(Duration::from_secs(10));
            }
        }
    }
}

/// Subscribes `consumer` to `topic`.
pub(crate) fn subscribe(consumer: &StreamConsumer, topic: &str) -> Result<(), KafkaError> {
    consumer.subscribe(&[topic])
}
