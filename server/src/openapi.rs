//! The API contract: an OpenAPI 3.1 document of every `/api/v1` operation, built from the
//! handlers' own request and response types (their `utoipa::ToSchema` derives), served at
//! `GET /api/v1/openapi.json` and rendered as a self-contained HTML page at `GET /api/docs`
//! (no script, no stylesheet from elsewhere: redrive's sites often reach no CDN).
//!
//! The operations are listed once, in [`operations`]: method, path, who may call it, its
//! parameters, its body and its answers. Every operation documents the refusals it can give
//! with the one error body ([`crate::api_error::ErrorBody`]); 401 carries `WWW-Authenticate`
//! and 503 `Retry-After`. The CI runs schemathesis against the served document
//! (`server/tests/it/openapi.rs`): a 5xx, or an answer outside the document, fails it.
//! `docs/api.md` describes the contract.

use std::sync::OnceLock;

use axum::http::{header, HeaderValue};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use utoipa::openapi::path::{
    HttpMethod, Operation, OperationBuilder, Parameter, ParameterBuilder, ParameterIn,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{
    ArrayBuilder, ComponentsBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, SchemaType,
    Type,
};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, HeaderBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathsBuilder, Ref, RefOr,
    Required, ResponseBuilder, ResponsesBuilder,
};
use utoipa::ToSchema;

use crate::api::AppState;

/// Where the document is served.
pub const DOCUMENT_PATH: &str = "/api/v1/openapi.json";
/// Where its HTML rendering is served.
pub const DOCS_PATH: &str = "/api/docs";

/// The routes of this module (any signed-in caller, like every API route).
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(DOCUMENT_PATH, get(document))
        .route(DOCS_PATH, get(docs_page))
        .with_state(state)
}

/// `GET /api/v1/openapi.json`: the document, JSON.
pub async fn document() -> Response {
    let mut res = json_text().to_string().into_response();
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

/// `GET /api/docs`: the document as one HTML page (operations, parameters, bodies, answers,
/// schemas); links to the JSON.
pub async fn docs_page() -> Html<String> {
    Html(crate::openapi_page::render(spec()))
}

/// The document, built once.
pub fn spec() -> &'static OpenApi {
    static SPEC: OnceLock<OpenApi> = OnceLock::new();
    SPEC.get_or_init(build)
}

fn json_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| spec().to_pretty_json().unwrap_or_else(|_| "{}".into()))
}

// ---------------------------------------------------------------------------------------------
// Building blocks

/// The schemas the operations refer to, collected as they are used.
#[derive(Default)]
struct Schemas(Vec<(String, RefOr<Schema>)>);

impl Schemas {
    /// A reference to `T`, registering `T` and every schema it refers to.
    fn of<T: ToSchema>(&mut self) -> RefOr<Schema> {
        T::schemas(&mut self.0);
        self.0.push((T::name().into_owned(), T::schema()));
        Ref::from_schema_name(T::name()).into()
    }
}

/// Who may call an operation (shown in its description).
#[derive(Clone, Copy)]
enum Who {
    /// Any signed-in caller (a viewer reads everything).
    Viewer,
    /// Needs this permission (`docs/access.md`).
    Permission(&'static str),
    /// The caller's own account.
    Own,
}

/// What a successful answer carries. (A few dozen live while the document is built, once.)
#[allow(clippy::large_enum_variant)]
enum Body {
    Json(RefOr<Schema>),
    /// Bytes of the given media type (downloads, CSV, JSON Lines).
    Bytes(&'static str),
}

/// One operation of the table.
struct Op {
    method: HttpMethod,
    path: &'static str,
    id: &'static str,
    tag: &'static str,
    summary: &'static str,
    who: Who,
    params: Vec<Parameter>,
    /// The JSON body, and whether it is required.
    body: Option<(RefOr<Schema>, bool)>,
    /// The successful answers (status, body).
    ok: Vec<(u16, Body)>,
    /// Refusals besides 401, 403 and 503, which every operation can give.
    errors: &'static [u16],
}

fn op(
    method: HttpMethod,
    path: &'static str,
    id: &'static str,
    tag: &'static str,
    summary: &'static str,
    who: Who,
) -> Op {
    Op {
        method,
        path,
        id,
        tag,
        summary,
        who,
        params: Vec::new(),
        body: None,
        ok: Vec::new(),
        errors: &[400],
    }
}

impl Op {
    fn params(mut self, p: impl IntoIterator<Item = Parameter>) -> Self {
        self.params.extend(p);
        self
    }
    fn body(mut self, schema: RefOr<Schema>, required: bool) -> Self {
        self.body = Some((schema, required));
        self
    }
    fn ok(mut self, status: u16, body: Body) -> Self {
        self.ok.push((status, body));
        self
    }
    fn errors(mut self, e: &'static [u16]) -> Self {
        self.errors = e;
        self
    }
}

fn string() -> Schema {
    ObjectBuilder::new().schema_type(Type::String).into()
}

fn integer(min: Option<f64>, max: Option<f64>) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::Int64,
        )))
        .minimum(min)
        .maximum(max)
        .into()
}

