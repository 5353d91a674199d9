//! Free-text search in the store (issue 12 item 2, migration 0024; what is searched:
//! [`crate::search`]; `docs/triage.md`, "Search").
//!
//! **What is stored.** Each dead letter's searched text is its message, its stack trace's
//! first 8 KiB and its text payload's first 8 KiB. Ingest notes a new dead letter in
//! `search_backlog` in the transaction that stores it ([`backlog_rows`](super::search_sql::backlog_rows): the id and two byte
//! lengths, no text and no index, so ingest pays for neither; migration 0028), and the
//! view `search_backlog_text` reads its text from `dead_letters`. The search indexer
//! ([`crate::search_indexer`], `search_index.rs`) copies it into `dead_letter_text`. Either table's row is deleted with
//! the dead letter (SQLite: a trigger on `dead_letters`; PostgreSQL: `ON DELETE CASCADE`).
//! SQLite indexes `dead_letter_text` with FTS5 (`dead_letter_fts`, trigram tokenizer, kept by
//! triggers), PostgreSQL with a `pg_trgm` GIN index on its three columns.
//!
//! **Both are searched.** A dead letter's text is in exactly one of `search_backlog_text`
//! and `dead_letter_text` in any snapshot (the indexer moves a row in one transaction). Every check of a row reads its text
//! from whichever holds it ([`push_row_check`](super::search_sql::push_row_check)); every "ids that match" reads both
//! ([`push_matching_ids`](super::search_sql::push_matching_ids)); the index step scans the backlog (at most [`BACKLOG_SCAN_ROWS`]
//! rows: a larger backlog leaves the page to the scan step's bounded, continued answer).
//!
//! **What matches.** A dead letter matches `q` when one of its three texts contains `q`:
//! SQLite `LIKE` (ASCII letters case-insensitive), PostgreSQL `ILIKE` (all of Unicode),
//! `%`, `_` and `!` literal. On SQLite the FTS5 phrase query (case folded in all of Unicode)
//! is only a prefilter, so both ways of answering give the same rows. On PostgreSQL a text
//! no index serves (a row checked by primary key, the backlog) is tested with what `ILIKE`
//! computes, spelled so that it costs less ([`push_row_match`](super::search_sql::push_row_match)).
//!
//! **Bounded work** ([`Store::search_rows`]). A list page of a search is answered in at most
//! two steps, each bounded whatever the store's size and the term's frequency:
//!
//! 0. *rare word* (SQLite only): when `q` holds a word of 4 or more characters with a digit
//!    ([`search::probe_word`]: an order number, an id), FTS5 is asked for at most
//!    [`PROBE_ROWS`] dead letters holding it, before any row is read. When fewer hold it,
//!    those checked against the whole of `q`, and the backlog's matches, are every match:
//!    the page is read from them, and neither step below runs. The scan step's 2,000 row
//!    checks were most of a rare term's time (`docs/bench.md`, "2026-12-07"). FTS5 stops at
//!    the LIMIT, so a common word costs little before the steps below; PostgreSQL's GIN
//!    index reads a word's whole lists first, so it keeps the steps' order.
//! 1. *scan*: the newest [`SCAN_ROWS`] dead letters that pass the other filters (the list's
//!    own index, in list order), each checked against its text by primary key. A common term
//!    fills its page here. When it found some matches but not a page, and at their rate a
//!    bounded number of older rows would fill it ([`scan_more`], at most
//!    [`EXTENDED_SCAN_ROWS`] rows in all), the scan goes on over those rows: a term in a few
//!    percent of the dead letters fills its page here too, without the index step, which for
//!    such a term reads long index lists only to give up.
//! 2. *index*: when the page is not full and older rows remain, the trigram index gives the
//!    ids of at most [`INDEX_ROWS`] + 1 matching dead letters. If there are at most
//!    [`INDEX_ROWS`], they are all of them: the page is read from them by primary key, in
//!    list order, exact. A rare term is answered here. When `q` holds a word with a digit
//!    (an order number, an id: [`search::rarest_word`]), the index is asked for that word
//!    first and at most [`WORD_CANDIDATES`] of its rows are checked against the whole of
//!    `q`; only when they do not decide is the index asked for all of `q` (whose common
//!    words' long index lists made a rare term the slowest search on PostgreSQL).
//!    The step is not asked for a term that [`COMMON_HITS`] of the newest [`SCAN_ROWS`]
//!    dead letters hold (under no filter but the term), nor for one remembered as too common
//!    (`common_terms.rs`: it gave more than [`INDEX_ROWS`], or was taken as such, lately).
//! 3. Otherwise (a term too common for the index step and too rare under this filter to fill
//!    a page from the newest rows) the page holds what the scan found, and its `next_cursor`
//!    continues the scan after the last row it read: the list says so, and "Next" searches
//!    older dead letters.
//!
//! Terms shorter than 3 characters cannot use a trigram index: they are answered by the scan
//! only (step 1 and 3).

