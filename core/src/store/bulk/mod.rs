//! Bulk actions over a filter — replay, delete, restore, label / unlabel "all matching"
//! (`label_bulk.rs`) — carried out in
//! chunks of short write transactions, so that one action over a million dead letters never
//! holds the write lock (SQLite's single writer, PostgreSQL's row locks) for long.
//!
//! # How
//! The action covers the dead letters that match its filter and have an id at or below the
//! highest id when it started (`max_id`): a dead letter ingested meanwhile is not swept in.
//! It walks them in id order, [`CHUNK_ROWS`] at a time: the ids of the next chunk are read
//! outside any write transaction, then ONE write transaction re-checks the filter and the
//! action's condition on exactly those ids and changes them — state, history events, (replay)
//! outbox rows — and moves the action's `cursor_id` forward in the same commit.
//!
//! # What is recorded (the invariants)
//! - **The audit row.** ONE audit row per action, as for a small action: written in the
//!   transaction of the LAST chunk, with the final count (what was actually changed) and the
//!   filter as given; its outcome says `in N chunks` and, if it was resumed, `resumed after an
//!   interruption`. An auditor sees one row per action with the number acted on.
//! - **Before that**, the action is recorded in `bulk_actions` from its first chunk on (actor,
//!   filter, reason, progress), in the same transactions as the changes, and every changed
//!   dead letter has its own history event with the actor. No change is ever committed without
//!   a record of who asked for it.
//! - **Replay publishes nothing early.** The job is created `preparing` with the first chunk;
//!   the relay works only on `running`/`waiting` jobs, and the last chunk turns the job
//!   `running` in the transaction that writes the audit row. Transactional outbox kept: state
//!   change + outbox rows in each chunk, audit row + "go" in the last.
//! - **Except when nothing needs the whole outbox first**
//!   ([`crate::actions::ReplayOptions::publishes_while_queueing`]: unordered, no canary): the
//!   first chunk creates the job `running` and writes a `replay_started` audit row, so the
//!   relay publishes each chunk's rows once it commits; the last chunk writes the `replay`
//!   row with the final count. The job cannot finish while its action is `running`
//!   (`outbox_mark.rs`); the last chunk finishes it when the relay was faster.
//! - **A process that dies mid-way** leaves its action `running` in `bulk_actions`, with the
//!   cursor of the last committed chunk (visible through [`Store::bulk_actions`] and, for a
//!   replay, as a `preparing` job). [`Store::resume_bulk_actions`] (run by `serve` at start-up
//!   and then every minute) picks up any action that has made no progress for
//!   [`STALE_AFTER_MS`] and finishes it from its cursor. Nothing is done twice: the cursor
//!   moves in the same commit as the chunk it covers.

// What an action is while it runs (`state.rs`), running it chunk by chunk (`run.rs`), one
// chunk's write transaction (`chunk.rs`), the recorded actions and their listing
// (`record.rs`), resuming interrupted ones (`resume.rs`).
mod chunk;
mod record;
mod resume;
mod run;
mod state;

use std::sync::atomic::{AtomicU64, Ordering};

pub use self::record::BulkAction;
pub(crate) use self::state::{Bulk, BulkKind};
#[cfg(doc)]
use super::Store;

/// Dead letters per chunk: one write transaction changes at most this many. Measured in
/// `make bench` (1M rows on SQLite): see `docs/replay.md`, "Bulk actions". 500 since the
/// maintained aggregates (migration 0006): their row triggers made a 2,000-row chunk hold
/// SQLite's write lock for 1.3–1.5 s on a busy 2-core machine, long enough that the other
/// writers (ingest, the relay, a second bulk action) could wait past the 5 s busy timeout.
pub const CHUNK_ROWS: usize = 500;

/// A `running` bulk action that has not moved for this long is taken to be interrupted (its
/// process died) and is resumed, ms.
/// The job page tells an interrupted replay by the same bound
/// ([`crate::actions::JobQueueing::interrupted`]).
pub const STALE_AFTER_MS: i64 = crate::actions::JobQueueing::STALE_AFTER_MS;

/// The longest a chunk's write transaction has held the write lock in this process, µs
/// (from `BEGIN` returning to `COMMIT` returning).
static LONGEST_CHUNK_US: AtomicU64 = AtomicU64::new(0);

/// The longest a bulk action's chunk transaction has held the write lock in this process
/// (since start-up): the figure `make bench` reports for a 1M-row action.
pub fn longest_bulk_transaction() -> std::time::Duration {
    std::time::Duration::from_micros(LONGEST_CHUNK_US.load(Ordering::Relaxed))
}

#[cfg(test)]
mod job_tests;

#[cfg(test)]
mod tests;
