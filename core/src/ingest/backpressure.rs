//! Ingest's side of retention backpressure (`docs/retention.md`, "Backpressure"): the assigned
//! partitions of a paused DLQ topic are paused with rdkafka (nothing more is fetched; Kafka
//! keeps the records, and offsets are committed only for what is stored, so nothing is lost),
//! and resumed when the topic is under its limit again. Newly assigned partitions of a paused
//! topic are paused by the consumer context as they are assigned (see `kafka.rs`), and so are
//! those of any topic with a backpressure policy until this instance has counted the usage
//! once (`Backpressure::is_held`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

use rdkafka::consumer::Consumer;
use rdkafka::TopicPartitionList;

use super::IngestLoop;
use crate::model::NewDeadLetter;

impl IngestLoop {
    /// Adds a stored batch to the usage backpressure follows (per DLQ topic: records, and
    /// their key + value bytes), then applies any change at once.
    pub(super) fn record_backpressure(&self, stored: &[NewDeadLetter]) {
        let Some(bp) = &self.backpressure else {
            return;
        };
        let mut per_topic: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for d in stored {
            let r = &d.record;
            // As the store's aggregates count them: key + value.
            let bytes = r.key.as_ref().map_or(0, Vec::len) + r.value.as_ref().map_or(0, Vec::len);
            let e = per_topic.entry(r.dlq_topic.as_str()).or_default();
            e.0 += 1;
            e.1 += bytes as u64;
        }
        for (topic, (n, bytes)) in per_topic {
            bp.record_stored(topic, n, bytes);
        }
        if bp.is_changed_for(&self.bp_seen) {
            self.apply_backpressure();
        }
    }

    /// Pauses the assigned partitions of paused topics and resumes the others (unless the
    /// store is failing: then everything stays paused until it is back, and `resume` calls
    /// this again).
    pub(super) fn apply_backpressure(&self) {
        let Some(bp) = &self.backpressure else {
            return;
        };
        if self.consumer.context().paused.load(Ordering::SeqCst) {
            return;
        }
        let assignment = match self.consumer.assignment() {
            Ok(tpl) => tpl,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the assignment for backpressure");
                return;
            }
        };
        // Paused at a limit, or held until this instance has counted the usage once.
        let elements = assignment.elements();
        let paused: BTreeSet<String> = elements
            .iter()
            .map(|e| e.topic())
            .filter(|t| bp.is_held(t))
            .map(str::to_string)
            .collect();
        let ctx = self.consumer.context();
        let mut applied = ctx.bp_applied.lock().unwrap_or_else(|p| p.into_inner());
        // Pausing a paused partition is harmless; resuming is done only for partitions this
        // paused (a resume makes librdkafka drop and refetch what it had prefetched).
        let mut pause = TopicPartitionList::new();
        let mut resume = TopicPartitionList::new();
        for e in &elements {
            if paused.contains(e.topic()) {
                pause.add_partition(e.topic(), e.partition());
            } else if applied.contains(e.topic()) {
                resume.add_partition(e.topic(), e.partition());
            }
        }
        *applied = paused;
        drop(applied);
        if pause.count() > 0 {
            if let Err(e) = self.consumer.pause(&pause) {
                tracing::warn!(error = %e, "could not pause partitions of a DLQ topic at its limit");
            }
        }
        if resume.count() > 0 {
            if let Err(e) = self.consumer.resume(&resume) {
                tracing::warn!(error = %e, "could not resume partitions");
            }
        }
    }
}
