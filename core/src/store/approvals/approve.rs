//! Approving a request and carrying its action out as its requester
//! ([`Store::approve_request`]), once the requester is checked as they are now. "The module
//! docs" below are `mod.rs`'s.

use super::link::ApprovalLink;
use crate::actions::Actor;
use crate::approval::{ActionKind, ApprovalOutcome, ApprovalRequest};
use crate::permission::Permission;
use crate::store::actions::check_reason;
use crate::store::{Store, StoreError};

impl Store {
    /// Approves request `id` as `approver` and carries the action out as its requester
    /// would have (see the module docs): for a replay the job, its outbox rows and its audit
    /// row; for a delete or restore the state change and its audit row. The approver must
    /// not be the requester ([`ApprovalRequest::check_decider`]).
    ///
    /// Errors: `NotFound`, `Conflict` (not pending, expired, decided meanwhile; nothing is
    /// done), `Invalid` (the approver is the requester, or the decision reason is too long),
    /// `Unavailable`, `Database`.
    pub async fn approve_request(
        &self,
        approver: &Actor,
        id: i64,
        decision_reason: Option<&str>,
    ) -> Result<ApprovalOutcome, StoreError> {
        let mut r = self.pending_request(id).await?;
        r.check_decider(&approver.user)
            .map_err(StoreError::Invalid)?;
        r.requested_by = self.requester_now(&r).await?;
        let link = ApprovalLink {
            request_id: r.id,
            kind: r.kind,
            requested_by: r.requested_by.user.clone(),
            approver: approver.clone(),
            decision_reason: check_reason(decision_reason)?,
            count: r.count,
            max_id: r.max_id,
        };
        let (affected, job) = match r.kind {
            ActionKind::Replay => {
                let job = self
                    .replay_as(&r.requested_by, &r.request, Some(&link), usize::MAX)
                    .await?;
                (job.total, Some(job))
            }
            ActionKind::Delete | ActionKind::Restore => {
                let n = self
                    .change_status_as(
                        &r.requested_by,
                        &r.request.selection,
                        r.request.reason.as_deref(),
                        r.kind == ActionKind::Delete,
                        Some(&link),
                    )
                    .await?;
                (i64::try_from(n).unwrap_or(i64::MAX), None)
            }
        };
        let request = self
            .approval_request(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("approval request {id}")))?;
        tracing::info!(request = id, approver = %approver.user, affected, "approval request approved");
        Ok(ApprovalOutcome {
            request,
            affected,
            job,
        })
    }

    /// The requester of `r` as they are now: the action runs with their current role, and a
    /// request whose requester was removed, disabled or no longer holds the action's
    /// permission cannot be approved (approving would act with a power they lost).
    ///
    /// Errors: `Conflict` naming what changed (decline the request instead), `Unavailable`,
    /// `Database`.
    async fn requester_now(&self, r: &ApprovalRequest) -> Result<Actor, StoreError> {
        let name = r.requested_by.user.as_str();
        let need = match r.kind {
            ActionKind::Replay => Permission::Replay,
            ActionKind::Delete | ActionKind::Restore => Permission::Delete,
        };
        let problem = match self.user(name).await? {
            None => format!("its requester `{name}` no longer exists"),
            Some(u) if u.disabled => format!("its requester `{name}` is disabled"),
            Some(u) if !u.role.grants(need) => format!(
                "its requester `{name}` now has the role `{}`, which does not grant `{need}`",
                u.role.as_str()
            ),
            Some(u) => {
                let mut actor = r.requested_by.clone();
                actor.role = u.role;
                return Ok(actor);
            }
        };
        Err(StoreError::Conflict(format!(
            "approval request {} cannot be approved: {problem}; decline it instead",
            r.id
        )))
    }
}
