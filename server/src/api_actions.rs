//! The JSON API for acting on dead letters: replays (with dry run and cancel), delete,
//! restore, the audit trail (JSON and CSV) and each dead letter's history.
//!
//! | route | role | answer |
//! |---|---|---|
//! | `POST /api/v1/replays` | operator | 202 `{"job_id", "total", "skipped", ...}` |
//! | `POST /api/v1/replays/dry-run` | viewer | `{"total", "queued", "per_target", "without_target", "skipped", "loop_guarded", "requires_confirm_all", "confirm_all", "sample"}` |
//! | `GET /api/v1/replays` | viewer | `{"items": [job, ...]}` (newest first, `?limit=` ≤ 500) |
//! | `GET /api/v1/replays/{job_id}` | viewer | job: `{"id", "status", "total", "published", "failed", ..., "lag"}` |
//! | `POST /api/v1/replays/{job_id}/cancel` | operator | the job, cancelled (running, waiting or paused) |
//! | `POST /api/v1/replays/{job_id}/pause` | operator | the job, paused; body optional `{"reason"}` |
//! | `POST /api/v1/replays/{job_id}/resume` | operator | the job, running again; body optional `{"reason"}` |
//! | `POST /api/v1/dead-letters/delete` | operator | `{"affected": n}` |
//! | `POST /api/v1/dead-letters/restore` | operator | `{"affected": n}` |
//! | `GET /api/v1/audit` | viewer | `{"items": [...], "next_cursor"}` (`actor`, `action`, `from`, `to`, `limit`, `cursor`) |
//! | `GET /api/v1/audit.csv` | viewer | the whole (filtered) trail as CSV |
//! | `GET /api/v1/dead-letters/{id}/history` | viewer | `{"items": [event, ...]}` oldest first |
//!
//! Bodies select dead letters with exactly one of `"ids": [1, 2]` or `"filter": {...}`, whose
//! names and values are those of the list's query string (`GET /api/v1/dead-letters`), parsed
//! by the same [`ListQuery::from_pairs`].
//!
//! **An empty filter** (`"filter": {}`, no field set) means every dead letter that is not
//! deleted. A replay, delete, restore (or bulk label, `api_labels`) over it needs
//! `"confirm_all": N`, N being the number of dead letters the empty filter matches now (the
//! dry run's `confirm_all`); without it, or with another number, the answer is 422 saying how
//! many would be affected and what to send, and nothing changes. Its audit row's outcome ends
//! `all dead letters (empty filter), confirmed by count` and its detail has `"all": true`.
//! Refusals are JSON `{"error": ...}`: 400 for a body
//! that is not JSON, 422 for one that is but says something impossible, 401 without
//! credentials, 403 for a role that may not (audited `denied`), 404, 409, 503. The DTOs here
//! are the public contract, mapped from the core types.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redrive_core::actions::{
    AuditEntry, AuditQuery, DryRun, HistoryEvent, ReplayJob, ReplayRequest, Selection,
};
use redrive_core::approval::ActionKind;
use redrive_core::store::StoreError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{rfc3339, AppState};
use redrive_core::permission::Permission;

use crate::auth::{require_permission, ApiError, Caller};

/// Most jobs `GET /api/v1/replays` lists.
pub const MAX_JOBS: u32 = 500;
/// Jobs listed when no `limit` is given.
pub const DEFAULT_JOBS: u32 = 50;

/// The routes of this module, state applied.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/replays", post(create_replay).get(list_jobs))
        .route("/api/v1/replays/dry-run", post(dry_run))
        .route("/api/v1/replays/{job_id}", get(get_job))
        .route("/api/v1/replays/{job_id}/cancel", post(cancel_job))
        .route("/api/v1/replays/{job_id}/pause", post(pause_job))
        .route("/api/v1/replays/{job_id}/resume", post(resume_job))
        .route("/api/v1/dead-letters/delete", post(delete))
        .route("/api/v1/dead-letters/restore", post(restore))
        .route("/api/v1/dead-letters/{id}/history", get(history))
        .route("/api/v1/audit", get(audit))
        .route("/api/v1/audit.csv", get(audit_csv))
        .with_state(state)
}

