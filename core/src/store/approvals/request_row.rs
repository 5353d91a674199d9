//! An approval request as stored in `approval_requests`: its columns ([`COLUMNS`]), the row
//! read back ([`RequestRow`]) and its conversion to an [`ApprovalRequest`].

use crate::actions::{Actor, ReplayOptions, ReplayRequest, Selection};
use crate::approval::{ActionKind, ApprovalRequest, RequestStatus};
use crate::store::StoreError;

pub(super) const COLUMNS: &str =
    "id, kind, selection, max_id, target_topic, rate_per_sec, options, reason, \
     actor_json, record_count, per_topic, why, created_at_ms, expires_at_ms, status, decided_by, \
     decided_at_ms, decision_reason, job_id";

#[derive(Debug, sqlx::FromRow)]
pub(super) struct RequestRow {
    id: i64,
    kind: String,
    selection: String,
    max_id: Option<i64>,
    target_topic: Option<String>,
    rate_per_sec: Option<i32>,
    options: String,
    reason: Option<String>,
    actor_json: String,
    record_count: i64,
    per_topic: String,
    why: String,
    created_at_ms: i64,
    expires_at_ms: i64,
    status: String,
    decided_by: Option<String>,
    decided_at_ms: Option<i64>,
    decision_reason: Option<String>,
    job_id: Option<String>,
}

impl TryFrom<RequestRow> for ApprovalRequest {
    type Error = StoreError;

    fn try_from(r: RequestRow) -> Result<ApprovalRequest, StoreError> {
        let bad = |what: &str, e: String| {
            StoreError::Corrupt(format!("approval request {}: {what}: {e}", r.id))
        };
        let kind = ActionKind::parse(&r.kind).ok_or_else(|| bad("kind", r.kind.clone()))?;
        let status =
            RequestStatus::parse(&r.status).ok_or_else(|| bad("status", r.status.clone()))?;
        let selection: Selection =
            serde_json::from_str(&r.selection).map_err(|e| bad("selection", e.to_string()))?;
        let options = ReplayOptions::from_json(&r.options).map_err(|e| bad("options", e))?;
        let requested_by: Actor =
            serde_json::from_str(&r.actor_json).map_err(|e| bad("actor", e.to_string()))?;
        let per_topic: Vec<(String, i64)> =
            serde_json::from_str(&r.per_topic).map_err(|e| bad("per_topic", e.to_string()))?;
        Ok(ApprovalRequest {
            id: r.id,
            kind,
            request: ReplayRequest {
                selection,
                target_topic: r.target_topic,
                rate_per_sec: r.rate_per_sec.and_then(|n| u32::try_from(n).ok()),
                reason: r.reason,
                options,
            },
            max_id: r.max_id,
            requested_by,
            count: r.record_count,
            per_topic,
            why: r.why,
            created_at_ms: r.created_at_ms,
            expires_at_ms: r.expires_at_ms,
            status,
            decided_by: r.decided_by,
            decided_at_ms: r.decided_at_ms,
            decision_reason: r.decision_reason,
            job_id: r.job_id,
        })
    }
}
