//! Schemas compiled for decoding, and the decoding of one wire-format payload into JSON text.
//!
//! - Avro: the payload is one datum in Avro's binary encoding, read with the writer's schema
//!   (the Apache Avro crate). Shown as JSON with the record's fields in schema order, union
//!   values unwrapped (not Avro's `{"type": value}` JSON encoding), `bytes`/`fixed` as arrays
//!   of byte values, logical types as their underlying number.
//! - Protobuf: the payload is the message indexes, then the message (see [`super::wire`]). The
//!   schema's `.proto` text is compiled at run time (protox, with the well-known
//!   `google/protobuf/*.proto` types built in) and the message decoded with prost-reflect,
//!   written in the Protobuf JSON mapping (field names in lowerCamelCase, 64-bit integers as
//!   strings, enums by name, default values omitted).
//! - JSON Schema: the payload is already JSON text; it is checked to be JSON and shown as is.
//!
//! The output is cut at a byte cap while it is written (never built whole and cut after).

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use apache_avro::types::Value as AvroValue;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::wire;
use super::SchemaType;

/// A schema ready to decode with: parsed (Avro) or compiled (Protobuf) once, then shared.
#[derive(Debug, Clone)]
pub enum Compiled {
    /// The writer's schema and the named schemas it references.
    Avro {
        schema: Box<apache_avro::Schema>,
        references: Vec<apache_avro::Schema>,
    },
    /// The compiled file (and its imports) and the file's name in the pool.
    Protobuf {
        pool: prost_reflect::DescriptorPool,
        file: String,
    },
    /// JSON Schema: nothing to compile, the payload is JSON.
    Json,
}

/// Name under which a registry schema's own `.proto` text is compiled (its imports keep their
/// own names, the `name` of each reference).
pub const ROOT_PROTO: &str = "redrive_schema_root.proto";

/// Compiles `schema` (the registry's `schema` string) of type `kind`. `references` are the
/// referenced schemas' texts by reference name: for Avro the named types (records, enums,
/// fixed) the schema uses; for Protobuf the imported files, keyed by import path.
///
/// # Errors
/// The parser's or compiler's message when the text is not a valid schema of that type.
pub fn compile(
    kind: SchemaType,
    schema: &str,
    references: &[(String, String)],
) -> Result<Compiled, String> {
    match kind {
        SchemaType::Avro => {
            if references.is_empty() {
                let schema = apache_avro::Schema::parse_str(schema)
                    .map_err(|e| format!("invalid Avro schema: {e}"))?;
                Ok(Compiled::Avro {
                    schema: Box::new(schema),
                    references: Vec::new(),
                })
            } else {
                let (schema, references) = apache_avro::Schema::parse_str_with_list(
                    schema,
                    references.iter().map(|(_, text)| text.as_str()),
                )
                .map_err(|e| format!("invalid Avro schema: {e}"))?;
                Ok(Compiled::Avro {
                    schema: Box::new(schema),
                    references,
                })
            }
        }
        SchemaType::Protobuf => {
            let mut files: HashMap<String, String> = references.iter().cloned().collect();
            files.insert(ROOT_PROTO.to_string(), schema.to_string());
            compile_proto(ROOT_PROTO, Box::new(MemoryFiles(Arc::new(files))))
        }
        SchemaType::Json => Ok(Compiled::Json),
    }
}

