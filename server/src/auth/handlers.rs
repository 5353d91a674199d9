//! `POST /auth/sign-in` and `POST /auth/sign-out`.
//!
//! Sign-in takes the sign-in page's form (`user`, `password`, `next`) and answers a 303: to
//! `next` (a same-site path only) with the session cookie, or back to
//! `/sign-in?error=CODE&next=...`, where the page turns the code into a sentence (`invalid`,
//! `throttled`, `unavailable`, `cross_site`, `expired`). A client sending `Accept:
//! application/json` gets JSON instead: 200 `{"user", "role", "csrf_token"}` with the cookie,
//! 401, 403, 429 (with `Retry-After`) or 503, each `{"error": ...}` when refused.

use axum::extract::rejection::FormRejection;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Form, Json, Router};
use redrive_core::actions::NewAuditEntry;
use redrive_core::auth::{
    dummy_password_hash, new_csrf_token, new_session_token, secret_hash, MAX_PASSWORD_BYTES,
    SESSION_COOKIE,
};
use redrive_core::permission::Permissions;
use redrive_core::store::NewSession;
use serde::{Deserialize, Serialize};

use super::middleware::{redirect_303, session_cookie};
use super::throttle::Throttled;
use super::{now_ms, AuthState, ClientMeta, SessionHandle};
use crate::api_error::ApiError;

/// Longest `next` accepted, bytes; a longer one becomes `/`.
const MAX_NEXT_BYTES: usize = 2048;
/// A tried user name is cut to this many characters in the audit log and the throttle key.
const MAX_TRIED_NAME_CHARS: usize = 100;

/// The routes of this module, state applied.
pub fn router(auth: AuthState) -> Router {
    Router::new()
        .route("/auth/sign-in", post(sign_in))
        .route("/auth/sign-out", post(sign_out))
        .route("/auth/oidc/start", get(super::oidc::start))
        .route("/auth/oidc/callback", get(super::oidc::callback))
        .with_state(auth)
}

/// The sign-in form.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct SignInForm {
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub password: String,
    /// Where to go after signing in: a path on this site (anything else means `/`).
    #[serde(default)]
    pub next: String,
}

/// A successful JSON sign-in.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SignedIn {
    pub user: String,
    /// The role's name.
    pub role: String,
    /// What the role may do (`["replay", "annotate"]`).
    #[schema(value_type = Vec<String>)]
    pub permissions: Permissions,
    /// The DLQ-topic patterns the role is limited to; absent for every topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dlq_topics: Option<Vec<String>>,
    /// Send it as `X-CSRF-Token` with every state-changing request of this session.
    pub csrf_token: String,
}

/// Why a sign-in failed, as the page's `error` code and the JSON answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Invalid,
    Throttled(Throttled),
    Unavailable,
    CrossSite,
    BadForm,
    /// Longer than any password redrive stores ([`MAX_PASSWORD_BYTES`]): refused before the
    /// throttle and before any hashing.
    LongPassword,
    /// `[oidc] disable_password_sign_in`.
    PasswordOff,
}

impl Failure {
    fn code(self) -> &'static str {
        match self {
            Failure::Invalid | Failure::BadForm => "invalid",
            Failure::Throttled(_) => "throttled",
            Failure::Unavailable => "unavailable",
            Failure::CrossSite => "cross_site",
            Failure::LongPassword => "too_long",
            Failure::PasswordOff => "sso_only",
        }
    }

    /// The JSON refusal of this failure (the API's one error shape, `api_error`).
    fn api_error(self) -> ApiError {
        let m = self.message();
        match self {
            Failure::Invalid => ApiError::Unauthenticated(m),
            Failure::Throttled(t) => ApiError::TooManyRequests {
                message: m,
                retry_after_s: t.retry_after.as_secs().max(1),
            },
            Failure::Unavailable => ApiError::Unavailable,
            Failure::CrossSite => ApiError::Csrf(m),
            Failure::PasswordOff => ApiError::Forbidden(m),
            Failure::BadForm | Failure::LongPassword => ApiError::BadRequest(m),
        }
    }

    fn message(self) -> String {
        match self {
            Failure::Invalid => "wrong user name or password".into(),
            Failure::Throttled(t) => format!(
                "too many sign-in attempts; try again in {} s",
                t.retry_after.as_secs().max(1)
            ),
            Failure::Unavailable => "the database did not answer; try again in a moment".into(),
            Failure::CrossSite => "the sign-in form was sent from another site".into(),
            Failure::PasswordOff => {
                "password sign-in is off on this redrive: sign in with single sign-on".into()
            }
            Failure::BadForm => {
                "send the form fields `user` and `password` (application/x-www-form-urlencoded)"
                    .into()
            }
            Failure::LongPassword => {
                format!("the password is too long: at most {MAX_PASSWORD_BYTES} bytes")
            }
        }
    }
}

