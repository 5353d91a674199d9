//! Writing dead letters: ingest's batch insert, and the *reduced form* of one record that the
//! database refused as decoded (see `docs/limits.md`).
//!
//! Every row goes through [`limits::fit`] first, so no indexed text column ever receives more
//! than its documented cap (PostgreSQL's btree refuses entries over 2,704 bytes).

use std::borrow::Cow;
use std::sync::OnceLock;

use sqlx::QueryBuilder;

use super::codec::{
    ascii_json, encode_headers, encode_headers_with_trace, encode_warnings, text_field,
};
use super::dialect::{store_error, Dialect, Val};
use super::outcome::{self, find_links, write_links};
use super::search_sql::BacklogRow;
use super::tiers::{decide_input, unit_random, write_tier_rows, Decision, Earlier};
use super::{Pool, Store, StoreError};
use crate::automation::Tier;
use crate::limits;
use crate::model::{NewDeadLetter, Normalized};

/// Columns written by ingest, in the order [`insert_values`] binds them.
const INSERT_COLUMNS: [&str; 24] = [
    "dlq_topic",
    "dlq_partition",
    "dlq_offset",
    "dead_lettered_at_ms",
    "fingerprint",
    "convention",
    "source_topic",
    "source_partition",
    "source_offset",
    "source_timestamp_ms",
    "consumer_group",
    "error_class",
    "error_message",
    "retry_count",
    "message_id",
    "failed_at_ms",
    "decode_warnings",
    "record_timestamp_ms",
    "ingested_at_ms",
    "headers",
    "stack_trace",
    "key",
    "value",
    "tier",
];

/// Soft cap on the bytes of key, value, headers and stack traces in one INSERT statement,
/// so a batch of large records is written as several statements (same transaction) instead
/// of one huge protocol message.
const MAX_STATEMENT_BYTES: usize = 32 * 1024 * 1024;

/// What writing one dead letter needs beyond the record itself, computed ahead of its
/// transaction: ingest computes it as each record arrives ([`Prepared::of`]), while the
/// previous batch is being written, so none of it sits between two of ingest's transactions
/// (`docs/bench.md`, "2026-12-04"). [`Store::insert_prepared`] writes a batch with it.
#[derive(Debug)]
pub struct Prepared {
    /// The normalised fields cut to their caps ([`limits::fit`]); `None` when they already
    /// fit (the record's own fields are written).
    fitted: Option<Normalized>,
    /// The headers as stored ([`encode_headers_with_trace`]).
    headers: String,
    /// What the search indexer will read of it.
    searched: Searched,
}

/// What of one dead letter is searched, once stored (its `search_backlog` row).
#[derive(Debug, Clone, Copy)]
struct Searched {
    has_message: bool,
    stack_bytes: Option<i64>,
    payload_bytes: Option<i64>,
}

impl Searched {
    /// Whether `n` (the normalised fields as stored) has a message, how many bytes of its
    /// stored stack trace ([`crate::search::INDEXED_BYTES`], on a character boundary, U+0000
    /// as U+FFFD as stored) and of `d`'s value (when it is text) are searched.
    fn of(d: &NewDeadLetter, n: &Normalized) -> Searched {
        let len = |s: &str| s.len() as i64;
        Searched {
            has_message: n.error_message.is_some(),
            stack_bytes: text_field(&n.stack_trace)
                .map(|s| len(crate::search::stack_trace_text(&s))),
            payload_bytes: crate::search::payload_text(d.record.value.as_deref()).map(len),
        }
    }
}

impl Prepared {
    /// The normal form of `d`: everything as decoded, text fields within [`limits::fit`]'s
    /// caps, the headers encoded with the stack trace stored once (a header holding exactly
    /// the `stack_trace` column, as written after the cap and the U+0000 replacement, refers
    /// to it).
    pub fn of(d: &NewDeadLetter) -> Prepared {
        let fitted = limits::fit(&d.normalized);
        let headers = encode_headers_with_trace(
            &d.record.headers,
            text_field(&fitted.stack_trace).as_deref(),
        );
        let searched = Searched::of(d, &fitted);
        Prepared {
            fitted: match fitted {
                Cow::Owned(n) => Some(n),
                Cow::Borrowed(_) => None,
            },
            headers,
            searched,
        }
    }
}