use std::sync::Arc;

use sqlx::QueryBuilder;

use super::common_terms::{StepOutcome, Turn};
use super::dialect::{store_error, Dialect, Val};
use super::gate::begin_read;
use super::rows::SummaryRow;
use super::search_sql::{
    backlog_candidates, index_candidates, is_sqlite, push_bound, push_from_ids, push_row_check,
    word_candidates,
};
use super::sql::{self, SUMMARY_COLUMNS};
use super::{scan_share, Pool, Store, StoreError};
use crate::filter::{Cursor, Filter, ListQuery};
use crate::model::DeadLetterSummary;
use crate::search;

/// Dead letters the scan step reads per page (newest first, under the other filters).
pub const SCAN_ROWS: i64 = 2_000;
/// Most matching ids the index step takes; a term with more is left to the scan.
pub const INDEX_ROWS: usize = 5_000;
/// Most `search_backlog` rows the index step reads: a larger backlog (the indexer behind a
/// long burst of ingest) makes the index step give up, and the page is the scan's.
pub const BACKLOG_SCAN_ROWS: i64 = 10_000;

/// The index step (step 2): the ids of every dead letter whose text matches `q` when there
/// are at most [`INDEX_ROWS`], `None` when there are more or the backlog is too long to read
/// ([`BACKLOG_SCAN_ROWS`]). First the not-yet-indexed rows ([`backlog_candidates`]), then the
/// trigram index — in that order because the indexer only moves rows from the backlog to the
/// index: a row the first read misses is in the index by the second (a row moved in between
/// is found twice; the ids are deduplicated). One read transaction, so that PostgreSQL's `SET
/// LOCAL enable_seqscan = off` holds for the index read: `ILIKE '%...%'` with a LIMIT can
/// look cheaper as a sequential scan that stops early, which for a rare term is a scan of the
/// whole table. The index is first asked for the rarest word of `q` ([`word_candidates`]);
/// the whole of `q` only when that does not decide. A macro, not a function: it runs inside
/// `on_pool!`, once per database type. Evaluates to an [`IndexStep`]; returns
/// `Err(StoreError)` from the enclosing closure on a database error.
macro_rules! index_ids {
    ($pool:expr, $db:ty, $q:expr, $phrase:expr) => {{
        let mut tx = super::gate::begin_read($pool).await?;
        let backlog: Vec<Option<i64>> = backlog_candidates::<$db>($q)
            .build_query_scalar()
            .persistent(false)
            .fetch_all(&mut *tx)
            .await
            .map_err(store_error)?;
        let backlog_read = !backlog.iter().any(Option::is_none);
        let mut decided: Option<Vec<i64>> = None;
        if backlog_read && !is_sqlite::<$db>() {
            sqlx::query("SET LOCAL enable_seqscan = off")
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
        }
        if !backlog_read {
            decided = Some(Vec::new());
        } else if let Some(word) = search::rarest_word($q) {
            let rows: Vec<Option<i64>> = word_candidates::<$db>($q, word, WORD_CANDIDATES)
                .build_query_scalar()
                .persistent(false)
                .fetch_all(&mut *tx)
                .await
                .map_err(store_error)?;
            let capped = rows.iter().any(Option::is_none);
            let ids: Vec<i64> = rows.into_iter().flatten().collect();
            if !capped || ids.len() > INDEX_ROWS {
                decided = Some(ids);
            }
        }
        let indexed = match decided {
            Some(ids) => ids,
            None => {
                let mut qb = index_candidates::<$db>($q, $phrase);
                qb.build_query_scalar()
                    .persistent(false)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(store_error)?
            }
        };
        tx.rollback().await.map_err(store_error)?;
        let mut ids: Vec<i64> = backlog.into_iter().flatten().chain(indexed).collect();
        ids.sort_unstable();
        ids.dedup();
        if !backlog_read {
            IndexStep::BacklogTooLong
        } else if ids.len() > INDEX_ROWS {
            IndexStep::TooCommon
        } else {
            IndexStep::Ids(ids)
        }
    }};
}

