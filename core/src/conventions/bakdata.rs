//! bakdata kafka-error-handling (`com.bakdata.kafka:error-handling-*`, Kafka Streams):
//! `__streams.errors.topic`, `.partition`, `.offset`, `.description`,
//! `.exception.class.name`, `.exception.message`, `.exception.stack_trace`. All text; each is
//! set (replacing any earlier value). Same prefix as KIP-1034, different suffixes, so it is
//! recognised by the suffixes only bakdata writes.

use super::stack::user_exception;
use super::value::{has, Fields, Newest, NumEnc};
use crate::model::{Header, Normalized, RawRecord};

const P: &str = "__streams.errors.";

/// Names only bakdata writes (KIP-1034 uses `.exception`, `.message`, `.stacktrace`).
const DISTINCT: [&str; 4] = [
    "__streams.errors.description",
    "__streams.errors.exception.class.name",
    "__streams.errors.exception.message",
    "__streams.errors.exception.stack_trace",
];

/// One of bakdata's distinct `__streams.errors.*` headers.
pub(super) fn detect(headers: &[Header]) -> bool {
    DISTINCT.iter().any(|n| has(headers, n))
}

/// Extracts a bakdata dead letter. The message is `.exception.message`, or `.description` (the
/// library's own summary) when the exception had none.
pub(super) fn extract(record: &RawRecord) -> Normalized {
    let mut f = Fields::new(&record.headers, Newest::Last);
    let name = |s: &str| format!("{P}{s}");
    let stack = f.text(&name("exception.stack_trace"));
    let class = f.text(&name("exception.class.name"));
    let source_topic = f.text(&name("topic"));
    let message = f.text(&name("exception.message"));
    let (error_class, message) = user_exception(None, stack.as_deref(), class, message);
    let message = message.or_else(|| f.text(&name("description")));
    Normalized {
        source_partition: f.int32(&name("partition"), NumEnc::Text),
        source_offset: f.int(&name("offset"), NumEnc::Text),
        source_timestamp_ms: source_topic.as_ref().and(record.timestamp_ms),
        source_topic,
        error_class,
        error_message: message,
        stack_trace: stack,
        decode_warnings: std::mem::take(&mut f.warnings),
        ..Normalized::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::{h, record};
    use super::*;

    #[test]
    fn bakdata_headers() {
        let r =
            record(
                vec![
                h("__streams.errors.topic", b"input"),
                h("__streams.errors.partition", b"2"),
                h("__streams.errors.offset", b"99"),
                h("__streams.errors.description", b"Error in map"),
                h("__streams.errors.exception.class.name", b"java.lang.IllegalArgumentException"),
                h("__streams.errors.exception.message", b"negative amount"),
                h(
                    "__streams.errors.exception.stack_trace",
                    b"java.lang.IllegalArgumentException: negative amount\n\tat a.B(B.java:1)\n",
                ),
            ],
                None,
            );
        assert!(detect(&r.headers));
        let n = extract(&r);
        assert_eq!(n.source_topic.as_deref(), Some("input"));
        assert_eq!(n.source_partition, Some(2));
        assert_eq!(n.source_offset, Some(99));
        assert_eq!(
            n.error_class.as_deref(),
            Some("java.lang.IllegalArgumentException")
        );
        assert_eq!(n.error_message.as_deref(), Some("negative amount"));
        assert!(n.stack_trace.is_some());
    }

    #[test]
    fn kip_1034_is_not_bakdata() {
        let hs = vec![
            h("__streams.errors.exception", b"x.Y"),
            h("__streams.errors.topic", b"t"),
        ];
        assert!(!detect(&hs));
    }
}
