//! Schema-aware payloads (issue 11): records in the Schema Registry wire format (magic byte 0,
//! a 4-byte schema id, then the serialized value; [`wire`]) decoded for display with their
//! schema, fetched from a Confluent-compatible Schema Registry API or read from local schema
//! files ([`resolver`]), and decoded as Avro, Protobuf or JSON Schema ([`decode`]).
//!
//! Display only: the stored and replayed bytes never change ("bytes are sacred",
//! `docs/invariants.md`). A record whose schema cannot be had is shown as before (hex), with
//! the schema id and why. See `docs/payloads.md`.

pub mod decode;
pub mod resolver;
pub mod wire;

pub use decode::{Compiled, DecodedJson};
pub use resolver::{SchemaRegistryConfig, SchemaResolver, ValueSchema};

use serde::{Deserialize, Serialize};

/// The kind of a registry schema: the registry's `schemaType` (absent means Avro, the only
/// kind the first registries had).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SchemaType {
    #[serde(rename = "AVRO")]
    Avro,
    #[serde(rename = "PROTOBUF")]
    Protobuf,
    #[serde(rename = "JSON")]
    Json,
}

impl SchemaType {
    /// The registry's name for it: `AVRO`, `PROTOBUF` or `JSON`.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Protobuf => "PROTOBUF",
            SchemaType::Json => "JSON",
        }
    }
}
