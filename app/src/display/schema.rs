//! A record value in the Schema Registry wire format, as the detail page shows it: the schema
//! id and kind, and the value decoded into JSON (within the value's text cap), or why it could
//! not be (then the page shows the raw bytes as hex, as for any binary value). The decoding is
//! `redrive_core::schema` (server only); this is the shown result, the same on both sides.

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::caps;
use super::visible::Shown;

/// What the page shows of a wire-format value (`docs/payloads.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaShown {
    /// The schema id in the record's header (bytes 1..5).
    pub schema_id: u32,
    /// `AVRO`, `PROTOBUF` or `JSON` when the schema was found.
    pub schema_type: Option<String>,
    /// Protobuf: the full name of the message decoded.
    pub message: Option<String>,
    /// The decoded value as indented JSON, cut at the value's text cap.
    pub decoded: Option<Shown>,
    /// Why there is no decoded value: "could not fetch (…)" or "does not decode (…)".
    pub problem: Option<String>,
}

impl SchemaShown {
    /// The badge line: `schema id 7 (AVRO)`.
    pub fn label(&self) -> String {
        match &self.schema_type {
            Some(t) => format!("schema id {} ({t})", self.schema_id),
            None => format!("schema id {}", self.schema_id),
        }
    }
}

/// The shown form of a decoded (or undecodable) value, its text within
/// [`caps::VALUE_TEXT_BYTES`] and its reason within [`caps::ERROR_MESSAGE_BYTES`].
#[cfg(feature = "ssr")]
pub fn shown(v: redrive_core::schema::ValueSchema) -> SchemaShown {
    use super::json::pretty_json;
    use super::visible::{shown as clip, Lines};
    let (decoded, message, problem) = match v.decoded {
        Ok(d) => {
            let text = if d.cut {
                // The JSON was cut while written: not a whole document, shown as text.
                let mut s = clip(&d.json, caps::VALUE_TEXT_BYTES, Lines::Keep);
                s.cut = true;
                s
            } else {
                pretty_json(d.json.as_bytes(), caps::VALUE_TEXT_BYTES)
                    .unwrap_or_else(|| clip(&d.json, caps::VALUE_TEXT_BYTES, Lines::Keep))
            };
            (Some(text), d.message, None)
        }
        Err(why) => (
            None,
            None,
            Some(clip(&why, caps::ERROR_MESSAGE_BYTES, Lines::Mark).text),
        ),
    };
    SchemaShown {
        schema_id: v.schema_id,
        schema_type: v.schema_type.map(|t| t.as_str().to_string()),
        message,
        decoded,
        problem,
    }
}
