//! Lag-aware replay (`ReplayOptions::lag_gate`, `docs/replay.md`, "Lag-aware replay"): a job
//! names the consumer group that reads its target topic(s) and the most records that group may
//! be behind; the relay reads the group's lag and claims nothing while it is at or over the
//! limit, and below it at most the headroom (`max_lag - lag`, minus what the job claimed since
//! the reading), so a burst cannot push the group further behind than the limit plus one
//! claim in flight.
//!
//! # Reading the lag
//! For each partition of the job's target topics: the group's committed offset
//! (`rd_kafka_committed`, through a `BaseConsumer` created with `group.id` = the group, which
//! never subscribes, so it never joins the group or moves its offsets) and the partition's
//! high watermark; lag = Σ (high − committed). A partition the group has no committed offset
//! for counts from its low watermark (everything on it: the most the group could have to
//! read, whatever its `auto.offset.reset`). A group the cluster does not know (no committed
//! offset on any target partition and not listed by the group coordinator) is an error, as
//! are a broker error and a timeout: the job is then held with the reason in `lag_error`,
//! never published blind.
//!
//! These calls block: they run on the blocking pool with a timeout each
//! ([`KAFKA_CALL_TIMEOUT`]) and one for the whole reading ([`READING_TIMEOUT`]), never on the
//! async workers. One reading per (group, topics) is used for `lag_poll_ms`, shared by the
//! jobs that gate on the same group and topics; one consumer per group is kept while jobs use
//! it ([`IDLE_CONSUMER`]) and its readings succeed (a failed reading closes it, and the next
//! one opens a new client: see `LagGates::forget_consumer`).
//!
//! # Where it acts
//! The worker asks [`LagGates::limit`] before every claim. A held job (or one whose headroom
//! is used up) claims nothing: its worker ends and the supervisor comes back to it at its poll
//! interval, so a held job never occupies a worker slot or blocks other jobs, and pause and
//! cancel work as always (they are store state). What was read is written to the job
//! (`Store::record_job_lag`) once per new reading or change of held state, not per poll; the
//! change between held and publishing is logged (`target: redrive::replay`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tokio::time::Instant;

use crate::actions::LagGate;
use crate::store::{ActiveJob, LagWrite, Store, MAX_LAG_TOPICS};

use super::kafka::RESERVED_PROPERTIES;
use super::{now_ms, RelayConfig};

/// Longest wait for one Kafka call of a reading (metadata, watermarks, committed offsets,
/// the group list).
pub(super) const KAFKA_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for a whole reading; past it the job is held with "timed out".
pub(super) const READING_TIMEOUT: Duration = Duration::from_secs(15);
/// A group's consumer unused for this long is closed.
const IDLE_CONSUMER: Duration = Duration::from_secs(600);
/// A job's gate state unused for this long is forgotten (the job ended or moved elsewhere).
const IDLE_JOB: Duration = Duration::from_secs(600);

type GroupConsumer = BaseConsumer;

/// One reading of a group's lag on a set of topics.
#[derive(Debug, Clone)]
struct Reading {
    /// Records behind, or why it could not be read.
    lag: Result<i64, String>,
    at: Instant,
    at_ms: i64,
    /// Distinguishes readings: a job's claims since a reading count against its headroom.
    generation: u64,
}

/// What the relay keeps per lag-gated job.
#[derive(Debug)]
struct JobGate {
    topics: Vec<String>,
    /// The reading the job's claims are counted against, and how many rows it claimed since.
    generation: u64,
    claimed: u64,
    /// The reading last written to the job row, and whether it was held then.
    written: Option<(u64, bool)>,
    used: Instant,
}

/// The relay's lag gates: readings, per-job state, one consumer per group.
#[derive(Default)]
pub(super) struct LagGates {
    readings: Mutex<HashMap<(String, Vec<String>), Reading>>,
    jobs: Mutex<HashMap<String, JobGate>>,
    consumers: Mutex<HashMap<String, (Arc<GroupConsumer>, Instant)>>,
    next_generation: std::sync::atomic::AtomicU64,
}

