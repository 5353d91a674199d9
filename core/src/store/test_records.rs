//! The dead letter the store's own tests store when its fields do not matter: topic
//! `orders.DLT`, partition 0, source topic `orders`, value `v`, dead-lettered and ingested
//! at 1,000 ms, no headers.

use crate::model::{Convention, NewDeadLetter, Normalized, RawRecord};

/// That dead letter at DLQ offset `offset`, with key `key` (`None`: a null key).
pub(crate) fn dead_letter(offset: i64, key: Option<String>) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: "orders.DLT".into(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(1_000),
            key: key.map(String::into_bytes),
            value: Some(b"v".to_vec()),
            headers: vec![],
        },
        convention: Convention::Unknown,
        fingerprint: "f".into(),
        normalized: Normalized {
            source_topic: Some("orders".into()),
            ..Normalized::default()
        },
        dead_lettered_at_ms: 1_000,
        ingested_at_ms: 1_000,
    }
}
