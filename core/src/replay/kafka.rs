//! The Kafka side of the relay: the idempotent producer's configuration, its context (logs,
//! reachability), and what a failed delivery means for the outbox row.

use std::sync::{Arc, Mutex};

use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::types::RDKafkaErrorCode;

use super::{RelayConfig, RelayError, RelayStatus};
use crate::kafka_brokers::BrokerWatch;

pub(crate) type RelayProducer = FutureProducer<RelayContext>;

/// librdkafka properties of the `[kafka]` table the relay does not take from the user,
/// because its guarantees or its timing rest on them: idempotence and `acks=all` (the
/// outbox's at-least-once without duplicates from retries), the delivery timeout (it must stay
/// under half the lease so a batch is marked before its lease ends), the metadata wait (an
/// unknown topic fails fast), and a transactional id (the relay does not use transactions).
/// Aliases are listed too: librdkafka applies properties in no fixed order.
pub(crate) const RESERVED_PROPERTIES: &[&str] = &[
    "enable.idempotence",
    "acks",
    "request.required.acks",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "topic.metadata.propagation.max.ms",
    "transactional.id",
];

/// How often librdkafka reports the producer's statistics, ms (`statistics.interval.ms`):
/// they tell whether it still has a broker ([`crate::kafka_brokers`]); `[kafka]` may change it.
pub(crate) const STATISTICS_INTERVAL_MS: u32 = 5_000;

/// The user's properties the relay ignores (see [`RESERVED_PROPERTIES`]).
pub(crate) fn ignored_properties(config: &RelayConfig) -> Vec<&str> {
    config
        .kafka_properties
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| RESERVED_PROPERTIES.contains(&k.trim().to_ascii_lowercase().as_str()))
        .collect()
}

/// The producer properties the relay relies on, with the user's `kafka_properties` applied:
/// they may tune and secure the connection (SASL/SSL, linger, compression), but never change
/// one of the [`RESERVED_PROPERTIES`] (those are dropped; `run` logs a warning naming them).
pub(crate) fn client_config(config: &RelayConfig) -> ClientConfig {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", &config.brokers)
        .set("client.id", "redrive-relay")
        // Java clients' partitioner: a keyed record lands where a Java producer would put it,
        // so a replay keeps per-key order with the topic's other records.
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        // Only read for whether the producer still has a broker (`crate::kafka_brokers`).
        .set("statistics.interval.ms", STATISTICS_INTERVAL_MS.to_string())
        .set_log_level(RDKafkaLogLevel::Warning);
    let ignored = ignored_properties(config);
    for (k, v) in &config.kafka_properties {
        if !ignored.contains(&k.as_str()) {
            cfg.set(k, v);
        }
    }
    cfg.set(
        "message.timeout.ms",
        config.effective_delivery_timeout_ms().to_string(),
    )
    // A topic that does not exist fails fast as "unknown topic" (a permanent error for the
    // record) instead of timing out like an outage.
    .set(
        "topic.metadata.propagation.max.ms",
        (config.effective_delivery_timeout_ms() / 2).to_string(),
    )
    .set("enable.idempotence", "true")
    .set("acks", "all");
    cfg
}

/// Forwards librdkafka's log to `tracing` and follows whether the cluster is reachable and
/// whether the producer still has a broker.
pub(crate) struct RelayContext {
    pub(crate) status: Arc<RelayStatus>,
    /// See [`crate::kafka_brokers`]; the relay's loop puts the bootstrap servers back. Shared
    /// by the producers of one [`ProducerSlot`] (librdkafka's wrapper hides the context).
    pub(crate) brokers: Arc<BrokerWatch>,
}

