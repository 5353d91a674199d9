//! Raw downloads: a record's key, value and headers exactly as stored, for everything a page
//! shows only in part (the display caps, `docs/limits.md`). Served under `/dead-letters/{id}/raw/`
//! for the UI's links and under `/api/v1/dead-letters/{id}/raw/` for scripts.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;

use redrive_core::actions::Actor;

use crate::api::{not_found, parse_id, ApiError, AppState, HeaderItem};
use crate::auth::Caller;

/// Which part of a record a raw download serves.
#[derive(Debug, Clone, Copy)]
pub enum Part {
    Key,
    Value,
    /// Every header in record order, duplicates kept, as JSON `[{"name", "value"}]` with the
    /// value in base64 (`null` for a null-valued header): the same shape as `headers` in
    /// `GET /api/v1/dead-letters/{id}`.
    Headers,
}

impl Part {
    fn name(self) -> &'static str {
        match self {
            Part::Key => "key",
            Part::Value => "value",
            Part::Headers => "headers",
        }
    }
}

/// `GET /dead-letters/{id}/raw/{value,key,headers}` (and the same under `/api/v1`): the exact
/// bytes as a download (headers as JSON); 404 when the record is missing or the key or value
/// is null.
pub async fn raw_download(
    state: &AppState,
    actor: &Actor,
    path: Result<Path<String>, PathRejection>,
    part: Part,
) -> Result<Response, ApiError> {
    let id = parse_id(path)?;
    let dl = state
        .store
        .get(id)
        .await
        .map_err(|e| state.store_failed("get", e))?
        // Outside the caller's DLQ-topic scope a record is absent.
        .filter(|d| actor.sees_topic(&d.summary.dlq_topic))
        .ok_or_else(|| not_found(id))?;
    let null = || {
        ApiError::NotFound(format!(
            "dead letter {id} has a null {} (nothing to download)",
            part.name()
        ))
    };
    let (mut res, extension) = match part {
        Part::Key => (dl.record.key.ok_or_else(null)?.into_response(), "bin"),
        Part::Value => (dl.record.value.ok_or_else(null)?.into_response(), "bin"),
        Part::Headers => {
            let items: Vec<HeaderItem> = dl.record.headers.iter().map(HeaderItem::from).collect();
            (Json(items).into_response(), "json")
        }
    };
    let disposition = format!(
        "attachment; filename=\"dead-letter-{id}-{}.{extension}\"",
        part.name()
    );
    let h = res.headers_mut();
    if extension == "bin" {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
    }
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    // The bytes are arbitrary (possibly hostile) content: never let a browser sniff them into
    // HTML or script.
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(res)
}

/// `GET .../raw/value`.
pub async fn raw_value(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    raw_download(&state, &actor, path, Part::Value).await
}

/// `GET .../raw/key`.
pub async fn raw_key(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    raw_download(&state, &actor, path, Part::Key).await
}

/// `GET .../raw/headers`.
pub async fn raw_headers(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    raw_download(&state, &actor, path, Part::Headers).await
}
