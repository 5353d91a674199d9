//! OpenID Connect sign-in (`[oidc]`): the authorization code flow with PKCE, as a relying
//! party built on the `openidconnect` crate.
//!
//! - `GET /auth/oidc/start?next=PATH`: discovers the provider (cached for
//!   [`DISCOVERY_TTL`]), draws a `state`, a nonce and a PKCE verifier, stores them
//!   ([`redrive_core::store::OidcFlow`], 10 minutes at most, keyed by the state's SHA-256),
//!   puts the state in the `redrive_oidc` cookie (HttpOnly, SameSite=Lax, path `/auth/oidc`,
//!   10 minutes) and answers 303 to the provider.
//! - `GET /auth/oidc/callback?code&state` (or `?error&error_description&state`): the state
//!   must equal the cookie's and name a stored flow (taken once); the code is exchanged with
//!   the verifier; the ID token is verified (signature with the provider's JWKS, issuer,
//!   audience, expiry, nonce); the user name and groups come from its claims, the role from
//!   the role mapping; the local user is created or its role refreshed (a locally disabled
//!   user stays refused); then a session opens exactly as after a password sign-in (same
//!   cookie and CSRF token; audit `sign_in` with `{"method":"oidc"}`). Every refusal is a
//!   4xx HTML page (502 when the provider does not answer, 503 when the store does not) and an
//!   audit row `sign_in_failed`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Extension;
use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreErrorResponseType,
    CoreGenderClaim, CoreJsonWebKey, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm,
    CoreProviderMetadata, CoreRevocableToken, CoreRevocationErrorResponse,
    CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EmptyExtraTokenFields,
    EndpointMaybeSet, EndpointNotSet, EndpointSet, IdTokenFields, IssuerUrl, Nonce,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, StandardErrorResponse,
    StandardTokenResponse, TokenResponse,
};
use redrive_core::auth::{constant_time_eq, secret_hash};
use redrive_core::sso::{groups_from_claim, user_name_from_claims, RoleMapping};
use redrive_core::store::OidcFlow;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Mutex;

use super::handlers::{audit_row, no_store, open_session, safe_next, OpenedSession};
use super::middleware::{html_escape, redirect_303};
use super::sso::OidcConfig;
use super::{now_ms, AuthState, ClientMeta};

/// The cookie holding the `state` of the sign-in in progress.
pub const FLOW_COOKIE: &str = "redrive_oidc";
/// How long a sign-in may take at the provider, ms (the flow row and the cookie).
pub const FLOW_TTL_MS: i64 = 10 * 60 * 1000;
/// How long the provider's discovery document and keys are reused.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(3600);
/// Longest wait for the provider (discovery, token endpoint), each request.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// Every claim of the ID token beyond the standard ones (`groups`, or whatever
/// `groups_claim` names), kept as JSON.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExtraClaims {
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

impl AdditionalClaims for ExtraClaims {}

type IdFields = IdTokenFields<
    ExtraClaims,
    EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
type TokenAnswer = StandardTokenResponse<IdFields, CoreTokenType>;
type OidcClient = openidconnect::Client<
    ExtraClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    TokenAnswer,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// The OpenID Connect relying party of this server (one per process).
#[derive(Debug)]
pub struct Oidc {
    issuer: String,
    client_id: String,
    client_secret: Option<String>,
    redirect_url: String,
    scopes: Vec<String>,
    user_claim: String,
    groups_claim: String,
    mapping: RoleMapping,
    http: openidconnect::reqwest::Client,
    discovered: Mutex<Option<(Instant, CoreProviderMetadata)>>,
}

/// Why a callback was refused: the status and the sentence of its page and audit row.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    /// For the page and the audit outcome (`failed: ...`).
    message: String,
    /// The user, when known by then.
    user: Option<String>,
}

fn refusal(status: StatusCode, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        message: message.into(),
        user: None,
    }
}

