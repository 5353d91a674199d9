//! The security headers of every response (`docs/security.md`, "Response headers"): pages,
//! server functions, the JSON API, static files, refusals, errors, 404s and redirects alike.
//!
//! The layer is the outermost of the application (`router::app`), so nothing answers without
//! it — not even the 503 of the request timeout. For each request it makes a fresh CSP nonce
//! ([`Nonce`], 128 random bits) and puts it into the request's extensions, where the site's
//! Leptos context picks it up (`site.rs`): the hydration `<script>` and the streamed
//! resource scripts carry it, and the response's `Content-Security-Policy` names it. No
//! other inline script can run, nothing may frame a page, and forms may post only here.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use leptos::nonce::Nonce;

/// `Strict-Transport-Security` with `cookie_secure` (redrive is reached over HTTPS): one year,
/// this host only (not `includeSubDomains`: redrive cannot know the other hosts of the domain).
pub const HSTS: &str = "max-age=31536000";

/// What the layer needs to know of the configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct SecurityHeaders {
    /// Send `Strict-Transport-Security` (set from `cookie_secure`).
    pub hsts: bool,
}

/// The `Content-Security-Policy` of a response whose inline scripts carry `nonce`.
///
/// - `script-src 'self' 'nonce-N' 'wasm-unsafe-eval'`: the app's own JS from `/pkg/`, the
///   inline scripts Leptos writes with the nonce, and compiling the app's wasm. Nothing else
///   (no `unsafe-inline`, no `eval`).
/// - `style-src 'self'`: the stylesheet only; the pages have no inline styles.
/// - `frame-ancestors 'none'`: no page can be framed (clickjacking of the confirmation page).
/// - `form-action 'self'`: forms post to this site only.
/// - `base-uri 'none'`, `object-src 'none'`: no `<base>` hijack, no plugins.
pub fn content_security_policy(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; \
         object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    )
}

/// True for the responses that may be cached: the static assets (`/pkg/*`, which set their
/// own `Cache-Control: no-cache`, i.e. revalidate) and the favicon. Everything else — pages,
/// server functions, the API, downloads — is `no-store`: it shows message contents to a
/// signed-in user and must not stay in a shared or disk cache.
pub fn is_static_asset(path: &str) -> bool {
    path.starts_with("/pkg/") || path == "/favicon.svg" || path == "/favicon.ico"
}

/// The middleware (`axum::middleware::from_fn_with_state`).
pub async fn apply(
    State(settings): State<SecurityHeaders>,
    mut req: Request,
    next: Next,
) -> Response {
    let nonce = Nonce::new();
    let cacheable = is_static_asset(req.uri().path());
    req.extensions_mut().insert(nonce.clone());
    let mut res = next.run(req).await;
    set_headers(res.headers_mut(), &nonce, settings, cacheable);
    res
}

fn set_headers(h: &mut HeaderMap, nonce: &str, settings: SecurityHeaders, cacheable: bool) {
    if let Ok(v) = HeaderValue::from_str(&content_security_policy(nonce)) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // `same-origin`, not `no-referrer`: the plain-form error page's "Back" link and the
    // server functions' redirects use the Referer of this site's own pages.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    // For browsers that predate `frame-ancestors`.
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    if settings.hsts {
        h.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(HSTS),
        );
    }
    if !cacheable {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_policy() {
        let mut h = HeaderMap::new();
        set_headers(&mut h, "abc", SecurityHeaders { hsts: false }, false);
        let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.contains("'nonce-abc'"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(csp.contains("form-action 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(h[header::CACHE_CONTROL], "no-store");
        assert!(h.get(header::STRICT_TRANSPORT_SECURITY).is_none());

        let mut h = HeaderMap::new();
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        set_headers(&mut h, "abc", SecurityHeaders { hsts: true }, true);
        assert_eq!(h[header::STRICT_TRANSPORT_SECURITY], HSTS);
        assert_eq!(h[header::CACHE_CONTROL], "no-cache");
        assert!(is_static_asset("/pkg/redrive.js"));
        assert!(!is_static_asset("/api/v1/dead-letters"));
    }
}
