//! Live state of ingest, shared with `/readyz` and `/metrics`. Updated by the consumer loop and
//! by the consumer's callbacks; read at any time without blocking ingest (atomics and short
//! critical sections only).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;

/// Live state of ingest, read by `/readyz` and the metrics. Create it with
/// `IngestStatus::default()`, share it as `Arc<IngestStatus>` with [`super::run`].
#[derive(Debug, Default)]
pub struct IngestStatus {
    running: AtomicBool,
    kafka_connected: AtomicBool,
    store_ok: AtomicBool,
    paused: AtomicBool,
    /// Epoch ms of the last successful store write; 0 = never.
    last_store_write_ms: AtomicI64,
    /// Epoch ms of the last successful write of a full batch (`ingest_batch_size` records:
    /// ingest is catching up, not keeping up); 0 = never.
    last_full_batch_ms: AtomicI64,
    records_ingested: AtomicU64,
    records_new: AtomicU64,
    batches: AtomicU64,
    store_failures: AtomicU64,
    commit_failures: AtomicU64,
    batches_split: AtomicU64,
    records_reduced: AtomicU64,
    records_quarantined: AtomicU64,
    assigned: Mutex<BTreeSet<(String, i32)>>,
    last_error: Mutex<Option<String>>,
    /// Consumer lag per assigned partition, from librdkafka's latest statistics.
    lag: Mutex<Vec<PartitionLag>>,
    /// (low, high) watermarks ingest read itself for partitions it has paused, which
    /// librdkafka does not fetch (`paused_lag.rs`).
    paused_watermarks: Mutex<BTreeMap<(String, i32), (i64, i64)>>,
}

/// One partition as librdkafka's statistics report it (`-1` = not known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionOffsets {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    /// `hi_offset`: the high watermark of the last Fetch response.
    pub(crate) high: i64,
    /// `lo_offset`: the log start offset.
    pub(crate) low: i64,
    /// `committed_offset`: the group's committed offset.
    pub(crate) committed: i64,
}

/// A point-in-time copy of [`IngestStatus`], for `/readyz` (JSON) and the metrics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IngestSnapshot {
    /// `run` is active (between start-up and the end of graceful shutdown).
    pub running: bool,
    /// The Kafka cluster answered recently (metadata, messages or a group assignment), and no
    /// "all brokers down" error has been seen since.
    pub kafka_connected: bool,
    /// The last store write (or start-up ping) succeeded.
    pub store_ok: bool,
    /// Consumption is paused because the store is failing (the batch in hand is being retried).
    pub paused: bool,
    /// `kafka_connected && store_ok && running`: what `/readyz` reports.
    pub ready: bool,
    /// Partitions currently assigned to this consumer, sorted.
    pub assigned_partitions: Vec<AssignedPartition>,
    /// Epoch ms of the last successful store write, if any.
    pub last_store_write_ms: Option<i64>,
    /// Records written to the store in committed batches (records; includes redeliveries that
    /// the store recognised as already present).
    pub records_ingested: u64,
    /// Rows that were new in the store (records; excludes redeliveries).
    pub records_new: u64,
    /// Store transactions committed by ingest (batches).
    pub batches: u64,
    /// Failed store writes, each followed by a retry (count).
    pub store_failures: u64,
    /// Failed Kafka offset commits (count). The records were stored; at worst they are re-read.
    pub commit_failures: u64,
    /// Batches the store refused for a reason about the data, which ingest then split to
    /// store record by record (count; see `docs/limits.md`).
    pub batches_split: u64,
    /// Records stored in reduced form because the store refused them as decoded (records).
    pub records_reduced: u64,
    /// Records put in quarantine because the store refused even their reduced form (records).
    pub records_quarantined: u64,
    /// The most recent error, cleared by the next successful store write.
    pub last_error: Option<String>,
    /// Consumer lag per assigned DLQ partition, from librdkafka's statistics (every
    /// `statistics.interval.ms`, 5 s by default); empty until the first report.
    pub partition_lag: Vec<PartitionLag>,
}