/// The index step for `$q` ([`index_ids!`]), once per term at a time in this process
/// (`common_terms.rs`, `CommonTerms::index_step_turn`): a search whose term's step is
/// running takes that step's outcome. A term found too common is remembered. Evaluates to
/// `Option<Arc<Vec<i64>>>`: the ids of every match, or `None` when the page is the scan's.
macro_rules! shared_index_step {
    ($self:expr, $pool:expr, $db:ty, $q:expr, $phrase:expr) => {{
        let outcome = match $self.common_terms.index_step_turn($q).await {
            Turn::Follow(outcome) => outcome,
            Turn::Lead(lead) => {
                let outcome = match index_ids!($pool, $db, $q, $phrase) {
                    IndexStep::Ids(ids) => StepOutcome::Ids(std::sync::Arc::new(ids)),
                    IndexStep::TooCommon => {
                        $self.common_terms.remember($q);
                        StepOutcome::Skip
                    }
                    IndexStep::BacklogTooLong => StepOutcome::Skip,
                };
                lead.finish(outcome.clone());
                outcome
            }
        };
        match outcome {
            StepOutcome::Ids(ids) => Some(ids),
            StepOutcome::Skip => None,
        }
    }};
}

/// What the index step ([`index_ids!`]) found.
enum IndexStep {
    /// Every dead letter whose text matches the term: at most [`INDEX_ROWS`] ids, ascending.
    Ids(Vec<i64>),
    /// More than [`INDEX_ROWS`] match (remembered: `common_terms.rs`).
    TooCommon,
    /// The backlog holds more than [`BACKLOG_SCAN_ROWS`] rows (the indexer is behind).
    BacklogTooLong,
}

/// The last of the next `$rows` dead letters under `$base` in list order after `$from`
/// (exclusive; `None`: from the newest), read from the list's own index; `None` when fewer
/// remain. The scan's bound: the rows it reads are those down to it. A macro for the same
/// reason as [`index_ids!`]. Evaluates to `Option<Cursor>`.
macro_rules! scan_bound {
    ($pool:expr, $db:ty, $base:expr, $from:expr, $rows:expr) => {{
        let mut qb = sql::page::<$db>("", "dead_lettered_at_ms, id", $base, $from, 1);
        qb.push(" OFFSET ");
        <$db as Dialect>::bind(&mut qb, Val::I64(Some($rows - 1)));
        let bound: Option<(i64, i64)> = qb
            .build_query_as()
            .persistent(false)
            .fetch_optional($pool)
            .await
            .map_err(store_error)?;
        bound.map(|(t, id)| Cursor {
            dead_lettered_at_ms: t,
            id,
        })
    }};
}

/// The scan step (step 1) from `from` (exclusive; `None`: the newest): of the next `$rows`
/// dead letters under `$base` in list order, at most `$fetch` that match `$q`, and the last
/// row of those `$rows` (`None` when fewer remained: the scan read to the end of the list).
/// A macro for the same reason as [`index_ids!`]. Evaluates to
/// `(Vec<SummaryRow>, Option<Cursor>)`.
macro_rules! scan_step {
    ($pool:expr, $db:ty, $base:expr, $from:expr, $rows:expr, $q:expr, $fetch:expr) => {{
        let bound = scan_bound!($pool, $db, $base, $from, $rows);
        let mut qb = sql::page_with::<$db>(
            "",
            SUMMARY_COLUMNS,
            |qb| {
                qb.push("dead_letters");
            },
            $base,
            $from,
            |qb| {
                if let Some(b) = bound {
                    push_bound(qb, b);
                }
                push_row_check(qb, $q);
            },
            $fetch,
        );
        let rows: Vec<SummaryRow> = qb
            .build_query_as()
            .persistent(false)
            .fetch_all($pool)
            .await
            .map_err(store_error)?;
        (rows, bound)
    }};
}