// ---------------------------------------------------------------------------------------------
// Errors

impl AppState {
    /// Maps a store error of `operation`: the request's own faults keep their message, the
    /// store's failures are counted, logged and become 503.
    pub(crate) fn action_failed(&self, operation: &'static str, e: StoreError) -> ApiError {
        match e {
            StoreError::Invalid(m) => ApiError::Unprocessable(m),
            StoreError::NotFound(m) => ApiError::NotFound(m),
            StoreError::Conflict(m) => ApiError::Conflict(m),
            other => {
                self.telemetry.store_error(operation, &other);
                ApiError::Unavailable
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Request bodies

/// Body of `POST /api/v1/replays` and `/replays/dry-run`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayBody {
    pub ids: Option<Vec<i64>>,
    /// The list's query parameters as an object: `{"fingerprint": "...", "status": "new"}`.
    #[schema(value_type = Option<Object>)]
    pub filter: Option<serde_json::Map<String, Value>>,
    /// Override; absent or empty = each record's own source topic.
    pub target_topic: Option<String>,
    /// Throttle, msgs/s; absent = unthrottled.
    pub rate_per_sec: Option<u32>,
    pub reason: Option<String>,
    /// With an empty filter: the number of dead letters it matches now (see the module doc).
    pub confirm_all: Option<i64>,
    /// Publishing options (`redrive_core::actions::ReplayOptions`; `docs/replay.md`);
    /// absent = a plain replay. Unknown fields are a 422.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub options: redrive_core::actions::ReplayOptions,
    /// Dry run only: records sampled per target topic (default 3, 1 to 20; `docs/replay.md`,
    /// "Dry run with samples").
    pub sample_per_target: Option<u32>,
}

/// Body of `POST /api/v1/dead-letters/delete` and `/restore`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeBody {
    pub ids: Option<Vec<i64>>,
    #[schema(value_type = Option<Object>)]
    pub filter: Option<serde_json::Map<String, Value>>,
    pub reason: Option<String>,
    /// With an empty filter: the number of dead letters it matches now (see the module doc).
    pub confirm_all: Option<i64>,
}

/// Refuses an "all" action (`selection` is an empty filter) unless `given` is the number of
/// dead letters the empty filter matches now: 422 saying how many and what to send.
pub(crate) async fn confirm_all(
    state: &AppState,
    selection: &Selection,
    given: Option<i64>,
    action: &str,
) -> Result<(), ApiError> {
    use redrive_core::store::ConfirmAllError;
    match state.store.check_confirm_all(selection, given).await {
        Ok(_) => Ok(()),
        Err(ConfirmAllError::Missing { matched }) => Err(ApiError::Unprocessable(format!(
            "the filter is empty, so this {action} would act on every dead letter that is not \
             deleted: {matched} now. Nothing was changed. Narrow the filter, or confirm by \
             adding \"confirm_all\": {matched} to the body (the count POST \
             /api/v1/replays/dry-run reports as `confirm_all`)"
        ))),
        Err(ConfirmAllError::Wrong { matched, given }) => Err(ApiError::Unprocessable(format!(
            "\"confirm_all\" is {given}, but the empty filter matches {matched} dead letters \
             now; nothing was changed. Send \"confirm_all\": {matched} to act on all of \
             them, or narrow the filter"
        ))),
        Err(ConfirmAllError::Store(e)) => Err(state.action_failed("all_count", e)),
    }
}

/// Parses a JSON body: 400 if it is not JSON, 422 if it does not fit `T`.
pub(crate) fn parse_body<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Data => ApiError::Unprocessable(format!("the body does not fit: {e}")),
            _ => ApiError::BadRequest(format!(
                "the body is not valid JSON ({e}); send an object such as {{\"ids\": [1, 2]}} \
                 with Content-Type: application/json"
            )),
        }
    })
}

