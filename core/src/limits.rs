//! Caps on the normalised (decoded) fields of a dead letter, applied when it is stored.
//!
//! The raw record (key, value, headers) is always kept whole, byte for byte; the normalised
//! fields are derived from it, so cutting them loses nothing that cannot be read again from the
//! raw headers. They are cut because databases limit what an index can hold: PostgreSQL's
//! btree refuses an index entry over 2,704 bytes ("index row size ... exceeds btree version 4
//! maximum 2704"), and before these caps one long `error_class` header stopped ingest on
//! every partition (the batch was retried for ever). Every indexed text column therefore has
//! a cap well under that limit, the same on SQLite and PostgreSQL so that a filter matches the
//! same rows on either. The caps are documented in `docs/limits.md`.
//!
//! A value over its cap is cut at the last UTF-8 character boundary at or below the cap and
//! the record gets a decode warning naming the field and its full size (so it is flagged
//! `malformed` and the cut is visible).

use std::borrow::Cow;

use crate::model::Normalized;

/// Longest stored `source_topic`, bytes: Kafka's own limit for a topic name (249 chars of
/// `[a-zA-Z0-9._-]`, so 249 bytes); anything longer is not a topic name.
pub const SOURCE_TOPIC_MAX_BYTES: usize = 249;
/// Longest stored `consumer_group`, bytes (btree-indexed).
pub const CONSUMER_GROUP_MAX_BYTES: usize = 1024;
/// Longest stored `error_class`, bytes (btree-indexed; a Java class name is rarely 200).
pub const ERROR_CLASS_MAX_BYTES: usize = 1024;
/// Longest stored `message_id`, bytes (btree-indexed).
pub const MESSAGE_ID_MAX_BYTES: usize = 1024;
/// Longest stored `error_message`, bytes (trigram-indexed on PostgreSQL, shown in the list,
/// searched by `q`).
pub const ERROR_MESSAGE_MAX_BYTES: usize = 16 * 1024;
/// Longest stored `stack_trace`, bytes (not indexed; the raw header keeps the whole trace).
pub const STACK_TRACE_MAX_BYTES: usize = 1024 * 1024;
/// Most decode warnings stored per record; the rest are counted in one last warning.
pub const MAX_DECODE_WARNINGS: usize = 100;
/// Longest stored decode warning, bytes.
pub const DECODE_WARNING_MAX_BYTES: usize = 1024;

/// Cap on every text field of the *reduced form*, bytes: what ingest stores when the database
/// refused a record as decoded (see `docs/limits.md`, "reduced form").
pub const REDUCED_TEXT_MAX_BYTES: usize = 256;

/// `s` cut to at most `max` bytes at a UTF-8 character boundary (borrowed when it fits).
pub fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `normalized` with every text field within its cap, and one decode warning per field that
/// was cut (plus the warning list itself capped). Borrowed when nothing needed cutting, which
/// is the common case: no copy of a large stack trace.
pub fn fit(normalized: &Normalized) -> Cow<'_, Normalized> {
    let n = normalized;
    let fields: [(&str, &Option<String>, usize); 6] = [
        ("source_topic", &n.source_topic, SOURCE_TOPIC_MAX_BYTES),
        (
            "consumer_group",
            &n.consumer_group,
            CONSUMER_GROUP_MAX_BYTES,
        ),
        ("error_class", &n.error_class, ERROR_CLASS_MAX_BYTES),
        ("message_id", &n.message_id, MESSAGE_ID_MAX_BYTES),
        ("error_message", &n.error_message, ERROR_MESSAGE_MAX_BYTES),
        ("stack_trace", &n.stack_trace, STACK_TRACE_MAX_BYTES),
    ];
    let over_cap = fields
        .iter()
        .any(|(_, v, max)| v.as_ref().is_some_and(|s| s.len() > *max));
    let warnings_over = n.decode_warnings.len() > MAX_DECODE_WARNINGS
        || n.decode_warnings
            .iter()
            .any(|w| w.len() > DECODE_WARNING_MAX_BYTES);
    if !over_cap && !warnings_over {
        return Cow::Borrowed(normalized);
    }
    let mut out = normalized.clone();
    let mut cut_warnings = Vec::new();
    for (name, value, max) in [
        (
            "source_topic",
            &mut out.source_topic,
            SOURCE_TOPIC_MAX_BYTES,
        ),
        (
            "consumer_group",
            &mut out.consumer_group,
            CONSUMER_GROUP_MAX_BYTES,
        ),
        ("error_class", &mut out.error_class, ERROR_CLASS_MAX_BYTES),
        ("message_id", &mut out.message_id, MESSAGE_ID_MAX_BYTES),
        (
            "error_message",
            &mut out.error_message,
            ERROR_MESSAGE_MAX_BYTES,
        ),
        ("stack_trace", &mut out.stack_trace, STACK_TRACE_MAX_BYTES),
    ] {
        if let Some(s) = value {
            if s.len() > max {
                let full = s.len();
                let kept = cut(s, max).len();
                s.truncate(kept);
                cut_warnings.push(format!(
                    "{name} is {full} bytes; stored cut to {kept} bytes (cap {max}; the raw \
                     headers keep it whole)"
                ));
            }
        }
    }
    out.decode_warnings = fit_warnings(out.decode_warnings, cut_warnings);
    Cow::Owned(out)
}

