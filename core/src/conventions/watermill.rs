//! Watermill poison queue middleware (Go, `middleware.PoisonQueue`): `reason_poisoned` (the
//! error text), `topic_poisoned`, `handler_poisoned`, `subscriber_poisoned`, plus Watermill's
//! own `_watermill_message_uuid` on every message. All text; no partition, offset or class.

use super::value::{has, Fields, Newest};
use crate::model::{Header, Normalized};

/// `reason_poisoned` or `topic_poisoned` (the message uuid alone is any Watermill message).
pub(super) fn detect(headers: &[Header]) -> bool {
    has(headers, "reason_poisoned") || has(headers, "topic_poisoned")
}

/// Extracts a Watermill poisoned message; `message_id` is the Watermill message UUID.
pub(super) fn extract(headers: &[Header]) -> Normalized {
    let mut f = Fields::new(headers, Newest::Last);
    Normalized {
        source_topic: f.text("topic_poisoned"),
        error_message: f.text("reason_poisoned"),
        message_id: f.text("_watermill_message_uuid"),
        decode_warnings: std::mem::take(&mut f.warnings),
        ..Normalized::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::h;
    use super::*;

    #[test]
    fn poison_queue_headers() {
        let hs = vec![
            h(
                "_watermill_message_uuid",
                b"8a1c3a9e-1b7f-4c0e-9a57-0d7c1c2b3e4f",
            ),
            h("reason_poisoned", b"cannot unmarshal order: unexpected EOF"),
            h("topic_poisoned", b"orders"),
            h("handler_poisoned", b"order_handler"),
            h("subscriber_poisoned", b"kafka.Subscriber"),
        ];
        assert!(detect(&hs));
        let n = extract(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("orders"));
        assert_eq!(
            n.error_message.as_deref(),
            Some("cannot unmarshal order: unexpected EOF")
        );
        assert_eq!(
            n.message_id.as_deref(),
            Some("8a1c3a9e-1b7f-4c0e-9a57-0d7c1c2b3e4f")
        );
        assert_eq!(n.source_partition, None);
        assert!(!detect(&hs[..1]));
    }
}
