//! Stored text made safe to look at, within a size cap.
//!
//! A header or payload must not be able to spoof the page around it: bidi controls (U+202E
//! RIGHT-TO-LEFT OVERRIDE, U+2066–2069 isolates, ...) would reorder what follows them, and
//! zero-width or other invisible characters would make two different names look alike. Every
//! such character is shown as a marker `⟨U+202E⟩` instead (in display only: the stored bytes,
//! the raw download and a replay are untouched).
//!
//! [`Clip`] is the one place text for a page is built: it neutralises as it appends and stops
//! at its cap, so the work and memory are bounded by what is shown.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

/// How line breaks (`\n`, `\r`) and tabs are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// Kept as they are (payloads, stack traces, messages: shown in a `<pre>`).
    Keep,
    /// Shown as markers (names and one-line cells, where a break would hide what follows).
    Mark,
}

/// Whether `c` is shown as a `⟨U+XXXX⟩` marker rather than as itself: control characters
/// (C0, DEL, C1; with [`Lines::Mark`] also tab, CR and LF), the line and paragraph separators,
/// format characters (Unicode general category Cf: bidi controls, zero-width characters, soft
/// hyphen, tag characters, ...) and the blank Hangul fillers.
pub fn is_hidden(c: char, lines: Lines) -> bool {
    match c {
        '\n' | '\r' | '\t' => lines == Lines::Mark,
        c if c.is_control() => true,
        c => is_invisible(c),
    }
}

/// Characters that draw nothing or reorder their neighbours. The Cf ranges are Unicode 15.1's
/// `General_Category=Cf` (UnicodeData.txt); U+2028/2029 are Zl/Zp; U+115F, U+1160, U+3164 and
/// U+FFA0 are Hangul fillers, letters that render blank (a known way to fake an empty name).
fn is_invisible(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x115F..=0x1160
            | 0x180E
            | 0x200B..=0x200F
            | 0x2028..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0x3164
            | 0xFEFF
            | 0xFFA0
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

/// Longest marker, `⟨U+E007F⟩`, in bytes.
pub const MARKER_MAX_BYTES: usize = 13;

/// A text builder with a byte cap that shows hidden characters as markers. Once something did
/// not fit, it is [`cut`](Clip::is_cut) and refuses everything after, so callers can stop
/// reading their input.
#[derive(Debug)]
pub struct Clip {
    out: String,
    max: usize,
    cut: bool,
}

impl Clip {
    /// An empty builder that holds at most `max` bytes.
    pub fn new(max: usize) -> Clip {
        Clip {
            out: String::with_capacity(max.min(16 * 1024)),
            max,
            cut: false,
        }
    }

    /// True once something did not fit.
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// Bytes built so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// True when nothing has been built.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Appends text the display code made itself (indentation, punctuation), as it is, if it
    /// fits whole. Returns false (and is cut) if it did not.
    pub fn push_plain(&mut self, s: &str) -> bool {
        if self.cut || self.out.len() + s.len() > self.max {
            self.cut = true;
            return false;
        }
        self.out.push_str(s);
        true
    }

    /// Appends one stored character, as a marker if it is hidden. False (and cut) if it did
    /// not fit.
    pub fn push(&mut self, c: char, lines: Lines) -> bool {
        if self.cut {
            return false;
        }
        if is_hidden(c, lines) {
            let mut marker = String::with_capacity(MARKER_MAX_BYTES);
            // Writing to a String cannot fail.
            let _ = write!(marker, "⟨U+{:04X}⟩", c as u32);
            return self.push_plain(&marker);
        }
        if self.out.len() + c.len_utf8() > self.max {
            self.cut = true;
            return false;
        }
        self.out.push(c);
        true
    }

    /// Appends stored text character by character until the cap. False if it was cut.
    pub fn push_text(&mut self, s: &str, lines: Lines) -> bool {
        s.chars().all(|c| self.push(c, lines))
    }

    /// The text built and whether anything was cut.
    pub fn finish(self) -> Shown {
        Shown {
            text: self.out,
            cut: self.cut,
        }
    }
}

/// Stored text as shown: neutralised and cut at a cap.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shown {
    pub text: String,
    /// True when only the beginning is shown.
    pub cut: bool,
}

