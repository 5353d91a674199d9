//! Single sign-on settings: the `[oidc]` and `[proxy_auth]` tables of `redrive.toml`, and the
//! role mapping both share (`docs/access.md`, "Single sign-on").

use std::collections::BTreeMap;
use std::path::Path;

use redrive_core::sso::RoleMapping;
use serde::{Deserialize, Serialize};

/// `[oidc]`: OpenID Connect sign-in (authorization code flow with PKCE). Off while
/// `issuer_url` is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// The provider's issuer (`https://idp.example.com/realms/ops`), exactly as its ID tokens
    /// name it; its discovery document is at `ISSUER/.well-known/openid-configuration`.
    #[serde(default)]
    pub issuer_url: String,
    /// This redrive's client id at the provider.
    #[serde(default)]
    pub client_id: String,
    /// The client secret (or `client_secret_file`, or `REDRIVE_OIDC__CLIENT_SECRET`). Empty:
    /// a public client (PKCE alone).
    #[serde(default)]
    pub client_secret: String,
    /// A file holding the client secret (surrounding whitespace trimmed), read at start-up.
    #[serde(default)]
    pub client_secret_file: String,
    /// The callback URL as registered at the provider: `https://redrive.example/auth/oidc/callback`.
    #[serde(default)]
    pub redirect_url: String,
    /// Scopes asked for. Default `openid profile email groups` (`openid` is always sent).
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// The ID-token claim that names the redrive user. Default `preferred_username`; when it
    /// is missing or not a valid user name, `sub`, then `email`.
    #[serde(default = "default_user_claim")]
    pub user_claim: String,
    /// The ID-token claim listing the user's groups (an array of strings, or one
    /// comma-separated string). Default `groups`.
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Group → role (`"redrive-admins" = "admin"`). Shared with `[proxy_auth]`.
    #[serde(default)]
    pub role_mapping: BTreeMap<String, String>,
    /// The role of a user none of whose groups is mapped; `none` (the default) refuses them.
    /// Shared with `[proxy_auth]`.
    #[serde(default = "default_default_role")]
    pub default_role: String,
    /// Refuse password sign-in (SSO only; the `redrive user` CLI still works). Default false.
    #[serde(default)]
    pub disable_password_sign_in: bool,
}

/// `[proxy_auth]`: trust a reverse proxy's user and groups headers (only from
/// `trusted_proxies`). Off while `user_header` is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyAuthConfig {
    /// The header naming the authenticated user, e.g. `X-Forwarded-User`. Empty: off.
    #[serde(default)]
    pub user_header: String,
    /// The header listing the user's groups, comma-separated, e.g. `X-Forwarded-Groups`.
    /// Empty: no groups (only `[oidc] default_role` can then give a role).
    #[serde(default)]
    pub groups_header: String,
}

fn default_scopes() -> Vec<String> {
    ["openid", "profile", "email", "groups"]
        .into_iter()
        .map(str::to_string)
        .collect()
}

fn default_user_claim() -> String {
    "preferred_username".to_string()
}

fn default_groups_claim() -> String {
    "groups".to_string()
}

fn default_default_role() -> String {
    "none".to_string()
}

impl Default for OidcConfig {
    fn default() -> Self {
        OidcConfig {
            issuer_url: String::new(),
            client_id: String::new(),
            client_secret: String::new(),
            client_secret_file: String::new(),
            redirect_url: String::new(),
            scopes: default_scopes(),
            user_claim: default_user_claim(),
            groups_claim: default_groups_claim(),
            role_mapping: BTreeMap::new(),
            default_role: default_default_role(),
            disable_password_sign_in: false,
        }
    }
}

impl OidcConfig {
    /// True when OpenID Connect sign-in is configured.
    pub fn enabled(&self) -> bool {
        !self.issuer_url.trim().is_empty()
    }

    /// The role mapping of `[oidc]` (also `[proxy_auth]`'s).
    ///
    /// Errors: a sentence naming the unknown role.
    pub fn role_mapping(&self) -> Result<RoleMapping, String> {
        RoleMapping::parse(
            self.role_mapping
                .iter()
                .map(|(g, r)| (g.as_str(), r.as_str())),
            &self.default_role,
        )
        .map_err(|e| format!("`[oidc] role_mapping` / `default_role`: {e}"))
    }

