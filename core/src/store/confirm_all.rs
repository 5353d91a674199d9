//! The typed-count confirmation of an "all" action (issue 9 item 9): a bulk replay, delete,
//! restore or label change whose filter has no field set acts on every dead letter that is
//! not deleted, so it runs only when the caller also gives the number of dead letters that
//! empty filter matches now — the number a dry run (or the unfiltered list's "N match")
//! shows. A filter with any field set, and a selection by ids, need nothing more.
//!
//! The JSON API takes the number as `"confirm_all": N`, the confirmation page as a text field
//! "type N to confirm"; both call [`Store::check_confirm_all`] before the action, and the
//! action's audit row says it was an "all" action (outcome `…; all dead letters (empty
//! filter), confirmed by count`, detail `"all": true`). See `docs/replay.md`, "Acting on
//! everything".

use super::{Store, StoreError};
use crate::actions::Selection;
use crate::filter::Filter;

/// What an "all" action's audit outcome ends with (after `; `).
pub const ALL_OUTCOME: &str = "all dead letters (empty filter), confirmed by count";

/// Why an "all" action was refused, with the number it must be confirmed with.
#[derive(Debug, thiserror::Error)]
pub enum ConfirmAllError {
    /// No confirmation given; `matched` dead letters would be affected.
    #[error("the filter is empty: it matches all {matched} dead letters; confirm with that count")]
    Missing { matched: i64 },
    /// The number given is not the number the empty filter matches now.
    #[error("the confirmation {given} is not the {matched} dead letters the empty filter matches")]
    Wrong { matched: i64, given: i64 },
    /// Counting failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Selection {
    /// True for a filter with no field set: every dead letter that is not deleted (the
    /// default `status`, which leaves `deleted` out, counts as not set).
    pub fn is_all(&self) -> bool {
        matches!(self, Selection::Filter(f) if f.is_empty())
    }
}

impl Store {
    /// How many dead letters the empty filter matches now (every one not `deleted`): the
    /// number an "all" action must be confirmed with. Read from the maintained aggregate
    /// (migration 0027), exact and without a scan.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn all_count(&self) -> Result<i64, StoreError> {
        match self.aggregate_count(&Filter::default()).await? {
            Some(n) => Ok(n),
            None => self.count(&Filter::default()).await,
        }
    }

    /// For an "all" selection ([`Selection::is_all`]), checks that `given` equals
    /// [`Store::all_count`] now: `Ok(Some(n))` when confirmed, `Ok(None)` when the selection
    /// needs no confirmation (whatever `given` says).
    ///
    /// Errors: [`ConfirmAllError::Missing`] (no `given`), [`ConfirmAllError::Wrong`] (another
    /// number), [`ConfirmAllError::Store`] (the count failed).
    pub async fn check_confirm_all(
        &self,
        selection: &Selection,
        given: Option<i64>,
    ) -> Result<Option<i64>, ConfirmAllError> {
        if !selection.is_all() {
            return Ok(None);
        }
        let matched = self.all_count().await?;
        match given {
            None => Err(ConfirmAllError::Missing { matched }),
            Some(g) if g != matched => Err(ConfirmAllError::Wrong { matched, given: g }),
            Some(g) => Ok(Some(g)),
        }
    }
}
