//! The other half of the harness: the binary's own site router (pages, server functions,
//! static files), in process over a fresh SQLite store, requested without a socket. Pages are
//! exactly what a browser without JavaScript gets (the site root is empty: no wasm).

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use redrive_core::NewDeadLetter;
use redrive_testkit::{fresh_store, Backend};
use tower::ServiceExt;

use crate::site;

/// The binary's site router over `store`, every request signed in as an admin: the router
/// without the server's authentication middleware, which in the binary puts the caller's
/// `Actor` into each request (pages read it for the caller's topic scope).
pub fn site_router_as_admin(
    store: redrive_core::store::Store,
    options: leptos::config::LeptosOptions,
) -> Router {
    let admin = redrive_core::actions::Actor::admin("test-admin");
    site::site_router(store, options).layer(axum::Extension(admin))
}

/// The site router over a fresh store holding the given records.
pub struct InProcessSite {
    router: Router,
    _db: redrive_testkit::TestDatabase,
    _site_root: tempfile::TempDir,
}

impl InProcessSite {
    pub async fn start(records: &[NewDeadLetter]) -> InProcessSite {
        let (store, db) = fresh_store(Backend::Sqlite).await.expect("a fresh store");
        let inserted = store.insert_batch(records).await.expect("insert");
        assert_eq!(inserted, records.len() as u64);
        let site_root = tempfile::tempdir().expect("tempdir");
        let options = site::leptos_options(
            &site_root.path().display().to_string(),
            "127.0.0.1:0".parse().expect("addr"),
        );
        InProcessSite {
            router: site_router_as_admin(store, options),
            _db: db,
            _site_root: site_root,
        }
    }

    /// The site router over `store` as it is (the caller keeps its database alive).
    pub fn over(store: redrive_core::store::Store) -> InProcessSite {
        let site_root = tempfile::tempdir().expect("tempdir");
        let options = site::leptos_options(
            &site_root.path().display().to_string(),
            "127.0.0.1:0".parse().expect("addr"),
        );
        InProcessSite {
            router: site_router_as_admin(store, options),
            _db: tempfile::tempdir().expect("tempdir").into(),
            _site_root: site_root,
        }
    }

    /// GET `uri`: the status and the whole body (64 MiB at most) as text.
    pub async fn get(&self, uri: &str) -> (StatusCode, String) {
        let res = self
            .router
            .clone()
            .oneshot(Request::get(uri).body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        let status = res.status();
        let body = axum::body::to_bytes(res.into_body(), 64 * 1024 * 1024)
            .await
            .expect("body");
        (status, String::from_utf8_lossy(&body).into_owned())
    }
}
