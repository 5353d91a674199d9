//! The line diff between two rule set versions (`docs/automation.md`, "Editing rules"):
//! what `/automation/versions/N` and `GET /api/v1/automation/versions/{n}` show against
//! version N-1. Computed with the `similar` crate (Myers' algorithm), bounded: at most
//! [`MAX_DIFF_LINES`] lines are returned (the rest counted in [`VersionDiff::more`]).

use serde::{Deserialize, Serialize};

/// Most diff lines returned.
pub const MAX_DIFF_LINES: usize = 5_000;

/// What one line of the diff is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineChange {
    /// In both versions.
    Same,
    /// Only in the newer version.
    Added,
    /// Only in the older version.
    Removed,
}

/// One line of the diff, without its line break.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffLine {
    pub change: LineChange,
    pub text: String,
}

/// The diff of `older` → `newer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionDiff {
    pub lines: Vec<DiffLine>,
    pub added: usize,
    pub removed: usize,
    /// Lines left out past [`MAX_DIFF_LINES`].
    pub more: usize,
}

/// The line diff of `older` → `newer` (every line, unchanged ones included, in order).
pub fn diff_lines(older: &str, newer: &str) -> VersionDiff {
    let diff = similar::TextDiff::from_lines(older, newer);
    let (mut lines, mut added, mut removed, mut more) = (Vec::new(), 0, 0, 0);
    for c in diff.iter_all_changes() {
        let change = match c.tag() {
            similar::ChangeTag::Equal => LineChange::Same,
            similar::ChangeTag::Insert => {
                added += 1;
                LineChange::Added
            }
            similar::ChangeTag::Delete => {
                removed += 1;
                LineChange::Removed
            }
        };
        if lines.len() < MAX_DIFF_LINES {
            let text = c.value().trim_end_matches(['\n', '\r']).to_string();
            lines.push(DiffLine { change, text });
        } else {
            more += 1;
        }
    }
    VersionDiff {
        lines,
        added,
        removed,
        more,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_added_and_removed_lines() {
        let d = diff_lines("a\nb\nc\n", "a\nB\nc\nd\n");
        let got: Vec<(LineChange, &str)> = d
            .lines
            .iter()
            .map(|l| (l.change, l.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (LineChange::Same, "a"),
                (LineChange::Removed, "b"),
                (LineChange::Added, "B"),
                (LineChange::Same, "c"),
                (LineChange::Added, "d"),
            ]
        );
        assert_eq!((d.added, d.removed, d.more), (2, 1, 0));
    }
}
