//! Carrying out an approved request through the action functions: the [`ApprovalLink`] they
//! are handed, the `UPDATE` their first transaction claims the request with
//! ([`claim_query`]) and the approval merged into the action's audit `detail`
//! ([`approval_detail`]).

use sqlx::QueryBuilder;

use crate::actions::{Actor, NewAuditEntry};
use crate::approval::ActionKind;
#[cfg(doc)]
use crate::approval::ApprovalRequest;
use crate::store::actions::clean_text;
use crate::store::dialect::{Dialect, Val};
use crate::store::StoreError;

/// An approved request being carried out: handed to the action functions, whose first
/// transaction claims the request ([`claim_query`]) and writes [`ApprovalLink::audit`].
#[derive(Debug, Clone)]
pub(crate) struct ApprovalLink {
    pub(crate) request_id: i64,
    pub(crate) kind: ActionKind,
    pub(crate) requested_by: String,
    pub(crate) approver: Actor,
    pub(crate) decision_reason: Option<String>,
    /// Dead letters it would have changed at request time.
    pub(crate) count: i64,
    /// The filter's bound (see [`ApprovalRequest::max_id`]).
    pub(crate) max_id: Option<i64>,
}

impl ApprovalLink {
    /// The approver's audit row (`approval_approve`), written with the claim.
    pub(crate) fn audit(&self, job_id: Option<&str>) -> NewAuditEntry {
        NewAuditEntry {
            count: self.count,
            reason: self.decision_reason.clone(),
            job_id: job_id.map(str::to_string),
            detail: Some(
                serde_json::json!({
                    "request_id": self.request_id,
                    "kind": self.kind.as_str(),
                    "requested_by": self.requested_by,
                })
                .to_string(),
            ),
            ..NewAuditEntry::by(
                &self.approver,
                "approval_approve",
                "ok: approved and carried out",
            )
        }
    }

    /// The refusal when the claim found the request no longer pending (decided or expired
    /// by someone else meanwhile): the action's transaction is rolled back.
    pub(crate) fn lost(&self) -> StoreError {
        StoreError::Conflict(format!(
            "approval request {} was decided, cancelled or expired meanwhile; nothing was done",
            self.request_id
        ))
    }
}

/// `UPDATE` claiming the request for its approval, `RETURNING id`: no row when it is no
/// longer pending or has expired.
pub(crate) fn claim_query<'a, DB: Dialect>(
    link: &'a ApprovalLink,
    job_id: Option<&'a str>,
    now: i64,
) -> QueryBuilder<'a, DB> {
    let mut qb =
        QueryBuilder::new("UPDATE approval_requests SET status = 'approved', decided_by = ");
    DB::bind(
        &mut qb,
        Val::OwnedText(Some(clean_text(&link.approver.user))),
    );
    qb.push(", decided_at_ms = ");
    DB::bind(&mut qb, Val::I64(Some(now)));
    qb.push(", decision_reason = ");
    DB::bind(
        &mut qb,
        Val::OwnedText(link.decision_reason.as_deref().map(clean_text)),
    );
    qb.push(", job_id = ");
    DB::bind(&mut qb, Val::Text(job_id));
    qb.push(" WHERE id = ");
    DB::bind(&mut qb, Val::I64(Some(link.request_id)));
    qb.push(" AND status = 'pending' AND expires_at_ms > ");
    DB::bind(&mut qb, Val::I64(Some(now)));
    qb.push(" RETURNING id");
    qb
}

/// Claims `$link` (`&ApprovalLink`) for its approval inside transaction `$tx` of the `DB` in
/// scope (inside `on_pool!`), naming job `$job_id` (`Option<&str>`), and writes the
/// approval's audit row there: the first writes of an approved action's transaction. When
/// the request was decided, cancelled or expired meanwhile, returns
/// `Err(ApprovalLink::lost().into())` from the enclosing function (so its transaction is
/// rolled back, nothing done); a database error returns `Err(StoreError.into())`. A macro
/// because the two databases' transactions are different types.
macro_rules! claim_in_tx {
    ($tx:ident, $link:expr, $job_id:expr, $now:expr) => {{
        let (link, job_id, now) = ($link, $job_id, $now);
        let claimed: Option<i64> = $crate::store::approvals::claim_query::<DB>(link, job_id, now)
            .build_query_scalar()
            .fetch_optional(&mut *$tx)
            .await
            .map_err($crate::store::dialect::store_error)?;
        if claimed.is_none() {
            return Err(link.lost().into());
        }
        $crate::store::audit::insert_audit::<DB>(&link.audit(job_id), now)
            .build()
            .execute(&mut *$tx)
            .await
            .map_err($crate::store::dialect::store_error)?;
    }};
}
pub(crate) use claim_in_tx;

/// An action's audit `detail` with `{"approval": {"request_id", "requested_by",
/// "approved_by"}}` merged in; unchanged without a link.
pub(crate) fn approval_detail(
    detail: Option<String>,
    link: Option<&ApprovalLink>,
) -> Option<String> {
    let Some(link) = link else {
        return detail;
    };
    let mut d = detail
        .as_deref()
        .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    d["approval"] = serde_json::json!({
        "request_id": link.request_id,
        "requested_by": link.requested_by,
        "approved_by": link.approver.user,
    });
    Some(d.to_string())
}
