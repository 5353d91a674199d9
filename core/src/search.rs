//! Free-text search (`q`): what is searched, and where a match is (`docs/triage.md`,
//! "Search"). Pure functions, shared by the store (what ingest indexes) and the pages (the
//! highlighted excerpt).
//!
//! `q` matches, case-insensitively, a substring of any of three fields of a dead letter:
//!
//! - the error message (stored whole, at most 16 KiB: `crate::limits`);
//! - the first [`INDEXED_BYTES`] of the stack trace;
//! - the first [`INDEXED_BYTES`] of the payload when it is text: valid UTF-8 with no control
//!   characters but tab, CR and LF (the same rule the detail page uses to show a payload as
//!   text or JSON). A binary value, a tombstone and an empty value are not searched.
//!
//! The caps bound the index whatever a record's size: a 50 MiB JSON value costs the index
//! 8 KiB, like an 8 KiB one.

use serde::{Deserialize, Serialize};

/// How much of a stack trace and of a text payload is searched: the first 8 KiB (bytes of
/// UTF-8, cut at the last character boundary at or below it).
pub const INDEXED_BYTES: usize = 8 * 1024;

/// Shortest `q`, in characters, that the trigram indexes can serve (SQLite FTS5's `trigram`
/// tokenizer and PostgreSQL's `pg_trgm` both index runs of 3 characters). A shorter `q` is
/// still answered, by reading the searched text of the newest dead letters only (the
/// store's bounded scan, `docs/triage.md`).
pub const MIN_INDEXED_CHARS: usize = 3;

/// Longest `q`, in characters: a search term, not a document (a longer one is refused with a
/// message, `crate::filter::FilterError::QueryTooLong`).
pub const MAX_QUERY_CHARS: usize = 256;

/// Characters of context the list shows before and after a match.
pub const CONTEXT_BEFORE_CHARS: usize = 40;
pub const CONTEXT_AFTER_CHARS: usize = 80;

/// Where a dead letter matched `q`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchField {
    Message,
    StackTrace,
    Payload,
}

impl MatchField {
    /// The API's name: `message`, `stack_trace`, `payload`.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchField::Message => "message",
            MatchField::StackTrace => "stack_trace",
            MatchField::Payload => "payload",
        }
    }

    /// What the list calls it.
    pub fn label(self) -> &'static str {
        match self {
            MatchField::Message => "in the message",
            MatchField::StackTrace => "in the stack trace",
            MatchField::Payload => "in the payload",
        }
    }
}

/// The first match of `q` in one dead letter: the field, and an excerpt around the match in
/// three parts (text, not markup: a page escapes and neutralises each part as any stored text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchMatch {
    pub field: MatchField,
    /// Up to [`CONTEXT_BEFORE_CHARS`] characters before the match.
    pub before: String,
    /// The matched text, as stored (its case may differ from `q`'s).
    pub matched: String,
    /// Up to [`CONTEXT_AFTER_CHARS`] characters after the match.
    pub after: String,
    /// Text precedes `before` / follows `after` in the field.
    pub cut_before: bool,
    pub cut_after: bool,
}

/// The first `max` bytes of `s`, cut at the last character boundary at or below `max`.
pub fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The part of a stack trace that is searched: its first [`INDEXED_BYTES`].
pub fn stack_trace_text(stack_trace: &str) -> &str {
    prefix(stack_trace, INDEXED_BYTES)
}

/// The part of a payload that is searched: its first [`INDEXED_BYTES`] when the whole value is
/// text (valid UTF-8, no control characters but tab, CR and LF); `None` for binary, empty and
/// null values. One pass over the value (it is validated whole, so a value that turns binary
/// after 8 KiB is binary).
pub fn payload_text(value: Option<&[u8]>) -> Option<&str> {
    let text = std::str::from_utf8(value?).ok()?;
    if text.is_empty()
        || text
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return None;
    }
    Some(prefix(text, INDEXED_BYTES))
}