fn enumeration(values: &[&str]) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.iter().copied()))
        .into()
}

fn boolean_text() -> Schema {
    enumeration(&["true", "false"])
}

fn query(name: &str, schema: Schema, description: &str) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Query)
        .required(Required::False)
        .schema(Some(schema))
        .description(Some(description))
        .build()
}

fn path(name: &str, schema: Schema, description: &str) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .schema(Some(schema))
        .description(Some(description))
        .build()
}

/// An id in the path, with an example the seeded test store holds (schemathesis starts
/// from it).
fn id_path(name: &str, what: &str) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .schema(Some(integer(None, None)))
        .description(Some(what))
        .example(Some(serde_json::json!(1)))
        .build()
}

/// The dead-letter list's filter parameters (`core/src/filter.rs`; `docs/triage.md`).
fn filter_params() -> Vec<Parameter> {
    vec![
        query(
            "fingerprint",
            string(),
            "Error group: 16 lowercase hex characters.",
        ),
        query("error_class", string(), "Exact error class."),
        query("q", string(), "Words searched in the error message."),
        query("source_topic", string(), "Exact source topic."),
        query("dlq_topic", string(), "Exact DLQ topic."),
        query("consumer_group", string(), "Exact consumer group."),
        query(
            "status",
            enumeration(&[
                "new",
                "replay_pending",
                "replayed",
                "replay_failed",
                "re_failed",
                "deleted",
            ]),
            "Status.",
        ),
        query(
            "from",
            string(),
            "Dead-lettered at or after: epoch ms, RFC 3339, or `YYYY-MM-DD[THH:MM[:SS]]` (UTC).",
        ),
        query(
            "to",
            string(),
            "Dead-lettered before (the forms of `from`).",
        ),
        query(
            "label",
            string(),
            "Has this triage label (own or its group's).",
        ),
        query("unlabelled", boolean_text(), "Without any label."),
        query("came_back", boolean_text(), "Came back after a replay."),
        query(
            "tier",
            enumeration(&["transient", "manual", "poison", "archive", "unsorted"]),
            "Automation tier (`docs/automation.md`).",
        ),
    ]
}

fn limit(max: i64) -> Parameter {
    query(
        "limit",
        integer(Some(1.0), Some(max as f64)),
        &format!("Most items to return, 1 to {max}."),
    )
}

/// `{"items": [item]}` (`api_users::Items`).
fn items_of(item: RefOr<Schema>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .property("items", ArrayBuilder::new().items(item))
        .required("items")
        .into()
}

fn any_object() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::Object))
        .into()
}

fn one_of(a: RefOr<Schema>, b: RefOr<Schema>) -> RefOr<Schema> {
    OneOfBuilder::new().item(a).item(b).into()
}

// ---------------------------------------------------------------------------------------------
// The operations