impl Oidc {
    /// The relying party for `config` (checked by `Config::validate`), mapping groups with
    /// `mapping`. Nothing is fetched until the first sign-in.
    ///
    /// Errors: the client secret file cannot be read, or the HTTP client cannot be built.
    pub fn new(config: &OidcConfig, mapping: RoleMapping) -> Result<Oidc, String> {
        let http = openidconnect::reqwest::Client::builder()
            // Following redirects would open the door to SSRF (the crate's advice).
            .redirect(openidconnect::reqwest::redirect::Policy::none())
            .timeout(PROVIDER_TIMEOUT)
            .build()
            .map_err(|e| format!("OIDC HTTP client: {e}"))?;
        Ok(Oidc {
            issuer: config.issuer_url.trim().to_string(),
            client_id: config.client_id.trim().to_string(),
            client_secret: config.secret()?,
            redirect_url: config.redirect_url.trim().to_string(),
            scopes: config.scopes.clone(),
            user_claim: config.user_claim.clone(),
            groups_claim: config.groups_claim.clone(),
            mapping,
            http,
            discovered: Mutex::new(None),
        })
    }

    /// The provider's metadata and keys: cached, fetched again after [`DISCOVERY_TTL`] or
    /// when `refresh` (a signature by an unknown key: the provider rotated its keys).
    async fn metadata(&self, refresh: bool) -> Result<CoreProviderMetadata, Refusal> {
        let mut cached = self.discovered.lock().await;
        if let Some((at, m)) = cached.as_ref() {
            if !refresh && at.elapsed() < DISCOVERY_TTL {
                return Ok(m.clone());
            }
        }
        let issuer = IssuerUrl::new(self.issuer.clone()).map_err(|e| {
            refusal(
                StatusCode::BAD_GATEWAY,
                format!("`[oidc] issuer_url` is not a URL: {e}"),
            )
        })?;
        let m = CoreProviderMetadata::discover_async(issuer, &self.http)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, issuer = %self.issuer, "OIDC discovery failed");
                refusal(
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "the identity provider ({}) did not answer its discovery request: {}",
                        self.issuer,
                        error_chain(&e)
                    ),
                )
            })?;
        *cached = Some((Instant::now(), m.clone()));
        Ok(m)
    }

    fn client(&self, metadata: CoreProviderMetadata) -> Result<OidcClient, Refusal> {
        let redirect = RedirectUrl::new(self.redirect_url.clone()).map_err(|e| {
            refusal(
                StatusCode::BAD_GATEWAY,
                format!("`[oidc] redirect_url` is not a URL: {e}"),
            )
        })?;
        Ok(OidcClient::from_provider_metadata(
            metadata,
            ClientId::new(self.client_id.clone()),
            self.client_secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(redirect))
    }
}

/// The text of an error and its causes, `: `-joined (reqwest's top-level message alone says
/// little).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// `GET /auth/oidc/start` query.
#[derive(Debug, Default, Deserialize)]
pub struct StartQuery {
    #[serde(default)]
    pub next: String,
}

