//! How values that have no column type of their own are written into text columns, the same
//! way on both databases: the ordered header list and the decode warnings.

use base64::Engine;
use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::model::Header;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// One stored header of the first encoding (rows written before migration 0025):
/// `{"name": "...", "value": "<base64>" | null}`. Still read; no longer written.
#[derive(Serialize, Deserialize)]
struct StoredHeader<'a> {
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    value: Option<String>,
}

/// A header value of the compact encoding (see [`encode_headers`]).
#[derive(Deserialize)]
#[serde(untagged)]
enum CompactValue {
    /// The value's bytes are this UTF-8 text, exactly.
    Text(String),
    /// `{"b": "<base64>"}`: bytes that are not printable UTF-8 text.
    Bytes { b: String },
    /// `{"st": 1}`: the value is the row's `stack_trace` column, byte for byte.
    StackTrace {
        #[allow(dead_code)]
        st: u8,
    },
}

/// The value written as text when it is UTF-8 without control characters other than tab,
/// line feed and carriage return (a stack trace, a topic name); as base64 otherwise (the
/// big-endian integers of Spring's partition and offset headers, binary ids), where JSON's
/// `\u0000` escapes would take 6 bytes a byte.
fn as_text(v: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(v).ok()?;
    s.chars()
        .all(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r'))
        .then_some(s)
}

/// Headers as text, in record order, duplicates kept (the compact encoding, migration 0025):
/// a JSON array of `[name, value]` pairs where value is a JSON string (the bytes are that
/// UTF-8 text), `{"b": "<base64>"}` (any other bytes), or `null` (a null value, distinct from
/// `""`). Byte-exact: [`decode_headers`] gives back the same names and value bytes.
/// Example: `[["kafka_dlt-original-topic","orders"],["kafka_dlt-original-offset",{"b":"AAAAAAAAACo="}]]`.
pub(crate) fn encode_headers(headers: &[Header]) -> String {
    encode_headers_with_trace(headers, None)
}

/// [`encode_headers`], where a header whose value is byte for byte `stack_trace` (the row's
/// `stack_trace` column, as stored) is written `{"st": 1}` instead of its text: a Spring
/// `kafka_dlt-exception-stacktrace` is then stored once, in the column. Reading it back needs
/// that column: [`decode_headers`]'s `stack_trace`.
pub(crate) fn encode_headers_with_trace(headers: &[Header], stack_trace: Option<&str>) -> String {
    let trace = stack_trace.filter(|t| !t.is_empty()).map(str::as_bytes);
    let mut out: Vec<u8> = Vec::with_capacity(
        2 + headers
            .iter()
            .map(|h| h.name.len() + h.value.as_ref().map_or(4, Vec::len) + 8)
            .sum::<usize>(),
    );
    out.push(b'[');
    for (i, h) in headers.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, h.name.as_str());
        out.push(b',');
        match h.value.as_deref() {
            None => out.extend_from_slice(b"null"),
            Some(v) if Some(v) == trace => out.extend_from_slice(br#"{"st":1}"#),
            Some(v) => match as_text(v) {
                Some(text) => {
                    let _ = serde_json::to_writer(&mut out, text);
                }
                None => {
                    out.extend_from_slice(br#"{"b":""#);
                    out.extend_from_slice(B64.encode(v).as_bytes());
                    out.extend_from_slice(br#""}"#);
                }
            },
        }
        out.push(b']');
    }
    out.push(b']');
    // Only JSON text and base64 were written.
    String::from_utf8(out).unwrap_or_else(|_| "[]".to_string())
}

/// Inverse of [`encode_headers`] and [`encode_headers_with_trace`]; also reads the first
/// encoding (`[{"name": .., "value": base64|null}]`, rows stored before migration 0025).
/// `stack_trace` is the row's `stack_trace` column (`None` where the table has none).
///
/// Errors: `Corrupt` if the text is neither encoding, or refers to a stack trace the row
/// does not have.
pub(crate) fn decode_headers(
    text: &str,
    stack_trace: Option<&str>,
) -> Result<Vec<Header>, StoreError> {
    if text.as_bytes().get(1) == Some(&b'{') {
        return decode_first_encoding(text);
    }
    let stored: Vec<(String, Option<CompactValue>)> = serde_json::from_str(text)
        .map_err(|e| StoreError::Corrupt(format!("headers are not a JSON header list: {e}")))?;
    stored
        .into_iter()
        .map(|(name, value)| {
            let value = match value {
                None => None,
                Some(CompactValue::Text(t)) => Some(t.into_bytes()),
                Some(CompactValue::Bytes { b }) => Some(B64.decode(b.as_bytes()).map_err(|e| {
                    StoreError::Corrupt(format!("header `{name}` value is not base64: {e}"))
                })?),
                Some(CompactValue::StackTrace { .. }) => match stack_trace {
                    Some(t) => Some(t.as_bytes().to_vec()),
                    None => {
                        return Err(StoreError::Corrupt(format!(
                            "header `{name}` refers to the stack trace, which the row does not have"
                        )))
                    }
                },
            };
            Ok(Header { name, value })
        })
        .collect()
}

/// The first encoding: `[{"name": "...", "value": "<base64>" | null}]`.
fn decode_first_encoding(text: &str) -> Result<Vec<Header>, StoreError> {
    let stored: Vec<StoredHeader<'_>> = serde_json::from_str(text)
        .map_err(|e| StoreError::Corrupt(format!("headers are not a JSON header list: {e}")))?;
    stored
        .into_iter()
        .map(|h| {
            let value = h
                .value
                .map(|v| B64.decode(v.as_bytes()))
                .transpose()
                .map_err(|e| {
                    StoreError::Corrupt(format!("header `{}` value is not base64: {e}", h.name))
                })?;
            Ok(Header {
                name: h.name.into_owned(),
                value,
            })
        })
        .collect()
}

/// `json` with every non-ASCII character written as a `\uXXXX` escape (a surrogate pair
/// above U+FFFF): the same JSON value, in pure ASCII, which a database of any encoding holds.
/// Only JSON strings can contain non-ASCII characters, so escaping them char by char is valid.
pub(crate) fn ascii_json(json: &str) -> String {
    if json.is_ascii() {
        return json.to_string();
    }
    let mut out = String::with_capacity(json.len() + json.len() / 4);
    let mut units = [0u16; 2];
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            for u in c.encode_utf16(&mut units) {
                let _ = std::fmt::Write::write_fmt(&mut out, format_args!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// A raw record as quarantine keeps it: coordinates, timestamp, key and value (base64, `null`
/// = null), headers as in [`encode_headers`]. ASCII JSON, so it survives any text handling.
#[derive(Serialize, Deserialize)]
struct StoredRecord {
    dlq_topic: String,
    dlq_partition: i32,
    dlq_offset: i64,
    timestamp_ms: Option<i64>,
    key: Option<String>,
    value: Option<String>,
    headers: serde_json::Value,
}

/// `record` as quarantine's `record` column holds it (see [`StoredRecord`]).
pub(crate) fn encode_record(record: &crate::model::RawRecord) -> Vec<u8> {
    let headers = serde_json::from_str(&encode_headers(&record.headers))
        .unwrap_or(serde_json::Value::Array(Vec::new()));
    let stored = StoredRecord {
        dlq_topic: record.dlq_topic.clone(),
        dlq_partition: record.dlq_partition,
        dlq_offset: record.dlq_offset,
        timestamp_ms: record.timestamp_ms,
        key: record.key.as_deref().map(|k| B64.encode(k)),
        value: record.value.as_deref().map(|v| B64.encode(v)),
        headers,
    };
    // Serialising strings, numbers and a JSON value cannot fail.
    ascii_json(&serde_json::to_string(&stored).unwrap_or_default()).into_bytes()
}

/// Inverse of [`encode_record`]. Errors: `Corrupt` if the bytes are not such a record.
pub(crate) fn decode_record(bytes: &[u8]) -> Result<crate::model::RawRecord, StoreError> {
    let stored: StoredRecord = serde_json::from_slice(bytes)
        .map_err(|e| StoreError::Corrupt(format!("quarantined record does not parse: {e}")))?;
    let b64 = |what: &str, v: Option<String>| {
        v.map(|v| B64.decode(v.as_bytes()))
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("quarantined {what} is not base64: {e}")))
    };
    Ok(crate::model::RawRecord {
        dlq_topic: stored.dlq_topic,
        dlq_partition: stored.dlq_partition,
        dlq_offset: stored.dlq_offset,
        timestamp_ms: stored.timestamp_ms,
        key: b64("key", stored.key)?,
        value: b64("value", stored.value)?,
        headers: decode_headers(&stored.headers.to_string(), None)?,
    })
}

/// Decode warnings as a JSON array of strings (`[]` when there are none).
pub(crate) fn encode_warnings(warnings: &[String]) -> String {
    serde_json::to_string(warnings).unwrap_or_else(|_| "[]".to_string())
}

/// Inverse of [`encode_warnings`]. Errors: `Corrupt` if the text is not such an array.
pub(crate) fn decode_warnings(text: &str) -> Result<Vec<String>, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Corrupt(format!("decode_warnings is not a JSON list: {e}")))
}

/// PostgreSQL's `text` cannot hold U+0000 (an insert would fail, and ingest would stall on one
/// hostile header). The normalised text fields are derived from headers for display and
/// filtering (the raw headers keep the exact bytes), so U+0000 becomes U+FFFD there, on both
/// databases alike so that a filter matches the same rows on either.
pub(crate) fn text_field(s: &Option<String>) -> Option<std::borrow::Cow<'_, str>> {
    s.as_deref().map(|t| {
        if t.contains('\0') {
            std::borrow::Cow::Owned(t.replace('\0', "\u{FFFD}"))
        } else {
            std::borrow::Cow::Borrowed(t)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_byte_exact() {
        let headers = vec![
            Header {
                name: "a".into(),
                value: None,
            },
            Header {
                name: "a".into(),
                value: Some(vec![]),
            },
            Header {
                name: "bad-utf8".into(),
                value: Some(vec![0xc3, 0x28]),
            },
            Header {
                name: "\"quoted\" \\ ünï".into(),
                value: Some(b"x".to_vec()),
            },
        ];
        assert_eq!(
            decode_headers(&encode_headers(&headers), None).unwrap(),
            headers
        );
        assert_eq!(encode_headers(&[]), "[]");
        assert_eq!(decode_headers("[]", None).unwrap(), vec![]);
    }

    #[test]
    fn compact_encoding_keeps_text_as_text_and_other_bytes_as_base64() {
        let headers = vec![
            Header {
                name: "kafka_dlt-original-topic".into(),
                value: Some(b"orders".to_vec()),
            },
            Header {
                name: "kafka_dlt-original-offset".into(),
                value: Some(42i64.to_be_bytes().to_vec()),
            },
            Header {
                name: "trace".into(),
                value: Some(b"a\n\tat b\r\n".to_vec()),
            },
            Header {
                name: "nul".into(),
                value: Some(b"a\0b".to_vec()),
            },
        ];
        let text = encode_headers(&headers);
        assert_eq!(
            text,
            r#"[["kafka_dlt-original-topic","orders"],["kafka_dlt-original-offset",{"b":"AAAAAAAAACo="}],["trace","a\n\tat b\r\n"],["nul",{"b":"YQBi"}]]"#
        );
        assert_eq!(decode_headers(&text, None).unwrap(), headers);
    }

    #[test]
    fn the_stack_trace_is_stored_once_and_read_back_from_its_column() {
        let trace = "java.lang.IllegalStateException: boom\n\tat a.B.c(B.java:1)\n";
        let headers = vec![
            Header {
                name: "kafka_dlt-exception-stacktrace".into(),
                value: Some(trace.as_bytes().to_vec()),
            },
            Header {
                name: "other".into(),
                value: Some(b"x".to_vec()),
            },
        ];
        let text = encode_headers_with_trace(&headers, Some(trace));
        assert_eq!(
            text,
            r#"[["kafka_dlt-exception-stacktrace",{"st":1}],["other","x"]]"#
        );
        assert_eq!(decode_headers(&text, Some(trace)).unwrap(), headers);
        // Without the column, the reference cannot be resolved: an error, not a wrong value.
        assert!(matches!(
            decode_headers(&text, None),
            Err(StoreError::Corrupt(_))
        ));
        // A column that differs from the header (cut, NUL replaced) keeps the header whole.
        let cut = &trace[..10];
        let text = encode_headers_with_trace(&headers, Some(cut));
        assert!(!text.contains(r#"{"st":1}"#), "{text}");
        assert_eq!(decode_headers(&text, Some(cut)).unwrap(), headers);
    }

    #[test]
    fn the_first_encoding_is_still_read() {
        let text =
            r#"[{"name":"a","value":null},{"name":"b","value":"AAE="},{"name":"c","value":""}]"#;
        assert_eq!(
            decode_headers(text, Some("unused")).unwrap(),
            vec![
                Header {
                    name: "a".into(),
                    value: None
                },
                Header {
                    name: "b".into(),
                    value: Some(vec![0, 1])
                },
                Header {
                    name: "c".into(),
                    value: Some(vec![])
                },
            ]
        );
    }

    #[test]
    fn ascii_json_is_the_same_value() {
        let headers = vec![Header {
            name: "naïve \u{202e} 🦀 \"q\"".into(),
            value: Some("é".as_bytes().to_vec()),
        }];
        let json = encode_headers(&headers);
        let ascii = ascii_json(&json);
        assert!(ascii.is_ascii());
        assert!(ascii.contains("\\ud83e\\udd80"), "{ascii}");
        assert_eq!(decode_headers(&ascii, None).unwrap(), headers);
    }

    #[test]
    fn quarantined_records_round_trip() {
        let record = crate::model::RawRecord {
            dlq_topic: "orders.DLT".into(),
            dlq_partition: 3,
            dlq_offset: 42,
            timestamp_ms: Some(-5),
            key: None,
            value: Some(vec![0, 0xff, 0xc3]),
            headers: vec![
                Header {
                    name: "ünï".into(),
                    value: None,
                },
                Header {
                    name: "".into(),
                    value: Some(vec![]),
                },
            ],
        };
        let bytes = encode_record(&record);
        assert!(bytes.is_ascii());
        assert_eq!(decode_record(&bytes).unwrap(), record);
        assert!(matches!(decode_record(b"{"), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn corrupt_text_is_an_error_not_a_panic() {
        assert!(matches!(
            decode_headers("{", None),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(
            decode_headers(r#"[{"name":"a","value":"***"}]"#, None),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(
            decode_warnings("nope"),
            Err(StoreError::Corrupt(_))
        ));
    }
}