/// Every `/api/v1` operation.
fn operations(s: &mut Schemas) -> Vec<Op> {
    use crate::{
        api, api_actions as act, api_approvals as appr, api_archive as arch,
        api_automation as auto, api_labels as lab, api_quarantine as quar, api_users as usr,
        api_versions as ver,
    };
    use HttpMethod::{Delete, Get, Post, Put};
    use Who::{Own, Permission, Viewer};

    let dl_id = || id_path("id", "Dead-letter id.");
    let job_id = || path("job_id", string(), "Replay job id (a UUID).");
    let req_id = || id_path("id", "Approval request id.");
    let fp = || path("fingerprint", string(), "Error group fingerprint.");
    let user = || path("name", string(), "User name.");
    let rule = || path("name", string(), "Transient rule name.");
    let pending = s.of::<appr::Pending>();
    let annotations = s.of::<lab::AnnotationsItem>();
    let job = s.of::<act::JobItem>();
    let request = s.of::<appr::RequestItem>();
    let user_item = s.of::<usr::UserItem>();
    let token = s.of::<usr::TokenItem>();
    let label_body = s.of::<lab::LabelBody>();
    let note_body = s.of::<lab::NoteBody>();
    let decision = s.of::<appr::DecisionBody>();
    let pause_body = s.of::<auto::PauseBody>();
    let job_state = s.of::<act::JobStateBody>();

    vec![
        // Dead letters
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
        // Actions
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
        // Labels and notes
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
        // Edited versions
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
        // Approvals
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
        // Retention and quarantine
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
        // Automation
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
        // Users, sessions, tokens
        op(
            Get,
            "/api/v1/users",
            "listUsers",
            "users",
            "Users, by name",
            Permission("manage_users"),
        )
        .ok(200, Body::Json(items_of(user_item.clone()))),
        op(
            Post,
            "/api/v1/users",
            "createUser",
            "users",
            "Add a user",
            Permission("manage_users"),
        )
        .body(s.of::<usr::NewUserBody>(), true)
        .ok(201, Body::Json(user_item.clone()))
        .errors(&[400, 409, 413, 422]),
        op(
            Post,
            "/api/v1/users/{name}/disable",
            "disableUser",
            "users",
            "Disable a user (ends their sessions and tokens)",
            Permission("manage_users"),
        )
        .params([user()])
        .ok(200, Body::Json(user_item.clone()))
        .errors(&[400, 404, 409, 422]),
        op(
            Post,
            "/api/v1/users/{name}/enable",
            "enableUser",
            "users",
            "Enable a user",
            Permission("manage_users"),
        )
        .params([user()])
        .ok(200, Body::Json(user_item.clone()))
        .errors(&[400, 404, 409, 422]),
        op(
            Post,
            "/api/v1/users/{name}/role",
            "setUserRole",
            "users",
            "Change a user's role",
            Permission("manage_users"),
        )
        .params([user()])
        .body(s.of::<usr::RoleBody>(), true)
        .ok(200, Body::Json(user_item))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/users/{name}/password",
            "resetPassword",
            "users",
            "Reset a user's password (ends their sessions)",
            Permission("manage_users"),
        )
        .params([user()])
        .body(s.of::<usr::PasswordBody>(), true)
        .ok(200, Body::Json(s.of::<usr::PasswordSet>()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/account/password",
            "changeOwnPassword",
            "account",
            "Change one's own password (ends one's other sessions)",
            Own,
        )
        .body(s.of::<usr::ChangePasswordBody>(), true)
        .ok(200, Body::Json(s.of::<usr::PasswordSet>()))
        .errors(&[400, 409, 413, 422]),
        op(
            Get,
            "/api/v1/sessions",
            "listSessions",
            "account",
            "One's own sessions",
            Own,
        )
        .ok(200, Body::Json(items_of(s.of::<usr::SessionItem>()))),
        op(
            Post,
            "/api/v1/sessions/{handle}/end",
            "endSession",
            "account",
            "End one of one's own sessions",
            Own,
        )
        .params([path("handle", string(), "Session handle (from the list).")])
        .ok(200, Body::Json(s.of::<usr::Ended>()))
        .errors(&[400, 404, 422]),
        op(
            Post,
            "/api/v1/sessions/end-others",
            "endOtherSessions",
            "account",
            "End every other session of one's own",
            Own,
        )
        .ok(200, Body::Json(s.of::<usr::Ended>()))
        .errors(&[400]),
        op(
            Get,
            "/api/v1/tokens",
            "listTokens",
            "account",
            "API tokens: one's own; `user` or `all=true` needs `manage_users`",
            Own,
        )
        .params([
            query("user", string(), "Another user's tokens."),
            query("all", boolean_text(), "Every user's tokens."),
        ])
        .ok(200, Body::Json(items_of(token.clone())))
        .errors(&[400, 404]),
        op(
            Post,
            "/api/v1/tokens",
            "createToken",
            "account",
            "Create an API token (shown once in `token`)",
            Own,
        )
        .body(s.of::<usr::NewTokenBody>(), false)
        .ok(201, Body::Json(token.clone()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/tokens/{id}/revoke",
            "revokeToken",
            "account",
            "Revoke an API token",
            Own,
        )
        .params([id_path("id", "Token id.")])
        .ok(200, Body::Json(token.clone()))
        .errors(&[400, 404, 409]),
        op(
            Delete,
            "/api/v1/tokens/{id}",
            "deleteToken",
            "account",
            "Revoke an API token (the same as `POST .../revoke`)",
            Own,
        )
        .params([id_path("id", "Token id.")])
        .ok(200, Body::Json(token))
        .errors(&[400, 404, 409]),
    ]
}

// ---------------------------------------------------------------------------------------------
// The document

fn error_response(s: &mut Schemas, status: u16) -> utoipa::openapi::Response {
    let reason = axum::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|c| c.canonical_reason())
        .unwrap_or("Refused");
    let mut r = ResponseBuilder::new()
        .description(format!("{reason}: the one error body."))
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(s.of::<crate::api_error::ErrorBody>()))
                .build(),
        );
    if status == 401 {
        r = r.header(
            "WWW-Authenticate",
            HeaderBuilder::new()
                .schema(string())
                .description(Some("`Bearer realm=\"redrive\"`"))
                .build(),
        );
    }
    if matches!(status, 429 | 503) {
        r = r.header(
            "Retry-After",
            HeaderBuilder::new()
                .schema(integer(Some(1.0), None))
                .description(Some("Seconds to wait before trying again."))
                .build(),
        );
    }
    r.build()
}

