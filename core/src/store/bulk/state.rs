//! What a bulk action is while it runs: its kind ([`BulkKind`]), its state in memory
//! ([`Bulk`]: filter, progress, replay job, approval) and the outcome its audit row gives.

use crate::actions::{Actor, ReplayJob, Selection};
use crate::filter::Filter;
use crate::labels::LabelOp;

/// Which action a bulk action is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BulkKind {
    Replay,
    Delete,
    Restore,
    /// A label added to / removed from each dead letter's own labels (`label_bulk.rs`);
    /// the label is [`Bulk::label`].
    Label(LabelOp),
}

impl BulkKind {
    /// The name in `bulk_actions.kind` and in the audit row.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BulkKind::Replay => "replay",
            BulkKind::Delete => "delete",
            BulkKind::Restore => "restore",
            BulkKind::Label(op) => op.audit_action(),
        }
    }

    pub(super) fn parse(s: &str) -> Option<BulkKind> {
        [
            BulkKind::Replay,
            BulkKind::Delete,
            BulkKind::Restore,
            BulkKind::Label(LabelOp::Add),
            BulkKind::Label(LabelOp::Remove),
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

/// A bulk action in progress, in memory.
#[derive(Debug, Clone)]
pub(crate) struct Bulk {
    /// `None` until the first chunk that is not also the last writes the row.
    pub(crate) id: Option<i64>,
    pub(crate) kind: BulkKind,
    pub(crate) actor: Actor,
    pub(crate) filter: Filter,
    pub(crate) reason: Option<String>,
    /// Replay only: the job (created `preparing` with the first chunk).
    pub(crate) job: Option<ReplayJob>,
    /// Label only: the label added or removed (normalised).
    pub(crate) label: Option<String>,
    pub(crate) max_id: i64,
    pub(crate) cursor: i64,
    pub(crate) done: i64,
    pub(crate) skipped: i64,
    pub(crate) skipped_without_target: i64,
    pub(crate) chunks: i64,
    pub(crate) resumed: bool,
    /// Replay only: its job was cancelled while it was `preparing`; the chunk that saw it
    /// queued nothing and ended the action.
    pub(crate) cancelled: bool,
    /// Carrying out an approved request (`approvals/approve.rs`): the first chunk claims it, the
    /// audit row names the approver. `None` for a direct action and after a resume (the
    /// claim committed with the first chunk; the approver's own audit row is there too).
    pub(crate) approval: Option<crate::store::approvals::ApprovalLink>,
}

impl Bulk {
    /// A new action over `filter`, covering ids up to `max_id`.
    pub(crate) fn new(
        kind: BulkKind,
        actor: &Actor,
        filter: &Filter,
        reason: Option<String>,
        job: Option<ReplayJob>,
        max_id: i64,
    ) -> Bulk {
        Bulk {
            id: None,
            kind,
            actor: actor.clone(),
            filter: filter.clone(),
            reason,
            job,
            label: None,
            max_id,
            cursor: 0,
            done: 0,
            skipped: 0,
            skipped_without_target: 0,
            chunks: 0,
            resumed: false,
            cancelled: false,
            approval: None,
        }
    }

    /// Replay only: its job is published while the chunks still queue it
    /// ([`crate::actions::ReplayOptions::publishes_while_queueing`]).
    pub(super) fn streams(&self) -> bool {
        self.job
            .as_ref()
            .is_some_and(|j| j.options.publishes_while_queueing())
    }

    /// [`Bulk::streams`] and a chunk before this one was committed: its job was created
    /// `running` by the first chunk, so the relay may publish before the last one (a single
    /// chunk makes its job `running` with its one audit row, as for any other replay).
    pub(super) fn streamed(&self) -> bool {
        self.streams() && (self.chunks > 0 || self.resumed)
    }

    /// The outcome of a streaming replay's `replay_started` audit row, written with its first
    /// chunk (the one that makes the job `running`).
    pub(super) fn start_outcome(&self) -> String {
        format!(
            "started: {} queued by the first chunk, published while the rest is queued; the \
             `replay` row follows with the final count",
            self.done
        )
    }

    pub(super) fn selection(&self) -> Selection {
        Selection::Filter(self.filter.clone())
    }

    pub(super) fn outcome(&self) -> String {
        let how = match (self.chunks + 1, self.resumed) {
            (1, false) => String::new(),
            (n, false) => format!(" in {n} chunks"),
            (n, true) => format!(" in {n} chunks, resumed after an interruption"),
        };
        match self.kind {
            BulkKind::Replay if self.cancelled && self.streamed() => format!(
                "cancelled while queueing: {} queued before the cancel (those not yet \
                 published released by it), {} skipped ({} without a target topic){how}",
                self.done, self.skipped, self.skipped_without_target
            ),
            BulkKind::Replay if self.streamed() => format!(
                "ok: {} queued, {} skipped ({} without a target topic){how}, published while \
                 queueing",
                self.done, self.skipped, self.skipped_without_target
            ),
            BulkKind::Replay if self.cancelled => format!(
                "cancelled while preparing: {} queued before the cancel (released by it), {} \
                 skipped ({} without a target topic){how}",
                self.done, self.skipped, self.skipped_without_target
            ),
            BulkKind::Replay => format!(
                "ok: {} queued, {} skipped ({} without a target topic){how}",
                self.done, self.skipped, self.skipped_without_target
            ),
            BulkKind::Label(_) => {
                format!("ok: {} changed, {} skipped{how}", self.done, self.skipped)
            }
            _ if how.is_empty() => "ok".to_string(),
            _ => format!("ok{how}"),
        }
    }
}
