//! The web UI as an axum router: the Leptos pages (server-rendered, hydrated), their server
//! functions, the static site (`/pkg/*`: wasm, JS, CSS; the favicon) and the 404 page.
//! Nothing else under the site root is served (`docs/security.md`).
//!
//! `main.rs` builds the options with [`leptos_options`] and `.merge()`s [`site_router`] into
//! the application router. The router has a fallback (static file, else the 404 page), so the
//! router it is merged into must not set one of its own (axum refuses two).

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use axum::http::{header, HeaderValue};
use axum::response::Response;
use axum::Router;
use leptos::config::LeptosOptions;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, LeptosRoutes};
use redrive_app::{shell, App};
use redrive_core::alerts::AlertsConfig;
use redrive_core::store::Store;
use tower_http::services::{ServeDir, ServeFile};

/// Name the wasm and JS files are built under (`scripts/build-site`: `redrive.js`,
/// `redrive_bg.wasm`, `redrive.css`).
pub const OUTPUT_NAME: &str = "redrive";
/// Directory under the site root holding them.
pub const PKG_DIR: &str = "pkg";

/// Leptos options for serving the site from `site_root` (normally `target/site`, built by
/// `scripts/build-site`). Built in code, so the binary needs neither Cargo.toml metadata nor
/// `LEPTOS_*` variables at run time.
pub fn leptos_options(site_root: &str, site_addr: SocketAddr) -> LeptosOptions {
    LeptosOptions::builder()
        .output_name(OUTPUT_NAME)
        .site_root(site_root)
        .site_pkg_dir(PKG_DIR)
        .site_addr(site_addr)
        .build()
}

/// The complete UI router, state applied: pages, server functions, static files, 404.
/// The pages' server functions find `store` in their context. No alert rule.
/// (The binary uses [`site_router_full`]; the integration tests use this.)
#[allow(dead_code)]
pub fn site_router(store: Store, options: LeptosOptions) -> Router {
    site_router_full(
        store,
        options,
        Arc::new(AlertsConfig::default()),
        Default::default(),
    )
}

/// The site router whose `/alerts` page shows `alerts` (pass a redacted copy: the page needs
/// no secret) and whose actions follow `approval` (four-eyes approval and required reasons;
/// the server functions find both in their context).
pub fn site_router_full(
    store: Store,
    options: LeptosOptions,
    alerts: Arc<AlertsConfig>,
    approval: Arc<redrive_core::approval::ApprovalPolicy>,
) -> Router {
    if !Path::new(&*options.site_root)
        .join(PKG_DIR)
        .join(format!("{OUTPUT_NAME}.js"))
        .exists()
    {
        tracing::warn!(
            site_root = %options.site_root,
            "the site's JS/wasm are missing (run scripts/build-site); pages still render, \
             without hydration"
        );
    }
    let routes = route_list();
    let context = move || {
        provide_context(store.clone());
        provide_context(alerts.clone());
        provide_context(approval.clone());
        provide_request_nonce();
    };
    let pkg_dir = Path::new(&*options.site_root).join(&*options.site_pkg_dir);
    let pkg = Router::new()
        .nest_service(
            &format!("/{}", options.site_pkg_dir),
            // scripts/build-site writes `.gz` twins in release builds.
            ServeDir::new(pkg_dir).precompressed_gzip(),
        )
        .layer(axum::middleware::map_response(revalidate));
    let root = Path::new(&*options.site_root);
    let favicons = Router::new()
        .route_service("/favicon.svg", ServeFile::new(root.join("favicon.svg")))
        .route_service("/favicon.ico", ServeFile::new(root.join("favicon.ico")));
    Router::new()
        .leptos_routes_with_context(&options, routes, context.clone(), {
            let options = options.clone();
            move || shell(options.clone())
        })
        .merge(pkg)
        .merge(favicons)
        // Anything else: the app's 404 page (never a file from the site root).
        .fallback(not_found_page(context, options.clone()))
        .layer(axum::middleware::from_fn(form_error_page))
        .with_state(options)
}

/// The fallback: the app rendered for a path it has no route for (its `NotFound` page),
/// answered 404 unless the page set another status.
fn not_found_page(
    context: impl Fn() + Clone + Send + Sync + 'static,
    options: LeptosOptions,
) -> impl Fn(axum::extract::Request) -> Pin<Box<dyn Future<Output = Response> + Send>>
       + Clone
       + Send
       + Sync
       + 'static {
    move |req| {
        let options = options.clone();
        let render = leptos_axum::render_app_async_with_context(context.clone(), move || {
            shell(options.clone())
        });
        Box::pin(async move {
            let mut res = render(req).await;
            if res.status() == axum::http::StatusCode::OK {
                *res.status_mut() = axum::http::StatusCode::NOT_FOUND;
            }
            res
        })
    }
}

