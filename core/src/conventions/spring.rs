//! Spring for Apache Kafka.
//!
//! - `DeadLetterPublishingRecoverer` (DLPR, `KafkaHeaders.DLT_*`): `kafka_dlt-original-topic`,
//!   `-original-partition` (4-byte BE int32), `-original-offset` and `-original-timestamp`
//!   (8-byte BE int64, epoch ms), `-original-timestamp-type`, `-original-consumer-group` (2.8+,
//!   only when the exception carried a group id), `kafka_dlt-exception-fqcn`,
//!   `-exception-cause-fqcn` (2.8+), `-exception-message` (`msg + "; " + rootCauseMsg`),
//!   `-exception-stacktrace`, and `kafka_dlt-key-exception-*` (2.7+) for key deserialization.
//! - `@RetryableTopic` (DeadLetterPublishingRecovererFactory): the same set without `dlt-`
//!   (`kafka_original-*`, `kafka_exception-*`, `kafka_key-exception-*`), plus
//!   `retry_topic-attempts` (4-byte BE int, 1 byte in older releases) and
//!   `retry_topic-original-timestamp` / `-backoff-timestamp` (Java `BigInteger.toByteArray()`).
//!
//! DLPR appends the `original-*` set on every hop (`appendOriginalHeaders=true`), so the last
//! occurrence is the latest hop. The key-exception headers are read only when the value ones
//! are missing (a key deserialization failure).

use super::stack::{choose_class, first_line_message};
use super::value::{has_prefix, Fields, Newest, NumEnc};
use crate::model::{Header, Normalized};

/// `kafka_dlt-*`: a DLPR dead letter.
pub(super) fn detect_dlt(headers: &[Header]) -> bool {
    has_prefix(headers, "kafka_dlt-")
}

/// `kafka_original-*`, `kafka_exception-*`, `kafka_key-exception-*` or `retry_topic-*`:
/// a `@RetryableTopic` dead letter (or a retry-topic record).
pub(super) fn detect_retryable(headers: &[Header]) -> bool {
    [
        "kafka_original-",
        "kafka_exception-",
        "kafka_key-exception-",
        "retry_topic-",
    ]
    .iter()
    .any(|p| has_prefix(headers, p))
}

/// Extracts a DLPR dead letter.
pub(super) fn extract_dlt(headers: &[Header]) -> Normalized {
    extract(
        headers,
        &Names::new("kafka_dlt-original-", "kafka_dlt-", "kafka_dlt-key-"),
    )
}

/// Extracts a `@RetryableTopic` dead letter.
pub(super) fn extract_retryable(headers: &[Header]) -> Normalized {
    extract(
        headers,
        &Names::new("kafka_original-", "kafka_", "kafka_key-"),
    )
}

/// Header names of one Spring flavour.
struct Names {
    original: &'static str,
    exception: &'static str,
    key_exception: &'static str,
}

impl Names {
    fn new(original: &'static str, exception: &'static str, key_exception: &'static str) -> Self {
        Names {
            original,
            exception,
            key_exception,
        }
    }
    fn orig(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.original)
    }
    fn exc(&self, suffix: &str) -> String {
        format!("{}exception-{suffix}", self.exception)
    }
    fn key_exc(&self, suffix: &str) -> String {
        format!("{}exception-{suffix}", self.key_exception)
    }
}

