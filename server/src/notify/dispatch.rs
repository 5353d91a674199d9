//! The notification dispatcher: on the leader, claims due deliveries from the store, sends
//! each in a task of its own, and records every attempt: delivered; failed and retried after
//! exponential backoff with full jitter (`notify_backoff_base_ms` doubling up to
//! `notify_backoff_max_ms`); or, after `notify_max_attempts` (or a refusal no retry can fix),
//! given up — a `notification_failed` alert event, an audit row and
//! `redrive_alert_notifications_failed_total`.
//!
//! Isolation: every notifier has its own [`MAX_IN_FLIGHT_PER_NOTIFIER`] send slots, and
//! deliveries are claimed per notifier, only as many as it has free slots. A receiver that
//! accepts the connection and never answers holds its own slots until `notify_timeout_ms`,
//! never another notifier's: PagerDuty still pages while a webhook hangs.
//!
//! Bounded time: one attempt takes at most `notify_timeout_ms` per request; a delivery ends
//! after at most `notify_max_attempts` attempts. A claimed delivery is leased for
//! [`lease_ms`], so one whose sender died is retried once the lease runs out. At a graceful
//! shutdown the sends in flight finish and are recorded first ([`drain`]), so a restart
//! does not notify twice.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use redrive_core::alerts::evaluate::IsLeader;
use redrive_core::alerts::status::{AlertStatus, AttemptOutcome};
use redrive_core::alerts::AlertsConfig;
use redrive_core::replay::backoff::{full_jitter_ms, random_unit};
use redrive_core::store::{ClaimFor, DueDelivery, Store};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

/// Deliveries of ONE notifier sent at the same time (each notifier has its own slots).
pub const MAX_IN_FLIGHT_PER_NOTIFIER: usize = 4;
/// Deliveries to notifiers no longer configured, given up per poll.
const ORPHANS_PER_POLL: i64 = 100;
/// How often the dispatcher looks for due deliveries when not woken.
pub const POLL_EVERY: Duration = Duration::from_millis(250);

/// The lease of a claimed delivery, ms: two request timeouts (PagerDuty's test sends two
/// requests) and 5 s to record the outcome.
pub fn lease_ms(config: &AlertsConfig) -> i64 {
    i64::try_from(
        config
            .notify_timeout_ms
            .saturating_mul(2)
            .saturating_add(5_000),
    )
    .unwrap_or(i64::MAX)
}

use redrive_core::clock::now_ms;

/// Runs until `shutdown`. `wake` is notified by whoever records a delivery in this process
/// (a test notification), so it goes out without waiting for the next poll.
pub async fn run(
    config: Arc<AlertsConfig>,
    store: Store,
    status: Arc<AlertStatus>,
    is_leader: IsLeader,
    wake: Arc<Notify>,
    shutdown: CancellationToken,
) {
    let client = super::client(Duration::from_millis(config.notify_timeout_ms));
    let slots: BTreeMap<String, Arc<Semaphore>> = config
        .notifiers
        .keys()
        .map(|n| {
            (
                n.clone(),
                Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_NOTIFIER)),
            )
        })
        .collect();
    let configured: Vec<String> = slots.keys().cloned().collect();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        if is_leader() {
            for (name, sem) in &slots {
                let free = sem.available_permits();
                if free == 0 {
                    continue; // this notifier is busy (or hanging); the others go on
                }
                let due = match store
                    .claim_alert_deliveries(
                        now_ms(),
                        lease_ms(&config),
                        free as i64,
                        ClaimFor::Notifier(name),
                    )
                    .await
                {
                    Ok(due) => due,
                    Err(e) => {
                        tracing::warn!(error = %e, notifier = %name, "claiming alert deliveries failed");
                        continue;
                    }
                };
                for d in due {
                    // Claimed no more than the free permits, and only this loop takes them.
                    let Ok(permit) = sem.clone().try_acquire_owned() else {
                        break; // left claimed: retried when its lease runs out
                    };
                    let (config, store, status, client) = (
                        config.clone(),
                        store.clone(),
                        status.clone(),
                        client.clone(),
                    );
                    tasks.spawn(async move {
                        attempt(&config, &store, &status, &client, d).await;
                        drop(permit);
                    });
                }
            }
            // Deliveries of a notifier removed from the configuration: given up at once.
            match store
                .claim_alert_deliveries(
                    now_ms(),
                    lease_ms(&config),
                    ORPHANS_PER_POLL,
                    ClaimFor::NoneOf(&configured),
                )
                .await
            {
                Ok(due) => {
                    for d in due {
                        attempt(&config, &store, &status, &client, d).await;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "claiming alert deliveries failed"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL_EVERY) => {}
            _ = wake.notified() => {}
            _ = shutdown.cancelled() => {
                drain(tasks, drain_grace(&config)).await;
                return;
            }
        }
    }
}

