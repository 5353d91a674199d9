//! The typed snapshots the aggregate readers return (see `super` and `docs/stats.md`).

use std::collections::BTreeMap;

use crate::model::Status;

/// One minute, in ms (the minute buckets' width).
pub const MINUTE_MS: i64 = 60_000;
/// One hour, in ms (the hour buckets' width).
pub const HOUR_MS: i64 = 3_600_000;
/// Minute buckets older than this (ms) are dropped by [`Store::compact_stats`](crate::store::Store::compact_stats): 25 h, so
/// "new in the last 24 h" is always answered to the minute.
pub const MINUTES_KEPT_MS: i64 = 25 * HOUR_MS;
/// Hour buckets per (DLQ topic, source topic) are kept 35 days.
pub const HOURS_KEPT_MS: i64 = 35 * 24 * HOUR_MS;
/// Hour buckets per error group (the groups page's trend) are kept 8 days.
pub const GROUP_HOURS_KEPT_MS: i64 = 8 * 24 * HOUR_MS;
/// Most (DLQ topic, source topic, status) rows one [`StatsSnapshot`] reads, largest first;
/// beyond it the snapshot says `truncated`. Bounds a snapshot's cost whatever the topics.
pub const STATS_ROW_CAP: i64 = 5_000;
/// Most buckets [`Store::arrivals`](crate::store::Store::arrivals) returns (a 6 h minute chart of 100 topic pairs is
/// 36,000); beyond it the oldest are cut.
pub const ARRIVALS_CAP: i64 = 50_000;

/// One value per dead-letter status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PerStatus<T> {
    pub new: T,
    pub replay_pending: T,
    pub replayed: T,
    pub replay_failed: T,
    /// Replayed, then came back (`re_failed`, migration 0013).
    #[serde(default)]
    pub re_failed: T,
    pub deleted: T,
}

impl<T: Copy> PerStatus<T> {
    /// The value for `status`.
    pub fn get(&self, status: Status) -> T {
        match status {
            Status::New => self.new,
            Status::ReplayPending => self.replay_pending,
            Status::Replayed => self.replayed,
            Status::ReplayFailed => self.replay_failed,
            Status::ReFailed => self.re_failed,
            Status::Deleted => self.deleted,
        }
    }

    /// The value for `status`, to change.
    pub fn get_mut(&mut self, status: Status) -> &mut T {
        match status {
            Status::New => &mut self.new,
            Status::ReplayPending => &mut self.replay_pending,
            Status::Replayed => &mut self.replayed,
            Status::ReplayFailed => &mut self.replay_failed,
            Status::ReFailed => &mut self.re_failed,
            Status::Deleted => &mut self.deleted,
        }
    }
}

impl PerStatus<i64> {
    /// Every status but `deleted` (what the list shows by default).
    pub fn live(&self) -> i64 {
        self.new + self.replay_pending + self.replayed + self.replay_failed + self.re_failed
    }

    /// Every status.
    pub fn total(&self) -> i64 {
        self.live() + self.deleted
    }

    fn add(&mut self, other: &PerStatus<i64>) {
        for s in Status::ALL {
            *self.get_mut(s) += other.get(s);
        }
    }
}

