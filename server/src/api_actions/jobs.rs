//! Replay job control: list, read, cancel, pause and resume jobs, and the job's public shape
//! ([`JobItem`]).

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::Json;
use redrive_core::actions::ReplayJob;
use redrive_core::permission::Permission;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::json_text;
use super::request::{parse_body, query_pairs};
use crate::api::{rfc3339, AppState};
use crate::auth::{require_permission, ApiError, Caller};

/// Most jobs `GET /api/v1/replays` lists.
pub const MAX_JOBS: u32 = 500;
/// Jobs listed when no `limit` is given.
pub const DEFAULT_JOBS: u32 = 50;

/// A replay job.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobItem {
    pub id: String,
    /// `preparing`, `running`, `waiting` (Kafka unreachable; resumes by itself), `paused`,
    /// `finished`, `cancelled`.
    pub status: &'static str,
    pub total: i64,
    pub published: i64,
    pub failed: i64,
    pub cancelled: i64,
    pub skipped: i64,
    pub skipped_without_target: i64,
    /// Published records that came back as dead letters (each publish counted once;
    /// `docs/replay.md`, "Outcome").
    pub refailed: i64,
    pub created_by: String,
    /// RFC 3339 UTC.
    pub created_at: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// `null` = each record's source topic.
    pub target_topic: Option<String>,
    /// msgs/s; `null` = unthrottled.
    pub rate_per_sec: Option<u32>,
    pub reason: Option<String>,
    pub last_error: Option<String>,
    /// The selection as requested: `{"ids": [...]}` or `{"filter": {...}}`.
    pub selection: Value,
    /// Publishing options as requested (`{}` = a plain replay).
    #[schema(value_type = Object)]
    pub options: redrive_core::actions::ReplayOptions,
    /// The transform's identity and what it did; `null` for a job without one.
    pub transform: Option<JobTransform>,
    /// The canary's progress and verdict (`docs/replay.md`, "Canary replay"); `null` for a
    /// job without one.
    pub canary: Option<JobCanary>,
    /// The lag gate and what the relay last read of its consumer group; `null` for a job
    /// without one (`docs/replay.md`, "Lag-aware replay").
    pub lag: Option<JobLagItem>,
    /// While the job's bulk action still queues its outbox rows: how far it has come
    /// (`docs/replay.md`, "Bulk actions"); `null` once every row is queued and for a job on
    /// explicit ids.
    pub queueing: Option<JobQueueingItem>,
}

/// A job whose rows are still being queued (`total` grows until `queueing` is `null`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobQueueingItem {
    /// Every dead letter with an id at or below this is swept (queued, skipped, or not
    /// matching); 0 before the first chunk.
    pub cursor_id: i64,
    /// The highest dead-letter id the action covers (the newest when it started).
    pub max_id: i64,
    /// Chunks committed so far.
    pub chunks: i64,
    /// When the last chunk committed, RFC 3339 UTC; a minute old or more = interrupted
    /// (`serve` resumes it).
    pub updated_at: Option<String>,
}

/// A lag-gated job's gate and last reading.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobLagItem {
    /// The consumer group whose lag gates the job.
    pub group: String,
    /// The most records it may be behind.
    pub max_lag: u64,
    /// Its lag on the job's target topics at the last successful read, records; `null`
    /// before the first.
    pub records: Option<i64>,
    /// When the lag was last read (or failed to be read), RFC 3339 UTC.
    pub read_at: Option<String>,
    /// Held back now (lag at or over `max_lag`, or unreadable): nothing is published.
    pub held: bool,
    /// Since when, RFC 3339 UTC; `null` while publishing.
    pub held_since: Option<String>,
    /// Why the lag cannot be read (unknown group, broker error, timeout); `null` = it was read.
    pub error: Option<String>,
}

/// A job's canary.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobCanary {
    /// `starting` (size not fixed yet), `publishing`, `watching`, `passed`, `failed` (the job
    /// paused itself).
    pub state: &'static str,
    /// Records in the canary; `null` while `starting`.
    pub size: Option<i64>,
    /// Canary records published, failed to publish, and (of the published) come back as
    /// dead letters; live while it runs, as judged once decided.
    pub published: i64,
    pub failed: i64,
    pub refailed: i64,
    /// The watch's end (RFC 3339 UTC), from `watching` on.
    pub watch_until: Option<String>,
    /// When the verdict was given (RFC 3339 UTC).
    pub decided_at: Option<String>,
    /// The verdict in words (the pause reason when it failed).
    pub reason: Option<String>,
}

/// A job's transform (`docs/replay.md`, "Transform on replay").
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobTransform {
    /// SHA-256 of the script (64 hex digits), as in the audit row.
    pub sha256: String,
    /// The script's size, bytes.
    pub bytes: usize,
    /// Per-record limits in effect: wall clock (ms) and operations.
    pub time_limit_ms: u32,
    pub max_operations: u64,
    /// Published as the script returned them.
    pub transformed: i64,
    /// Not published: the script skipped them (`skip()`).
    pub skipped: i64,
    /// Of `failed`: the script failed on them (nothing published for them).
    pub failed: i64,
}

/// Recent jobs, newest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobList {
    pub items: Vec<JobItem>,
}

