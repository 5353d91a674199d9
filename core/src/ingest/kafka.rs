//! The Kafka side of ingest: consumer configuration, the subscription (plain names and
//! `^regex` patterns) and the consumer context that follows assignments and connectivity.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;

use super::{IngestConfig, IngestError, IngestStatus};

/// How much one fetch asks of one partition, bytes (`fetch.message.max.bytes`, Java's
/// `max.partition.fetch.bytes`; both clients' default is 1 MiB). A record larger than this is
/// still returned, alone (KIP-74), so DLQ records of several MiB do not stall their partition
/// (`it`: `ingest_hostile`, `ingest_edge_cases`); this only sizes what is fetched ahead.
/// Measured (`docs/bench.md`, "fetch sizes"): what librdkafka holds is bounded by the fetch
/// sizes, not by [`QUEUED_MAX_KBYTES`]. Against a 200k-record backlog on SQLite the server
/// peaked at 869 MiB with 16 MiB here and 32 MiB per fetch, 524 MiB with 1 MiB and 4 MiB,
/// and 389 MiB with these values, at the same ingest rate (2,723 / 2,841 / 2,904 msgs/s).
pub(crate) const MAX_PARTITION_FETCH_BYTES: u32 = 256 * 1024;

/// How much one fetch response may hold over all partitions, bytes (`fetch.max.bytes`;
/// librdkafka's default is 50 MiB). librdkafka refuses less than `message.max.bytes`
/// (1,000,000 by default), so 1 MiB is the floor. One response is also what the queue may
/// overshoot [`QUEUED_MAX_KBYTES`] by.
pub(crate) const MAX_FETCH_BYTES: u32 = 1024 * 1024;

/// Most pre-fetched records librdkafka keeps queued for ingest, KiB
/// (`queued.max.messages.kbytes`; librdkafka's default is 65,536 KiB). With the high-level
/// consumer this bounds the one consumer queue over all partitions; a fetch response in
/// flight (at most [`MAX_FETCH_BYTES`]) comes on top. 1 MiB is about 1,000 records of 1 KiB,
/// refilled while a batch is written; a larger queue did not ingest faster (see
/// [`MAX_PARTITION_FETCH_BYTES`]).
pub(crate) const QUEUED_MAX_KBYTES: u32 = 1024;

/// Fewest pre-fetched records librdkafka tries to keep queued, records
/// (`queued.min.messages`; librdkafka's default is 100,000, i.e. 300 MB of 3 KiB dead
/// letters were it not for [`QUEUED_MAX_KBYTES`], which takes precedence). 20,000 is four
/// dozen of ingest's default batches.
pub(crate) const QUEUED_MIN_MESSAGES: u32 = 20_000;

/// How long librdkafka postpones the next fetch for a partition whose queue is over
/// [`QUEUED_MAX_KBYTES`], ms (`fetch.queue.backoff.ms`; librdkafka's default is 1,000, and its
/// documentation says to lower it when the queue thresholds are set low and records arrive
/// with ~1 s pauses). With the default, ingest of a backlog stood idle for 400–600 ms each
/// time it had drained the partitions' queues (every ~16,000 records over 4 partitions):
/// 4,656 ms of 100,000 records' ingest on SQLite; with 20 ms, 306 ms (`docs/bench.md`,
/// "Fetch backoff").
pub(crate) const FETCH_QUEUE_BACKOFF_MS: u32 = 20;

/// Largest protocol response the consumer accepts, bytes (`receive.message.max.bytes`). A
/// record batch larger than this would be refused for good and stall its partition, so it is
/// set to what the store can hold at all (PostgreSQL's `bytea` and SQLite's default
/// `SQLITE_MAX_LENGTH` both stop at about 1 GB), far above any broker's `message.max.bytes`
/// in practice. Buffers are sized by what arrives, not by this limit.
pub(crate) const MAX_RECEIVE_BYTES: u32 = 1024 * 1024 * 1024;

/// How often a regex subscription looks for new matching topics, ms. librdkafka's default
/// (5 minutes) would make a freshly created DLQ topic wait that long. A pattern refresh reads
/// the whole cluster's metadata, so it is kept at 30 s.
pub(crate) const PATTERN_REFRESH_MS: u32 = 30_000;

/// How often a subscription to exact topic names refreshes their metadata, ms. A DLQ topic is
/// often created only when its first record is dead-lettered (Spring Kafka's DLT, for one),
/// after redrive subscribed to its name; librdkafka notices it only at a refresh. Only the
/// subscribed topics are asked for, so 10 s is cheap.
pub(crate) const EXACT_REFRESH_MS: u32 = 10_000;

