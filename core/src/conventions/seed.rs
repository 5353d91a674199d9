//! The seed design (`seeds/000_8e6dd1dfa7543ced.txt`) and redrive's own demo pipeline, from a
//! Python `confluent_kafka` consumer: `original_topic`, `retry_count`, `error`; recommended
//! extras `message_id` (UUID), `original_partition`, `original_offset`, `consumer_group`,
//! `error_class`, `traceback` (Python), `failed_at` (RFC 3339). All text.

use super::stack::python_exception;
use super::value::{has, Fields, Newest, NumEnc};
use crate::model::{Header, Normalized};

/// `original_topic` or `error` (the seed's first example writes only those two). Karafka's
/// `original_*` generation is tried before this one.
pub(super) fn detect(headers: &[Header]) -> bool {
    has(headers, "original_topic") || has(headers, "error")
}

/// Extracts a seed-design dead letter. Without `error_class` (or `error`), the class (or the
/// message) is read from the traceback's last line (`TimeoutError: ...`).
pub(super) fn extract(headers: &[Header]) -> Normalized {
    let mut f = Fields::new(headers, Newest::Last);
    let traceback = f.text("traceback");
    let (tb_class, tb_message) = traceback
        .as_deref()
        .and_then(python_exception)
        .map_or((None, None), |(c, m)| (Some(c), m));
    let error_class = f.text("error_class").or(tb_class);
    Normalized {
        source_topic: f.text("original_topic"),
        source_partition: f.int32("original_partition", NumEnc::Text),
        source_offset: f.int("original_offset", NumEnc::Text),
        consumer_group: f.text("consumer_group"),
        error_class,
        error_message: f.text("error").or(tb_message),
        stack_trace: traceback,
        retry_count: f.int32("retry_count", NumEnc::Text),
        message_id: f.text("message_id"),
        failed_at_ms: f.time_ms("failed_at"),
        decode_warnings: std::mem::take(&mut f.warnings),
        ..Normalized::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::h;
    use super::*;

    #[test]
    fn full_seed_set() {
        let hs = vec![
            h("original_topic", b"user_requests"),
            h("retry_count", b"3"),
            h("error", b"LLM call timed out after 30000 ms"),
            h("error_class", b"TimeoutError"),
            h("message_id", b"0b6e6c1e-8c1d-4a53-9f0e-3a3a4a0b1c2d"),
            h("original_partition", b"1"),
            h("original_offset", b"12"),
            h("consumer_group", b"agent_group"),
            h("failed_at", b"2026-12-01T06:00:00Z"),
        ];
        assert!(detect(&hs));
        let n = extract(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("user_requests"));
        assert_eq!(n.source_partition, Some(1));
        assert_eq!(n.source_offset, Some(12));
        assert_eq!(n.consumer_group.as_deref(), Some("agent_group"));
        assert_eq!(n.error_class.as_deref(), Some("TimeoutError"));
        assert_eq!(
            n.error_message.as_deref(),
            Some("LLM call timed out after 30000 ms")
        );
        assert_eq!(n.retry_count, Some(3));
        assert_eq!(
            n.message_id.as_deref(),
            Some("0b6e6c1e-8c1d-4a53-9f0e-3a3a4a0b1c2d")
        );
        assert_eq!(n.failed_at_ms, Some(1_796_104_800_000));
        assert!(n.decode_warnings.is_empty());
    }

    #[test]
    fn minimal_seed_and_traceback_class() {
        let hs = vec![
            h("original_topic", b"input_topic"),
            h("error", b"Max retries exceeded"),
            h(
                "traceback",
                b"Traceback (most recent call last):\n  File \"c.py\", line 9, in process_message\n    raise RuntimeError(\"LLM timeout\")\nRuntimeError: LLM timeout\n",
            ),
            h("retry_count", b"five"),
        ];
        let n = extract(&hs);
        assert_eq!(n.error_message.as_deref(), Some("Max retries exceeded"));
        assert_eq!(n.error_class.as_deref(), Some("RuntimeError"));
        assert_eq!(n.retry_count, None);
        assert_eq!(n.decode_warnings.len(), 1);
    }
}
