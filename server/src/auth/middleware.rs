//! The authentication layer over the whole application (see the module docs of `auth`).

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use redrive_core::actions::Actor;
use redrive_core::auth::{
    looks_like_api_token, secret_hash, SessionInfo, SessionKey, TokenScope, SESSION_COOKIE,
};
use redrive_core::sso::SignInOptions;

use super::handlers::{clear_cookie, sign_in_url};
use super::{csrf, now_ms, peer_ip, ApiError, AuthState, ClientMeta, SessionHandle};

/// Longest interval between two writes of a session's `last_seen_ms` (or an API token's
/// `last_used_ms`): activity is recorded at most this often, to spare the store a write per
/// request. Sessions with a short idle timeout are touched more often (a tenth of it).
const TOUCH_EVERY_MS: i64 = 60_000;

/// How a route treats requests without credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// Open to anyone: sign-in, health, static assets (and `/metrics` with `metrics_public`).
    Public,
    /// JSON API, server functions, `/metrics`: 401 JSON without credentials.
    Api,
    /// HTML pages and downloads: 303 to `/sign-in?next=...` without credentials.
    Page,
}

/// Path of the session server function (`app::auth_context::get_session`): public, so the
/// sign-in page may ask "who am I" and get `None`.
pub const SESSION_FN_PATH: &str = "/api/auth/session";

/// Path of the sign-in options server function (`app::auth_context::get_sign_in_options`):
/// public, so the sign-in page can offer single sign-on.
pub const SIGN_IN_OPTIONS_FN_PATH: &str = "/api/auth/sign-in-options";

/// Which kind of route `path` is.
pub fn classify(path: &str, metrics_public: bool) -> RouteKind {
    match path {
        "/sign-in"
        | "/auth/sign-in"
        | "/healthz"
        | "/readyz"
        | "/favicon.svg"
        | "/favicon.ico"
        | SESSION_FN_PATH
        | SIGN_IN_OPTIONS_FN_PATH
        | "/auth/oidc/start"
        | "/auth/oidc/callback" => RouteKind::Public,
        "/metrics" if metrics_public => RouteKind::Public,
        "/metrics" | "/api" => RouteKind::Api,
        p if p.starts_with("/pkg/") => RouteKind::Public,
        p if p.starts_with("/api/") => RouteKind::Api,
        _ => RouteKind::Page,
    }
}

/// Public routes that still want to know who asks (the sign-in page and form, the session
/// server function, `/metrics` when public, `/readyz`: its details are for signed-in callers).
fn needs_identity(path: &str) -> bool {
    matches!(
        path,
        "/sign-in" | "/auth/sign-in" | SESSION_FN_PATH | "/metrics" | "/readyz"
    )
}

/// Who sent a request, as far as its credentials tell.
enum Identity {
    Token(Actor),
    /// Named by a trusted reverse proxy's headers (`[proxy_auth]`).
    Proxy(Actor),
    Session(SessionHandle),
    /// No credentials; `expired` when a session cookie was sent but is no longer valid.
    Anonymous {
        expired: bool,
    },
}