/// How often librdkafka reports its statistics (consumer lag per partition), ms
/// (`statistics.interval.ms`; `kafka_properties` may change it, 0 turns the lag off).
pub(crate) const STATISTICS_INTERVAL_MS: u32 = 5_000;

/// The validated subscription: what goes to `subscribe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subscription {
    pub(crate) entries: Vec<String>,
    pub(crate) has_patterns: bool,
}

impl Subscription {
    /// Trims the entries and drops empty ones; an entry starting with `^` must be a valid
    /// regex (checked with the `regex` crate, whose syntax is a superset of what librdkafka
    /// accepts for the common cases: `^prefix_.*`, `^(a|b)\.DLT$`).
    pub(crate) fn parse(topics: &[String]) -> Result<Subscription, IngestError> {
        let mut entries = Vec::new();
        let mut has_patterns = false;
        for t in topics.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
            if t.starts_with('^') {
                regex::Regex::new(t)
                    .map_err(|e| IngestError::BadPattern(t.to_string(), e.to_string()))?;
                has_patterns = true;
            }
            entries.push(t.to_string());
        }
        if entries.is_empty() {
            return Err(IngestError::NoTopics);
        }
        Ok(Subscription {
            entries,
            has_patterns,
        })
    }
}

/// The consumer properties ingest relies on, then the user's `kafka_properties` (last, so
/// SASL/SSL and tuning pass through; overriding the commit settings is the user's risk).
pub(crate) fn client_config(config: &IngestConfig, sub: &Subscription) -> ClientConfig {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", &config.brokers)
        .set("group.id", &config.group_id)
        .set("client.id", "redrive-ingest")
        // Offsets are committed by hand, only after the store transaction (see `commit_stored`).
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        // DLT writes can be transactional: never show a record from an aborted transaction.
        .set("isolation.level", "read_committed")
        // A new group starts at the beginning: a DLQ's existing records are the point.
        .set("auto.offset.reset", "earliest")
        .set(
            "fetch.message.max.bytes",
            MAX_PARTITION_FETCH_BYTES.to_string(),
        )
        .set("fetch.max.bytes", MAX_FETCH_BYTES.to_string())
        .set("queued.max.messages.kbytes", QUEUED_MAX_KBYTES.to_string())
        .set("queued.min.messages", QUEUED_MIN_MESSAGES.to_string())
        .set("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS.to_string())
        .set("receive.message.max.bytes", MAX_RECEIVE_BYTES.to_string())
        .set("enable.partition.eof", "false")
        .set("statistics.interval.ms", STATISTICS_INTERVAL_MS.to_string())
        .set_log_level(RDKafkaLogLevel::Info);
    let refresh = if sub.has_patterns {
        PATTERN_REFRESH_MS
    } else {
        EXACT_REFRESH_MS
    };
    cfg.set("topic.metadata.refresh.interval.ms", refresh.to_string());
    for (k, v) in &config.kafka_properties {
        cfg.set(k, v);
    }
    cfg
}

/// Follows the group assignment into [`IngestStatus`], forwards librdkafka's log to `tracing`,
/// and keeps newly assigned partitions paused while the store is failing.
pub(crate) struct IngestContext {
    pub(crate) status: Arc<IngestStatus>,
    /// True while the store is failing: a partition assigned meanwhile is paused at once, so
    /// the batch in hand does not keep growing.
    pub(crate) paused: AtomicBool,
    /// Retention backpressure: a partition of a paused DLQ topic is paused as it is assigned.
    pub(crate) backpressure: Option<Arc<crate::retention::Backpressure>>,
    /// The DLQ topics whose partitions backpressure paused (see `backpressure.rs`).
    pub(crate) bp_applied: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// Whether the consumer still has a broker to connect to (librdkafka issue #5301; the
    /// ingest loop's tick puts the bootstrap servers back).
    pub(crate) brokers: crate::kafka_brokers::BrokerWatch,
}

impl IngestContext {
    pub(crate) fn new(
        status: Arc<IngestStatus>,
        backpressure: Option<Arc<crate::retention::Backpressure>>,
    ) -> IngestContext {
        IngestContext {
            status,
            paused: AtomicBool::new(false),
            backpressure,
            bp_applied: std::sync::Mutex::new(Default::default()),
            brokers: Default::default(),
        }
    }
}

fn partitions(tpl: &TopicPartitionList) -> Vec<(String, i32)> {
    tpl.elements()
        .iter()
        .map(|e| (e.topic().to_string(), e.partition()))
        .collect()
}

impl ClientContext for IngestContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        crate::kafka_brokers::forward_log(level, fac, log_message);
    }

    /// Consumer lag per assigned partition: high watermark minus committed offset (see
    /// `IngestStatus::set_lag_from_stats` for paused partitions), and whether the consumer
    /// still has a broker ([`crate::kafka_brokers`]).
    fn stats(&self, statistics: rdkafka::statistics::Statistics) {
        self.brokers.observe(&statistics);
        let mut report = Vec::new();
        for (topic, t) in &statistics.topics {
            for (partition, p) in &t.partitions {
                // -1 is librdkafka's internal "unassigned" partition.
                if *partition < 0 {
                    continue;
                }
                report.push(super::status::PartitionOffsets {
                    topic: topic.clone(),
                    partition: *partition,
                    high: p.hi_offset,
                    low: p.lo_offset,
                    committed: p.committed_offset,
                });
            }
        }
        self.status.set_lag_from_stats(report);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown) {
            self.status.set_kafka_connected(false);
        }
        tracing::warn!(target: "redrive::ingest", %error, reason, "Kafka client error");
        self.status
            .record_error(format!("Kafka: {error}: {reason}"));
    }
}

