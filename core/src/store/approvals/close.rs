//! Closing a pending request without carrying it out: declining
//! ([`Store::decline_request`]) and cancelling ([`Store::cancel_request`]), each with its
//! audit row in one transaction.

use sqlx::QueryBuilder;

use crate::actions::{Actor, NewAuditEntry};
use crate::approval::{ApprovalRequest, RequestStatus};
use crate::store::actions::{check_reason, clean_text, now_ms};
use crate::store::dialect::{store_error, Dialect, Val};
use crate::store::{Pool, Store, StoreError};

impl Store {
    /// Declines request `id` (`decider` must not be its requester): nothing is written but
    /// the request's new status and ONE audit row (`approval_decline`). A reason is required.
    ///
    /// Errors: `NotFound`, `Conflict` (not pending or expired), `Invalid` (no reason, the
    /// decider is the requester), `Unavailable`, `Database`.
    pub async fn decline_request(
        &self,
        decider: &Actor,
        id: i64,
        reason: Option<&str>,
    ) -> Result<ApprovalRequest, StoreError> {
        let r = self.pending_request(id).await?;
        r.check_decider(&decider.user)
            .map_err(StoreError::Invalid)?;
        let reason = check_reason(reason)?.ok_or_else(|| {
            StoreError::Invalid("say why the request is declined (a reason is required)".into())
        })?;
        self.close_request(decider, &r, RequestStatus::Declined, Some(reason))
            .await
    }

    /// Cancels request `id` (only its requester may, [`ApprovalRequest::check_canceller`]):
    /// the status and ONE audit row (`approval_cancel`).
    ///
    /// Errors: `NotFound`, `Conflict` (not pending or expired), `Invalid` (not the
    /// requester), `Unavailable`, `Database`.
    pub async fn cancel_request(
        &self,
        actor: &Actor,
        id: i64,
        reason: Option<&str>,
    ) -> Result<ApprovalRequest, StoreError> {
        let r = self.pending_request(id).await?;
        r.check_canceller(&actor.user)
            .map_err(StoreError::Invalid)?;
        let reason = check_reason(reason)?;
        self.close_request(actor, &r, RequestStatus::Cancelled, reason)
            .await
    }

    /// `pending` -> `status` (declined or cancelled) with its audit row, in one transaction.
    async fn close_request(
        &self,
        actor: &Actor,
        r: &ApprovalRequest,
        status: RequestStatus,
        reason: Option<String>,
    ) -> Result<ApprovalRequest, StoreError> {
        let now = now_ms();
        let action = match status {
            RequestStatus::Declined => "approval_decline",
            _ => "approval_cancel",
        };
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE approval_requests SET status = ");
            DB::bind(&mut qb, Val::Text(Some(status.as_str())));
            qb.push(", decided_by = ");
            DB::bind(&mut qb, Val::OwnedText(Some(clean_text(&actor.user))));
            qb.push(", decided_at_ms = ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(", decision_reason = ");
            DB::bind(&mut qb, Val::Text(reason.as_deref()));
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::I64(Some(r.id)));
            qb.push(" AND status = 'pending' AND expires_at_ms > ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(" RETURNING id");
            let hit: Option<i64> = qb
                .build_query_scalar()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
            if hit.is_none() {
                return Err(StoreError::Conflict(format!(
                    "approval request {} was decided, cancelled or expired meanwhile",
                    r.id
                )));
            }
            let audit = NewAuditEntry {
                count: r.count,
                reason: reason.clone(),
                detail: Some(
                    serde_json::json!({
                        "request_id": r.id,
                        "kind": r.kind.as_str(),
                        "requested_by": r.requested_by.user,
                    })
                    .to_string(),
                ),
                ..NewAuditEntry::by(actor, action, "ok: nothing was carried out")
            };
            crate::store::audit::insert_audit::<DB>(&audit, now)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<(), StoreError>(())
        })?;
        tracing::info!(request = r.id, actor = %actor.user, status = status.as_str(), "approval request closed");
        self.approval_request(r.id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("approval request {}", r.id)))
    }
}