/// `GET /auth/oidc/start`: to the provider, or a 404 page when OIDC is off.
pub async fn start(
    State(auth): State<AuthState>,
    query: Result<Query<StartQuery>, QueryRejection>,
) -> Response {
    let query = query.ok();
    let Some(oidc) = auth.oidc.clone() else {
        return page(
            StatusCode::NOT_FOUND,
            "Single sign-on is not configured",
            "This redrive has no `[oidc]` settings. Sign in with your user name and password.",
        );
    };
    let next = safe_next(query.as_ref().map(|q| q.next.as_str()).unwrap_or("")).to_string();
    let client = match oidc.metadata(false).await.and_then(|m| oidc.client(m)) {
        Ok(c) => c,
        Err(r) => return page(r.status, "Single sign-on is unavailable", &r.message),
    };
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = client.authorize_url(
        CoreAuthenticationFlow::AuthorizationCode,
        CsrfToken::new_random,
        Nonce::new_random,
    );
    for s in oidc.scopes.iter().filter(|s| s.as_str() != "openid") {
        request = request.add_scope(Scope::new(s.clone()));
    }
    let (url, state, nonce) = request.set_pkce_challenge(challenge).url();
    let now = now_ms();
    let flow = OidcFlow {
        state_hash: secret_hash(state.secret()),
        pkce_verifier: verifier.secret().clone(),
        nonce: nonce.secret().clone(),
        next_path: next,
        created_at_ms: now,
    };
    if let Err(e) = auth.store.create_oidc_flow(&flow, now - FLOW_TTL_MS).await {
        tracing::error!(error = %e, "OIDC start: could not store the sign-in in progress");
        return page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Try again",
            "redrive could not reach its database. Try again in a moment.",
        );
    }
    let mut res = redirect_303(url.as_str());
    set_flow_cookie(&mut res, state.secret(), auth.settings.cookie_secure);
    no_store(&mut res);
    res
}

/// `GET /auth/oidc/callback` query: the provider's answer.
#[derive(Debug, Default, Deserialize)]
pub struct CallbackQuery {
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub error_description: Option<String>,
}

