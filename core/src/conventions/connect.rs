//! Kafka Connect sink dead letter queue with `errors.deadletterqueue.context.headers.enable=true`
//! (Apache Kafka 2.0+, `DeadLetterQueueReporter`): `__connect.errors.topic`, `.partition`,
//! `.offset`, `.connector.name`, `.task.id`, `.stage`, `.class.name`,
//! `.exception.class.name`, `.exception.message` (may be a null-valued header),
//! `.exception.stacktrace`. All values are decimal/UTF-8 text. Topic, partition and offset are
//! present only when a consumer record exists. Connect copies the original timestamp onto the
//! DLQ record, so the record timestamp is the source timestamp.
//!
//! Verified against the captured corpus (Kafka Connect 4.1.1, `docs/conventions.md`): the
//! converter's `DataException` wraps the deserializer's `SerializationException`, which wraps
//! the parser's exception; the user's exception is found through them (see
//! [`user_exception`]). No attempt count is written. The consumer group is not written either:
//! a sink task's group is `connect-<connector name>` unless the connector overrides
//! `consumer.override.group.id`, so it is derived from `.connector.name`.

use super::stack::user_exception;
use super::value::{has_prefix, Fields, Newest, NumEnc};
use crate::model::{Header, Normalized, RawRecord};

const P: &str = "__connect.errors.";

/// Any `__connect.errors.*` header.
pub(super) fn detect(headers: &[Header]) -> bool {
    has_prefix(headers, P)
}

/// Extracts a Connect dead letter. `.class.name` (the converter or transform that failed) and
/// `.stage` have no normalised field; they stay visible among the raw headers.
pub(super) fn extract(record: &RawRecord) -> Normalized {
    let mut f = Fields::new(&record.headers, Newest::Last);
    let name = |s: &str| format!("{P}{s}");
    let stack = f.text(&name("exception.stacktrace"));
    let class = f.text(&name("exception.class.name"));
    let source_topic = f.text(&name("topic"));
    // The message header is null when the exception had none.
    let message = f.text(&name("exception.message"));
    let (error_class, error_message) = user_exception(None, stack.as_deref(), class, message);
    Normalized {
        source_partition: f.int32(&name("partition"), NumEnc::Text),
        source_offset: f.int(&name("offset"), NumEnc::Text),
        source_timestamp_ms: source_topic.as_ref().and(record.timestamp_ms),
        source_topic,
        consumer_group: f
            .text(&name("connector.name"))
            .map(|c| format!("connect-{c}")),
        error_class,
        error_message,
        stack_trace: stack,
        decode_warnings: std::mem::take(&mut f.warnings),
        ..Normalized::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::{h, hex, null, record};
    use super::*;

    #[test]
    fn sink_context_headers() {
        let r = record(
            vec![
                h("__connect.errors.topic", b"inventory"),
                h("__connect.errors.partition", &hex("33")),
                h("__connect.errors.offset", &hex("3432")),
                h("__connect.errors.connector.name", b"jdbc-sink"),
                h("__connect.errors.task.id", b"0"),
                h("__connect.errors.stage", b"VALUE_CONVERTER"),
                h("__connect.errors.class.name", b"io.confluent.connect.avro.AvroConverter"),
                h(
                    "__connect.errors.exception.class.name",
                    b"org.apache.kafka.connect.errors.DataException",
                ),
                null("__connect.errors.exception.message"),
                h(
                    "__connect.errors.exception.stacktrace",
                    b"org.apache.kafka.connect.errors.DataException: Failed to deserialize data for topic inventory to Avro: \n\tat io.confluent.connect.avro.AvroConverter.toConnectData(AvroConverter.java:124)\nCaused by: org.apache.kafka.common.errors.SerializationException: Unknown magic byte!\n",
                ),
                h("trace-id", &[0xc3, 0x28]),
            ],
            Some(1_718_000_000_123),
        );
        assert!(detect(&r.headers));
        let n = extract(&r);
        assert_eq!(n.source_topic.as_deref(), Some("inventory"));
        assert_eq!(n.source_partition, Some(3));
        assert_eq!(n.source_offset, Some(42));
        assert_eq!(n.source_timestamp_ms, Some(1_718_000_000_123));
        assert_eq!(
            n.error_class.as_deref(),
            Some("org.apache.kafka.common.errors.SerializationException")
        );
        // The deserializer's message, not the converter wrapper's.
        assert_eq!(n.error_message.as_deref(), Some("Unknown magic byte!"));
        assert_eq!(n.consumer_group.as_deref(), Some("connect-jdbc-sink"));
        // A foreign non-UTF-8 header is not Connect's problem.
        assert!(n.decode_warnings.is_empty());
    }

    #[test]
    fn no_consumer_record() {
        let r = record(
            vec![
                h("__connect.errors.stage", b"TASK_PUT"),
                h(
                    "__connect.errors.exception.class.name",
                    b"java.sql.SQLException",
                ),
                h("__connect.errors.exception.message", b"duplicate key"),
            ],
            Some(5),
        );
        let n = extract(&r);
        assert_eq!(n.source_topic, None);
        assert_eq!(n.source_timestamp_ms, None);
        assert_eq!(n.error_class.as_deref(), Some("java.sql.SQLException"));
        assert_eq!(n.error_message.as_deref(), Some("duplicate key"));
    }
}
