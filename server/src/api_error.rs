//! The one HTTP error of the API (`/api/v1/...`), the authentication layer's refusals
//! (`auth`), the request timeout and the body limit on `/api/` paths.
//!
//! Every refusal answers `Content-Type: application/json` with [`ErrorBody`]:
//!
//! ```json
//! {"error": "`limit` must be a whole number from 1 to 500", "code": "bad_request", "status": 400}
//! ```
//!
//! - `error`: a sentence saying what is wrong and what to do next (the field clients and
//!   `redrive`'s CLI client read since the first API version);
//! - `code`: a stable machine name of the refusal ([`ApiError::code`]);
//! - `status`: the HTTP status, repeated for clients that only keep the body;
//! - `retry_after_s`: on 429 and 503 only, the seconds to wait, as in the `Retry-After`
//!   header (RFC 9110 §10.2.3) the answer also carries.
//!
//! A 401 also carries `WWW-Authenticate: Bearer realm="redrive"` (RFC 6750 §3).
//! Answers that axum or tower-http produce before a handler runs (405 for a method a route
//! does not have, 413 for a body over the limit, 503 for the request timeout, 400/415/422
//! for extractor rejections) are rewritten into the same shape by [`normalize`].

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use redrive_core::store::StoreError;
use serde::Serialize;

/// Seconds a client should wait after a 503 (the store did not answer, or the request timed
/// out) before it tries again.
pub const RETRY_AFTER_UNAVAILABLE_S: u64 = 5;

/// Why an API request failed; rendered as [`ErrorBody`] with its status.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed input: not JSON, a bad query parameter, a non-numeric id: 400.
    #[error("{0}")]
    BadRequest(String),
    /// No or bad credentials: 401 with `WWW-Authenticate: Bearer`.
    #[error("{0}")]
    Unauthenticated(String),
    /// Signed in, but the role (or a read-only token) does not allow it: 403.
    #[error("{0}")]
    Forbidden(String),
    /// A session's request without the right CSRF token, or a cross-site one: 403.
    #[error("{0}")]
    Csrf(String),
    /// No such dead letter, job, user, route...: 404.
    #[error("{0}")]
    NotFound(String),
    /// The route exists but not with this method: 405.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The current state does not allow it (a finished job, a taken name): 409.
    #[error("{0}")]
    Conflict(String),
    /// The body is larger than the server accepts: 413.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The body's media type is not JSON: 415.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// Well-formed, but it asks for something impossible: 422.
    #[error("{0}")]
    Unprocessable(String),
    /// Too many attempts: 429 with `Retry-After: retry_after_s`.
    #[error("{message}")]
    TooManyRequests { message: String, retry_after_s: u64 },
    /// The store failed (unreachable, timed out): 503 with `Retry-After`. The cause is
    /// logged, not shown.
    #[error("the database did not answer; try again in a moment (the cause is in redrive's log)")]
    Unavailable,
    /// The request took longer than `request_timeout`: 503 with `Retry-After`.
    #[error("the request took too long and was stopped; try again in a moment, or narrow it")]
    Timeout,
    /// A service redrive relies on (the archive's object store) failed: 502.
    #[error("{0}")]
    BadGateway(String),
    /// Anything else the server could not do: 500 (a bug; logged).
    #[error("{0}")]
    Internal(String),
}

/// The body of every API refusal (see the module docs).
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What is wrong and what to do next, as a sentence.
    pub error: String,
    /// Stable machine name of the refusal: `bad_request`, `unauthenticated`, `forbidden`,
    /// `csrf`, `not_found`, `method_not_allowed`, `conflict`, `payload_too_large`,
    /// `unsupported_media_type`, `unprocessable`, `too_many_requests`, `unavailable`,
    /// `timeout`, `bad_gateway`, `internal`.
    pub code: String,
    /// The HTTP status code of the answer.
    pub status: u16,
    /// Seconds to wait before trying again (429 and 503 only; also the `Retry-After`
    /// header).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    /// The HTTP status of this refusal.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::Csrf(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable | ApiError::Timeout => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable machine name of this refusal (`ErrorBody::code`).
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::Unauthenticated(_) => "unauthenticated",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::Csrf(_) => "csrf",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed(_) => "method_not_allowed",
            ApiError::Conflict(_) => "conflict",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Unprocessable(_) => "unprocessable",
            ApiError::TooManyRequests { .. } => "too_many_requests",
            ApiError::Unavailable => "unavailable",
            ApiError::Timeout => "timeout",
            ApiError::BadGateway(_) => "bad_gateway",
            ApiError::Internal(_) => "internal",
        }
    }

    /// Seconds to wait before trying again: 429 and 503 only.
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            ApiError::TooManyRequests { retry_after_s, .. } => Some((*retry_after_s).max(1)),
            ApiError::Unavailable | ApiError::Timeout => Some(RETRY_AFTER_UNAVAILABLE_S),
            _ => None,
        }
    }

    /// The body of this refusal.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.to_string(),
            code: self.code().to_string(),
            status: self.status().as_u16(),
            retry_after_s: self.retry_after_s(),
        }
    }

    /// Logs a store failure behind a 503 (for callers without the telemetry at hand; API
    /// handlers use `AppState::store_failed`, which also counts it).
    pub fn store(e: StoreError) -> ApiError {
        tracing::error!(error = %e, "the store failed");
        ApiError::Unavailable
    }

    /// The refusal a status code stands for, with `message` (for answers made outside a
    /// handler, see [`normalize`]).
    pub fn from_status(status: StatusCode, message: String) -> ApiError {
        match status.as_u16() {
            400 => ApiError::BadRequest(message),
            401 => ApiError::Unauthenticated(message),
            403 => ApiError::Forbidden(message),
            404 => ApiError::NotFound(message),
            405 => ApiError::MethodNotAllowed(message),
            409 => ApiError::Conflict(message),
            413 => ApiError::PayloadTooLarge(message),
            415 => ApiError::UnsupportedMediaType(message),
            422 => ApiError::Unprocessable(message),
            429 => ApiError::TooManyRequests {
                message,
                retry_after_s: RETRY_AFTER_UNAVAILABLE_S,
            },
            502 => ApiError::BadGateway(message),
            503 => ApiError::Timeout,
            _ => ApiError::Internal(message),
        }
    }
}