/// [`payload_text`] of the first bytes of a value (at most [`INDEXED_BYTES`] of them, as an
/// excerpt reads them): a character cut at the end is dropped. `None` for a prefix that is
/// not text. A value that turns binary further on, and so was not searched, still gives its
/// text here; an excerpt only looks in it when nothing searched before it holds the term.
pub fn payload_prefix_text(prefix: Option<&[u8]>) -> Option<&str> {
    let bytes = prefix?;
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&bytes[..e.valid_up_to()]).ok()?,
        Err(_) => return None,
    };
    payload_text(Some(text.as_bytes()))
}

/// `q` as an SQLite FTS5 query: one phrase, the whole text in double quotes (a `"` doubled),
/// which the trigram tokenizer turns into "this substring". `None` when `q` is shorter than
/// [`MIN_INDEXED_CHARS`] characters (the trigram index cannot serve it).
pub fn fts_phrase(q: &str) -> Option<String> {
    if q.chars().count() < MIN_INDEXED_CHARS {
        return None;
    }
    Some(format!("\"{}\"", q.replace('"', "\"\"")))
}

/// The word of `q` (a run of letters and digits, as `pg_trgm` splits text) most likely to be
/// rare in the searched text: the longest that holds a digit and has at least 4 characters
/// (an order number, an id, a UUID's part); the first of equals. A trigram index looks it up
/// far faster than the whole of `q` when `q` also holds words found in nearly every row
/// (`order 123457 after`: for the whole, the index reads the long lists of `ord`, `der`,
/// `aft`, ... for every candidate). `None` when there is no such word — a word of letters
/// only is too often in every dead letter of a DLQ (`processing`, `order`), and a 3-character
/// one is a single trigram (`777` is in every thousandth number) — or when the word is all of
/// `q` (then it is no cheaper than `q`).
///
/// A dead letter that contains `q` contains each of its words (case folded character by
/// character), so the word's matches are a superset of `q`'s.
pub fn rarest_word(q: &str) -> Option<&str> {
    let best = q
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > MIN_INDEXED_CHARS && w.chars().any(char::is_numeric))
        .enumerate()
        .max_by_key(|(i, w)| (w.chars().count(), std::cmp::Reverse(*i)))
        .map(|(_, w)| w)?;
    (best.len() < q.len()).then_some(best)
}

/// The word a search asks the trigram index for before it reads any dead letter (SQLite's
/// rare-word probe, `core/src/store/search.rs`, step 0): [`rarest_word`], or `q` itself when
/// `q` is one such word (an order number or an id searched alone). `None` when `q` holds no
/// word of at least 4 characters with a digit.
pub fn probe_word(q: &str) -> Option<&str> {
    rarest_word(q).or_else(|| {
        let alone = q.chars().count() > MIN_INDEXED_CHARS
            && q.chars().all(char::is_alphanumeric)
            && q.chars().any(char::is_numeric);
        alone.then_some(q)
    })
}

/// Lowercases `s` and remembers, for every byte of the result, the byte offset in `s` of the
/// character it came from (a character may lowercase to several).
fn folded(s: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(s.len());
    let mut origin = Vec::with_capacity(s.len());
    for (i, c) in s.char_indices() {
        for l in c.to_lowercase() {
            let before = out.len();
            out.push(l);
            origin.extend(std::iter::repeat_n(i, out.len() - before));
        }
    }
    (out, origin)
}

