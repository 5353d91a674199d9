//! The export's read side: whole dead letters matching a filter, one keyset page at a time
//! (the list's order and index, never OFFSET and never one big query), with their labels and
//! notes and their groups'. The caller streams page after page (`server/src/export.rs`), so
//! memory is bounded by one page however many rows match.

use super::dialect::store_error;
use super::rows::FullRow;
use super::{sql, Pool, Store, StoreError};
use crate::filter::{Cursor, Filter};
use crate::model::DeadLetter;

/// Dead letters per export page: memory holds at most this many whole records (their values
/// included) at once.
pub const EXPORT_PAGE_ROWS: u32 = 100;

/// One exported dead letter: the whole record (its `summary` carries its labels and its
/// group's), and the two notes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportRecord {
    pub dead_letter: DeadLetter,
    pub note: Option<String>,
    pub group_note: Option<String>,
}

impl Store {
    /// Up to `limit` (1 to [`EXPORT_PAGE_ROWS`]) whole dead letters matching `filter`, in the
    /// list's order (dead_lettered_at DESC, id DESC) strictly after `after`. The next page
    /// starts after the last one returned; a page shorter than `limit` is the last.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt` (a stored row that does not parse).
    pub async fn export_page(
        &self,
        filter: &Filter,
        after: Option<Cursor>,
        limit: u32,
    ) -> Result<Vec<ExportRecord>, StoreError> {
        let fetch = i64::from(limit.clamp(1, EXPORT_PAGE_ROWS));
        let rows: Vec<FullRow> = on_pool!(self, |pool, DB| {
            let mut qb = sql::page::<DB>("", sql::FULL_COLUMNS, filter, after, fetch);
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let mut letters = rows
            .into_iter()
            .map(FullRow::into_dead_letter)
            .collect::<Result<Vec<_>, _>>()?;
        let mut summaries: Vec<_> = letters.iter().map(|d| d.summary.clone()).collect();
        self.attach_labels(&mut summaries).await?;
        let ids: Vec<i64> = letters.iter().map(|d| d.summary.id).collect();
        let mut fps: Vec<String> = letters
            .iter()
            .map(|d| d.summary.fingerprint.clone())
            .collect();
        fps.sort();
        fps.dedup();
        let (notes, group_notes) = self.notes_of(&ids, &fps).await?;
        Ok(letters
            .drain(..)
            .zip(summaries)
            .map(|(mut d, s)| {
                d.summary = s;
                ExportRecord {
                    note: notes.get(&d.summary.id).cloned(),
                    group_note: group_notes.get(&d.summary.fingerprint).cloned(),
                    dead_letter: d,
                }
            })
            .collect())
    }
}
