//! Replays: `POST /api/v1/replays` (queue a job) and `/replays/dry-run` (what it would do),
//! their body and answers.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use redrive_core::actions::{DryRun, ReplayRequest};
use redrive_core::approval::ActionKind;
use redrive_core::permission::Permission;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::request::{confirm_all, parse_body, selection};
use crate::api::AppState;
use crate::auth::{require_permission, ApiError, Caller};

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

/// What a replay's canary would be (`DryRunResult::canary`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DryRunCanary {
    /// Records in the canary for the records queued now (`records`, or ceil(percent %)).
    pub size: i64,
    /// The plan in words: "the first 10 records, then watch 30 s for re-failures; pause the
    /// job if more than 0 come back".
    pub plan: String,
}

/// One target of a dry run.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TargetCount {
    pub topic: String,
    pub count: i64,
}

/// One status of a dry run's selection.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct StatusCount {
    /// `new`, `replay_pending`, `replayed`, `replay_failed`, `re_failed` or `deleted`.
    pub status: &'static str,
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
    /// The selected dead letters by status (only those present, in the status order of
    /// `docs/triage.md`): a filter without `status` replays `replayed`, `replay_failed` and
    /// `re_failed` ones too; add `"status": "new"` to take only the new ones.
    pub per_status: Vec<StatusCount>,
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
            per_status: d
                .per_status
                .into_iter()
                .map(|(s, count)| StatusCount {
                    status: s.as_str(),
                    count,
                })
                .collect(),
            requires_confirm_all: false,
            confirm_all: None,
            sample: Default::default(),
            canary: None,
        }
    }
}

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