/// The middleware: identify, check CSRF for sessions, refuse or pass on.
pub async fn authenticate(State(auth): State<AuthState>, mut req: Request, next: Next) -> Response {
    let kind = classify(req.uri().path(), auth.settings.metrics_public);
    // A browser navigating or posting a plain form (no JavaScript) to a server function under
    // `/api/` is better served by the page answers (a redirect to sign in, an HTML 403) than
    // by JSON it would show raw.
    let answer_as = if kind == RouteKind::Api && wants_html(req.headers()) {
        RouteKind::Page
    } else {
        kind
    };
    let client = ClientMeta::from_request(
        req.headers(),
        peer_ip(req.extensions()),
        &auth.settings.trusted_proxies,
    );
    req.extensions_mut().insert(client.clone());
    req.extensions_mut().insert(SignInOptions {
        sso: auth.oidc.is_some(),
        password: !auth.settings.password_sign_in_disabled,
    });
    // Static files and probes never need to know who asks: spare the store a lookup per asset.
    if kind == RouteKind::Public && !needs_identity(req.uri().path()) {
        return next.run(req).await;
    }

    let peer = peer_ip(req.extensions());
    let identity = match identify(&auth, req.headers(), peer, &client).await {
        Ok(i) => i,
        // A bad token or a store failure does not keep anyone from a public route.
        Err(_) if kind == RouteKind::Public => Identity::Anonymous { expired: false },
        Err(e) => return refuse(answer_as, &req, e),
    };
    // A role removed from `[roles]` keeps its users signed in but lets them do and read
    // nothing: refused here with a message, except signing out.
    let undefined = match &identity {
        Identity::Token(a) => Some(a),
        Identity::Session(h) => Some(&h.info.actor),
        Identity::Proxy(a) => Some(a),
        Identity::Anonymous { .. } => None,
    }
    .filter(|a| !a.role.is_defined());
    if let Some(actor) = undefined {
        if kind != RouteKind::Public && req.uri().path() != "/auth/sign-out" {
            tracing::info!(user = %actor.user, role = actor.role.as_str(),
                "refused: the user's role is not configured");
            let e = ApiError::Forbidden(undefined_role_message(actor));
            return refuse(answer_as, &req, e);
        }
    }
    match identity {
        Identity::Token(actor) => {
            req.extensions_mut().insert(actor);
            req.extensions_mut().insert(auth.settings.limits);
            next.run(req).await
        }
        Identity::Proxy(actor) => {
            // The proxy's cookie is ambient: state changes must come from this site
            // (`proxy::same_site`; no CSRF token, as no session holds one).
            if kind != RouteKind::Public
                && !csrf::is_safe(req.method())
                && !super::proxy::same_site(req.headers())
            {
                tracing::info!(user = %actor.user, method = %req.method(), path = %req.uri().path(),
                    "refused: cross-site request with proxy authentication");
                let e = ApiError::Csrf(
                    "refused: this request to change something came from another site".into(),
                );
                return refuse_parts(answer_as, req.method(), None, false, e);
            }
            // Pages show who is signed in from the session info; its CSRF token is unused.
            req.extensions_mut().insert(SessionInfo {
                actor: actor.clone(),
                csrf_token: String::new(),
            });
            req.extensions_mut().insert(actor);
            next.run(req).await
        }
        Identity::Session(handle) => {
            // Sign-in itself is exempt (it has no session to take a token from; its own
            // defence is the Origin check in the handler).
            if kind != RouteKind::Public {
                let method = req.method().clone();
                let path = req.uri().path().to_string();
                req = match csrf::check(req, &handle.info.csrf_token).await {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::info!(user = %handle.info.actor.user, %method, %path,
                            "refused: CSRF token missing or wrong");
                        return refuse_parts(answer_as, &method, None, false, e);
                    }
                };
            }
            req.extensions_mut().insert(handle.info.actor.clone());
            req.extensions_mut().insert(handle.info.clone());
            req.extensions_mut()
                .insert(SessionKey(handle.id_hash.clone()));
            req.extensions_mut().insert(auth.settings.limits);
            req.extensions_mut().insert(handle);
            next.run(req).await
        }
        Identity::Anonymous { expired } => {
            if kind == RouteKind::Public {
                return next.run(req).await;
            }
            let e = ApiError::Unauthenticated(if expired {
                "the session has expired; sign in again".into()
            } else {
                "sign in, or send an API token as `Authorization: Bearer rdv_...`".into()
            });
            refuse_parts(
                answer_as,
                req.method(),
                req.uri().path_and_query().map(|p| p.as_str()),
                expired,
                e,
            )
        }
    }
}

/// The refusal of every request of a user whose role is not configured.
pub fn undefined_role_message(actor: &Actor) -> String {
    format!(
        "{} has the role `{}`, which this redrive's configuration does not define (was it \
         removed from `[roles]` in redrive.toml?), so it may neither read nor change anything. \
         Ask an admin to give {} another role or to define the role again.",
        actor.user,
        actor.role.as_str(),
        actor.user
    )
}