impl ClientContext for RelayContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        crate::kafka_brokers::forward_log(level, fac, log_message);
    }

    fn stats(&self, statistics: rdkafka::statistics::Statistics) {
        self.brokers.observe(&statistics);
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

/// Creates a producer whose statistics go to `brokers`. Errors: `Kafka` for a property
/// librdkafka refuses.
fn create_producer(
    config: &RelayConfig,
    status: Arc<RelayStatus>,
    brokers: Arc<BrokerWatch>,
) -> Result<RelayProducer, RelayError> {
    client_config(config)
        .create_with_context(RelayContext { status, brokers })
        .map_err(|e| RelayError::Kafka(e.to_string()))
}

/// The producer in use, replaced when librdkafka reports a fatal error (an idempotent
/// producer can hit one, e.g. on a broken sequence; it then refuses every record).
pub(crate) struct ProducerSlot {
    current: Mutex<Arc<RelayProducer>>,
    brokers: Arc<BrokerWatch>,
}

impl ProducerSlot {
    /// Creates the first producer. Errors: `Kafka` for a property librdkafka refuses.
    pub(crate) fn create(
        config: &RelayConfig,
        status: Arc<RelayStatus>,
    ) -> Result<ProducerSlot, RelayError> {
        let brokers = Arc::new(BrokerWatch::default());
        let p = create_producer(config, status, brokers.clone())?;
        Ok(ProducerSlot {
            current: Mutex::new(Arc::new(p)),
            brokers,
        })
    }

    /// Puts `bootstrap` back into the producer in use when it has no broker left
    /// ([`crate::kafka_brokers`]); called on each turn of the relay's loop.
    pub(crate) fn rejoin_if_orphaned(&self, bootstrap: &str, status: &RelayStatus) {
        let p = self.get();
        if self.brokers.rejoin(p.client(), bootstrap) {
            status.record_error(
                "Kafka: the producer had no broker left; its bootstrap servers were added again"
                    .to_string(),
            );
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
        match create_producer(config, status.clone(), self.brokers.clone()) {
            Ok(p) => *guard = Arc::new(p),
            Err(e) => status.record_error(format!("recreating the producer failed: {e}")),
        }
    }
}

/// What a failed send or delivery means for its outbox row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The cluster is unreachable or unavailable: hand the row back without counting an
    /// attempt; the job waits (for at most `outage_max_ms` per job, see [`RelayConfig`]).
    Outage(String),
    /// Something that may pass (a corrupt batch, a fenced producer epoch): count an attempt,
    /// retry with backoff, give up after `max_attempts`.
    Record(String),
    /// Something that will not pass by retrying (too large, not authorised, no such topic):
    /// the row fails at once with the reason, the retry budget unspent.
    Permanent(String),
    /// Purged from the local queue at shutdown, never sent: hand back, no error.
    Purged,
}

/// Classifies a producer error (the rules are in `docs/replay.md`, "What a failed publish
/// means").
///
/// `fatal` is the producer's fatal error, asked for only when `e` is `Fatal`: librdkafka
/// then refuses every record, and the cause decides. An authorisation cause (no
/// `IDEMPOTENT_WRITE` on the cluster, no `WRITE` on the topic) is permanent; any other
/// (a broken sequence, an unknown producer id) counts one attempt, and the relay replaces the
/// producer before the retry.
pub(crate) fn classify(
    e: &KafkaError,
    fatal: impl FnOnce() -> Option<(RDKafkaErrorCode, String)>,
) -> Failure {
    let Some(code) = e.rdkafka_error_code() else {
        return Failure::Record(e.to_string());
    };
    if code == RDKafkaErrorCode::Fatal {
        return match fatal() {
            Some((cause, reason)) => match permanent_reason(cause) {
                Some(why) => {
                    Failure::Permanent(format!("{why} (fatal producer error {cause:?}: {reason})"))
                }
                None => Failure::Record(format!("fatal producer error {cause:?}: {reason}")),
            },
            None => Failure::Record(e.to_string()),
        };
    }
    classify_code(code, &e.to_string())
}

/// [`classify`] for a plain error code; `text` is librdkafka's message.
pub(crate) fn classify_code(code: RDKafkaErrorCode, text: &str) -> Failure {
    use RDKafkaErrorCode as C;
    if let Some(why) = permanent_reason(code) {
        return Failure::Permanent(format!("{why} ({text})"));
    }
    match code {
        C::PurgeQueue | C::PurgeInflight => Failure::Purged,
        C::MessageTimedOut
        | C::AllBrokersDown
        | C::BrokerTransportFailure
        | C::Resolve
        | C::OperationTimedOut
        | C::TimedOutQueue
        | C::QueueFull
        | C::LeaderNotAvailable
        | C::NotLeaderForPartition
        | C::PreferredLeaderNotAvailable
        | C::EligibleLeadersNotAvailable
        | C::FencedLeaderEpoch
        | C::UnknownLeaderEpoch
        | C::BrokerNotAvailable
        | C::ReplicaNotAvailable
        | C::RequestTimedOut
        | C::NetworkException
        | C::NotEnoughReplicas
        | C::NotEnoughReplicasAfterAppend
        | C::KafkaStorageError
        | C::ThrottlingQuotaExceeded
        | C::Authentication
        | C::SaslAuthenticationFailed
        | C::SSL => Failure::Outage(text.to_string()),
        _ => Failure::Record(text.to_string()),
    }
}

/// True for a broker's refusal that applies to the whole record batch the record travelled
/// in (a batch over the topic's `max.message.bytes`, an invalid record or timestamp in it):
/// the record itself may be fine, so the relay sends it again alone before it counts.
pub(crate) fn batch_level(e: &KafkaError) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        e.rdkafka_error_code(),
        Some(
            C::MessageSizeTooLarge
                | C::MessageBatchTooLarge
                | C::InvalidMessageSize
                | C::InvalidRecord
                | C::InvalidTimestamp
                | C::PolicyViolation
        )
    )
}