impl From<&ReplayJob> for JobItem {
    fn from(j: &ReplayJob) -> Self {
        JobItem {
            id: j.id.clone(),
            status: j.status.as_str(),
            total: j.total,
            published: j.published,
            failed: j.failed,
            cancelled: j.cancelled,
            skipped: j.skipped,
            skipped_without_target: j.skipped_without_target,
            refailed: j.refailed,
            created_by: j.created_by.clone(),
            created_at: rfc3339(j.created_at_ms),
            started_at: j.started_at_ms.and_then(rfc3339),
            finished_at: j.finished_at_ms.and_then(rfc3339),
            target_topic: j.target_topic.clone(),
            rate_per_sec: j.rate_per_sec,
            reason: j.reason.clone(),
            last_error: j.last_error.clone(),
            selection: json_text(&j.selection),
            options: j.options.clone(),
            transform: j.options.transform.as_ref().map(|t| JobTransform {
                sha256: t.script_sha256(),
                bytes: t.script.len(),
                time_limit_ms: t.time_limit_ms(),
                max_operations: t.max_operations(),
                transformed: j.transform.transformed,
                skipped: j.transform.skipped,
                failed: j.transform.failed,
            }),
            canary: j.canary.as_ref().map(|c| JobCanary {
                state: c.state.as_str(),
                size: c.size,
                published: c.published,
                failed: c.failed,
                refailed: c.refailed,
                watch_until: c.watch_until_ms.and_then(rfc3339),
                decided_at: c.decided_at_ms.and_then(rfc3339),
                reason: c.reason.clone(),
            }),
            lag: j.options.lag_gate.as_ref().map(|g| JobLagItem {
                group: g.group.clone(),
                max_lag: g.max_lag,
                records: j.lag.records,
                read_at: j.lag.read_at_ms.and_then(rfc3339),
                held: j.lag.held_since_ms.is_some(),
                held_since: j.lag.held_since_ms.and_then(rfc3339),
                error: j.lag.error.clone(),
            }),
            queueing: j.queueing.map(|q| JobQueueingItem {
                cursor_id: q.cursor_id,
                max_id: q.max_id,
                chunks: q.chunks,
                updated_at: rfc3339(q.updated_at_ms),
            }),
        }
    }
}

/// `GET /api/v1/replays?limit=N`: recent jobs, newest first (viewer).
pub async fn list_jobs(
    State(state): State<AppState>,
    Caller(_actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<JobList>, ApiError> {
    let mut limit = DEFAULT_JOBS;
    for (k, v) in query_pairs(raw.as_deref())? {
        match k.as_str() {
            "limit" => {
                limit = v
                    .trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_JOBS).contains(n))
                    .ok_or_else(|| {
                        ApiError::BadRequest(format!(
                            "`limit` must be a whole number from 1 to {MAX_JOBS}"
                        ))
                    })?
            }
            other => {
                return Err(ApiError::BadRequest(format!(
                    "unknown parameter `{other}`; replays take only `limit`"
                )))
            }
        }
    }
    let jobs = state
        .store
        .jobs(limit)
        .await
        .map_err(|e| state.action_failed("jobs", e))?;
    Ok(Json(JobList {
        items: jobs.iter().map(JobItem::from).collect(),
    }))
}

fn job_id(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    path.map(|Path(s)| s)
        .map_err(|_| ApiError::BadRequest("the job id is not valid".into()))
}

fn no_such_job(id: &str) -> ApiError {
    ApiError::NotFound(format!(
        "no replay job `{id}` (list them at /api/v1/replays)"
    ))
}

/// `GET /api/v1/replays/{job_id}` (viewer).
pub async fn get_job(
    State(state): State<AppState>,
    Caller(_actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<JobItem>, ApiError> {
    let id = job_id(path)?;
    let job = state
        .store
        .job(&id)
        .await
        .map_err(|e| state.action_failed("job", e))?
        .ok_or_else(|| no_such_job(&id))?;
    Ok(Json(JobItem::from(&job)))
}

/// `POST /api/v1/replays/{job_id}/cancel` (operator): 404 unknown, 409 already done.
pub async fn cancel_job(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<JobItem>, ApiError> {
    require_permission(&state.auth, &actor, Permission::Replay, "cancel_job").await?;
    let id = job_id(path)?;
    let job = state
        .store
        .cancel_job(&actor, &id)
        .await
        .map_err(|e| state.action_failed("cancel_job", e))?;
    Ok(Json(JobItem::from(&job)))
}

/// Body of pause and resume: `{}` or `{"reason": "..."}` (an empty body is `{}`).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobStateBody {
    pub reason: Option<String>,
}

/// `POST /api/v1/replays/{job_id}/pause` (operator): 404 unknown, 409 not running/waiting.
pub async fn pause_job(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<JobItem>, ApiError> {
    change_job_state(&state, &actor, path, &body, JobChange::Pause).await
}

/// `POST /api/v1/replays/{job_id}/resume` (operator): 404 unknown, 409 not paused.
pub async fn resume_job(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Result<Json<JobItem>, ApiError> {
    change_job_state(&state, &actor, path, &body, JobChange::Resume).await
}

/// Which state change [`change_job_state`] makes.
#[derive(Debug, Clone, Copy)]
enum JobChange {
    Pause,
    Resume,
}

/// Pause or resume: the role check, the optional `{"reason"}` body, the store call.
async fn change_job_state(
    state: &AppState,
    actor: &redrive_core::actions::Actor,
    path: Result<Path<String>, PathRejection>,
    body: &Bytes,
    change: JobChange,
) -> Result<Json<JobItem>, ApiError> {
    let operation = match change {
        JobChange::Pause => "pause_job",
        JobChange::Resume => "resume_job",
    };
    require_permission(&state.auth, actor, Permission::Replay, operation).await?;
    let id = job_id(path)?;
    let b: JobStateBody = if body.is_empty() {
        JobStateBody::default()
    } else {
        parse_body(body)?
    };
    let reason = b.reason.as_deref();
    let job = match change {
        JobChange::Pause => state.store.pause_job(actor, &id, reason).await,
        JobChange::Resume => state.store.resume_job(actor, &id, reason).await,
    }
    .map_err(|e| state.action_failed(operation, e))?;
    Ok(Json(JobItem::from(&job)))
}