/// The first case-insensitive occurrence of `q` in `text` (Unicode lowercase on both sides),
/// with its context: `None` when there is none. Linear in `text` and `q` (one lowercase copy
/// of each, then a substring search).
pub fn find_match(field: MatchField, text: &str, q: &str) -> Option<SearchMatch> {
    let needle: String = q.chars().flat_map(char::to_lowercase).collect();
    if needle.is_empty() {
        return None;
    }
    let (hay, origin) = folded(text);
    let at = hay.find(&needle)?;
    let start = origin[at];
    // The match ends after the original character that the match's last byte came from.
    let last = origin[at + needle.len() - 1];
    let end = last + text[last..].chars().next().map_or(0, char::len_utf8);
    let head = &text[..start];
    let tail = &text[end..];
    let before_start = head
        .char_indices()
        .rev()
        .nth(CONTEXT_BEFORE_CHARS - 1)
        .map_or(0, |(i, _)| i);
    let after_end = tail
        .char_indices()
        .nth(CONTEXT_AFTER_CHARS)
        .map_or(tail.len(), |(i, _)| i);
    Some(SearchMatch {
        field,
        before: head[before_start..].to_string(),
        matched: text[start..end].to_string(),
        after: tail[..after_end].to_string(),
        cut_before: before_start > 0,
        cut_after: after_end < tail.len(),
    })
}

