//! Kafka Streams built-in dead letter queue (KIP-1034, Apache Kafka 4.1+,
//! `errors.dead.letter.queue.topic.name`): `__streams.errors.exception` (class name),
//! `.message` (may be null), `.stacktrace`, `.topic`, `.partition`, `.offset`. All text. The
//! original headers are copied and the record timestamp is the source record's.
//!
//! Verified against the captured corpus (Kafka Streams 4.2.2, `docs/conventions.md`): the
//! built-in DLQ first shipped in Apache Kafka **4.2.0** (4.1 has no such setting); the key,
//! value, headers and timestamp of the failed record are copied; the exception headers name the
//! exception the deserializer or the processor threw (no Streams wrapper); no consumer group
//! (the `application.id`) and no attempt count are written.
//!
//! bakdata's library shares the `__streams.errors.` prefix with other suffixes; it is tried
//! first (see [`super::bakdata`]), so this module claims whatever else carries the prefix.

use super::stack::user_exception;
use super::value::{has_prefix, Fields, Newest, NumEnc};
use crate::model::{Header, Normalized, RawRecord};

const P: &str = "__streams.errors.";

/// Any `__streams.errors.*` header (after bakdata's distinct ones were ruled out).
pub(super) fn detect(headers: &[Header]) -> bool {
    has_prefix(headers, P)
}

/// Extracts a KIP-1034 dead letter.
pub(super) fn extract(record: &RawRecord) -> Normalized {
    let mut f = Fields::new(&record.headers, Newest::Last);
    let name = |s: &str| format!("{P}{s}");
    let stack = f.text(&name("stacktrace"));
    let class = f.text(&name("exception"));
    let source_topic = f.text(&name("topic"));
    let message = f.text(&name("message"));
    let (error_class, error_message) = user_exception(None, stack.as_deref(), class, message);
    Normalized {
        source_partition: f.int32(&name("partition"), NumEnc::Text),
        source_offset: f.int(&name("offset"), NumEnc::Text),
        source_timestamp_ms: source_topic.as_ref().and(record.timestamp_ms),
        source_topic,
        error_class,
        error_message,
        stack_trace: stack,
        decode_warnings: std::mem::take(&mut f.warnings),
        ..Normalized::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::{h, null, record};
    use super::*;

    #[test]
    fn kip_1034_headers() {
        let r = record(
            vec![
                h("app-header", b"kept"),
                h("__streams.errors.exception", b"org.apache.kafka.common.errors.SerializationException"),
                null("__streams.errors.message"),
                h(
                    "__streams.errors.stacktrace",
                    b"org.apache.kafka.common.errors.SerializationException: Size of data received by IntegerDeserializer is not 4\n\tat a.B(B.java:1)\n",
                ),
                h("__streams.errors.topic", b"clicks"),
                h("__streams.errors.partition", b"1"),
                h("__streams.errors.offset", b"1234"),
            ],
            Some(1_718_000_000_123),
        );
        assert!(detect(&r.headers));
        let n = extract(&r);
        assert_eq!(n.source_topic.as_deref(), Some("clicks"));
        assert_eq!(n.source_partition, Some(1));
        // 4 ASCII digits: text, not a big-endian int32.
        assert_eq!(n.source_offset, Some(1234));
        assert_eq!(n.source_timestamp_ms, Some(1_718_000_000_123));
        assert_eq!(
            n.error_class.as_deref(),
            Some("org.apache.kafka.common.errors.SerializationException")
        );
        assert_eq!(
            n.error_message.as_deref(),
            Some("Size of data received by IntegerDeserializer is not 4")
        );
        assert!(n.decode_warnings.is_empty());
    }
}
