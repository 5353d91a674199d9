//! SmallRye Reactive Messaging Kafka connector / Quarkus, `failure-strategy=dead-letter-queue`
//! (`KafkaDeadLetterQueue`): `dead-letter-exception-class-name`, `dead-letter-reason` (the
//! message, or `toString()` when there is none), `dead-letter-cause-class-name` and
//! `dead-letter-cause` (only when a cause exists), `dead-letter-topic`, `dead-letter-partition`,
//! `dead-letter-offset`. Deserialization failures add `deserialization-failure-*`; delayed
//! retry adds `delayed-retry-count`, `delayed-retry-original-timestamp`, ... All text; no stack
//! trace.
//!
//! SmallRye writes its new headers *first* and copies the record's old ones after, so of
//! repeated names the first occurrence is the newest.

use super::stack::choose_class;
use super::value::{has_prefix, Fields, Newest, NumEnc};
use crate::model::{Header, Normalized};

/// Any `dead-letter-*` or `delayed-retry-*` header.
pub(super) fn detect(headers: &[Header]) -> bool {
    has_prefix(headers, "dead-letter-") || has_prefix(headers, "delayed-retry-")
}

/// Extracts a SmallRye dead letter (or delayed-retry record). The cause class is preferred;
/// the deserialization-failure headers fill in what the DLQ headers lack.
pub(super) fn extract(headers: &[Header]) -> Normalized {
    let mut f = Fields::new(headers, Newest::First);
    let cause = f.text("dead-letter-cause-class-name");
    let class = f.text("dead-letter-exception-class-name");
    Normalized {
        source_topic: f.text_any(&["dead-letter-topic", "deserialization-failure-topic"]),
        source_partition: f.int32("dead-letter-partition", NumEnc::Text),
        source_offset: f.int("dead-letter-offset", NumEnc::Text),
        source_timestamp_ms: f.int("delayed-retry-original-timestamp", NumEnc::Text),
        error_class: choose_class(cause, None, class),
        error_message: f.text_any(&[
            "dead-letter-reason",
            "delayed-retry-reason",
            "deserialization-failure-reason",
        ]),
        retry_count: f.int32("delayed-retry-count", NumEnc::Text),
        decode_warnings: std::mem::take(&mut f.warnings),
        ..Normalized::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::h;
    use super::*;

    #[test]
    fn dead_letter_headers_first_is_newest() {
        let hs = vec![
            h(
                "dead-letter-exception-class-name",
                b"java.util.concurrent.CompletionException",
            ),
            h(
                "dead-letter-reason",
                b"java.lang.IllegalArgumentException: bad price",
            ),
            h(
                "dead-letter-cause-class-name",
                b"java.lang.IllegalArgumentException",
            ),
            h("dead-letter-cause", b"bad price"),
            h("dead-letter-topic", b"prices-retry"),
            h("dead-letter-partition", b"2"),
            h("dead-letter-offset", b"15"),
            h("delayed-retry-count", b"3"),
            // Copied from the earlier hop, after the new ones.
            h("dead-letter-topic", b"prices"),
            h("dead-letter-partition", b"0"),
            h("dead-letter-offset", b"4"),
        ];
        assert!(detect(&hs));
        let n = extract(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("prices-retry"));
        assert_eq!(n.source_partition, Some(2));
        assert_eq!(n.source_offset, Some(15));
        assert_eq!(
            n.error_class.as_deref(),
            Some("java.lang.IllegalArgumentException")
        );
        assert_eq!(
            n.error_message.as_deref(),
            Some("java.lang.IllegalArgumentException: bad price")
        );
        assert_eq!(n.retry_count, Some(3));
        assert_eq!(n.stack_trace, None);
        assert!(n.decode_warnings.is_empty());
    }

    #[test]
    fn no_cause() {
        let hs = vec![
            h(
                "dead-letter-exception-class-name",
                b"java.lang.NullPointerException",
            ),
            h("dead-letter-reason", b"java.lang.NullPointerException"),
            h("dead-letter-topic", b"t"),
        ];
        let n = extract(&hs);
        assert_eq!(
            n.error_class.as_deref(),
            Some("java.lang.NullPointerException")
        );
    }
}