impl ConsumerContext for IngestContext {
    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                let parts = partitions(tpl);
                tracing::info!(target: "redrive::ingest", partitions = ?parts, "partitions assigned");
                self.status.set_kafka_connected(true);
                self.status.add_assigned(parts);
                if self.paused.load(Ordering::SeqCst) {
                    if let Err(e) = consumer.pause(tpl) {
                        tracing::warn!(target: "redrive::ingest", error = %e, "could not pause newly assigned partitions");
                    }
                } else if let Some(bp) = &self.backpressure {
                    // A rebalance must not lift backpressure: pause the new partitions of a
                    // paused DLQ topic before anything is fetched from them (and of a topic
                    // with a backpressure policy while this instance has not counted the
                    // usage yet: it may be over its limit).
                    let mut held = TopicPartitionList::new();
                    for e in tpl.elements() {
                        if bp.is_held(e.topic()) {
                            held.add_partition(e.topic(), e.partition());
                        }
                    }
                    if held.count() > 0 {
                        tracing::info!(target: "redrive::ingest", partitions = ?partitions(&held), "newly assigned partitions of a DLQ topic at its retention limit stay paused");
                        if let Err(e) = consumer.pause(&held) {
                            tracing::warn!(target: "redrive::ingest", error = %e, "could not pause newly assigned partitions");
                        }
                        let mut applied = self.bp_applied.lock().unwrap_or_else(|p| p.into_inner());
                        for e in held.elements() {
                            applied.insert(e.topic().to_string());
                        }
                    }
                }
            }
            Rebalance::Revoke(tpl) => {
                let parts = partitions(tpl);
                // Records of these partitions that are in the batch in hand are still stored;
                // their offsets are not committed (see `commit_stored`), so the next owner
                // re-reads them and the store ignores the duplicates.
                tracing::info!(target: "redrive::ingest", partitions = ?parts, "partitions revoked");
                self.status.remove_assigned(parts);
            }
            Rebalance::Error(e) => {
                tracing::warn!(target: "redrive::ingest", error = %e, "rebalance error");
                self.status.record_error(format!("Kafka rebalance: {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_validates_patterns() {
        let s = Subscription::parse(&[" a.DLT ".into(), "".into(), "^dlq_.*".into()]).unwrap();
        assert_eq!(s.entries, vec!["a.DLT".to_string(), "^dlq_.*".to_string()]);
        assert!(s.has_patterns);
        assert!(matches!(
            Subscription::parse(&["^dlq_(".into()]),
            Err(IngestError::BadPattern(p, _)) if p == "^dlq_("
        ));
        assert!(matches!(
            Subscription::parse(&[" ".into()]),
            Err(IngestError::NoTopics)
        ));
    }

    #[test]
    fn user_properties_come_last() {
        let config = IngestConfig {
            kafka_properties: vec![("security.protocol".into(), "SASL_SSL".into())],
            ..IngestConfig::default()
        };
        let sub = Subscription::parse(&["x".into()]).unwrap();
        let cfg = client_config(&config, &sub);
        assert_eq!(cfg.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(cfg.get("enable.auto.commit"), Some("false"));
        assert_eq!(cfg.get("isolation.level"), Some("read_committed"));
    }
}
