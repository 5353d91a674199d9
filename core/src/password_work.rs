//! A bound on concurrent password hashing (`docs/security.md`, "Password checks").
//!
//! argon2id is deliberately expensive (tens of MiB and tens of ms of CPU per check). Without a
//! bound, a burst of sign-in attempts — each a different user name, so no throttle stops it —
//! would start as many hashes at once as there are requests, and the blocking pool would eat
//! the machine's memory and CPU. Every argon2 hash and verification of `serve` (sign-in, the
//! bootstrap admin, and the account operations of [`crate::accounts`]) goes through
//! [`PasswordWork::global`]: at most 2 × the CPU count run at a time, on the blocking pool;
//! the rest wait their turn (bounded by the request timeout, which answers 503).

use std::sync::{Arc, OnceLock};

use crate::auth::{hash_password, verify_password, AuthError};
use tokio::sync::Semaphore;

/// Runs password hashes and verifications, at most `limit` at a time.
#[derive(Debug, Clone)]
pub struct PasswordWork {
    permits: Arc<Semaphore>,
}

/// The password work could not run (the blocking task panicked, or the limiter was closed).
#[derive(Debug, thiserror::Error)]
#[error("the password check could not run: {0}")]
pub struct PasswordWorkError(String);

impl PasswordWork {
    /// A limiter running at most `limit` (at least 1) jobs at a time.
    pub fn new(limit: usize) -> PasswordWork {
        PasswordWork {
            permits: Arc::new(Semaphore::new(limit.max(1))),
        }
    }

    /// The process-wide limiter: 2 × the CPUs the process may use
    /// (`std::thread::available_parallelism`), 2 if unknown.
    pub fn global() -> &'static PasswordWork {
        static GLOBAL: OnceLock<PasswordWork> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            PasswordWork::new(2 * cpus)
        })
    }

    /// Runs `job` on the blocking pool once a slot is free. The slot is held until `job` ends,
    /// even if the caller stops waiting (a timed-out request): the bound is on work actually
    /// running, not on callers.
    pub async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, PasswordWorkError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| PasswordWorkError(e.to_string()))?;
        tokio::task::spawn_blocking(move || {
            let out = job();
            drop(permit);
            out
        })
        .await
        .map_err(|e| PasswordWorkError(e.to_string()))
    }

    /// [`verify_password`] within the bound; `false` if it could not run.
    pub async fn verify(&self, password: String, phc: String) -> bool {
        self.run(move || verify_password(&password, &phc))
            .await
            .unwrap_or(false)
    }

    /// [`hash_password`] within the bound.
    pub async fn hash(&self, password: String) -> Result<String, AuthError> {
        self.run(move || hash_password(&password))
            .await
            .map_err(|e| AuthError::Crypto(e.to_string()))?
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    use super::*;

    /// Eight jobs through a limit of two: never more than two at once, and two do run
    /// together (the first two wait at a barrier for each other, which only returns when both
    /// are running; the other jobs never block, so a slot always comes free for the second).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn at_most_limit_jobs_run_at_once() {
        let work = PasswordWork::new(2);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let pair = Arc::new(Barrier::new(2));
        let mut tasks = Vec::new();
        for i in 0..8 {
            let (work, running, most, pair) =
                (work.clone(), running.clone(), most.clone(), pair.clone());
            tasks.push(tokio::spawn(async move {
                work.run(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    if i < 2 {
                        // Waits for the other of the first two: both hold a slot.
                        pair.wait();
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    running.fetch_sub(1, Ordering::SeqCst);
                })
                .await
                .expect("ran");
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(running.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn verify_and_hash() {
        let work = PasswordWork::new(1);
        let phc = work.hash("a long password".into()).await.expect("hash");
        assert!(work.verify("a long password".into(), phc.clone()).await);
        assert!(!work.verify("another password".into(), phc).await);
    }
}