/// Compiles the `.proto` file `name` found through `files` (then the well-known types).
///
/// # Errors
/// The compiler's message (syntax error, unknown import or type).
pub fn compile_proto(
    name: &str,
    files: Box<dyn protox::file::FileResolver>,
) -> Result<Compiled, String> {
    let mut resolver = protox::file::ChainFileResolver::new();
    resolver.add(files);
    resolver.add(protox::file::GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler
        .open_file(name)
        .map_err(|e| format!("invalid Protobuf schema: {e}"))?;
    Ok(Compiled::Protobuf {
        pool: compiler.descriptor_pool(),
        file: name.to_string(),
    })
}

/// `.proto` sources held in memory, by import path.
struct MemoryFiles(Arc<HashMap<String, String>>);

impl protox::file::FileResolver for MemoryFiles {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        match self.0.get(name) {
            Some(source) => match serialized_descriptor(name, source) {
                Some(descriptor) => Ok(protox::file::File::from_file_descriptor_proto(descriptor)),
                None => protox::file::File::from_source(name, source),
            },
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// `text` as a base64 `FileDescriptorProto` (the form Confluent's Protobuf serializers
/// register, and a registry returns for `?format=serialized`), renamed `name`; `None` when it
/// is not one (then it is `.proto` source).
fn serialized_descriptor(name: &str, text: &str) -> Option<prost_types::FileDescriptorProto> {
    use base64::Engine as _;
    use prost::Message as _;
    let text = text.trim();
    if text.is_empty() || text.contains(|c: char| c.is_ascii_whitespace() || c == ';') {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    let mut descriptor = prost_types::FileDescriptorProto::decode(bytes.as_slice()).ok()?;
    descriptor.name = Some(name.to_string());
    Some(descriptor)
}

/// A payload decoded into JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedJson {
    /// Compact JSON (the first `max` bytes of it when `cut`).
    pub json: String,
    /// True when the JSON was longer than the cap and only its beginning is here (then it is
    /// not a complete JSON document).
    pub cut: bool,
    /// Protobuf: the full name of the message decoded (`pkg.Outer.Inner`).
    pub message: Option<String>,
}

/// Decodes `payload` (the bytes after the 5-byte header) with `schema`, writing at most `max`
/// bytes of JSON.
///
/// # Errors
/// Why the payload does not decode with this schema: malformed Avro datum or Protobuf message,
/// message indexes naming no message, bytes left over after an Avro datum, invalid JSON.
pub fn decode(schema: &Compiled, payload: &[u8], max: usize) -> Result<DecodedJson, String> {
    match schema {
        Compiled::Avro { schema, references } => {
            let mut reader = payload;
            let value = if references.is_empty() {
                apache_avro::from_avro_datum(schema, &mut reader, None)
            } else {
                apache_avro::from_avro_datum_schemata(
                    schema,
                    references.iter().collect(),
                    &mut reader,
                    None,
                )
            }
            .map_err(|e| format!("not an Avro datum of this schema: {e}"))?;
            if !reader.is_empty() {
                return Err(format!(
                    "not an Avro datum of this schema: {} bytes left after the datum",
                    reader.len()
                ));
            }
            let (json, cut) = write_capped(&AvroJson(&value), max)?;
            Ok(DecodedJson {
                json,
                cut,
                message: None,
            })
        }
        Compiled::Protobuf { pool, file } => {
            let (indexes, bytes) = wire::message_indexes(payload)?;
            let desc = message_at(pool, file, &indexes)?;
            let message = prost_reflect::DynamicMessage::decode(desc.clone(), bytes)
                .map_err(|e| format!("not a {} message: {e}", desc.full_name()))?;
            let (json, cut) = write_capped(&message, max)?;
            Ok(DecodedJson {
                json,
                cut,
                message: Some(desc.full_name().to_string()),
            })
        }
        Compiled::Json => {
            serde_json::from_slice::<serde::de::IgnoredAny>(payload)
                .map_err(|e| format!("not JSON: {e}"))?;
            let text = std::str::from_utf8(payload).map_err(|e| format!("not UTF-8: {e}"))?;
            let cut = text.len() > max;
            let mut end = text.len().min(max);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            Ok(DecodedJson {
                json: text[..end].to_string(),
                cut,
                message: None,
            })
        }
    }
}

/// The message the indexes name in `file`: the first index into its top-level messages, each
/// next one into the nested messages of the one before.
fn message_at(
    pool: &prost_reflect::DescriptorPool,
    file: &str,
    indexes: &[usize],
) -> Result<prost_reflect::MessageDescriptor, String> {
    let file = pool
        .get_file_by_name(file)
        .ok_or_else(|| format!("the schema has no file {file}"))?;
    let mut found: Option<prost_reflect::MessageDescriptor> = None;
    for &i in indexes {
        let next = match &found {
            None => file.messages().nth(i),
            Some(m) => m.child_messages().nth(i),
        };
        found =
            Some(next.ok_or_else(|| {
                format!("message indexes {indexes:?} name no message of the schema")
            })?);
    }
    found.ok_or_else(|| "no message index".to_string())
}

/// A writer that takes at most `left` more bytes, then refuses (which stops serde_json).
struct Capped {
    out: Vec<u8>,
    left: usize,
    cut: bool,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.left {
            self.out.extend_from_slice(&buf[..self.left]);
            self.left = 0;
            self.cut = true;
            return Err(std::io::Error::other("display cap reached"));
        }
        self.out.extend_from_slice(buf);
        self.left -= buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `value` as compact JSON, at most `max` bytes, and whether it was cut.
fn write_capped<T: Serialize>(value: &T, max: usize) -> Result<(String, bool), String> {
    let mut w = Capped {
        out: Vec::new(),
        left: max,
        cut: false,
    };
    match serde_json::to_writer(&mut w, value) {
        Ok(()) => {}
        Err(_) if w.cut => {}
        Err(e) => return Err(format!("cannot be shown as JSON: {e}")),
    }
    // A cut can split a UTF-8 sequence: keep the valid prefix.
    let text = match String::from_utf8(w.out) {
        Ok(s) => s,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
    };
    Ok((text, w.cut))
}

/// An Avro value written as JSON, record fields in schema order.
struct AvroJson<'a>(&'a AvroValue);

impl Serialize for AvroJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            AvroValue::Null => s.serialize_unit(),
            AvroValue::Boolean(b) => s.serialize_bool(*b),
            AvroValue::Int(i) | AvroValue::Date(i) | AvroValue::TimeMillis(i) => {
                s.serialize_i32(*i)
            }
            AvroValue::Long(l)
            | AvroValue::TimeMicros(l)
            | AvroValue::TimestampMillis(l)
            | AvroValue::TimestampMicros(l)
            | AvroValue::TimestampNanos(l)
            | AvroValue::LocalTimestampMillis(l)
            | AvroValue::LocalTimestampMicros(l)
            | AvroValue::LocalTimestampNanos(l) => s.serialize_i64(*l),
            AvroValue::Float(f) => s.serialize_f32(*f),
            AvroValue::Double(d) => s.serialize_f64(*d),
            AvroValue::Bytes(b) | AvroValue::Fixed(_, b) => s.collect_seq(b.iter()),
            AvroValue::String(t) | AvroValue::Enum(_, t) => s.serialize_str(t),
            AvroValue::Union(_, inner) => AvroJson(inner).serialize(s),
            AvroValue::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&AvroJson(item))?;
                }
                seq.end()
            }
            AvroValue::Map(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, &AvroJson(v))?;
                }
                map.end()
            }
            AvroValue::Record(fields) => {
                let mut map = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(k, &AvroJson(v))?;
                }
                map.end()
            }
            AvroValue::Uuid(u) => s.serialize_str(&u.to_string()),
            AvroValue::Decimal(d) => {
                let bytes: Vec<u8> = d.try_into().map_err(serde::ser::Error::custom)?;
                s.collect_seq(bytes.iter())
            }
            AvroValue::BigDecimal(d) => s.serialize_str(&d.to_string()),
            AvroValue::Duration(d) => {
                let mut map = s.serialize_map(Some(3))?;
                map.serialize_entry("months", &u32::from(d.months()))?;
                map.serialize_entry("days", &u32::from(d.days()))?;
                map.serialize_entry("millis", &u32::from(d.millis()))?;
                map.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER_AVSC: &str = r#"{"type":"record","name":"User","namespace":"demo",
        "fields":[{"name":"name","type":"string"},{"name":"age","type":"int"},
                  {"name":"email","type":["null","string"],"default":null}]}"#;

    #[test]
    fn avro_fields_in_schema_order() {
        let schema = compile(SchemaType::Avro, USER_AVSC, &[]).unwrap();
        // name "ada" (len 3 → zig-zag 6), age 36 (72), union branch 1 (2), "a@b" (6).
        let payload = [6, b'a', b'd', b'a', 72, 2, 6, b'a', b'@', b'b'];
        let d = decode(&schema, &payload, 1024).unwrap();
        assert_eq!(d.json, r#"{"name":"ada","age":36,"email":"a@b"}"#);
        assert!(!d.cut);
        let cut = decode(&schema, &payload, 10).unwrap();
        assert_eq!((cut.json.as_str(), cut.cut), (r#"{"name":"a"#, true));
    }

    #[test]
    fn avro_garbage_is_an_error() {
        let schema = compile(SchemaType::Avro, USER_AVSC, &[]).unwrap();
        assert!(decode(&schema, &[0xff], 1024).is_err());
        let trailing = [2, b'a', 2, 0, 9, 9];
        assert!(decode(&schema, &trailing, 1024)
            .unwrap_err()
            .contains("left after"));
        assert!(compile(SchemaType::Avro, "{not a schema", &[]).is_err());
    }

    #[test]
    fn protobuf_message_indexes_pick_the_message() {
        let proto = r#"syntax = "proto3"; package demo;
            message First { string a = 1; }
            message Order { int64 id = 1; string sku = 2;
                message Line { int32 qty = 1; } }"#;
        let schema = compile(SchemaType::Protobuf, proto, &[]).unwrap();
        // [0] (a single 0): First{a:"x"}
        let d = decode(&schema, &[0, 0x0a, 1, b'x'], 1024).unwrap();
        assert_eq!(d.json, r#"{"a":"x"}"#);
        assert_eq!(d.message.as_deref(), Some("demo.First"));
        // [1]: Order{id:7, sku:"k"}; 64-bit integers are strings in the JSON mapping.
        let d = decode(&schema, &[2, 2, 0x08, 7, 0x12, 1, b'k'], 1024).unwrap();
        assert_eq!(d.json, r#"{"id":"7","sku":"k"}"#);
        // [1, 0]: Order.Line{qty:3}
        let d = decode(&schema, &[4, 2, 0, 0x08, 3], 1024).unwrap();
        assert_eq!(d.message.as_deref(), Some("demo.Order.Line"));
        assert_eq!(d.json, r#"{"qty":3}"#);
        assert!(decode(&schema, &[2, 8], 1024)
            .unwrap_err()
            .contains("name no message"));
    }

    #[test]
    fn protobuf_imports_come_from_references() {
        let refs = vec![(
            "common/money.proto".to_string(),
            r#"syntax = "proto3"; package common; message Money { int64 cents = 1; }"#.to_string(),
        )];
        let proto = r#"syntax = "proto3"; import "common/money.proto";
            import "google/protobuf/timestamp.proto";
            message Payment { common.Money amount = 1; google.protobuf.Timestamp at = 2; }"#;
        let schema = compile(SchemaType::Protobuf, proto, &refs).unwrap();
        let d = decode(&schema, &[0, 0x0a, 2, 0x08, 5], 1024).unwrap();
        assert_eq!(d.json, r#"{"amount":{"cents":"5"}}"#);
        assert!(compile(SchemaType::Protobuf, proto, &[]).is_err());
    }

    #[test]
    fn protobuf_schemas_may_be_base64_descriptors() {
        use base64::Engine as _;
        use prost::Message as _;
        let mut c = protox::Compiler::with_file_resolver(MemoryFiles(Arc::new(
            [(
                "m.proto".to_string(),
                r#"syntax = "proto3"; package p; message M { string s = 1; }"#.to_string(),
            )]
            .into_iter()
            .collect(),
        )));
        c.open_file("m.proto").unwrap();
        let set = c.file_descriptor_set();
        let text = base64::engine::general_purpose::STANDARD.encode(set.file[0].encode_to_vec());
        let schema = compile(SchemaType::Protobuf, &text, &[]).unwrap();
        let d = decode(&schema, &[0, 0x0a, 1, b'z'], 1024).unwrap();
        assert_eq!(d.json, r#"{"s":"z"}"#);
        assert_eq!(d.message.as_deref(), Some("p.M"));
    }

    #[test]
    fn json_schema_payloads_are_json() {
        let d = decode(&Compiled::Json, br#"{"a":1}"#, 1024).unwrap();
        assert_eq!(d.json, r#"{"a":1}"#);
        assert!(decode(&Compiled::Json, b"\x01\x02", 1024).is_err());
    }
}