/// What the gate decided for a job, from a reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decision {
    /// Claim at most this many rows.
    Claim(u64),
    /// Claim nothing until the next reading: the headroom is used up by the job's own claims.
    Wait,
    /// Held back: the lag is at or over the limit, or could not be read.
    Held,
}

/// The gate's rule: held while `lag >= max_lag` or unreadable; below, the headroom
/// `max_lag - lag - claimed_since_reading`.
pub(super) fn decide(lag: &Result<i64, String>, max_lag: u64, claimed: u64) -> Decision {
    let Ok(lag) = lag else {
        return Decision::Held;
    };
    let lag = u64::try_from(*lag).unwrap_or(0);
    if lag >= max_lag {
        return Decision::Held;
    }
    match (max_lag - lag).saturating_sub(claimed) {
        0 => Decision::Wait,
        n => Decision::Claim(n),
    }
}

impl LagGates {
    /// How many rows `job` may claim now: `want` without a lag gate; else at most the
    /// headroom of the latest reading (read first if the last is older than `lag_poll_ms`);
    /// `None` = claim nothing now (held, or the headroom used up until the next reading).
    pub(super) async fn limit(
        &self,
        config: &RelayConfig,
        store: &Store,
        job: &ActiveJob,
        want: usize,
    ) -> Option<usize> {
        let Some(gate) = &job.options.lag_gate else {
            return Some(want);
        };
        if !job.publishing {
            // Only settling expired claims of a cancelled or paused job: nothing new is
            // published, so the group's lag has no say.
            return Some(want);
        }
        let topics = self.topics(store, &job.id).await?;
        let reading = if topics.len() > MAX_LAG_TOPICS {
            Reading {
                lag: Err(format!(
                    "the job publishes to more than {MAX_LAG_TOPICS} topics; a lag gate reads at \
                     most {MAX_LAG_TOPICS}"
                )),
                at: Instant::now(),
                at_ms: now_ms(),
                generation: 0,
            }
        } else {
            self.reading(config, gate, &topics).await
        };
        let (decision, write) = {
            let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
            let js = jobs.get_mut(&job.id)?;
            js.used = Instant::now();
            if js.generation != reading.generation {
                js.generation = reading.generation;
                js.claimed = 0;
            }
            let decision = decide(&reading.lag, gate.max_lag, js.claimed);
            let held = decision == Decision::Held;
            let before = js.written;
            let write = (before != Some((reading.generation, held))).then(|| {
                js.written = Some((reading.generation, held));
                before.map(|(_, h)| h)
            });
            (decision, write)
        };
        if let Some(was_held) = write {
            self.write(store, job, gate, &reading, decision, was_held)
                .await;
        }
        match decision {
            Decision::Claim(n) => Some(want.min(usize::try_from(n).unwrap_or(usize::MAX))),
            Decision::Wait | Decision::Held => None,
        }
    }

