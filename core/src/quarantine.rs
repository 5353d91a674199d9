//! Quarantine: records the store refused even in their reduced form (see `docs/limits.md`).
//!
//! Ingest never lets one record stop a partition. When the database refuses a batch for a
//! reason that is about the data (a value too long for an index, an encoding, a constraint),
//! the batch is split, the other records are stored, and the offender is stored in reduced
//! form; if even that is refused it lands here, with its coordinates, the error and (when the
//! database can hold it) the raw record, and only then is its offset committed. A quarantined
//! record is counted in `/metrics` (`redrive_quarantined_records`), listed at `/quarantine`
//! and `GET /api/v1/quarantine`, and stored again by `redrive quarantine retry` (e.g. after
//! an upgrade that fixes the cause), which deletes its quarantine row once it is stored.

use serde::{Deserialize, Serialize};

/// One quarantined record, without its payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantinedRecord {
    /// Quarantine row id (not a dead letter id).
    pub id: i64,
    pub dlq_topic: String,
    pub dlq_partition: i32,
    pub dlq_offset: i64,
    /// The DLQ record's timestamp, epoch ms, if it had one.
    pub record_timestamp_ms: Option<i64>,
    /// When it was first quarantined, epoch ms.
    pub quarantined_at_ms: i64,
    /// Why the store refused it (the full form's and the reduced form's errors; printable
    /// ASCII, at most [`MAX_ERROR_BYTES`]).
    pub error: String,
    /// Size of key + value + header names and values, bytes.
    pub record_bytes: i64,
    /// True when the raw record itself is kept (it can then be retried); false when even that
    /// was refused: read it from Kafka at its coordinates while retention allows.
    pub payload_kept: bool,
    /// Store attempts so far (1 at quarantine; each retry adds one).
    pub attempts: i32,
    /// When it was last tried, epoch ms.
    pub last_attempt_at_ms: i64,
}

/// Longest stored quarantine error, bytes.
pub const MAX_ERROR_BYTES: usize = 4096;

/// Most rows one quarantine list returns.
pub const MAX_LIST_LIMIT: u32 = 500;

/// What one `retry` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryReport {
    /// Quarantined records tried.
    pub tried: u64,
    /// Stored as dead letters in full (their quarantine rows are deleted).
    pub stored: u64,
    /// Stored in reduced form (their quarantine rows are deleted).
    pub stored_reduced: u64,
    /// Already stored as dead letters (their quarantine rows are deleted).
    pub already_stored: u64,
    /// Still refused: left in quarantine with the new error and one more attempt.
    pub still_quarantined: u64,
    /// Without a kept payload, so they cannot be retried from the store.
    pub without_payload: u64,
}