/// `s` shown within `max` bytes.
pub fn shown(s: &str, max: usize, lines: Lines) -> Shown {
    let mut clip = Clip::new(max);
    clip.push_text(s, lines);
    clip.finish()
}

/// `s` shown within `max` bytes and `max_lines` lines (line breaks kept).
pub fn shown_lines(s: &str, max: usize, max_lines: usize) -> Shown {
    let mut clip = Clip::new(max);
    let mut lines = 0usize;
    for (i, c) in s.char_indices() {
        if c == '\n' {
            lines += 1;
            if lines >= max_lines {
                // A trailing newline after the last line shown is not a cut.
                let rest_empty = i + 1 == s.len();
                let mut shown = clip.finish();
                shown.cut |= !rest_empty;
                return shown;
            }
        }
        if !clip.push(c, Lines::Keep) {
            break;
        }
    }
    clip.finish()
}

/// A one-line name within `max` bytes, with `…` appended when cut.
pub fn name(s: &str, max: usize) -> String {
    let shown = shown(s, max, Lines::Mark);
    if shown.cut {
        shown.text + "…"
    } else {
        shown.text
    }
}

/// True if showing `s` would change it (it holds a hidden character).
pub fn has_hidden(s: &str, lines: Lines) -> bool {
    s.chars().any(|c| is_hidden(c, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_and_invisible_characters_are_shown_as_markers() {
        let spoof = "invoice\u{202E}fdp.exe\u{2066}x\u{2069}\u{200B}\u{FEFF}\u{E0041}";
        assert_eq!(
            shown(spoof, 1000, Lines::Keep).text,
            "invoice⟨U+202E⟩fdp.exe⟨U+2066⟩x⟨U+2069⟩⟨U+200B⟩⟨U+FEFF⟩⟨U+E0041⟩"
        );
        assert_eq!(
            shown("a\0b\u{7f}\u{85}", 100, Lines::Keep).text,
            "a⟨U+0000⟩b⟨U+007F⟩⟨U+0085⟩"
        );
        assert_eq!(shown("a\r\n\tb", 100, Lines::Keep).text, "a\r\n\tb");
        assert_eq!(name("a\r\n\tb", 100), "a⟨U+000D⟩⟨U+000A⟩⟨U+0009⟩b");
        // Ordinary non-ASCII text is left alone.
        assert_eq!(
            shown("Zürich 東京 👍", 100, Lines::Mark).text,
            "Zürich 東京 👍"
        );
        assert!(has_hidden("x\u{2067}", Lines::Mark));
        assert!(!has_hidden("x\ny", Lines::Keep));
    }

    #[test]
    fn caps_hold_with_markers_and_multibyte_text() {
        for s in [
            "é".repeat(10_000),
            "\u{202E}".repeat(10_000),
            "\u{E007F}".repeat(10_000),
            "a".repeat(10_000),
        ] {
            let out = shown(&s, 1000, Lines::Mark);
            assert!(out.cut && out.text.len() <= 1000, "{}", out.text.len());
            assert!(out.text.len() > 1000 - MARKER_MAX_BYTES);
        }
        assert_eq!(name(&"x".repeat(300), 10), "xxxxxxxxxx…");
        assert!(!shown("abc", 3, Lines::Mark).cut);
    }

    #[test]
    fn line_caps() {
        let s = "a\nb\nc\n";
        assert_eq!(
            shown_lines(s, 100, 3),
            Shown {
                text: "a\nb\nc".into(),
                cut: false
            }
        );
        assert_eq!(
            shown_lines(s, 100, 2),
            Shown {
                text: "a\nb".into(),
                cut: true
            }
        );
        assert_eq!(
            shown_lines(s, 100, 10),
            Shown {
                text: s.into(),
                cut: false
            }
        );
        let many = "x\n".repeat(1_000_000);
        let out = shown_lines(&many, 1_000_000, 100);
        assert!(out.cut && out.text.lines().count() == 100);
    }
}