/// Gives the page being rendered the request's CSP nonce (put into the request's extensions
/// by the security-headers layer, which names it in `Content-Security-Policy`), so that the
/// hydration script and the streamed resource scripts carry it. Without that layer (the
/// in-process page tests), Leptos keeps the nonce it made itself.
fn provide_request_nonce() {
    use leptos::nonce::Nonce;
    use leptos::prelude::use_context;
    if let Some(nonce) = use_context::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<Nonce>().cloned())
    {
        provide_context(nonce);
    }
}

/// Largest server-function error body read to build a form's error page (bytes).
const MAX_FORM_ERROR_BYTES: usize = 16 * 1024;

/// A plain HTML form (no JavaScript: `Accept: text/html`) posted to a server function
/// (`/api/ui/...`) that answers an error status (400 bad input, 403 role, ...) gets an HTML
/// page with the message and a link back, at the same status — not the server function's
/// `text/plain` error encoding (`ServerError|...`), which a browser would show raw. Every
/// other response passes through untouched (a form's success and its `__err` redirects
/// included).
async fn form_error_page(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    use axum::response::{Html, IntoResponse};
    let plain_form = req.method() == axum::http::Method::POST
        && req.uri().path().starts_with("/api/ui/")
        && req
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"));
    let back = req
        .headers()
        .get(header::REFERER)
        .and_then(|v| v.to_str().ok())
        .and_then(same_site_path)
        .unwrap_or_else(|| "/".to_string());
    let res = next.run(req).await;
    let is_html = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/html"));
    let status = res.status();
    if !plain_form || !(status.is_client_error() || status.is_server_error()) || is_html {
        return res;
    }
    let body = axum::body::to_bytes(res.into_body(), MAX_FORM_ERROR_BYTES)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body);
    // The server-function error encoding is `Kind|message`.
    let message = match text.split_once('|') {
        Some(("ServerError", m)) => m.to_string(),
        Some((_, m)) => format!("The form could not be read: {m}"),
        None if text.trim().is_empty() => status
            .canonical_reason()
            .unwrap_or("The request failed")
            .to_string(),
        None => text.to_string(),
    };
    let title = match status.as_u16() {
        403 => "Not allowed",
        400..=499 => "That did not work",
        _ => "Something went wrong",
    };
    let page = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>redrive: {code}</title><link rel=\"stylesheet\" href=\"/{PKG_DIR}/{OUTPUT_NAME}.css\">\
         </head><body><main><h1>{title}</h1><p class=\"error-box\" role=\"alert\">{msg}</p>\
         <p><a href=\"{back}\">Back</a></p></main></body></html>",
        code = status.as_u16(),
        msg = html_escape(&message),
        back = html_escape(&back),
    );
    (status, Html(page)).into_response()
}

/// The path (and query, minus the server functions' `__path`/`__err`/`__sig` error parameters) of a
/// `Referer` on this site; `None` for anything that does not start with one `/` after its
/// origin (another site, `//host`).
fn same_site_path(referer: &str) -> Option<String> {
    let after_scheme = referer.split_once("://").map_or(referer, |(_, r)| r);
    let path = &after_scheme[after_scheme.find('/')?..];
    if path.starts_with("//") || path.starts_with("/\\") {
        return None;
    }
    let (p, q) = path.split_once('?').unwrap_or((path, ""));
    let q: Vec<&str> = q
        .split('&')
        .filter(|kv| {
            !kv.is_empty()
                && !kv.starts_with("__path=")
                && !kv.starts_with("__err=")
                && !kv.starts_with("__sig=")
        })
        .collect();
    Some(if q.is_empty() {
        p.to_string()
    } else {
        format!("{p}?{}", q.join("&"))
    })
}

fn html_escape(s: &str) -> String {
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

/// The app's routes, generated once per process.
///
/// `leptos_axum::generate_route_list` renders the app once with resource loading suppressed,
/// and that switch is one process-wide flag (`leptos_server`'s `IS_SUPPRESSING_RESOURCE_LOAD`,
/// set by `RouteList::generate` in leptos_router 0.8): a page rendered by another thread while
/// it is on creates resources whose futures wait forever (`pending()`), so that render never
/// completes. The binary builds its router once at start-up, before it serves; generating the
/// list once here makes every later router (the in-process page tests build many, in parallel)
/// reuse it instead of flipping the flag while other renders run.
fn route_list() -> Vec<leptos_axum::AxumRouteListing> {
    static ROUTES: OnceLock<Vec<leptos_axum::AxumRouteListing>> = OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

/// The wasm and JS keep their names from one build to the next, so browsers must revalidate
/// them (cheap: `ServeDir` answers conditional requests) rather than run a stale copy after an
/// upgrade.
async fn revalidate(mut res: Response) -> Response {
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res
}
