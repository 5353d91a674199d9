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
//! Verified against the captured corpus (`docs/conventions.md`, Spring Kafka 4.1):
//! - DLPR appends the `original-*` set on every hop (a DLT consumer that fails again), while the
//!   exception headers are replaced: the **first** occurrence of `original-*` is the record's
//!   first source, the last (only) exception set describes the latest failure. The
//!   `@RetryableTopic` path writes `kafka_original-*` once, on the first hop, and the group as
//!   `kafka_dlt-original-consumer-group`.
//! - The fqcn is a wrapper (`ListenerExecutionFailedException`, or `DeserializationException`
//!   for deserialization failures, where the cause-fqcn names the wrapper again): the user's
//!   exception comes from [`user_exception`] (cause-fqcn, else the stack trace's chain).
//! - The message header is `wrapper message + "; " + cause message` (the *direct* cause).
//! - A key deserialization failure writes `kafka_dlt-key-exception-fqcn/-message/-stacktrace`
//!   but the *value* name `kafka_dlt-exception-cause-fqcn`; the key set is read when the value
//!   fqcn, message and stack trace are absent.
//! - Retry count (retries after the first failure, see `docs/conventions.md`): the container's
//!   `kafka_deliveryAttempt` (`deliveryAttemptHeader=true`) is the number of the failed
//!   delivery, so retries = value - 1; `retry_topic-attempts` is repeated per hop and its last
//!   value is the number of the attempt that *would* come next, so retries = last - 2.
//!   `DefaultErrorHandler` alone writes no count.

use super::stack::{is_wrapper, user_exception};
use super::value::{has_prefix, Fields, Newest, NumEnc};
use crate::model::{Header, Normalized};

/// `kafka_dlt-*`: a DLPR dead letter. `kafka_dlt-original-consumer-group` alone does not count:
/// the `@RetryableTopic` path writes its group under that name too (captured).
pub(super) fn detect_dlt(headers: &[Header]) -> bool {
    headers
        .iter()
        .any(|h| h.name.starts_with("kafka_dlt-") && h.name != "kafka_dlt-original-consumer-group")
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
    // The first source: the oldest `original-*` occurrence.
    let mut o = Fields::new(headers, Newest::First);
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
    let source_timestamp_ms = o
        .int(&n.orig("timestamp"), NumEnc::Binary)
        .or_else(|| o.bigint("retry_topic-original-timestamp"));
    // `wrapper message; cause message`: without a trace, the cause's part is the user's message.
    let message = match (&fqcn, &cause, message) {
        (Some(w), Some(_), Some(m)) if is_wrapper(w) => {
            Some(m.split_once("; ").map_or(m.clone(), |(_, c)| c.to_string()))
        }
        (_, _, m) => m,
    };
    let (error_class, error_message) = user_exception(cause, stack.as_deref(), fqcn, message);
    let retry_count = if f.has("retry_topic-attempts") {
        f.attempts("retry_topic-attempts")
            .map(|next| (next - 2).max(0))
    } else {
        f.int32("kafka_deliveryAttempt", NumEnc::Binary)
            .map(|failed| (failed - 1).max(0))
    };
    let mut out = Normalized {
        source_topic: o.text(&n.orig("topic")),
        source_partition: o.int32(&n.orig("partition"), NumEnc::Binary),
        source_offset: o.int(&n.orig("offset"), NumEnc::Binary),
        source_timestamp_ms,
        // The retry-topic path writes the group under the DLPR name; take either flavour's.
        consumer_group: o.text_any(&[
            &n.orig("consumer-group"),
            "kafka_dlt-original-consumer-group",
            "kafka_original-consumer-group",
        ]),
        error_class,
        error_message,
        stack_trace: stack,
        retry_count,
        message_id: None,
        failed_at_ms: None,
        decode_warnings: std::mem::take(&mut f.warnings),
    };
    out.decode_warnings.append(&mut o.warnings);
    out
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
        // The cause's message, as the trace prints it (not the wrapper's `...; ...` header).
        assert_eq!(n.error_message.as_deref(), Some("Payment 4711 declined"));
        assert!(n.stack_trace.unwrap().contains("Caused by:"));
        assert_eq!(n.retry_count, None);
        assert!(n.decode_warnings.is_empty());
    }

    /// A DLT consumer that fails again appends a second `original-*` set (captured:
    /// `testkit/corpus/spring-kafka/dlt-reprocessed-fails-again.json`); the first is the source.
    #[test]
    fn first_hop_is_the_source() {
        let mut hs = dlpr();
        hs.push(h("kafka_dlt-original-topic", b"payments-dlt"));
        hs.push(h("kafka_dlt-original-partition", &hex("00000000")));
        hs.push(h("kafka_dlt-original-offset", &7i64.to_be_bytes()));
        hs.push(h(
            "kafka_dlt-original-consumer-group",
            b"payments-dlt-replayer",
        ));
        let n = extract_dlt(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("payments"));
        assert_eq!(n.source_partition, Some(3));
        assert_eq!(n.source_offset, Some(42));
        assert_eq!(n.consumer_group.as_deref(), Some("payments-service"));
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
        // `retry_topic-attempts` = 2 is the attempt that comes next: 1 failed, 0 retries.
        assert_eq!(n.retry_count, Some(0));
        assert!(n.decode_warnings.is_empty());
    }

    #[test]
    fn legacy_one_byte_attempts() {
        let hs = vec![
            h("kafka_original-topic", b"orders"),
            h("retry_topic-attempts", &hex("04")),
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
