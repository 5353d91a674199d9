//! The SQL a search is built from (`search.rs` runs it; `docs/triage.md`, "Search"): each
//! database's test of a dead letter's text against `q` (with the index, on a row by primary
//! key, over the backlog), the index step's queries, and ingest's backlog rows.

use sqlx::QueryBuilder;

use super::dialect::{Dialect, Val};
use super::search::{BACKLOG_SCAN_ROWS, INDEX_ROWS};
use super::sql::{like_pattern, LIKE_ESCAPE};
use crate::filter::Cursor;
use crate::search;

/// The searched columns of `dead_letter_text`.
const TEXT_COLUMNS: [&str; 3] = ["message", "stack_trace", "payload"];

pub(super) fn is_sqlite<DB: Dialect>() -> bool {
    <DB as Dialect>::NAME == "sqlite"
}

/// One new dead letter as ingest notes it in `search_backlog` (migration 0028): what of its
/// stored columns is searched. The text stays in `dead_letters`; `search_backlog_text` reads
/// it back through these lengths.
pub(crate) struct BacklogRow {
    pub id: i64,
    /// It has an error message (searched whole).
    pub has_message: bool,
    /// Bytes of the stored stack trace that are searched (a prefix ending on a character
    /// boundary); `None`: no stack trace.
    pub stack_bytes: Option<i64>,
    /// Bytes of the value that are searched; `None`: not text.
    pub payload_bytes: Option<i64>,
}

impl BacklogRow {
    fn is_empty(&self) -> bool {
        !self.has_message && self.stack_bytes.is_none() && self.payload_bytes.is_none()
    }
}

/// `INSERT INTO search_backlog` statements for `rows` (rows with no text at all are left
/// out: no row means nothing matches), each with its number of rows: at most
/// [`super::insert::PREPARED_ROWS`] (3 binds each), so that full statements are the one
/// prepared size. The indexer moves them to `dead_letter_text`.
pub(crate) fn backlog_rows<'a, DB: Dialect>(
    rows: &[BacklogRow],
) -> Vec<(usize, QueryBuilder<'a, DB>)> {
    let rows: Vec<&BacklogRow> = rows.iter().filter(|r| !r.is_empty()).collect();
    rows.chunks(super::insert::PREPARED_ROWS.min(DB::MAX_BINDS / 3))
        .map(|chunk| {
            let mut qb = QueryBuilder::new(
                "INSERT INTO search_backlog (id, stack_bytes, payload_bytes) VALUES ",
            );
            for (i, r) in chunk.iter().enumerate() {
                qb.push(if i == 0 { "(" } else { ", (" });
                DB::bind(&mut qb, Val::I64(Some(r.id)));
                qb.push(", ");
                DB::bind(&mut qb, Val::I64(r.stack_bytes));
                qb.push(", ");
                DB::bind(&mut qb, Val::I64(r.payload_bytes));
                qb.push(")");
            }
            (chunk.len(), qb)
        })
        .collect()
}

/// Appends `(alias.message LIKE p OR alias.stack_trace LIKE p OR alias.payload LIKE p)`
/// (`ILIKE` on PostgreSQL), `q` matched literally as a substring.
pub(super) fn push_text_match<'a, DB: Dialect>(
    qb: &mut QueryBuilder<'a, DB>,
    alias: &str,
    q: &str,
) {
    let pattern = like_pattern(q);
    qb.push("(");
    for (i, column) in TEXT_COLUMNS.iter().enumerate() {
        if i > 0 {
            qb.push(" OR ");
        }
        qb.push(format!("{alias}.{column} {} ", DB::ILIKE));
        DB::bind(qb, Val::OwnedText(Some(pattern.clone())));
        qb.push(format!(" ESCAPE '{LIKE_ESCAPE}'"));
    }
    qb.push(")");
}

/// Appends [`push_text_match`]'s test for a text no index serves (one row by primary key,
/// or the backlog read whole): the same rows, found with less work on PostgreSQL.
///
/// There, `col ILIKE '%q%'` in a UTF-8 database is computed as `lower(col) LIKE
/// lower('%q%')` (PostgreSQL's `Generic_Text_IC_like`: both sides lowercased with `lower()`
/// under the column's collation, then matched character by character), and `LIKE` with
/// only a leading and a trailing `%` around an escaped literal is byte-substring
/// containment. So `strpos(lower(col), lower(q)) > 0` gives the same answer (NULL for a NULL
/// column, true for an empty `q`), and `strpos`'s substring search skips ahead where
/// `LIKE`'s `%` walks one character at a time. A search page's scan step over the newest
/// 2,000 rows of ingested Spring records (5 MB of stack traces and payloads), none
/// matching: 26.3–27.3 ms with `ILIKE`, 21.0–21.9 ms with this, of which reading the texts
/// alone takes about 21 (`docs/bench.md`, "2026-12-05"). SQLite's `LIKE` is left as it is.
pub(super) fn push_row_match<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, alias: &str, q: &str) {
    if is_sqlite::<DB>() {
        return push_text_match(qb, alias, q);
    }
    push_strpos_any(qb, q, |column| format!("lower({alias}.{column})"));
}

