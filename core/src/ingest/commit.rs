//! Offset commits: the offsets of stored records, committed to the consumer group
//! (`docs/invariants.md`, 1: an offset is committed only after its record is durable).
//!
//! A batch's commit runs on a blocking thread **while the next batch is written**: the
//! synchronous commit round trip (a median 11 ms a batch against the local broker,
//! `docs/bench.md`) no longer sits between two store transactions. The commit is only ever
//! started after the transaction holding its records has committed, so overlapping it with
//! the next write changes nothing about what may be committed. Before the next commit starts,
//! the one in flight is waited for: commits stay in order, one at a time, and a failed one
//! puts its offsets back to be retried with the next (offsets only grow, so the later commit
//! covers the earlier).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::KafkaResult;
use rdkafka::{Offset, TopicPartitionList};
use tokio::task::JoinHandle;

use super::{IngestConsumer, IngestStatus};

/// (topic, partition) -> the next offset to read (Kafka's commit convention: the highest
/// stored offset + 1).
type Offsets = BTreeMap<(String, i32), i64>;

/// Stored offsets not committed yet, and the commit in flight.
#[derive(Default)]
pub(super) struct Commits {
    /// Stored, not yet handed to a commit (or handed to one that failed).
    uncommitted: Offsets,
    in_flight: Option<(JoinHandle<KafkaResult<()>>, Offsets)>,
}

impl Commits {
    /// Records `stored`: per partition, the next offset after records the store has just
    /// made durable (`Store::insert_batch` returned `Ok`). Call only then.
    pub(super) fn add_stored(&mut self, stored: impl IntoIterator<Item = ((String, i32), i64)>) {
        for (tp, next) in stored {
            merge(&mut self.uncommitted, tp, next);
        }
    }

    /// Starts committing the uncommitted offsets of still-assigned partitions, without
    /// waiting for the broker's answer (the commit in flight, if any, is waited for first).
    /// Offsets of revoked partitions are dropped: their next owner re-reads those records,
    /// and the store ignores a DLQ offset it already has.
    pub(super) async fn start(&mut self, consumer: &Arc<IngestConsumer>, status: &IngestStatus) {
        self.settle(status).await;
        if self.uncommitted.is_empty() {
            return;
        }
        let assigned: HashSet<(String, i32)> = match consumer.assignment() {
            Ok(tpl) => tpl
                .elements()
                .iter()
                .map(|e| (e.topic().to_string(), e.partition()))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "could not read the assignment; commit postponed");
                return;
            }
        };
        self.uncommitted.retain(|tp, _| assigned.contains(tp));
        if self.uncommitted.is_empty() {
            return;
        }
        let offsets = std::mem::take(&mut self.uncommitted);
        let mut tpl = TopicPartitionList::with_capacity(offsets.len());
        for ((topic, partition), next) in &offsets {
            if let Err(e) = tpl.add_partition_offset(topic, *partition, Offset::Offset(*next)) {
                tracing::warn!(error = %e, topic, partition, "bad offset; not committed");
            }
        }
        let consumer = consumer.clone();
        // A synchronous commit, off the async workers.
        let handle = tokio::task::spawn_blocking(move || consumer.commit(&tpl, CommitMode::Sync));
        self.in_flight = Some((handle, offsets));
    }

    /// [`Commits::start`], then waits for that commit's answer (the idle tick, shutdown).
    pub(super) async fn commit_now(
        &mut self,
        consumer: &Arc<IngestConsumer>,
        status: &IngestStatus,
    ) {
        self.start(consumer, status).await;
        self.settle(status).await;
    }

    /// Waits for the commit in flight; on failure its offsets are kept for the next commit.
    async fn settle(&mut self, status: &IngestStatus) {
        let Some((handle, offsets)) = self.in_flight.take() else {
            return;
        };
        let error = match handle.await {
            Ok(Ok(())) => {
                tracing::trace!(?offsets, "offsets committed");
                return;
            }
            Ok(Err(e)) => e.to_string(),
            Err(e) => format!("commit task: {e}"),
        };
        tracing::warn!(error = %error, "committing offsets failed (records are stored; will retry)");
        status.record_commit_failure(format!("Kafka commit: {error}"));
        for (tp, next) in offsets {
            merge(&mut self.uncommitted, tp, next);
        }
    }
}

/// Keeps the higher of `next` and what `offsets` holds for `tp`.
fn merge(offsets: &mut Offsets, tp: (String, i32), next: i64) {
    let e = offsets.entry(tp).or_insert(next);
    *e = (*e).max(next);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_the_highest_offset() {
        let mut o = Offsets::new();
        merge(&mut o, ("a".into(), 0), 10);
        merge(&mut o, ("a".into(), 0), 7);
        merge(&mut o, ("a".into(), 1), 3);
        assert_eq!(o[&("a".into(), 0)], 10);
        assert_eq!(o[&("a".into(), 1)], 3);
    }
}