/// How many of the newest [`SCAN_ROWS`] dead letters under `$base` match `$q`, and the last
/// of those rows (`None` when fewer exist: the count is of all of them). A macro for the same
/// reason as [`index_ids!`]. Evaluates to `(i64, Option<Cursor>)`.
macro_rules! scanned_count {
    ($pool:expr, $db:ty, $base:expr, $q:expr) => {{
        let bound = scan_bound!($pool, $db, $base, None, SCAN_ROWS);
        let mut qb = QueryBuilder::<$db>::new(
            "SELECT CAST(COUNT(*) AS BIGINT) FROM (SELECT 1 FROM dead_letters",
        );
        sql::push_filter(&mut qb, $base);
        if let Some(b) = bound {
            push_bound(&mut qb, b);
        }
        push_row_check(&mut qb, $q);
        qb.push(") AS scanned");
        let n: i64 = qb
            .build_query_scalar()
            .persistent(false)
            .fetch_one($pool)
            .await
            .map_err(store_error)?;
        (n, bound)
    }};
}

/// Whether the index step is worth asking for `q` (the term is not known to be too common),
/// given `hits`, its matches among the newest [`SCAN_ROWS`] dead letters under no filter but
/// `q` (the scan's own when the search has no other filter; else one more bounded count,
/// [`scanned_count!`]). A term in [`COMMON_HITS`] or more of them is taken as too common and
/// remembered. Evaluates to `bool`.
macro_rules! index_worth_asking {
    ($self:expr, $pool:expr, $db:ty, $base:expr, $q:expr, $hits:expr) => {{
        if $self.common_terms.is_common($q) {
            false
        } else {
            let hits: i64 = match $hits {
                Some(n) => n,
                None => {
                    let everything = Filter::default();
                    scanned_count!($pool, $db, &everything, $q).0
                }
            };
            if hits >= COMMON_HITS {
                $self.common_terms.remember($q);
                false
            } else {
                true
            }
        }
    }};
}

/// Matches among the newest [`SCAN_ROWS`] dead letters (1 %, under no filter but the term)
/// from which a term is taken as too common for the index step without asking it. A term
/// that frequent among the newest has more matches than the step takes ([`INDEX_ROWS`])
/// unless nearly all of them are in the newest few hundred thousand dead letters, and the
/// step's giving up costs the index's lists for all of them: on PostgreSQL a GIN bitmap of
/// every match, over 600 ms at 10M dead letters for a phrase in 2 % of them
/// (`docs/bench.md`). Deterministic: the same store gives the same answer whatever the load.
pub const COMMON_HITS: i64 = SCAN_ROWS / 100;

/// Most dead letters the scan step reads in all when it goes on past its first
/// [`SCAN_ROWS`] (`scan_more`).
pub const EXTENDED_SCAN_ROWS: i64 = 8_000;

/// How many more rows the scan step reads after its first [`SCAN_ROWS`] found `found`
/// matches (0 < `found` < `fetch`): the rows that, at the hit rate of the first ones, hold
/// the page's missing matches, plus a quarter; `None` when that is more than
/// [`EXTENDED_SCAN_ROWS`] in all (the term is too rare here: the index step answers it).
/// A term in 2 % of the dead letters finds about 40 in the first 2,000 and fills a page of
/// 50 from about 700 more rows; asking the index for it reads the index's lists for every
/// one of its matches (`common_terms.rs`).
pub fn scan_more(found: usize, fetch: i64) -> Option<i64> {
    let (found, fetch) = (found as u64, u64::try_from(fetch).ok()?);
    if found == 0 || found >= fetch {
        return None;
    }
    let need = ((fetch - found) * SCAN_ROWS as u64 * 5).div_ceil(found * 4);
    let need = i64::try_from(need).ok()?;
    (need <= EXTENDED_SCAN_ROWS - SCAN_ROWS).then_some(need)
}

/// Most dead letters holding a term's rare word ([`search::probe_word`]) that SQLite's step 0
/// checks against the whole term: a word held by more goes to the scan step (module docs).
pub const PROBE_ROWS: i64 = 1_000;

/// Dead letters whose text holds `word` that the index step checks for the whole of `q`
/// before it gives up on the word and asks for all of `q`: 4–8 µs each on PostgreSQL, so a
/// word that turns out common costs at most about 40 ms more (measured at 1M rows).
pub const WORD_CANDIDATES: i64 = 5_000;

