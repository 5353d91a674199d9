//! Backpressure: which DLQ topics are at their `max_count`/`max_bytes` with
//! `action = "backpressure"`, so that ingest pauses them (Kafka keeps the records; nothing is
//! committed past what is stored, `docs/invariants.md` 1) until space is free again.
//!
//! Two sources move it: every instance's retention loop sets the usage counted in the store
//! ([`Backpressure::set_usage`], every `retention.interval_ms`), and ingest adds what it has
//! just stored ([`Backpressure::record_stored`]) so a burst pauses the topic after the batch
//! that reached the limit rather than at the next count. Ingest follows
//! [`Backpressure::subscribe`] and pauses or resumes the assigned partitions of each topic;
//! a partition assigned later (a rebalance) is paused at once when its topic is paused.
//!
//! Until this instance has counted the usage once ([`Backpressure::mark_counted`], after the
//! first complete usage check), every topic with `action = "backpressure"` is held
//! ([`Backpressure::is_held`]): an instance that starts, or joins the group, while a topic is
//! over its limit would otherwise ingest up to `max_count` more before it knew.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::policy::{LimitAction, RetentionConfig};

/// One paused DLQ topic: what `/readyz`, `/metrics` and the overview show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PausedTopic {
    pub dlq_topic: String,
    /// `max_count` or `max_bytes`: the limit reached.
    pub reason: String,
    /// Live dead letters of the topic, as last counted (plus what ingest stored since).
    pub live_count: u64,
    /// Their bytes (key + value).
    pub live_bytes: u64,
    /// The limit reached (a count, or bytes).
    pub limit: u64,
    /// Since when it is paused, epoch ms.
    pub since_ms: i64,
}

/// The backpressure state of this instance. Share it as `Arc<Backpressure>`.
#[derive(Debug)]
pub struct Backpressure {
    config: RetentionConfig,
    state: Mutex<BTreeMap<String, TopicState>>,
    /// Bumped whenever the set of paused (or held) topics changes.
    changed: watch::Sender<u64>,
    /// Set once the usage of every topic in the store has been counted (see the module docs).
    counted: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Clone, Default)]
struct TopicState {
    count: u64,
    bytes: u64,
    paused: Option<PausedTopic>,
}

use crate::clock::now_ms;

