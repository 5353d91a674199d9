//! The automation operations: rule sets, their versions and dry runs, and pausing rules
//! (`/api/v1/automation/...`).

use utoipa::openapi::path::HttpMethod::{Get, Post, Put};

use super::params::{any_object, integer, limit, path, string, Schemas};
use super::Who::{Permission, Viewer};
use super::{op, Body, Op};
use crate::api_automation as auto;

/// Automation: the rule set, its versions, a dry run, and pausing or resuming a rule.
pub(super) fn automation(s: &mut Schemas) -> Vec<Op> {
    let rule = || path("name", string(), "Transient rule name.");
    let pause_body = s.of::<auto::PauseBody>();

    vec![
        op(
            Get,
            "/api/v1/automation/rules",
            "getRules",
            "automation",
            "The active rule set, each rule's state, dead letters per tier",
            Viewer,
        )
        .ok(200, Body::Json(s.of::<auto::RulesAnswer>())),
        op(
            Put,
            "/api/v1/automation/rules",
            "saveRules",
            "automation",
            "Save a new rule set version (TOML)",
            Permission("manage_rules"),
        )
        .body(s.of::<auto::SaveBody>(), true)
        .ok(201, Body::Json(any_object()))
        .errors(&[400, 409, 413, 422]),
        op(
            Get,
            "/api/v1/automation/versions",
            "listRuleVersions",
            "automation",
            "Rule set versions, newest first",
            Viewer,
        )
        .params([limit(500)])
        .ok(200, Body::Json(any_object())),
        op(
            Get,
            "/api/v1/automation/versions/{n}",
            "getRuleVersion",
            "automation",
            "One rule set version with its source and diff",
            Viewer,
        )
        .params([path("n", integer(Some(1.0), None), "Version number.")])
        .ok(200, Body::Json(any_object()))
        .errors(&[400, 404]),
        op(
            Post,
            "/api/v1/automation/dry-run",
            "dryRunRules",
            "automation",
            "What a rule set would do to the stored dead letters (nothing written)",
            Permission("manage_rules"),
        )
        .body(s.of::<auto::DryRunBody>(), true)
        .ok(200, Body::Json(any_object()))
        .errors(&[400, 413, 422]),
        op(
            Post,
            "/api/v1/automation/rules/{name}/pause",
            "pauseRule",
            "automation",
            "Pause a transient rule",
            Permission("manage_rules"),
        )
        .params([rule()])
        .body(pause_body.clone(), false)
        .ok(200, Body::Json(any_object()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/automation/rules/{name}/resume",
            "resumeRule",
            "automation",
            "Resume a paused transient rule",
            Permission("manage_rules"),
        )
        .params([rule()])
        .body(pause_body, false)
        .ok(200, Body::Json(any_object()))
        .errors(&[400, 404, 409, 413, 422]),
    ]
}
