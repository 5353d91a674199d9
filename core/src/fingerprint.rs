//! Error fingerprints: dead letters that failed "the same way" share one, so they can be
//! grouped.
//!
//! A fingerprint is 16 lowercase hex chars: the first 8 bytes of
//! SHA-256(`error_class + "\n" + masked(message)`), where masking replaces the parts of a
//! message that vary between occurrences of one error (ids, numbers, quoted values, addresses)
//! with placeholders, and the masked message is cut at 500 chars. Changing the masking changes
//! every fingerprint, so treat it as a stored format.

use std::sync::LazyLock;

use regex::{Captures, Regex};
use sha2::{Digest, Sha256};

/// Masked messages longer than this (in chars) are cut before hashing: beyond it, messages
/// usually differ by payload dumps, not by the error.
const MAX_MASKED_CHARS: usize = 500;

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
        .expect("static regex")
});
/// Double quotes, or single quotes that open a value (not an apostrophe inside a word, as in
/// "can't" or "order's").
static QUOTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#""[^"\n]*"|(^|[^\p{L}\p{N}_'])'[^'\n]*'"#).expect("static regex")
});
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b").expect("static regex")
});
static IPV4: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b\d{1,3}(?:\.\d{1,3}){3}\b").expect("static regex"));
/// `0x...`, or a run of at least 8 hex digits (trace ids, hashes, object addresses).
static HEX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:0[xX][0-9a-fA-F]+|[0-9a-fA-F]{8,})\b").expect("static regex")
});
static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"-?\d+(?:\.\d+)?").expect("static regex"));
static SPACE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s+").expect("static regex"));

/// Masks numbers: standalone ones, and ones glued to a unit (`30000ms`), but not digits that
/// are part of a word (`utf8`, `sha256`, `user17`). A minus after a word char is a hyphen
/// (`order-123` becomes `order-<n>`).
fn mask_numbers(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for m in NUMBER.find_iter(s) {
        let before = s[..m.start()].chars().next_back();
        let word_before = before.is_some_and(|c| c.is_alphanumeric() || c == '_');
        let text = m.as_str();
        let (start, negative) = match text.strip_prefix('-') {
            Some(_) if word_before || before == Some('-') => (m.start() + 1, false),
            Some(_) => (m.start(), true),
            None => (m.start(), false),
        };
        if !negative && word_before && start == m.start() {
            continue;
        }
        out.push_str(&s[last..start]);
        out.push_str("<n>");
        last = m.end();
    }
    out.push_str(&s[last..]);
    out
}

/// The message with its variable parts replaced, for grouping and for showing a group's
/// pattern: UUIDs → `<uuid>`, single- or double-quoted values → `<q>`, e-mail addresses →
/// `<email>`, IPv4 addresses → `<ip>`, `0x..` and runs of ≥ 8 hex digits → `<hex>` (all-digit
/// runs → `<n>`), numbers (integer, decimal, negative) → `<n>`; whitespace runs collapse to one
/// space and the ends are trimmed. Not truncated.
pub fn mask_message(msg: &str) -> String {
    let s = UUID.replace_all(msg, "<uuid>");
    let s = QUOTED.replace_all(&s, |c: &Captures| {
        format!("{}<q>", c.get(1).map_or("", |m| m.as_str()))
    });
    let s = EMAIL.replace_all(&s, "<email>");
    let s = IPV4.replace_all(&s, "<ip>");
    let s = HEX.replace_all(&s, |c: &Captures| {
        if c[0].bytes().all(|b| b.is_ascii_digit()) {
            "<n>"
        } else {
            "<hex>"
        }
    });
    let s = mask_numbers(&s);
    SPACE.replace_all(s.trim(), " ").into_owned()
}

/// Fingerprint of an error: 16 lowercase hex chars (the first 8 bytes of SHA-256 over
/// `error_class + "\n" + masked message`, the masked message cut at 500 chars). A missing
/// class or message hashes as the empty string, so `None`/`None` is one stable fingerprint.
pub fn fingerprint(error_class: Option<&str>, message: Option<&str>) -> String {
    let masked = message.map(mask_message).unwrap_or_default();
    let cut = match masked.char_indices().nth(MAX_MASKED_CHARS) {
        Some((i, _)) => &masked[..i],
        None => &masked,
    };
    let mut h = Sha256::new();
    h.update(error_class.unwrap_or("").as_bytes());
    h.update(b"\n");
    h.update(cut.as_bytes());
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_error_groups_together() {
        let a = fingerprint(
            Some("TimeoutError"),
            Some("Timeout after 30000 ms for order 123"),
        );
        let b = fingerprint(
            Some("TimeoutError"),
            Some("Timeout after 5000 ms for order 98"),
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), 16);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }

    #[test]
    fn different_classes_differ() {
        let m = Some("Timeout after 30000 ms");
        assert_ne!(fingerprint(Some("A"), m), fingerprint(Some("B"), m));
        assert_ne!(fingerprint(None, m), fingerprint(Some("A"), m));
    }

    #[test]
    fn none_is_stable() {
        assert_eq!(fingerprint(None, None), fingerprint(None, None));
        // SHA-256("\n")[..8]: pins the format, since fingerprints are stored.
        assert_eq!(fingerprint(None, None), "01ba4719c80b6fe9");
    }

    #[test]
    fn masks() {
        let cases = [
            (
                "Timeout after 30000 ms for order 123",
                "Timeout after <n> ms for order <n>",
            ),
            ("took 30000ms", "took <n>ms"),
            (
                "value -5 out of range [0, 2.5]",
                "value <n> out of range [<n>, <n>]",
            ),
            ("order-4711 failed", "order-<n> failed"),
            ("utf8 sha256 user17", "utf8 sha256 user17"),
            (
                "id 0b6e6c1e-8c1d-4a53-9f0e-3a3a4a0b1c2d gone",
                "id <uuid> gone",
            ),
            (
                "trace 4bf92f3577b34da6 at 0x7ffdcafe",
                "trace <hex> at <hex>",
            ),
            ("epoch 1718000000123", "epoch <n>"),
            (
                "Unrecognized field \"foo\" (class a.B)",
                "Unrecognized field <q> (class a.B)",
            ),
            ("KeyError: 'user_id'", "KeyError: <q>"),
            ("can't parse order's total", "can't parse order's total"),
            (
                "mail bob@example.com from 10.0.0.12:9092",
                "mail <email> from <ip>:<n>",
            ),
            ("  many\n\tspaces   here ", "many spaces here"),
            (
                "Payment 4711 declined by provider",
                "Payment <n> declined by provider",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(mask_message(input), want, "{input}");
        }
    }

    #[test]
    fn truncates_masked_message() {
        let long_a = format!("{}{}", "x".repeat(500), "tail one");
        let long_b = format!("{}{}", "x".repeat(500), "tail two");
        assert_eq!(
            fingerprint(Some("E"), Some(&long_a)),
            fingerprint(Some("E"), Some(&long_b))
        );
        let short = "x".repeat(499);
        assert_ne!(
            fingerprint(Some("E"), Some(&short)),
            fingerprint(Some("E"), Some(&format!("{short}y")))
        );
        // Multi-byte chars are cut on a char boundary.
        let _ = fingerprint(None, Some(&"é".repeat(1000)));
    }
}
