//! The export's line format: one dead letter per line of JSON Lines, schema
//! `redrive.dead_letter.v1` (documented field by field in `docs/export.md`). Bytes are exact:
//! key, value and header values are standard base64 (RFC 4648 §4, with padding) of the
//! stored bytes, `null` for a null key, a tombstone or a null-valued header; headers keep
//! their order and duplicates.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::store::ExportRecord;

/// The `schema` value of every line.
pub const SCHEMA: &str = "redrive.dead_letter.v1";

/// One header of a line: its name and its value's bytes in base64 (`null` = null value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportHeader {
    pub name: String,
    pub value_b64: Option<String>,
}

/// One line of the export. Field order is the serialisation order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportLine {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// redrive's id of the dead letter.
    pub id: i64,
    pub dlq_topic: String,
    pub dlq_partition: i32,
    pub dlq_offset: i64,
    /// The DLQ record's timestamp, epoch ms.
    pub record_timestamp_ms: Option<i64>,
    /// The key's bytes, base64; `null` = null key.
    pub key_b64: Option<String>,
    /// The value's bytes, base64; `null` = tombstone.
    pub value_b64: Option<String>,
    /// Every header in record order.
    pub headers: Vec<ExportHeader>,
    /// `new`, `replay_pending`, `replayed`, `replay_failed`, `re_failed`, `deleted`.
    pub status: String,
    /// The header convention recognised (`docs/conventions.md`).
    pub convention: String,
    /// Error fingerprint: the error group.
    pub fingerprint: String,
    pub dead_lettered_at_ms: i64,
    pub ingested_at_ms: i64,
    pub replay_count: i32,
    pub source_topic: Option<String>,
    pub source_partition: Option<i32>,
    pub source_offset: Option<i64>,
    pub source_timestamp_ms: Option<i64>,
    pub consumer_group: Option<String>,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    pub stack_trace: Option<String>,
    pub retry_count: Option<i32>,
    pub message_id: Option<String>,
    pub failed_at_ms: Option<i64>,
    pub decode_warnings: Vec<String>,
    /// The dead letter's own labels, sorted.
    pub labels: Vec<String>,
    /// Its error group's labels, sorted.
    pub group_labels: Vec<String>,
    pub note: Option<String>,
    pub group_note: Option<String>,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl From<&ExportRecord> for ExportLine {
    fn from(r: &ExportRecord) -> ExportLine {
        let d = &r.dead_letter;
        let s = &d.summary;
        let n = &d.normalized;
        ExportLine {
            schema: SCHEMA.to_string(),
            id: s.id,
            dlq_topic: d.record.dlq_topic.clone(),
            dlq_partition: d.record.dlq_partition,
            dlq_offset: d.record.dlq_offset,
            record_timestamp_ms: d.record.timestamp_ms,
            key_b64: d.record.key.as_deref().map(b64),
            value_b64: d.record.value.as_deref().map(b64),
            headers: d
                .record
                .headers
                .iter()
                .map(|h| ExportHeader {
                    name: h.name.clone(),
                    value_b64: h.value.as_deref().map(b64),
                })
                .collect(),
            status: s.status.as_str().to_string(),
            convention: s.convention.as_str().to_string(),
            fingerprint: s.fingerprint.clone(),
            dead_lettered_at_ms: s.dead_lettered_at_ms,
            ingested_at_ms: d.ingested_at_ms,
            replay_count: d.replay_count,
            source_topic: n.source_topic.clone(),
            source_partition: n.source_partition,
            source_offset: n.source_offset,
            source_timestamp_ms: n.source_timestamp_ms,
            consumer_group: n.consumer_group.clone(),
            error_class: n.error_class.clone(),
            error_message: n.error_message.clone(),
            stack_trace: n.stack_trace.clone(),
            retry_count: n.retry_count,
            message_id: n.message_id.clone(),
            failed_at_ms: n.failed_at_ms,
            decode_warnings: n.decode_warnings.clone(),
            labels: s.labels.clone(),
            group_labels: s.group_labels.clone(),
            note: r.note.clone(),
            group_note: r.group_note.clone(),
        }
    }
}

/// `record` as one line of JSON Lines, newline included. Serialising these types cannot fail
/// (strings, numbers and lists only); should it ever, the line says so instead of panicking.
pub fn line(record: &ExportRecord) -> Vec<u8> {
    let mut out = serde_json::to_vec(&ExportLine::from(record)).unwrap_or_else(|e| {
        format!(
            "{{\"schema\":\"{SCHEMA}\",\"id\":{},\"error\":\"not serialisable: {}\"}}",
            record.dead_letter.summary.id,
            e.to_string().replace(['"', '\\'], "'")
        )
        .into_bytes()
    });
    out.push(b'\n');
    out
}
