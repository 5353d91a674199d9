//! Edit and replay (`docs/replay.md`, "Edit and replay"): what an edit of one dead letter's
//! record is, how its key, value and header values are written as text (UTF-8 text, JSON,
//! base64, hex, or null), the limits an edit must keep, and the bounded diff summary ([`diff`])
//! stored with the new version and in its audit row.
//!
//! An edit never changes the stored original (version 0, `dead_letters`): it becomes a new
//! version (`dead_letter_versions`, migration 0014) and a replay publishes the latest version
//! in place of the original, never beside it.
//!
//! This module is plain data and checks (no store, no Kafka), shared by the store, the JSON
//! API and the pages (it compiles to wasm too).

pub mod diff;

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::model::Header;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Largest edited value, bytes (16 MiB). Far above what a broker takes by default
/// (`message.max.bytes` ≈ 1 MiB): a version larger than the target topic allows is stored,
/// and its publish fails as "too large" (permanent, `docs/replay.md`).
pub const MAX_VALUE_BYTES: usize = 16 * 1024 * 1024;
/// Largest edited key, bytes (1 MiB).
pub const MAX_KEY_BYTES: usize = 1024 * 1024;
/// Most headers an edited record may carry.
pub const MAX_HEADERS: usize = 1_000;
/// Longest header name, bytes of UTF-8.
pub const MAX_HEADER_NAME_BYTES: usize = 1_024;
/// Largest header value, bytes (1 MiB), and largest sum of header values (4 MiB).
pub const MAX_HEADER_VALUE_BYTES: usize = 1024 * 1024;
/// See [`MAX_HEADER_VALUE_BYTES`].
pub const MAX_HEADERS_TOTAL_BYTES: usize = 4 * 1024 * 1024;
/// Largest JSON body `POST /api/v1/dead-letters/{id}/versions` accepts, bytes (64 MiB: the
/// largest value and key in hex, the headers, and the JSON around them).
pub const MAX_EDIT_BODY_BYTES: usize = 64 * 1024 * 1024;

/// A record's key, value and headers: the original (version 0) or one edited version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// `None` = null key.
    pub key: Option<Vec<u8>>,
    /// `None` = tombstone (null value).
    pub value: Option<Vec<u8>>,
    /// In record order, duplicates and null values kept.
    pub headers: Vec<Header>,
}

/// An edit of a dead letter's latest version. A field left `None` keeps what the latest
/// version has; `Some(None)` for key or value sets it to null; `headers: Some(list)` replaces
/// the whole list (in the order given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordEdit {
    pub key: Option<Option<Vec<u8>>>,
    pub value: Option<Option<Vec<u8>>>,
    pub headers: Option<Vec<Header>>,
}

impl RecordEdit {
    /// `base` with this edit applied.
    pub fn apply(&self, base: &Record) -> Record {
        Record {
            key: self.key.clone().unwrap_or_else(|| base.key.clone()),
            value: self.value.clone().unwrap_or_else(|| base.value.clone()),
            headers: self.headers.clone().unwrap_or_else(|| base.headers.clone()),
        }
    }
}

/// An edit request: the edit, the version it was made from (optimistic concurrency), why,
/// and whether to replay the new version in the same transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EditRequest {
    pub edit: RecordEdit,
    /// The version the person edited (what their form showed). If another edit was saved
    /// meanwhile the request is refused (`Conflict`) instead of silently overwriting it;
    /// `None` = edit whatever the latest version is.
    pub base_version: Option<i32>,
    /// Why (audited), at most `actions::MAX_REASON_CHARS` characters.
    pub reason: Option<String>,
    /// Replay the new version at once, in the edit's transaction.
    pub replay: Option<ReplayEdited>,
}

/// The replay half of "save and replay": one job of this one dead letter, publishing the
/// version just saved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayEdited {
    /// `None` = the dead letter's source topic.
    pub target_topic: Option<String>,
}

/// One saved version of a dead letter (without its bytes): who made it, when, why, and what
/// changed against the version before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    pub dead_letter_id: i64,
    /// 1, 2, ...; 0 is the original (never a saved version).
    pub version: i32,
    pub created_at_ms: i64,
    pub created_by: String,
    pub reason: Option<String>,
    /// The value's length, bytes (0 for a tombstone).
    pub value_bytes: i64,
    /// Hex SHA-256 of the value; `None` for a tombstone.
    pub value_sha256: Option<String>,
    /// What changed against version `version - 1`.
    pub diff: diff::DiffSummary,
}

/// What an edit did: the version saved, and the replay job when one was asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditOutcome {
    pub version: VersionInfo,
    pub job: Option<crate::actions::ReplayJob>,
}

