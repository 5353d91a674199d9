//! A record's key or value prepared for display: pretty JSON, text or a hex dump, cut at its
//! display cap while it is built.

use serde::{Deserialize, Serialize};

use super::caps;
use super::json::pretty_json;
use super::visible::{Clip, Lines};

/// How much of a key or value is shown, in bytes ([`caps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadCaps {
    /// JSON or text: bytes of the text as shown.
    pub text_bytes: usize,
    /// Binary: bytes of the payload shown in the hex dump.
    pub hex_bytes: usize,
}

/// Caps for a record value.
pub const VALUE: PayloadCaps = PayloadCaps {
    text_bytes: caps::VALUE_TEXT_BYTES,
    hex_bytes: caps::VALUE_HEX_BYTES,
};

/// Caps for a record key.
pub const KEY: PayloadCaps = PayloadCaps {
    text_bytes: caps::KEY_TEXT_BYTES,
    hex_bytes: caps::KEY_HEX_BYTES,
};

/// A key or value prepared for display. Computed on the server from the stored bytes, so that
/// a large value travels to the browser (HTML and hydration data) only as far as it is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// Total size of the stored bytes (0 for null).
    pub len: usize,
    pub body: PayloadBody,
    /// True when only the first part is shown (see [`PayloadCaps`]).
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
    /// Valid UTF-8 without control characters other than tab and newlines; invisible and bidi
    /// characters shown as markers (see [`super::visible`]).
    Text(String),
    /// Anything else: the first bytes, shown as a hex dump.
    Hex(Vec<u8>),
}

impl Payload {
    /// Chooses the display for `bytes` (`None` is Kafka null) within `caps`.
    ///
    /// Cost: one pass over `bytes` to classify them (JSON validation or UTF-8 check); building
    /// stops at the cap, so memory is bounded by `caps`, whatever the size or shape of `bytes`.
    pub fn from_bytes(bytes: Option<&[u8]>, caps: PayloadCaps) -> Payload {
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
        if let Some(pretty) = pretty_json(bytes, caps.text_bytes) {
            return Payload {
                len,
                body: PayloadBody::Json(pretty.text),
                truncated: pretty.cut,
            };
        }
        if let Ok(text) = std::str::from_utf8(bytes) {
            if is_readable(text) {
                let mut clip = Clip::new(caps.text_bytes);
                clip.push_text(text, Lines::Keep);
                let shown = clip.finish();
                return Payload {
                    len,
                    body: PayloadBody::Text(shown.text),
                    truncated: shown.cut,
                };
            }
        }
        let shown = &bytes[..len.min(caps.hex_bytes)];
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

/// Lowercase hex pairs separated by spaces: `de ad be ef`.
pub fn hex_bytes(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 3);
    for (i, &b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
    out
}

/// One line of a hex dump: offset, up to 16 bytes as hex, the same bytes as ASCII.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HexLine {
    pub offset: String,
    pub hex: String,
    pub ascii: String,
}

/// Splits `bytes` into hex-dump lines of 16 bytes. The hex column has no gap in the middle
/// so that a byte sequence can be searched for as `de ad be ef` wherever it falls. `bytes`
/// is what [`Payload::from_bytes`] kept, so at most a cap's worth.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn body(bytes: &[u8]) -> PayloadBody {
        Payload::from_bytes(Some(bytes), VALUE).body
    }

    #[test]
    fn payload_kinds() {
        assert_eq!(Payload::from_bytes(None, VALUE).body, PayloadBody::Null);
        assert_eq!(body(b""), PayloadBody::Empty);
        assert_eq!(
            body(br#"{"b":1,"a":[1.50,{}],"s":"x,\"{"}"#),
            PayloadBody::Json(
                "{\n  \"b\": 1,\n  \"a\": [\n    1.50,\n    {}\n  ],\n  \"s\": \"x,\\\"{\"\n}"
                    .into()
            )
        );
        assert_eq!(body(b"42"), PayloadBody::Text("42".into()));
        assert_eq!(body(b"{broken"), PayloadBody::Text("{broken".into()));
        assert_eq!(
            body("pay\u{202E}lod".as_bytes()),
            PayloadBody::Text("pay⟨U+202E⟩lod".into())
        );
        let bin = [0u8, 0, 0, 0, 0x2a, 0xde, 0xad, 0xbe, 0xef, 0xff, 0x10];
        assert_eq!(body(&bin), PayloadBody::Hex(bin.to_vec()));
        assert_eq!(hex_dump(&bin)[0].hex, "00 00 00 00 2a de ad be ef ff 10");
        assert_eq!(hex_dump(&bin)[0].ascii, "....*......");
    }

    /// The benchmark's shapes: every one stays within the caps.
    #[test]
    fn adversarial_payloads_stay_within_the_caps() {
        let mut nested = vec![b'['; 100_000];
        nested.extend(vec![b']'; 100_000]);
        let shapes: Vec<(&str, Vec<u8>)> = vec![
            ("8 MiB text", vec![b'a'; 8 << 20]),
            ("8 MiB binary", vec![0u8; 8 << 20]),
            ("100k-deep JSON", nested),
            ("1 MiB single line", vec![b'x'; 1 << 20]),
            ("1 MiB of U+202E", "\u{202E}".repeat(350_000).into_bytes()),
            (
                "JSON of 1M elements",
                format!("[{}0]", "0,".repeat(1_000_000)).into_bytes(),
            ),
        ];
        for (what, bytes) in shapes {
            for caps in [VALUE, KEY] {
                let p = Payload::from_bytes(Some(&bytes), caps);
                assert!(p.truncated, "{what}");
                assert_eq!(p.len, bytes.len());
                let shown = match &p.body {
                    PayloadBody::Json(t) | PayloadBody::Text(t) => t.len() <= caps.text_bytes,
                    PayloadBody::Hex(b) => b.len() == caps.hex_bytes,
                    _ => false,
                };
                assert!(shown, "{what}: {:?}", std::mem::discriminant(&p.body));
            }
        }
        // A cut never splits a character.
        let p = Payload::from_bytes(
            Some("ééé".as_bytes()),
            PayloadCaps {
                text_bytes: 3,
                hex_bytes: 1,
            },
        );
        assert_eq!((p.body, p.truncated), (PayloadBody::Text("é".into()), true));
    }
}
