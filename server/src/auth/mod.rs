//! Who is asking, and may they: sign-in and sign-out, server-side sessions, API tokens, CSRF,
//! roles, login throttling, and the `user`/`token` CLI.
//!
//! - [`middleware::authenticate`] runs in front of every route. It resolves
//!   `Authorization: Bearer rdv_...` (an API token) or the `redrive_session` cookie into an
//!   [`Actor`] and puts it — plus [`SessionInfo`] for a session, and [`ClientMeta`] always —
//!   into the request's extensions, where handlers and Leptos server functions find it.
//!   Unauthenticated requests to anything but the public routes are refused: pages with a
//!   303 to `/sign-in?next=...`, the API with 401 JSON. Session-authenticated requests that
//!   change state must carry the session's CSRF token ([`csrf`]).
//! - [`handlers`] serves `POST /auth/sign-in` and `POST /auth/sign-out`.
//! - Permissions are checked where the action is ([`require_permission`]: the actor's role
//!   must grant the route's one [`Permission`], `docs/access.md`); a refusal of an action is
//!   audited with outcome `denied`. A role's DLQ-topic scope limits what it reads and acts on
//!   (`redrive_core::store::scope`).

pub mod cli;
pub mod csrf;
pub mod handlers;
pub mod middleware;
pub mod oidc;
pub mod proxy;
pub mod sso;
pub mod throttle;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use redrive_core::actions::{Actor, NewAuditEntry, Role};
use redrive_core::auth::SessionInfo;
use redrive_core::permission::Permission;
use redrive_core::store::{SessionLimits, Store};

use crate::config::Config;

pub use self::handlers::router;
pub use self::middleware::authenticate;

/// Everything authentication needs; cheap to clone.
#[derive(Clone)]
pub struct AuthState {
    pub store: Store,
    pub settings: Arc<AuthSettings>,
    pub throttle: Arc<throttle::Throttle>,
    /// OpenID Connect sign-in, when `[oidc]` is set.
    pub oidc: Option<Arc<oidc::Oidc>>,
    /// Reverse-proxy authentication, when `[proxy_auth]` is set.
    pub proxy: Option<Arc<proxy::ProxyAuth>>,
}

/// The authentication settings of [`Config`], parsed.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    pub limits: SessionLimits,
    /// Add `Secure` to the session cookie.
    pub cookie_secure: bool,
    /// Serve `/metrics` without authentication.
    pub metrics_public: bool,
    /// Peers whose `X-Forwarded-For` (and `[proxy_auth]` headers) are believed.
    pub trusted_proxies: Vec<IpAddr>,
    /// `[oidc] disable_password_sign_in`: `POST /auth/sign-in` refuses everyone.
    pub password_sign_in_disabled: bool,
}

impl AuthState {
    /// The state for `config`, over `store`.
    pub fn new(store: Store, config: &Config) -> AuthState {
        let ms = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        // `Config::validate` refused a mapping that does not parse.
        let mapping = config.oidc.role_mapping().unwrap_or_default();
        let oidc = oidc::from_config(&config.oidc, &mapping);
        AuthState {
            store,
            settings: Arc::new(AuthSettings {
                limits: SessionLimits {
                    idle_ms: ms(config.session_idle_timeout_ms),
                    absolute_ms: ms(config.session_absolute_timeout_ms),
                },
                cookie_secure: config.cookie_secure,
                metrics_public: config.metrics_public,
                // `Config::validate` refused anything that does not parse.
                trusted_proxies: config
                    .trusted_proxies
                    .iter()
                    .filter_map(|p| p.parse().ok())
                    .collect(),
                password_sign_in_disabled: oidc.is_some() && config.oidc.disable_password_sign_in,
            }),
            throttle: Arc::new(throttle::Throttle::new(throttle::Quotas {
                per_user_per_client: config.sign_in_per_user_per_min,
                per_ip: config.sign_in_per_ip_per_min,
                per_user_global: config.sign_in_per_user_global_per_min,
            })),
            oidc,
            proxy: proxy::ProxyAuth::from_config(&config.proxy_auth, &mapping).map(Arc::new),
        }
    }

    /// Appends an audit row; a failure is logged (the request it describes already
    /// happened, and refusing it now would not undo it).
    pub async fn audit(&self, entry: NewAuditEntry) {
        if let Err(e) = self.store.record_audit(&entry).await {
            tracing::error!(error = %e, action = %entry.action, actor = %entry.actor,
                "could not write the audit row");
        }
    }
}

/// Where a request came from: in every request's extensions, signed in or not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientMeta {
    /// The client's IP address (see `trusted_proxies`), if known.
    pub ip: Option<String>,
    /// The `User-Agent` header, at most [`MAX_USER_AGENT_CHARS`] characters.
    pub user_agent: Option<String>,
}

/// User agents are cut to this many characters before they are stored.
pub const MAX_USER_AGENT_CHARS: usize = 400;