impl Store {
    /// The rows of one list page of a search (`query.filter.q` is `q`): at most `fetch` rows
    /// in list order, and, when the page stopped at the scan's bound rather than at the end of
    /// the list or a full page, the cursor to continue from (the oldest row the scan read).
    /// See the module's documentation for the steps and their bounds.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub(super) async fn search_rows(
        &self,
        query: &ListQuery,
        q: &str,
        fetch: i64,
    ) -> Result<(Vec<SummaryRow>, Option<Cursor>), StoreError> {
        let base = Filter {
            q: None,
            ..query.filter.clone()
        };
        let cursor = query.cursor;
        // Step 0: a rare word's dead letters, before any scan (its count does the same).
        if let Some(ids) = self.rare_word_matches(q).await? {
            let rows = self.page_from_ids(&base, cursor, q, &ids, fetch).await?;
            return Ok((rows, None));
        }
        // The first page's scan is the one its count makes too (`scan_share.rs`).
        let announced = cursor
            .is_none()
            .then(|| self.scan_share.announce(scan_share::key(&base, q)));
        on_pool!(self, |pool, DB| {
            // Step 1: the newest rows under the other filters, each checked.
            let (mut rows, bound) = scan_step!(pool, DB, &base, cursor, SCAN_ROWS, q, fetch);
            // Published or dropped here, so a count waits no longer than this scan.
            if let Some(announced) = announced {
                // Short of a page, it read its whole window: every match in it is in `rows`.
                if (rows.len() as i64) < fetch {
                    announced.publish((rows.len() as i64, bound));
                }
            }
            let Some(mut bound) = bound else {
                // The scan read every remaining row: the answer is complete.
                return Ok((rows, None));
            };
            if rows.len() as i64 >= fetch {
                return Ok((rows, None));
            }
            let first_hits = rows.len() as i64;
            // Step 1, on: when the hit rate says a bounded number of older rows fill the page.
            if let Some(more) = scan_more(rows.len(), fetch) {
                let missing = fetch - rows.len() as i64;
                let (older, next) = scan_step!(pool, DB, &base, Some(bound), more, q, missing);
                rows.extend(older);
                match next {
                    Some(next) if (rows.len() as i64) < fetch => bound = next,
                    _ => return Ok((rows, None)),
                }
            }
            // Step 2: the index, if the term is rare enough.
            let Some(phrase) = search::fts_phrase(q) else {
                return Ok((rows, Some(bound)));
            };
            // The scan's first rows are the sample when nothing but `q` filters them.
            let hits = (base == Filter::default()).then_some(first_hits);
            if !index_worth_asking!(self, pool, DB, &base, q, hits) {
                return Ok((rows, Some(bound)));
            }
            let Some(ids) = shared_index_step!(self, pool, DB, q, phrase) else {
                return Ok((rows, Some(bound)));
            };
            let rows = self.page_from_ids(&base, cursor, q, &ids, fetch).await?;
            Ok((rows, None))
        })
    }

    /// Step 0 (module docs; SQLite only): every dead letter matching `q`, ascending ids, when
    /// fewer than [`PROBE_ROWS`] hold its probe word ([`search::probe_word`]) and the backlog
    /// is short enough to read ([`BACKLOG_SCAN_ROWS`]); else `None` (the steps decide). Not
    /// asked for a term remembered as too common. One read transaction: on SQLite one
    /// snapshot, so the index and the backlog are read as of one moment (a row the indexer
    /// moves is in exactly one of them).
    ///
    /// Errors: `Unavailable`, `Database`.
    async fn rare_word_matches(&self, q: &str) -> Result<Option<Arc<Vec<i64>>>, StoreError> {
        let Some(word) = search::probe_word(q) else {
            return Ok(None);
        };
        if self.backend() != "sqlite" || self.common_terms.is_common(q) {
            return Ok(None);
        }
        // One probe per term at a time (`common_terms.rs`): a page's list and count each
        // ask, side by side.
        let lead = match self.common_terms.probe_turn(q).await {
            Turn::Follow(StepOutcome::Ids(ids)) => return Ok(Some(ids)),
            Turn::Follow(StepOutcome::Skip) => return Ok(None),
            Turn::Lead(lead) => lead,
        };
        // An error drops `lead`: a search waiting for this probe runs its own.
        let found = self.probe_rare_word(q, word).await?.map(Arc::new);
        lead.finish(match &found {
            Some(ids) => StepOutcome::Ids(ids.clone()),
            None => StepOutcome::Skip,
        });
        Ok(found)
    }

    /// Step 0's reads ([`Self::rare_word_matches`]), on SQLite.
    ///
    /// Errors: `Unavailable`, `Database`.
    async fn probe_rare_word(&self, q: &str, word: &str) -> Result<Option<Vec<i64>>, StoreError> {
        on_pool!(self, |pool, DB| {
            if !is_sqlite::<DB>() {
                return Ok(None);
            }
            let mut tx = begin_read(pool).await?;
            let indexed: Vec<Option<i64>> = word_candidates::<DB>(q, word, PROBE_ROWS)
                .build_query_scalar()
                .persistent(false)
                .fetch_all(&mut *tx)
                .await
                .map_err(store_error)?;
            if indexed.iter().any(Option::is_none) {
                tx.rollback().await.map_err(store_error)?;
                return Ok(None);
            }
            let backlog: Vec<Option<i64>> = backlog_candidates::<DB>(q)
                .build_query_scalar()
                .persistent(false)
                .fetch_all(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.rollback().await.map_err(store_error)?;
            if backlog.iter().any(Option::is_none) {
                return Ok(None);
            }
            let mut ids: Vec<i64> = indexed.into_iter().chain(backlog).flatten().collect();
            ids.sort_unstable();
            ids.dedup();
            Ok(Some(ids))
        })
    }

    /// At most `fetch` dead letters of `ids` (every match of `q`: step 0's or the index
    /// step's) under `base`, in list order after `cursor`, each checked against `q` again
    /// on its row. Read by primary key ([`push_from_ids`]).
    ///
    /// Errors: `Unavailable`, `Database`.
    async fn page_from_ids(
        &self,
        base: &Filter,
        cursor: Option<Cursor>,
        q: &str,
        ids: &[i64],
        fetch: i64,
    ) -> Result<Vec<SummaryRow>, StoreError> {
        let json = serde_json::to_string(ids).map_err(|e| StoreError::Database(e.to_string()))?;
        on_pool!(self, |pool, DB| {
            let mut qb = sql::page_with::<DB>(
                "",
                SUMMARY_COLUMNS,
                |qb| push_from_ids(qb, json),
                base,
                cursor,
                |qb| {
                    qb.push(" AND dead_letters.id = m.mid");
                    push_row_check(qb, q);
                },
                fetch,
            );
            qb.build_query_as()
                .persistent(false)
                .fetch_all(pool)
                .await
                .map_err(store_error)
        })
    }

    /// How many dead letters of `ids` (every match of `q`) are under `base`, each checked
    /// against `q` again on its row.
    ///
    /// Errors: `Unavailable`, `Database`.
    async fn count_from_ids(&self, base: &Filter, q: &str, ids: &[i64]) -> Result<i64, StoreError> {
        let json = serde_json::to_string(ids).map_err(|e| StoreError::Database(e.to_string()))?;
        on_pool!(self, |pool, DB| {
            let mut qb = QueryBuilder::<DB>::new("SELECT CAST(COUNT(*) AS BIGINT) FROM ");
            push_from_ids(&mut qb, json);
            sql::push_filter(&mut qb, base);
            qb.push(" AND dead_letters.id = m.mid");
            push_row_check(&mut qb, q);
            qb.build_query_scalar()
                .persistent(false)
                .fetch_one(pool)
                .await
                .map_err(store_error)
        })
    }

    /// Sets each item's [`DeadLetterSummary::search_match`]: where `q` is in its searched
    /// text, with an excerpt in the text's own case (one primary-key read of at most 40 KiB
    /// an item). SQLite reads the searched text where it is (`dead_letter_text` or
    /// `search_backlog_text`); PostgreSQL, whose indexed copy is lowercased (migration 0031),
    /// reads `dead_letters`: the message, the stack trace's first [`search::INDEXED_BYTES`]
    /// characters and the value's first [`search::INDEXED_BYTES`] bytes (a slice of a TOASTed
    /// value reads only its first chunks), cut as ingest cuts them
    /// ([`search::stack_trace_text`], [`search::payload_prefix_text`]).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub(super) async fn attach_search_matches(
        &self,
        items: &mut [DeadLetterSummary],
        q: &str,
    ) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = items.iter().map(|d| d.id).collect();
        let json = serde_json::to_string(&ids).map_err(|e| StoreError::Database(e.to_string()))?;
        type Texts = (i64, Option<String>, Option<String>, Option<Vec<u8>>);
        let texts: Vec<Texts> = on_pool!(self, |pool, DB| {
            let mut qb = if is_sqlite::<DB>() {
                // SQLite's substr() would read a large value whole; the copy is cut already.
                let mut qb = QueryBuilder::<DB>::new(
                    "SELECT id, message, stack_trace, CAST(payload AS BLOB) \
                     FROM dead_letter_text WHERE id IN ",
                );
                DB::push_json_ids(&mut qb, json.clone());
                qb.push(
                    " UNION ALL SELECT id, message, stack_trace, CAST(payload AS BLOB) \
                     FROM search_backlog_text WHERE id IN ",
                );
                qb
            } else {
                QueryBuilder::<DB>::new(format!(
                    "SELECT id, error_message, substr(stack_trace, 1, {n}), \
                     substr(value, 1, {n}) FROM dead_letters WHERE id IN ",
                    n = search::INDEXED_BYTES
                ))
            };
            DB::push_json_ids(&mut qb, json);
            qb.build_query_as().persistent(false).fetch_all(pool).await
        })
        .map_err(store_error)?;
        let by_id: std::collections::HashMap<i64, &Texts> =
            texts.iter().map(|t| (t.0, t)).collect();
        for item in items.iter_mut() {
            item.search_match = by_id.get(&item.id).and_then(|t| {
                search::locate(
                    q,
                    t.1.as_deref(),
                    t.2.as_deref().map(search::stack_trace_text),
                    search::payload_prefix_text(t.3.as_deref()),
                )
            });
        }
        Ok(())
    }
}