/// How far ingest is behind on one DLQ partition (librdkafka statistics, `docs/metrics.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    /// The partition's high watermark (offset of the next record to be written).
    pub high_watermark: i64,
    /// The group's committed offset (next record to read); `None` before the first commit.
    pub committed_offset: Option<i64>,
    /// `high_watermark - committed_offset` (records); before the first commit,
    /// `high_watermark - low watermark` (everything still to read). Never negative.
    pub lag: i64,
}

/// One assigned DLQ partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AssignedPartition {
    pub topic: String,
    pub partition: i32,
}

impl IngestStatus {
    /// Ready to serve: running, Kafka reachable and the store writable.
    pub fn is_ready(&self) -> bool {
        self.running.load(Ordering::Relaxed)
            && self.kafka_connected.load(Ordering::Relaxed)
            && self.store_ok.load(Ordering::Relaxed)
    }

    /// A consistent-enough copy of every field (each field is read atomically on its own).
    pub fn snapshot(&self) -> IngestSnapshot {
        let last = self.last_store_write_ms.load(Ordering::Relaxed);
        IngestSnapshot {
            running: self.running.load(Ordering::Relaxed),
            kafka_connected: self.kafka_connected.load(Ordering::Relaxed),
            store_ok: self.store_ok.load(Ordering::Relaxed),
            paused: self.paused.load(Ordering::Relaxed),
            ready: self.is_ready(),
            assigned_partitions: self
                .assigned_partitions()
                .into_iter()
                .map(|(topic, partition)| AssignedPartition { topic, partition })
                .collect(),
            last_store_write_ms: (last > 0).then_some(last),
            records_ingested: self.records_ingested.load(Ordering::Relaxed),
            records_new: self.records_new.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            store_failures: self.store_failures.load(Ordering::Relaxed),
            commit_failures: self.commit_failures.load(Ordering::Relaxed),
            batches_split: self.batches_split.load(Ordering::Relaxed),
            records_reduced: self.records_reduced.load(Ordering::Relaxed),
            records_quarantined: self.records_quarantined.load(Ordering::Relaxed),
            last_error: self.last_error(),
            partition_lag: match self.lag.lock() {
                Ok(l) => l.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            },
        }
    }

    /// Epoch ms of the last successful write of a full batch; 0 = never. Recent means ingest
    /// is working through a backlog at the store's speed (the search indexer then yields).
    pub fn last_full_batch_ms(&self) -> i64 {
        self.last_full_batch_ms.load(Ordering::Relaxed)
    }

