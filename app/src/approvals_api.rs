//! Server functions of four-eyes approval (`/approvals`; `docs/replay.md`, "Four-eyes
//! approval and required reasons"): the requests to decide and the ones decided, and approve,
//! decline and cancel as plain POST forms (CSRF-checked, working without JavaScript). The
//! actions' own server functions (`actions_api`) divert an action that needs approval here
//! ([`gate`]): the request is stored, nothing else, and the browser lands on `/approvals`.

use leptos::prelude::*;
use redrive_core::approval::ApprovalRequest;
use serde::{Deserialize, Serialize};

/// Most decided requests the page lists (the newest).
pub const DECIDED_LIMIT: u32 = 50;
/// Most pending requests the page lists (the newest).
pub const PENDING_LIMIT: u32 = 100;

/// A request as the page shows it: with its count now while pending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestView {
    pub request: ApprovalRequest,
    /// Dead letters it would change now (pending only): to compare with the count when asked.
    pub count_now: Option<i64>,
}

/// What `/approvals` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalsListing {
    pub pending: Vec<RequestView>,
    pub decided: Vec<RequestView>,
    /// The server's clock, epoch ms (for "expires in").
    pub as_of_ms: i64,
}

/// Pending requests (with their count now) and the newest decided ones.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn list_approvals() -> Result<ApprovalsListing, ServerFnError> {
    use redrive_core::approval::RequestStatus;
    let store = crate::actions_api::store_for_labels()?;
    let failed = |e| crate::actions_api::failed_for_labels("list the approval requests", e);
    let pending = store
        .approval_requests(Some(RequestStatus::Pending), PENDING_LIMIT)
        .await
        .map_err(failed)?;
    let mut out = ApprovalsListing {
        as_of_ms: chrono::Utc::now().timestamp_millis(),
        ..Default::default()
    };
    for r in pending {
        let now = store
            .action_breakdown(r.kind, &r.request, r.max_id)
            .await
            .map_err(failed)?;
        out.pending.push(RequestView {
            count_now: Some(now.iter().map(|(_, n)| n).sum()),
            request: r,
        });
    }
    out.decided = store
        .approval_requests(None, DECIDED_LIMIT + PENDING_LIMIT)
        .await
        .map_err(failed)?
        .into_iter()
        .filter(|r| r.status != RequestStatus::Pending)
        .take(DECIDED_LIMIT as usize)
        .map(|request| RequestView {
            request,
            count_now: None,
        })
        .collect();
    Ok(out)
}

/// Approves request `id` (the `approve` permission, not its requester): the action runs.
#[server(endpoint = "ui/approve")]
pub async fn approve_request(
    csrf: String,
    id: i64,
    #[server(default)] reason: String,
) -> Result<i64, ServerFnError> {
    let _ = csrf;
    let (store, actor) = ssr::decider(id, "approval_approve").await?;
    let out = store
        .approve_request(&actor, id, ssr::text(&reason))
        .await
        .map_err(|e| crate::actions_api::failed_for_labels("approve the request", e))?;
    leptos_axum::redirect(&format!("/approvals?decided={id}#request-{id}"));
    Ok(out.affected)
}

/// Declines request `id` (the `approve` permission, not its requester; a reason is required).
#[server(endpoint = "ui/decline")]
pub async fn decline_request(
    csrf: String,
    id: i64,
    #[server(default)] reason: String,
) -> Result<i64, ServerFnError> {
    let _ = csrf;
    let (store, actor) = ssr::decider(id, "approval_decline").await?;
    store
        .decline_request(&actor, id, ssr::text(&reason))
        .await
        .map_err(|e| crate::actions_api::failed_for_labels("decline the request", e))?;
    leptos_axum::redirect(&format!("/approvals?decided={id}#request-{id}"));
    Ok(id)
}