/// Appends `(strpos(<text>, lower(q)) > 0 OR ...)` over the three searched columns, each
/// spelled by `text` (its column name in, the SQL expression of the text to search out).
fn push_strpos_any<'a, DB: Dialect>(
    qb: &mut QueryBuilder<'a, DB>,
    q: &str,
    text: impl Fn(&str) -> String,
) {
    qb.push("(");
    for (i, column) in TEXT_COLUMNS.iter().enumerate() {
        if i > 0 {
            qb.push(" OR ");
        }
        qb.push(format!("strpos({}, lower(", text(column)));
        DB::bind(qb, Val::OwnedText(Some(q.to_string())));
        qb.push(")) > 0");
    }
    qb.push(")");
}

/// Appends [`push_row_match`]'s test of `dead_letter_text t`'s row. On PostgreSQL a row the
/// indexer wrote since migration 0031 holds its texts `lower()`ed (`t.lowered`), so `q` is
/// looked for with `strpos(t.col, lower(q)) > 0`: the same answer as `strpos(lower(t.col),
/// lower(q)) > 0` (`lower()` of a lowered text is that text) without lowering every text
/// read, which was most of a search page's time (2,000 rows of Spring records, 4.6 MB: 24–26
/// ms with `lower()`, 9–11 ms without, C locale; 37–52 ms with it under a UTF-8 locale;
/// `docs/bench.md`, "2026-12-05 (2)"). Rows indexed before it are tested as before.
pub(super) fn push_indexed_row_match<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, q: &str) {
    if is_sqlite::<DB>() {
        return push_text_match(qb, "t", q);
    }
    qb.push("(CASE WHEN t.lowered THEN ");
    push_strpos_any(qb, q, |column| format!("t.{column}"));
    qb.push(" ELSE ");
    push_row_match(qb, "t", q);
    qb.push(" END)");
}

/// Appends a parenthesised subquery of the ids of every dead letter whose searched text
/// matches `q` (for `id IN ...`: counts, bulk actions, exports, error groups). SQLite: the
/// FTS5 index gives the candidates (3 characters or more), `LIKE` decides; PostgreSQL: `ILIKE`
/// over `dead_letter_text`, which the planner serves with the trigram index. Then the
/// not-yet-indexed rows of `search_backlog`, read whole (one statement: one snapshot, in
/// which each text is in one table).
pub(crate) fn push_matching_ids<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, q: &'a str) {
    qb.push("(SELECT t.id FROM dead_letter_text t WHERE ");
    if is_sqlite::<DB>() {
        if let Some(phrase) = search::fts_phrase(q) {
            qb.push("t.id IN (SELECT rowid FROM dead_letter_fts WHERE dead_letter_fts MATCH ");
            DB::bind(qb, Val::OwnedText(Some(phrase)));
            qb.push(") AND ");
        }
    }
    push_text_match(qb, "t", q);
    qb.push(" UNION ALL SELECT b.id FROM search_backlog_text b WHERE ");
    push_row_match(qb, "b", q);
    qb.push(")");
}

/// Appends ` AND COALESCE((SELECT <match> IS TRUE FROM dead_letter_text t WHERE t.id =
/// dead_letters.id), (SELECT <match> IS TRUE FROM search_backlog b WHERE ...))`
/// ([`push_row_match`]): a check of
/// each row the outer query reads, by primary key, in whichever table holds its text. Scalar
/// subqueries, so neither planner turns them into a join that would read a whole table.
///
/// `IS TRUE`: a row of `dead_letter_text` answers true or false, never NULL. Without it a
/// row that does not match and has no stack trace (or payload) gave `false OR NULL` = NULL,
/// so `COALESCE` went on to probe the backlog for a text it never holds: 1,960 probes of
/// 2,000 in a search page's scan of bulk-loaded rows on PostgreSQL (10.0 instead of 13.8 ms,
/// `docs/bench.md`, "2026-12-04 (8)").
pub(super) fn push_row_check<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, q: &str) {
    qb.push(" AND COALESCE((SELECT ");
    push_indexed_row_match(qb, q);
    qb.push(" IS TRUE FROM dead_letter_text t WHERE t.id = dead_letters.id), (SELECT ");
    push_row_match(qb, "b", q);
    qb.push(" IS TRUE FROM search_backlog_text b WHERE b.id = dead_letters.id))");
}

/// Appends ` AND (t, id) >= (bound)` in list order: the scan's oldest row.
pub(super) fn push_bound<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, bound: Cursor) {
    qb.push(" AND dead_lettered_at_ms >= ");
    DB::bind(qb, Val::I64(Some(bound.dead_lettered_at_ms)));
    qb.push(" AND (dead_lettered_at_ms > ");
    DB::bind(qb, Val::I64(Some(bound.dead_lettered_at_ms)));
    qb.push(" OR id >= ");
    DB::bind(qb, Val::I64(Some(bound.id)));
    qb.push(")");
}

