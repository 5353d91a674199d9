//! Every body the JSON API (`/api/v1/...`) reads is JSON, and says so: a request that carries
//! a body under another media type (`curl -d` sends `application/x-www-form-urlencoded`, a
//! script may send `text/plain`) is refused with 415 `unsupported_media_type` before its
//! handler runs, instead of being parsed as JSON anyway and acted on (a replay queued by a
//! body its sender did not mean as JSON). `docs/api.md`, "Errors".
//!
//! Accepted: `application/json` and any `application/<name>+json` (RFC 6839 §3.1), with or
//! without parameters (`; charset=utf-8`). A request without a body (no `Content-Type`, and
//! no `Content-Length` above 0 nor `Transfer-Encoding`) passes whatever its type: the routes
//! whose body is optional (pause, resume, cancel) take none.

use axum::extract::Request;
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api_error::{is_api_path, ApiError};

/// Middleware: 415 for a `/api/v1/` request whose body is not declared JSON (module docs).
pub async fn require_json(req: Request, next: Next) -> Response {
    if is_api_path(req.uri().path()) && takes_body(req.method()) {
        if let Some(refusal) = refusal(req.headers()) {
            return refusal.into_response();
        }
    }
    next.run(req).await
}

fn takes_body(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The 415, when `headers` declare a body that is not JSON.
fn refusal(headers: &HeaderMap) -> Option<ApiError> {
    let declared = headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("(not text)").to_string());
    let media = declared.as_deref().map(|ct| {
        ct.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    match media.as_deref() {
        Some(m) if is_json(m) => None,
        Some(_) => Some(ApiError::UnsupportedMediaType(format!(
            "the body is sent as `{}`; the API reads JSON only: send it with Content-Type: \
             application/json (curl: -H 'Content-Type: application/json', or --json)",
            declared.unwrap_or_default()
        ))),
        None if has_body(headers) => Some(ApiError::UnsupportedMediaType(
            "the body has no Content-Type; the API reads JSON only: send it with \
             Content-Type: application/json"
                .into(),
        )),
        None => None,
    }
}

/// `application/json` or `application/<name>+json` (a lower-cased media type).
fn is_json(media: &str) -> bool {
    media == "application/json"
        || media
            .strip_prefix("application/")
            .is_some_and(|sub| sub.ends_with("+json"))
}

/// Whether the request says it has a body: `Content-Length` above 0, or a
/// `Transfer-Encoding` (a chunked body of unknown length).
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn json_in_its_forms_passes() {
        for ct in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/merge-patch+json",
        ] {
            assert!(
                refusal(&headers(&[(header::CONTENT_TYPE, ct)])).is_none(),
                "{ct}"
            );
        }
    }

    #[test]
    fn other_media_types_are_415_naming_what_was_sent() {
        for ct in [
            "application/x-www-form-urlencoded",
            "text/plain",
            "application/xml",
            "multipart/form-data; boundary=x",
            "",
            "application/jsonp",
        ] {
            let e = refusal(&headers(&[(header::CONTENT_TYPE, ct)])).expect(ct);
            assert!(matches!(e, ApiError::UnsupportedMediaType(_)), "{ct}");
            assert!(
                e.to_string().contains("Content-Type: application/json"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_body_without_a_type_is_415_and_no_body_passes() {
        assert!(refusal(&headers(&[(header::CONTENT_LENGTH, "12")])).is_some());
        assert!(refusal(&headers(&[(header::TRANSFER_ENCODING, "chunked")])).is_some());
        assert!(refusal(&headers(&[(header::CONTENT_LENGTH, "0")])).is_none());
        assert!(refusal(&HeaderMap::new()).is_none());
    }

    #[test]
    fn only_methods_with_a_body_are_checked() {
        assert!(!takes_body(&Method::GET));
        assert!(!takes_body(&Method::HEAD));
        assert!(takes_body(&Method::POST));
        assert!(takes_body(&Method::PUT));
        assert!(takes_body(&Method::DELETE));
    }
}
