//! Ingest: an rdkafka consumer on the DLQ topics that stores every record and commits its
//! offset only after the store transaction holding it has committed.
//!
//! SKELETON: signatures are the contract other modules code against; bodies are being written.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// Ingest settings (the server maps its configuration onto this).
#[derive(Debug, Clone)]
pub struct IngestConfig {
    /// Bootstrap servers, e.g. `127.0.0.1:9092`.
    pub brokers: String,
    /// DLQ topics; an entry starting with `^` is a regex subscription.
    pub topics: Vec<String>,
    /// Consumer group id (default `redrive`).
    pub group_id: String,
    /// Most records per store transaction.
    pub batch_size: usize,
    /// How long to wait for a batch to fill before writing what there is, ms.
    pub linger_ms: u64,
    /// Extra librdkafka properties (SASL/SSL, ...), applied last.
    pub kafka_properties: Vec<(String, String)>,
}

/// Live state of ingest, read by `/readyz` and the metrics.
#[derive(Debug, Default)]
pub struct IngestStatus {
    _private: (),
}

/// Errors that stop ingest (bad configuration). Store outages do not: ingest waits them out.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("Kafka client error: {0}")]
    Kafka(String),
    #[error("bad DLQ topic pattern `{0}`: {1}")]
    BadPattern(String, String),
}

/// Runs ingest until `shutdown` is cancelled; then finishes the batch in hand, commits, returns.
pub async fn run(
    config: IngestConfig,
    store: Store,
    status: Arc<IngestStatus>,
    shutdown: CancellationToken,
) -> Result<(), IngestError> {
    let _ = (config, store, status, shutdown);
    todo!()
}
