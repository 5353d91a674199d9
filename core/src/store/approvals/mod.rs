//! Four-eyes approval in the store (issue 10, item 4; migration 0020; `docs/replay.md`,
//! "Four-eyes approval and required reasons").
//!
//! - [`Store::submit_for_approval`] decides, with the [`ApprovalPolicy`], whether an action
//!   needs approval; if so it stores the whole request in `approval_requests` with ONE audit
//!   row (`approval_request`) and nothing else: no outbox row, no state change.
//! - [`Store::approve_request`] carries it out through the very functions a direct action
//!   uses (`actions.rs`, `bulk/`), as its requester, with an [`ApprovalLink`]: the action's
//!   first transaction also claims the request (`pending` -> `approved`, only while not
//!   expired) and writes the approver's audit row (`approval_approve`), and the action's own
//!   audit row names the approver in its `detail` (`{"approval": {"request_id",
//!   "approved_by"}}`). A request over a filter acts only on dead letters with an id at or
//!   below its `max_id` (the highest id when it was asked for).
//! - [`Store::decline_request`] and [`Store::cancel_request`] change the request and write
//!   their audit row (`approval_decline`, `approval_cancel`), in one transaction.
//! - Expiry is lazy: every read of the requests first marks the pending ones past their
//!   `expires_at_ms` as `expired` (an `approval_expire` audit row each, actor `redrive`).

// The request as stored (`request_row.rs`); filing one, and what an action would change
// (`submit.rs`); lazy expiry (`expiry.rs`); reading the requests (`reads.rs`); approving and
// carrying one out as its requester (`approve.rs`); declining and cancelling (`close.rs`);
// the link the action functions get when they carry out an approved request (`link.rs`).
mod approve;
mod close;
mod expiry;
mod link;
mod reads;
mod request_row;
mod submit;

pub use self::expiry::EXPIRY_ACTOR;
pub(crate) use self::link::{approval_detail, claim_in_tx, claim_query, ApprovalLink};
#[cfg(doc)]
use super::Store;
#[cfg(doc)]
use crate::approval::ApprovalPolicy;

#[cfg(test)]
mod tests;
