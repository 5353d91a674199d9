//! Wolverine (.NET, JasperFx) native Kafka dead letter queue: `exception-type`,
//! `exception-message`, `exception-stack` (truncated to 8192 chars), `failed-at`,
//! `original-destination` (an endpoint URI such as `kafka://topic/orders`),
//! `original-partition`, `original-offset`. All text.

use super::stack::choose_class;
use super::value::{has, Fields, Newest, NumEnc};
use crate::model::{Header, Normalized};

/// Wolverine's exception headers or `original-destination`.
pub(super) fn detect(headers: &[Header]) -> bool {
    [
        "exception-type",
        "exception-message",
        "exception-stack",
        "original-destination",
    ]
    .iter()
    .any(|n| has(headers, n))
}

/// Extracts a Wolverine dead letter. The source topic is the destination URI's topic name
/// when it is a `kafka://topic/<name>` URI, otherwise the URI as written. The error class
/// prefers the stack's first inner exception (` ---> `) over `exception-type`.
pub(super) fn extract(headers: &[Header]) -> Normalized {
    let mut f = Fields::new(headers, Newest::Last);
    let stack = f.text("exception-stack");
    let class = f.text("exception-type");
    let source_topic =
        f.text("original-destination")
            .map(|d| match d.strip_prefix("kafka://topic/") {
                Some(t) if !t.is_empty() => t.trim_end_matches('/').to_string(),
                _ => d,
            });
    Normalized {
        source_topic,
        source_partition: f.int32("original-partition", NumEnc::Text),
        source_offset: f.int("original-offset", NumEnc::Text),
        error_class: choose_class(None, stack.as_deref(), class),
        error_message: f.text("exception-message"),
        stack_trace: stack,
        failed_at_ms: f.time_ms("failed-at"),
        decode_warnings: std::mem::take(&mut f.warnings),
        ..Normalized::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::h;
    use super::*;

    #[test]
    fn wolverine_headers() {
        let hs = vec![
            h("exception-type", b"System.InvalidOperationException"),
            h("exception-message", b"Order 17 is closed"),
            h(
                "exception-stack",
                b"System.InvalidOperationException: Order 17 is closed\n   at Shop.OrderHandler.Handle(Order o)",
            ),
            h("failed-at", b"2024-06-10T06:13:20.1230000+00:00"),
            h("original-destination", b"kafka://topic/orders"),
            h("original-partition", b"2"),
            h("original-offset", b"512"),
        ];
        assert!(detect(&hs));
        let n = extract(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("orders"));
        assert_eq!(n.source_partition, Some(2));
        assert_eq!(n.source_offset, Some(512));
        assert_eq!(
            n.error_class.as_deref(),
            Some("System.InvalidOperationException")
        );
        assert_eq!(n.error_message.as_deref(), Some("Order 17 is closed"));
        assert_eq!(n.failed_at_ms, Some(1_718_000_000_123));
        assert!(n.decode_warnings.is_empty());
    }

    #[test]
    fn unparsable_failed_at_is_a_warning() {
        let hs = vec![
            h("exception-type", b"System.Exception"),
            h("failed-at", b"6/10/2024 6:13:20 AM"),
            h("original-destination", b"rabbitmq://queue/x"),
        ];
        let n = extract(&hs);
        assert_eq!(n.failed_at_ms, None);
        assert_eq!(n.source_topic.as_deref(), Some("rabbitmq://queue/x"));
        assert_eq!(n.decode_warnings.len(), 1);
    }
}