impl Backpressure {
    /// Follows `config`'s policies; nothing is paused until usage is known.
    pub fn new(config: &RetentionConfig) -> Backpressure {
        Backpressure {
            config: config.clone(),
            state: Mutex::new(BTreeMap::new()),
            changed: watch::channel(0).0,
            counted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether ingest must hold `dlq_topic`'s partitions paused: it is paused at its limit,
    /// or it has a backpressure policy and this instance has not counted the usage yet.
    pub fn is_held(&self, dlq_topic: &str) -> bool {
        self.is_paused(dlq_topic) || (!self.is_counted() && self.has_policy(dlq_topic))
    }

    /// True once [`Backpressure::mark_counted`] was called.
    pub fn is_counted(&self) -> bool {
        self.counted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The usage of every DLQ topic in the store has been set ([`Backpressure::set_usage`])
    /// once: topics held only because it was unknown are released (a change is signalled).
    pub fn mark_counted(&self) {
        if !self.counted.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self.changed.send_modify(|g| *g += 1);
        }
    }

    fn has_policy(&self, dlq_topic: &str) -> bool {
        self.config.enabled && self.config.policy(dlq_topic).action == LimitAction::Backpressure
    }

    /// True when some topic's policy can pause it (then ingest and the usage check bother).
    pub fn any_policy(&self) -> bool {
        let has = |p: &super::policy::TopicPolicy| p.action == Some(LimitAction::Backpressure);
        self.config.enabled && (has(&self.config.default) || self.config.topics.values().any(has))
    }

    /// Whether `dlq_topic` is paused now.
    pub fn is_paused(&self, dlq_topic: &str) -> bool {
        self.lock()
            .get(dlq_topic)
            .is_some_and(|s| s.paused.is_some())
    }

    /// The paused topics, by name.
    pub fn paused(&self) -> Vec<PausedTopic> {
        self.lock()
            .values()
            .filter_map(|s| s.paused.clone())
            .collect()
    }

    /// Notified (a new value) whenever the set of paused topics changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// True (once) when the paused set changed since `seen` last looked; `seen` is a
    /// generation kept by the caller.
    pub fn is_changed_for(&self, seen: &std::sync::atomic::AtomicU64) -> bool {
        let now = *self.changed.borrow();
        seen.swap(now, std::sync::atomic::Ordering::SeqCst) != now
    }

    /// The usage counted in the store for `dlq_topic`: live dead letters and their bytes.
    /// Pauses or resumes the topic accordingly.
    pub fn set_usage(&self, dlq_topic: &str, count: u64, bytes: u64) {
        let changed = {
            let mut m = self.lock();
            let s = m.entry(dlq_topic.to_string()).or_default();
            s.count = count;
            s.bytes = bytes;
            self.reevaluate(dlq_topic, s)
        };
        if changed {
            self.changed.send_modify(|g| *g += 1);
        }
    }

    /// Ingest stored `count` records (`bytes` in all) of `dlq_topic`: added to the last count,
    /// so the topic pauses as soon as a batch reaches its limit.
    pub fn record_stored(&self, dlq_topic: &str, count: u64, bytes: u64) {
        if !self.config.enabled {
            return;
        }
        let changed = {
            let mut m = self.lock();
            let s = m.entry(dlq_topic.to_string()).or_default();
            s.count += count;
            s.bytes += bytes;
            self.reevaluate(dlq_topic, s)
        };
        if changed {
            self.changed.send_modify(|g| *g += 1);
        }
    }

    /// Returns whether the paused state changed.
    fn reevaluate(&self, dlq_topic: &str, s: &mut TopicState) -> bool {
        let p = self.config.policy(dlq_topic);
        let over = if !self.config.enabled || p.action != LimitAction::Backpressure {
            None
        } else if let Some(max) = p.max_count.filter(|m| s.count >= *m) {
            Some(("max_count", max))
        } else {
            p.max_bytes
                .filter(|m| s.bytes >= *m)
                .map(|max| ("max_bytes", max))
        };
        match (over, &mut s.paused) {
            (None, None) => false,
            (None, Some(_)) => {
                tracing::info!(
                    dlq_topic,
                    live = s.count,
                    "backpressure released: ingest resumes"
                );
                s.paused = None;
                true
            }
            (Some((reason, limit)), Some(p)) => {
                p.live_count = s.count;
                p.live_bytes = s.bytes;
                p.limit = limit;
                p.reason = reason.to_string();
                false
            }
            (Some((reason, limit)), None) => {
                tracing::warn!(
                    dlq_topic,
                    reason,
                    limit,
                    live = s.count,
                    "retention limit reached: ingest of this DLQ topic is paused (Kafka keeps \
                     the records) until space is free"
                );
                s.paused = Some(PausedTopic {
                    dlq_topic: dlq_topic.to_string(),
                    reason: reason.to_string(),
                    live_count: s.count,
                    live_bytes: s.bytes,
                    limit,
                    since_ms: now_ms(),
                });
                true
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, TopicState>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_at_the_limit_and_resumes_below() {
        let config: RetentionConfig = serde_json::from_str(
            r#"{"topics": {"a": {"max_count": 10, "action": "backpressure"},
                           "b": {"max_count": 10}}}"#,
        )
        .unwrap();
        let bp = Backpressure::new(&config);
        assert!(bp.any_policy());
        let rx = bp.subscribe();
        bp.set_usage("a", 5, 0);
        assert!(!bp.is_paused("a"));
        bp.record_stored("a", 5, 100);
        assert!(bp.is_paused("a"));
        assert!(rx.has_changed().unwrap());
        assert_eq!(bp.paused()[0].reason, "max_count");
        bp.record_stored("b", 50, 0);
        assert!(!bp.is_paused("b"), "purge, not backpressure");
        bp.set_usage("a", 9, 0);
        assert!(!bp.is_paused("a"));
    }

    /// Before the first count, a topic with a backpressure policy is held (an instance that
    /// joins while it is over its limit must not ingest until it knows); after it, only a
    /// topic at its limit is.
    #[test]
    fn holds_backpressure_topics_until_usage_is_counted() {
        let config: RetentionConfig = serde_json::from_str(
            r#"{"topics": {"a": {"max_count": 10, "action": "backpressure"},
                           "b": {"max_count": 10}}}"#,
        )
        .unwrap();
        let bp = Backpressure::new(&config);
        let mut rx = bp.subscribe();
        rx.mark_unchanged();
        assert!(bp.is_held("a") && !bp.is_paused("a"));
        assert!(!bp.is_held("b"), "purge, not backpressure");
        assert!(!bp.is_held("c"), "no policy");
        bp.set_usage("a", 3, 0);
        assert!(bp.is_held("a"), "not every topic counted yet");
        bp.mark_counted();
        assert!(rx.has_changed().unwrap(), "ingest is told to look again");
        assert!(!bp.is_held("a"));
        bp.set_usage("a", 10, 0);
        assert!(bp.is_held("a") && bp.is_paused("a"));
    }
}
