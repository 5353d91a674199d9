//! The web UI as an axum router: the Leptos pages (server-rendered, hydrated), their server
//! functions, the static site (`/pkg/*`: wasm, JS, CSS; `public/` files) and the 404 page.
//!
//! `main.rs` builds the options with [`leptos_options`] and `.merge()`s [`site_router`] into
//! the application router. The router has a fallback (static file, else the 404 page), so the
//! router it is merged into must not set one of its own (axum refuses two).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use axum::http::{header, HeaderValue};
use axum::response::Response;
use axum::Router;
use leptos::config::LeptosOptions;
use leptos::prelude::provide_context;
use leptos_axum::{file_and_error_handler_with_context, generate_route_list, LeptosRoutes};
use redrive_app::{shell, App};
use redrive_core::alerts::AlertsConfig;
use redrive_core::store::Store;
use tower_http::services::ServeDir;

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
/// (The binary uses [`site_router_with_alerts`]; the integration tests use this.)
#[allow(dead_code)]
pub fn site_router(store: Store, options: LeptosOptions) -> Router {
    site_router_with_alerts(store, options, Arc::new(AlertsConfig::default()))
}

/// [`site_router`] whose `/alerts` page shows `alerts` (pass a redacted copy: the page needs
/// no secret).
pub fn site_router_with_alerts(
    store: Store,
    options: LeptosOptions,
    alerts: Arc<AlertsConfig>,
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
    };
    let pkg_dir = Path::new(&*options.site_root).join(&*options.site_pkg_dir);
    let pkg = Router::new()
        .nest_service(
            &format!("/{}", options.site_pkg_dir),
            // scripts/build-site writes `.gz` twins in release builds.
            ServeDir::new(pkg_dir).precompressed_gzip(),
        )
        .layer(axum::middleware::map_response(revalidate));
    Router::new()
        .leptos_routes_with_context(&options, routes, context.clone(), {
            let options = options.clone();
            move || shell(options.clone())
        })
        .merge(pkg)
        // Anything else: a file from the site root (favicon, ...), else the app's 404 page.
        .fallback(file_and_error_handler_with_context(context, shell))
        .with_state(options)
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