/// Resolves the request's credentials: a Bearer token wins over a session cookie.
async fn identify(
    auth: &AuthState,
    headers: &HeaderMap,
    peer: Option<std::net::IpAddr>,
    client: &ClientMeta,
) -> Result<Identity, ApiError> {
    if let Some(token) = bearer(headers) {
        return token_identity(auth, token, client).await;
    }
    if let Some(proxy) = auth.proxy.as_deref().filter(|p| p.present(headers)) {
        if client_is_trusted_proxy(auth, peer) {
            return proxy
                .identify(auth, headers, client)
                .await
                .map(Identity::Proxy);
        }
        // Anyone can send a header: only a trusted proxy's are believed.
        tracing::warn!(peer = ?peer, "ignored proxy authentication headers from a peer not \
            in `trusted_proxies`");
    }
    let Some(cookie) = session_cookie(headers) else {
        return Ok(Identity::Anonymous { expired: false });
    };
    let id_hash = secret_hash(cookie);
    let now = now_ms();
    let limits = auth.settings.limits;
    let Some(s) = auth
        .store
        .session(&id_hash, now, limits)
        .await
        .map_err(ApiError::store)?
    else {
        return Ok(Identity::Anonymous { expired: true });
    };
    let every = TOUCH_EVERY_MS.min(limits.idle_ms / 10).max(1);
    if now - s.last_seen_ms >= every {
        // Off the request path: a page never waits for this write (on SQLite, for the write
        // lock behind a bulk action's chunk or a relay mark).
        let store = auth.store.clone();
        let id_hash = id_hash.clone();
        tokio::spawn(async move {
            if let Err(e) = store.touch_session(&id_hash, now).await {
                tracing::warn!(error = %e, "could not record session activity");
            }
        });
    }
    Ok(Identity::Session(SessionHandle {
        id_hash,
        info: SessionInfo {
            actor: client.actor(&s.user, s.role, None),
            csrf_token: s.csrf_token,
        },
    }))
}

async fn token_identity(
    auth: &AuthState,
    token: &str,
    client: &ClientMeta,
) -> Result<Identity, ApiError> {
    let invalid = || {
        ApiError::Unauthenticated(
            "the API token is not valid: it may be mistyped, revoked, or its user disabled \
             (create one with `redrive token create --user NAME`)"
                .into(),
        )
    };
    if !looks_like_api_token(token) {
        return Err(invalid());
    }
    let owner = auth
        .store
        .api_token_owner(&secret_hash(token))
        .await
        .map_err(ApiError::store)?
        .ok_or_else(invalid)?;
    let now = now_ms();
    if let Some(at) = owner.expires_at_ms.filter(|at| *at <= now) {
        tracing::info!(user = %owner.user, token = owner.token_id, "refused: the API token expired");
        return Err(ApiError::Unauthenticated(format!(
            "the API token expired at {}: create a new one (on /account, or `redrive token \
             create --user NAME --expires-in 30d`)",
            crate::api::rfc3339(at).unwrap_or_else(|| format!("{at} ms"))
        )));
    }
    if owner.last_used_ms.is_none_or(|t| now - t >= TOUCH_EVERY_MS) {
        // Off the request path, as for sessions.
        let store = auth.store.clone();
        let token_id = owner.token_id;
        tokio::spawn(async move {
            if let Err(e) = store.touch_api_token(token_id, now).await {
                tracing::warn!(error = %e, "could not record API token use");
            }
        });
    }
    let mut actor = client.actor(&owner.user, owner.role, Some(owner.token_id));
    actor.read_only = owner.scope == TokenScope::ReadOnly;
    Ok(Identity::Token(actor))
}

/// True when the TCP peer is one of `trusted_proxies`.
fn client_is_trusted_proxy(auth: &AuthState, peer: Option<std::net::IpAddr>) -> bool {
    peer.is_some_and(|p| auth.settings.trusted_proxies.contains(&p))
}