/// Exactly one of `ids` and `filter` (the list's names), parsed by the domain's one parser
/// ([`redrive_core::request::selection`]): 422 otherwise.
pub(crate) fn selection(
    ids: Option<Vec<i64>>,
    filter: Option<serde_json::Map<String, Value>>,
) -> Result<Selection, ApiError> {
    Ok(redrive_core::request::selection(ids, filter.as_ref())?)
}

/// The filter object through the domain's one parser ([`redrive_core::request::filter_json`]).
pub(crate) fn filter_from_json(
    obj: &serde_json::Map<String, Value>,
) -> Result<redrive_core::Filter, ApiError> {
    Ok(redrive_core::request::filter_json(obj)?)
}

// ---------------------------------------------------------------------------------------------
// DTOs: the public shape of the API

/// Answer of `POST /api/v1/replays` (202).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReplayAccepted {
    pub job_id: String,
    /// Dead letters queued for publishing.
    pub total: i64,
    /// Selected but not queued (deleted, already pending, or without a target topic).
    pub skipped: i64,
    /// Of `skipped`: without a source topic and no `target_topic`.
    pub skipped_without_target: i64,
    /// `running`, or `finished` when nothing was queued.
    pub status: &'static str,
}

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

/// What a replay's canary would be (`DryRunResult::canary`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DryRunCanary {
    /// Records in the canary for the records queued now (`records`, or ceil(percent %)).
    pub size: i64,
    /// The plan in words: "the first 10 records, then watch 30 s for re-failures; pause the
    /// job if more than 0 come back".
    pub plan: String,
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

/// One target of a dry run.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TargetCount {
    pub topic: String,
    pub count: i64,
}

/// Answer of `POST /api/v1/replays/dry-run`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DryRunResult {
    /// Dead letters selected.
    pub total: i64,
    /// How many a replay would queue (the sum of `per_target`).
    pub queued: i64,
    /// Largest first.
    pub per_target: Vec<TargetCount>,
    /// Replayable ones without a source topic (and no `target_topic`): a replay skips them.
    pub without_target: i64,
    /// Deleted or already pending: a replay skips them.
    pub skipped: i64,
    /// Loop-guarded ones (`docs/automation.md`): the replay needs the `approve` permission
    /// and a reason, else it is refused with 422.
    pub loop_guarded: i64,
    /// True when the filter is empty: the replay needs `"confirm_all"` (module doc).
    pub requires_confirm_all: bool,
    /// The number to send as `"confirm_all"` (the dead letters the empty filter matches
    /// now); `null` when not required.
    pub confirm_all: Option<i64>,
    /// The first records the replay would send per target topic, after the transform if
    /// any (`redrive_core::replay_sample::ReplaySample`: `{"transform_sha256", "targets":
    /// [{"topic", "records": [{"dead_letter_id", "before", "after": {"outcome": "as_is" |
    /// "publish" | "skip" | "error", ...}}]}]}`).
    #[schema(value_type = Object)]
    pub sample: redrive_core::replay_sample::ReplaySample,
    /// The canary the replay would start with; `null` without one.
    pub canary: Option<DryRunCanary>,
}

/// Answer of delete and restore.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Affected {
    pub affected: u64,
}

/// One audit row.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuditItem {
    pub id: i64,
    /// RFC 3339 UTC.
    pub at: Option<String>,
    pub at_ms: i64,
    pub actor: String,
    pub action: String,
    pub count: i64,
    /// The ids acted on, when given as ids.
    pub ids: Option<Value>,
    /// The filter acted on, when given as a filter.
    pub filter: Option<Value>,
    pub reason: Option<String>,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
    /// `ok...`, `denied`, `failed: ...`.
    pub outcome: String,
    pub job_id: Option<String>,
    /// The API token's id, when the actor used one.
    pub via_token: Option<i64>,
    /// What changed, before and after (labels, notes), or an export's row count.
    pub detail: Option<Value>,
}

