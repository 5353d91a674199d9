//! Turning stored values into text for the page: times, shortened messages, payloads (JSON,
//! text or a hex dump) and header values. Pure functions, the same on the server and in the
//! browser, so a hydrated page never disagrees with the server-rendered one.
//!
//! Nothing here changes what is stored: this is display only (invariant 2, "bytes are sacred").

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Largest JSON or text payload shown inline, in bytes of the (pretty) text; the rest is
/// available through the raw download.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;
/// Largest binary payload shown as a hex dump, in bytes (1024 lines of 16).
pub const MAX_HEX_BYTES: usize = 16 * 1024;
/// Longest header value shown as raw hex in the header table, in bytes.
pub const MAX_HEADER_HEX_BYTES: usize = 256;

/// Epoch ms as UTC wall time, `2026-12-01 06:47:03`; the raw number if out of range.
pub fn format_time(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| format!("{ms} ms"))
}

/// The first line of `text`, at most `max_chars` characters, with `…` when something was cut.
pub fn shorten(text: &str, max_chars: usize) -> String {
    let first_line = text.lines().next().unwrap_or("");
    let cut_line = first_line.len() < text.trim_end().len();
    let mut out: String = first_line.chars().take(max_chars).collect();
    if cut_line || first_line.chars().count() > max_chars {
        out.push('…');
    }
    out
}

/// Text safe to put in `<Title>`: leptos_meta 0.8 writes the server-rendered `<title>` without
/// escaping it, so a stored `</title><script>` would become markup. Keeps letters, digits and
/// the punctuation of class names; drops the rest.
pub fn title_text(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '$' | '-' | ' ' | ':'))
        .take(120)
        .collect()
}

/// Lowercase hex pairs separated by spaces: `de ad be ef`.
pub fn hex_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A key or value prepared for display. Computed on the server from the stored bytes, so that
/// a 1 MiB value does not travel to the browser twice (HTML and hydration data) in full.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// Total size of the stored bytes (0 for null).
    pub len: usize,
    pub body: PayloadBody,
    /// True when only the first part is shown ([`MAX_TEXT_BYTES`] / [`MAX_HEX_BYTES`]).
    pub truncated: bool,
}

/// How a payload is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PayloadBody {
    /// Kafka null: a tombstone value or a null key.
    Null,
    /// Zero bytes (not null).
    Empty,
    /// Valid JSON object or array, re-indented (key order and numbers exactly as stored).
    Json(String),
    /// Valid UTF-8 without control characters other than tab and newlines.
    Text(String),
    /// Anything else: the first bytes, shown as a hex dump.
    Hex(Vec<u8>),
}

impl Payload {
    /// Chooses the display for `bytes` (`None` is Kafka null).
    pub fn from_bytes(bytes: Option<&[u8]>) -> Payload {
        let Some(bytes) = bytes else {
            return Payload {
                len: 0,
                body: PayloadBody::Null,
                truncated: false,
            };
        };
        let len = bytes.len();
        if bytes.is_empty() {
            return Payload {
                len,
                body: PayloadBody::Empty,
                truncated: false,
            };
        }
        if let Some(pretty) = pretty_json(bytes) {
            let (text, truncated) = truncate_text(pretty, MAX_TEXT_BYTES);
            return Payload {
                len,
                body: PayloadBody::Json(text),
                truncated,
            };
        }
        if let Ok(text) = std::str::from_utf8(bytes) {
            if is_readable(text) {
                let (text, truncated) = truncate_text(text.to_string(), MAX_TEXT_BYTES);
                return Payload {
                    len,
                    body: PayloadBody::Text(text),
                    truncated,
                };
            }
        }
        let shown = &bytes[..len.min(MAX_HEX_BYTES)];
        Payload {
            len,
            body: PayloadBody::Hex(shown.to_vec()),
            truncated: shown.len() < len,
        }
    }
}

/// Text is shown as text when a person can read it: no control characters but tab/CR/LF.
fn is_readable(text: &str) -> bool {
    text.chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
}

/// Cuts `text` to at most `max` bytes on a character boundary.
fn truncate_text(mut text: String, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    (text, true)
}

/// Re-indents a JSON object or array without parsing it into a map, so key order, duplicate
/// keys and number spellings stay exactly as stored. `None` if `bytes` is not one JSON
/// object or array.
pub fn pretty_json(bytes: &[u8]) -> Option<String> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace())?;
    if !matches!(first, b'{' | b'[') {
        return None;
    }
    // Validate first (whole document, nothing trailing); then reformatting can trust the syntax.
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).ok()?;
    let text = std::str::from_utf8(bytes).ok()?;
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    let mut indent = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = text.chars().peekable();
    let newline = |out: &mut String, indent: usize| {
        out.push('\n');
        for _ in 0..indent {
            out.push_str("  ");
        }
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                while chars.peek().is_some_and(|n| n.is_ascii_whitespace()) {
                    chars.next();
                }
                if matches!(chars.peek(), Some('}' | ']')) {
                    // Empty container stays on one line: `{}`, `[]`.
                    if let Some(close) = chars.next() {
                        out.push(close);
                    }
                } else {
                    indent += 1;
                    newline(&mut out, indent);
                }
            }
            '}' | ']' => {
                indent = indent.saturating_sub(1);
                newline(&mut out, indent);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, indent);
            }
            ':' => out.push_str(": "),
            c if c.is_ascii_whitespace() => {}
            c => out.push(c),
        }
    }
    Some(out)
}