    /// Counts rows `job_id` claimed against its current reading's headroom.
    pub(super) fn claimed(&self, job_id: &str, rows: usize) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(js) = jobs.get_mut(job_id) {
            js.claimed = js.claimed.saturating_add(rows as u64);
        }
    }

    /// The job's target topics (read from the store once per job).
    async fn topics(&self, store: &Store, job_id: &str) -> Option<Vec<String>> {
        {
            let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
            jobs.retain(|_, j| j.used.elapsed() < IDLE_JOB);
            if let Some(j) = jobs.get(job_id) {
                return Some(j.topics.clone());
            }
        }
        match store.job_target_topics(job_id).await {
            Ok(topics) => {
                let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
                jobs.insert(
                    job_id.to_string(),
                    JobGate {
                        topics: topics.clone(),
                        generation: u64::MAX,
                        claimed: 0,
                        written: None,
                        used: Instant::now(),
                    },
                );
                Some(topics)
            }
            Err(e) => {
                tracing::warn!(target: "redrive::replay", error = %e, "cannot read the lag-gated job's target topics; retrying later");
                None
            }
        }
    }

    /// The latest reading of `gate.group` on `topics`, read now if the cached one is older
    /// than the poll interval.
    async fn reading(&self, config: &RelayConfig, gate: &LagGate, topics: &[String]) -> Reading {
        let key = (gate.group.clone(), topics.to_vec());
        let poll = Duration::from_millis(config.effective_lag_poll_ms());
        {
            let readings = self.readings.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(r) = readings.get(&key) {
                if r.at.elapsed() < poll {
                    return r.clone();
                }
            }
        }
        let lag = match self.consumer(config, &gate.group) {
            Ok(consumer) => {
                let group = gate.group.clone();
                let topics = topics.to_vec();
                let read =
                    tokio::task::spawn_blocking(move || read_lag(&consumer, &group, &topics));
                match tokio::time::timeout(READING_TIMEOUT, read).await {
                    Ok(Ok(lag)) => lag,
                    Ok(Err(e)) => Err(format!("reading the lag failed: {e}")),
                    Err(_) => Err(format!(
                        "reading the lag timed out after {} s",
                        READING_TIMEOUT.as_secs()
                    )),
                }
            }
            Err(e) => Err(e),
        };
        if lag.is_err() {
            self.forget_consumer(&gate.group);
        }
        let reading = Reading {
            lag,
            at: Instant::now(),
            at_ms: now_ms(),
            generation: self
                .next_generation
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        };
        let mut readings = self.readings.lock().unwrap_or_else(|p| p.into_inner());
        readings.retain(|_, r| r.at.elapsed() < IDLE_JOB);
        readings.insert(key, reading.clone());
        reading
    }

    /// The group's consumer (created on first use; idle ones are closed off the async
    /// workers). Errors: librdkafka's refusal of the configuration.
    fn consumer(&self, config: &RelayConfig, group: &str) -> Result<Arc<GroupConsumer>, String> {
        let mut consumers = self.consumers.lock().unwrap_or_else(|p| p.into_inner());
        let idle: Vec<String> = consumers
            .iter()
            .filter(|(g, (_, used))| g.as_str() != group && used.elapsed() >= IDLE_CONSUMER)
            .map(|(g, _)| g.clone())
            .collect();
        for g in idle {
            if let Some((c, _)) = consumers.remove(&g) {
                // Closing a consumer waits for its threads: not on an async worker.
                tokio::task::spawn_blocking(move || drop(c));
            }
        }
        if let Some((c, used)) = consumers.get_mut(group) {
            *used = Instant::now();
            return Ok(c.clone());
        }
        let c: GroupConsumer = consumer_config(config, group)
            .create()
            .map_err(|e| format!("cannot create a client for consumer group `{group}`: {e}"))?;
        let c = Arc::new(c);
        consumers.insert(group.to_string(), (c.clone(), Instant::now()));
        Ok(c)
    }

    /// Closes `group`'s client after a failed reading, so the next reading opens a new one from
    /// the bootstrap servers: a client that a broker's Metadata response left with no broker
    /// never reconnects by itself (librdkafka issue #5301, `crate::kafka_brokers`), and this
    /// one has no statistics to notice it by. Closed off the async workers.
    fn forget_consumer(&self, group: &str) {
        let mut consumers = self.consumers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((c, _)) = consumers.remove(group) {
            tokio::task::spawn_blocking(move || drop(c));
        }
    }

    /// Writes the reading to the job row and logs a change between held and publishing.
    async fn write(
        &self,
        store: &Store,
        job: &ActiveJob,
        gate: &LagGate,
        reading: &Reading,
        decision: Decision,
        was_held: Option<bool>,
    ) {
        let held = decision == Decision::Held;
        let w = LagWrite {
            records: reading.lag.as_ref().ok().copied(),
            read_at_ms: reading.at_ms,
            held,
            error: reading.lag.as_ref().err().map(String::as_str),
        };
        if let Err(e) = store.record_job_lag(&job.id, &w).await {
            tracing::warn!(target: "redrive::replay", error = %e, "cannot record the job's consumer lag");
            // Written again with the next decision.
            let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(js) = jobs.get_mut(&job.id) {
                js.written = None;
            }
            return;
        }
        if was_held != Some(held) {
            match (&reading.lag, held) {
                (Err(e), _) => tracing::warn!(
                    target: "redrive::replay", group = %gate.group, max_lag = gate.max_lag,
                    error = %e, "replay held: the consumer group's lag cannot be read"
                ),
                (Ok(lag), true) => tracing::info!(
                    target: "redrive::replay", group = %gate.group, max_lag = gate.max_lag,
                    lag, "replay held: the consumer group is behind"
                ),
                (Ok(lag), false) if was_held == Some(true) => tracing::info!(
                    target: "redrive::replay", group = %gate.group, max_lag = gate.max_lag,
                    lag, "replay released: the consumer group caught up"
                ),
                (Ok(_), false) => {}
            }
        }
    }
}

