//! [`Op`]: the actions on dead letters a form can name (its `op` field).

use serde::{Deserialize, Serialize};

/// An action on dead letters, as a form's `op` field names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    Replay,
    Delete,
    Restore,
    /// Add the form's `label` to the dead letters (their own labels).
    LabelAdd,
    /// Remove the form's `label` from the dead letters.
    LabelRemove,
}

impl Op {
    /// Parses `replay`, `delete`, `restore`, `label_add` or `label_remove`.
    pub fn parse(s: &str) -> Option<Op> {
        match s {
            "replay" => Some(Op::Replay),
            "delete" => Some(Op::Delete),
            "restore" => Some(Op::Restore),
            "label_add" => Some(Op::LabelAdd),
            "label_remove" => Some(Op::LabelRemove),
            _ => None,
        }
    }

    /// True for the label changes (they need a `label`).
    pub fn is_label(self) -> bool {
        matches!(self, Op::LabelAdd | Op::LabelRemove)
    }

    /// For a label change asked without a label (an empty or blank label field): the
    /// refusal the page shows, saying what to type. `None` for the other actions.
    pub fn missing_label(self) -> Option<&'static str> {
        match self {
            Op::LabelAdd => Some(
                "Type a label to add: the label field is empty, so nothing was labelled \
                 (a label is short text such as needs-fix or known: INC-1234).",
            ),
            Op::LabelRemove => {
                Some("Type the label to remove: the label field is empty, so no label was removed.")
            }
            _ => None,
        }
    }

    /// The permission this action needs.
    pub fn permission(self) -> redrive_core::permission::Permission {
        use redrive_core::permission::Permission;
        match self {
            Op::Replay => Permission::Replay,
            Op::Delete | Op::Restore => Permission::Delete,
            Op::LabelAdd | Op::LabelRemove => Permission::Annotate,
        }
    }

    /// The form value and audit action name.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Replay => "replay",
            Op::Delete => "delete",
            Op::Restore => "restore",
            Op::LabelAdd => "label_add",
            Op::LabelRemove => "label_remove",
        }
    }

    /// The verb for buttons and headings.
    pub fn verb(self) -> &'static str {
        match self {
            Op::Replay => "Replay",
            Op::Delete => "Delete",
            Op::Restore => "Restore",
            Op::LabelAdd => "Label",
            Op::LabelRemove => "Unlabel",
        }
    }
}