/// True when the client asks for HTML (`Accept: text/html...`), as browsers do for navigation
/// and form posts; API clients and Leptos' own fetches ask for JSON or anything.
fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"))
}

/// The token of `Authorization: Bearer TOKEN` (scheme case-insensitive, RFC 6750).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// The value of the `redrive_session` cookie, if sent (the first one, if several).
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == SESSION_COOKIE)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

fn refuse(kind: RouteKind, req: &Request, e: ApiError) -> Response {
    refuse_parts(
        kind,
        req.method(),
        req.uri().path_and_query().map(|p| p.as_str()),
        false,
        e,
    )
}

/// The refusal as the route kind answers it: JSON for the API, a redirect to the sign-in
/// page (unauthenticated) or a short HTML page (forbidden) for pages.
fn refuse_parts(
    kind: RouteKind,
    method: &Method,
    path_and_query: Option<&str>,
    expired: bool,
    e: ApiError,
) -> Response {
    match (kind, &e) {
        (RouteKind::Page, ApiError::Unauthenticated(_)) => {
            // Come back to the page after signing in (only for a GET: a form's POST cannot
            // be repeated by a redirect).
            let next = if *method == Method::GET {
                path_and_query.unwrap_or("/")
            } else {
                "/"
            };
            let error = expired.then_some("expired");
            let mut res = redirect_303(&sign_in_url(next, error));
            if expired {
                if let Ok(v) = HeaderValue::from_str(&clear_cookie(false)) {
                    res.headers_mut().append(header::SET_COOKIE, v);
                }
            }
            res
        }
        (RouteKind::Page, _) => {
            let status = e.status();
            let body = format!(
                "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>redrive: \
                 {code}</title></head><body><h1>{title}</h1><p>{msg}</p><p><a href=\"/\">Back to \
                 the dead letters</a></p></body></html>",
                code = status.as_u16(),
                title = if status == StatusCode::FORBIDDEN {
                    "Not allowed"
                } else {
                    "Try again"
                },
                msg = html_escape(&e.to_string()),
            );
            (status, Html(body)).into_response()
        }
        _ => e.into_response(),
    }
}

/// A 303 See Other to `location` (a path we built ourselves).
pub fn redirect_303(location: &str) -> Response {
    let mut res = StatusCode::SEE_OTHER.into_response();
    let v = HeaderValue::from_str(location).unwrap_or_else(|_| HeaderValue::from_static("/"));
    res.headers_mut().insert(header::LOCATION, v);
    res
}

/// `s` with `<>&"'` escaped, for HTML text and attributes.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_kinds() {
        assert_eq!(classify("/sign-in", false), RouteKind::Public);
        assert_eq!(classify("/auth/sign-in", false), RouteKind::Public);
        assert_eq!(classify("/auth/sign-out", false), RouteKind::Page);
        assert_eq!(classify("/healthz", false), RouteKind::Public);
        assert_eq!(classify("/pkg/redrive.js", false), RouteKind::Public);
        assert_eq!(classify("/metrics", false), RouteKind::Api);
        assert_eq!(classify("/metrics", true), RouteKind::Public);
        assert_eq!(classify("/api/v1/replays", false), RouteKind::Api);
        assert_eq!(classify("/api/list_dead_letters123", false), RouteKind::Api);
        assert_eq!(classify("/", false), RouteKind::Page);
        assert_eq!(
            classify("/dead-letters/1/raw/value", false),
            RouteKind::Page
        );
    }

    #[test]
    fn credentials_from_headers() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "bearer  rdv_x ".parse().unwrap());
        assert_eq!(bearer(&h), Some("rdv_x"));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
        h.insert(
            header::COOKIE,
            "a=1; redrive_session=rdvs_abc; b=2".parse().unwrap(),
        );
        assert_eq!(session_cookie(&h), Some("rdvs_abc"));
        h.insert(header::COOKIE, "redrive_session=".parse().unwrap());
        assert_eq!(session_cookie(&h), None);
    }
}
