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
//!
//! The files: this one serves and builds the document; `params.rs` holds the schema and
//! parameter helpers; each `ops_*.rs` lists the operations of one area of the API, which
//! [`operations`] gathers in order.

mod ops_actions;
mod ops_approvals;
mod ops_automation;
mod ops_dead_letters;
mod ops_retention;
mod ops_triage;
mod ops_users;
mod params;

use std::sync::OnceLock;

use axum::http::{header, HeaderValue};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use utoipa::openapi::path::{HttpMethod, Operation, OperationBuilder, Parameter};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ComponentsBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, HeaderBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathsBuilder, RefOr,
    Required, ResponseBuilder, ResponsesBuilder,
};

use crate::api::AppState;
use params::{integer, string, Schemas};

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

// ---------------------------------------------------------------------------------------------
// The operations

/// Every `/api/v1` operation.
///
/// Gathered area by area from the `ops_*.rs` files, in the document's order.
fn operations(s: &mut Schemas) -> Vec<Op> {
    let mut ops = ops_dead_letters::dead_letters(s);
    ops.extend(ops_actions::actions(s));
    ops.extend(ops_triage::triage(s));
    ops.extend(ops_dead_letters::versions(s));
    ops.extend(ops_approvals::approvals(s));
    ops.extend(ops_retention::retention(s));
    ops.extend(ops_automation::automation(s));
    ops.extend(ops_users::users(s));
    ops
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
            include_str!("../router.rs"),
            include_str!("../api_actions.rs"),
            include_str!("../api_approvals.rs"),
            include_str!("../api_archive.rs"),
            include_str!("../api_automation.rs"),
            include_str!("../api_labels.rs"),
            include_str!("../api_quarantine.rs"),
            include_str!("../api_users.rs"),
            include_str!("../api_versions.rs"),
            include_str!("../export.rs"),
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
