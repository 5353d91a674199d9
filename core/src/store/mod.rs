//! The store: dead letters in SQLite (embedded default, one file, WAL) or PostgreSQL.
//! All SQL of redrive lives under this module; dialect differences are handled here only.
//!
//! SKELETON: signatures are the contract other modules code against; bodies are being written.

use crate::filter::ListQuery;
use crate::model::{DeadLetter, DeadLetterSummary, ErrorGroup, NewDeadLetter, Page};
use crate::Filter;

/// Errors from the store. `Unavailable` means "try again later" (connection refused, pool
/// timed out, database locked); ingest pauses and retries on it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported database URL `{0}`: use sqlite:PATH or postgres://...")]
    BadUrl(String),
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    #[error("migration failed: {0}")]
    Migrate(String),
    #[error("database error: {0}")]
    Database(String),
    #[error("stored data could not be read: {0}")]
    Corrupt(String),
}

/// Handle to the store; cheap to clone (it wraps a connection pool).
#[derive(Clone, Debug)]
pub struct Store {
    _private: (),
}

impl Store {
    /// Connects to `url`: `sqlite:PATH` / `sqlite://PATH` (file created if missing, WAL mode)
    /// or `postgres://...` / `postgresql://...`. Does not run migrations.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        let _ = url;
        todo!()
    }

    /// Applies the migrations of this store's database (idempotent).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        todo!()
    }

    /// "sqlite" or "postgres".
    pub fn backend(&self) -> &'static str {
        todo!()
    }

    /// Stores a batch in ONE transaction, ignoring records whose (dlq_topic, dlq_partition,
    /// dlq_offset) is already stored. Returns how many rows were new. When this returns Ok,
    /// the batch is durable: ingest may commit the Kafka offsets.
    pub async fn insert_batch(&self, batch: &[NewDeadLetter]) -> Result<u64, StoreError> {
        let _ = batch;
        todo!()
    }

    /// One page of dead letters matching `query.filter`, ordered by
    /// (dead_lettered_at DESC, id DESC), starting after `query.cursor` (keyset, never OFFSET).
    pub async fn list(&self, query: &ListQuery) -> Result<Page<DeadLetterSummary>, StoreError> {
        let _ = query;
        todo!()
    }

    /// How many dead letters match `filter`.
    pub async fn count(&self, filter: &Filter) -> Result<i64, StoreError> {
        let _ = filter;
        todo!()
    }

    /// The whole dead letter, or `None` if there is no such id.
    pub async fn get(&self, id: i64) -> Result<Option<DeadLetter>, StoreError> {
        let _ = id;
        todo!()
    }

    /// Error groups of the dead letters matching `filter`, largest first, at most `limit`.
    pub async fn error_groups(
        &self,
        filter: &Filter,
        limit: u32,
    ) -> Result<Vec<ErrorGroup>, StoreError> {
        let _ = (filter, limit);
        todo!()
    }

    /// Distinct values for the filter bar's choices: (source topics, DLQ topics, consumer groups).
    pub async fn facets(&self) -> Result<Facets, StoreError> {
        todo!()
    }

    /// Cheap round trip, for `/readyz`.
    pub async fn ping(&self) -> Result<(), StoreError> {
        todo!()
    }
}

/// Distinct values present in the store, for the filter bar's drop-downs.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Facets {
    pub source_topics: Vec<String>,
    pub dlq_topics: Vec<String>,
    pub consumer_groups: Vec<String>,
}
