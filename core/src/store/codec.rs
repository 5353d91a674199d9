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
