//! The diff summary of one edit: what changed between a version and the one it was made
//! from, bounded in size whatever the record's size (`docs/replay.md`, "Edit and replay"). It
//! is stored with the new version (`dead_letter_versions.diff`), is the `detail` of the edit's
//! audit row, and is shown on the detail page.
//!
//! - **Key and value:** null or not, length in bytes and SHA-256 of each side (so an auditor
//!   can match a version to a record without storing it twice); for text, the changed lines
//!   (the region between the longest common prefix and suffix, widened to whole lines, at most
//!   [`VALUE_DIFF_BYTES`] / [`KEY_DIFF_BYTES`] of it, each line at most [`LINE_BYTES`]); for
//!   bytes that are not UTF-8, the offset of the first difference and 32 bytes of hex around
//!   it on both sides.
//! - **Headers:** one line per name whose values changed (`added`, `removed`, `changed`), at
//!   most [`HEADER_CHANGES`] lines, values shown as text (or hex) cut to [`HEADER_VALUE_SHOWN`].
//!
//! Computing it is linear in the record's size (one pass for prefix, suffix, UTF-8 check and
//! hash) and builds nothing larger than the caps, so a 10 MB value gives a summary of a few
//! KiB, never a copy of the value. A summary serialises to less than [`MAX_SUMMARY_BYTES`].

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::model::Header;

use super::{to_hex, Record};

/// Most bytes of changed value lines kept (8 KiB).
pub const VALUE_DIFF_BYTES: usize = 8 * 1024;
/// Most bytes of changed key lines kept (2 KiB).
pub const KEY_DIFF_BYTES: usize = 2 * 1024;
/// Longest line of a text diff, bytes (then `…`).
pub const LINE_BYTES: usize = 240;
/// Most header change lines kept (the rest are counted in `more`).
pub const HEADER_CHANGES: usize = 50;
/// Most bytes of one header value shown in a change line.
pub const HEADER_VALUE_SHOWN: usize = 120;
/// Upper bound of a serialised summary, bytes (64 KiB): the caps above with JSON's worst-case
/// escaping (`\u00XX` for a control character), the hashes and the field names.
pub const MAX_SUMMARY_BYTES: usize = 64 * 1024;

/// One side of a key or value: null, length, SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    /// True for a null key or a tombstone.
    pub null: bool,
    /// Length, bytes (0 when null).
    pub bytes: u64,
    /// Lower-case hex SHA-256 of the bytes; `None` when null.
    pub sha256: Option<String>,
}

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: Option<&[u8]>) -> Digest {
        match bytes {
            None => Digest {
                null: true,
                bytes: 0,
                sha256: None,
            },
            Some(b) => Digest {
                null: false,
                bytes: b.len() as u64,
                sha256: Some(to_hex(&Sha256::digest(b))),
            },
        }
    }
}

/// What changed in a key or a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartDiff {
    pub changed: bool,
    pub before: Digest,
    pub after: Digest,
    /// The changed lines (`- old` / `+ new`, after an `@@ line N @@` line), or the hex around
    /// the first difference for bytes that are not text; `None` when unchanged or null.
    pub diff: Option<String>,
    /// True when `diff` was cut at its cap.
    pub cut: bool,
    /// Offset of the first differing byte (when both sides have bytes).
    pub first_difference_at_byte: Option<u64>,
}

/// What changed in the headers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadersDiff {
    pub changed: bool,
    pub before_count: u64,
    pub after_count: u64,
    /// One line per change, e.g. `changed x-tenant: "acme" → "beta"`, `added x-new: "1"`,
    /// `removed traceparent`, `order changed`.
    pub changes: Vec<String>,
    /// Change lines left out beyond [`HEADER_CHANGES`].
    pub more: u64,
}

/// The diff summary of one edit (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffSummary {
    pub key: PartDiff,
    pub value: PartDiff,
    pub headers: HeadersDiff,
}

