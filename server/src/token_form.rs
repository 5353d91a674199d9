//! `POST /account/tokens`: the "New API token" form of the account page (one's own token)
//! and of the admin page (anyone's, with `manage_users`). It answers an HTML page that shows
//! the new token once (`Cache-Control: no-store`): a server function's answer cannot carry
//! it through a plain form's redirect, and the token must never travel in a URL.
//!
//! Form fields: `csrf` (checked by the middleware), `user` (whose token; empty = one's own),
//! `name` (a label), `expires` (`7d`, `30d`, `90d`, `never`, or anything
//! `redrive_core::auth::parse_token_expiry` reads), `scope` (`role` or `read_only`), `back`
//! (`/account` or `/admin/users`). Refusals are an HTML page with the reason and a link back,
//! at the refusal's status (403 audited `denied`, 404, 409, 422).

use axum::extract::rejection::FormRejection;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::post;
use axum::{Form, Router};
use redrive_core::accounts::{self, AccountError};
use redrive_core::actions::NewAuditEntry;
use redrive_core::permission::Permission;
use serde::Deserialize;

use crate::api::{rfc3339, AppState};
use crate::auth::{now_ms, require_not_read_only, require_permission, Caller};

/// The routes of this module, state applied.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/account/tokens", post(create))
        .with_state(state)
}

/// The form.
#[derive(Debug, Default, Deserialize)]
pub struct TokenForm {
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub expires: String,
    #[serde(default)]
    pub scope: String,
    #[serde(default)]
    pub back: String,
}

async fn create(
    State(state): State<AppState>,
    Caller(actor): Caller,
    form: Result<Form<TokenForm>, FormRejection>,
) -> Response {
    let Ok(Form(f)) = form else {
        return page(
            StatusCode::BAD_REQUEST,
            "That did not work",
            "<p class=\"error-box\" role=\"alert\">The form could not be read.</p>",
            "/account",
        );
    };
    let back = if f.back == "/admin/users" {
        "/admin/users"
    } else {
        "/account"
    };
    let user = match f.user.trim() {
        "" => actor.user.clone(),
        u => u.to_string(),
    };
    let allowed = if user == actor.user {
        require_not_read_only(&state.auth, &actor, "token_create").await
    } else {
        require_permission(&state.auth, &actor, Permission::ManageUsers, "token_create").await
    };
    if let Err(e) = allowed {
        return refusal(e.status(), &e.to_string(), back);
    }
    let now = now_ms();
    let created = accounts::create_token(
        &state.store,
        &NewAuditEntry::by(&actor, "", ""),
        &user,
        Some(f.name.as_str()),
        &f.expires,
        &f.scope,
        now,
    )
    .await;
    let created = match created {
        Ok(c) => c,
        Err(e) => {
            let (status, msg) = match e {
                AccountError::Invalid(m) => (StatusCode::UNPROCESSABLE_ENTITY, m),
                AccountError::NotFound(m) => (StatusCode::NOT_FOUND, m),
                AccountError::Conflict(m) => (StatusCode::CONFLICT, m),
                AccountError::WrongPassword => {
                    (StatusCode::FORBIDDEN, "the password is wrong".into())
                }
                AccountError::Store(e) => {
                    tracing::error!(error = %e, "creating an API token failed");
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the token could not be saved; try again in a moment".into(),
                    )
                }
            };
            return refusal(status, &msg, back);
        }
    };
    let t = &created.listing;
    let expiry = match t.expires_at_ms.and_then(rfc3339) {
        Some(at) => format!("expires {at}"),
        None => "never expires".into(),
    };
    let scope = match t.scope {
        redrive_core::auth::TokenScope::ReadOnly => "read-only",
        redrive_core::auth::TokenScope::Role => "acts with the user's role",
    };
    let body = format!(
        "<p class=\"done-box\" role=\"status\">API token {id} for <strong>{user}</strong>{label} \
         was created ({scope}, {expiry}).</p>\
         <p>Copy it now: it is shown only this once, and redrive keeps only its hash.</p>\
         <pre class=\"new-token mono\" id=\"new-token\" data-token-id=\"{id}\">{token}</pre>\
         <p>Use it as <code>Authorization: Bearer &lt;token&gt;</code>.</p>",
        id = t.id,
        user = esc(&t.user),
        label = t
            .name
            .as_deref()
            .map(|n| format!(" (<span class=\"mono\">{}</span>)", esc(n)))
            .unwrap_or_default(),
        token = esc(&created.token),
    );
    page(StatusCode::OK, "New API token", &body, back)
}

fn refusal(status: StatusCode, message: &str, back: &str) -> Response {
    let title = if status == StatusCode::FORBIDDEN {
        "Not allowed"
    } else {
        "That did not work"
    };
    page(
        status,
        title,
        &format!("<p class=\"error-box\" role=\"alert\">{}</p>", esc(message)),
        back,
    )
}

/// A small complete page (the site's stylesheet, a heading, `body_html`, a link back), never
/// cached nor sent as a referrer.
fn page(status: StatusCode, title: &str, body_html: &str, back: &str) -> Response {
    let html = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · redrive</title><link rel=\"stylesheet\" href=\"/pkg/redrive.css\">\
         </head><body><main><h1>{title}</h1>{body_html}\
         <p><a href=\"{back}\" id=\"back\">Back</a></p></main></body></html>",
        title = esc(title),
        back = esc(back),
    );
    let mut res = (status, Html(html)).into_response();
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    res
}

fn esc(s: &str) -> String {
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