/// Why an edit is refused: the message says what to change. The API answers 422, the page
/// shows it; nothing is stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EditError(pub String);

fn refuse<T>(msg: String) -> Result<T, EditError> {
    Err(EditError(msg))
}

/// Checks an edited record against the limits above: sizes, header count, header names
/// (not empty or only spaces, at most [`MAX_HEADER_NAME_BYTES`]).
///
/// Errors: [`EditError`] naming the first limit broken.
pub fn check(record: &Record) -> Result<(), EditError> {
    if let Some(k) = &record.key {
        if k.len() > MAX_KEY_BYTES {
            return refuse(format!(
                "the key is {} bytes; an edited key may be at most {MAX_KEY_BYTES} bytes",
                k.len()
            ));
        }
    }
    if let Some(v) = &record.value {
        if v.len() > MAX_VALUE_BYTES {
            return refuse(format!(
                "the value is {} bytes; an edited value may be at most {MAX_VALUE_BYTES} bytes \
                 (16 MiB)",
                v.len()
            ));
        }
    }
    if record.headers.len() > MAX_HEADERS {
        return refuse(format!(
            "{} headers; an edited record may carry at most {MAX_HEADERS}",
            record.headers.len()
        ));
    }
    let mut total = 0usize;
    for (i, h) in record.headers.iter().enumerate() {
        let n = i + 1;
        if h.name.trim().is_empty() {
            return refuse(format!(
                "header {n} has an empty name; give it a name or remove it"
            ));
        }
        if h.name.len() > MAX_HEADER_NAME_BYTES {
            return refuse(format!(
                "header {n}'s name is {} bytes; at most {MAX_HEADER_NAME_BYTES}",
                h.name.len()
            ));
        }
        let len = h.value.as_ref().map_or(0, Vec::len);
        if len > MAX_HEADER_VALUE_BYTES {
            return refuse(format!(
                "header {n} (`{}`) is {len} bytes; a header value may be at most \
                 {MAX_HEADER_VALUE_BYTES} bytes",
                diff::preview_name(&h.name)
            ));
        }
        total += len;
    }
    if total > MAX_HEADERS_TOTAL_BYTES {
        return refuse(format!(
            "the header values add up to {total} bytes; at most {MAX_HEADERS_TOTAL_BYTES}"
        ));
    }
    Ok(())
}

/// How a key, value or header value is written as text in an edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// UTF-8 text, stored as typed.
    Text,
    /// UTF-8 text that must parse as JSON (checked, then stored as typed: no re-formatting).
    Json,
    /// Standard base64 (RFC 4648, padding optional, whitespace ignored).
    Base64,
    /// Hexadecimal, two digits per byte (whitespace ignored).
    Hex,
    /// No bytes at all: a null key, a tombstone, a null-valued header.
    Null,
}

impl Encoding {
    pub const ALL: [Encoding; 5] = [
        Encoding::Text,
        Encoding::Json,
        Encoding::Base64,
        Encoding::Hex,
        Encoding::Null,
    ];

    /// The form and API name: `text`, `json`, `base64`, `hex`, `null`.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Text => "text",
            Encoding::Json => "json",
            Encoding::Base64 => "base64",
            Encoding::Hex => "hex",
            Encoding::Null => "null",
        }
    }

    /// Parses [`Encoding::as_str`].
    pub fn parse(s: &str) -> Option<Encoding> {
        Encoding::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// The bytes `text` stands for in this encoding (`what` names the field in the message).
    /// `Null` gives `None` whatever the text.
    ///
    /// Errors: [`EditError`] for JSON that does not parse (with line and column), base64 or
    /// hex that does not decode.
    pub fn decode(self, what: &str, text: &str) -> Result<Option<Vec<u8>>, EditError> {
        match self {
            Encoding::Null => Ok(None),
            Encoding::Text => Ok(Some(text.as_bytes().to_vec())),
            Encoding::Json => {
                if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
                    return refuse(format!(
                        "{what} is not valid JSON ({e}); fix it, or choose text to store it as \
                         typed"
                    ));
                }
                Ok(Some(text.as_bytes().to_vec()))
            }
            Encoding::Base64 => {
                let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
                let engine = base64::engine::GeneralPurpose::new(
                    &base64::alphabet::STANDARD,
                    base64::engine::GeneralPurposeConfig::new()
                        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
                );
                engine
                    .decode(compact.as_bytes())
                    .map(Some)
                    .map_err(|e| EditError(format!("{what} is not valid base64: {e}")))
            }
            Encoding::Hex => decode_hex(text)
                .map(Some)
                .map_err(|e| EditError(format!("{what} is not valid hex: {e}"))),
        }
    }
}