impl PerStatus<Option<i64>> {
    /// The earliest of the statuses but `deleted` (ms), if any.
    pub fn oldest_live(&self) -> Option<i64> {
        [
            self.new,
            self.replay_pending,
            self.replayed,
            self.replay_failed,
            self.re_failed,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn merge_min(&mut self, other: &PerStatus<Option<i64>>) {
        for s in Status::ALL {
            let slot = self.get_mut(s);
            *slot = match (*slot, other.get(s)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
    }
}

/// What the aggregates know of one (DLQ topic, source topic) pair, or of a topic summed over
/// its pairs ([`StatsSnapshot::by_dlq_topic`], [`StatsSnapshot::by_source_topic`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TopicStats {
    /// The DLQ topic; `None` when summed over DLQ topics (by source topic).
    pub dlq_topic: Option<String>,
    /// The source topic; `None` when the dead letters name none, or when summed over source
    /// topics (by DLQ topic: then `per_source` is false).
    pub source_topic: Option<String>,
    /// Stored dead letters per status.
    pub counts: PerStatus<i64>,
    /// Key + value bytes of the stored dead letters per status.
    pub bytes: PerStatus<i64>,
    /// `dead_lettered_at_ms` of the oldest stored dead letter per status (epoch ms).
    pub oldest_ms: PerStatus<Option<i64>>,
    /// Dead letters with `dead_lettered_at_ms >= StatsSnapshot::hour_since_ms` that are
    /// stored now with a status other than `deleted` (a delete or a purge takes them off):
    /// the rows the list `from = hour_since_ms` shows. From the minute buckets' `live_n`.
    pub new_last_hour: i64,
    /// The same from `StatsSnapshot::day_since_ms`.
    pub new_last_24h: i64,
    /// Error groups first seen at or after `day_since_ms` whose first dead letter came
    /// through this pair/topic.
    pub new_groups_24h: i64,
}

impl TopicStats {
    fn absorb(&mut self, other: &TopicStats) {
        self.counts.add(&other.counts);
        self.bytes.add(&other.bytes);
        self.oldest_ms.merge_min(&other.oldest_ms);
        self.new_last_hour += other.new_last_hour;
        self.new_last_24h += other.new_last_24h;
        self.new_groups_24h += other.new_groups_24h;
    }
}

/// Replay jobs per status (see [`crate::actions::JobStatus`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobCounts {
    /// Being filled with its outbox rows (a replay over a large filter).
    pub preparing: i64,
    pub running: i64,
    pub waiting: i64,
    pub finished: i64,
    pub cancelled: i64,
    /// Sum of every job's published records.
    pub published: i64,
    /// Sum of every job's records whose replay failed after its retries.
    pub failed: i64,
}

impl JobCounts {
    /// Jobs not yet done (preparing, running or waiting for Kafka).
    pub fn in_progress(&self) -> i64 {
        self.preparing + self.running + self.waiting
    }
}

/// A consistent-enough picture of the store from the aggregates, taken at `at_ms`
/// ([`Store::stats`](crate::store::Store::stats)). Each table is read by one statement; between statements ingest may
/// add rows, so sums across parts can differ by what arrived meanwhile.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StatsSnapshot {
    /// When it was taken (epoch ms).
    pub at_ms: i64,
    /// Start of the "last hour" window: `floor_minute(at_ms - 1 h)` (epoch ms). A list
    /// filtered with `from` = this shows exactly `new_last_hour` rows (live ones: deleted
    /// and purged dead letters are counted in neither).
    pub hour_since_ms: i64,
    /// Start of the "last 24 h" window: `floor_minute(at_ms - 24 h)` (epoch ms).
    pub day_since_ms: i64,
    /// One entry per (DLQ topic, source topic) with anything stored, largest live first.
    pub pairs: Vec<TopicStats>,
    /// True when more than [`STATS_ROW_CAP`] count rows exist and the smallest were left out.
    pub truncated: bool,
    /// Error groups with a stored dead letter.
    pub error_groups_total: i64,
    /// Error groups first seen at or after `day_since_ms`.
    pub error_groups_new_24h: i64,
    pub replay_jobs: JobCounts,
}

impl StatsSnapshot {
    /// Per DLQ topic (summed over source topics), largest live count first.
    pub fn by_dlq_topic(&self) -> Vec<TopicStats> {
        self.grouped(|p| (p.dlq_topic.clone(), None))
    }

    /// Per source topic (summed over DLQ topics; `source_topic: None` = dead letters that
    /// name no source topic), largest live count first.
    pub fn by_source_topic(&self) -> Vec<TopicStats> {
        self.grouped(|p| (None, p.source_topic.clone()))
    }

    /// Keeps only the DLQ topics `keep` accepts (a user's DLQ-topic scope): the per-topic
    /// rows and every sum made from them. The error-group and job counts are not per topic
    /// and are left as they are.
    pub fn retain_dlq_topics(&mut self, keep: impl Fn(&str) -> bool) {
        self.pairs
            .retain(|p| p.dlq_topic.as_deref().is_some_and(&keep));
    }