    /// Notes that the batch just stored at `now_ms` was full.
    pub(crate) fn record_full_batch(&self, now_ms: i64) {
        self.last_full_batch_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Records written to the store so far (records, including redeliveries).
    pub fn records_ingested(&self) -> u64 {
        self.records_ingested.load(Ordering::Relaxed)
    }

    /// Store transactions committed so far (batches).
    pub fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    /// Partitions currently assigned, as (topic, partition), sorted.
    pub fn assigned_partitions(&self) -> Vec<(String, i32)> {
        match self.assigned.lock() {
            Ok(set) => set.iter().cloned().collect(),
            Err(poisoned) => poisoned.into_inner().iter().cloned().collect(),
        }
    }

    /// The most recent error message, if any since the last successful write.
    pub fn last_error(&self) -> Option<String> {
        match self.last_error.lock() {
            Ok(e) => e.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Whether consumption is paused waiting for the store.
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    // ---- updates (crate-internal: only ingest writes the status) ----

    pub(crate) fn set_running(&self, v: bool) {
        self.running.store(v, Ordering::Relaxed);
    }

    pub(crate) fn set_kafka_connected(&self, v: bool) {
        self.kafka_connected.store(v, Ordering::Relaxed);
    }

    pub(crate) fn kafka_connected(&self) -> bool {
        self.kafka_connected.load(Ordering::Relaxed)
    }

    pub(crate) fn store_ok(&self) -> bool {
        self.store_ok.load(Ordering::Relaxed)
    }

    pub(crate) fn set_store_ok(&self, v: bool) {
        self.store_ok.store(v, Ordering::Relaxed);
    }

    pub(crate) fn set_paused(&self, v: bool) {
        self.paused.store(v, Ordering::Relaxed);
    }

    pub(crate) fn record_error(&self, message: String) {
        match self.last_error.lock() {
            Ok(mut e) => *e = Some(message),
            Err(poisoned) => *poisoned.into_inner() = Some(message),
        }
    }

    fn clear_error(&self) {
        match self.last_error.lock() {
            Ok(mut e) => *e = None,
            Err(poisoned) => *poisoned.into_inner() = None,
        }
    }

    /// A batch of `records` (of which `new` were new rows) was stored at `now_ms`.
    pub(crate) fn record_store_write(&self, records: u64, new: u64, now_ms: i64) {
        self.records_ingested.fetch_add(records, Ordering::Relaxed);
        self.records_new.fetch_add(new, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.last_store_write_ms.store(now_ms, Ordering::Relaxed);
        self.store_ok.store(true, Ordering::Relaxed);
        self.clear_error();
    }

    /// A refused batch was split and stored: `reduced` records in reduced form,
    /// `quarantined` in quarantine.
    pub(crate) fn record_salvage(&self, reduced: u64, quarantined: u64) {
        self.batches_split.fetch_add(1, Ordering::Relaxed);
        self.records_reduced.fetch_add(reduced, Ordering::Relaxed);
        self.records_quarantined
            .fetch_add(quarantined, Ordering::Relaxed);
    }

    pub(crate) fn record_store_failure(&self, message: String) {
        self.store_failures.fetch_add(1, Ordering::Relaxed);
        self.store_ok.store(false, Ordering::Relaxed);
        self.record_error(message);
    }

    pub(crate) fn record_commit_failure(&self, message: String) {
        self.commit_failures.fetch_add(1, Ordering::Relaxed);
        self.record_error(message);
    }

    /// Replaces the lag figures with librdkafka's latest report, keeping only partitions
    /// assigned now. A paused partition's high watermark is the higher of the report's
    /// (frozen at its last fetch, or unknown) and the one ingest read itself
    /// (`paused_lag.rs`); a partition with neither is left out.
    pub(crate) fn set_lag_from_stats(&self, report: Vec<PartitionOffsets>) {
        let probed = lock(&self.paused_watermarks).clone();
        let lag = report
            .into_iter()
            .filter_map(|p| {
                let (low, high) = match probed.get(&(p.topic.clone(), p.partition)) {
                    Some(&(low, high)) => (p.low.max(low), p.high.max(high)),
                    None => (p.low, p.high),
                };
                if high < 0 {
                    return None;
                }
                let committed = (p.committed >= 0).then_some(p.committed);
                let from = committed.unwrap_or(low.max(0));
                Some(PartitionLag {
                    topic: p.topic,
                    partition: p.partition,
                    high_watermark: high,
                    committed_offset: committed,
                    lag: (high - from).max(0),
                })
            })
            .collect();
        self.set_lag(lag);
    }

    /// Keeps the probed watermarks of `paused` partitions only.
    pub(crate) fn retain_paused_watermarks(&self, paused: &[(String, i32)]) {
        let keep: BTreeSet<&(String, i32)> = paused.iter().collect();
        lock(&self.paused_watermarks).retain(|k, _| keep.contains(k));
    }

    /// Records (low, high) watermarks read for paused partitions.
    pub(crate) fn add_paused_watermarks(&self, read: BTreeMap<(String, i32), (i64, i64)>) {
        lock(&self.paused_watermarks).extend(read);
    }

    fn set_lag(&self, mut lag: Vec<PartitionLag>) {
        let assigned: BTreeSet<(String, i32)> = self.assigned_partitions().into_iter().collect();
        lag.retain(|l| assigned.contains(&(l.topic.clone(), l.partition)));
        lag.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        match self.lag.lock() {
            Ok(mut l) => *l = lag,
            Err(poisoned) => *poisoned.into_inner() = lag,
        }
    }

    pub(crate) fn add_assigned(&self, partitions: impl IntoIterator<Item = (String, i32)>) {
        let mut set = match self.assigned.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        set.extend(partitions);
    }

    pub(crate) fn remove_assigned(&self, partitions: impl IntoIterator<Item = (String, i32)>) {
        let mut set = match self.assigned.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        for p in partitions {
            set.remove(&p);
        }
    }

    pub(crate) fn clear_assigned(&self) {
        match self.assigned.lock() {
            Ok(mut s) => s.clear(),
            Err(poisoned) => poisoned.into_inner().clear(),
        }
    }
}

/// Locks a mutex of plain data, taking it over from a thread that panicked while holding it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(partition: i32, high: i64, low: i64, committed: i64) -> PartitionOffsets {
        PartitionOffsets {
            topic: "t.DLT".into(),
            partition,
            high,
            low,
            committed,
        }
    }

    #[test]
    fn a_paused_partitions_lag_uses_the_watermark_ingest_read_itself() {
        let s = IngestStatus::default();
        s.add_assigned([("t.DLT".to_string(), 0), ("t.DLT".to_string(), 1)]);
        // Partition 0 was fetched up to 2 and then paused; 10 more arrived since. Partition 1
        // was paused as it was assigned: librdkafka never learnt its high watermark.
        let report = || vec![offsets(0, 2, 0, 2), offsets(1, -1, -1, -1)];
        s.set_lag_from_stats(report());
        let lag = s.snapshot().partition_lag;
        assert_eq!(
            lag.len(),
            1,
            "partition 1 has no high watermark yet: {lag:?}"
        );
        assert_eq!(lag[0].lag, 0);

        s.add_paused_watermarks(BTreeMap::from([
            (("t.DLT".to_string(), 0), (0, 12)),
            (("t.DLT".to_string(), 1), (3, 7)),
        ]));
        s.set_lag_from_stats(report());
        let lag = s.snapshot().partition_lag;
        assert_eq!(
            lag.iter()
                .map(|l| (l.partition, l.high_watermark, l.lag))
                .collect::<Vec<_>>(),
            [(0, 12, 10), (1, 7, 4)],
            "12 - committed 2; 7 - log start 3 before any commit"
        );

        // Resumed: fetched again, the probe forgets it and the report's figure is used.
        s.retain_paused_watermarks(&[("t.DLT".to_string(), 1)]);
        s.set_lag_from_stats(vec![offsets(0, 12, 0, 12), offsets(1, -1, -1, -1)]);
        let lag = s.snapshot().partition_lag;
        assert_eq!(
            lag.iter().map(|l| (l.partition, l.lag)).collect::<Vec<_>>(),
            [(0, 0), (1, 4)]
        );
    }

    #[test]
    fn ready_needs_running_kafka_and_store() {
        let s = IngestStatus::default();
        assert!(!s.is_ready());
        s.set_running(true);
        s.set_kafka_connected(true);
        assert!(!s.is_ready());
        s.record_store_write(3, 2, 1_000);
        assert!(s.is_ready());
        let snap = s.snapshot();
        assert_eq!(snap.records_ingested, 3);
        assert_eq!(snap.records_new, 2);
        assert_eq!(snap.last_store_write_ms, Some(1_000));
        s.record_store_failure("down".into());
        assert!(!s.is_ready());
        assert_eq!(s.last_error().as_deref(), Some("down"));
    }

    #[test]
    fn assignment_is_tracked() {
        let s = IngestStatus::default();
        s.add_assigned([("a".to_string(), 1), ("a".to_string(), 0)]);
        s.remove_assigned([("a".to_string(), 1)]);
        assert_eq!(s.assigned_partitions(), vec![("a".to_string(), 0)]);
    }
}