/// Lower-case hex of `bytes`, no separators.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// Inverse of [`to_hex`], either case, whitespace ignored. Errors: what is wrong, in words.
pub fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!(
            "{} hex digits; two digits make one byte",
            digits.len()
        ));
    }
    let nibble = |d: u8| -> Result<u8, String> {
        match d {
            b'0'..=b'9' => Ok(d - b'0'),
            b'a'..=b'f' => Ok(d - b'a' + 10),
            b'A'..=b'F' => Ok(d - b'A' + 10),
            other => Err(format!("`{}` is not a hex digit", other.escape_ascii())),
        }
    };
    digits
        .chunks(2)
        .map(|p| Ok((nibble(p[0])? << 4) | nibble(p[1])?))
        .collect()
}

/// Standard base64 of `bytes`, padded.
pub fn to_base64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

/// True if `bytes` can be edited as text in a browser and come back byte for byte: UTF-8, no
/// control character other than tab, LF and CR, and line ends either all LF or all CRLF (a
/// browser sends a textarea's line ends as CRLF; the form says which to store, see
/// [`Newlines`]).
pub fn editable_as_text(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
    {
        return false;
    }
    Newlines::of(text).is_some()
}

/// The line ends a text field is stored with. Browsers submit a textarea's line breaks as
/// CRLF whatever was shown, so a form says which the value had and the server puts those back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Newlines {
    Lf,
    Crlf,
}

impl Newlines {
    /// `lf` or `crlf`.
    pub fn as_str(self) -> &'static str {
        match self {
            Newlines::Lf => "lf",
            Newlines::Crlf => "crlf",
        }
    }

    /// Parses [`Newlines::as_str`]; anything else is LF.
    pub fn parse(s: &str) -> Newlines {
        if s == "crlf" {
            Newlines::Crlf
        } else {
            Newlines::Lf
        }
    }

    /// The line ends `text` uses: `Lf` (none or LF only), `Crlf` (every LF after a CR, every CR
    /// before an LF), `None` when mixed or with a lone CR.
    pub fn of(text: &str) -> Option<Newlines> {
        let b = text.as_bytes();
        let lf = b.iter().filter(|&&c| c == b'\n').count();
        let cr = b.iter().filter(|&&c| c == b'\r').count();
        let crlf = b.windows(2).filter(|w| w == b"\r\n").count();
        match (cr, crlf) {
            (0, _) => Some(Newlines::Lf),
            (c, p) if c == p && p == lf => Some(Newlines::Crlf),
            _ => None,
        }
    }

    /// `text` as a browser sent it (any mix of CRLF, CR, LF) with these line ends.
    pub fn apply(self, text: &str) -> String {
        let lf = text.replace("\r\n", "\n").replace('\r', "\n");
        match self {
            Newlines::Lf => lf,
            Newlines::Crlf => lf.replace('\n', "\r\n"),
        }
    }
}

/// How an editor shows `bytes` by default: JSON when it parses and is text, text when it can
/// come back byte for byte, else base64; `Null` for `None`.
pub fn default_encoding(bytes: Option<&[u8]>) -> Encoding {
    match bytes {
        None => Encoding::Null,
        Some(b) if editable_as_text(b) => {
            if !b.is_empty() && serde_json::from_slice::<serde::de::IgnoredAny>(b).is_ok() {
                Encoding::Json
            } else {
                Encoding::Text
            }
        }
        Some(_) => Encoding::Base64,
    }
}

/// `bytes` written in `encoding`, or `None` if they cannot be (text or JSON for bytes that are
/// not [`editable_as_text`], JSON for text that does not parse). `Null` writes "".
pub fn encode(bytes: Option<&[u8]>, encoding: Encoding) -> Option<String> {
    let Some(b) = bytes else {
        return (encoding == Encoding::Null).then(String::new);
    };
    match encoding {
        Encoding::Null => Some(String::new()),
        Encoding::Base64 => Some(to_base64(b)),
        Encoding::Hex => Some(to_hex(b)),
        Encoding::Text | Encoding::Json => {
            if !editable_as_text(b) {
                return None;
            }
            if encoding == Encoding::Json
                && serde_json::from_slice::<serde::de::IgnoredAny>(b).is_err()
            {
                return None;
            }
            std::str::from_utf8(b).ok().map(str::to_string)
        }
    }
}

/// How many bytes of text `len` bytes become in `encoding` (for the editor's size cap).
pub fn encoded_len(len: usize, encoding: Encoding) -> usize {
    match encoding {
        Encoding::Null => 0,
        Encoding::Text | Encoding::Json => len,
        Encoding::Base64 => len.div_ceil(3) * 4,
        Encoding::Hex => len * 2,
    }
}