/// A page of the audit trail, newest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuditPage {
    pub items: Vec<AuditItem>,
    /// Pass as `cursor` for the next (older) page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// One event of a dead letter's history.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HistoryItem {
    pub at: Option<String>,
    pub at_ms: i64,
    /// `ingested`, `replay_requested`, `published`, `replay_failed`, `re_failed`, `replay_cancelled`,
    /// `deleted`, `restored`.
    pub kind: String,
    pub actor: Option<String>,
    pub detail: Option<String>,
    pub job_id: Option<String>,
}

/// A dead letter's history, oldest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HistoryList {
    pub items: Vec<HistoryItem>,
}

/// Stored JSON text as a JSON value (or the text itself if it does not parse).
fn json_text(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_string()))
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
        }
    }
}

impl From<DryRun> for DryRunResult {
    fn from(d: DryRun) -> Self {
        DryRunResult {
            total: d.total,
            queued: d.queued(),
            per_target: d
                .per_target
                .into_iter()
                .map(|(topic, count)| TargetCount { topic, count })
                .collect(),
            without_target: d.without_target,
            skipped: d.skipped,
            loop_guarded: d.loop_guarded,
            requires_confirm_all: false,
            confirm_all: None,
            sample: Default::default(),
            canary: None,
        }
    }
}

impl From<&AuditEntry> for AuditItem {
    fn from(a: &AuditEntry) -> Self {
        AuditItem {
            id: a.id,
            at: rfc3339(a.at_ms),
            at_ms: a.at_ms,
            actor: a.actor.clone(),
            action: a.action.clone(),
            count: a.count,
            ids: a.ids.as_deref().map(json_text),
            filter: a.filter.as_deref().map(json_text),
            reason: a.reason.clone(),
            client_ip: a.client_ip.clone(),
            user_agent: a.user_agent.clone(),
            outcome: a.outcome.clone(),
            job_id: a.job_id.clone(),
            via_token: a.via_token,
            detail: a.detail.as_deref().map(json_text),
        }
    }
}

