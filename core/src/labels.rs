//! Triage labels and notes on a dead letter or an error group (a fingerprint): the rules for
//! what a label and a note may be, and the shapes the store, the API and the pages share.
//!
//! A label is a short tag an on-call engineer puts on what they have looked at — `needs-fix`,
//! `known: INC-1234`, `hard-case` (a record worth keeping as an example: an odd encoding, a
//! poison message that fooled a retry policy) — and filters by later (`label=` in the shared
//! [`crate::Filter`]). A note is one free text per record or group, edited in place.
//! The limits are in `docs/limits.md`, "Labels and notes".

use serde::{Deserialize, Serialize};

/// Longest label, in characters (after trimming).
pub const MAX_LABEL_CHARS: usize = 64;
/// Most labels on one dead letter, and on one error group.
pub const MAX_LABELS_PER_RECORD: usize = 20;
/// Longest note, in characters (after trimming).
pub const MAX_NOTE_CHARS: usize = 4000;

/// Why a label or a note was refused; the message says what to send instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    #[error("a label cannot be empty")]
    Empty,
    #[error("a label is at most {MAX_LABEL_CHARS} characters (got {0})")]
    TooLong(usize),
    #[error(
        "a label may hold letters, digits, spaces and . _ - : / # @ + = (got `{0}`); \
         it starts with a letter or a digit"
    )]
    BadCharacter(String),
    #[error("a note is at most {MAX_NOTE_CHARS} characters (got {0})")]
    NoteTooLong(usize),
}

/// Checks and normalises a label: trimmed, inner runs of spaces collapsed to one, 1 to
/// [`MAX_LABEL_CHARS`] characters of Unicode letters and digits, space and `. _ - : / # @ +
/// =`, starting with a letter or a digit. Labels compare exactly (case-sensitive): `INC-1234`
/// stays as typed.
///
/// Errors: [`LabelError::Empty`], [`LabelError::TooLong`], [`LabelError::BadCharacter`].
pub fn parse_label(raw: &str) -> Result<String, LabelError> {
    let label = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    if label.is_empty() {
        return Err(LabelError::Empty);
    }
    let n = label.chars().count();
    if n > MAX_LABEL_CHARS {
        return Err(LabelError::TooLong(n));
    }
    let allowed = |c: char| c.is_alphanumeric() || " ._-:/#@+=".contains(c);
    let first_ok = label.chars().next().is_some_and(char::is_alphanumeric);
    if !first_ok || !label.chars().all(allowed) {
        // Show what was sent, but never a control character (it goes into a message).
        let shown: String = raw
            .chars()
            .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
            .take(MAX_LABEL_CHARS + 8)
            .collect();
        return Err(LabelError::BadCharacter(shown));
    }
    Ok(label)
}

/// Checks and normalises a note: surrounding whitespace trimmed, U+0000 replaced by U+FFFD
/// (PostgreSQL text cannot hold it), at most [`MAX_NOTE_CHARS`] characters. `None` means
/// "no note" (an empty text clears it). Line breaks and any other text are kept; pages render
/// a note as text, never as HTML.
///
/// Errors: [`LabelError::NoteTooLong`].
pub fn parse_note(raw: &str) -> Result<Option<String>, LabelError> {
    let note = raw.trim().replace('\0', "\u{FFFD}");
    if note.is_empty() {
        return Ok(None);
    }
    let n = note.chars().count();
    if n > MAX_NOTE_CHARS {
        return Err(LabelError::NoteTooLong(n));
    }
    Ok(Some(note))
}

/// What a label or note is on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// A dead letter, by id.
    DeadLetter(i64),
    /// An error group, by fingerprint (16 lowercase hex characters).
    Group(String),
}

impl Target {
    /// `dead letter 12` / `error group 0123abcd…`, for messages.
    pub fn describe(&self) -> String {
        match self {
            Target::DeadLetter(id) => format!("dead letter {id}"),
            Target::Group(fp) => format!("error group {fp}"),
        }
    }
}

/// One label as stored: who put it there, when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelInfo {
    pub label: String,
    /// Epoch ms.
    pub added_at_ms: i64,
    pub added_by: String,
}

/// A note as stored: the text and its last edit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoteInfo {
    pub text: String,
    /// Epoch ms of the last edit.
    pub updated_at_ms: i64,
    pub updated_by: String,
}

/// The labels (sorted by label) and the note of one dead letter or one error group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Annotations {
    pub labels: Vec<LabelInfo>,
    pub note: Option<NoteInfo>,
}

/// A dead letter's triage: its own labels and note, and those of its error group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Triage {
    pub fingerprint: String,
    pub record: Annotations,
    pub group: Annotations,
}

/// A label change over many dead letters (by ids or by filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LabelOp {
    Add,
    Remove,
}

impl LabelOp {
    /// The audit action name: `label_add` / `label_remove`.
    pub fn audit_action(self) -> &'static str {
        match self {
            LabelOp::Add => "label_add",
            LabelOp::Remove => "label_remove",
        }
    }

    /// The history event kind: `label_added` / `label_removed`.
    pub fn event_kind(self) -> &'static str {
        match self {
            LabelOp::Add => "label_added",
            LabelOp::Remove => "label_removed",
        }
    }
}

/// What a bulk label change did: `changed` dead letters got (or lost) the label; `skipped`
/// matched but were left alone (they already had it, did not have it, or are at
/// [`MAX_LABELS_PER_RECORD`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelOutcome {
    pub changed: i64,
    pub skipped: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_normalised_and_checked() {
        assert_eq!(
            parse_label("  known:   INC-1234 ").unwrap(),
            "known: INC-1234"
        );
        assert_eq!(parse_label("hard-case").unwrap(), "hard-case");
        assert_eq!(parse_label("a\n b").unwrap(), "a b");
        assert_eq!(parse_label("größe/ü#1").unwrap(), "größe/ü#1");
        assert_eq!(parse_label("   "), Err(LabelError::Empty));
        assert_eq!(
            parse_label(&"x".repeat(MAX_LABEL_CHARS + 1)),
            Err(LabelError::TooLong(MAX_LABEL_CHARS + 1))
        );
        assert!(parse_label(&"x".repeat(MAX_LABEL_CHARS)).is_ok());
        for bad in [
            "<b>",
            "a\"b",
            "a\tb\u{7}",
            "-x",
            ":x",
            "a\u{0}b",
            "a,b",
            "a;b",
        ] {
            assert!(
                matches!(parse_label(bad), Err(LabelError::BadCharacter(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn notes_are_trimmed_capped_and_cleared_when_empty() {
        assert_eq!(parse_note("  \n "), Ok(None));
        assert_eq!(
            parse_note(" line 1\n<script>x</script> ")
                .unwrap()
                .as_deref(),
            Some("line 1\n<script>x</script>")
        );
        assert_eq!(parse_note("a\0b").unwrap().as_deref(), Some("a\u{FFFD}b"));
        assert_eq!(
            parse_note(&"é".repeat(MAX_NOTE_CHARS + 1)),
            Err(LabelError::NoteTooLong(MAX_NOTE_CHARS + 1))
        );
        assert!(parse_note(&"é".repeat(MAX_NOTE_CHARS)).unwrap().is_some());
    }
}
