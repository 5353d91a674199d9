//! The Kafka side of the relay: the idempotent producer's configuration, its context (logs,
//! reachability), and what a failed delivery means for the outbox row.

use std::sync::{Arc, Mutex};

use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::types::RDKafkaErrorCode;

use super::{RelayConfig, RelayError, RelayStatus};

pub(crate) type RelayProducer = FutureProducer<RelayContext>;

/// The producer properties the relay relies on, with the user's `kafka_properties` applied in
/// between: they may tune and secure the connection (SASL/SSL, linger, compression), but
/// `enable.idempotence=true` and `acks=all` are set last because the outbox's guarantees
/// rest on them.
pub(crate) fn client_config(config: &RelayConfig) -> ClientConfig {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", &config.brokers)
        .set("client.id", "redrive-relay")
        // Java clients' partitioner: a keyed record lands where a Java producer would put it,
        // so a replay keeps per-key order with the topic's other records.
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .set(
            "message.timeout.ms",
            config.effective_delivery_timeout_ms().to_string(),
        )
        // A topic that does not exist fails fast as "unknown topic" (a per-record error that
        // is retried and finally reported) instead of timing out like an outage.
        .set(
            "topic.metadata.propagation.max.ms",
            (config.effective_delivery_timeout_ms() / 2).to_string(),
        )
        .set_log_level(RDKafkaLogLevel::Warning);
    for (k, v) in &config.kafka_properties {
        cfg.set(k, v);
    }
    cfg.set("enable.idempotence", "true").set("acks", "all");
    cfg
}

/// Forwards librdkafka's log to `tracing` and follows whether the cluster is reachable.
pub(crate) struct RelayContext {
    pub(crate) status: Arc<RelayStatus>,
}

impl ClientContext for RelayContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", "{fac} {log_message}")
            }
            RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", "{fac} {log_message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", "{fac} {log_message}")
            }
            RDKafkaLogLevel::Debug => tracing::debug!(target: "librdkafka", "{fac} {log_message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown) {
            self.status.set_kafka_reachable(false);
        }
        tracing::warn!(target: "redrive::replay", %error, reason, "Kafka client error");
        self.status
            .record_error(format!("Kafka: {error}: {reason}"));
    }
}

/// Creates the producer. Errors: `Kafka` for a property librdkafka refuses.
pub(crate) fn create_producer(
    config: &RelayConfig,
    status: Arc<RelayStatus>,
) -> Result<RelayProducer, RelayError> {
    client_config(config)
        .create_with_context(RelayContext { status })
        .map_err(|e| RelayError::Kafka(e.to_string()))
}

/// The producer in use, replaced when librdkafka reports a fatal error (an idempotent
/// producer can hit one, e.g. on a broken sequence; it then refuses every record).
pub(crate) struct ProducerSlot {
    current: Mutex<Arc<RelayProducer>>,
}

impl ProducerSlot {
    pub(crate) fn new(p: RelayProducer) -> ProducerSlot {
        ProducerSlot {
            current: Mutex::new(Arc::new(p)),
        }
    }

    pub(crate) fn get(&self) -> Arc<RelayProducer> {
        match self.current.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// If `used` (the producer a failed batch went through) is in a fatal state, put a new
    /// one in its place. Rows of the failed batch are retried with the new producer.
    pub(crate) fn replace_if_fatal(
        &self,
        used: &Arc<RelayProducer>,
        config: &RelayConfig,
        status: &Arc<RelayStatus>,
    ) {
        let Some((code, reason)) = used.client().fatal_error() else {
            return;
        };
        let mut guard = match self.current.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if !Arc::ptr_eq(&guard, used) {
            return; // another worker replaced it already
        }
        tracing::error!(target: "redrive::replay", ?code, %reason, "fatal producer error; creating a new producer");
        status.record_error(format!("Kafka producer fatal error {code:?}: {reason}"));
        match create_producer(config, status.clone()) {
            Ok(p) => *guard = Arc::new(p),
            Err(e) => status.record_error(format!("recreating the producer failed: {e}")),
        }
    }
}

/// What a failed send or delivery means for its outbox row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The cluster is unreachable or unavailable: hand the row back without counting an
    /// attempt; the job waits.
    Outage(String),
    /// Something about this record or its topic: count an attempt, retry with backoff.
    Record(String),
    /// Purged from the local queue at shutdown, never sent: hand back, no error.
    Purged,
}

/// Classifies a producer error. Timeouts and connectivity are outages (they pass without
/// anyone touching the record); everything else (unknown topic, record too large, not
/// authorised, invalid record) is the record's.
pub(crate) fn classify(e: &KafkaError) -> Failure {
    use RDKafkaErrorCode as C;
    match e.rdkafka_error_code() {
        Some(C::PurgeQueue | C::PurgeInflight) => Failure::Purged,
        Some(
            C::MessageTimedOut
            | C::AllBrokersDown
            | C::BrokerTransportFailure
            | C::Resolve
            | C::OperationTimedOut
            | C::QueueFull
            | C::Fatal
            | C::LeaderNotAvailable
            | C::NotLeaderForPartition
            | C::RequestTimedOut
            | C::NetworkException
            | C::NotEnoughReplicas
            | C::NotEnoughReplicasAfterAppend
            | C::KafkaStorageError
            | C::PreferredLeaderNotAvailable,
        ) => Failure::Outage(e.to_string()),
        _ => Failure::Record(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotence_and_acks_cannot_be_overridden() {
        let config = RelayConfig {
            kafka_properties: vec![
                ("acks".into(), "1".into()),
                ("enable.idempotence".into(), "false".into()),
                ("security.protocol".into(), "SASL_SSL".into()),
            ],
            ..RelayConfig::default()
        };
        let cfg = client_config(&config);
        assert_eq!(cfg.get("acks"), Some("all"));
        assert_eq!(cfg.get("enable.idempotence"), Some("true"));
        assert_eq!(cfg.get("security.protocol"), Some("SASL_SSL"));
    }

    #[test]
    fn outages_and_record_errors_are_told_apart() {
        let e = |c| KafkaError::MessageProduction(c);
        assert!(matches!(
            classify(&e(RDKafkaErrorCode::MessageTimedOut)),
            Failure::Outage(_)
        ));
        assert!(matches!(
            classify(&e(RDKafkaErrorCode::MessageSizeTooLarge)),
            Failure::Record(_)
        ));
        assert!(matches!(
            classify(&e(RDKafkaErrorCode::UnknownTopic)),
            Failure::Record(_)
        ));
        assert_eq!(classify(&e(RDKafkaErrorCode::PurgeQueue)), Failure::Purged);
    }
}
