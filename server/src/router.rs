//! The whole HTTP surface: the UI (from `site.rs`), the JSON API, raw downloads, health and
//! metrics, wrapped in request tracing, a request timeout, gzip compression and, outermost,
//! the security headers (`security_headers.rs`).

use std::time::Duration;

use axum::http::StatusCode;
use axum::routing::{any, get};
use axum::Router;
use tower::ServiceBuilder;
use tower_http::compression::CompressionLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultMakeSpan, DefaultOnResponse, TraceLayer};
use tracing::Level;

use crate::api::{self, AppState};
use crate::raw;

/// Routes served by the server itself (everything but the UI pages).
///
/// | route | answer |
/// |---|---|
/// | `GET /api/v1/dead-letters` | JSON page of dead letters (filters, `limit`, `cursor`) |
/// | `GET /api/v1/dead-letters/{id}` | JSON full record |
/// | `GET /api/v1/dead-letters/{id}/raw/{value,key}` | the bytes, as a download |
/// | `GET /api/v1/dead-letters/{id}/raw/headers` | every header, byte-exact, as a JSON download |
/// | `GET /api/v1/error-groups` | JSON error groups (filters, `limit`) |
/// | `GET /dead-letters/{id}/raw/{value,key,headers}` | the same downloads (UI links) |
/// | `GET /healthz`, `/readyz`, `/metrics` | liveness, readiness, Prometheus |
pub fn api_router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/dead-letters", get(api::list_dead_letters))
        .route("/api/v1/dead-letters/{id}", get(api::get_dead_letter))
        .route("/api/v1/dead-letters/{id}/raw/value", get(raw::raw_value))
        .route("/api/v1/dead-letters/{id}/raw/key", get(raw::raw_key))
        .route(
            "/api/v1/dead-letters/{id}/raw/headers",
            get(raw::raw_headers),
        )
        .route("/api/v1/error-groups", get(api::list_error_groups))
        .route("/api/v1", any(api::api_not_found))
        .route("/api/v1/", any(api::api_not_found))
        .route("/api/v1/{*rest}", any(api::api_not_found))
        .route("/dead-letters/{id}/raw/value", get(raw::raw_value))
        .route("/dead-letters/{id}/raw/key", get(raw::raw_key))
        .route("/dead-letters/{id}/raw/headers", get(raw::raw_headers))
        .route("/healthz", get(api::healthz))
        .route("/readyz", get(api::readyz))
        .route("/metrics", get(api::metrics))
        .with_state(state)
}

/// The complete application: `site` (the UI) merged with [`api_router`], then the layers.
/// `request_timeout` bounds every request (answered 503 when exceeded).
pub fn app(state: AppState, site: Router, request_timeout: Duration) -> Router {
    let auth = state.auth.clone();
    let headers = crate::security_headers::SecurityHeaders {
        hsts: auth.settings.cookie_secure,
    };
    api_router(state.clone())
        .merge(crate::auth::router(auth.clone()))
        .merge(crate::api_actions::router(state.clone()))
        .merge(crate::api_approvals::router(state.clone()))
        .merge(crate::api_automation::router(state.clone()))
        .merge(crate::api_labels::router(state.clone()))
        .merge(crate::export::router(state.clone()))
        .merge(crate::api_quarantine::router(state.clone()))
        .merge(crate::api_versions::router(state.clone()))
        .merge(crate::api_users::router(state.clone()))
        .merge(crate::token_form::router(state.clone()))
        .merge(crate::openapi::router(state.clone()))
        .merge(crate::api_archive::router(state))
        .merge(site)
        // Inside authentication (it reads the session): a page shows a form error only when
        // this session's own failed POST produced it (`form_errors.rs`).
        .layer(axum::middleware::from_fn(crate::form_errors::guard))
        // After authentication (a caller without credentials hears 401 first), before any
        // handler: a `/api/v1/` body that is not declared JSON is a 415 (`json_body.rs`).
        .layer(axum::middleware::from_fn(crate::json_body::require_json))
        // Inside the layers below (so refusals are traced and timed out like the rest): every
        // route is authenticated, and session POSTs are CSRF-checked, in this one place.
        .layer(axum::middleware::from_fn_with_state(
            auth,
            crate::auth::authenticate,
        ))
        .layer(
            ServiceBuilder::new()
                // One INFO span per request (method, path), so that anything logged while serving
                // it carries them; the response line itself is DEBUG (`tower_http=debug`), to keep
                // asset requests out of the default log. 5xx answers are logged as errors.
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(DefaultMakeSpan::new().level(Level::INFO))
                        .on_response(DefaultOnResponse::new().level(Level::DEBUG)),
                )
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::SERVICE_UNAVAILABLE,
                    request_timeout,
                ))
                .layer(CompressionLayer::new()),
        )
        // Outside the timeout: on `/api/v1/` paths the answers axum and tower-http make
        // themselves (405, 413, the timeout's 503, extractor rejections) get the API's one
        // error shape (`api_error.rs`).
        .layer(axum::middleware::from_fn(crate::api_error::normalize))
        // Outermost: every answer carries them, refusals and timeouts included.
        .layer(axum::middleware::from_fn_with_state(
            headers,
            crate::security_headers::apply,
        ))
}
