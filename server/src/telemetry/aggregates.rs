//! The store-derived series of `/metrics`, read from the maintained aggregates
//! (`Store::stats`, `Store::arrival_totals`; `docs/stats.md`) — never a scan of
//! `dead_letters` — and from ingest's librdkafka statistics (consumer lag). Every label set is
//! capped (`docs/metrics.md`): at most [`TOPIC_CAP`] DLQ topics, [`PAIR_CAP`] (DLQ topic,
//! source topic) pairs and [`PARTITION_CAP`] partitions get series of their own, largest
//! first; the rest are summed into the label value `(other)`.

use std::collections::BTreeMap;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use redrive_core::ingest::PartitionLag;
use redrive_core::store::{ArrivalTotal, StatsSnapshot, TopicStats};
use redrive_core::Status;

/// Most DLQ topics with series of their own; the rest are `dlq_topic="(other)"`.
pub const TOPIC_CAP: usize = 50;
/// Most (DLQ topic, source topic) pairs with series of their own (ingested totals).
pub const PAIR_CAP: u32 = 100;
/// Most DLQ partitions with a consumer-lag series of their own.
pub const PARTITION_CAP: usize = 500;
/// The label value the series beyond a cap are summed into. Parentheses cannot occur in a
/// Kafka topic name, so it never collides with a real DLQ topic's series.
pub const OTHER: &str = "(other)";
/// The `source_topic` label of dead letters that name no source topic.
pub const NO_SOURCE: &str = "";

/// What one refresh read from the store.
#[derive(Debug, Clone)]
pub struct StoreFigures {
    pub stats: StatsSnapshot,
    pub arrivals: Vec<ArrivalTotal>,
    /// Arrivals of the pairs beyond those in `arrivals`, exactly (`None`: there are none).
    pub arrivals_rest: Option<i64>,
}

/// Per DLQ topic, capped: the first [`TOPIC_CAP`] by live count, then one `other` entry.
fn capped_topics(stats: &StatsSnapshot) -> Vec<(String, TopicStats)> {
    let topics = stats.by_dlq_topic();
    let mut out: Vec<(String, TopicStats)> = Vec::new();
    let mut other: Option<TopicStats> = None;
    for (i, t) in topics.into_iter().enumerate() {
        if i < TOPIC_CAP {
            out.push((t.dlq_topic.clone().unwrap_or_default(), t));
        } else {
            let o = other.get_or_insert_with(TopicStats::default);
            merge(o, &t);
        }
    }
    if let Some(o) = other {
        out.push((OTHER.to_string(), o));
    }
    out
}

