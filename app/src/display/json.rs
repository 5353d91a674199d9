//! Re-indenting a JSON payload for display, within a size cap.
//!
//! The re-indenter does not parse into a map, so key order, duplicate keys and number
//! spellings stay exactly as stored. It writes into a [`Clip`] and stops at its cap, and it
//! indents at most [`JSON_INDENT_LEVELS`] levels: indentation is what made a few hundred KB of
//! deep nesting (`[[[[…]]]]`) re-indent into tens of GB (each of `d` lines carries up to `2d`
//! spaces, so `2d²` bytes in all) before the old code cut the result.

use super::caps::JSON_INDENT_LEVELS;
use super::visible::{Clip, Lines, Shown};

/// Indentation of [`JSON_INDENT_LEVELS`] levels, two spaces each.
const INDENT: &str = "                                                                ";
const _: () = assert!(INDENT.len() == 2 * JSON_INDENT_LEVELS);

/// `bytes` re-indented, at most `max` bytes of it; `None` if `bytes` is not one JSON object or
/// array. Characters inside strings are shown as [`Clip`] shows them (a raw U+202E becomes a
/// marker; `\u202e` escapes stay as written).
///
/// Cost: the validation reads all of `bytes` once (serde_json's `IgnoredAny`, which keeps no
/// recursion stack and allocates nothing per value); the re-indenting stops at `max`.
pub fn pretty_json(bytes: &[u8], max: usize) -> Option<Shown> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace())?;
    if !matches!(first, b'{' | b'[') {
        return None;
    }
    // Validate first (whole document, nothing trailing); then reformatting can trust the syntax.
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).ok()?;
    let text = std::str::from_utf8(bytes).ok()?;
    let mut out = Clip::new(max);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = text.chars().peekable();
    let newline = |out: &mut Clip, depth: usize| {
        out.push_plain("\n") && out.push_plain(&INDENT[..2 * depth.min(JSON_INDENT_LEVELS)])
    };
    while let Some(c) = chars.next() {
        if out.is_cut() {
            break;
        }
        if in_string {
            out.push(c, Lines::Mark);
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
                out.push_plain("\"");
            }
            '{' | '[' => {
                out.push(c, Lines::Mark);
                while chars.peek().is_some_and(|n| n.is_ascii_whitespace()) {
                    chars.next();
                }
                if matches!(chars.peek(), Some('}' | ']')) {
                    // Empty container stays on one line: `{}`, `[]`.
                    if let Some(close) = chars.next() {
                        out.push(close, Lines::Mark);
                    }
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c, Lines::Mark);
            }
            ',' => {
                out.push_plain(",");
                newline(&mut out, depth);
            }
            ':' => {
                out.push_plain(": ");
            }
            c if c.is_ascii_whitespace() => {}
            c => {
                out.push(c, Lines::Mark);
            }
        }
    }
    Some(out.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pretty(s: &str) -> Option<String> {
        pretty_json(s.as_bytes(), usize::MAX).map(|s| s.text)
    }

    #[test]
    fn reindents_keeping_order_and_spelling() {
        assert_eq!(
            pretty(r#"{"b":1,"a":[1.50,{}],"s":"x,\"{","d":1,"d":2}"#).as_deref(),
            Some(
                "{\n  \"b\": 1,\n  \"a\": [\n    1.50,\n    {}\n  ],\n  \"s\": \"x,\\\"{\",\n  \"d\": 1,\n  \"d\": 2\n}"
            )
        );
        assert_eq!(pretty(" [ ] ").as_deref(), Some("[]"));
        assert_eq!(pretty("42"), None);
        assert_eq!(pretty("{broken"), None);
        assert_eq!(pretty("{} x"), None);
    }

    #[test]
    fn hidden_characters_in_strings_are_marked() {
        assert_eq!(
            pretty("{\"user\":\"admin\u{202E}nimda\"}").as_deref(),
            Some("{\n  \"user\": \"admin⟨U+202E⟩nimda\"\n}")
        );
    }

    /// The reported blow-up: 300 KB of nesting used to re-indent into 2·d² ≈ 45 GB.
    #[test]
    fn deep_nesting_stays_within_the_cap() {
        let depth = 150_000;
        let mut doc = vec![b'['; depth];
        doc.extend(vec![b']'; depth]);
        let out = pretty_json(&doc, 256 * 1024).expect("valid JSON");
        assert!(out.cut);
        assert!(out.text.len() <= 256 * 1024);
        let widest = out.text.lines().map(str::len).max().unwrap_or(0);
        assert!(widest <= 2 * JSON_INDENT_LEVELS + 1, "{widest}");
        // Objects nest the same way.
        let doc = "{\"a\":".repeat(50_000) + "1" + "}".repeat(50_000).as_str();
        let out = pretty_json(doc.as_bytes(), 64 * 1024).expect("valid JSON");
        assert!(out.cut && out.text.len() <= 64 * 1024);
    }

    #[test]
    fn wide_and_long_documents_stop_at_the_cap() {
        let wide = format!("[{}1]", "1,".repeat(1_000_000));
        let out = pretty_json(wide.as_bytes(), 10_000).expect("valid");
        assert!(out.cut && out.text.len() <= 10_000);
        let long = format!("{{\"s\":\"{}\"}}", "\u{200B}".repeat(500_000));
        let out = pretty_json(long.as_bytes(), 10_000).expect("valid");
        assert!(out.cut && out.text.len() <= 10_000);
        let short = pretty_json(b"{\"a\":1}", 13).expect("valid");
        assert_eq!(
            (short.text.as_str(), short.cut),
            ("{\n  \"a\": 1\n}", false)
        );
    }
}
