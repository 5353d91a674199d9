//! The HTTP server of `serve`: hyper's HTTP/1.1 connections over the listener, with the
//! limits `axum::serve` does not offer (`docs/security.md`, "Connections"):
//!
//! - **header read timeout** (`http_header_read_timeout_ms`): a connection that has not sent a
//!   request's complete head within it is closed — a client trickling its headers (slowloris)
//!   or opening a connection and sending nothing cannot hold it. It also closes idle
//!   keep-alive connections after that long (browsers open a new one).
//! - **connection limit** (`http_max_connections`): at most that many connections are served
//!   at once; the next is accepted only when one closes (meanwhile new connections wait in the
//!   kernel's listen backlog).
//!
//! HTTP/1.1 only: browsers and reverse proxies speak it to a plain-HTTP upstream, and it keeps
//! the first bytes of a connection under the header timeout (HTTP/2 protocol detection would
//! wait for them without one).
//!
//! Graceful shutdown: on `shutdown`, stop accepting, let each connection finish the request
//! in hand (idle ones close at once), and return when all are closed. `serve` bounds that wait
//! with `shutdown_timeout_ms`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// The connection limits (from the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Longest wait for a request's complete head (request line and headers).
    pub header_read_timeout: Duration,
    /// Connections served at once (at least 1).
    pub max_connections: usize,
}

/// How long to wait before accepting again after `accept` failed (out of file descriptors).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` until `shutdown`, then drains the open connections (see the
/// module docs). Handlers find the peer as `ConnectInfo<SocketAddr>`. Never fails: a failed
/// `accept` is logged and retried.
pub async fn run(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let max = limits.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut warned_full = false;
    loop {
        // A free slot first: at the limit, stop accepting until a connection closes.
        let slot = if let Ok(slot) = slots.clone().try_acquire_owned() {
            warned_full = false;
            slot
        } else {
            if !warned_full {
                tracing::warn!(
                    http_max_connections = max,
                    "at the connection limit: new connections wait until one closes"
                );
                warned_full = true;
            }
            tokio::select! {
                s = slots.clone().acquire_owned() => match s {
                    Ok(s) => s,
                    Err(_) => break,
                },
                _ = shutdown.cancelled() => break,
            }
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                        _ = shutdown.cancelled() => break,
                    }
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let service = app
            .clone()
            .map_request(move |mut req: axum::http::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                req
            });
        let conn =
            builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _slot = slot;
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                // Timeouts, resets, malformed requests: the client's doing, not ours.
                tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
            }
        });
    }
    drop(listener);
    // Every slot back = every connection closed.
    let _ = slots.acquire_many(max as u32).await;
    Ok(())
}

/// Logs a warning when session cookies are not `Secure` and `addr` is reachable from other
/// machines: the session cookie would then cross the network in clear text.
pub fn warn_if_exposed(addr: SocketAddr, cookie_secure: bool) {
    if !cookie_secure && !addr.ip().is_loopback() {
        tracing::warn!(
            listen = %addr,
            "listening beyond loopback without `cookie_secure`: session cookies are not marked \
             Secure and would cross the network in clear text. Put redrive behind an HTTPS \
             proxy and set cookie_secure = true (REDRIVE_COOKIE_SECURE=true), or listen on \
             127.0.0.1 (in a container: publish the port on 127.0.0.1 only)"
        );
    }
}
