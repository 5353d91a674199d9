//! Plain-form errors shown only from the session's own failed POST (`docs/security.md`,
//! "Form errors").
//!
//! A server function posted by a plain HTML form (no JavaScript) that fails answers a redirect
//! back to the page with the error in the URL: `?__path=/api/ui/...&__err=BASE64`, which the
//! page's action shows in its error box (Leptos' `ServerActionError`). Left alone, anyone could
//! craft such a link and put any text into the page of whoever follows it. So:
//!
//! - on the way out, this layer signs each such redirect: it appends `__sig`, an HMAC-SHA256
//!   of `__path` and `__err` keyed by the session's CSRF token (a per-session secret the
//!   store keeps; every instance sharing the store can check it);
//! - on the way in, a page request (`GET`/`HEAD` outside `/api/`) carrying `__err` passes only
//!   with a valid `__sig` for the caller's own session; otherwise it is answered 303 to the
//!   same address without `__err`, `__path` and `__sig` (the page then shows no error).
//!
//! It runs inside the authentication layer (it needs the session's [`SessionInfo`]).

use axum::extract::Request;
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use hmac::{Hmac, Mac};
use redrive_core::auth::SessionInfo;
use sha2::Sha256;

/// The query parameter carrying the signature.
pub const SIG_PARAM: &str = "__sig";
/// The server functions' error parameters (Leptos' names) and ours.
const ERROR_PARAMS: [&str; 3] = ["__err", "__path", SIG_PARAM];
/// Bytes of the HMAC kept in `__sig` (128 bits, as 32 hex digits).
const SIG_BYTES: usize = 16;

/// The HMAC of (`path`, `err`) keyed by `key`; `None` only if HMAC refused the key, which it
/// does not for any length (RFC 2104 §2).
fn mac(key: &str, path: &str, err: &str) -> Option<Hmac<Sha256>> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key.as_bytes()).ok()?;
    m.update(b"redrive form error\n");
    m.update(path.as_bytes());
    m.update(b"\n");
    m.update(err.as_bytes());
    Some(m)
}

/// `__sig` for the error `err` of server function `path` in the session whose CSRF token is
/// `csrf_token`: 32 lowercase hex digits (empty in the impossible case of a refused key, which
/// no page then accepts).
pub fn signature(csrf_token: &str, path: &str, err: &str) -> String {
    let Some(m) = mac(csrf_token, path, err) else {
        return String::new();
    };
    m.finalize().into_bytes()[..SIG_BYTES]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// True if `sig` is [`signature`] of (`csrf_token`, `path`, `err`); compared in constant time.
pub fn verify(csrf_token: &str, path: &str, err: &str, sig: &str) -> bool {
    match (decode_hex(sig), mac(csrf_token, path, err)) {
        (Some(raw), Some(m)) if raw.len() == SIG_BYTES => m.verify_truncated_left(&raw).is_ok(),
        _ => false,
    }
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The decoded value of `name` in `query`, if present.
fn param(pairs: &[(String, String)], name: &str) -> Option<String> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

/// `query` without the error parameters, its other pairs as they were written.
fn without_error_params(query: &str) -> String {
    query
        .split('&')
        .filter(|kv| {
            let name = kv.split_once('=').map_or(*kv, |(k, _)| k);
            !kv.is_empty() && !ERROR_PARAMS.contains(&name)
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The middleware (`axum::middleware::from_fn`); see the module docs.
pub async fn guard(req: Request, next: Next) -> Response {
    let csrf = req
        .extensions()
        .get::<SessionInfo>()
        .map(|s| s.csrf_token.clone());
    let path = req.uri().path().to_string();
    let is_api = path.starts_with("/api/");
    let method = req.method().clone();
    if (method == Method::GET || method == Method::HEAD) && !is_api {
        if let Some(query) = req.uri().query() {
            let pairs: Vec<(String, String)> =
                serde_urlencoded::from_str(query).unwrap_or_default();
            if let Some(err) = param(&pairs, "__err") {
                let signed = match (&csrf, param(&pairs, "__path"), param(&pairs, SIG_PARAM)) {
                    (Some(key), Some(fn_path), Some(sig)) => verify(key, &fn_path, &err, &sig),
                    _ => false,
                };
                if !signed {
                    let kept = without_error_params(query);
                    let to = if kept.is_empty() {
                        path.clone()
                    } else {
                        format!("{path}?{kept}")
                    };
                    tracing::info!(%path, "dropped an unsigned form error from a page address");
                    return crate::auth::middleware::redirect_303(&to);
                }
            }
        }
        return next.run(req).await;
    }
    let plain_form = method == Method::POST
        && is_api
        && req
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"));
    let mut res = next.run(req).await;
    if let (true, Some(key)) = (plain_form && res.status().is_redirection(), csrf) {
        sign_location(&mut res, &key);
    }
    res
}

/// Appends `__sig` to a redirect's `Location` that carries a form error.
fn sign_location(res: &mut Response, key: &str) {
    let Some(location) = res
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    else {
        return;
    };
    let (before_fragment, fragment) = match location.split_once('#') {
        Some((a, f)) => (a, Some(f)),
        None => (location.as_str(), None),
    };
    let Some((_, query)) = before_fragment.split_once('?') else {
        return;
    };
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    let (Some(err), Some(fn_path)) = (param(&pairs, "__err"), param(&pairs, "__path")) else {
        return;
    };
    let mut signed = format!(
        "{before_fragment}&{SIG_PARAM}={}",
        signature(key, &fn_path, &err)
    );
    if let Some(f) = fragment {
        signed.push('#');
        signed.push_str(f);
    }
    // Only hex digits were added to a header value that was valid: this cannot fail.
    if let Ok(v) = HeaderValue::from_str(&signed) {
        res.headers_mut().insert(header::LOCATION, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures() {
        let sig = signature("csrf-a", "/api/ui/act", "RXJy");
        assert_eq!(sig.len(), 32);
        assert!(verify("csrf-a", "/api/ui/act", "RXJy", &sig));
        assert!(!verify("csrf-b", "/api/ui/act", "RXJy", &sig));
        assert!(!verify("csrf-a", "/api/ui/other", "RXJy", &sig));
        assert!(!verify("csrf-a", "/api/ui/act", "RXJz", &sig));
        assert!(!verify("csrf-a", "/api/ui/act", "RXJy", "zz"));
        assert!(!verify("csrf-a", "/api/ui/act", "RXJy", ""));
        assert_eq!(
            without_error_params("a=1&__err=x&__path=%2F&b=2&__sig=00"),
            "a=1&b=2"
        );
        assert_eq!(without_error_params("__err=x"), "");
    }
}
