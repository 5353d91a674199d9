//! Turning stored values into text for the page: times, shortened messages, payloads (JSON,
//! text or a hex dump), header tables, stack traces and list rows. Pure functions, the same on
//! the server and in the browser, so a hydrated page never disagrees with the server-rendered
//! one.
//!
//! Nothing here changes what is stored: this is display only (invariant 2, "bytes are
//! sacred"). Everything a page shows of a record is built within the [`caps`] (stopping while
//! building, never cutting afterwards) and with hidden characters made visible
//! ([`visible`]), so no record can make a page slow or large, or spoof it.

pub mod caps;
pub mod headers;
pub mod json;
pub mod payload;
pub mod record;
pub mod schema;
pub mod visible;

pub use headers::{HeaderRow, HeaderRows, HeaderValue};
pub use json::pretty_json;
pub use payload::{hex_bytes, hex_dump, HexLine, Payload, PayloadBody, PayloadCaps};
pub use visible::Shown;

use chrono::{DateTime, Utc};

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
}
