//! The triage operations: labels and notes on dead letters and on error groups.

use utoipa::openapi::path::HttpMethod::{Get, Post, Put};

use super::params::{dl_id, path, string, Schemas};
use super::Who::{Permission, Viewer};
use super::{op, Body, Op};
use crate::api_labels as lab;

/// Labels and notes: a dead letter's, an error group's, and bulk labelling.
pub(super) fn triage(s: &mut Schemas) -> Vec<Op> {
    let fp = || path("fingerprint", string(), "Error group fingerprint.");
    let annotations = s.of::<lab::AnnotationsItem>();
    let label_body = s.of::<lab::LabelBody>();
    let note_body = s.of::<lab::NoteBody>();

    vec![
        op(
            Get,
            "/api/v1/dead-letters/{id}/labels",
            "getDeadLetterLabels",
            "triage",
            "A dead letter's labels and note, and its group's",
            Viewer,
        )
        .params([dl_id()])
        .ok(200, Body::Json(s.of::<lab::TriageItem>()))
        .errors(&[400, 404]),
        op(
            Post,
            "/api/v1/dead-letters/{id}/labels",
            "addDeadLetterLabel",
            "triage",
            "Add a label to a dead letter",
            Permission("annotate"),
        )
        .params([dl_id()])
        .body(label_body.clone(), true)
        .ok(200, Body::Json(annotations.clone()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/dead-letters/{id}/labels/remove",
            "removeDeadLetterLabel",
            "triage",
            "Remove a label from a dead letter",
            Permission("annotate"),
        )
        .params([dl_id()])
        .body(label_body.clone(), true)
        .ok(200, Body::Json(annotations.clone()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Put,
            "/api/v1/dead-letters/{id}/note",
            "setDeadLetterNote",
            "triage",
            "Set (`\"\"` clears) a dead letter's note",
            Permission("annotate"),
        )
        .params([dl_id()])
        .body(note_body.clone(), true)
        .ok(200, Body::Json(annotations.clone()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Get,
            "/api/v1/error-groups/{fingerprint}/labels",
            "getGroupLabels",
            "triage",
            "An error group's labels and note",
            Viewer,
        )
        .params([fp()])
        .ok(200, Body::Json(annotations.clone()))
        .errors(&[400, 404]),
        op(
            Post,
            "/api/v1/error-groups/{fingerprint}/labels",
            "addGroupLabel",
            "triage",
            "Add a label to an error group",
            Permission("annotate"),
        )
        .params([fp()])
        .body(label_body.clone(), true)
        .ok(200, Body::Json(annotations.clone()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/error-groups/{fingerprint}/labels/remove",
            "removeGroupLabel",
            "triage",
            "Remove a label from an error group",
            Permission("annotate"),
        )
        .params([fp()])
        .body(label_body, true)
        .ok(200, Body::Json(annotations.clone()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Put,
            "/api/v1/error-groups/{fingerprint}/note",
            "setGroupNote",
            "triage",
            "Set (`\"\"` clears) an error group's note",
            Permission("annotate"),
        )
        .params([fp()])
        .body(note_body, true)
        .ok(200, Body::Json(annotations))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/dead-letters/labels",
            "bulkLabel",
            "triage",
            "Add or remove one label on the selected dead letters",
            Permission("annotate"),
        )
        .body(s.of::<lab::BulkLabelBody>(), true)
        .ok(200, Body::Json(s.of::<lab::LabelOutcomeItem>()))
        .errors(&[400, 404, 409, 413, 422]),
    ]
}
