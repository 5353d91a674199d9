//! The retention and quarantine operations (`/api/v1/retention`, `/api/v1/archives`,
//! `/api/v1/quarantine...`).

use utoipa::openapi::path::HttpMethod::{Get, Post};

use super::params::{any_object, id_path, integer, limit, query, Schemas};
use super::Who::{Permission, Viewer};
use super::{op, Body, Op};
use crate::{api_archive as arch, api_quarantine as quar};

/// Retention and quarantine: the overview, archiving now, and quarantined records.
pub(super) fn retention(s: &mut Schemas) -> Vec<Op> {
    vec![
        op(
            Get,
            "/api/v1/retention",
            "retentionOverview",
            "retention",
            "Paused DLQ topics and the last purge and archive runs",
            Viewer,
        )
        .ok(200, Body::Json(s.of::<arch::RetentionOverview>())),
        op(
            Post,
            "/api/v1/archives",
            "createArchive",
            "retention",
            "Archive the dead letters a filter matches now",
            Permission("delete"),
        )
        .body(s.of::<arch::ArchiveBody>(), true)
        .ok(201, Body::Json(any_object()))
        .errors(&[400, 409, 413, 422, 502]),
        op(
            Get,
            "/api/v1/quarantine",
            "listQuarantine",
            "quarantine",
            "Records the store refused even in reduced form, newest first",
            Viewer,
        )
        .params([
            limit(redrive_core::quarantine::MAX_LIST_LIMIT as i64),
            query("before", integer(None, None), "Below this quarantine id."),
        ])
        .ok(200, Body::Json(s.of::<quar::QuarantinePage>())),
        op(
            Get,
            "/api/v1/quarantine/{id}",
            "getQuarantined",
            "quarantine",
            "One quarantined record, with its bytes when kept",
            Viewer,
        )
        .params([id_path("id", "Quarantine id.")])
        .ok(200, Body::Json(s.of::<quar::QuarantineDetail>()))
        .errors(&[400, 404]),
        op(
            Post,
            "/api/v1/quarantine/retry",
            "retryQuarantine",
            "quarantine",
            "Try to store quarantined records again",
            Permission("replay"),
        )
        .body(s.of::<quar::RetryBody>(), true)
        .ok(200, Body::Json(any_object()))
        .errors(&[400, 404, 413, 422]),
    ]
}
