//! The four-eyes approval operations (`/api/v1/requests...`).

use utoipa::openapi::path::HttpMethod::{Get, Post};

use super::params::{enumeration, id_path, limit, query, Schemas};
use super::Who::{Own, Permission, Viewer};
use super::{op, Body, Op};
use crate::api_approvals as appr;

/// Approvals: the requests, and approving, declining or cancelling one.
pub(super) fn approvals(s: &mut Schemas) -> Vec<Op> {
    let req_id = || id_path("id", "Approval request id.");
    let request = s.of::<appr::RequestItem>();
    let decision = s.of::<appr::DecisionBody>();

    vec![
        op(
            Get,
            "/api/v1/requests",
            "listApprovalRequests",
            "approvals",
            "Four-eyes approval requests, newest first",
            Viewer,
        )
        .params([
            query(
                "status",
                enumeration(&["pending", "approved", "declined", "cancelled", "expired"]),
                "Only requests in this state.",
            ),
            limit(500),
        ])
        .ok(200, Body::Json(s.of::<appr::RequestList>())),
        op(
            Get,
            "/api/v1/requests/{id}",
            "getApprovalRequest",
            "approvals",
            "One approval request",
            Viewer,
        )
        .params([req_id()])
        .ok(200, Body::Json(request.clone()))
        .errors(&[400, 404]),
        op(
            Post,
            "/api/v1/requests/{id}/approve",
            "approveRequest",
            "approvals",
            "Approve another user's request: it is carried out now",
            Permission("approve"),
        )
        .params([req_id()])
        .body(decision.clone(), false)
        .ok(200, Body::Json(s.of::<appr::Approved>()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/requests/{id}/decline",
            "declineRequest",
            "approvals",
            "Decline another user's request (a reason is required)",
            Permission("approve"),
        )
        .params([req_id()])
        .body(decision.clone(), true)
        .ok(200, Body::Json(request.clone()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/requests/{id}/cancel",
            "cancelRequest",
            "approvals",
            "Cancel one's own request",
            Own,
        )
        .params([req_id()])
        .body(decision, false)
        .ok(200, Body::Json(request))
        .errors(&[400, 404, 409, 413, 422]),
    ]
}
