//! Karafka Pro dead letter queue (Ruby). Three generations of header names, all text:
//! - 2.5+: `source_topic`, `source_partition`, `source_offset`, `source_consumer_group`,
//!   `source_attempts`, `source_trace_id` (the original key is preserved);
//! - 2.0.17–2.4: `original_topic`, `original_partition`, `original_offset`,
//!   `original_consumer_group` (and, where written, `original_attempts`); the record key was
//!   set to the partition number;
//! - before 2.0.17: `original-topic`, `original-partition`, `original-offset`.
//!
//! No error details are written. The OSS edition writes the payload only, so it cannot be
//! recognised.

use super::value::{has, Fields, Newest, NumEnc};
use crate::model::{Header, Normalized};

/// The generation whose names a record carries, newest first.
fn prefix(headers: &[Header]) -> Option<&'static str> {
    let any = |names: &[&str]| names.iter().any(|n| has(headers, n));
    if has(headers, "source_topic")
        && any(&[
            "source_partition",
            "source_offset",
            "source_consumer_group",
            "source_attempts",
        ])
    {
        Some("source_")
    // `original_topic` alone is also the seed design's; the consumer group / attempts names
    // are Karafka's (the seed's group header is `consumer_group`).
    } else if any(&["original_consumer_group", "original_attempts"]) {
        Some("original_")
    } else if has(headers, "original-topic") {
        Some("original-")
    } else {
        None
    }
}

/// One of Karafka's three header generations.
pub(super) fn detect(headers: &[Header]) -> bool {
    prefix(headers).is_some()
}

/// Extracts a Karafka dead letter; `retry_count` is the attempts header.
pub(super) fn extract(headers: &[Header]) -> Normalized {
    let Some(p) = prefix(headers) else {
        return Normalized::default();
    };
    let mut f = Fields::new(headers, Newest::Last);
    let name = |s: &str| format!("{p}{s}");
    Normalized {
        source_topic: f.text(&name("topic")),
        source_partition: f.int32(&name("partition"), NumEnc::Text),
        source_offset: f.int(&name("offset"), NumEnc::Text),
        consumer_group: f.text(&name("consumer_group")),
        retry_count: f.int32(&name("attempts"), NumEnc::Text),
        decode_warnings: std::mem::take(&mut f.warnings),
        ..Normalized::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::h;
    use super::*;

    #[test]
    fn karafka_2_5() {
        let hs = vec![
            h("source_topic", b"events"),
            h("source_partition", b"4"),
            h("source_offset", b"100"),
            h("source_consumer_group", b"app"),
            h("source_attempts", b"3"),
            h("source_trace_id", b"0b6e6c1e-8c1d-4a53-9f0e-3a3a4a0b1c2d"),
        ];
        assert!(detect(&hs));
        let n = extract(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("events"));
        assert_eq!(n.source_partition, Some(4));
        assert_eq!(n.source_offset, Some(100));
        assert_eq!(n.consumer_group.as_deref(), Some("app"));
        assert_eq!(n.retry_count, Some(3));
        assert!(n.decode_warnings.is_empty());
    }

    #[test]
    fn karafka_2_0_17_to_2_4() {
        let hs = vec![
            h("original_topic", b"events"),
            h("original_partition", b"4"),
            h("original_offset", b"100"),
            h("original_consumer_group", b"app"),
        ];
        assert!(detect(&hs));
        let n = extract(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("events"));
        assert_eq!(n.source_offset, Some(100));
        assert_eq!(n.consumer_group.as_deref(), Some("app"));
        assert_eq!(n.retry_count, None);
    }

    #[test]
    fn karafka_before_2_0_17() {
        let hs = vec![
            h("original-topic", b"events"),
            h("original-partition", b"4"),
            h("original-offset", b"100"),
        ];
        assert!(detect(&hs));
        let n = extract(&hs);
        assert_eq!(n.source_topic.as_deref(), Some("events"));
        assert_eq!(n.source_partition, Some(4));
    }

    #[test]
    fn seed_is_not_karafka() {
        assert!(!detect(&[h("original_topic", b"t"), h("error", b"x")]));
        assert!(!detect(&[h("source_topic", b"t")]));
    }
}
