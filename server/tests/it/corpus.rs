//! The captured corpus on the real broker (`docs/corpus.md`): every dead letter that Spring
//! Kafka, Kafka Connect, Kafka Streams, Watermill, ... wrote in `scripts/capture-corpus` is
//! produced byte-exact (key, value, headers in order with nulls, timestamp) to a fresh DLQ
//! topic, `ingest::run` stores it in a fresh SQLite and a fresh PostgreSQL store, and the test
//! checks the stored bytes and the normalised fields against the ground truth the producing
//! program recorded at the failure (`redrive_core::corpus::mismatches`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use redrive_core::conventions::decode;
use redrive_core::corpus::{mismatches, Case};
use redrive_core::model::Convention;
use redrive_testkit::ingest::{assert_stored_exactly, ingest_all};
use redrive_testkit::{create_topic, produce, unique, Backend, TestRecord};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/corpus")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_dead_letters_match_their_truth() {
    let cases = Case::load_all(&corpus_dir()).expect("corpus loads");
    assert!(!cases.is_empty(), "empty corpus");
    // Every record of every case, in one topic, in file order.
    let mut sent = Vec::new();
    let mut origin = Vec::new();
    for (path, case) in &cases {
        for r in &case.records {
            let raw = r.raw(path).expect("corpus record decodes");
            sent.push(TestRecord {
                key: raw.key,
                value: raw.value,
                headers: raw.headers.into_iter().map(|h| (h.name, h.value)).collect(),
                partition: Some(0),
                timestamp_ms: raw.timestamp_ms,
            });
            origin.push((case, r));
        }
    }
    let topic = unique("corpus");
    create_topic(&topic, 1, &[]).await.unwrap();
    let delivered = produce(&topic, &sent).await.unwrap();
    let index: HashMap<i64, usize> = delivered
        .iter()
        .enumerate()
        .map(|(i, (_, offset))| (*offset, i))
        .collect();
    for backend in Backend::ALL {
        let (_store, _dir, stored) = ingest_all(backend, &topic, sent.len() as i64)
            .await
            .unwrap_or_else(|e| panic!("{backend:?}: {e:#}"));
        let mut failures = Vec::new();
        for d in &stored {
            let i = index[&d.record.dlq_offset];
            let (case, r) = origin[i];
            assert_stored_exactly(&sent[i], &d.record);
            let at = format!(
                "{backend:?} {}/{} {}@{}",
                case.framework, case.case, r.dlq_topic, r.dlq_offset
            );
            if d.summary.convention == Convention::Unknown {
                failures.push(format!("{at}: convention not recognised"));
            }
            // The summary row (what the list and the API show) agrees with the full record.
            assert_eq!(d.summary.error_class, d.normalized.error_class, "{at}");
            assert_eq!(d.summary.source_topic, d.normalized.source_topic, "{at}");
            assert_eq!(d.summary.retry_count, d.normalized.retry_count, "{at}");
            // The test topic is not the captured DLQ topic, and one decoder reads the topic name
            // (Spring Cloud Stream's `error.<topic>.<group>`): what ingest stored must be what
            // the decoder makes of the stored record, and the same bytes under their captured
            // DLQ name must give the truth.
            let (_, here) = decode(&d.record);
            assert_eq!(d.normalized, here, "{at}: stored normalisation");
            let mut captured = d.record.clone();
            captured.dlq_topic = r.dlq_topic.clone();
            captured.dlq_partition = r.dlq_partition;
            captured.dlq_offset = r.dlq_offset;
            let (_, n) = decode(&captured);
            for m in mismatches(case, r, &n) {
                failures.push(format!("{at}: {m}"));
            }
        }
        assert!(
            failures.is_empty(),
            "{} mismatches against the captured truth:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}
