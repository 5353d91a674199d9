//! The JSON API (`/api/v1/...`) and the health and metrics endpoints (raw downloads are in
//! `raw.rs`).
//!
//! The response shapes here are a public contract: they are dedicated DTOs mapped from the core
//! model, so that an internal refactor cannot silently change what API clients receive. Every
//! failure answers JSON `{"error": "..."}` with a message saying what to do next; bad input is a
//! 4xx, never a 500, and nothing here panics on request or store data.
//!
//! The code lives in submodules named for what they do: [`state`] (the shared handler state
//! and the ingest and relay health it carries), [`dead_letter_dto`] (a dead letter's response
//! shapes), [`dead_letters`] (the list and detail handlers), [`error_groups`] (their shapes
//! and handler), [`params`] (query string and id parsing, shared with `raw.rs`) and [`health`]
//! (`/healthz`, `/readyz`, `/metrics`); this file holds what every handler shares: the error
//! type, the time format and the API's 404. The routes are in `router.rs`.

mod dead_letter_dto;
mod dead_letters;
mod error_groups;
mod health;
mod params;
mod state;
#[cfg(test)]
mod tests;

use axum::http::{Method, Uri};
use chrono::{DateTime, SecondsFormat, Utc};
use redrive_core::store::StoreError;

pub(crate) use dead_letter_dto::{DeadLetterPage, DeadLetterRecord, HeaderItem};
pub(crate) use dead_letters::{get_dead_letter, list_dead_letters};
pub(crate) use error_groups::{list_error_groups, ErrorGroupList};
pub(crate) use health::{healthz, metrics, readyz};
pub(crate) use params::{not_found, parse_id};
pub(crate) use state::{AppState, IngestHealth, RelayHealth};

// ---------------------------------------------------------------------------------------------
// Errors

pub use crate::api_error::ApiError;

impl AppState {
    /// Logs and counts a store failure, and turns it into the 503 the client sees.
    pub(crate) fn store_failed(&self, operation: &'static str, e: StoreError) -> ApiError {
        self.telemetry.store_error(operation, &e);
        ApiError::Unavailable
    }
}

/// Epoch ms as RFC 3339 UTC with milliseconds; `None` only for a time outside chrono's range
/// (±262,000 years), which no real record has.
pub fn rfc3339(ms: i64) -> Option<String> {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// Any other path under `/api/`: a JSON 404 instead of the UI's HTML page.
pub async fn api_not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::NotFound(format!(
        "no API route {method} {}; see /api/v1/dead-letters, /api/v1/dead-letters/{{id}} and \
         /api/v1/error-groups",
        uri.path()
    ))
}
