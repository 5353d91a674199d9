//! Spring Cloud Stream Kafka binder (3.x, 4.x), DLQ enabled with `headerMode` other than
//! `embeddedHeaders`: `x-original-topic`, `x-original-partition` (4-byte BE int32),
//! `x-original-offset` and `x-original-timestamp` (8-byte BE int64, epoch ms),
//! `x-original-timestamp-type`, `x-exception-fqcn`, `x-exception-message` (absent if null),
//! `x-exception-stacktrace`. Binder 2.0 wrote only topic, message and stack trace. No cause
//! class header: the user's exception comes from the stack trace's chain ([`user_exception`]).
//!
//! Verified against the captured corpus (binder 5.0.4 on Spring Boot 4.0.7,
//! `docs/conventions.md`): the fqcn is `MessagingException` (retries exhausted) wrapping
//! `RetryException` and `MessageHandlingException` around the function's exception; the
//! message header is `handler wrapper message; function exception message`; no group and no
//! attempt count are written.

use super::stack::user_exception;
use super::value::{has, Fields, Newest, NumEnc};
use crate::model::{Header, Normalized, RawRecord};

/// `x-original-topic` or any `x-exception-*` header.
pub(super) fn detect(headers: &[Header]) -> bool {
    [
        "x-original-topic",
        "x-exception-fqcn",
        "x-exception-message",
        "x-exception-stacktrace",
    ]
    .iter()
    .any(|n| has(headers, n))
}

/// Extracts a Spring Cloud Stream dead letter. No group header is written; when the DLQ topic
/// has the binder's default name `error.<x-original-topic>.<group>`, the group is its tail.
pub(super) fn extract(record: &RawRecord) -> Normalized {
    let mut f = Fields::new(&record.headers, Newest::Last);
    let stack = f.text("x-exception-stacktrace");
    let fqcn = f.text("x-exception-fqcn");
    let message = f.text("x-exception-message");
    let (error_class, error_message) = user_exception(None, stack.as_deref(), fqcn, message);
    let source_topic = f.text("x-original-topic");
    let consumer_group = source_topic.as_deref().and_then(|t| {
        record
            .dlq_topic
            .strip_prefix("error.")?
            .strip_prefix(t)?
            .strip_prefix('.')
            .filter(|g| !g.is_empty())
            .map(str::to_string)
    });
    Normalized {
        source_topic,
        consumer_group,
        source_partition: f.int32("x-original-partition", NumEnc::Binary),
        source_offset: f.int("x-original-offset", NumEnc::Binary),
        source_timestamp_ms: f.int("x-original-timestamp", NumEnc::Binary),
        error_class,
        error_message,
        stack_trace: stack,
        decode_warnings: std::mem::take(&mut f.warnings),
        ..Normalized::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::{h, hex, record};
    use super::*;

    #[test]
    fn binder_headers() {
        let hs = vec![
            h("x-original-topic", b"orders"),
            h("x-original-partition", &hex("00000003")),
            h("x-original-offset", &hex("000000000000002a")),
            h("x-original-timestamp", &hex("0000019000c79c7b")),
            h("x-original-timestamp-type", b"CreateTime"),
            h("x-exception-fqcn", b"org.springframework.messaging.MessagingException"),
            h("x-exception-message", b"Exception thrown while invoking handler"),
            h(
                "x-exception-stacktrace",
                b"org.springframework.messaging.MessagingException: Exception thrown\n\tat a.B(B.java:1)\nCaused by: java.lang.NumberFormatException: For input string: \"x\"\n",
            ),
        ];
        assert!(detect(&hs));
        let mut r = record(hs, None);
        r.dlq_topic = "error.orders.billing".into();
        let n = extract(&r);
        assert_eq!(n.consumer_group.as_deref(), Some("billing"));
        assert_eq!(n.source_topic.as_deref(), Some("orders"));
        assert_eq!(n.source_partition, Some(3));
        assert_eq!(n.source_offset, Some(42));
        assert_eq!(n.source_timestamp_ms, Some(1_718_000_000_123));
        assert_eq!(
            n.error_class.as_deref(),
            Some("java.lang.NumberFormatException")
        );
        // The message of the exception reported (the user's), not the wrapper's.
        assert_eq!(n.error_message.as_deref(), Some("For input string: \"x\""));
        assert!(n.decode_warnings.is_empty());
    }

    #[test]
    fn binder_2_0_minimal_set() {
        let hs = vec![
            h("x-original-topic", b"orders"),
            h("x-exception-message", b"boom"),
            h(
                "x-exception-stacktrace",
                b"java.lang.RuntimeException: boom\n",
            ),
        ];
        let n = extract(&record(hs, None));
        // A DLQ not named `error.<topic>.<group>` says nothing about the group.
        assert_eq!(n.consumer_group, None);
        assert_eq!(n.error_class.as_deref(), Some("java.lang.RuntimeException"));
        assert_eq!(n.error_message.as_deref(), Some("boom"));
        assert!(!detect(&[h("x-other", b"1")]));
    }
}