/// One line of a hex dump: offset, up to 16 bytes as hex, the same bytes as ASCII.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HexLine {
    pub offset: String,
    pub hex: String,
    pub ascii: String,
}

/// Splits `bytes` into hex-dump lines of 16 bytes. The hex column has no gap in the middle
/// so that a byte sequence can be searched for as `de ad be ef` wherever it falls.
pub fn hex_dump(bytes: &[u8]) -> Vec<HexLine> {
    bytes
        .chunks(16)
        .enumerate()
        .map(|(i, chunk)| HexLine {
            offset: format!("{:08x}", i * 16),
            hex: hex_bytes(chunk),
            ascii: chunk
                .iter()
                .map(|&b| {
                    if b.is_ascii_graphic() || b == b' ' {
                        b as char
                    } else {
                        '.'
                    }
                })
                .collect(),
        })
        .collect()
}

/// A header value described for the header table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderText {
    /// The value as a person reads it; `None` for a null header or bytes with no reading.
    pub decoded: Option<String>,
    /// How it was read: "null", "utf8", "int32-be", "int64-be", "binary", ...
    pub encoding: &'static str,
}

/// Describes a header value for display: the conventions module's reading of it (which
/// header names carry big-endian numbers, Java `BigInteger`s, ...).
pub fn describe_header(name: &str, value: Option<&[u8]>) -> HeaderText {
    let d = redrive_core::conventions::describe_header(name, value);
    HeaderText {
        decoded: d.decoded,
        encoding: d.encoding,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_wall_clock() {
        assert_eq!(format_time(1_796_104_800_000), "2026-12-01 06:00:00");
        assert_eq!(format_time(i64::MAX), format!("{} ms", i64::MAX));
    }

    #[test]
    fn titles_hold_no_markup() {
        assert_eq!(
            title_text("</title><script>alert(1)</script>java.lang.X$Y"),
            "titlescriptalert1scriptjava.lang.X$Y"
        );
    }

    #[test]
    fn shorten_takes_the_first_line() {
        assert_eq!(shorten("abc", 10), "abc");
        assert_eq!(shorten("abcdef", 3), "abc…");
        assert_eq!(shorten("one\ntwo", 10), "one…");
        assert_eq!(shorten("ünïcödé", 3), "ünï…");
    }

    #[test]
    fn payload_kinds() {
        assert_eq!(Payload::from_bytes(None).body, PayloadBody::Null);
        assert_eq!(Payload::from_bytes(Some(b"")).body, PayloadBody::Empty);
        assert_eq!(
            Payload::from_bytes(Some(br#"{"b":1,"a":[1.50,{}],"s":"x,\"{"}"#)).body,
            PayloadBody::Json(
                "{\n  \"b\": 1,\n  \"a\": [\n    1.50,\n    {}\n  ],\n  \"s\": \"x,\\\"{\"\n}"
                    .into()
            )
        );
        assert_eq!(
            Payload::from_bytes(Some(b"42")).body,
            PayloadBody::Text("42".into())
        );
        assert_eq!(
            Payload::from_bytes(Some(b"{broken")).body,
            PayloadBody::Text("{broken".into())
        );
        let bin = [0u8, 0, 0, 0, 0x2a, 0xde, 0xad, 0xbe, 0xef, 0xff, 0x10];
        assert_eq!(
            Payload::from_bytes(Some(&bin)).body,
            PayloadBody::Hex(bin.to_vec())
        );
        assert_eq!(
            hex_dump(&bin)[0].hex,
            "00 00 00 00 2a de ad be ef ff 10".to_string()
        );
        assert_eq!(hex_dump(&bin)[0].ascii, "....*......");
    }

    #[test]
    fn large_payloads_are_cut() {
        let big = vec![b'a'; 1024 * 1024];
        let p = Payload::from_bytes(Some(&big));
        assert!(p.truncated);
        assert_eq!(p.len, 1024 * 1024);
        assert!(matches!(p.body, PayloadBody::Text(ref t) if t.len() == MAX_TEXT_BYTES));
        let bin = vec![0u8; 1024 * 1024];
        let p = Payload::from_bytes(Some(&bin));
        assert!(matches!(p.body, PayloadBody::Hex(ref b) if b.len() == MAX_HEX_BYTES));
        // A cut never splits a character.
        let (t, cut) = truncate_text("ééé".into(), 3);
        assert_eq!((t.as_str(), cut), ("é", true));
    }
}
