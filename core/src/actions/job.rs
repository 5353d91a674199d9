//! Replay jobs and their progress: a job's lifecycle ([`JobStatus`]), the job itself
//! ([`ReplayJob`]), its transform counters, its lag gate's last reading and how far its bulk
//! action has queued.

use serde::{Deserialize, Serialize};

use super::ReplayOptions;
use crate::canary::CanaryStatus;

#[cfg(doc)]
use super::Selection;

/// Lifecycle of a replay job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// A replay over a large filter is still writing its outbox rows, in chunks; nothing is
    /// published until the last chunk commits with the audit row (then `running`).
    Preparing,
    /// Outbox rows are being published.
    Running,
    /// Kafka is unreachable; the relay backs off and resumes by itself.
    Waiting,
    /// Paused by a person: the relay claims none of its rows (and hands back the ones it
    /// holds unsent) until it is resumed; `Store::pause_job` / `resume_job`.
    Paused,
    /// Every row is published or failed.
    Finished,
    /// Cancelled by a person; unpublished rows were released.
    Cancelled,
}

impl JobStatus {
    /// True while the relay still has work for the job (`running` or `waiting`).
    pub fn is_active(self) -> bool {
        matches!(self, JobStatus::Running | JobStatus::Waiting)
    }

    /// True once nothing more can happen to the job (`finished`, `cancelled`).
    pub fn is_final(self) -> bool {
        matches!(self, JobStatus::Finished | JobStatus::Cancelled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Preparing => "preparing",
            JobStatus::Running => "running",
            JobStatus::Waiting => "waiting",
            JobStatus::Paused => "paused",
            JobStatus::Finished => "finished",
            JobStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<JobStatus> {
        [
            JobStatus::Preparing,
            JobStatus::Running,
            JobStatus::Waiting,
            JobStatus::Paused,
            JobStatus::Finished,
            JobStatus::Cancelled,
        ]
        .into_iter()
        .find(|j| j.as_str() == s)
    }
}

/// A replay job: one bulk replay action and its progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayJob {
    /// UUID (text).
    pub id: String,
    pub status: JobStatus,
    pub created_by: String,
    pub created_at_ms: i64,
    /// When the relay first claimed one of its rows, epoch ms.
    pub started_at_ms: Option<i64>,
    /// When it finished (every row published or failed) or was cancelled, epoch ms.
    pub finished_at_ms: Option<i64>,
    /// The override; `None` = each record's own source topic.
    pub target_topic: Option<String>,
    /// Throttle, msgs/s (per relay instance); `None` = unthrottled.
    pub rate_per_sec: Option<u32>,
    pub reason: Option<String>,
    /// Dead letters queued (outbox rows). When the job is done,
    /// `total = published + failed + cancelled`.
    pub total: i64,
    pub published: i64,
    pub failed: i64,
    pub cancelled: i64,
    /// Selected but not queued: deleted, already `replay_pending`, or without a target topic.
    pub skipped: i64,
    /// Of `skipped`: the ones without a target topic (no source topic and no override).
    pub skipped_without_target: i64,
    /// The last publish error, e.g. while Kafka is unreachable (kept after the job recovers).
    pub last_error: Option<String>,
    /// The selection as requested (JSON of [`Selection`]).
    pub selection: String,
    /// How it publishes (canary, transform, order, placement, lag gate).
    #[serde(default)]
    pub options: ReplayOptions,
    /// What its transform did (all 0 without one; migration 0015). When the job is done,
    /// `total = published + failed + cancelled + transform.skipped`.
    #[serde(default)]
    pub transform: TransformCounts,
    /// Published records that came back as dead letters (each publish counted once; linked
    /// by ingest, `docs/replay.md`, "Outcome").
    #[serde(default)]
    pub refailed: i64,
    /// The canary's progress and verdict (migration 0017); `None` for a job without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryStatus>,
    /// The lag gate's last reading (`options.lag_gate`); all `None` without one.
    #[serde(default)]
    pub lag: JobLag,
    /// While its bulk action still queues rows: how far it has come. `None` once every row
    /// is queued and for a job on explicit ids ([`crate::store::Store::job`] and
    /// [`crate::store::Store::jobs`] read it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queueing: Option<JobQueueing>,
}

/// A replay job's transform counters (`docs/replay.md`, "Transform on replay").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransformCounts {
    /// Published as the script returned them (changed or not).
    pub transformed: i64,
    /// Not published: the script skipped them (`skip()`); their dead letters went back to
    /// their status before the replay.
    pub skipped: i64,
    /// Of the job's `failed`: the script failed on them (an error, a limit, a wrong answer);
    /// nothing was published for them, their dead letters are `replay_failed`, bytes as stored.
    pub failed: i64,
}

/// What the relay last read of a lag-gated job's consumer group (migration 0016's
/// `replay_jobs.lag_*` columns; all `None` for a job without a lag gate, and until the
/// first read). `docs/replay.md`, "Lag-aware replay".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct JobLag {
    /// The group's lag on the job's target topics at the last successful read, records.
    pub records: Option<i64>,
    /// When the lag was last read (or failed to be read), epoch ms.
    pub read_at_ms: Option<i64>,
    /// Held back (lag at or over the limit, or unreadable) since, epoch ms; `None` =
    /// publishing.
    pub held_since_ms: Option<i64>,
    /// Why the lag cannot be read (unknown group, broker error, timeout); `None` = it was
    /// read at `read_at_ms`.
    pub error: Option<String>,
}

/// A replay job whose bulk action is still queueing its outbox rows (`docs/replay.md`, "Bulk
/// actions"): how far the action's chunks have swept the dead letters it covers. A job is
/// `preparing` while this runs, or already `running` when it is published while queueing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobQueueing {
    /// Every dead letter with an id at or below this is swept (queued, skipped, or not
    /// matching); 0 before the first chunk.
    pub cursor_id: i64,
    /// The highest id the action covers: the newest dead letter when it started (later ones
    /// are not swept in).
    pub max_id: i64,
    /// Chunks committed so far (one short write transaction each).
    pub chunks: i64,
    /// When the last chunk committed (or the action started), epoch ms. An action that has
    /// not moved for a minute was interrupted; `serve` resumes it from `cursor_id`.
    pub updated_at_ms: i64,
}

impl JobQueueing {
    /// A `running` bulk action that has not moved for this long is taken to be interrupted
    /// (its process died) and is resumed by `serve`, ms (`store::STALE_AFTER_MS` is this).
    pub const STALE_AFTER_MS: i64 = 60_000;

    /// No chunk for [`JobQueueing::STALE_AFTER_MS`] or more at `now_ms` (epoch ms): the
    /// queueing was interrupted, and `serve` resumes it from `cursor_id`.
    pub fn interrupted(&self, now_ms: i64) -> bool {
        now_ms - self.updated_at_ms >= Self::STALE_AFTER_MS
    }
}
