//! The `[retention]` section of `redrive.toml`: a global default policy, per-DLQ-topic
//! overrides, how often and in what chunks the purge runs, and the archive it writes first.
//! The user documentation of every key is `docs/retention.md`; a test keeps them in step.
//!
//! ```toml
//! [retention]
//! interval_ms = 60000
//! [retention.default]
//! max_age_ms = 1209600000          # live dead letters: 14 days
//! deleted_max_age_ms = 604800000   # deleted ones: 7 days after the delete
//! [retention.topics."orders.DLT"]
//! max_count = 100000
//! action = "backpressure"
//! [retention.archive]
//! location = "s3://dlq-archive/redrive"
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Default [`RetentionConfig::interval_ms`]: a purge run and a usage check a minute.
pub const DEFAULT_INTERVAL_MS: u64 = 60_000;
/// Default [`RetentionConfig::chunk_rows`]: dead letters per delete transaction.
pub const DEFAULT_CHUNK_ROWS: usize = 1_000;
/// Largest allowed [`RetentionConfig::chunk_rows`].
pub const MAX_CHUNK_ROWS: usize = 10_000;
/// Default [`RetentionConfig::max_rows_per_run`].
pub const DEFAULT_MAX_ROWS_PER_RUN: usize = 100_000;
/// Built-in `deleted_max_age_ms` and `replayed_max_age_ms`: 30 days.
pub const DEFAULT_DONE_MAX_AGE_MS: u64 = 30 * 24 * 60 * 60 * 1000;

/// `[retention]`. Every field has a default; an empty section (or none) purges deleted and
/// replayed dead letters 30 days after they were deleted or replayed, and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// Whether retention runs at all. Default `true` (with the built-in policy above).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// How often the purge runs (on the leader) and every instance re-checks the usage that
    /// backpressure follows, ms (at least 100). Default 60000.
    #[serde(default = "default_interval_ms")]
    pub interval_ms: u64,
    /// Dead letters deleted per transaction (1 to 10000). Default 1000.
    #[serde(default = "default_chunk_rows")]
    pub chunk_rows: usize,
    /// Most dead letters one run purges; the rest waits for the next run (bounds a run's
    /// memory: its ids are held, 8 bytes each). Default 100000.
    #[serde(default = "default_max_rows_per_run")]
    pub max_rows_per_run: usize,
    /// The policy of every DLQ topic without an entry in `topics`.
    #[serde(default)]
    pub default: TopicPolicy,
    /// Per DLQ topic (exact name): the fields given override `default`'s.
    #[serde(default)]
    pub topics: BTreeMap<String, TopicPolicy>,
    /// Where purged dead letters are archived first (and on-demand archives go); none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveConfig>,
}

/// What happens when a DLQ topic reaches `max_count` or `max_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LimitAction {
    /// Purge the oldest purgeable live dead letters (archived first when an archive is
    /// configured) until the topic is under the limit.
    #[default]
    Purge,
    /// Pause ingest of the topic (Kafka keeps the records) until it is under the limit again.
    Backpressure,
}

impl LimitAction {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitAction::Purge => "purge",
            LimitAction::Backpressure => "backpressure",
        }
    }
}

/// One policy (`[retention.default]` or `[retention.topics."NAME"]`). Absent fields inherit
/// (a topic's from `default`, `default`'s from the built-in values); `0` turns a limit off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicPolicy {
    /// Live dead letters (status not `deleted`/`replayed`) dead-lettered longer ago than this
    /// are purged, ms. Built-in: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_ms: Option<u64>,
    /// Most live dead letters of the topic. Built-in: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_count: Option<u64>,
    /// Most bytes (key + value) of live dead letters of the topic.
    /// Built-in: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Deleted dead letters are purged this long after the delete, ms. Built-in: 30 days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_max_age_ms: Option<u64>,
    /// Replayed dead letters are purged this long after the replay, ms. Built-in: 30 days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed_max_age_ms: Option<u64>,
    /// Dead letters in the `archive` automation tier (`docs/automation.md`, "Retention of
    /// the archive tier") are purged this long after they entered it, whatever their status
    /// (but `replay_pending`), ms. Built-in: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_tier_max_age_ms: Option<u64>,
    /// At `max_count`/`max_bytes`: `purge` or `backpressure`. Built-in: `purge`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<LimitAction>,
    /// Whether live limits may purge dead letters nobody has acted on (status `new`).
    /// Built-in: `false` (only `replay_failed` ones are purged by the live limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_new: Option<bool>,
}

/// `[retention.archive]`: a directory or an S3-compatible bucket (see `docs/retention.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveConfig {
    /// `s3://BUCKET/PREFIX`, `file:///DIR` or a directory path.
    pub location: String,
    /// Archive every purged dead letter before deleting it. Default `true`.
    #[serde(default = "default_true")]
    pub before_purge: bool,
    /// S3 endpoint URL for S3-compatible stores (MinIO, Ceph, moto); default AWS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_endpoint: Option<String>,
    /// S3 region. Default `us-east-1` (or `AWS_REGION`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_region: Option<String>,
    /// Access key id; default from `AWS_ACCESS_KEY_ID` and the usual AWS sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_access_key_id: Option<String>,
    /// Secret access key; default from `AWS_SECRET_ACCESS_KEY`. Redacted by `redrive config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_secret_access_key: Option<String>,
    /// Allow a plain-HTTP endpoint. Default `false`.
    #[serde(default)]
    pub s3_allow_http: bool,
}