/// One dead letter as it will be written: the normalised fields within their caps (or
/// reduced) and the headers already encoded.
pub(crate) struct Row<'a> {
    d: &'a NewDeadLetter,
    normalized: Cow<'a, Normalized>,
    headers: Cow<'a, str>,
    searched: Searched,
    /// The tier ingest sorted it into (`ingest_tiers.rs`), written by the `INSERT`; `None`:
    /// unsorted, for the sorter. Set once, inside the transaction, after the replay-outcome
    /// lookups, which borrow the rows.
    tier: OnceLock<Tier>,
}

impl<'a> Row<'a> {
    /// The values the filter bar offers (`Store::facets`) as stored: source topic, DLQ topic,
    /// consumer group (those present).
    fn facet_values(&self) -> impl Iterator<Item = &str> {
        [
            self.normalized.source_topic.as_deref(),
            Some(self.d.record.dlq_topic.as_str()),
            self.normalized.consumer_group.as_deref(),
        ]
        .into_iter()
        .flatten()
    }

    /// The normal form ([`Prepared::of`]), computed now.
    pub(crate) fn full(d: &'a NewDeadLetter) -> Row<'a> {
        let p = Prepared::of(d);
        Row {
            d,
            normalized: p.fitted.map_or(Cow::Borrowed(&d.normalized), Cow::Owned),
            headers: Cow::Owned(p.headers),
            searched: p.searched,
            tier: OnceLock::new(),
        }
    }

    /// The normal form, computed beforehand (`p` is `Prepared::of(d)`).
    fn prepared(d: &'a NewDeadLetter, p: &'a Prepared) -> Row<'a> {
        Row {
            d,
            normalized: Cow::Borrowed(p.fitted.as_ref().unwrap_or(&d.normalized)),
            headers: Cow::Borrowed(&p.headers),
            searched: p.searched,
            tier: OnceLock::new(),
        }
    }

    /// The reduced form ([`limits::reduce`]): short ASCII text fields, no stack trace, and the
    /// headers' JSON with every non-ASCII character escaped (still byte-exact once decoded).
    pub(crate) fn reduced(d: &'a NewDeadLetter, reason: &str) -> Row<'a> {
        let normalized = limits::reduce(&d.normalized, reason);
        let searched = Searched::of(d, &normalized);
        Row {
            d,
            normalized: Cow::Owned(normalized),
            headers: Cow::Owned(ascii_json(&encode_headers(&d.record.headers))),
            searched,
            tier: OnceLock::new(),
        }
    }

    /// What this record offers for linking it to an earlier dead letter (its fields as
    /// stored, so a lookup compares what the database holds).
    pub(crate) fn evidence(&self) -> outcome::Evidence<'_> {
        outcome::Evidence::of(self.d, &self.normalized)
    }

    /// Its `search_backlog` row once stored as `id` ([`crate::search`]).
    pub(crate) fn backlog_row(&self, id: i64) -> BacklogRow {
        BacklogRow {
            id,
            has_message: self.searched.has_message,
            stack_bytes: self.searched.stack_bytes,
            payload_bytes: self.searched.payload_bytes,
        }
    }

    /// The sorter's decision for it (id 0 until stored), from it as the sorter reads it once
    /// stored ([`Store::tier_candidates`]): its fields as stored (capped, U+0000 as U+FFFD),
    /// its raw headers (borrowed, not copied), no labels, not linked to an earlier self.
    fn tier_decision(&self, rules: &crate::automation::RuleSet, now_ms: i64) -> Decision {
        let n: &Normalized = &self.normalized;
        let (source_topic, consumer_group, error_class, error_message) = (
            text_field(&n.source_topic),
            text_field(&n.consumer_group),
            text_field(&n.error_class),
            text_field(&n.error_message),
        );
        let input = crate::automation::MatchInput {
            dlq_topic: &self.d.record.dlq_topic,
            source_topic: source_topic.as_deref(),
            consumer_group: consumer_group.as_deref(),
            error_class: error_class.as_deref(),
            error_message: error_message.as_deref(),
            fingerprint: &self.d.fingerprint,
            convention: self.d.convention,
            headers: &self.d.record.headers,
            labels: &[],
            age_ms: now_ms.saturating_sub(self.d.dead_lettered_at_ms),
        };
        decide_input(rules, &input, 0, Earlier::default(), now_ms, unit_random())
    }