    /// Everything summed.
    pub fn totals(&self) -> TopicStats {
        let mut t = TopicStats::default();
        for p in &self.pairs {
            t.absorb(p);
        }
        t
    }

    fn grouped(
        &self,
        key: impl Fn(&TopicStats) -> (Option<String>, Option<String>),
    ) -> Vec<TopicStats> {
        let mut map: BTreeMap<(Option<String>, Option<String>), TopicStats> = BTreeMap::new();
        for p in &self.pairs {
            let k = key(p);
            let e = map.entry(k.clone()).or_insert_with(|| TopicStats {
                dlq_topic: k.0,
                source_topic: k.1,
                ..TopicStats::default()
            });
            e.absorb(p);
        }
        let mut v: Vec<TopicStats> = map.into_values().collect();
        v.sort_by_key(|t| std::cmp::Reverse(t.counts.live()));
        v
    }
}

/// A bucket width of the arrival history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Resolution {
    /// Per minute; kept [`MINUTES_KEPT_MS`].
    Minute,
    /// Per hour; kept [`HOURS_KEPT_MS`].
    Hour,
}

impl Resolution {
    /// The bucket width in ms.
    pub fn bucket_ms(self) -> i64 {
        match self {
            Resolution::Minute => MINUTE_MS,
            Resolution::Hour => HOUR_MS,
        }
    }

    /// `ms` floored to this resolution's bucket start (as the triggers do).
    pub fn floor(self, ms: i64) -> i64 {
        (ms / self.bucket_ms()) * self.bucket_ms()
    }

    pub(super) fn table(self) -> (&'static str, &'static str) {
        match self {
            Resolution::Minute => ("dl_stats_minutes", "minute_ms"),
            Resolution::Hour => ("dl_stats_hours", "hour_ms"),
        }
    }
}

/// Which arrivals [`Store::arrivals`](crate::store::Store::arrivals) returns; `None` = every topic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrivalScope {
    pub dlq_topic: Option<String>,
    /// `Some("")` selects dead letters that name no source topic.
    pub source_topic: Option<String>,
    /// Only these DLQ topics (a user's scope, `Store::topics_in_scope`); `None` = every one.
    pub dlq_topic_in: Option<Vec<String>>,
}

/// Dead letters that arrived in one bucket through one (DLQ topic, source topic) pair.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArrivalBucket {
    pub dlq_topic: String,
    /// `None` = the dead letters name no source topic.
    pub source_topic: Option<String>,
    /// Bucket start (epoch ms); the bucket covers `[start_ms, start_ms + width)`.
    pub start_ms: i64,
    /// Dead letters whose `dead_lettered_at_ms` falls in it.
    pub count: i64,
}

/// What the aggregates know of one error group (fingerprint).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupStats {
    pub fingerprint: String,
    /// Earliest `dead_lettered_at_ms` ever stored with it (a purge does not move it).
    pub first_seen_ms: i64,
    /// Latest `dead_lettered_at_ms` ever stored with it.
    pub last_seen_ms: i64,
    /// Stored dead letters with it, any status.
    pub stored: i64,
    /// DLQ topic, source topic and error class of its earliest dead letter.
    pub dlq_topic: String,
    pub source_topic: Option<String>,
    pub error_class: Option<String>,
}

/// How many dead letters match a filter ([`Store::count_matching`](crate::store::Store::count_matching)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MatchCount {
    /// Exactly this many (from the aggregates, or a count below the cap).
    Exact(i64),
    /// More than this many: the bounded count stopped at the cap.
    MoreThan(i64),
    /// At least this many: a free-text search (`q`) too common for its index step, counted
    /// among the newest dead letters it reads only (`store/search.rs`).
    AtLeast(i64),
}

/// Dead letters ever stored through one (DLQ topic, source topic) ([`super::Store::arrival_totals`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArrivalTotal {
    pub dlq_topic: String,
    /// `None` = the dead letters name no source topic.
    pub source_topic: Option<String>,
    pub total: i64,
}
