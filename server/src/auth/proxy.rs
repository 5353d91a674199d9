//! Reverse-proxy authentication (`[proxy_auth]`): a proxy in front of redrive (oauth2-proxy,
//! an ingress with forward auth, ...) authenticates the user and names them in a header.
//!
//! - The user header (and the groups header, comma-separated) are believed only when the TCP
//!   peer is one of `trusted_proxies`. From any other peer they are ignored (the request is
//!   treated as if it had none) and a warning is logged: anyone can send a header.
//! - The role comes from the groups through `[oidc] role_mapping` / `default_role` (the same
//!   table as OpenID Connect); no mapped group and no default role: 403.
//! - The actor is built per request; no session is created. The local user is created on
//!   first sight and its role refreshed when the groups change (a write only then); a user
//!   disabled locally is refused (403). The first request of a user in this process, and
//!   every role change, writes an audit row `sign_in` with `{"method":"proxy"}`.
//! - CSRF: the proxy's own cookie is ambient, so a browser request that changes state must
//!   come from this site: `Sec-Fetch-Site` must be `same-origin` (or `none`) when the browser
//!   sends it, else `Origin` must name this host when sent ([`same_site`]). Requests with
//!   neither (scripts, curl) pass; no CSRF token is needed.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::http::{header, HeaderMap, HeaderName};
use redrive_core::actions::{Actor, Role};
use redrive_core::auth::validate_user_name;
use redrive_core::sso::{groups_from_list, RoleMapping};

use super::handlers::audit_row;
use super::sso::ProxyAuthConfig;
use super::{now_ms, ApiError, AuthState, ClientMeta};

/// Users remembered as "already announced in the audit trail" by one process; past this the
/// memory is cleared (and the next request of each writes its row again).
const MAX_SEEN: usize = 10_000;

/// Reverse-proxy authentication of this server.
#[derive(Debug)]
pub struct ProxyAuth {
    user_header: HeaderName,
    groups_header: Option<HeaderName>,
    mapping: RoleMapping,
    /// User → role last announced by an audit row.
    seen: Mutex<HashMap<String, Role>>,
}

impl ProxyAuth {
    /// The proxy authentication of `config` (checked by `Config::validate`), or `None` when
    /// off.
    pub fn from_config(config: &ProxyAuthConfig, mapping: &RoleMapping) -> Option<ProxyAuth> {
        if !config.enabled() {
            return None;
        }
        let user_header = HeaderName::from_bytes(config.user_header.trim().as_bytes()).ok()?;
        let groups_header = HeaderName::from_bytes(config.groups_header.trim().as_bytes()).ok();
        Some(ProxyAuth {
            user_header,
            groups_header,
            mapping: mapping.clone(),
            seen: Mutex::new(HashMap::new()),
        })
    }

    /// True when the request carries the user header (or the groups header).
    pub fn present(&self, headers: &HeaderMap) -> bool {
        headers.contains_key(&self.user_header)
            || self
                .groups_header
                .as_ref()
                .is_some_and(|g| headers.contains_key(g))
    }

