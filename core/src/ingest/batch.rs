//! The batch in hand: records consumed but not yet stored, and the offsets that become
//! committable once they are.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::time::Instant;

use crate::model::NewDeadLetter;
use crate::store::Prepared;

/// Records waiting for one store transaction, plus per partition the lowest and highest
/// offset among them.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    records: Vec<NewDeadLetter>,
    /// `Prepared::of` each record, computed as it arrives (while the previous batch is
    /// written), in the same order as `records`.
    prepared: Vec<Prepared>,
    /// (topic, partition, offset) already in `records`: after an eager rebalance that hands us
    /// back the same partition, librdkafka re-fetches from the committed offset, so a record
    /// can arrive twice before it is stored.
    seen: HashSet<(String, i32, i64)>,
    /// (topic, partition) -> (lowest offset, highest offset) in this batch.
    ranges: BTreeMap<(String, i32), (i64, i64)>,
    /// When the first record of this batch arrived (for `linger_ms`).
    started: Option<Instant>,
}

impl Batch {
    pub(crate) fn push(&mut self, record: NewDeadLetter) {
        let r = &record.record;
        let id = (r.dlq_topic.clone(), r.dlq_partition, r.dlq_offset);
        if !self.seen.insert(id) {
            return;
        }
        let range = self
            .ranges
            .entry((r.dlq_topic.clone(), r.dlq_partition))
            .or_insert((r.dlq_offset, r.dlq_offset));
        range.0 = range.0.min(r.dlq_offset);
        range.1 = range.1.max(r.dlq_offset);
        self.started.get_or_insert_with(Instant::now);
        self.prepared.push(Prepared::of(&record));
        self.records.push(record);
    }

    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub(crate) fn records(&self) -> &[NewDeadLetter] {
        &self.records
    }

    /// [`Prepared`] of each of [`Batch::records`], same order.
    pub(crate) fn prepared(&self) -> &[Prepared] {
        &self.prepared
    }

    /// When the first record arrived, if any.
    pub(crate) fn started(&self) -> Option<Instant> {
        self.started
    }

    /// The offsets to commit once this batch is stored: per partition, the offset of the
    /// next record to read (highest stored offset + 1, Kafka's commit convention).
    pub(crate) fn next_offsets(&self) -> impl Iterator<Item = ((String, i32), i64)> + '_ {
        self.ranges
            .iter()
            .map(|(tp, (_, last))| (tp.clone(), last.saturating_add(1)))
    }

    /// "orders.DLT/0:10..42, orders.DLT/1:7..7" — for logs and the batch span.
    pub(crate) fn describe(&self) -> String {
        let mut s = String::new();
        for ((topic, partition), (first, last)) in &self.ranges {
            if !s.is_empty() {
                s.push_str(", ");
            }
            let _ = write!(s, "{topic}/{partition}:{first}..{last}");
        }
        s
    }

    /// The records, in arrival order (the batch is consumed).
    pub(crate) fn into_records(self) -> Vec<NewDeadLetter> {
        self.records
    }

    pub(crate) fn clear(&mut self) {
        self.records.clear();
        self.prepared.clear();
        self.seen.clear();
        self.ranges.clear();
        self.started = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Convention, Normalized, RawRecord};

    fn rec(topic: &str, partition: i32, offset: i64) -> NewDeadLetter {
        NewDeadLetter {
            record: RawRecord {
                dlq_topic: topic.into(),
                dlq_partition: partition,
                dlq_offset: offset,
                timestamp_ms: None,
                key: None,
                value: None,
                headers: vec![],
            },
            convention: Convention::Unknown,
            normalized: Normalized::default(),
            fingerprint: String::new(),
            dead_lettered_at_ms: 0,
            ingested_at_ms: 0,
        }
    }

    #[test]
    fn next_offsets_are_highest_plus_one_and_duplicates_dropped() {
        let mut b = Batch::default();
        b.push(rec("a", 0, 5));
        b.push(rec("a", 0, 3));
        b.push(rec("a", 0, 5));
        b.push(rec("b", 2, 9));
        assert_eq!(b.len(), 3);
        let offs: Vec<_> = b.next_offsets().collect();
        assert_eq!(
            offs,
            vec![(("a".to_string(), 0), 6), (("b".to_string(), 2), 10)]
        );
        assert_eq!(b.describe(), "a/0:3..5, b/2:9..9");
        b.clear();
        assert!(b.is_empty() && b.started().is_none());
    }
}