impl From<redrive_core::FilterError> for ApiError {
    fn from(e: redrive_core::FilterError) -> Self {
        ApiError::BadRequest(e.to_string())
    }
}

impl From<redrive_core::request::RequestError> for ApiError {
    fn from(e: redrive_core::request::RequestError) -> Self {
        ApiError::Unprocessable(e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let retry = self.retry_after_s();
        let mut res = (status, Json(self.body())).into_response();
        let h = res.headers_mut();
        if status == StatusCode::UNAUTHORIZED {
            h.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"redrive\""),
            );
        }
        if let Some(s) = retry {
            if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
                h.insert(header::RETRY_AFTER, v);
            }
        }
        res
    }
}

/// True for the paths whose refusals are [`ErrorBody`]: the versioned API.
pub fn is_api_path(path: &str) -> bool {
    path == "/api/v1" || path.starts_with("/api/v1/")
}

/// Middleware (outside the timeout and compression layers): on `/api/v1/` paths, an error
/// answer (4xx/5xx) that is not JSON — made by axum (405, 413, extractor rejections) or
/// tower-http (the request timeout's 503) before or instead of a handler — becomes the one
/// [`ErrorBody`] shape with its status (and `Retry-After` on 503). On the other `/api/`
/// paths (the UI's server functions, whose client reads its own error encoding) only a 503
/// without `Retry-After` gets one.
pub async fn normalize(req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let res = next.run(req).await;
    let status = res.status();
    if !(status.is_client_error() || status.is_server_error()) || !path.starts_with("/api") {
        return res;
    }
    if !is_api_path(&path) {
        let mut res = res;
        if status == StatusCode::SERVICE_UNAVAILABLE
            && !res.headers().contains_key(header::RETRY_AFTER)
        {
            res.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(RETRY_AFTER_UNAVAILABLE_S),
            );
        }
        return res;
    }
    let json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if json {
        return res;
    }
    let (parts, body) = res.into_parts();
    // The extractor's own sentence (e.g. "Failed to buffer the request body: length limit
    // exceeded"), kept when it is short text; the request timeout's body is empty.
    let text = axum::body::to_bytes(body, 4096)
        .await
        .ok()
        .and_then(|b| String::from_utf8(b.to_vec()).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let message = match status {
        // axum adds `Allow` after this layer has run (it lists the methods the route takes).
        StatusCode::METHOD_NOT_ALLOWED => {
            format!("{path} does not take {method}; the `Allow` header lists the methods it takes")
        }
        StatusCode::PAYLOAD_TOO_LARGE => format!(
            "the body is too large{}; send less per request (ids by filter, or in parts)",
            text.map(|t| format!(" ({t})")).unwrap_or_default()
        ),
        _ => text.unwrap_or_else(|| {
            status
                .canonical_reason()
                .unwrap_or("refused")
                .to_lowercase()
        }),
    };
    let mut out = ApiError::from_status(status, message).into_response();
    if let Some(allow) = parts.headers.get(header::ALLOW) {
        out.headers_mut().insert(header::ALLOW, allow.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_has_a_code_status_and_retry_only_when_useful() {
        let all = [
            ApiError::BadRequest("b".into()),
            ApiError::Unauthenticated("u".into()),
            ApiError::Forbidden("f".into()),
            ApiError::Csrf("c".into()),
            ApiError::NotFound("n".into()),
            ApiError::MethodNotAllowed("m".into()),
            ApiError::Conflict("c".into()),
            ApiError::PayloadTooLarge("p".into()),
            ApiError::UnsupportedMediaType("m".into()),
            ApiError::Unprocessable("u".into()),
            ApiError::TooManyRequests {
                message: "t".into(),
                retry_after_s: 0,
            },
            ApiError::Unavailable,
            ApiError::Timeout,
            ApiError::BadGateway("g".into()),
            ApiError::Internal("i".into()),
        ];
        for e in all {
            let body = e.body();
            assert_eq!(body.status, e.status().as_u16());
            assert!(!body.error.is_empty());
            let retry = matches!(body.status, 429 | 503);
            assert_eq!(body.retry_after_s.is_some(), retry, "{e:?}");
            assert!(body.retry_after_s.is_none_or(|s| s >= 1));
        }
    }
}
