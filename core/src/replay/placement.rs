//! Original-partition placement (`ReplayOptions::original_partition`, `docs/replay.md`,
//! "Original partition"): a record goes to the partition it came from instead of the one the
//! producer's key hash picks — Karafka's "restore to the original partition".
//!
//! The partition is the dead letter's `source_partition`, as its convention decoded it. The
//! target topic's partition count comes from the cluster's metadata, read at most every
//! [`COUNT_TTL`] per topic (not per record). A record whose partition the target does not
//! have, or whose partition is unknown, fails for good with a message that names the
//! partition and the target's partition count: it is never remapped to another partition,
//! because a silent remap would break exactly what the option promises.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::producer::Producer;
use tokio::time::Instant;

use super::kafka::{classify, classify_code, Failure, RelayProducer};

/// How long a topic's partition count is trusted before it is read again.
pub(super) const COUNT_TTL: Duration = Duration::from_secs(10);

/// Longest wait for the cluster's metadata of one topic.
const METADATA_TIMEOUT: Duration = Duration::from_secs(5);

/// Partition counts of target topics, per topic, with when they were read. Shared by the
/// relay's job workers.
#[derive(Debug, Default)]
pub(super) struct PartitionCounts {
    counts: Mutex<HashMap<String, (i32, Instant)>>,
}

impl PartitionCounts {
    /// The partition to publish a record of `topic` to, for a dead letter whose source
    /// partition is `source_partition`.
    ///
    /// Errors: `Failure::Permanent` when the partition is unknown or the topic has no such
    /// partition (or no such topic); `Failure::Outage` when the metadata cannot be read
    /// (Kafka unreachable) — classified like a publish error.
    pub(super) async fn partition_for(
        &self,
        producer: &RelayProducer,
        topic: &str,
        source_partition: Option<i32>,
    ) -> Result<i32, Failure> {
        let Some(partition) = source_partition else {
            return Err(Failure::Permanent(
                "the record's original partition is unknown (its convention records none), \
                 and the job publishes to original partitions: not placed by key hash instead"
                    .to_string(),
            ));
        };
        let count = self.count(producer, topic).await?;
        check_partition(topic, partition, count)
    }

    /// `topic`'s partition count, from the cache or the cluster.
    async fn count(&self, producer: &RelayProducer, topic: &str) -> Result<i32, Failure> {
        if let Some(n) = self.cached(topic) {
            return Ok(n);
        }
        let producer = producer.clone();
        let name = topic.to_string();
        let read = tokio::task::spawn_blocking(move || {
            let metadata = producer
                .client()
                .fetch_metadata(Some(&name), METADATA_TIMEOUT)
                .map_err(|e| classify(&e, || producer.client().fatal_error()))?;
            let Some(t) = metadata.topics().iter().find(|t| t.name() == name) else {
                return Err(Failure::Outage(format!(
                    "the cluster's metadata has no entry for topic `{name}`"
                )));
            };
            if let Some(e) = t.error() {
                let code = rdkafka::types::RDKafkaErrorCode::from(e);
                return Err(classify_code(
                    code,
                    &format!("metadata of topic `{name}`: {code}"),
                ));
            }
            Ok(i32::try_from(t.partitions().len()).unwrap_or(i32::MAX))
        })
        .await
        .map_err(|e| Failure::Outage(format!("reading topic metadata failed: {e}")))??;
        if let Ok(mut m) = self.counts.lock() {
            m.insert(topic.to_string(), (read, Instant::now()));
        }
        Ok(read)
    }

    fn cached(&self, topic: &str) -> Option<i32> {
        let m = self.counts.lock().ok()?;
        let (n, at) = m.get(topic)?;
        (at.elapsed() < COUNT_TTL).then_some(*n)
    }
}

/// `partition` if `topic` (with `count` partitions) has it.
///
/// Errors: `Failure::Permanent` naming the partition and the count.
pub(super) fn check_partition(topic: &str, partition: i32, count: i32) -> Result<i32, Failure> {
    if (0..count).contains(&partition) {
        return Ok(partition);
    }
    let has = match count {
        0 => "no partitions".to_string(),
        1 => "1 partition (0)".to_string(),
        n => format!("{n} partitions (0..={})", n - 1),
    };
    Err(Failure::Permanent(format!(
        "original partition {partition} does not exist in target topic `{topic}`, which has \
         {has}; the record is not remapped to another partition"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_partition_is_an_error_naming_partition_and_count() {
        assert!(matches!(check_partition("t", 2, 3), Ok(2)));
        let Err(Failure::Permanent(e)) = check_partition("orders", 5, 3) else {
            panic!("not refused");
        };
        assert!(e.contains("partition 5"), "{e}");
        assert!(e.contains("`orders`, which has 3 partitions"), "{e}");
        assert!(matches!(
            check_partition("t", -1, 3),
            Err(Failure::Permanent(_))
        ));
    }
}