    /// The client secret: `client_secret`, else the content of `client_secret_file`
    /// (trimmed), else none.
    ///
    /// Errors: the file cannot be read.
    pub fn secret(&self) -> Result<Option<String>, String> {
        if !self.client_secret.is_empty() {
            return Ok(Some(self.client_secret.clone()));
        }
        if self.client_secret_file.is_empty() {
            return Ok(None);
        }
        std::fs::read_to_string(Path::new(&self.client_secret_file))
            .map(|s| Some(s.trim().to_string()).filter(|s| !s.is_empty()))
            .map_err(|e| {
                format!(
                    "`[oidc] client_secret_file`: cannot read `{}`: {e}",
                    self.client_secret_file
                )
            })
    }

    /// Checks what serde cannot. Errors: a sentence naming the key.
    pub fn validate(&self) -> Result<(), String> {
        self.role_mapping()?;
        if !self.enabled() {
            return Ok(());
        }
        let url = |key: &str, v: &str| -> Result<(), String> {
            match url::Url::parse(v) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
                _ => Err(format!(
                    "`[oidc] {key}`: `{v}` is not an http(s) URL with a host"
                )),
            }
        };
        url("issuer_url", &self.issuer_url)?;
        if self.client_id.trim().is_empty() {
            return Err("`[oidc] client_id` is empty: give this redrive's client id".into());
        }
        url("redirect_url", &self.redirect_url)?;
        if !self.redirect_url.ends_with("/auth/oidc/callback") {
            return Err(format!(
                "`[oidc] redirect_url`: `{}` must end with /auth/oidc/callback (redrive's \
                 callback route)",
                self.redirect_url
            ));
        }
        if self.user_claim.trim().is_empty() || self.groups_claim.trim().is_empty() {
            return Err("`[oidc] user_claim` and `groups_claim` must not be empty".into());
        }
        self.secret()?;
        Ok(())
    }
}

impl ProxyAuthConfig {
    /// True when reverse-proxy authentication is configured.
    pub fn enabled(&self) -> bool {
        !self.user_header.trim().is_empty()
    }

    /// Checks the header names, and that some proxy is trusted. Errors: a sentence.
    pub fn validate(&self, trusted_proxies: &[String]) -> Result<(), String> {
        if !self.enabled() {
            return Ok(());
        }
        for (key, h) in [
            ("user_header", &self.user_header),
            ("groups_header", &self.groups_header),
        ] {
            if !h.is_empty() && axum::http::HeaderName::from_bytes(h.as_bytes()).is_err() {
                return Err(format!("`[proxy_auth] {key}`: `{h}` is not a header name"));
            }
        }
        if trusted_proxies.is_empty() {
            return Err(
                "`[proxy_auth]` is set but `trusted_proxies` is empty: list the reverse \
                 proxies' addresses (only their headers are believed)"
                    .into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oidc_settings_are_checked() {
        let ok = OidcConfig {
            issuer_url: "http://127.0.0.1:4000".into(),
            client_id: "redrive".into(),
            redirect_url: "http://127.0.0.1:3000/auth/oidc/callback".into(),
            role_mapping: [("ops".to_string(), "operator".to_string())].into(),
            ..OidcConfig::default()
        };
        assert_eq!(ok.validate(), Ok(()));
        let bad_role = OidcConfig {
            role_mapping: [("ops".to_string(), "root".to_string())].into(),
            ..ok.clone()
        };
        assert!(bad_role.validate().unwrap_err().contains("root"));
        let bad_url = OidcConfig {
            redirect_url: "http://127.0.0.1:3000/callback".into(),
            ..ok.clone()
        };
        assert!(bad_url.validate().unwrap_err().contains("redirect_url"));
        let no_file = OidcConfig {
            client_secret_file: "/nonexistent/secret".into(),
            ..ok
        };
        assert!(no_file
            .validate()
            .unwrap_err()
            .contains("client_secret_file"));
        // Off: only the mapping is checked.
        assert_eq!(OidcConfig::default().validate(), Ok(()));
    }

    #[test]
    fn proxy_auth_needs_trusted_proxies() {
        let p = ProxyAuthConfig {
            user_header: "X-Forwarded-User".into(),
            groups_header: "X-Forwarded-Groups".into(),
        };
        assert!(p.validate(&[]).is_err());
        assert_eq!(p.validate(&["10.0.0.1".into()]), Ok(()));
        let bad = ProxyAuthConfig {
            user_header: "X Forwarded".into(),
            ..p
        };
        assert!(bad.validate(&["10.0.0.1".into()]).is_err());
    }
}