/// The client that reads `group`'s committed offsets: the `[kafka]` properties (SASL/SSL)
/// minus the relay's reserved producer ones, `group.id`, and no auto commit. It never
/// subscribes, so it never joins the group.
fn consumer_config(config: &RelayConfig, group: &str) -> ClientConfig {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", &config.brokers)
        .set_log_level(RDKafkaLogLevel::Warning);
    for (k, v) in &config.kafka_properties {
        if !RESERVED_PROPERTIES.contains(&k.trim().to_ascii_lowercase().as_str()) {
            cfg.set(k, v);
        }
    }
    cfg.set("client.id", "redrive-lag-gate")
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false");
    cfg
}

/// One reading of consumer group `group`'s lag on `topics`, records, with a client of its
/// own (created and closed here): the scheduler's lag gate (`docs/automation.md`, "Health
/// gates"), by the same rule as a job's lag gate (module docs). Blocking: call it on the
/// blocking pool.
///
/// Errors: the client cannot be created, or what could not be read (as a job's gate).
pub fn read_group_lag(config: &RelayConfig, group: &str, topics: &[String]) -> Result<i64, String> {
    let c: GroupConsumer = consumer_config(config, group)
        .create()
        .map_err(|e| format!("cannot create a client for consumer group `{group}`: {e}"))?;
    read_lag(&c, group, topics)
}

/// Reads `group`'s lag on `topics` (blocking; see the module docs for the rule).
///
/// Errors: a message naming what could not be read (a topic's metadata, a partition's
/// watermarks, the committed offsets, an unknown group).
fn read_lag(consumer: &GroupConsumer, group: &str, topics: &[String]) -> Result<i64, String> {
    let mut tpl = TopicPartitionList::new();
    let mut watermarks: HashMap<(String, i32), (i64, i64)> = HashMap::new();
    for topic in topics {
        let metadata = consumer
            .fetch_metadata(Some(topic), KAFKA_CALL_TIMEOUT)
            .map_err(|e| format!("metadata of topic `{topic}`: {e}"))?;
        let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else {
            return Err(format!("the cluster's metadata has no topic `{topic}`"));
        };
        if let Some(e) = t.error() {
            let code = rdkafka::types::RDKafkaErrorCode::from(e);
            return Err(format!("metadata of topic `{topic}`: {code}"));
        }
        for p in t.partitions() {
            let marks = consumer
                .fetch_watermarks(topic, p.id(), KAFKA_CALL_TIMEOUT)
                .map_err(|e| format!("watermarks of `{topic}` partition {}: {e}", p.id()))?;
            watermarks.insert((topic.clone(), p.id()), marks);
            tpl.add_partition(topic, p.id());
        }
    }
    let committed = consumer
        .committed_offsets(tpl, KAFKA_CALL_TIMEOUT)
        .map_err(|e| format!("committed offsets of consumer group `{group}`: {e}"))?;
    let mut lag: i64 = 0;
    let mut any_committed = false;
    for e in committed.elements() {
        if let Err(err) = e.error() {
            return Err(format!(
                "committed offset of consumer group `{group}` on `{}` partition {}: {err}",
                e.topic(),
                e.partition()
            ));
        }
        let (low, high) = watermarks
            .get(&(e.topic().to_string(), e.partition()))
            .copied()
            .unwrap_or((0, 0));
        let from = match e.offset() {
            Offset::Offset(n) => {
                any_committed = true;
                n
            }
            _ => low,
        };
        lag = lag.saturating_add(high.saturating_sub(from.max(low)).max(0));
    }
    if !any_committed && !group_known(consumer, group)? {
        return Err(format!(
            "consumer group `{group}` is unknown to the cluster: it has no members and no \
             committed offsets on {}",
            topic_list(topics)
        ));
    }
    Ok(lag)
}