fn operation(s: &mut Schemas, o: Op) -> Operation {
    let who = match o.who {
        Who::Viewer => "Any signed-in caller.".to_string(),
        Who::Permission(p) => format!(
            "Needs the `{p}` permission (`docs/access.md`); without it 403, audited `denied`."
        ),
        Who::Own => "The caller's own account (not with a read-only token when it changes \
                     something)."
            .to_string(),
    };
    let mut responses = ResponsesBuilder::new();
    for (status, body) in o.ok {
        let content = match body {
            Body::Json(schema) => (
                "application/json",
                ContentBuilder::new().schema(Some(schema)).build(),
            ),
            Body::Bytes(media) => (
                media,
                ContentBuilder::new()
                    .schema(Some(
                        ObjectBuilder::new()
                            .schema_type(Type::String)
                            .content_media_type(media)
                            .build(),
                    ))
                    .build(),
            ),
        };
        responses = responses.response(
            status.to_string(),
            ResponseBuilder::new()
                .description("Done.")
                .content(content.0, content.1)
                .build(),
        );
    }
    let mut statuses: Vec<u16> = o.errors.to_vec();
    statuses.extend([401, 403, 405, 503]);
    statuses.sort_unstable();
    statuses.dedup();
    for status in statuses {
        responses = responses.response(status.to_string(), error_response(s, status));
    }
    let mut b = OperationBuilder::new()
        .operation_id(Some(o.id))
        .tag(o.tag)
        .summary(Some(o.summary))
        .description(Some(who))
        .parameters(Some(o.params))
        .responses(responses.build());
    if let Some((schema, required)) = o.body {
        b = b.request_body(Some(
            RequestBodyBuilder::new()
                .content(
                    "application/json",
                    ContentBuilder::new().schema(Some(schema)).build(),
                )
                .required(Some(if required {
                    Required::True
                } else {
                    Required::False
                }))
                .build(),
        ));
    }
    b.build()
}

fn build() -> OpenApi {
    let mut s = Schemas::default();
    let ops = operations(&mut s);
    let mut paths = PathsBuilder::new().build();
    let mut tags: Vec<&str> = Vec::new();
    for o in ops {
        if !tags.contains(&o.tag) {
            tags.push(o.tag);
        }
        let (method, path) = (o.method.clone(), o.path);
        let operation = operation(&mut s, o);
        paths.add_path_operation(path, vec![method], operation);
    }
    let mut components = ComponentsBuilder::new().security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("rdv_...")
                .description(Some(
                    "An API token (`redrive token create`, or /account): `Authorization: \
                     Bearer rdv_...` (`docs/access.md`).",
                ))
                .build(),
        ),
    );
    for (name, schema) in s.0 {
        components = components.schema(name, schema);
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("redrive API")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "The JSON API of redrive, a dead letter queue manager for Apache Kafka \
                     (`docs/api.md`). Every refusal answers the one error body \
                     `{\"error\", \"code\", \"status\"}`.",
                ))
                .build(),
        )
        .paths(paths)
        .components(Some(components.build()))
        .security(Some(vec![SecurityRequirement::new(
            "bearer",
            Vec::<String>::new(),
        )]))
        .tags(Some(
            tags.into_iter()
                .map(|t| utoipa::openapi::tag::TagBuilder::new().name(t).build())
                .collect::<Vec<_>>(),
        ))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `/api/v1` route the server's modules declare is in the document (a route added
    /// without its operation fails here, before schemathesis would miss it).
    #[test]
    fn every_api_route_is_documented() {
        let sources = [
            include_str!("router.rs"),
            include_str!("api_actions.rs"),
            include_str!("api_approvals.rs"),
            include_str!("api_archive.rs"),
            include_str!("api_automation.rs"),
            include_str!("api_labels.rs"),
            include_str!("api_quarantine.rs"),
            include_str!("api_users.rs"),
            include_str!("api_versions.rs"),
            include_str!("export.rs"),
        ];
        let doc = spec();
        let re = regex::Regex::new(r#"\.route\(\s*"(/api/v1/[^"]+)""#).unwrap();
        let mut n = 0;
        for src in sources {
            for c in re.captures_iter(src) {
                let p = &c[1];
                if p.contains('*') || p == DOCUMENT_PATH {
                    continue;
                }
                n += 1;
                assert!(
                    doc.paths.paths.contains_key(p),
                    "{p} is not in the document"
                );
            }
        }
        assert!(n > 50, "found only {n} routes");
        let json = json_text();
        assert!(json.contains("\"openapi\": \"3.1.0\""), "{}", &json[..200]);
    }
}