    /// (DLQ topic, partition, offset): what a `RETURNING` row is matched back by.
    pub(crate) fn coordinates(&self) -> (&str, i32, i64) {
        let r = &self.d.record;
        (r.dlq_topic.as_str(), r.dlq_partition, r.dlq_offset)
    }

    fn approx_bytes(&self) -> usize {
        let r = &self.d.record;
        r.key.as_ref().map_or(0, Vec::len)
            + r.value.as_ref().map_or(0, Vec::len)
            + self.headers.len()
            + self.normalized.stack_trace.as_ref().map_or(0, String::len)
            + self
                .normalized
                .error_message
                .as_ref()
                .map_or(0, String::len)
            + 256
    }
}

/// Rows per INSERT statement of a batch: ingest's batches (500 by default) are written as
/// statements of exactly this many rows, whose text is then the same for every batch, so each
/// connection prepares it once and keeps it ([`is_prepared_size`]); a smaller remainder is
/// sent unprepared. Measured in `docs/bench.md` ("Prepared statements").
pub(crate) const PREPARED_ROWS: usize = 250;

/// Whether a statement of `rows` rows is kept prepared in the connection's statement cache:
/// only the one full size, so batches of every other size (a linger's remainder, a salvage's
/// single row) do not fill the cache.
pub(crate) fn is_prepared_size(rows: usize) -> bool {
    rows == PREPARED_ROWS
}