/// Cancels request `id` (its requester only).
#[server(endpoint = "ui/cancel-request")]
pub async fn cancel_request(
    csrf: String,
    id: i64,
    #[server(default)] reason: String,
) -> Result<i64, ServerFnError> {
    let _ = csrf;
    let store = crate::actions_api::store_for_labels()?;
    let actor = crate::auth_context::signed_in()?;
    let r = ssr::load(&store, id).await?;
    if let Err(m) = r.check_canceller(&actor.user) {
        return Err(ssr::forbidden(&store, &actor, "approval_cancel", m).await);
    }
    store
        .cancel_request(&actor, id, ssr::text(&reason))
        .await
        .map_err(|e| crate::actions_api::failed_for_labels("cancel the request", e))?;
    leptos_axum::redirect(&format!("/approvals?decided={id}#request-{id}"));
    Ok(id)
}

#[cfg(feature = "ssr")]
pub use self::ssr::{gate, policy};

#[cfg(feature = "ssr")]
mod ssr {
    use std::sync::Arc;

    use leptos::prelude::*;
    use redrive_core::actions::{Actor, NewAuditEntry, ReplayRequest};
    use redrive_core::approval::{ActionKind, ApprovalPolicy, ApprovalRequest};
    use redrive_core::permission::Permission;
    use redrive_core::store::Store;

    use crate::refusal::{refused, INVALID, NOT_FOUND};

    /// The policy the site router provides (none: no approval, reasons optional).
    pub fn policy() -> Arc<ApprovalPolicy> {
        use_context::<Arc<ApprovalPolicy>>().unwrap_or_default()
    }

    /// An optional text field: trimmed, `None` when empty.
    pub fn text(v: &str) -> Option<&str> {
        let t = v.trim();
        (!t.is_empty()).then_some(t)
    }

    /// The approval gate of a replay, delete or restore from a form: the reason is checked
    /// (422 naming the pattern), then, when the action needs approval, it is stored as a
    /// pending request and returned (`Some`): the caller redirects to `/approvals`; `None` =
    /// carry it out now.
    pub async fn gate(
        store: &Store,
        actor: &Actor,
        kind: ActionKind,
        req: &ReplayRequest,
    ) -> Result<Option<ApprovalRequest>, ServerFnError> {
        let policy = policy();
        policy
            .check_reason(req.reason.as_deref())
            .map_err(|m| refused(INVALID, format!("Nothing was done: {m}.")))?;
        if !policy.approval_on() {
            return Ok(None);
        }
        store
            .submit_for_approval(&policy, actor, kind, req)
            .await
            .map_err(|e| crate::actions_api::failed_for_labels("ask for approval", e))
    }

    /// The request, or 404.
    pub async fn load(store: &Store, id: i64) -> Result<ApprovalRequest, ServerFnError> {
        store
            .approval_request(id)
            .await
            .map_err(|e| crate::actions_api::failed_for_labels("read the request", e))?
            .ok_or_else(|| refused(NOT_FOUND, format!("There is no approval request {id}.")))
    }

    /// 403 with `message`, audited `denied` as `action`.
    pub async fn forbidden(
        store: &Store,
        actor: &Actor,
        action: &str,
        message: String,
    ) -> ServerFnError {
        if let Err(e) = store
            .record_audit(&NewAuditEntry::by(actor, action, "denied"))
            .await
        {
            tracing::error!(error = %e, action, "could not write the audit row");
        }
        crate::http_status::HttpStatus::current().set(403);
        ServerFnError::new(format!("Not allowed: {message}."))
    }

    /// The store and the actor deciding request `id`: the `approve` permission (403 and
    /// audited otherwise), and not its requester (403).
    pub async fn decider(id: i64, action: &str) -> Result<(Store, Actor), ServerFnError> {
        let store = crate::actions_api::store_for_labels()?;
        let status = crate::http_status::HttpStatus::current();
        let actor = crate::auth_context::authorize_permission(Permission::Approve, action)
            .await
            .inspect_err(|_| status.set(403))?;
        let r = load(&store, id).await?;
        if let Err(m) = r.check_decider(&actor.user) {
            return Err(forbidden(&store, &actor, action, m).await);
        }
        Ok((store, actor))
    }
}
