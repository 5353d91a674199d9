//! `serve`'s shutdown half: the signals that start it, and the ordered wait for what was
//! running (ingest stores and commits its batch, the relay marks the batch it published, the
//! alert dispatcher records the notifications in flight, the leader lock is released, open
//! requests finish) within `shutdown_timeout_ms`, then the stores close.

use std::time::Duration;

use redrive_core::ingest::IngestError;
use redrive_core::leader::Leadership;
use redrive_core::replay::RelayError;
use redrive_core::store::Store;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ServeError;

/// How long shutdown waits for the store's connections to close.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// What shutdown waits for: the tasks `serve` started, the leader election, and the stores it
/// closes last.
pub(super) struct Running {
    /// Every store `serve` opened (the pages', ingest's, the relay's, ...).
    pub(super) stores: Vec<Store>,
    /// `None` when ingest is off or already ended.
    pub(super) ingest_task: Option<JoinHandle<Result<(), IngestError>>>,
    /// `None` when the relay is off.
    pub(super) relay_task: Option<JoinHandle<Result<(), RelayError>>>,
    pub(super) notify_task: JoinHandle<()>,
    pub(super) leader: Leadership,
}

impl Running {
    /// Everything has been told to stop (the token is cancelled): waits for ingest to store
    /// and commit its batch, for the relay, the dispatcher and open requests (`server_task`,
    /// `None` when it already ended) to finish and for the leader lock to be released, at most
    /// `timeout_ms`; then closes the stores (at most [`CLOSE_TIMEOUT`]).
    ///
    /// Errors: `failure` (why `serve` stopped, if it did not stop for a signal), else ingest's
    /// or the server's error, else [`ServeError::ShutdownTimeout`].
    pub(super) async fn finish(
        self,
        server_task: Option<JoinHandle<Result<(), std::io::Error>>>,
        mut failure: Option<ServeError>,
        timeout_ms: u64,
    ) -> Result<(), ServeError> {
        tracing::info!(
            timeout_ms,
            "shutting down: no new connections; waiting for ingest to store its batch and commit"
        );
        let Running {
            stores,
            ingest_task,
            relay_task,
            notify_task,
            leader,
        } = self;
        let ingest_running = ingest_task.is_some();
        let wait_all = async {
            let ingest = async {
                match ingest_task {
                    Some(t) => ingest_outcome(t.await),
                    None => Ok(()),
                }
            };
            let server = async {
                match server_task {
                    Some(t) => server_outcome(t.await),
                    None => Ok(()),
                }
            };
            // The relay marks the batch in hand; its errors were logged when it stopped.
            let relay = async {
                if let Some(t) = relay_task {
                    let _ = t.await;
                }
            };
            // The alert dispatcher records the notifications in flight (`notify::dispatch`).
            let notify = async {
                let _ = notify_task.await;
            };
            // The election task releases the leader lock (PostgreSQL) before the store closes.
            let (ingest, server, (), (), ()) =
                tokio::join!(ingest, server, relay, notify, leader.released());
            (ingest, server)
        };
        match tokio::time::timeout(Duration::from_millis(timeout_ms), wait_all).await {
            Ok((ingest, server)) => {
                if ingest_running {
                    match &ingest {
                        Ok(()) => tracing::info!("ingest stopped cleanly"),
                        Err(e) => tracing::error!("{e}"),
                    }
                }
                failure = failure.or(ingest.err()).or(server.err());
            }
            Err(_) => {
                failure = failure.or(Some(ServeError::ShutdownTimeout(timeout_ms)));
            }
        }
        // Closing waits for checked-out connections; bound it too, in case ingest was
        // abandoned above with a connection in hand.
        let close_all = async {
            for s in &stores {
                s.close().await;
            }
        };
        if tokio::time::timeout(CLOSE_TIMEOUT, close_all)
            .await
            .is_err()
        {
            tracing::warn!("the database connections did not close within {CLOSE_TIMEOUT:?}");
        }
        match failure {
            Some(e) => Err(e),
            None => {
                tracing::info!("stopped");
                Ok(())
            }
        }
    }
}

/// Waits for a task to end; pending forever when there is none (so `select!` ignores it).
pub(super) async fn wait_task<T>(
    task: &mut Option<JoinHandle<T>>,
) -> Result<T, tokio::task::JoinError> {
    match task {
        Some(t) => t.await,
        None => std::future::pending().await,
    }
}

/// Ingest's task as it ended, as `serve`'s error vocabulary.
pub(super) fn ingest_outcome(
    r: Result<Result<(), IngestError>, tokio::task::JoinError>,
) -> Result<(), ServeError> {
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(ServeError::Ingest(e)),
        Err(e) => Err(ServeError::IngestCrashed(e.to_string())),
    }
}

/// The HTTP server's task as it ended, as `serve`'s error vocabulary.
pub(super) fn server_outcome(
    r: Result<Result<(), std::io::Error>, tokio::task::JoinError>,
) -> Result<(), ServeError> {
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(ServeError::Http(e)),
        Err(e) => Err(ServeError::Http(std::io::Error::other(e.to_string()))),
    }
}

/// Cancels `shutdown` on the first SIGINT or SIGTERM; exits the process on the second.
pub(super) async fn watch_signals(shutdown: CancellationToken) {
    let first = next_signal().await;
    tracing::info!("received {first}; shutting down (send it again to exit at once)");
    shutdown.cancel();
    let second = next_signal().await;
    tracing::warn!("received {second} again; exiting now");
    std::process::exit(130);
}

async fn next_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            },
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops redrive");
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}