/// Splits `rows` into slices that each fit one INSERT statement: at most [`PREPARED_ROWS`]
/// rows (always under the database's bind parameter limit) and, loosely, under
/// [`MAX_STATEMENT_BYTES`] (a slice holds at least one row).
pub(crate) fn insert_chunks<'r, 'a, DB: Dialect>(rows: &'r [Row<'a>]) -> Vec<&'r [Row<'a>]> {
    let max_rows = (DB::MAX_BINDS / INSERT_COLUMNS.len()).clamp(1, PREPARED_ROWS);
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0usize;
    for (i, row) in rows.iter().enumerate() {
        let size = row.approx_bytes();
        if i > start && (i - start >= max_rows || bytes + size > MAX_STATEMENT_BYTES) {
            out.push(&rows[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < rows.len() {
        out.push(&rows[start..]);
    }
    out
}

/// A row `INSERT ... RETURNING id, dlq_topic, dlq_partition, dlq_offset` gave back: one new
/// dead letter.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Inserted {
    pub id: i64,
    pub dlq_topic: String,
    pub dlq_partition: i32,
    pub dlq_offset: i64,
}

/// The `search_backlog` rows of the new dead letters `inserted` (rows of `rows` matched by
/// their coordinates; search.rs writes them).
pub(crate) fn backlog_rows_of(rows: &[Row<'_>], inserted: &[Inserted]) -> Vec<BacklogRow> {
    let by_coords: std::collections::HashMap<(&str, i32, i64), &Row<'_>> =
        rows.iter().map(|r| (r.coordinates(), r)).collect();
    inserted
        .iter()
        .filter_map(|i| {
            by_coords
                .get(&(i.dlq_topic.as_str(), i.dlq_partition, i.dlq_offset))
                .map(|r| r.backlog_row(i.id))
        })
        .collect()
}

/// The decisions of the new dead letters `inserted` that ingest sorted (`decisions[i]` is
/// `rows[i]`'s), each with its new id.
fn decisions_of(
    rows: &[Row<'_>],
    mut decisions: Vec<Option<Decision>>,
    inserted: &[Inserted],
) -> Vec<Decision> {
    if decisions.iter().all(Option::is_none) {
        return Vec::new();
    }
    let by_coords: std::collections::HashMap<(&str, i32, i64), usize> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (r.coordinates(), i))
        .collect();
    inserted
        .iter()
        .filter_map(|n| {
            let i = *by_coords.get(&(n.dlq_topic.as_str(), n.dlq_partition, n.dlq_offset))?;
            let mut d = decisions[i].take()?;
            d.id = n.id;
            Some(d)
        })
        .collect()
}

/// `INSERT ... VALUES (...), (...) ON CONFLICT (dlq_topic, dlq_partition, dlq_offset) DO
/// NOTHING` for one chunk: a DLQ offset already stored (redelivery after a crash, or twice in
/// one batch) is skipped, so `rows_affected` is the number of new dead letters.
pub(crate) fn insert_values<'a, DB: Dialect>(chunk: &'a [Row<'a>]) -> QueryBuilder<'a, DB> {
    // The arguments' buffer sized once for the whole chunk, instead of grown (and copied)
    // value by value.
    let mut qb = DB::builder_with_capacity(
        format!(
            "INSERT INTO dead_letters ({}) VALUES ",
            INSERT_COLUMNS.join(", ")
        ),
        chunk.len() * INSERT_COLUMNS.len(),
        chunk.iter().map(Row::approx_bytes).sum(),
    );
    for (i, row) in chunk.iter().enumerate() {
        if i > 0 {
            qb.push(", ");
        }
        let d = row.d;
        let r = &d.record;
        let n: &Normalized = &row.normalized;
        // Borrowed unless U+0000 had to be replaced: no copy of a stack trace per row.
        let text = |s: &'a Option<String>| match text_field(s) {
            Some(Cow::Borrowed(t)) => Val::Text(Some(t)),
            Some(Cow::Owned(t)) => Val::OwnedText(Some(t)),
            None => Val::Text(None),
        };
        // The array's length is the column list's: a missing or extra value does not compile.
        let values: [Val<'_>; INSERT_COLUMNS.len()] = [
            Val::Text(Some(r.dlq_topic.as_str())),
            Val::I32(Some(r.dlq_partition)),
            Val::I64(Some(r.dlq_offset)),
            Val::I64(Some(d.dead_lettered_at_ms)),
            Val::Text(Some(d.fingerprint.as_str())),
            Val::Text(Some(d.convention.as_str())),
            text(&n.source_topic),
            Val::I32(n.source_partition),
            Val::I64(n.source_offset),
            Val::I64(n.source_timestamp_ms),
            text(&n.consumer_group),
            text(&n.error_class),
            text(&n.error_message),
            Val::I32(n.retry_count),
            text(&n.message_id),
            Val::I64(n.failed_at_ms),
            Val::OwnedText(Some(encode_warnings(&n.decode_warnings))),
            Val::I64(r.timestamp_ms),
            Val::I64(Some(d.ingested_at_ms)),
            Val::Text(Some(row.headers.as_ref())),
            text(&n.stack_trace),
            Val::Bytes(r.key.as_deref()),
            Val::Bytes(r.value.as_deref()),
            Val::Text(row.tier.get().map(|t| t.as_str())),
        ];
        qb.push("(");
        for (j, v) in values.into_iter().enumerate() {
            if j > 0 {
                qb.push(", ");
            }
            DB::bind(&mut qb, v);
        }
        qb.push(")");
    }
    qb.push(" ON CONFLICT (dlq_topic, dlq_partition, dlq_offset) DO NOTHING");
    qb
}

/// Writes `$rows` (`&[Row]`) in transaction `$tx` of database `$DB`: the `dead_letters` rows
/// ([`insert_chunks`], [`insert_values`], `RETURNING` the new ones), then the new ones'
/// `search_backlog` rows (migration 0028; the search indexer indexes their text later). Full-size statements are kept prepared ([`is_prepared_size`]). Evaluates to
/// the `Vec<Inserted>` of the new dead letters (a DLQ offset already stored is skipped); a
/// database error returns `Err(StoreError)` from the enclosing function. A macro because the
/// two databases' transactions are different types (used inside `on_pool!`).
macro_rules! write_rows {
    ($tx:expr, $DB:ty, $rows:expr) => {{
        let rows = $rows;
        let mut new_rows: Vec<$crate::store::insert::Inserted> = Vec::new();
        for chunk in $crate::store::insert::insert_chunks::<$DB>(rows) {
            let mut qb = $crate::store::insert::insert_values::<$DB>(chunk);
            qb.push(" RETURNING id, dlq_topic, dlq_partition, dlq_offset");
            let mut got: Vec<$crate::store::insert::Inserted> = qb
                .build_query_as()
                .persistent($crate::store::insert::is_prepared_size(chunk.len()))
                .fetch_all(&mut *$tx)
                .await
                .map_err(store_error)?;
            new_rows.append(&mut got);
        }
        let backlog = $crate::store::insert::backlog_rows_of(rows, &new_rows);
        for (n, mut qb) in $crate::store::search_sql::backlog_rows::<$DB>(&backlog) {
            qb.build()
                .persistent($crate::store::insert::is_prepared_size(n))
                .execute(&mut *$tx)
                .await
                .map_err(store_error)?;
        }
        new_rows
    }};
}
pub(crate) use write_rows;

impl Store {
    /// Stores a batch in ONE transaction, ignoring records whose (dlq_topic, dlq_partition,
    /// dlq_offset) is already stored. Returns how many rows were new. When this returns Ok,
    /// the batch is durable: ingest may commit the Kafka offsets.
    ///
    /// Normalised text fields over their caps are cut ([`limits::fit`], with a decode
    /// warning), so an over-long header can no longer make an index refuse the row. Text
    /// fields holding U+0000 are stored with U+FFFD in its place (PostgreSQL text cannot hold
    /// it; the raw headers keep the exact bytes). The batch is written as multi-row `INSERT
    /// ... ON CONFLICT DO NOTHING` statements sized under the bind-parameter limit.
    ///
    /// Errors: `Unavailable` (retry later: connection lost, pool timed out, database locked,
    /// disk full), `Rejected` (the database refused some record's data: see
    /// [`StoreError::Rejected`]), `Database` otherwise. On error nothing of the batch is stored.
    ///
    /// In the same transaction, a record that came back after a replay is linked to its
    /// earlier dead letter (`outcome.rs`; `docs/replay.md`, "Outcome").
    pub async fn insert_batch(&self, batch: &[NewDeadLetter]) -> Result<u64, StoreError> {
        let rows: Vec<Row<'_>> = batch.iter().map(Row::full).collect();
        self.insert_rows(&rows).await
    }

    /// [`Store::insert_batch`] with each record's [`Prepared`] computed beforehand:
    /// `prepared[i]` must be `Prepared::of(&batch[i])`. If the two slices differ in length,
    /// the batch is prepared anew (nothing is skipped). Errors: as [`Store::insert_batch`].
    pub async fn insert_prepared(
        &self,
        batch: &[NewDeadLetter],
        prepared: &[Prepared],
    ) -> Result<u64, StoreError> {
        if batch.len() != prepared.len() {
            return self.insert_batch(batch).await;
        }
        let rows: Vec<Row<'_>> = batch
            .iter()
            .zip(prepared)
            .map(|(d, p)| Row::prepared(d, p))
            .collect();
        self.insert_rows(&rows).await
    }

    /// Stores one dead letter in its *reduced form* (see [`limits::reduce`]): the raw key,
    /// value and headers whole, the decoded text fields cut to
    /// [`limits::REDUCED_TEXT_MAX_BYTES`] printable ASCII, no stack trace, and a decode
    /// warning quoting `reason` (why the full form was refused). Returns 1 if it was new,
    /// 0 if that DLQ offset was already stored.
    ///
    /// Errors: as [`Store::insert_batch`].
    pub async fn insert_reduced(&self, d: &NewDeadLetter, reason: &str) -> Result<u64, StoreError> {
        self.insert_rows(&[Row::reduced(d, reason)]).await
    }

    async fn insert_rows(&self, rows: &[Row<'_>]) -> Result<u64, StoreError> {
        if rows.is_empty() {
            return Ok(0);
        }
        // The rule set this batch is sorted with (`ingest_tiers.rs`), read before the
        // transaction; `None` leaves the batch to the sorter.
        let rules = self.ingest_rules().await;
        let now = super::actions::now_ms();
        let (inserted, sorted) = on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            // Replay outcome (`outcome.rs`): look for the earlier dead letters first (indexed
            // lookups, one statement per kind of evidence), write the links after the insert.
            let mut linker = outcome::Linker::new(rows.iter().map(Row::evidence).collect());
            find_links!(linker, tx, DB);
            // Each row's tier, unless it came back after a replay (the sorter reads its link).
            let decisions: Vec<Option<Decision>> = rows
                .iter()
                .enumerate()
                .map(|(i, row)| {
                    let rules = rules.as_ref().filter(|_| !linker.found(i))?;
                    let d = row.tier_decision(&rules.set, now);
                    let _ = row.tier.set(d.assignment.tier);
                    Some(d)
                })
                .collect();
            let new_rows = write_rows!(tx, DB, rows);
            let inserted = new_rows.len() as u64;
            let sorted = decisions_of(rows, decisions, &new_rows);
            if !sorted.is_empty() {
                let refs: Vec<&Decision> = sorted.iter().collect();
                write_tier_rows!(tx, DB, &refs, rules.as_ref().and_then(|r| r.version), now);
            }
            if linker.any() {
                let linked = write_links!(linker, tx, DB, now);
                if linked > 0 {
                    tracing::debug!(linked, "dead letters linked to their earlier replay");
                }
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<_, StoreError>((inserted, sorted))
        })?;
        self.count_sorted_at_ingest(&sorted);
        if inserted > 0 {
            // The filter bar's choices (`facet_cache.rs`) are dropped if a value is new.
            self.facet_cache
                .note_stored(rows.iter().flat_map(Row::facet_values));
        }
        Ok(inserted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dead_letter(offset: i64, value_bytes: usize) -> NewDeadLetter {
        NewDeadLetter {
            record: crate::model::RawRecord {
                dlq_topic: "t".into(),
                dlq_partition: 0,
                dlq_offset: offset,
                timestamp_ms: None,
                key: None,
                value: Some(vec![0; value_bytes]),
                headers: vec![],
            },
            convention: crate::model::Convention::Unknown,
            normalized: crate::model::Normalized::default(),
            fingerprint: String::new(),
            dead_lettered_at_ms: 0,
            ingested_at_ms: 0,
        }
    }

    #[test]
    fn chunks_respect_bind_limit_and_size() {
        let many: Vec<NewDeadLetter> = (0..3010).map(|i| dead_letter(i, 10)).collect();
        let rows: Vec<Row<'_>> = many.iter().map(Row::full).collect();
        let per_stmt = (32_766 / INSERT_COLUMNS.len()).min(PREPARED_ROWS);
        let chunks = insert_chunks::<sqlx::Sqlite>(&rows);
        assert!(chunks.iter().all(|c| c.len() <= per_stmt));
        assert_eq!(chunks.iter().map(|c| c.len()).sum::<usize>(), 3010);
        assert_eq!(chunks.len(), 3010usize.div_ceil(per_stmt));
        // Full chunks are the prepared size; only the remainder is not.
        let prepared = chunks.iter().filter(|c| is_prepared_size(c.len())).count();
        assert_eq!(prepared, 3010 / PREPARED_ROWS);

        // 20 MiB values: one per statement; an oversized row still gets a statement.
        let big: Vec<NewDeadLetter> = (0..3).map(|i| dead_letter(i, 20 << 20)).collect();
        let rows: Vec<Row<'_>> = big.iter().map(Row::full).collect();
        let chunks = insert_chunks::<sqlx::Postgres>(&rows);
        assert_eq!(
            chunks.iter().map(|c| c.len()).collect::<Vec<_>>(),
            [1, 1, 1]
        );
        let huge = [dead_letter(0, 40 << 20)];
        let rows: Vec<Row<'_>> = huge.iter().map(Row::full).collect();
        assert_eq!(insert_chunks::<sqlx::Postgres>(&rows).len(), 1);
        assert!(insert_chunks::<sqlx::Postgres>(&[]).is_empty());
    }
}
