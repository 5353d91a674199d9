//! Ingest's settings ([`IngestConfig`]) and their defaults.

use std::sync::Arc;

/// Ingest settings (the server maps its configuration onto this).
#[derive(Debug, Clone)]
pub struct IngestConfig {
    /// Bootstrap servers, e.g. `127.0.0.1:9092`.
    pub brokers: String,
    /// DLQ topics; an entry starting with `^` is a regex subscription (validated with the
    /// `regex` crate; new matching topics are picked up within 30 s).
    pub topics: Vec<String>,
    /// Consumer group id (default `redrive`).
    pub group_id: String,
    /// Most records per store transaction (records; default 500, 0 is treated as 1).
    pub batch_size: usize,
    /// How long to wait for a batch to fill before writing what there is, ms (default 200).
    pub linger_ms: u64,
    /// Extra librdkafka properties (SASL/SSL, ...), applied last.
    pub kafka_properties: Vec<(String, String)>,
    /// Retention backpressure to follow (`docs/retention.md`); `None` = never paused by it.
    pub backpressure: Option<Arc<crate::retention::Backpressure>>,
}

/// Default [`IngestConfig::brokers`].
pub fn default_brokers() -> String {
    "127.0.0.1:9092".to_string()
}

/// Default [`IngestConfig::group_id`].
pub fn default_group_id() -> String {
    "redrive".to_string()
}

/// Default [`IngestConfig::batch_size`], records: large enough to amortise a transaction's
/// fsync, small enough that a batch of stack-trace-laden records stays a few MiB.
pub fn default_batch_size() -> usize {
    500
}

/// Default [`IngestConfig::linger_ms`], ms: a trickle of dead letters shows up in the UI
/// within a fraction of a second.
pub fn default_linger_ms() -> u64 {
    200
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            brokers: default_brokers(),
            topics: Vec::new(),
            group_id: default_group_id(),
            batch_size: default_batch_size(),
            linger_ms: default_linger_ms(),
            kafka_properties: Vec::new(),
            backpressure: None,
        }
    }
}
