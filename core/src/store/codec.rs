//! How values that have no column type of their own are written into text columns, the same
//! way on both databases: the ordered header list and the decode warnings.

use base64::Engine;
use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::model::Header;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// One stored header: `{"name": "...", "value": "<base64>" | null}`. Base64 keeps any bytes
/// (non-UTF-8 included) exact; `null` stays distinct from `""` (an empty value).
#[derive(Serialize, Deserialize)]
struct StoredHeader<'a> {
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    value: Option<String>,
}

/// Headers as a JSON array, in record order, duplicates kept.
pub(crate) fn encode_headers(headers: &[Header]) -> String {
    let stored: Vec<StoredHeader<'_>> = headers
        .iter()
        .map(|h| StoredHeader {
            name: std::borrow::Cow::Borrowed(h.name.as_str()),
            value: h.value.as_deref().map(|v| B64.encode(v)),
        })
        .collect();
    // Serialising strings and options cannot fail; an empty list is the safe fallback.
    serde_json::to_string(&stored).unwrap_or_else(|_| "[]".to_string())
}

/// Inverse of [`encode_headers`]. Errors: `Corrupt` if the text is not such an array.
pub(crate) fn decode_headers(text: &str) -> Result<Vec<Header>, StoreError> {
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
        headers: decode_headers(&stored.headers.to_string())?,
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
        assert_eq!(decode_headers(&encode_headers(&headers)).unwrap(), headers);
        assert_eq!(encode_headers(&[]), "[]");
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
        assert_eq!(decode_headers(&ascii).unwrap(), headers);
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
        assert!(matches!(decode_headers("{"), Err(StoreError::Corrupt(_))));
        assert!(matches!(
            decode_headers(r#"[{"name":"a","value":"***"}]"#),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(
            decode_warnings("nope"),
            Err(StoreError::Corrupt(_))
        ));
    }
}
