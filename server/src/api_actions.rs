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
//! | `POST /api/v1/dead-letters/restore` | operator | `{"affected": n}`; a filter must have `"status": "deleted"` (422 otherwise: it would restore nothing) |
//! | `GET /api/v1/audit` | viewer | `{"items": [...], "next_cursor"}` (`actor`, `action`, `from`, `to`, `limit`, `cursor`) |
//! | `GET /api/v1/audit.csv` | viewer | the whole (filtered) trail as CSV |
//! | `GET /api/v1/dead-letters/{id}/history` | viewer | `{"items": [event, ...]}` oldest first |
//!
//! Bodies select dead letters with exactly one of `"ids": [1, 2]` or `"filter": {...}`, whose
//! names and values are those of the list's query string (`GET /api/v1/dead-letters`), parsed
//! by the same [`ListQuery::from_pairs`](redrive_core::ListQuery::from_pairs).
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
//!
//! The handlers live in submodules named for what they do: [`replay`] (queue and dry run),
//! [`jobs`] (list, read, cancel, pause, resume), [`delete_restore`], [`audit`](mod@audit) (the trail and a
//! dead letter's history), [`request`] (body, selection and query parsing shared with the
//! other API modules); this file holds the routes and what every handler's answer shares.

mod audit;
mod delete_restore;
mod jobs;
mod replay;
mod request;
#[cfg(test)]
mod tests;

use axum::routing::{get, post};
use axum::Router;
use redrive_core::store::StoreError;
use serde_json::Value;

use crate::api::AppState;
use crate::auth::ApiError;

use self::audit::{audit, audit_csv, history};
use self::delete_restore::{delete, restore};
use self::jobs::{cancel_job, get_job, list_jobs, pause_job, resume_job};
use self::replay::{create_replay, dry_run};

pub(crate) use self::audit::{AuditPage, HistoryList};
pub(crate) use self::delete_restore::{Affected, ChangeBody};
pub(crate) use self::jobs::{JobItem, JobList, JobStateBody, MAX_JOBS};
pub(crate) use self::replay::{DryRunResult, ReplayAccepted, ReplayBody};
pub(crate) use self::request::{confirm_all, filter_from_json, parse_body, selection};

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
            // The store names what is missing (`dead letter 7`, `replay job …`, `dead letters
            // 7, 9 (2 of the 40 asked)`).
            StoreError::NotFound(m) => ApiError::NotFound(redrive_core::store::there_is_no(&m)),
            StoreError::Conflict(m) => ApiError::Conflict(m),
            other => {
                self.telemetry.store_error(operation, &other);
                ApiError::Unavailable
            }
        }
    }
}

/// Stored JSON text as a JSON value (or the text itself if it does not parse).
fn json_text(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_string()))
}
