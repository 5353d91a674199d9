//! Poison routing over the real frameworks' captured dead letters (`testkit/corpus/`,
//! `docs/corpus.md`): which records carry which signal (`docs/automation.md`, "Poison
//! routing").

use std::path::{Path, PathBuf};

use super::*;
use crate::conventions::decode;
use crate::corpus::Case;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/corpus")
}

/// (framework/case, the signal's start, or `None`: not poison).
const EXPECTED: &[(&str, Option<&str>)] = &[
    // Connect: the converter stage (the exception chain is DataException →
    // SerializationException → Jackson; the decoded class is Connect's own header).
    (
        "kafka-connect/key-converter",
        Some("Kafka Connect converter failure (KEY_CONVERTER)"),
    ),
    (
        "kafka-connect/value-converter",
        Some("Kafka Connect converter failure (VALUE_CONVERTER)"),
    ),
    ("kafka-connect/transformation", None),
    // Spring Kafka with ErrorHandlingDeserializer: the deserializer's SerializationException.
    (
        "spring-kafka/key-deserialization",
        Some("deserialization failure"),
    ),
    (
        "spring-kafka/value-deserialization",
        Some("deserialization failure"),
    ),
    (
        "spring-kafka/value-deserialization-retained-header",
        Some("deserialization failure"),
    ),
    ("spring-kafka/listener-throws", None),
    ("spring-kafka/listener-throws-delivery-attempt-header", None),
    ("spring-kafka/retryable-topic", None),
    ("spring-kafka/tombstone-and-null-key", None),
    ("spring-kafka/dlt-reprocessed-fails-again", None),
    ("spring-cloud-stream/function-throws-dlq", None),
    // Kafka Streams' DeserializationExceptionHandler: SerializationException.
    (
        "kafka-streams/deserialization",
        Some("deserialization failure"),
    ),
    ("kafka-streams/processing", None),
    ("bakdata-kafka-error-handling/error-headers", None),
    ("watermill/poison-queue", None),
];

#[test]
fn captured_records_carry_the_documented_signals() {
    let cases = Case::load_all(&corpus_dir()).expect("corpus loads");
    let mut seen = Vec::new();
    let mut wrong = Vec::new();
    for (path, case) in &cases {
        let key = format!("{}/{}", case.framework, case.case);
        for r in &case.records {
            let raw = r.raw(path).expect("corpus record decodes");
            let (conv, n) = decode(&raw);
            let input = MatchInput {
                dlq_topic: &raw.dlq_topic,
                source_topic: n.source_topic.as_deref(),
                consumer_group: n.consumer_group.as_deref(),
                error_class: n.error_class.as_deref(),
                error_message: n.error_message.as_deref(),
                fingerprint: "0000000000000000",
                convention: conv,
                headers: &raw.headers,
                labels: &[],
                age_ms: 0,
            };
            let got = poison_signal(&input);
            match EXPECTED.iter().find(|(k, _)| *k == key) {
                None => wrong.push(format!("{key}: not in EXPECTED (signal {got:?})")),
                Some((_, want)) => {
                    let ok = match (want, &got) {
                        (None, None) => true,
                        (Some(w), Some(g)) => g.starts_with(w),
                        _ => false,
                    };
                    if !ok {
                        wrong.push(format!(
                            "{key}: want {want:?}, got {got:?} (class {:?})",
                            n.error_class
                        ));
                    }
                }
            }
            seen.push(key.clone());
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for (k, _) in EXPECTED {
        assert!(seen.iter().any(|s| s == k), "case {k} not in the corpus");
    }
}