/// Appends the row source `(ids) m CROSS JOIN dead_letters`: the page is read from `ids` (a
/// JSON array) by primary key, never by walking the list's index (SQLite keeps a `CROSS
/// JOIN`'s order; PostgreSQL plans a nested loop from the small id list).
pub(super) fn push_from_ids<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, ids: String) {
    if is_sqlite::<DB>() {
        qb.push("(SELECT value AS mid FROM json_each(");
        DB::bind(qb, Val::OwnedText(Some(ids)));
        qb.push(")) m CROSS JOIN dead_letters");
    } else {
        qb.push("(SELECT CAST(v AS BIGINT) AS mid FROM jsonb_array_elements_text(CAST(");
        DB::bind(qb, Val::OwnedText(Some(ids)));
        qb.push(" AS jsonb)) AS j(v)) m CROSS JOIN dead_letters");
    }
}

/// The not-yet-indexed dead letters (`search_backlog`) whose text matches `q`, read by
/// scanning at most [`BACKLOG_SCAN_ROWS`] + 1 backlog rows, then one NULL when the backlog
/// holds more than that (the answer is not complete). Rows: `Option<i64>`.
pub(super) fn backlog_candidates<'a, DB: Dialect>(q: &'a str) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new("WITH bl AS MATERIALIZED (SELECT b.id, ");
    push_row_match(&mut qb, "b", q);
    qb.push(" AS ok FROM search_backlog_text b LIMIT ");
    DB::bind(&mut qb, Val::I64(Some(BACKLOG_SCAN_ROWS + 1)));
    qb.push(
        ") SELECT id FROM bl WHERE ok \
         UNION ALL SELECT CAST(NULL AS BIGINT) FROM (SELECT COUNT(*) AS n FROM bl) k WHERE k.n > ",
    );
    DB::bind(&mut qb, Val::I64(Some(BACKLOG_SCAN_ROWS)));
    qb
}

/// The index step by `word`, a word of `q` ([`search::rarest_word`], [`search::probe_word`]):
/// of at most `cap` dead letters whose text holds `word` (the trigram index: `pg_trgm`,
/// FTS5; the index step's cap is [`WORD_CANDIDATES`](super::search::WORD_CANDIDATES), step
/// 0's [`PROBE_ROWS`](super::search::PROBE_ROWS)), the ids of those that match `q` (checked
/// on the row, not through the index), at most `INDEX_ROWS + 1`, then one NULL when the
/// candidates reached the cap (some may be left unchecked: the answer is not complete).
/// Rows: `Option<i64>`.
pub(super) fn word_candidates<'a, DB: Dialect>(
    q: &'a str,
    word: &'a str,
    cap: i64,
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new("WITH c AS MATERIALIZED (SELECT t.id, ");
    push_indexed_row_match(&mut qb, q);
    qb.push(" AS ok FROM dead_letter_text t WHERE ");
    if is_sqlite::<DB>() {
        let phrase = search::fts_phrase(word).unwrap_or_default();
        qb.push("t.id IN (SELECT rowid FROM dead_letter_fts WHERE dead_letter_fts MATCH ");
        DB::bind(&mut qb, Val::OwnedText(Some(phrase)));
        qb.push(" LIMIT ");
        DB::bind(&mut qb, Val::I64(Some(cap)));
        qb.push(")");
    } else {
        push_text_match(&mut qb, "t", word);
    }
    qb.push(" LIMIT ");
    DB::bind(&mut qb, Val::I64(Some(cap)));
    // The LIMIT stops the first branch, and with it the count's read of `c`, at
    // `INDEX_ROWS + 1` matches: a common term costs no more candidates than that.
    qb.push(
        ") SELECT id FROM c WHERE ok \
         UNION ALL SELECT CAST(NULL AS BIGINT) FROM (SELECT COUNT(*) AS n FROM c) k WHERE k.n >= ",
    );
    DB::bind(&mut qb, Val::I64(Some(cap)));
    qb.push(" LIMIT ");
    DB::bind(&mut qb, Val::I64(Some(INDEX_ROWS as i64 + 1)));
    qb
}

/// The index step's query: at most `INDEX_ROWS + 1` ids of dead letters that may match `q`
/// (SQLite: the FTS5 phrase, a superset of the `LIKE` matches; PostgreSQL: exact).
pub(super) fn index_candidates<'a, DB: Dialect>(
    q: &'a str,
    phrase: String,
) -> QueryBuilder<'a, DB> {
    let mut qb = if is_sqlite::<DB>() {
        let mut qb =
            QueryBuilder::new("SELECT rowid FROM dead_letter_fts WHERE dead_letter_fts MATCH ");
        DB::bind(&mut qb, Val::OwnedText(Some(phrase)));
        qb
    } else {
        let mut qb = QueryBuilder::new("SELECT t.id FROM dead_letter_text t WHERE ");
        push_text_match(&mut qb, "t", q);
        qb
    };
    qb.push(" LIMIT ");
    DB::bind(&mut qb, Val::I64(Some(INDEX_ROWS as i64 + 1)));
    qb
}
