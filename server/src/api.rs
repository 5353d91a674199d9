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

/// Any other path under `/api/`: a JSON 404 instead of the UI's HTML page, naming the routes
/// the caller was probably after ([`not_found_message`]).
pub async fn api_not_found(method: Method, uri: Uri) -> ApiError {
    let documented = crate::openapi::spec()
        .paths
        .paths
        .keys()
        .map(String::as_str);
    ApiError::NotFound(not_found_message(&method, uri.path(), documented))
}

/// Most routes one 404 names; the rest are counted (all are at `/api/docs`).
const MAX_ROUTES_NAMED: usize = 8;

/// The message of the API's 404 for `method` `path`, given the documented route templates
/// (`/api/v1/dead-letters/{id}`, ...). Under a prefix of documented routes (`/api/v1/automation`,
/// or `/api/v1/automation/nope` under it) it names the routes under the longest such prefix,
/// a `{param}` segment of a route matching any segment of the path; elsewhere the main routes.
/// Both end with where every route is described.
pub(crate) fn not_found_message<'a>(
    method: &Method,
    path: &str,
    documented: impl Iterator<Item = &'a str> + Clone,
) -> String {
    let docs = crate::openapi::DOCS_PATH;
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // `/api/v1` itself is not a prefix worth naming: everything is under it.
    for n in (3..=segments.len()).rev() {
        let prefix = &segments[..n];
        let under: Vec<&str> = documented
            .clone()
            .filter(|route| {
                let route: Vec<&str> = route.split('/').filter(|s| !s.is_empty()).collect();
                route.len() > n
                    && route
                        .iter()
                        .zip(prefix)
                        .all(|(r, p)| r == p || (r.starts_with('{') && r.ends_with('}')))
            })
            .collect();
        if under.is_empty() {
            continue;
        }
        let mut named = under
            .iter()
            .take(MAX_ROUTES_NAMED)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if under.len() > MAX_ROUTES_NAMED {
            named.push_str(&format!(" and {} more", under.len() - MAX_ROUTES_NAMED));
        }
        let (routes, are) = if under.len() == 1 {
            ("route", "is")
        } else {
            ("routes", "are")
        };
        return format!(
            "no API route {method} {path}; the {routes} under /{} {are} {named} (every route, \
             with its methods, is described at {docs})",
            prefix.join("/")
        );
    }
    format!(
        "no API route {method} {path}; see /api/v1/dead-letters, /api/v1/dead-letters/{{id}} and \
         /api/v1/error-groups (every route is described at {docs})"
    )
}