fn extract(headers: &[Header], n: &Names) -> Normalized {
    let mut f = Fields::new(headers, Newest::Last);
    // Prefer the value-exception set; fall back to the key-exception set as a whole so message
    // and stack trace describe the same exception.
    let (fqcn, cause, message, stack) = if ["fqcn", "message", "stacktrace"]
        .iter()
        .any(|s| f.has(&n.exc(s)))
    {
        (
            f.text(&n.exc("fqcn")),
            f.text(&n.exc("cause-fqcn")),
            f.text(&n.exc("message")),
            f.text(&n.exc("stacktrace")),
        )
    } else {
        (
            f.text(&n.key_exc("fqcn")),
            f.text(&n.key_exc("cause-fqcn")),
            f.text(&n.key_exc("message")),
            f.text(&n.key_exc("stacktrace")),
        )
    };
    let source_timestamp_ms = f
        .int(&n.orig("timestamp"), NumEnc::Binary)
        .or_else(|| f.bigint("retry_topic-original-timestamp"));
    Normalized {
        source_topic: f.text(&n.orig("topic")),
        source_partition: f.int32(&n.orig("partition"), NumEnc::Binary),
        source_offset: f.int(&n.orig("offset"), NumEnc::Binary),
        source_timestamp_ms,
        // Some applications mix the two flavours' group header; take either.
        consumer_group: f.text_any(&[
            &n.orig("consumer-group"),
            "kafka_dlt-original-consumer-group",
            "kafka_original-consumer-group",
        ]),
        error_class: choose_class(cause, stack.as_deref(), fqcn),
        error_message: message.or_else(|| stack.as_deref().and_then(first_line_message)),
        stack_trace: stack,
        // `kafka_deliveryAttempt` is the container's own counter (when enabled).
        retry_count: if f.has("retry_topic-attempts") {
            f.attempts("retry_topic-attempts")
        } else {
            f.int32("kafka_deliveryAttempt", NumEnc::Binary)
        },
        message_id: None,
        failed_at_ms: None,
        decode_warnings: std::mem::take(&mut f.warnings),
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::{h, hex};
    use super::*;

    fn dlpr() -> Vec<Header> {
        vec![
            h("kafka_dlt-original-topic", b"payments"),
            h("kafka_dlt-original-partition", &hex("00000003")),
            h("kafka_dlt-original-offset", &hex("000000000000002a")),
            h("kafka_dlt-original-timestamp", &hex("0000019000c79c7b")),
            h("kafka_dlt-original-timestamp-type", b"CreateTime"),
            h("kafka_dlt-original-consumer-group", b"payments-service"),
            h(
                "kafka_dlt-exception-fqcn",
                b"org.springframework.kafka.listener.ListenerExecutionFailedException",
            ),
            h("kafka_dlt-exception-cause-fqcn", b"java.lang.IllegalStateException"),
            h(
                "kafka_dlt-exception-message",
                b"Listener method threw exception; Payment 4711 declined",
            ),
            h(
                "kafka_dlt-exception-stacktrace",
                b"org.springframework.kafka.listener.ListenerExecutionFailedException: Listener method threw exception\n\tat x.Y(Y.java:1)\nCaused by: java.lang.IllegalStateException: Payment 4711 declined\n",
            ),
        ]
    }

    #[test]
    fn dlpr_binary_layout() {
        let hs = dlpr();
        assert!(detect_dlt(&hs));
        assert!(!detect_retryable(&hs));
        let n = extract_dlt(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("payments"));
        assert_eq!(n.source_partition, Some(3));
        assert_eq!(n.source_offset, Some(42));
        assert_eq!(n.source_timestamp_ms, Some(1_718_000_000_123));
        assert_eq!(n.consumer_group.as_deref(), Some("payments-service"));
        assert_eq!(
            n.error_class.as_deref(),
            Some("java.lang.IllegalStateException")
        );
        assert_eq!(
            n.error_message.as_deref(),
            Some("Listener method threw exception; Payment 4711 declined")
        );
        assert!(n.stack_trace.unwrap().contains("Caused by:"));
        assert_eq!(n.retry_count, None);
        assert!(n.decode_warnings.is_empty());
    }

    #[test]
    fn last_hop_wins() {
        let mut hs = dlpr();
        hs.push(h("kafka_dlt-original-topic", b"payments-dlt"));
        hs.push(h("kafka_dlt-original-partition", &hex("00000000")));
        hs.push(h("kafka_dlt-original-offset", &7i64.to_be_bytes()));
        let n = extract_dlt(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("payments-dlt"));
        assert_eq!(n.source_partition, Some(0));
        assert_eq!(n.source_offset, Some(7));
    }

    #[test]
    fn cause_from_stack_when_no_cause_header() {
        let hs: Vec<Header> = dlpr()
            .into_iter()
            .filter(|x| x.name != "kafka_dlt-exception-cause-fqcn")
            .collect();
        let n = extract_dlt(&hs);
        assert_eq!(
            n.error_class.as_deref(),
            Some("java.lang.IllegalStateException")
        );
    }

    #[test]
    fn key_deserialization_failure() {
        let hs = vec![
            h("kafka_dlt-original-topic", b"orders"),
            h(
                "kafka_dlt-key-exception-fqcn",
                b"org.springframework.kafka.support.serializer.DeserializationException",
            ),
            h(
                "kafka_dlt-key-exception-message",
                b"failed to deserialize; bad key",
            ),
        ];
        let n = extract_dlt(&hs);
        assert_eq!(
            n.error_class.as_deref(),
            Some("org.springframework.kafka.support.serializer.DeserializationException")
        );
        assert_eq!(
            n.error_message.as_deref(),
            Some("failed to deserialize; bad key")
        );
    }

    #[test]
    fn retryable_topic() {
        let hs = vec![
            h("kafka_original-topic", b"orders"),
            h("kafka_original-partition", &hex("00000003")),
            h("kafka_original-offset", &hex("000000000000002a")),
            h("kafka_exception-fqcn", b"java.lang.RuntimeException"),
            h("kafka_exception-message", b"boom"),
            h("retry_topic-attempts", &hex("00000002")),
            h("retry_topic-original-timestamp", &hex("019000c79c7b")),
            h("retry_topic-backoff-timestamp", &hex("019000c7a433")),
        ];
        assert!(detect_retryable(&hs));
        assert!(!detect_dlt(&hs));
        let n = extract_retryable(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("orders"));
        assert_eq!(n.source_partition, Some(3));
        assert_eq!(n.source_offset, Some(42));
        // No `kafka_original-timestamp`: the BigInteger retry timestamp stands in.
        assert_eq!(n.source_timestamp_ms, Some(1_718_000_000_123));
        assert_eq!(n.error_class.as_deref(), Some("java.lang.RuntimeException"));
        assert_eq!(n.error_message.as_deref(), Some("boom"));
        assert_eq!(n.retry_count, Some(2));
        assert!(n.decode_warnings.is_empty());
    }

    #[test]
    fn legacy_one_byte_attempts() {
        let hs = vec![
            h("kafka_original-topic", b"orders"),
            h("retry_topic-attempts", &hex("02")),
        ];
        assert_eq!(extract_retryable(&hs).retry_count, Some(2));
    }

    #[test]
    fn malformed_binary_is_a_warning() {
        let hs = vec![
            h("kafka_dlt-original-topic", &[0xc3, 0x28]),
            h("kafka_dlt-original-partition", &[0, 0, 3]),
            h("kafka_dlt-original-offset", b"42"),
        ];
        let n = extract_dlt(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("\\xc3("));
        assert_eq!(n.source_partition, None);
        // Decimal text where binary was expected is still understood.
        assert_eq!(n.source_offset, Some(42));
        assert_eq!(n.decode_warnings.len(), 2, "{:?}", n.decode_warnings);
    }
}
