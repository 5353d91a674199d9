//! The relay's side of a canary replay (`docs/replay.md`, "Canary replay"): before a worker
//! claims rows of a job with a canary, it steps the canary's state machine in the store
//! (`store/canary.rs`, [`Store::canary_step`]): fixes the canary's size when the job first
//! runs, starts the watch when every canary record is final, and gives the verdict — a failed
//! canary pauses the job there, with its audit row. The relay keeps nothing in memory: the
//! watch's deadline is a column, so a restart or another relay continues where this one was.
//! The cap on what a claim takes while the canary publishes is the claim's own (`outbox.rs`).

use crate::store::canary::Step;

use super::worker::Relay;
use crate::store::ActiveJob;

impl Relay {
    /// Steps `job`'s canary; returns whether the worker should claim now (`false` while the
    /// canary starts or is watched, or once it failed and paused the job). A job without a
    /// canary claims as usual; a store error is recorded and the claim goes ahead (its own
    /// transaction re-checks the canary).
    pub(super) async fn canary_allows_claims(&self, job: &ActiveJob) -> bool {
        let Some(opts) = &job.options.canary else {
            return true;
        };
        match self
            .store
            .canary_step(&job.id, opts, crate::store::canary::now())
            .await
        {
            Ok(Step::Claim) => true,
            Ok(Step::Wait) => false,
            Ok(Step::Failed(reason)) => {
                tracing::warn!(target: "redrive::replay", %reason, "canary failed; the job paused itself");
                self.status.record_error(reason);
                false
            }
            Err(e) => {
                tracing::warn!(target: "redrive::replay", error = %e, "cannot step the canary; the claim decides");
                self.status.record_error(format!("store: {e}"));
                true
            }
        }
    }
}
