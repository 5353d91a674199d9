//! The dry run's sample (`docs/replay.md`, "Dry run with samples"): a few of the records a
//! replay would send, per target topic, as they would be published — with a transform, before
//! and after the script, or why it skipped or failed on them. Shapes only (the confirmation
//! page and `POST /api/v1/replays/dry-run` show them); `Store::replay_sample` builds them.
//!
//! Bounded by what it shows: at most [`SAMPLE_TARGETS`] topics × [`MAX_SAMPLE_PER_TARGET`]
//! records, each key and value cut at [`SAMPLE_TEXT_BYTES`], at most [`SAMPLE_HEADERS`]
//! headers of [`SAMPLE_HEADER_BYTES`] each (`docs/limits.md`, display caps).

use serde::{Deserialize, Serialize};

/// Records sampled per target topic when the dry run does not say.
pub const SAMPLE_PER_TARGET: u32 = 3;
/// Most records sampled per target topic (`sample_per_target`).
pub const MAX_SAMPLE_PER_TARGET: u32 = 20;
/// Most target topics sampled (the largest first, as the dry run lists them).
pub const SAMPLE_TARGETS: usize = 10;
/// A sampled key or value is cut at this many bytes of text (4 KiB).
pub const SAMPLE_TEXT_BYTES: usize = 4 * 1024;
/// A value that is not UTF-8 shows this many of its first bytes, in hex.
pub const SAMPLE_HEX_BYTES: usize = 64;
/// Most headers shown per sampled record (the rest are counted).
pub const SAMPLE_HEADERS: usize = 50;
/// A sampled header value is cut at this many bytes of text.
pub const SAMPLE_HEADER_BYTES: usize = 256;

/// The dry run's sample.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplaySample {
    /// SHA-256 of the transform script the sample ran (`null` without one).
    pub transform_sha256: Option<String>,
    /// Per target topic, in the dry run's order.
    pub targets: Vec<TargetSample>,
}

/// The first records a replay would send to one topic (outbox order: dead-letter id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetSample {
    pub topic: String,
    pub records: Vec<SampleRecord>,
}

/// One sampled dead letter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleRecord {
    pub dead_letter_id: i64,
    /// As stored, with the headers a replay keeps (no `redrive-*`, no diagnostics).
    pub before: ShownRecord,
    /// What the replay would do with it.
    pub after: SampleAfter,
}

/// What a replay would do with a sampled record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SampleAfter {
    /// No transform: published as `before` (plus redrive's headers).
    AsIs,
    /// The script returned this record: it is what would be published.
    Publish { record: ShownRecord },
    /// The script skipped it (`skip()`): not published.
    Skip { reason: Option<String> },
    /// The script failed on it: not published, the row would fail with this error.
    Error { error: String },
}

/// A record as shown: key, value and headers, each cut at the sample's caps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownRecord {
    /// `None`: no key.
    pub key: Option<ShownBytes>,
    /// `None`: a tombstone.
    pub value: Option<ShownBytes>,
    /// (name, value) in record order, at most [`SAMPLE_HEADERS`]; names cut at
    /// [`SAMPLE_HEADER_BYTES`].
    pub headers: Vec<(String, Option<ShownBytes>)>,
    /// Headers not shown.
    pub headers_left_out: usize,
}

/// Bytes as shown: UTF-8 text cut at a character boundary, or the first bytes in hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownBytes {
    /// The text (UTF-8), or lowercase hex of the first [`SAMPLE_HEX_BYTES`] bytes.
    pub text: String,
    /// False when `text` is hex (the bytes are not UTF-8).
    pub utf8: bool,
    /// The whole size, bytes.
    pub bytes: usize,
    /// True when `text` shows less than all of it.
    pub cut: bool,
}

impl ShownBytes {
    /// `b` shown in at most `cap` bytes of text (hex: [`SAMPLE_HEX_BYTES`] bytes).
    pub fn of(b: &[u8], cap: usize) -> ShownBytes {
        match std::str::from_utf8(b) {
            Ok(s) => {
                let mut end = s.len().min(cap);
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                ShownBytes {
                    text: s[..end].to_string(),
                    utf8: true,
                    bytes: b.len(),
                    cut: end < s.len(),
                }
            }
            Err(_) => {
                let shown = &b[..b.len().min(SAMPLE_HEX_BYTES)];
                ShownBytes {
                    text: shown.iter().map(|x| format!("{x:02x}")).collect(),
                    utf8: false,
                    bytes: b.len(),
                    cut: shown.len() < b.len(),
                }
            }
        }
    }
}

impl ShownRecord {
    /// The record cut at the sample's caps.
    pub fn of(
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[crate::model::Header],
    ) -> ShownRecord {
        let shown = headers
            .iter()
            .take(SAMPLE_HEADERS)
            .map(|h| {
                let mut end = h.name.len().min(SAMPLE_HEADER_BYTES);
                while !h.name.is_char_boundary(end) {
                    end -= 1;
                }
                (
                    h.name[..end].to_string(),
                    h.value
                        .as_deref()
                        .map(|v| ShownBytes::of(v, SAMPLE_HEADER_BYTES)),
                )
            })
            .collect();
        ShownRecord {
            key: key.map(|k| ShownBytes::of(k, SAMPLE_TEXT_BYTES)),
            value: value.map(|v| ShownBytes::of(v, SAMPLE_TEXT_BYTES)),
            headers: shown,
            headers_left_out: headers.len().saturating_sub(SAMPLE_HEADERS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_character_boundary_and_binary_is_hex() {
        let s = ShownBytes::of("ééé".as_bytes(), 3);
        assert_eq!((s.text.as_str(), s.cut, s.bytes), ("é", true, 6));
        let b = ShownBytes::of(&[0xff; 100], 10);
        assert!(!b.utf8 && b.cut);
        assert_eq!(b.text.len(), 2 * SAMPLE_HEX_BYTES);
    }
}