/// One key, value or header value in the JSON API: `null`, or an object with exactly one of
/// `text`, `json`, `base64`, `hex` (`json` is a string of JSON text, checked, stored as
/// given; a JSON value other than a string is stored as its compact serialisation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Payload {
    Text(String),
    Json(serde_json::Value),
    Base64(String),
    Hex(String),
}

impl Payload {
    /// The bytes this stands for. Errors: [`EditError`] as for [`Encoding::decode`].
    pub fn bytes(&self, what: &str) -> Result<Vec<u8>, EditError> {
        let got = match self {
            Payload::Text(t) => Encoding::Text.decode(what, t)?,
            Payload::Json(serde_json::Value::String(t)) => Encoding::Json.decode(what, t)?,
            Payload::Json(v) => Some(v.to_string().into_bytes()),
            Payload::Base64(t) => Encoding::Base64.decode(what, t)?,
            Payload::Hex(t) => Encoding::Hex.decode(what, t)?,
        };
        Ok(got.unwrap_or_default())
    }

    /// `bytes` as the API shows them: `text` when they are UTF-8, else `base64`.
    pub fn of(bytes: &[u8]) -> Payload {
        match std::str::from_utf8(bytes) {
            Ok(t) => Payload::Text(t.to_string()),
            Err(_) => Payload::Base64(to_base64(bytes)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_round_trip_and_refuse_clearly() {
        let bin = vec![0u8, 0xff, 0xc3, 0x28, b'\n'];
        for e in [Encoding::Base64, Encoding::Hex] {
            let text = encode(Some(&bin), e).unwrap();
            assert_eq!(e.decode("the value", &text).unwrap(), Some(bin.clone()));
        }
        assert_eq!(encode(Some(&bin), Encoding::Text), None, "not UTF-8");
        assert_eq!(default_encoding(Some(&bin)), Encoding::Base64);
        assert_eq!(default_encoding(Some(br#"{"a":1}"#)), Encoding::Json);
        assert_eq!(default_encoding(Some(b"plain")), Encoding::Text);
        assert_eq!(default_encoding(None), Encoding::Null);
        let e = Encoding::Json.decode("the value", "{\"a\": ").unwrap_err();
        assert!(e.0.contains("not valid JSON"), "{e}");
        let e = Encoding::Hex.decode("the key", "abc").unwrap_err();
        assert!(e.0.contains("3 hex digits"), "{e}");
        assert_eq!(
            Encoding::Base64.decode("v", "AP8\n").unwrap(),
            Some(vec![0, 0xff])
        );
    }

    #[test]
    fn newlines_come_back_as_they_were() {
        assert_eq!(Newlines::of("a\nb"), Some(Newlines::Lf));
        assert_eq!(Newlines::of("a\r\nb\r\n"), Some(Newlines::Crlf));
        assert_eq!(Newlines::of("a\r\nb\n"), None);
        assert_eq!(Newlines::of("a\rb"), None);
        assert_eq!(Newlines::Lf.apply("a\r\nb"), "a\nb");
        assert_eq!(Newlines::Crlf.apply("a\r\nb\nc"), "a\r\nb\r\nc");
        assert!(!editable_as_text(b"a\rb"));
    }

    #[test]
    fn check_refuses_empty_names_and_oversized_parts() {
        let mut r = Record {
            key: None,
            value: Some(b"v".to_vec()),
            headers: vec![Header {
                name: " ".into(),
                value: None,
            }],
        };
        assert!(check(&r).unwrap_err().0.contains("empty name"));
        r.headers.clear();
        r.value = Some(vec![0; MAX_VALUE_BYTES + 1]);
        assert!(check(&r).unwrap_err().0.contains("at most"));
        r.value = None;
        assert_eq!(check(&r), Ok(()));
    }

    #[test]
    fn api_payloads() {
        let p: Payload = serde_json::from_str(r#"{"json": {"a": [1, 2]}}"#).unwrap();
        assert_eq!(p.bytes("v").unwrap(), br#"{"a":[1,2]}"#);
        let p: Payload = serde_json::from_str(r#"{"json": "{\"a\": 1}"}"#).unwrap();
        assert_eq!(p.bytes("v").unwrap(), br#"{"a": 1}"#);
        let p: Payload = serde_json::from_str(r#"{"json": "{nope"}"#).unwrap();
        assert!(p.bytes("the value").is_err());
        assert!(serde_json::from_str::<Payload>(r#"{"txt": "a"}"#).is_err());
        assert_eq!(Payload::of(&[0xff]), Payload::Base64("/w==".into()));
    }
}