    /// The actor the trusted proxy names. Errors: 403 when the user header is missing or not
    /// a valid user name, no group maps to a role, or the user is disabled; 503 when the store
    /// fails.
    pub async fn identify(
        &self,
        auth: &AuthState,
        headers: &HeaderMap,
        client: &ClientMeta,
    ) -> Result<Actor, ApiError> {
        let name = headers
            .get(&self.user_header)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .unwrap_or("");
        if validate_user_name(name).is_err() {
            return Err(ApiError::Forbidden(format!(
                "the proxy's `{}` header does not name a valid redrive user (letters, digits, \
                 `.`, `_`, `-`, `@`; at most 64)",
                self.user_header
            )));
        }
        let groups: Vec<String> = match &self.groups_header {
            Some(h) => headers
                .get_all(h)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(groups_from_list)
                .collect(),
            None => Vec::new(),
        };
        let role = self
            .mapping
            .role_for(&groups)
            .map_err(|e| ApiError::Forbidden(e.to_string()))?;

        let stored = auth
            .store
            .user_credentials(name)
            .await
            .map_err(ApiError::store)?;
        let (role, created, previous_role) = match stored {
            Some(u) if u.disabled => {
                return Err(ApiError::Forbidden(format!(
                    "the redrive user `{name}` is disabled; ask an admin"
                )))
            }
            Some(u) if u.role == role => (role.clone(), false, None),
            _ => {
                // Missing, or its groups changed: a write only now.
                let u = auth
                    .store
                    .sso_user(name, role, now_ms())
                    .await
                    .map_err(ApiError::store)?;
                if u.disabled {
                    return Err(ApiError::Forbidden(format!(
                        "the redrive user `{name}` is disabled; ask an admin"
                    )));
                }
                (u.role, u.created, u.previous_role)
            }
        };
        let announce = {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if seen.len() >= MAX_SEEN {
                seen.clear();
            }
            seen.insert(name.to_string(), role.clone()) != Some(role.clone())
        };
        if announce || created || previous_role.is_some() {
            let mut row = audit_row(client, name, "sign_in");
            row.outcome = "ok".into();
            row.detail = Some(
                serde_json::json!({
                    "method": "proxy",
                    "role": role.as_str(),
                    "previous_role": previous_role.as_ref().map(|r| r.as_str()),
                    "created": created,
                    "groups": groups.iter().take(50).collect::<Vec<_>>(),
                })
                .to_string(),
            );
            auth.audit(row).await;
            tracing::info!(user = %name, role = role.as_str(), "signed in through the proxy");
        }
        Ok(client.actor(name, role, None))
    }
}

/// True unless a browser says a request came from another site: `Sec-Fetch-Site` (sent by
/// current browsers) must be `same-origin` or `none`; without it, `Origin`, when sent, must
/// name this host (`Host` or `X-Forwarded-Host`). Requests with neither header pass (not a
/// browser, or one too old to say).
pub fn same_site(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return matches!(site.to_str().map(str::trim), Ok("same-origin" | "none"));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Some((_, authority)) = origin.to_str().ok().and_then(|o| o.split_once("://")) else {
        return false; // `null` or garbage
    };
    let authority = authority.trim_end_matches('/');
    ["host", "x-forwarded-host"].iter().any(|h| {
        headers
            .get(*h)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|host| host.trim().eq_ignore_ascii_case(authority))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_site_by_fetch_metadata_then_origin() {
        let mut h = HeaderMap::new();
        assert!(same_site(&h), "no browser metadata: a script");
        h.insert(header::HOST, "redrive.example".parse().unwrap());
        h.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
        assert!(!same_site(&h));
        h.insert(header::ORIGIN, "https://redrive.example".parse().unwrap());
        assert!(same_site(&h));
        // Fetch metadata wins over Origin (a proxy may rewrite Host).
        h.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(!same_site(&h));
        h.insert("sec-fetch-site", "same-site".parse().unwrap());
        assert!(!same_site(&h));
        h.insert(header::ORIGIN, "https://other.example".parse().unwrap());
        h.insert("sec-fetch-site", "same-origin".parse().unwrap());
        assert!(same_site(&h));
    }

    #[test]
    fn present_by_either_header() {
        let p = ProxyAuth::from_config(
            &ProxyAuthConfig {
                user_header: "X-Forwarded-User".into(),
                groups_header: "X-Forwarded-Groups".into(),
            },
            &RoleMapping::default(),
        )
        .unwrap();
        let mut h = HeaderMap::new();
        assert!(!p.present(&h));
        h.insert("x-forwarded-groups", "a".parse().unwrap());
        assert!(p.present(&h));
        assert!(
            ProxyAuth::from_config(&ProxyAuthConfig::default(), &RoleMapping::default()).is_none()
        );
    }
}
