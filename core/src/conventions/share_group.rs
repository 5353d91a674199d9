//! KIP-1191 broker-side dead letter queue for share groups (upcoming Apache Kafka release):
//! `__dlq.errors.topic`, `.partition`, `.offset`, `.group`, `.delivery.count`, `.message`. All
//! text. Original headers are not copied, and the record timestamp is the DLQ write time (so
//! it is not a source timestamp). When the broker cannot resolve the topic name, the topic
//! header holds the topic id (a UUID) instead; it is kept as written.

use super::value::{has_prefix, Fields, Newest, NumEnc};
use crate::model::{Header, Normalized};

const P: &str = "__dlq.errors.";

/// Any `__dlq.errors.*` header.
pub(super) fn detect(headers: &[Header]) -> bool {
    has_prefix(headers, P)
}

/// Extracts a share-group dead letter; `retry_count` is the delivery count.
pub(super) fn extract(headers: &[Header]) -> Normalized {
    let mut f = Fields::new(headers, Newest::Last);
    let name = |s: &str| format!("{P}{s}");
    Normalized {
        source_topic: f.text(&name("topic")),
        source_partition: f.int32(&name("partition"), NumEnc::Text),
        source_offset: f.int(&name("offset"), NumEnc::Text),
        consumer_group: f.text(&name("group")),
        error_message: f.text(&name("message")),
        retry_count: f.int32(&name("delivery.count"), NumEnc::Text),
        decode_warnings: std::mem::take(&mut f.warnings),
        ..Normalized::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::h;
    use super::*;

    #[test]
    fn share_group_headers() {
        let hs = vec![
            h("__dlq.errors.topic", b"orders"),
            h("__dlq.errors.partition", b"0"),
            h("__dlq.errors.offset", b"17"),
            h("__dlq.errors.group", b"share-orders"),
            h("__dlq.errors.delivery.count", b"5"),
            h("__dlq.errors.message", b"delivery count exceeded"),
        ];
        assert!(detect(&hs));
        let n = extract(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("orders"));
        assert_eq!(n.source_partition, Some(0));
        assert_eq!(n.source_offset, Some(17));
        assert_eq!(n.consumer_group.as_deref(), Some("share-orders"));
        assert_eq!(n.retry_count, Some(5));
        assert_eq!(n.error_message.as_deref(), Some("delivery count exceeded"));
        assert_eq!(n.error_class, None);
        assert!(n.decode_warnings.is_empty());
    }
}
