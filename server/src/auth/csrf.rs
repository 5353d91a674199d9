//! CSRF protection: the synchronizer token pattern (OWASP CSRF Prevention Cheat Sheet).
//!
//! Each session has a random token ([`redrive_core::auth::SessionInfo::csrf_token`]). Every
//! request that changes state (any method but GET, HEAD, OPTIONS, TRACE) and is authenticated
//! by the session cookie must carry it, either
//! - as the form field `csrf` of an `application/x-www-form-urlencoded` body (HTML forms, and
//!   Leptos server functions, whose default encoding is exactly that), or
//! - as the header `X-CSRF-Token` (`fetch`/XHR; JSON bodies).
//!
//! It is compared in constant time. Requests with a Bearer token are exempt: nothing ambient
//! (a cookie) authenticates them, so another site cannot forge one. [`check`] is the only
//! place this is decided; the middleware calls it for every route.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, Method};
use redrive_core::auth::{constant_time_eq, CSRF_FIELD, CSRF_HEADER};

use super::ApiError;

/// Largest form body read to find the `csrf` field, bytes (axum's own default body limit).
pub const MAX_FORM_BYTES: usize = 2 * 1024 * 1024;

/// True for methods that must not change state (RFC 9110 "safe" methods).
pub fn is_safe(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// Passes `req` on (its body intact) if it is safe or carries `expected`; else `Csrf`.
///
/// A form body is read into memory (at most [`MAX_FORM_BYTES`]) to find the field and then
/// put back, so the handler reads the same bytes.
pub async fn check(req: Request, expected: &str) -> Result<Request, ApiError> {
    if is_safe(req.method()) {
        return Ok(req);
    }
    if let Some(v) = req.headers().get(CSRF_HEADER) {
        return if constant_time_eq(v.as_bytes(), expected.as_bytes()) {
            Ok(req)
        } else {
            Err(wrong())
        };
    }
    let is_form = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|ct| {
            ct.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
        .unwrap_or(false);
    if !is_form {
        return Err(missing());
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
        .await
        .map_err(|_| ApiError::Csrf("the form is too large or was cut short".into()))?;
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(&bytes).unwrap_or_default();
    let sent = pairs
        .iter()
        .find(|(k, _)| k == CSRF_FIELD)
        .map(|(_, v)| v.as_str());
    match sent {
        None => Err(missing()),
        Some(v) if constant_time_eq(v.as_bytes(), expected.as_bytes()) => {
            Ok(Request::from_parts(parts, Body::from(bytes)))
        }
        Some(_) => Err(wrong()),
    }
}

fn missing() -> ApiError {
    ApiError::Csrf(
        "this request changes something and needs the session's CSRF token (form field \
         `csrf` or header `X-CSRF-Token`); reload the page and try again, or use an API token"
            .into(),
    )
}

fn wrong() -> ApiError {
    ApiError::Csrf(
        "the CSRF token does not match this session (the page is older than your sign-in?); \
         reload the page and try again"
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(body: &str) -> Request {
        Request::builder()
            .method(Method::POST)
            .uri("/x")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(body.to_string()))
            .unwrap()
    }

    #[tokio::test]
    async fn form_field_header_and_body_kept() {
        let req = check(form("a=1&csrf=tok&b=2"), "tok").await.unwrap();
        let body = axum::body::to_bytes(req.into_body(), 1000).await.unwrap();
        assert_eq!(&body[..], b"a=1&csrf=tok&b=2");
        assert!(matches!(
            check(form("a=1"), "tok").await,
            Err(ApiError::Csrf(_))
        ));
        assert!(matches!(
            check(form("csrf=nope"), "tok").await,
            Err(ApiError::Csrf(_))
        ));
        let json = Request::builder()
            .method(Method::POST)
            .uri("/x")
            .header(header::CONTENT_TYPE, "application/json")
            .header("X-CSRF-Token", "tok")
            .body(Body::from("{}"))
            .unwrap();
        assert!(check(json, "tok").await.is_ok());
        let get = Request::builder().uri("/x").body(Body::empty()).unwrap();
        assert!(check(get, "tok").await.is_ok());
    }
}