fn merge(into: &mut TopicStats, t: &TopicStats) {
    for s in Status::ALL {
        *into.counts.get_mut(s) += t.counts.get(s);
        *into.bytes.get_mut(s) += t.bytes.get(s);
        let slot = into.oldest_ms.get_mut(s);
        *slot = match (*slot, t.oldest_ms.get(s)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

fn gauge(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(value);
    let m = enc.encode_descriptor(name, help, None, g.metric_type())?;
    g.encode(m)
}

/// Writes the aggregate-derived series; `figures` is `None` before the first successful
/// read (the descriptors are still written, so the series are discoverable). `now_ms` makes
/// ages grow between refreshes.
pub fn encode(
    enc: &mut DescriptorEncoder,
    figures: Option<&StoreFigures>,
    now_ms: i64,
) -> Result<(), std::fmt::Error> {
    let topics = figures.map(|f| capped_topics(&f.stats)).unwrap_or_default();
    {
        let g = ConstGauge::new(0i64);
        let mut m = enc.encode_descriptor(
            "redrive_dead_letters_by_topic",
            "Dead letters in the store by DLQ topic and status (at most 50 topics, the rest \
             as dlq_topic=\"(other)\").",
            None,
            g.metric_type(),
        )?;
        for (topic, t) in &topics {
            for s in Status::ALL {
                ConstGauge::new(t.counts.get(s)).encode(
                    m.encode_family(&[("dlq_topic", topic.as_str()), ("status", s.as_str())])?,
                )?;
            }
        }
    }
    {
        let g = ConstGauge::new(0i64);
        let mut m = enc.encode_descriptor(
            "redrive_dead_letter_bytes",
            "Key + value bytes of the live dead letters (every status but deleted) by DLQ topic.",
            None,
            g.metric_type(),
        )?;
        for (topic, t) in &topics {
            ConstGauge::new(t.bytes.live())
                .encode(m.encode_family(&[("dlq_topic", topic.as_str())])?)?;
        }
    }
    for (name, help, pick) in [
        (
            "redrive_oldest_live_dead_letter_age_seconds",
            "Age of the oldest live dead letter (every status but deleted) by DLQ topic, \
             seconds since its dead_lettered_at. No series for a topic with none.",
            (|t: &TopicStats| t.oldest_ms.oldest_live()) as fn(&TopicStats) -> Option<i64>,
        ),
        (
            "redrive_oldest_new_dead_letter_age_seconds",
            "Age of the oldest dead letter nobody has acted on (status new) by DLQ topic, \
             seconds. No series for a topic with none.",
            |t: &TopicStats| t.oldest_ms.new,
        ),
    ] {
        let g = ConstGauge::new(0i64);
        let mut m = enc.encode_descriptor(name, help, None, g.metric_type())?;
        for (topic, t) in &topics {
            if let Some(ms) = pick(t) {
                ConstGauge::new(((now_ms - ms) / 1000).max(0))
                    .encode(m.encode_family(&[("dlq_topic", topic.as_str())])?)?;
            }
        }
    }
    {
        let c = ConstCounter::new(0u64);
        let mut m = enc.encode_descriptor(
            "redrive_dead_letters_ingested_by_topic",
            "Dead letters stored by DLQ topic and source topic (source_topic=\"\" when none is \
             named), from the store's arrival history: across instances and restarts, purges \
             do not lower it. At most 100 pairs, the rest as \"(other)\".",
            None,
            c.metric_type(),
        )?;
        if let Some(f) = figures {
            let mut other = 0i64;
            for (i, a) in f.arrivals.iter().enumerate() {
                if i < PAIR_CAP as usize {
                    let src = a.source_topic.as_deref().unwrap_or(NO_SOURCE);
                    ConstCounter::new(a.total.max(0) as u64).encode(m.encode_family(&[
                        ("dlq_topic", a.dlq_topic.as_str()),
                        ("source_topic", src),
                    ])?)?;
                } else {
                    other += a.total;
                }
            }
            other += f.arrivals_rest.unwrap_or(0);
            if other > 0 || f.arrivals_rest.is_some() {
                ConstCounter::new(other.max(0) as u64)
                    .encode(m.encode_family(&[("dlq_topic", OTHER), ("source_topic", OTHER)])?)?;
            }
        }
    }
    if let Some(f) = figures {
        let jobs = &f.stats.replay_jobs;
        let g = ConstGauge::new(0i64);
        let mut m = enc.encode_descriptor(
            "redrive_replay_jobs",
            "Replay jobs in the store by status.",
            None,
            g.metric_type(),
        )?;
        for (status, n) in [
            ("preparing", jobs.preparing),
            ("running", jobs.running),
            ("waiting", jobs.waiting),
            ("finished", jobs.finished),
            ("cancelled", jobs.cancelled),
        ] {
            ConstGauge::new(n).encode(m.encode_family(&[("status", status)])?)?;
        }
        let c = ConstCounter::new(0u64);
        let mut m = enc.encode_descriptor(
            "redrive_replay_records",
            "Records of all replay jobs in the store by outcome (published, failed), across \
             instances.",
            None,
            c.metric_type(),
        )?;
        for (outcome, n) in [("published", jobs.published), ("failed", jobs.failed)] {
            ConstCounter::new(n.max(0) as u64).encode(m.encode_family(&[("outcome", outcome)])?)?;
        }
        gauge(
            enc,
            "redrive_error_groups",
            "Error groups (fingerprints) with a stored dead letter.",
            f.stats.error_groups_total,
        )?;
        gauge(
            enc,
            "redrive_error_groups_new",
            "Error groups first seen in the last 24 h.",
            f.stats.error_groups_new_24h,
        )?;
    }
    Ok(())
}

/// `redrive_ingest_consumer_lag{dlq_topic, partition}`: capped at [`PARTITION_CAP`]
/// partitions (largest lag first), the rest summed into `other`/`other`.
pub fn encode_lag(
    enc: &mut DescriptorEncoder,
    lag: &[PartitionLag],
) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(0i64);
    let mut m = enc.encode_descriptor(
        "redrive_ingest_consumer_lag",
        "Records ingest is behind per assigned DLQ partition: high watermark minus the \
         group's committed offset (librdkafka statistics, every 5 s).",
        None,
        g.metric_type(),
    )?;
    let mut sorted: Vec<&PartitionLag> = lag.iter().collect();
    sorted.sort_by_key(|l| std::cmp::Reverse(l.lag));
    let mut shown: BTreeMap<(String, i32), i64> = BTreeMap::new();
    let mut other = None;
    for (i, l) in sorted.into_iter().enumerate() {
        if i < PARTITION_CAP {
            shown.insert((l.topic.clone(), l.partition), l.lag);
        } else {
            *other.get_or_insert(0) += l.lag;
        }
    }
    for ((topic, partition), n) in &shown {
        let p = partition.to_string();
        ConstGauge::new(*n).encode(
            m.encode_family(&[("dlq_topic", topic.as_str()), ("partition", p.as_str())])?,
        )?;
    }
    if let Some(n) = other {
        ConstGauge::new(n)
            .encode(m.encode_family(&[("dlq_topic", OTHER), ("partition", OTHER)])?)?;
    }
    Ok(())
}