/// Whether the cluster lists `group` (any state but `Dead`).
fn group_known(consumer: &GroupConsumer, group: &str) -> Result<bool, String> {
    let list = consumer
        .fetch_group_list(Some(group), KAFKA_CALL_TIMEOUT)
        .map_err(|e| format!("looking up consumer group `{group}`: {e}"))?;
    Ok(list
        .groups()
        .iter()
        .any(|g| g.name() == group && !g.state().eq_ignore_ascii_case("dead")))
}

/// "`a`" or "`a`, `b`" (at most 3 named).
fn topic_list(topics: &[String]) -> String {
    let named: Vec<String> = topics.iter().take(3).map(|t| format!("`{t}`")).collect();
    match topics.len() {
        n if n > 3 => format!("{} and {} more topics", named.join(", "), n - 3),
        _ => named.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cancelled or paused job the relay visits only to settle expired claims is not held
    /// by its gate, even one that could never be read (no broker, an unknown group): those
    /// claims must be settled.
    #[tokio::test]
    async fn a_job_that_does_not_publish_is_not_held_by_its_gate() {
        let (store, _dir) = crate::store::test_file::sqlite_store("t.db").await;
        let job = ActiveJob {
            id: "cancelled-job".into(),
            created_by: "eve".into(),
            rate_per_sec: None,
            waiting_since_ms: None,
            options: crate::actions::ReplayOptions {
                lag_gate: Some(crate::actions::LagGate {
                    group: "nobody".into(),
                    max_lag: 1,
                }),
                ..Default::default()
            },
            publishing: false,
        };
        let config = RelayConfig {
            brokers: "127.0.0.1:1".into(),
            ..RelayConfig::default()
        };
        let gates = LagGates::default();
        assert_eq!(gates.limit(&config, &store, &job, 500).await, Some(500));
    }

    #[test]
    fn held_at_or_over_the_limit_and_capped_by_the_headroom_below() {
        assert_eq!(decide(&Ok(0), 100, 0), Decision::Claim(100));
        assert_eq!(decide(&Ok(40), 100, 0), Decision::Claim(60));
        assert_eq!(decide(&Ok(40), 100, 50), Decision::Claim(10));
        assert_eq!(decide(&Ok(40), 100, 60), Decision::Wait);
        assert_eq!(decide(&Ok(100), 100, 0), Decision::Held);
        assert_eq!(decide(&Ok(5_000), 100, 0), Decision::Held);
        assert_eq!(decide(&Err("no group".into()), 100, 0), Decision::Held);
        assert_eq!(decide(&Ok(0), 1, 0), Decision::Claim(1));
    }

    #[test]
    fn the_consumer_keeps_security_properties_but_not_producer_ones() {
        let c = RelayConfig {
            kafka_properties: vec![
                ("security.protocol".into(), "SASL_SSL".into()),
                ("acks".into(), "1".into()),
            ],
            ..RelayConfig::default()
        };
        let cfg = consumer_config(&c, "orders-service");
        assert_eq!(cfg.get("group.id"), Some("orders-service"));
        assert_eq!(cfg.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(cfg.get("acks"), None);
        assert_eq!(cfg.get("enable.auto.commit"), Some("false"));
    }

    #[test]
    fn topic_lists_are_short() {
        let t: Vec<String> = (1..=5).map(|i| format!("t{i}")).collect();
        assert_eq!(topic_list(&t[..1]), "`t1`");
        assert_eq!(topic_list(&t), "`t1`, `t2`, `t3` and 2 more topics");
    }
}