/// Where `q` is in a dead letter's searched text: the message first, then the stack trace,
/// then the payload (the order the list shows them in).
pub fn locate(
    q: &str,
    message: Option<&str>,
    stack_trace: Option<&str>,
    payload: Option<&str>,
) -> Option<SearchMatch> {
    [
        (MatchField::Message, message),
        (MatchField::StackTrace, stack_trace),
        (MatchField::Payload, payload),
    ]
    .into_iter()
    .find_map(|(field, text)| find_match(field, text?, q))
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_rarest_word_is_the_longest_with_a_digit() {
        assert_eq!(rarest_word("order 123457 after"), Some("123457"));
        assert_eq!(rarest_word("id 4242 or 123456"), Some("123456"));
        assert_eq!(
            rarest_word("a1b2 c3d4"),
            Some("a1b2"),
            "the first of equals"
        );
        assert_eq!(
            rarest_word("3f2a9c4e-77b1-4c1e-9d2a-0b5e6f7a8c9d"),
            Some("0b5e6f7a8c9d")
        );
        assert_eq!(rarest_word("order-42xy"), Some("42xy"));
        assert_eq!(rarest_word("заказ 2024 ошибка"), Some("2024"));
        // Letters only, or 3 characters: none.
        assert_eq!(rarest_word("while processing"), None);
        assert_eq!(rarest_word("order 777 after"), None);
        // A word that is all of `q` is no cheaper than `q`.
        assert_eq!(rarest_word("123457"), None);
        assert_eq!(rarest_word(""), None);
    }

    #[test]
    fn the_probe_word_is_the_rarest_or_the_whole_of_a_one_word_term() {
        assert_eq!(probe_word("order 123457 after"), Some("123457"));
        assert_eq!(probe_word("123457"), Some("123457"));
        assert_eq!(probe_word("0b5e6f7a8c9d"), Some("0b5e6f7a8c9d"));
        // Letters only, 3 characters, or not one word: none.
        assert_eq!(probe_word("processing"), None);
        assert_eq!(probe_word("777"), None);
        assert_eq!(probe_word("order 777"), None);
        assert_eq!(probe_word(""), None);
    }
    use super::*;

    #[test]
    fn a_payloads_first_bytes_give_its_searched_text() {
        // "é" is 2 bytes: the first 8,193 bytes of 'a' + "é"… end inside a character.
        let s = format!("a{}", "é".repeat(INDEXED_BYTES));
        let cut = &s.as_bytes()[..INDEXED_BYTES];
        assert_eq!(
            payload_prefix_text(Some(cut)),
            payload_text(Some(s.as_bytes())),
            "the same text as the whole value gives"
        );
        assert_eq!(payload_prefix_text(Some(b"{\"a\": 1}")), Some("{\"a\": 1}"));
        // Invalid inside, not only cut at the end: binary.
        assert_eq!(payload_prefix_text(Some(&[b'a', 0xff, b'b'])), None);
        assert_eq!(payload_prefix_text(Some(b"nul\0")), None);
        assert_eq!(payload_prefix_text(Some(b"")), None);
        assert_eq!(payload_prefix_text(None), None);
    }

    #[test]
    fn payload_text_is_utf8_without_controls_and_capped() {
        assert_eq!(payload_text(Some(b"{\"a\": 1}\n")), Some("{\"a\": 1}\n"));
        assert_eq!(
            payload_text(Some(b"plain\ttext\r\n")),
            Some("plain\ttext\r\n")
        );
        assert_eq!(payload_text(None), None);
        assert_eq!(payload_text(Some(b"")), None);
        assert_eq!(payload_text(Some(&[0xde, 0xad, 0xbe, 0xef])), None);
        assert_eq!(payload_text(Some(b"text\0with nul")), None);
        assert_eq!(payload_text(Some(b"bell\x07")), None);
        // Whole value checked: binary after the indexed prefix is still binary.
        let mut v = vec![b'a'; INDEXED_BYTES + 10];
        assert_eq!(payload_text(Some(&v)).map(str::len), Some(INDEXED_BYTES));
        v.push(0xff);
        assert_eq!(payload_text(Some(&v)), None);
        // Cut on a character boundary: 'é' is 2 bytes.
        let s = "é".repeat(INDEXED_BYTES);
        let p = payload_text(Some(s.as_bytes())).expect("text");
        assert_eq!(p.len(), INDEXED_BYTES);
        let s = format!("a{}", "é".repeat(INDEXED_BYTES));
        let p = payload_text(Some(s.as_bytes())).expect("text");
        assert_eq!(p.len(), INDEXED_BYTES - 1);
    }

    #[test]
    fn stack_trace_prefix() {
        let t = "x".repeat(INDEXED_BYTES * 3);
        assert_eq!(stack_trace_text(&t).len(), INDEXED_BYTES);
        assert_eq!(stack_trace_text("short"), "short");
    }

    #[test]
    fn fts_phrase_quotes_and_needs_three_characters() {
        assert_eq!(fts_phrase("ab"), None);
        assert_eq!(fts_phrase("né"), None);
        assert_eq!(fts_phrase("abc").as_deref(), Some("\"abc\""));
        assert_eq!(
            fts_phrase("say \"hi\" OR x*").as_deref(),
            Some("\"say \"\"hi\"\" OR x*\"")
        );
    }

    #[test]
    fn finds_case_insensitively_with_context() {
        let m = find_match(MatchField::StackTrace, "at Foo.BAR(Foo.java:1)", "foo.bar").unwrap();
        assert_eq!(m.field, MatchField::StackTrace);
        assert_eq!((m.before.as_str(), m.matched.as_str()), ("at ", "Foo.BAR"));
        assert_eq!(m.after, "(Foo.java:1)");
        assert!(!m.cut_before && !m.cut_after);

        let long = format!("{}needle{}", "a".repeat(100), "b".repeat(100));
        let m = find_match(MatchField::Payload, &long, "NEEDLE").unwrap();
        assert_eq!(m.before, "a".repeat(CONTEXT_BEFORE_CHARS));
        assert_eq!(m.after, "b".repeat(CONTEXT_AFTER_CHARS));
        assert!(m.cut_before && m.cut_after);
        assert_eq!(find_match(MatchField::Message, "abc", "abd"), None);
    }

    #[test]
    fn finds_across_unicode_case_and_multibyte_text() {
        // 'É' lowercases to 'é' (same byte length); 'İ' lowercases to two characters.
        let m = find_match(MatchField::Message, "Ünïcode ÉCOLE ok", "école").unwrap();
        assert_eq!(m.matched, "ÉCOLE");
        assert_eq!(m.before, "Ünïcode ");
        let m = find_match(MatchField::Message, "xİstanbul", "i̇stan").unwrap();
        assert_eq!(m.matched, "İstan");
        assert_eq!(m.before, "x");
    }

    #[test]
    fn locate_prefers_message_then_stack_then_payload() {
        let m = locate("key", Some("no"), Some("the key"), Some("key too")).unwrap();
        assert_eq!(m.field, MatchField::StackTrace);
        let m = locate("key", None, None, Some("{\"key\":1}")).unwrap();
        assert_eq!(m.field, MatchField::Payload);
        assert_eq!(locate("zzz", Some("a"), None, None), None);
    }
}
