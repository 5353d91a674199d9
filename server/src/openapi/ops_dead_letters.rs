//! The dead-letter operations: reading dead letters and their error groups
//! (`/api/v1/dead-letters...`, `/api/v1/error-groups`), and a dead letter's edited versions.

use utoipa::openapi::path::HttpMethod::{Get, Post};
use utoipa::openapi::schema::ArrayBuilder;

use super::params::{dl_id, filter_params, integer, limit, path, query, string, Schemas};
use super::Who::{Permission, Viewer};
use super::{op, Body, Op};
use crate::{api, api_actions as act, api_versions as ver};

/// Reading dead letters: the list, one record, its raw bytes and history, the export and the
/// error groups.
pub(super) fn dead_letters(s: &mut Schemas) -> Vec<Op> {
    vec![
        op(
            Get,
            "/api/v1/dead-letters",
            "listDeadLetters",
            "dead letters",
            "Dead letters, newest first, keyset-paginated",
            Viewer,
        )
        .params(filter_params())
        .params([
            limit(500),
            query("cursor", string(), "A previous page's `next_cursor`."),
        ])
        .ok(200, Body::Json(s.of::<api::DeadLetterPage>())),
        op(
            Get,
            "/api/v1/dead-letters/{id}",
            "getDeadLetter",
            "dead letters",
            "One dead letter: the record (base64), its metadata, replay outcome and tier",
            Viewer,
        )
        .params([dl_id()])
        .ok(200, Body::Json(s.of::<api::DeadLetterRecord>()))
        .errors(&[400, 404]),
        op(
            Get,
            "/api/v1/dead-letters/{id}/raw/value",
            "rawValue",
            "dead letters",
            "The stored value, byte for byte, as a download",
            Viewer,
        )
        .params([dl_id()])
        .ok(200, Body::Bytes("application/octet-stream"))
        .errors(&[400, 404]),
        op(
            Get,
            "/api/v1/dead-letters/{id}/raw/key",
            "rawKey",
            "dead letters",
            "The stored key, byte for byte, as a download",
            Viewer,
        )
        .params([dl_id()])
        .ok(200, Body::Bytes("application/octet-stream"))
        .errors(&[400, 404]),
        op(
            Get,
            "/api/v1/dead-letters/{id}/raw/headers",
            "rawHeaders",
            "dead letters",
            "Every header in record order (values base64), as a JSON download",
            Viewer,
        )
        .params([dl_id()])
        .ok(
            200,
            Body::Json(ArrayBuilder::new().items(s.of::<api::HeaderItem>()).into()),
        )
        .errors(&[400, 404]),
        op(
            Get,
            "/api/v1/dead-letters/{id}/history",
            "deadLetterHistory",
            "dead letters",
            "One dead letter's history, oldest first",
            Viewer,
        )
        .params([dl_id()])
        .ok(200, Body::Json(s.of::<act::HistoryList>()))
        .errors(&[400, 404]),
        op(
            Get,
            "/api/v1/dead-letters/export",
            "exportDeadLetters",
            "dead letters",
            "Every dead letter the filter matches, as JSON Lines (streamed)",
            Viewer,
        )
        .params(filter_params())
        .ok(200, Body::Bytes("application/jsonl"))
        .errors(&[400]),
        op(
            Get,
            "/api/v1/error-groups",
            "listErrorGroups",
            "dead letters",
            "Error groups (by fingerprint), largest first",
            Viewer,
        )
        .params(filter_params())
        .params([limit(500)])
        .ok(200, Body::Json(s.of::<api::ErrorGroupList>())),
    ]
}

/// Edited versions of a dead letter: saving one (and replaying it), the list, one version.
pub(super) fn versions(s: &mut Schemas) -> Vec<Op> {
    vec![
        op(
            Post,
            "/api/v1/dead-letters/{id}/versions",
            "createVersion",
            "dead letters",
            "Save an edited version (and replay it with `\"replay\": true`)",
            Permission("edit"),
        )
        .params([dl_id()])
        .body(s.of::<ver::EditBody>(), true)
        .ok(201, Body::Json(s.of::<ver::Created>()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Get,
            "/api/v1/dead-letters/{id}/versions",
            "listVersions",
            "dead letters",
            "A dead letter's saved versions, newest first",
            Viewer,
        )
        .params([dl_id()])
        .ok(200, Body::Json(s.of::<ver::VersionList>()))
        .errors(&[400, 404]),
        op(
            Get,
            "/api/v1/dead-letters/{id}/versions/{version}",
            "getVersion",
            "dead letters",
            "One version's record (0 = the original)",
            Viewer,
        )
        .params([
            dl_id(),
            path("version", integer(Some(0.0), None), "Version number."),
        ])
        .ok(200, Body::Json(s.of::<ver::VersionRecord>()))
        .errors(&[400, 404]),
    ]
}