/// `warnings` then `extra`, each cut to [`DECODE_WARNING_MAX_BYTES`], at most
/// [`MAX_DECODE_WARNINGS`] in all (`extra` — redrive's own notes — is always kept; the last
/// kept slot says how many decoder warnings were left out).
pub fn fit_warnings(warnings: Vec<String>, extra: Vec<String>) -> Vec<String> {
    let room = MAX_DECODE_WARNINGS.saturating_sub(extra.len()).max(1);
    let total = warnings.len();
    let mut out: Vec<String> = Vec::with_capacity(total.min(room) + extra.len());
    let keep = if total > room { room - 1 } else { total };
    for w in warnings.into_iter().take(keep) {
        out.push(cut(&w, DECODE_WARNING_MAX_BYTES).to_string());
    }
    if total > keep {
        out.push(format!(
            "{} more decode warnings not stored (at most {MAX_DECODE_WARNINGS} are kept)",
            total - keep
        ));
    }
    out.extend(
        extra
            .into_iter()
            .map(|w| cut(&w, DECODE_WARNING_MAX_BYTES).to_string()),
    );
    out
}

/// The *reduced form* of `normalized`, for a record the database refused as decoded: every
/// text field cut to [`REDUCED_TEXT_MAX_BYTES`] and made plain printable ASCII (anything else
/// becomes `?`: a database whose encoding cannot hold a character refuses the whole row), the
/// stack trace dropped (the raw header keeps it), numbers kept, and a warning saying why.
pub fn reduce(normalized: &Normalized, reason: &str) -> Normalized {
    let text = |s: &Option<String>| s.as_deref().map(|t| ascii(t, REDUCED_TEXT_MAX_BYTES));
    let warnings: Vec<String> = normalized
        .decode_warnings
        .iter()
        .map(|w| ascii(w, DECODE_WARNING_MAX_BYTES))
        .collect();
    let note = ascii(
        &format!(
            "stored in reduced form: the database refused this record as decoded ({reason}); \
             the raw key, value and headers are kept whole, decoded text fields are cut to \
             {REDUCED_TEXT_MAX_BYTES} ASCII bytes and the stack trace is left out"
        ),
        DECODE_WARNING_MAX_BYTES,
    );
    Normalized {
        source_topic: text(&normalized.source_topic),
        source_partition: normalized.source_partition,
        source_offset: normalized.source_offset,
        source_timestamp_ms: normalized.source_timestamp_ms,
        consumer_group: text(&normalized.consumer_group),
        error_class: text(&normalized.error_class),
        error_message: text(&normalized.error_message),
        stack_trace: None,
        retry_count: normalized.retry_count,
        message_id: text(&normalized.message_id),
        failed_at_ms: normalized.failed_at_ms,
        decode_warnings: fit_warnings(warnings, vec![note]),
    }
}

/// `s` as printable ASCII (space to `~`; anything else becomes `?`), at most `max` bytes.
pub fn ascii(s: &str, max: usize) -> String {
    s.chars()
        .take(max)
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_respects_char_boundaries() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("abc", 2), "ab");
        // "é" is two bytes: cutting inside it keeps the character out.
        assert_eq!(cut("aé", 2), "a");
        assert_eq!(cut("", 0), "");
    }

    #[test]
    fn fit_borrows_when_within_caps_and_cuts_with_a_warning() {
        let n = Normalized {
            error_class: Some("com.example.Boom".into()),
            ..Normalized::default()
        };
        assert!(matches!(fit(&n), Cow::Borrowed(_)));

        let long = "é".repeat(3000); // 6000 bytes
        let n = Normalized {
            error_class: Some(long.clone()),
            source_topic: Some("t".repeat(300)),
            decode_warnings: vec!["odd".into()],
            ..Normalized::default()
        };
        let f = fit(&n);
        let class = f.error_class.as_deref().unwrap();
        assert!(class.len() <= ERROR_CLASS_MAX_BYTES && class.len() >= ERROR_CLASS_MAX_BYTES - 1);
        assert!(long.starts_with(class));
        assert_eq!(f.source_topic.as_deref().unwrap().len(), 249);
        assert_eq!(f.decode_warnings[0], "odd");
        assert!(f.decode_warnings[1].starts_with("source_topic is 300 bytes"));
        assert!(f.decode_warnings[2].starts_with("error_class is 6000 bytes"));
    }

    #[test]
    fn warnings_are_capped_and_counted() {
        let many: Vec<String> = (0..10_000).map(|i| format!("w{i}")).collect();
        let out = fit_warnings(many, vec!["mine".into()]);
        assert_eq!(out.len(), MAX_DECODE_WARNINGS);
        assert_eq!(out.last().unwrap(), "mine");
        assert!(out[MAX_DECODE_WARNINGS - 2].starts_with("9902 more decode warnings"));
        let out = fit_warnings(vec!["x".repeat(5000)], vec![]);
        assert_eq!(out[0].len(), DECODE_WARNING_MAX_BYTES);
    }

    #[test]
    fn reduced_form_is_short_printable_ascii() {
        let n = Normalized {
            error_class: Some(format!("Bad\u{0}\u{202e}{}", "x".repeat(1000))),
            stack_trace: Some("trace".into()),
            retry_count: Some(3),
            ..Normalized::default()
        };
        let r = reduce(&n, "index row size 3240 exceeds maximum 2704");
        let class = r.error_class.unwrap();
        assert!(class.starts_with("Bad??x"));
        assert_eq!(class.len(), REDUCED_TEXT_MAX_BYTES);
        assert_eq!(r.stack_trace, None);
        assert_eq!(r.retry_count, Some(3));
        assert!(r.decode_warnings[0].contains("reduced form"));
        assert!(r.decode_warnings[0].contains("2704"));
    }
}