/// `POST /auth/sign-in`.
async fn sign_in(
    State(auth): State<AuthState>,
    Extension(client): Extension<ClientMeta>,
    headers: HeaderMap,
    form: Result<Form<SignInForm>, FormRejection>,
) -> Response {
    let json = wants_json(&headers);
    let Ok(Form(form)) = form else {
        return failed(json, Failure::BadForm, "/");
    };
    let next = safe_next(&form.next);
    if auth.settings.password_sign_in_disabled {
        return failed(json, Failure::PasswordOff, next);
    }
    // Login CSRF: another site must not be able to sign a victim in as the attacker.
    if !same_origin(&headers) {
        return failed(json, Failure::CrossSite, next);
    }
    // No stored password is longer (`validate_password`): refuse it before it costs a hash.
    if form.password.len() > MAX_PASSWORD_BYTES {
        return failed(json, Failure::LongPassword, next);
    }
    let tried: String = form
        .user
        .trim()
        .chars()
        .take(MAX_TRIED_NAME_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    let tried_actor = if tried.is_empty() {
        "-"
    } else {
        tried.as_str()
    };

    if let Err(t) = auth.throttle.attempt(&tried, client.ip.as_deref()) {
        if auth.throttle.should_audit(&t, &tried, client.ip.as_deref()) {
            let mut e = audit_row(&client, tried_actor, "sign_in_throttled");
            e.outcome = format!("denied: over the per-{} limit", t.by.name());
            auth.audit(e).await;
        }
        tracing::info!(user = %tried, ip = ?client.ip, "sign-in throttled");
        return failed(json, Failure::Throttled(t), next);
    }

    let user = match auth.store.user_credentials(&tried).await {
        Ok(u) => u,
        Err(e) => {
            tracing::error!(error = %e, "sign-in: the store failed");
            return failed(json, Failure::Unavailable, next);
        }
    };
    // Verify even without such a user, against a dummy hash: a failure takes as long either
    // way, so timing does not tell which names exist.
    let phc = user
        .as_ref()
        .map(|u| u.password_hash.clone())
        .unwrap_or_else(|| dummy_password_hash().to_string());
    // At most 2 x CPUs argon2 checks at a time, on the blocking pool (`password_work`).
    let matches = crate::password_work::PasswordWork::global()
        .verify(form.password, phc)
        .await;
    let user = match user {
        Some(u) if matches && !u.disabled => u,
        _ => {
            let mut e = audit_row(&client, tried_actor, "sign_in_failed");
            e.outcome = "failed: wrong user name or password".into();
            e.detail = Some(r#"{"method":"password"}"#.to_string());
            auth.audit(e).await;
            tracing::info!(user = %tried, ip = ?client.ip, "sign-in failed");
            return failed(json, Failure::Invalid, next);
        }
    };

    let Ok(OpenedSession { token, csrf }) = open_session(&auth, &headers, &client, user.id).await
    else {
        return failed(json, Failure::Unavailable, next);
    };
    let mut e = audit_row(&client, &user.name, "sign_in");
    e.outcome = "ok".into();
    e.detail = Some(r#"{"method":"password"}"#.to_string());
    auth.audit(e).await;
    tracing::info!(user = %user.name, role = user.role.as_str(), "signed in");

    let max_age_s = auth.settings.limits.absolute_ms / 1000;
    let cookie = session_cookie_header(&token, max_age_s, auth.settings.cookie_secure);
    let mut res = if json {
        Json(SignedIn {
            user: user.name,
            role: user.role.as_str().to_string(),
            permissions: user.role.permissions(),
            dlq_topics: user.role.dlq_topics().map(<[String]>::to_vec),
            csrf_token: csrf,
        })
        .into_response()
    } else {
        // No particular page asked for: the overview is the first page after sign-in.
        redirect_303(if next == "/" { "/overview" } else { next })
    };
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
    no_store(&mut res);
    res
}

/// A session just opened: the cookie value and its CSRF token.
pub struct OpenedSession {
    pub token: String,
    pub csrf: String,
}

/// Opens a session for `user_id` (password sign-in and single sign-on alike): a fresh token and
/// CSRF token, stored; the session this browser had (its cookie in `headers`) ended; expired
/// sessions purged. `Err(())` (logged) when the random source or the store fails.
pub async fn open_session(
    auth: &AuthState,
    headers: &HeaderMap,
    client: &ClientMeta,
    user_id: i64,
) -> Result<OpenedSession, ()> {
    let (Ok(token), Ok(csrf)) = (new_session_token(), new_csrf_token()) else {
        tracing::error!("sign-in: the OS random source failed");
        return Err(());
    };
    let now = now_ms();
    let id_hash = secret_hash(&token);
    let created = auth
        .store
        .create_session(&NewSession {
            id_hash: &id_hash,
            user_id,
            csrf_token: &csrf,
            created_at_ms: now,
            ip: client.ip.as_deref(),
            user_agent: client.user_agent.as_deref(),
        })
        .await;
    if let Err(e) = created {
        tracing::error!(error = %e, "sign-in: could not store the session");
        return Err(());
    }
    // A new session replaces the one this browser had (no session fixation, no orphans).
    if let Some(old) = session_cookie(headers) {
        if let Err(e) = auth.store.delete_session(&secret_hash(old)).await {
            tracing::warn!(error = %e, "sign-in: could not end the previous session");
        }
    }
    if let Err(e) = auth.store.purge_sessions(now, auth.settings.limits).await {
        tracing::warn!(error = %e, "could not purge expired sessions");
    }
    Ok(OpenedSession { token, csrf })
}

/// `POST /auth/sign-out` (session and CSRF checked by the middleware): ends the session,
/// clears the cookie, 303 to `/sign-in`.
async fn sign_out(State(auth): State<AuthState>, req: Request) -> Response {
    if let Some(handle) = req.extensions().get::<SessionHandle>() {
        if let Err(e) = auth.store.delete_session(&handle.id_hash).await {
            tracing::error!(error = %e, "sign-out: could not delete the session");
            return failed(false, Failure::Unavailable, "/");
        }
        auth.audit(NewAuditEntry::by(&handle.info.actor, "sign_out", "ok"))
            .await;
        tracing::info!(user = %handle.info.actor.user, "signed out");
    }
    let mut res = redirect_303("/sign-in");
    if let Ok(v) = HeaderValue::from_str(&clear_cookie(auth.settings.cookie_secure)) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
    no_store(&mut res);
    res
}

/// An audit row by `actor` (a name) from `client`.
pub fn audit_row(client: &ClientMeta, actor: &str, action: &str) -> NewAuditEntry {
    NewAuditEntry {
        actor: actor.to_string(),
        action: action.to_string(),
        client_ip: client.ip.clone(),
        user_agent: client.user_agent.clone(),
        ..NewAuditEntry::default()
    }
}

fn failed(json: bool, f: Failure, next: &str) -> Response {
    let mut res = if json {
        f.api_error().into_response()
    } else {
        let mut res = redirect_303(&sign_in_url(next, Some(f.code())));
        if let Failure::Throttled(t) = f {
            let secs = t.retry_after.as_secs().max(1).to_string();
            if let Ok(v) = HeaderValue::from_str(&secs) {
                res.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        res
    };
    no_store(&mut res);
    res
}

/// `Cache-Control: no-store` (sign-in answers carry cookies).
pub fn no_store(res: &mut Response) {
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"))
}

/// True unless the browser says the form came from another origin: `Origin` (sent by every
/// current browser with a POST) must name this host. Without `Origin` (a non-browser
/// client) there is nothing to check.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return headers.get(header::ORIGIN).is_none();
    };
    let Some((_, authority)) = origin.split_once("://") else {
        return false; // `null` (sandboxed frames, some redirects) or garbage
    };
    let authority = authority.trim_end_matches('/');
    ["host", "x-forwarded-host"].iter().any(|h| {
        headers
            .get(*h)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|host| host.trim().eq_ignore_ascii_case(authority))
    })
}

/// `next` if it is a path on this site (`/...`, not `//host` or `/\host`, which browsers
/// treat as another host; no control characters; not an `/auth/` action), else `/`.
pub fn safe_next(next: &str) -> &str {
    let ok = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && !next.starts_with("/auth/")
        && next.len() <= MAX_NEXT_BYTES
        && !next.chars().any(|c| c.is_control() || c == '\\');
    if ok {
        next
    } else {
        "/"
    }
}

/// `/sign-in?error=CODE&next=PATH` (each part only when there is one).
pub fn sign_in_url(next: &str, error: Option<&str>) -> String {
    let next = safe_next(next);
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    if let Some(e) = error {
        pairs.push(("error", e));
    }
    if next != "/" {
        pairs.push(("next", next));
    }
    match serde_urlencoded::to_string(&pairs) {
        Ok(q) if !q.is_empty() => format!("/sign-in?{q}"),
        _ => "/sign-in".to_string(),
    }
}

/// `Set-Cookie` for a new session: `HttpOnly` (no script reads it), `SameSite=Lax` (not sent
/// with cross-site POSTs), `Path=/`, `Secure` with `cookie_secure`, and `Max-Age` = the
/// absolute session lifetime.
pub fn session_cookie_header(token: &str, max_age_s: i64, secure: bool) -> String {
    format!(
        "{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_s}{}",
        if secure { "; Secure" } else { "" }
    )
}

/// `Set-Cookie` that removes the session cookie.
pub fn clear_cookie(secure: bool) -> String {
    format!(
        "{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next("/groups?x=1"), "/groups?x=1");
        for bad in [
            "",
            "https://evil.example/",
            "//evil.example",
            "/\\evil.example",
            "/a\\b",
            "/x\ny",
            "javascript:alert(1)",
            "/auth/sign-out",
        ] {
            assert_eq!(safe_next(bad), "/", "{bad:?}");
        }
        assert_eq!(
            sign_in_url("/groups?a=b", Some("invalid")),
            "/sign-in?error=invalid&next=%2Fgroups%3Fa%3Db"
        );
        assert_eq!(sign_in_url("/", None), "/sign-in");
    }

    #[test]
    fn origin_must_match_host() {
        let mut h = HeaderMap::new();
        assert!(same_origin(&h));
        h.insert(header::HOST, "127.0.0.1:3000".parse().unwrap());
        h.insert(header::ORIGIN, "http://127.0.0.1:3000".parse().unwrap());
        assert!(same_origin(&h));
        h.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
        assert!(!same_origin(&h));
        h.insert(header::ORIGIN, "null".parse().unwrap());
        assert!(!same_origin(&h));
    }

    #[test]
    fn cookie_flags() {
        let c = session_cookie_header("rdvs_x", 60, true);
        assert_eq!(
            c,
            "redrive_session=rdvs_x; Path=/; HttpOnly; SameSite=Lax; Max-Age=60; Secure"
        );
        assert!(!session_cookie_header("t", 1, false).contains("Secure"));
        assert!(clear_cookie(false).contains("Max-Age=0"));
    }
}
