//! One leader among the redrive instances that share a store, for the work that must run
//! once per store rather than once per process: alert evaluation, retention, scheduled
//! reprocessing. Ingest and the replay relay need no leader (Kafka's consumer group shares
//! the partitions; the relay claims outbox rows under a lease).
//!
//! - **SQLite**: one process writes the file, so it is always the leader ([`Leadership::single`]).
//! - **PostgreSQL**: the instance holding a session-level advisory lock
//!   ([`crate::store::AdvisoryLock`], key [`LEADER_LOCK`]) on a dedicated connection. Every
//!   instance tries to take it every [`LeaderConfig::retry`]; the leader confirms it every
//!   [`LeaderConfig::check`] and steps down at once when the check fails or does not answer
//!   within [`LeaderConfig::check_timeout`]. When the leader dies (even by SIGKILL) PostgreSQL
//!   ends its session, which frees the lock, and another instance takes over within one
//!   `retry` interval. A leader that is shut down releases the lock on its way out.
//!
//! Leadership is advisory, not a fence: for a moment around a failover two instances may
//! both run a round (the old leader steps down only when its check fails). The work done
//! under it is therefore idempotent (alert state and retention chunks are transactions in the
//! store; replays keep their idempotency keys).

use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::store::{lock_key, AdvisoryLock, Store};

/// Name of the advisory lock the leader holds ([`lock_key`] of it is the key).
pub const LEADER_LOCK: &str = "redrive.leader";

/// Timing of the leader election. All durations are wall-clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderConfig {
    /// How often a follower tries to take the lock (default 2 s): the failover time after the
    /// leader's session ends.
    pub retry: Duration,
    /// How often the leader confirms it still holds the lock (default 2 s).
    pub check: Duration,
    /// Longest a check may take before the leader steps down (default 5 s).
    pub check_timeout: Duration,
}

impl Default for LeaderConfig {
    fn default() -> Self {
        LeaderConfig {
            retry: Duration::from_secs(2),
            check: Duration::from_secs(2),
            check_timeout: Duration::from_secs(5),
        }
    }
}

/// Whether this process is the leader now, and a way to wait for that to change. Cheap to
/// clone; every clone sees the same state.
#[derive(Debug, Clone)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
    /// On PostgreSQL: the election task runs (its end drops the sender).
    campaigns: bool,
}

impl Leadership {
    /// Always the leader: SQLite, or a process that is alone by construction.
    pub fn single() -> Leadership {
        let (tx, rx) = watch::channel(true);
        // Keep the sender alive for ever so `changed` pends instead of erroring.
        std::mem::forget(tx);
        Leadership {
            rx,
            campaigns: false,
        }
    }

    /// Starts the election for `store`: [`Leadership::single`] on SQLite; on PostgreSQL a
    /// background task that takes, holds and checks the lock until `shutdown`, then releases
    /// it. Starts as a follower; the first attempt is made at once.
    pub fn start(store: &Store, config: LeaderConfig, shutdown: CancellationToken) -> Leadership {
        if !store.is_shared() {
            return Leadership::single();
        }
        let (tx, rx) = watch::channel(false);
        tokio::spawn(campaign(store.clone(), config, tx, shutdown));
        Leadership {
            rx,
            campaigns: true,
        }
    }

    /// Waits until the election task has ended after its shutdown token was cancelled, the
    /// lock released (returns at once on SQLite). A process that exits without waiting may
    /// end the task before it releases the lock: PostgreSQL then frees it with the session,
    /// but the hand-over is not logged.
    pub async fn released(&self) {
        if !self.campaigns {
            return;
        }
        let mut rx = self.rx.clone();
        // `changed` errs once the task has dropped its sender, after the release.
        while rx.changed().await.is_ok() {}
    }

    /// Whether this process is the leader at this moment. Check it before each round of
    /// leader-only work.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// Waits until this process is the leader (returns at once if it is). Pends for ever
    /// after the election task ended (shutdown) without leadership.
    pub async fn wait_until_leader(&mut self) {
        if self.rx.wait_for(|leader| *leader).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The election loop of one PostgreSQL instance.
async fn campaign(
    store: Store,
    config: LeaderConfig,
    tx: watch::Sender<bool>,
    shutdown: CancellationToken,
) {
    let key = lock_key(LEADER_LOCK);
    let mut held: Option<AdvisoryLock> = None;
    loop {
        let pause = match held.as_mut() {
            None => match store.try_advisory_lock(key).await {
                Ok(Some(lock)) => {
                    tracing::info!("this instance is now the leader (alerts, retention)");
                    held = Some(lock);
                    tx.send_replace(true);
                    config.check
                }
                Ok(None) => config.retry,
                Err(e) => {
                    tracing::debug!(error = %e, "leader election: cannot reach the store");
                    config.retry
                }
            },
            Some(lock) => match tokio::time::timeout(config.check_timeout, lock.check()).await {
                Ok(Ok(())) => config.check,
                outcome => {
                    let why = match outcome {
                        Ok(Err(e)) => e.to_string(),
                        _ => format!("the check took over {:?}", config.check_timeout),
                    };
                    tracing::warn!(reason = %why, "this instance is no longer the leader");
                    tx.send_replace(false);
                    held = None;
                    config.retry
                }
            },
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.cancelled() => break,
        }
    }
    tx.send_replace(false);
    if let Some(lock) = held {
        lock.release().await;
        tracing::info!("leadership released at shutdown");
    }
}