impl From<&HistoryEvent> for HistoryItem {
    fn from(h: &HistoryEvent) -> Self {
        HistoryItem {
            at: rfc3339(h.at_ms),
            at_ms: h.at_ms,
            kind: h.kind.clone(),
            actor: h.actor.clone(),
            detail: h.detail.clone(),
            job_id: h.job_id.clone(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers

/// `POST /api/v1/replays`: queue a replay job (operator).
pub async fn create_replay(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    require_permission(&state.auth, &actor, Permission::Replay, "replay").await?;
    let b: ReplayBody = parse_body(&body)?;
    if b.sample_per_target.is_some() {
        return Err(ApiError::Unprocessable(
            "`sample_per_target` is for POST /api/v1/replays/dry-run only".into(),
        ));
    }
    let sel = selection(b.ids, b.filter)?;
    confirm_all(&state, &sel, b.confirm_all, "replay").await?;
    let req = ReplayRequest {
        selection: sel,
        target_topic: b.target_topic,
        rate_per_sec: b.rate_per_sec,
        reason: b.reason,
        options: b.options,
    };
    if let Some(pending) =
        crate::api_approvals::gate(&state, &actor, ActionKind::Replay, &req).await?
    {
        return Ok(pending);
    }
    let job = state
        .store
        .request_replay(&actor, &req)
        .await
        .map_err(|e| state.action_failed("request_replay", e))?;
    let accepted = ReplayAccepted {
        job_id: job.id.clone(),
        total: job.total,
        skipped: job.skipped,
        skipped_without_target: job.skipped_without_target,
        status: job.status.as_str(),
    };
    let mut res = (StatusCode::ACCEPTED, Json(accepted)).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("/api/v1/replays/{}", job.id)) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    Ok(res)
}

/// `POST /api/v1/replays/dry-run`: what a replay of the same body would do (viewer).
pub async fn dry_run(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Json<DryRunResult>, ApiError> {
    let b: ReplayBody = parse_body(&body)?;
    let sel = selection(b.ids, b.filter)?;
    let sel = state
        .store
        .scope_selection(&actor, &sel)
        .await
        .map_err(|e| state.action_failed("dry_run", e))?;
    redrive_core::store::check_replay_options(&b.options)
        .map_err(|e| state.action_failed("dry_run", e))?;
    let d = state
        .store
        .dry_run(&sel, b.target_topic.as_deref())
        .await
        .map_err(|e| state.action_failed("dry_run", e))?;
    let per_target = b
        .sample_per_target
        .unwrap_or(redrive_core::replay_sample::SAMPLE_PER_TARGET);
    if !(1..=redrive_core::replay_sample::MAX_SAMPLE_PER_TARGET).contains(&per_target) {
        return Err(ApiError::Unprocessable(format!(
            "`sample_per_target` must be from 1 to {}",
            redrive_core::replay_sample::MAX_SAMPLE_PER_TARGET
        )));
    }
    let topics: Vec<String> = d.per_target.iter().map(|(t, _)| t.clone()).collect();
    let sample = state
        .store
        .replay_sample(
            &sel,
            b.target_topic
                .as_deref()
                .map(str::trim)
                .filter(|t| !t.is_empty()),
            &topics,
            &b.options,
            per_target,
        )
        .await
        .map_err(|e| state.action_failed("dry_run", e))?;
    let queued = d.queued();
    let mut out = DryRunResult::from(d);
    out.sample = sample;
    out.canary = b.options.canary.as_ref().map(|c| DryRunCanary {
        size: c.size_for(queued),
        plan: c.describe(),
    });
    if sel.is_all() {
        out.requires_confirm_all = true;
        out.confirm_all = Some(
            state
                .store
                .all_count()
                .await
                .map_err(|e| state.action_failed("all_count", e))?,
        );
    }
    Ok(Json(out))
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

/// `POST /api/v1/dead-letters/delete` (operator).
pub async fn delete(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    require_permission(&state.auth, &actor, Permission::Delete, "delete").await?;
    let b: ChangeBody = parse_body(&body)?;
    let sel = selection(b.ids, b.filter)?;
    confirm_all(&state, &sel, b.confirm_all, "delete").await?;
    if let Some(pending) =
        approval_gate(&state, &actor, ActionKind::Delete, &sel, &b.reason).await?
    {
        return Ok(pending);
    }
    let n = state
        .store
        .delete(&actor, &sel, b.reason.as_deref())
        .await
        .map_err(|e| state.action_failed("delete", e))?;
    Ok(Json(Affected { affected: n }).into_response())
}

/// `POST /api/v1/dead-letters/restore` (operator).
pub async fn restore(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    require_permission(&state.auth, &actor, Permission::Delete, "restore").await?;
    let b: ChangeBody = parse_body(&body)?;
    let sel = selection(b.ids, b.filter)?;
    confirm_all(&state, &sel, b.confirm_all, "restore").await?;
    if let Some(pending) =
        approval_gate(&state, &actor, ActionKind::Restore, &sel, &b.reason).await?
    {
        return Ok(pending);
    }
    let n = state
        .store
        .restore(&actor, &sel, b.reason.as_deref())
        .await
        .map_err(|e| state.action_failed("restore", e))?;
    Ok(Json(Affected { affected: n }).into_response())
}

/// [`crate::api_approvals::gate`] for a delete or restore (`kind`).
async fn approval_gate(
    state: &AppState,
    actor: &redrive_core::actions::Actor,
    kind: ActionKind,
    sel: &Selection,
    reason: &Option<String>,
) -> Result<Option<Response>, ApiError> {
    let req = ReplayRequest {
        selection: sel.clone(),
        target_topic: None,
        rate_per_sec: None,
        reason: reason.clone(),
        options: Default::default(),
    };
    crate::api_approvals::gate(state, actor, kind, &req).await
}

/// `GET /api/v1/dead-letters/{id}/history` (viewer).
pub async fn history(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<HistoryList>, ApiError> {
    let raw = path
        .map(|Path(s)| s)
        .map_err(|_| ApiError::BadRequest("the dead-letter id is not valid".into()))?;
    let id = raw.trim().parse::<i64>().map_err(|_| {
        ApiError::BadRequest(format!(
            "`{raw}` is not a dead-letter id: ids are whole numbers"
        ))
    })?;
    state
        .store
        .check_ids_in_scope(&actor, &[id])
        .await
        .map_err(|e| state.action_failed("history", e))?;
    let events = state
        .store
        .history(id)
        .await
        .map_err(|e| state.action_failed("history", e))?;
    Ok(Json(HistoryList {
        items: events.iter().map(HistoryItem::from).collect(),
    }))
}

fn query_pairs(raw: Option<&str>) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(raw.unwrap_or("")).map_err(|_| {
        ApiError::BadRequest(
            "the query string is not valid URL encoding (name=value pairs joined by &)".into(),
        )
    })
}

/// The audit page's query: `actor`, `action` (exact), `from`, `to` (the list's time forms),
/// `limit` (1 to 1000), `cursor` (a previous page's `next_cursor`). Empty values are unset.
pub fn audit_query(raw: Option<&str>) -> Result<AuditQuery, ApiError> {
    let pairs = query_pairs(raw)?;
    AuditQuery::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(ApiError::BadRequest)
}

/// `GET /api/v1/audit` (viewer): a page, newest first.
pub async fn audit(
    State(state): State<AppState>,
    Caller(_actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<AuditPage>, ApiError> {
    let q = audit_query(raw.as_deref())?;
    let page = state
        .store
        .audit(&q)
        .await
        .map_err(|e| state.action_failed("audit", e))?;
    Ok(Json(AuditPage {
        items: page.items.iter().map(AuditItem::from).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// `GET /api/v1/audit.csv` (viewer): every row matching the filters (`limit` is the page size
/// used internally; `cursor` starts below an id), newest first, as `text/csv`, streamed.
pub async fn audit_csv(
    State(state): State<AppState>,
    Caller(_actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = audit_query(raw.as_deref())?;
    // Streamed page by page (`audit_csv.rs`).
    crate::audit_csv::respond(&state, q).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections() {
        assert!(matches!(
            selection(Some(vec![3, 1, 3]), None),
            Ok(Selection::Ids(v)) if v == vec![1, 3]
        ));
        assert!(matches!(
            selection(Some(vec![]), None),
            Err(ApiError::Unprocessable(_))
        ));
        assert!(matches!(
            selection(None, None),
            Err(ApiError::Unprocessable(_))
        ));
        let obj: serde_json::Map<String, Value> =
            serde_json::from_str(r#"{"source_topic": "orders", "from": 1796104800000, "q": null}"#)
                .unwrap();
        match selection(None, Some(obj)) {
            Ok(Selection::Filter(f)) => {
                assert_eq!(f.source_topic.as_deref(), Some("orders"));
                assert_eq!(f.from_ms, Some(1_796_104_800_000));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            r#"{"colour": "red"}"#,
            r#"{"limit": "5"}"#,
            r#"{"status": ["new"]}"#,
        ] {
            let obj = serde_json::from_str(bad).unwrap();
            assert!(
                matches!(selection(None, Some(obj)), Err(ApiError::Unprocessable(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn bodies_and_queries() {
        assert!(matches!(
            parse_body::<ChangeBody>(&Bytes::from_static(b"{not json")),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(
            parse_body::<ChangeBody>(&Bytes::from_static(b"{\"ids\": \"x\"}")),
            Err(ApiError::Unprocessable(_))
        ));
        assert!(matches!(
            parse_body::<ChangeBody>(&Bytes::from_static(b"{\"rate_per_sec\": 5}")),
            Err(ApiError::Unprocessable(_))
        ));
        let q = audit_query(Some("actor=alice&from=2026-12-01&limit=10&cursor=99&to=")).unwrap();
        assert_eq!(q.actor.as_deref(), Some("alice"));
        assert_eq!(q.limit, 10);
        assert_eq!(q.before_id, Some(99));
        assert_eq!(q.to_ms, None);
        assert!(audit_query(Some("who=x")).is_err());
        assert!(audit_query(Some("limit=0")).is_err());
    }
}