/// `GET /auth/oidc/callback`.
pub async fn callback(
    State(auth): State<AuthState>,
    Extension(client): Extension<ClientMeta>,
    headers: HeaderMap,
    query: Result<Query<CallbackQuery>, QueryRejection>,
) -> Response {
    let query = query.ok();
    let Some(oidc) = auth.oidc.clone() else {
        return page(
            StatusCode::NOT_FOUND,
            "Single sign-on is not configured",
            "This redrive has no `[oidc]` settings.",
        );
    };
    let q = query.map(|Query(q)| q).unwrap_or_default();
    match finish(&auth, &oidc, &client, &headers, q).await {
        Ok(res) => res,
        Err(r) => {
            let actor = r.user.as_deref().unwrap_or("-");
            let mut row = audit_row(&client, actor, "sign_in_failed");
            row.outcome = format!("failed: {}", r.message);
            row.detail = Some(r#"{"method":"oidc"}"#.to_string());
            auth.audit(row).await;
            tracing::info!(user = %actor, ip = ?client.ip, status = r.status.as_u16(),
                reason = %r.message, "OIDC sign-in refused");
            let mut res = page(r.status, "Single sign-on did not work", &r.message);
            clear_flow_cookie(&mut res, auth.settings.cookie_secure);
            res
        }
    }
}

async fn finish(
    auth: &AuthState,
    oidc: &Oidc,
    client: &ClientMeta,
    headers: &HeaderMap,
    q: CallbackQuery,
) -> Result<Response, Refusal> {
    let now = now_ms();
    // The provider's own refusal (the user declined, the client is misconfigured, ...).
    if let Some(error) = q.error.as_deref() {
        if let Some(state) = q.state.as_deref() {
            // Spend the flow: it cannot be finished any more.
            let _ = auth
                .store
                .take_oidc_flow(&secret_hash(state), now - FLOW_TTL_MS)
                .await;
        }
        let error: String = error.chars().take(100).collect();
        let detail: String = q
            .error_description
            .unwrap_or_default()
            .chars()
            .take(300)
            .collect();
        let status = if error == "access_denied" {
            StatusCode::FORBIDDEN
        } else {
            StatusCode::BAD_REQUEST
        };
        return Err(refusal(
            status,
            format!(
                "the identity provider refused the sign-in: `{error}`{}",
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({detail})")
                }
            ),
        ));
    }
    let state = q.state.filter(|s| !s.is_empty()).ok_or_else(|| {
        refusal(
            StatusCode::BAD_REQUEST,
            "the provider's answer has no `state`",
        )
    })?;
    let cookie = flow_cookie(headers).ok_or_else(|| {
        refusal(
            StatusCode::BAD_REQUEST,
            "this browser did not start this sign-in (no sign-in cookie; it expires after 10 \
             minutes): start again from the sign-in page",
        )
    })?;
    if !constant_time_eq(cookie.as_bytes(), state.as_bytes()) {
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            "the `state` of the provider's answer is not the one this browser was sent with \
             (state mismatch): start again from the sign-in page",
        ));
    }
    let flow = auth
        .store
        .take_oidc_flow(&secret_hash(&state), now - FLOW_TTL_MS)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "OIDC callback: the store failed");
            refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "redrive could not reach its database; try again in a moment",
            )
        })?
        .ok_or_else(|| {
            refusal(
                StatusCode::BAD_REQUEST,
                "this sign-in expired or was already used: start again from the sign-in page",
            )
        })?;
    let code = q.code.filter(|c| !c.is_empty()).ok_or_else(|| {
        refusal(
            StatusCode::BAD_REQUEST,
            "the provider's answer has no `code`",
        )
    })?;

    let rp = oidc.client(oidc.metadata(false).await?)?;
    let exchange = rp
        .exchange_code(AuthorizationCode::new(code))
        .map_err(|e| {
            refusal(
                StatusCode::BAD_GATEWAY,
                format!("the provider has no token endpoint: {e}"),
            )
        })?
        .set_pkce_verifier(PkceCodeVerifier::new(flow.pkce_verifier.clone()));
    let answer = exchange.request_async(&oidc.http).await.map_err(|e| {
        refusal(
            StatusCode::UNAUTHORIZED,
            format!(
                "the identity provider did not accept the authorization code: {}",
                error_chain(&e)
            ),
        )
    })?;
    let id_token = answer.id_token().ok_or_else(|| {
        refusal(
            StatusCode::UNAUTHORIZED,
            "the identity provider answered without an ID token (is `openid` among its scopes?)",
        )
    })?;
    let nonce = Nonce::new(flow.nonce.clone());
    let claims = match id_token.claims(&rp.id_token_verifier(), &nonce) {
        Ok(c) => serde_json::to_value(c),
        Err(openidconnect::ClaimsVerificationError::SignatureVerification(_)) => {
            // Perhaps signed with a key published since discovery: look again, once.
            let fresh = oidc.client(oidc.metadata(true).await?)?;
            let verifier = fresh.id_token_verifier();
            let claims = id_token
                .claims(&verifier, &nonce)
                .map_err(|e| bad_token(&e))?;
            serde_json::to_value(claims)
        }
        Err(e) => return Err(bad_token(&e)),
    }
    .map_err(|e| {
        refusal(
            StatusCode::UNAUTHORIZED,
            format!("unreadable ID token claims: {e}"),
        )
    })?;

    let user = user_name_from_claims(&claims, &oidc.user_claim).map_err(|_| {
        refusal(
            StatusCode::FORBIDDEN,
            format!(
                "the ID token names no usable user: `{}`, `sub` and `email` are missing or not \
                 a redrive user name (letters, digits, `.`, `_`, `-`, `@`; at most 64)",
                oidc.user_claim
            ),
        )
    })?;
    let groups = groups_from_claim(claims.get(&oidc.groups_claim));
    let role = oidc.mapping.role_for(&groups).map_err(|e| Refusal {
        status: StatusCode::FORBIDDEN,
        message: e.to_string(),
        user: Some(user.clone()),
    })?;
    let local = auth.store.sso_user(&user, role, now).await.map_err(|e| {
        tracing::error!(error = %e, "OIDC callback: the store failed");
        refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "redrive could not reach its database; try again in a moment",
        )
    })?;
    if local.disabled {
        return Err(Refusal {
            status: StatusCode::FORBIDDEN,
            message: format!("the redrive user `{user}` is disabled; ask an admin"),
            user: Some(user),
        });
    }
    let OpenedSession { token, .. } = open_session(auth, headers, client, local.id)
        .await
        .map_err(|()| {
            refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "redrive could not reach its database; try again in a moment",
            )
        })?;
    let mut row = audit_row(client, &user, "sign_in");
    row.outcome = "ok".into();
    row.detail = Some(
        serde_json::json!({
            "method": "oidc",
            "role": local.role.as_str(),
            "previous_role": local.previous_role.as_ref().map(|r| r.as_str()),
            "created": local.created,
            "groups": groups.iter().take(50).collect::<Vec<_>>(),
        })
        .to_string(),
    );
    auth.audit(row).await;
    tracing::info!(user = %user, role = local.role.as_str(), "signed in with OIDC");

    let next = safe_next(&flow.next_path);
    let mut res = redirect_303(if next == "/" { "/overview" } else { next });
    let max_age_s = auth.settings.limits.absolute_ms / 1000;
    let cookie =
        super::handlers::session_cookie_header(&token, max_age_s, auth.settings.cookie_secure);
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
    clear_flow_cookie(&mut res, auth.settings.cookie_secure);
    no_store(&mut res);
    Ok(res)
}