impl DiffSummary {
    /// True if anything changed.
    pub fn changed(&self) -> bool {
        self.key.changed || self.value.changed || self.headers.changed
    }

    /// One line for a history event: `value 120 → 118 bytes, key changed, 2 header changes`.
    pub fn one_line(&self) -> String {
        let mut parts = Vec::new();
        let side = |d: &Digest| {
            if d.null {
                "null".to_string()
            } else {
                format!("{} bytes", d.bytes)
            }
        };
        if self.value.changed {
            parts.push(format!(
                "value {} → {}",
                side(&self.value.before),
                side(&self.value.after)
            ));
        }
        if self.key.changed {
            parts.push(format!(
                "key {} → {}",
                side(&self.key.before),
                side(&self.key.after)
            ));
        }
        if self.headers.changed {
            let n = self.headers.changes.len() as u64 + self.headers.more;
            parts.push(format!(
                "{n} header change{}",
                if n == 1 { "" } else { "s" }
            ));
        }
        if parts.is_empty() {
            "no change".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// The summary of `after` against `before`.
pub fn summarize(before: &Record, after: &Record) -> DiffSummary {
    DiffSummary {
        key: part(before.key.as_deref(), after.key.as_deref(), KEY_DIFF_BYTES),
        value: part(
            before.value.as_deref(),
            after.value.as_deref(),
            VALUE_DIFF_BYTES,
        ),
        headers: headers(&before.headers, &after.headers),
    }
}

fn part(a: Option<&[u8]>, b: Option<&[u8]>, cap: usize) -> PartDiff {
    let (before, after) = (Digest::of(a), Digest::of(b));
    let changed = a != b;
    let mut out = PartDiff {
        changed,
        before,
        after,
        diff: None,
        cut: false,
        first_difference_at_byte: None,
    };
    let (Some(a), Some(b)) = (a, b) else {
        return out;
    };
    if !changed {
        return out;
    }
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    out.first_difference_at_byte = Some(prefix as u64);
    let room = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(room)
        .take_while(|(x, y)| x == y)
        .count();
    let (text, cut) = match (std::str::from_utf8(a), std::str::from_utf8(b)) {
        (Ok(_), Ok(_)) => line_diff(a, b, prefix, suffix, cap),
        _ => (hex_window(a, b, prefix), false),
    };
    out.diff = Some(text);
    out.cut = cut;
    out
}

/// `@@ line N @@` and the changed lines of two UTF-8 texts sharing `prefix` and `suffix`
/// bytes, cut at `cap` bytes.
fn line_diff(a: &[u8], b: &[u8], prefix: usize, suffix: usize, cap: usize) -> (String, bool) {
    let start = a[..prefix]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |i| i + 1);
    let a_end = a.len() - suffix;
    let a_line_end = a[a_end..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(a.len(), |i| a_end + i);
    let b_line_end = b.len() - (a.len() - a_line_end);
    let line = 1 + a[..start].iter().filter(|&&c| c == b'\n').count();
    let mut out = format!("@@ line {line} @@\n");
    let mut cut = false;
    // Half the cap for the old lines, half for the new: both sides are always shown.
    let half = cap / 2;
    for (sign, whole, end) in [('-', a, a_line_end), ('+', b, b_line_end)] {
        let mut region = &whole[start..end];
        // A region that runs to the end of the text: empty means no line at all (a pure
        // insertion or removal), and a final line break is not a line of its own.
        if end == whole.len() {
            if region.is_empty() {
                continue;
            }
            region = region.strip_suffix(b"\n").unwrap_or(region);
        }
        let side_start = out.len();
        // Both boundaries are at a line end or an end of the text: valid UTF-8. Only the
        // bytes that can be shown are decoded.
        let shown = &region[..region.len().min(half + LINE_BYTES)];
        let text = String::from_utf8_lossy(shown);
        for l in text.split('\n') {
            if out.len() - side_start >= half {
                cut = true;
                out.push_str("… (cut)\n");
                break;
            }
            out.push(sign);
            out.push(' ');
            push_cut(&mut out, l, LINE_BYTES);
            out.push('\n');
        }
        if shown.len() < region.len() && !cut {
            cut = true;
            out.push_str("… (cut)\n");
        }
    }
    (out, cut)
}

/// Appends `s` cut to at most `max` bytes at a character boundary (with `…` when cut).
fn push_cut(out: &mut String, s: &str, max: usize) {
    if s.len() <= max {
        out.push_str(s);
        return;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.push_str(&s[..end]);
    out.push('…');
}

/// 32 bytes of hex from the 16-byte line holding the first difference, on both sides.
fn hex_window(a: &[u8], b: &[u8], at: usize) -> String {
    let from = at - at % 16;
    let side = |x: &[u8]| {
        let end = x.len().min(from + 32);
        if from >= x.len() {
            "(ends before)".to_string()
        } else {
            to_hex(&x[from..end])
        }
    };
    format!(
        "first difference at byte {at}; bytes {from}.. before: {}\n\
         bytes {from}.. after:  {}\n",
        side(a),
        side(b)
    )
}

/// A header name as a change line shows it (cut to 64 bytes).
pub fn preview_name(name: &str) -> String {
    let mut s = String::new();
    push_cut(&mut s, name, 64);
    s
}

/// A header value as a change line shows it: `null`, `"text"` (cut), or `0x…` hex (cut),
/// with its length when cut.
fn preview_value(v: Option<&[u8]>) -> String {
    let Some(v) = v else {
        return "null".to_string();
    };
    match std::str::from_utf8(v) {
        Ok(t) if !t.chars().any(char::is_control) => {
            let mut s = String::from("\"");
            push_cut(&mut s, t, HEADER_VALUE_SHOWN);
            s.push('"');
            if t.len() > HEADER_VALUE_SHOWN {
                s.push_str(&format!(" ({} bytes)", v.len()));
            }
            s
        }
        _ => {
            let shown = &v[..v.len().min(HEADER_VALUE_SHOWN / 2)];
            let mut s = format!("0x{}", to_hex(shown));
            if shown.len() < v.len() {
                s.push_str(&format!("… ({} bytes)", v.len()));
            }
            s
        }
    }
}

fn headers(a: &[Header], b: &[Header]) -> HeadersDiff {
    let mut out = HeadersDiff {
        changed: a != b,
        before_count: a.len() as u64,
        after_count: b.len() as u64,
        changes: Vec::new(),
        more: 0,
    };
    if !out.changed {
        return out;
    }
    // Names in order of first appearance, before then after.
    let mut names: Vec<&str> = Vec::new();
    for h in a.iter().chain(b) {
        if !names.contains(&h.name.as_str()) {
            names.push(&h.name);
        }
    }
    let values = |hs: &[Header], name: &str| -> Vec<Option<Vec<u8>>> {
        hs.iter()
            .filter(|h| h.name == name)
            .map(|h| h.value.clone())
            .collect()
    };
    let list = |vs: &[Option<Vec<u8>>]| -> String {
        let shown: Vec<String> = vs
            .iter()
            .take(4)
            .map(|v| preview_value(v.as_deref()))
            .collect();
        let more = if vs.len() > 4 {
            format!(", … {} in all", vs.len())
        } else {
            String::new()
        };
        format!("[{}{more}]", shown.join(", "))
    };
    let mut lines: Vec<String> = Vec::new();
    for name in names {
        let (va, vb) = (values(a, name), values(b, name));
        if va == vb {
            continue;
        }
        let n = preview_name(name);
        let line = match (va.as_slice(), vb.as_slice()) {
            ([], [one]) => format!("added {n}: {}", preview_value(one.as_deref())),
            ([], many) => format!("added {n}: {}", list(many)),
            (_, []) => format!("removed {n}"),
            ([x], [y]) => format!(
                "changed {n}: {} → {}",
                preview_value(x.as_deref()),
                preview_value(y.as_deref())
            ),
            (x, y) => format!("changed {n}: {} → {}", list(x), list(y)),
        };
        lines.push(line);
    }
    if lines.is_empty() {
        lines.push("order changed".to_string());
    }
    out.more = lines.len().saturating_sub(HEADER_CHANGES) as u64;
    lines.truncate(HEADER_CHANGES);
    out.changes = lines;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(value: &[u8], headers: Vec<Header>) -> Record {
        Record {
            key: Some(b"k".to_vec()),
            value: Some(value.to_vec()),
            headers,
        }
    }

    fn h(name: &str, v: Option<&[u8]>) -> Header {
        Header {
            name: name.into(),
            value: v.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn a_changed_json_field_is_one_readable_hunk() {
        let a = b"{\n  \"id\": 7,\n  \"amount\": \"12,50\",\n  \"currency\": \"EUR\"\n}\n";
        let b = b"{\n  \"id\": 7,\n  \"amount\": 12.5,\n  \"currency\": \"EUR\"\n}\n";
        let d = summarize(&rec(a, vec![]), &rec(b, vec![]));
        assert!(d.value.changed && !d.key.changed && !d.headers.changed);
        assert_eq!(
            d.value.diff.as_deref(),
            Some("@@ line 3 @@\n-   \"amount\": \"12,50\",\n+   \"amount\": 12.5,\n")
        );
        assert_eq!(
            d.one_line(),
            format!("value {} bytes → {} bytes", a.len(), b.len())
        );
    }

    #[test]
    fn headers_changes_are_named() {
        let a = vec![
            h("traceparent", Some(b"00-a")),
            h("x-tenant", Some(b"acme")),
            h("x-null", None),
        ];
        let b = vec![
            h("x-tenant", Some(b"beta")),
            h("x-null", None),
            h("x-bin", Some(&[0xff, 0])),
        ];
        let d = summarize(&rec(b"v", a), &rec(b"v", b));
        assert_eq!(
            d.headers.changes,
            [
                "removed traceparent",
                "changed x-tenant: \"acme\" → \"beta\"",
                "added x-bin: 0xff00"
            ]
        );
    }

    #[test]
    fn a_huge_value_gives_a_small_summary() {
        let a = vec![b'a'; 10_000_000];
        let mut b = a.clone();
        b[5_000_000] = b'b';
        b.extend_from_slice(&[0xff; 10]);
        let d = summarize(&rec(&a, vec![]), &rec(&b, vec![]));
        assert_eq!(d.value.first_difference_at_byte, Some(5_000_000));
        let json = serde_json::to_string(&d).unwrap();
        assert!(json.len() < MAX_SUMMARY_BYTES, "{}", json.len());
        // A huge single-line text change is cut too.
        let t1 = "x".repeat(3_000_000);
        let t2 = "y".repeat(3_000_000);
        let d = summarize(&rec(t1.as_bytes(), vec![]), &rec(t2.as_bytes(), vec![]));
        assert!(d.value.diff.as_ref().unwrap().len() <= VALUE_DIFF_BYTES + 600);
        assert!(serde_json::to_string(&d).unwrap().len() < MAX_SUMMARY_BYTES);
    }

    #[test]
    fn many_lines_are_cut() {
        let a: String = (0..100_000).map(|i| format!("line {i}\n")).collect();
        let b: String = (0..100_000).map(|i| format!("LINE {i}\n")).collect();
        let d = summarize(&rec(a.as_bytes(), vec![]), &rec(b.as_bytes(), vec![]));
        assert!(d.value.cut);
        assert!(d.value.diff.unwrap().len() < VALUE_DIFF_BYTES + 2 * LINE_BYTES);
    }
}
