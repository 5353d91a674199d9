//! Redpanda Connect (formerly Benthos) `fallback` output: a failed message carries
//! `fallback_error` (text). It reaches Kafka as a header only when the output's metadata
//! include patterns forward it; if they also forward the kafka input's metadata
//! (`kafka_topic`, `kafka_partition`, `kafka_offset`, `kafka_timestamp_ms`, all text), those
//! give the source coordinates.

use super::value::{has, Fields, Newest, NumEnc};
use crate::model::{Header, Normalized};

/// A `fallback_error` header.
pub(super) fn detect(headers: &[Header]) -> bool {
    has(headers, "fallback_error")
}

/// Extracts a Redpanda Connect fallback record.
pub(super) fn extract(headers: &[Header]) -> Normalized {
    let mut f = Fields::new(headers, Newest::Last);
    Normalized {
        source_topic: f.text("kafka_topic"),
        source_partition: f.int32("kafka_partition", NumEnc::Text),
        source_offset: f.int("kafka_offset", NumEnc::Text),
        source_timestamp_ms: f.int("kafka_timestamp_ms", NumEnc::Text),
        error_message: f.text("fallback_error"),
        decode_warnings: std::mem::take(&mut f.warnings),
        ..Normalized::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::h;
    use super::*;

    #[test]
    fn fallback_error() {
        let hs = vec![h(
            "fallback_error",
            b"http request to https://x returned 503",
        )];
        assert!(detect(&hs));
        let n = extract(&hs);
        assert_eq!(
            n.error_message.as_deref(),
            Some("http request to https://x returned 503")
        );
        assert_eq!(n.source_topic, None);
    }

    #[test]
    fn forwarded_kafka_metadata() {
        let hs = vec![
            h("fallback_error", b"boom"),
            h("kafka_topic", b"in"),
            h("kafka_partition", b"1"),
            h("kafka_offset", b"77"),
            h("kafka_timestamp_ms", b"1718000000123"),
        ];
        let n = extract(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("in"));
        assert_eq!(n.source_partition, Some(1));
        assert_eq!(n.source_offset, Some(77));
        assert_eq!(n.source_timestamp_ms, Some(1_718_000_000_123));
    }
}