/// The longest a graceful shutdown waits for the notifications in flight, ms: one request
/// timeout, at most this (within `shutdown_timeout_ms`, default 30 s, a hanging receiver must
/// not hold the shutdown up for long).
pub const DRAIN_MAX_MS: u64 = 10_000;

/// How long shutdown waits for the sends in flight: `notify_timeout_ms`, at most
/// [`DRAIN_MAX_MS`].
fn drain_grace(config: &AlertsConfig) -> Duration {
    Duration::from_millis(config.notify_timeout_ms.min(DRAIN_MAX_MS))
}

/// Graceful shutdown: claims nothing more and lets the sends in flight finish and record
/// their outcome, for at most `grace`. A send that reached its receiver is then not sent
/// again after a restart; one still running after `grace` is aborted and retried after its
/// lease, by whoever leads then (at-least-once, as after a crash).
async fn drain(mut tasks: tokio::task::JoinSet<()>, grace: Duration) {
    if tasks.is_empty() {
        return;
    }
    tracing::info!(
        in_flight = tasks.len(),
        "waiting for alert notifications in flight"
    );
    let all = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, all).await.is_err() {
        tracing::warn!(
            aborted = tasks.len(),
            "alert notifications still in flight at shutdown; retried after their lease"
        );
        tasks.abort_all();
    }
}

/// One attempt of one delivery, recorded.
async fn attempt(
    config: &AlertsConfig,
    store: &Store,
    status: &AlertStatus,
    client: &reqwest::Client,
    due: DueDelivery,
) {
    let d = &due.delivery;
    let attempts = d.attempts.saturating_add(1);
    let result = match config.notifiers.get(&d.notifier) {
        Some(n) => super::send(client, n, &due.payload, d.id).await,
        None => Err(super::SendError::permanent(format!(
            "notifier `{}` is no longer configured",
            d.notifier
        ))),
    };
    let now = now_ms();
    let outcome = match &result {
        Ok(()) => {
            status.attempt(&d.notifier, AttemptOutcome::Delivered);
            tracing::info!(notifier = %d.notifier, rule = %d.rule, scope = %d.scope,
                event = d.event_kind.as_str(), attempts, "alert notification delivered");
            Ok(())
        }
        Err(e) if e.retryable && (attempts as u32) < config.notify_max_attempts => {
            status.attempt(&d.notifier, AttemptOutcome::Retried);
            let delay = full_jitter_ms(
                attempts as u32,
                config.notify_backoff_base_ms,
                config.notify_backoff_max_ms,
                random_unit(),
            );
            tracing::warn!(notifier = %d.notifier, rule = %d.rule, attempts, retry_in_ms = delay,
                error = %e, "alert notification failed; retrying");
            Err((e.message.as_str(), Some(now.saturating_add(delay as i64))))
        }
        Err(e) => {
            status.attempt(&d.notifier, AttemptOutcome::GaveUp);
            tracing::error!(notifier = %d.notifier, rule = %d.rule, scope = %d.scope, attempts,
                error = %e, "alert notification given up");
            Err((e.message.as_str(), None))
        }
    };
    if let Err(e) = store
        .record_alert_attempt(d.id, attempts, outcome, now)
        .await
    {
        // The lease runs out and the delivery is tried again: at-least-once.
        tracing::warn!(error = %e, delivery = d.id, "recording an alert delivery attempt failed");
    }
}