/// One topic's policy with every field resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// ms; `None` = no limit.
    pub max_age_ms: Option<u64>,
    pub max_count: Option<u64>,
    /// bytes
    pub max_bytes: Option<u64>,
    /// ms
    pub deleted_max_age_ms: Option<u64>,
    /// ms
    pub replayed_max_age_ms: Option<u64>,
    /// ms since entering the archive tier
    pub archive_tier_max_age_ms: Option<u64>,
    pub action: LimitAction,
    pub purge_new: bool,
}

fn default_true() -> bool {
    true
}
fn default_interval_ms() -> u64 {
    DEFAULT_INTERVAL_MS
}
fn default_chunk_rows() -> usize {
    DEFAULT_CHUNK_ROWS
}
fn default_max_rows_per_run() -> usize {
    DEFAULT_MAX_ROWS_PER_RUN
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            enabled: true,
            interval_ms: DEFAULT_INTERVAL_MS,
            chunk_rows: DEFAULT_CHUNK_ROWS,
            max_rows_per_run: DEFAULT_MAX_ROWS_PER_RUN,
            default: TopicPolicy::default(),
            topics: BTreeMap::new(),
            archive: None,
        }
    }
}

/// `Some(0)` is "off".
fn limit(v: Option<u64>) -> Option<u64> {
    v.filter(|n| *n > 0)
}

impl RetentionConfig {
    /// The resolved policy of `dlq_topic`: its entry's fields, else `default`'s, else built-in.
    pub fn policy(&self, dlq_topic: &str) -> Policy {
        let d = &self.default;
        let t = self.topics.get(dlq_topic);
        let pick = |f: fn(&TopicPolicy) -> Option<u64>| t.and_then(f).or_else(|| f(d));
        Policy {
            max_age_ms: limit(pick(|p| p.max_age_ms)),
            max_count: limit(pick(|p| p.max_count)),
            max_bytes: limit(pick(|p| p.max_bytes)),
            deleted_max_age_ms: limit(
                pick(|p| p.deleted_max_age_ms).or(Some(DEFAULT_DONE_MAX_AGE_MS)),
            ),
            replayed_max_age_ms: limit(
                pick(|p| p.replayed_max_age_ms).or(Some(DEFAULT_DONE_MAX_AGE_MS)),
            ),
            archive_tier_max_age_ms: limit(pick(|p| p.archive_tier_max_age_ms)),
            action: t.and_then(|p| p.action).or(d.action).unwrap_or_default(),
            purge_new: t.and_then(|p| p.purge_new).or(d.purge_new).unwrap_or(false),
        }
    }

    /// Checks what serde cannot; the message names the key to fix.
    pub fn check(&self) -> Result<(), String> {
        if self.interval_ms < 100 {
            return Err("`retention.interval_ms` must be at least 100".into());
        }
        if !(1..=MAX_CHUNK_ROWS).contains(&self.chunk_rows) {
            return Err(format!(
                "`retention.chunk_rows` must be within 1 and {MAX_CHUNK_ROWS}"
            ));
        }
        if self.max_rows_per_run == 0 {
            return Err("`retention.max_rows_per_run` must be at least 1".into());
        }
        if let Some(name) = self.topics.keys().find(|t| t.trim().is_empty()) {
            return Err(format!("`retention.topics`: `{name}` is not a topic name"));
        }
        if let Some(a) = &self.archive {
            crate::archive::ArchiveLocation::parse(&a.location)
                .map_err(|e| format!("`retention.archive.location`: {e}"))?;
        }
        Ok(())
    }

    /// The same configuration with secrets replaced by `redacted` (for `redrive config`).
    pub fn redacted(&self, redacted: &str) -> RetentionConfig {
        let mut shown = self.clone();
        if let Some(a) = &mut shown.archive {
            if a.s3_secret_access_key.is_some() {
                a.s3_secret_access_key = Some(redacted.to_string());
            }
        }
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_inherit_from_default_and_builtins() {
        let c: RetentionConfig = toml_like(
            r#"{"default": {"max_age_ms": 1000, "deleted_max_age_ms": 0},
                "topics": {"a": {"max_count": 5, "action": "backpressure", "max_age_ms": 0}}}"#,
        );
        let a = c.policy("a");
        assert_eq!(a.max_age_ms, None, "0 turns the default's limit off");
        assert_eq!(a.max_count, Some(5));
        assert_eq!(a.action, LimitAction::Backpressure);
        assert_eq!(a.deleted_max_age_ms, None);
        assert_eq!(a.replayed_max_age_ms, Some(DEFAULT_DONE_MAX_AGE_MS));
        let b = c.policy("b");
        assert_eq!(b.max_age_ms, Some(1000));
        assert_eq!(b.max_count, None);
        assert_eq!(b.action, LimitAction::Purge);
        assert!(!b.purge_new);
        assert!(c.check().is_ok());
        let bad = RetentionConfig {
            chunk_rows: 0,
            ..RetentionConfig::default()
        };
        assert!(bad.check().unwrap_err().contains("chunk_rows"));
    }

    fn toml_like(json: &str) -> RetentionConfig {
        serde_json::from_str(json).unwrap()
    }
}
