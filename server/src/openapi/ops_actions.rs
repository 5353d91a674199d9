//! The action operations: replay jobs (`/api/v1/replays...`), deleting and restoring dead
//! letters, and the audit trail (`/api/v1/audit...`).

use utoipa::openapi::path::HttpMethod::{Get, Post};

use super::params::{limit, one_of, path, query, string, Schemas};
use super::Who::{Permission, Viewer};
use super::{op, Body, Op};
use crate::{api_actions as act, api_approvals as appr};

/// Actions: replays and their jobs, delete and restore, and the audit trail.
pub(super) fn actions(s: &mut Schemas) -> Vec<Op> {
    let job_id = || path("job_id", string(), "Replay job id (a UUID).");
    let pending = s.of::<appr::Pending>();
    let job = s.of::<act::JobItem>();
    let job_state = s.of::<act::JobStateBody>();

    vec![
        op(
            Post,
            "/api/v1/replays",
            "createReplay",
            "replays",
            "Replay the selected dead letters (a job; 202), or ask for approval (202 pending)",
            Permission("replay"),
        )
        .body(s.of::<act::ReplayBody>(), true)
        .ok(
            202,
            Body::Json(one_of(s.of::<act::ReplayAccepted>(), pending.clone())),
        )
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/replays/dry-run",
            "dryRunReplay",
            "replays",
            "What a replay of the same body would do, with samples; nothing changes",
            Viewer,
        )
        .body(s.of::<act::ReplayBody>(), true)
        .ok(200, Body::Json(s.of::<act::DryRunResult>()))
        .errors(&[400, 404, 413, 422]),
        op(
            Get,
            "/api/v1/replays",
            "listReplays",
            "replays",
            "Replay jobs, newest first",
            Viewer,
        )
        .params([limit(act::MAX_JOBS as i64)])
        .ok(200, Body::Json(s.of::<act::JobList>())),
        op(
            Get,
            "/api/v1/replays/{job_id}",
            "getReplay",
            "replays",
            "One replay job",
            Viewer,
        )
        .params([job_id()])
        .ok(200, Body::Json(job.clone()))
        .errors(&[400, 404]),
        op(
            Post,
            "/api/v1/replays/{job_id}/cancel",
            "cancelReplay",
            "replays",
            "Cancel a running, waiting or paused job",
            Permission("replay"),
        )
        .params([job_id()])
        .ok(200, Body::Json(job.clone()))
        .errors(&[400, 404, 409]),
        op(
            Post,
            "/api/v1/replays/{job_id}/pause",
            "pauseReplay",
            "replays",
            "Pause a running or waiting job",
            Permission("replay"),
        )
        .params([job_id()])
        .body(job_state.clone(), false)
        .ok(200, Body::Json(job.clone()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/replays/{job_id}/resume",
            "resumeReplay",
            "replays",
            "Resume a paused job",
            Permission("replay"),
        )
        .params([job_id()])
        .body(job_state, false)
        .ok(200, Body::Json(job))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/dead-letters/delete",
            "deleteDeadLetters",
            "dead letters",
            "Delete (soft, restorable) the selected dead letters",
            Permission("delete"),
        )
        .body(s.of::<act::ChangeBody>(), true)
        .ok(200, Body::Json(s.of::<act::Affected>()))
        .ok(202, Body::Json(pending.clone()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/dead-letters/restore",
            "restoreDeadLetters",
            "dead letters",
            "Restore deleted dead letters",
            Permission("delete"),
        )
        .body(s.of::<act::ChangeBody>(), true)
        .ok(200, Body::Json(s.of::<act::Affected>()))
        .ok(202, Body::Json(pending))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Get,
            "/api/v1/audit",
            "listAudit",
            "audit",
            "The audit trail, newest first",
            Viewer,
        )
        .params([
            query("actor", string(), "Exact user."),
            query("action", string(), "Exact action."),
            query("from", string(), "At or after (the list's time forms)."),
            query("to", string(), "Before."),
            limit(redrive_core::actions::AUDIT_MAX_LIMIT as i64),
            query("cursor", string(), "A previous page's `next_cursor`."),
        ])
        .ok(200, Body::Json(s.of::<act::AuditPage>())),
        op(
            Get,
            "/api/v1/audit.csv",
            "exportAudit",
            "audit",
            "The whole (filtered) audit trail as CSV",
            Viewer,
        )
        .params([
            query("actor", string(), "Exact user."),
            query("action", string(), "Exact action."),
            query("from", string(), "At or after."),
            query("to", string(), "Before."),
            limit(redrive_core::actions::AUDIT_MAX_LIMIT as i64),
            query("cursor", string(), "Start below this audit id."),
        ])
        .ok(200, Body::Bytes("text/csv")),
    ]
}