impl Store {
    /// How many dead letters match `filter` (whose free text is `q`), in the list's bounded
    /// steps: `Exact` when the scan read every row under the other filters or the index step
    /// applies (then at most `cap + 1` are counted: `MoreThan(cap)` above), else `AtLeast`
    /// the matches among the [`SCAN_ROWS`] newest. The index step is not asked for a term
    /// taken as too common ([`COMMON_HITS`], `common_terms.rs`).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub(super) async fn search_count(
        &self,
        filter: &Filter,
        q: &str,
        cap: i64,
    ) -> Result<super::MatchCount, StoreError> {
        use super::MatchCount;
        let base = Filter {
            q: None,
            ..filter.clone()
        };
        let capped = |n: i64| {
            if n > cap {
                MatchCount::MoreThan(cap)
            } else {
                MatchCount::Exact(n)
            }
        };
        // Step 0, as the page takes it (the page then announces no scan to share).
        if let Some(ids) = self.rare_word_matches(q).await? {
            return Ok(capped(self.count_from_ids(&base, q, &ids).await?));
        }
        let shared = self.scan_share.take(&scan_share::key(&base, q)).await;
        on_pool!(self, |pool, DB| {
            let (scanned, bound) = match shared {
                Some(scanned) => scanned,
                None => scanned_count!(pool, DB, &base, q),
            };
            if bound.is_none() {
                return Ok(capped(scanned));
            }
            let Some(phrase) = search::fts_phrase(q) else {
                return Ok(MatchCount::AtLeast(scanned));
            };
            let hits = (base == Filter::default()).then_some(scanned);
            if !index_worth_asking!(self, pool, DB, &base, q, hits) {
                return Ok(MatchCount::AtLeast(scanned));
            }
            let Some(ids) = shared_index_step!(self, pool, DB, q, phrase) else {
                return Ok(MatchCount::AtLeast(scanned));
            };
            Ok(capped(self.count_from_ids(&base, q, &ids).await?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scan_goes_on_only_when_its_hit_rate_fills_the_page_within_the_bound() {
        // A 2 % term: 40 of the first 2,000, 11 missing of 51: 688 more rows.
        assert_eq!(scan_more(40, 51), Some(688));
        // Nothing found: the hit rate says nothing; the index step answers.
        assert_eq!(scan_more(0, 51), None);
        // 13 found: 7,308 more rows would be needed, past EXTENDED_SCAN_ROWS in all.
        assert_eq!(scan_more(13, 51), None);
        // 16 found: 5,469 more, within it.
        assert_eq!(scan_more(16, 51), Some(5_469));
        // A full page needs no more.
        assert_eq!(scan_more(51, 51), None);
        assert_eq!(scan_more(1, 0), None);
    }
}