impl ClientMeta {
    /// The client of a request with these `headers` from `peer`.
    pub fn from_request(
        headers: &HeaderMap,
        peer: Option<IpAddr>,
        trusted: &[IpAddr],
    ) -> ClientMeta {
        let user_agent = headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.chars().take(MAX_USER_AGENT_CHARS).collect::<String>())
            .filter(|s| !s.is_empty());
        ClientMeta {
            ip: client_ip(headers, peer, trusted).map(|ip| ip.to_string()),
            user_agent,
        }
    }

    /// An actor for `user` acting from here.
    pub fn actor(&self, user: &str, role: Role, via_token: Option<i64>) -> Actor {
        Actor {
            via_token,
            client_ip: self.ip.clone(),
            user_agent: self.user_agent.clone(),
            ..Actor::new(user, role)
        }
    }
}

/// The peer, unless it is a trusted proxy: then the right-most `X-Forwarded-For` address that
/// is not itself a trusted proxy (entries left of it could be forged by the client).
fn client_ip(headers: &HeaderMap, peer: Option<IpAddr>, trusted: &[IpAddr]) -> Option<IpAddr> {
    let peer = peer?;
    if !trusted.contains(&peer) {
        return Some(peer);
    }
    let forwarded: Vec<IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|s| s.trim().parse::<IpAddr>().ok())
        .collect();
    Some(
        forwarded
            .into_iter()
            .rev()
            .find(|ip| !trusted.contains(ip))
            .unwrap_or(peer),
    )
}

/// The TCP peer of a request, when the server runs with connect info.
pub fn peer_ip(parts_ext: &axum::http::Extensions) -> Option<IpAddr> {
    parts_ext
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
}

pub use redrive_core::clock::now_ms;

// ---------------------------------------------------------------------------------------------
// Refusals

pub use crate::api_error::ApiError;

/// The authenticated caller of a handler (from the middleware's extensions). Rejects with 401
/// JSON when absent, which only happens for a route the middleware treats as public.
#[derive(Debug, Clone)]
pub struct Caller(pub Actor);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Actor>()
            .cloned()
            .map(Caller)
            .ok_or_else(|| {
                ApiError::Unauthenticated(
                    "sign in, or send an API token as `Authorization: Bearer rdv_...`".into(),
                )
            })
    }
}

/// The session of a session-authenticated request.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    /// SHA-256 hex of the cookie value (the sessions table key).
    pub id_hash: String,
    pub info: SessionInfo,
}

/// `Ok` if `actor` holds permission `needed` ([`Actor::can`]); else 403, and an audit row with
/// outcome `denied` for `action`. New checks ask for a permission, never for a role
/// (`docs/access.md`).
pub async fn require_permission(
    auth: &AuthState,
    actor: &Actor,
    needed: Permission,
    action: &str,
) -> Result<(), ApiError> {
    if actor.can(needed) {
        return Ok(());
    }
    auth.audit(NewAuditEntry::by(actor, action, "denied")).await;
    tracing::info!(user = %actor.user, role = actor.role.as_str(), permission = needed.as_str(), action, "denied");
    Err(ApiError::Forbidden(format!(
        "`{action}` needs the `{needed}` permission, which {} ({}{}) does not have. Ask an \
         admin.",
        actor.user,
        actor.role.as_str(),
        read_only_note(actor)
    )))
}

/// `Ok` unless `actor` is a `read_only` API token, which may change nothing at all, not even
/// its own user's account (password, sessions, tokens); else 403 and an audit row with
/// outcome `denied` for `action`. For the account routes every signed-in user may use.
pub async fn require_not_read_only(
    auth: &AuthState,
    actor: &Actor,
    action: &str,
) -> Result<(), ApiError> {
    if !actor.read_only {
        return Ok(());
    }
    auth.audit(NewAuditEntry::by(actor, action, "denied")).await;
    tracing::info!(user = %actor.user, action, "denied: read-only token");
    Err(ApiError::Forbidden(format!(
        "`{action}` changes something, and this API token of {} is read-only. Use a token \
         with the scope `role`, or sign in.",
        actor.user
    )))
}

/// `", with a read-only token"` for a read-only token, else nothing (for refusals).
fn read_only_note(actor: &Actor) -> &'static str {
    if actor.read_only {
        ", with a read-only token"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_for_only_from_trusted_proxies() {
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert(
            "x-forwarded-for",
            "6.6.6.6, 1.2.3.4, 10.0.0.1".parse().unwrap(),
        );
        assert_eq!(
            client_ip(&h, Some(proxy), &[proxy]),
            Some("1.2.3.4".parse().unwrap())
        );
        assert_eq!(client_ip(&h, Some(proxy), &[]), Some(proxy));
        let other: IpAddr = "9.9.9.9".parse().unwrap();
        assert_eq!(client_ip(&h, Some(other), &[proxy]), Some(other));
        assert_eq!(
            client_ip(&HeaderMap::new(), Some(proxy), &[proxy]),
            Some(proxy)
        );
    }
}
