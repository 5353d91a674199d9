//! The building blocks of the operations: the schemas they refer to ([`Schemas`]), and the
//! schema and parameter helpers (strings, integers, enumerations, query and path parameters,
//! the dead-letter filter, list bodies).

use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{
    ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, SchemaType, Type,
};
use utoipa::openapi::{Ref, RefOr, Required};
use utoipa::ToSchema;

/// The schemas the operations refer to, collected as they are used.
#[derive(Default)]
pub(super) struct Schemas(pub(super) Vec<(String, RefOr<Schema>)>);

impl Schemas {
    /// A reference to `T`, registering `T` and every schema it refers to.
    pub(super) fn of<T: ToSchema>(&mut self) -> RefOr<Schema> {
        T::schemas(&mut self.0);
        self.0.push((T::name().into_owned(), T::schema()));
        Ref::from_schema_name(T::name()).into()
    }
}

pub(super) fn string() -> Schema {
    ObjectBuilder::new().schema_type(Type::String).into()
}

pub(super) fn integer(min: Option<f64>, max: Option<f64>) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::Int64,
        )))
        .minimum(min)
        .maximum(max)
        .into()
}

pub(super) fn enumeration(values: &[&str]) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.iter().copied()))
        .into()
}

pub(super) fn boolean_text() -> Schema {
    enumeration(&["true", "false"])
}

pub(super) fn query(name: &str, schema: Schema, description: &str) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Query)
        .required(Required::False)
        .schema(Some(schema))
        .description(Some(description))
        .build()
}

pub(super) fn path(name: &str, schema: Schema, description: &str) -> Parameter {
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
pub(super) fn id_path(name: &str, what: &str) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .schema(Some(integer(None, None)))
        .description(Some(what))
        .example(Some(serde_json::json!(1)))
        .build()
}

/// A dead letter's id in the path (`{id}`).
pub(super) fn dl_id() -> Parameter {
    id_path("id", "Dead-letter id.")
}

/// The dead-letter list's filter parameters (`core/src/filter.rs`; `docs/triage.md`).
pub(super) fn filter_params() -> Vec<Parameter> {
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
        query("replay_job", string(), "Taken by this replay job (its id)."),
        query(
            "came_back_from_job",
            string(),
            "Came back after this replay job published it (`docs/replay.md`, \"Outcome\").",
        ),
    ]
}

pub(super) fn limit(max: i64) -> Parameter {
    query(
        "limit",
        integer(Some(1.0), Some(max as f64)),
        &format!("Most items to return, 1 to {max}."),
    )
}

/// `{"items": [item]}` (`api_users::Items`).
pub(super) fn items_of(item: RefOr<Schema>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .property("items", ArrayBuilder::new().items(item))
        .required("items")
        .into()
}

pub(super) fn any_object() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::Object))
        .into()
}

pub(super) fn one_of(a: RefOr<Schema>, b: RefOr<Schema>) -> RefOr<Schema> {
    OneOfBuilder::new().item(a).item(b).into()
}