/// Why a record with this error can never be published as it is, or `None` if it might.
fn permanent_reason(code: RDKafkaErrorCode) -> Option<&'static str> {
    use RDKafkaErrorCode as C;
    Some(match code {
        C::MessageSizeTooLarge | C::InvalidMessageSize | C::MessageBatchTooLarge => {
            "the record is too large for the target topic (its max.message.bytes, the \
             broker's message.max.bytes or the producer's)"
        }
        C::TopicAuthorizationFailed => {
            "not authorised to write to the target topic (the relay's principal needs WRITE \
             on it)"
        }
        C::ClusterAuthorizationFailed => {
            "not authorised for idempotent writes (the relay's principal needs \
             IDEMPOTENT_WRITE on the cluster, or WRITE on the topic on Kafka 3.0+)"
        }
        C::TransactionalIdAuthorizationFailed => {
            "not authorised for the transactional id set in the [kafka] properties"
        }
        C::InvalidTopic => "the target topic name is invalid",
        C::UnknownTopic | C::UnknownTopicOrPartition | C::UnknownTopicId => {
            "the target topic does not exist (and the cluster does not create topics on \
             first write)"
        }
        C::UnknownPartition | C::InvalidPartitions => "the target partition does not exist",
        C::InvalidRecord
        | C::InvalidTimestamp
        | C::PolicyViolation
        | C::BadMessage
        | C::InvalidArgument => "the broker refuses the record as invalid for the target topic",
        C::InvalidRequiredAcks
        | C::UnsupportedVersion
        | C::UnsupportedForMessageFormat
        | C::UnsupportedCompressionType
        | C::InvalidRequest
        | C::InvalidConfig => {
            "the cluster does not support what the producer asks for (check the [kafka] \
             properties and the broker version)"
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarantees_and_timing_cannot_be_overridden() {
        let config = RelayConfig {
            kafka_properties: vec![
                ("acks".into(), "1".into()),
                ("request.required.acks".into(), "0".into()),
                ("enable.idempotence".into(), "false".into()),
                ("delivery.timeout.ms".into(), "300000".into()),
                ("message.timeout.ms".into(), "300000".into()),
                ("topic.metadata.propagation.max.ms".into(), "60000".into()),
                ("transactional.id".into(), "x".into()),
                ("security.protocol".into(), "SASL_SSL".into()),
                ("linger.ms".into(), "20".into()),
            ],
            ..RelayConfig::default()
        };
        let cfg = client_config(&config);
        assert_eq!(cfg.get("acks"), Some("all"));
        assert_eq!(cfg.get("request.required.acks"), None);
        assert_eq!(cfg.get("enable.idempotence"), Some("true"));
        assert_eq!(cfg.get("message.timeout.ms"), Some("10000"));
        assert_eq!(cfg.get("delivery.timeout.ms"), None);
        assert_eq!(cfg.get("topic.metadata.propagation.max.ms"), Some("5000"));
        assert_eq!(cfg.get("transactional.id"), None);
        assert_eq!(cfg.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(cfg.get("linger.ms"), Some("20"), "tuning is the user's");
        assert_eq!(ignored_properties(&config).len(), 7);
    }

    fn of(code: RDKafkaErrorCode) -> Failure {
        classify(&KafkaError::MessageProduction(code), || None)
    }

    fn is_permanent(f: &Failure) -> bool {
        matches!(f, Failure::Permanent(_))
    }

    #[test]
    fn errors_that_never_pass_fail_at_once() {
        use RDKafkaErrorCode as C;
        for code in [
            C::MessageSizeTooLarge,
            C::InvalidMessageSize,
            C::MessageBatchTooLarge,
            C::TopicAuthorizationFailed,
            C::ClusterAuthorizationFailed,
            C::TransactionalIdAuthorizationFailed,
            C::InvalidTopic,
            C::UnknownTopic,
            C::UnknownTopicOrPartition,
            C::UnknownPartition,
            C::InvalidRecord,
            C::PolicyViolation,
            C::UnsupportedForMessageFormat,
        ] {
            assert!(is_permanent(&of(code)), "{code:?}: {:?}", of(code));
        }
        let Failure::Permanent(why) = of(C::MessageSizeTooLarge) else {
            unreachable!()
        };
        assert!(why.contains("too large"), "{why}");
        let Failure::Permanent(why) = of(C::ClusterAuthorizationFailed) else {
            unreachable!()
        };
        assert!(why.contains("IDEMPOTENT_WRITE"), "{why}");
    }

    #[test]
    fn outages_pass_and_other_errors_count_attempts() {
        use RDKafkaErrorCode as C;
        for code in [
            C::MessageTimedOut,
            C::AllBrokersDown,
            C::BrokerTransportFailure,
            C::LeaderNotAvailable,
            C::NotLeaderForPartition,
            C::NotEnoughReplicas,
            C::NotEnoughReplicasAfterAppend,
            C::RequestTimedOut,
            C::SaslAuthenticationFailed,
        ] {
            assert!(matches!(of(code), Failure::Outage(_)), "{code:?}");
        }
        assert!(matches!(of(C::InvalidMessage), Failure::Record(_)));
        assert!(matches!(
            of(C::OutOfOrderSequenceNumber),
            Failure::Record(_)
        ));
        assert_eq!(of(C::PurgeQueue), Failure::Purged);
        assert_eq!(of(C::PurgeInflight), Failure::Purged);
    }

    #[test]
    fn fatal_producer_errors_are_classified_by_their_cause() {
        use RDKafkaErrorCode as C;
        let fatal = KafkaError::MessageProduction(C::Fatal);
        let auth = classify(&fatal, || {
            Some((C::ClusterAuthorizationFailed, "denied".to_string()))
        });
        assert!(is_permanent(&auth), "{auth:?}");
        let sequence = classify(&fatal, || {
            Some((C::OutOfOrderSequenceNumber, "gap".to_string()))
        });
        assert!(matches!(&sequence, Failure::Record(e) if e.contains("OutOfOrderSequenceNumber")));
        assert!(matches!(classify(&fatal, || None), Failure::Record(_)));
    }
}