fn bad_token(e: &openidconnect::ClaimsVerificationError) -> Refusal {
    refusal(
        StatusCode::UNAUTHORIZED,
        format!("the ID token is not valid: {}", error_chain(e)),
    )
}

/// The `redrive_oidc` cookie's value, if sent.
fn flow_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == FLOW_COOKIE)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

fn set_flow_cookie(res: &mut Response, state: &str, secure: bool) {
    let c = format!(
        "{FLOW_COOKIE}={state}; Path=/auth/oidc; HttpOnly; SameSite=Lax; Max-Age={}{}",
        FLOW_TTL_MS / 1000,
        if secure { "; Secure" } else { "" }
    );
    if let Ok(v) = HeaderValue::from_str(&c) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
}

fn clear_flow_cookie(res: &mut Response, secure: bool) {
    let c = format!(
        "{FLOW_COOKIE}=; Path=/auth/oidc; HttpOnly; SameSite=Lax; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    );
    if let Ok(v) = HeaderValue::from_str(&c) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// A short HTML page: `title`, `message` (escaped) and a link back to the sign-in page.
pub fn page(status: StatusCode, title: &str, message: &str) -> Response {
    let body = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>redrive: \
         {title}</title></head><body><main class=\"sso-refused\"><h1>{title}</h1><p \
         role=\"alert\">{msg}</p><p><a href=\"/sign-in\">Back to the sign-in page</a></p>\
         </main></body></html>",
        title = html_escape(title),
        msg = html_escape(message),
    );
    let mut res = (status, Html(body)).into_response();
    no_store(&mut res);
    res
}

/// The relying party for `config`, or `None` when OIDC is off or cannot be set up (logged).
pub fn from_config(config: &OidcConfig, mapping: &RoleMapping) -> Option<Arc<Oidc>> {
    if !config.enabled() {
        return None;
    }
    match Oidc::new(config, mapping.clone()) {
        Ok(o) => Some(Arc::new(o)),
        Err(e) => {
            tracing::error!(error = %e, "single sign-on (OIDC) is off");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_cookie_is_read_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            "a=1; redrive_oidc=abc ; redrive_session=x".parse().unwrap(),
        );
        assert_eq!(flow_cookie(&h), Some("abc"));
        h.insert(header::COOKIE, "redrive_oidc=".parse().unwrap());
        assert_eq!(flow_cookie(&h), None);
    }

    #[test]
    fn refusal_pages_escape_what_they_show() {
        let res = page(StatusCode::FORBIDDEN, "No", "<script>x</script>");
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
        assert_eq!(
            res.headers().get(header::CACHE_CONTROL).unwrap(),
            "no-store"
        );
    }

    #[test]
    fn extra_claims_keep_unknown_claims() {
        let c: ExtraClaims =
            serde_json::from_value(serde_json::json!({"groups": ["a"], "x": 1})).unwrap();
        assert_eq!(c.rest["groups"], serde_json::json!(["a"]));
    }
}
