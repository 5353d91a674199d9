//! One archived dead letter: one line of `dead-letters.jsonl.gz` (format
//! `redrive-archive/1`, see `docs/retention.md`). Bytes are base64 (standard alphabet, with
//! padding); `null` stays distinct from empty.

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::actions::HistoryEvent;
use crate::model::{Convention, Header, NewDeadLetter, Normalized, RawRecord};
use crate::store::{ArchiveRow, RestoredDeadLetter};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A header: name, and value as base64 (`null` for a null-valued header).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedHeader {
    pub name: String,
    pub value: Option<String>,
}

/// One line of the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedDeadLetter {
    /// The dead letter's id in the store it came from (not reused on restore).
    pub id: i64,
    pub dlq_topic: String,
    pub dlq_partition: i32,
    pub dlq_offset: i64,
    /// The DLQ record's timestamp, epoch ms.
    pub timestamp_ms: Option<i64>,
    /// base64; `null` is a null key.
    pub key: Option<String>,
    /// base64; `null` is a tombstone.
    pub value: Option<String>,
    /// In record order, duplicates kept.
    pub headers: Vec<ArchivedHeader>,
    pub status: String,
    pub status_before: Option<String>,
    pub convention: String,
    pub fingerprint: String,
    pub dead_lettered_at_ms: i64,
    pub ingested_at_ms: i64,
    pub replay_count: i32,
    pub normalized: Normalized,
    pub history: Vec<HistoryEvent>,
}

fn decode(what: &str, s: &Option<String>) -> Result<Option<Vec<u8>>, String> {
    s.as_ref()
        .map(|v| B64.decode(v.as_bytes()))
        .transpose()
        .map_err(|e| format!("{what} is not base64: {e}"))
}

impl ArchivedDeadLetter {
    /// The archive line of a stored dead letter.
    pub fn from_row(r: &ArchiveRow) -> ArchivedDeadLetter {
        let d = &r.dead_letter;
        let rec = &d.record;
        ArchivedDeadLetter {
            id: d.summary.id,
            dlq_topic: rec.dlq_topic.clone(),
            dlq_partition: rec.dlq_partition,
            dlq_offset: rec.dlq_offset,
            timestamp_ms: rec.timestamp_ms,
            key: rec.key.as_ref().map(|k| B64.encode(k)),
            value: rec.value.as_ref().map(|v| B64.encode(v)),
            headers: rec
                .headers
                .iter()
                .map(|h| ArchivedHeader {
                    name: h.name.clone(),
                    value: h.value.as_ref().map(|v| B64.encode(v)),
                })
                .collect(),
            status: d.summary.status.as_str().to_string(),
            status_before: r.status_before.clone(),
            convention: d.summary.convention.as_str().to_string(),
            fingerprint: d.summary.fingerprint.clone(),
            dead_lettered_at_ms: d.summary.dead_lettered_at_ms,
            ingested_at_ms: d.ingested_at_ms,
            replay_count: d.replay_count,
            normalized: d.normalized.clone(),
            history: r.history.clone(),
        }
    }

    /// What the store needs to hold it again.
    ///
    /// Errors: a message naming the field that is not base64 or the unknown status.
    pub fn into_restored(self) -> Result<RestoredDeadLetter, String> {
        if crate::model::Status::parse(&self.status).is_none() {
            return Err(format!("unknown status `{}`", self.status));
        }
        let headers = self
            .headers
            .iter()
            .map(|h| {
                Ok(Header {
                    name: h.name.clone(),
                    value: decode(&format!("header `{}`", h.name), &h.value)?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let record = RawRecord {
            key: decode("key", &self.key)?,
            value: decode("value", &self.value)?,
            dlq_topic: self.dlq_topic,
            dlq_partition: self.dlq_partition,
            dlq_offset: self.dlq_offset,
            timestamp_ms: self.timestamp_ms,
            headers,
        };
        Ok(RestoredDeadLetter {
            new: NewDeadLetter {
                record,
                convention: Convention::parse(&self.convention),
                normalized: self.normalized,
                fingerprint: self.fingerprint,
                dead_lettered_at_ms: self.dead_lettered_at_ms,
                ingested_at_ms: self.ingested_at_ms,
            },
            status: self.status,
            status_before: self.status_before,
            replay_count: self.replay_count,
            history: self.history,
        })
    }
}
