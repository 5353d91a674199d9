//! `BENCH_INGEST_ONLY=1` (issue 12 items 4 and 6): redrive's ingest beside the store's own
//! bulk-insert rate, per database, in the same run, with the peak RSS of the ingest.
//!
//! For each database:
//! 1. **ingest**: redrive's ingest ([`crate::ingest_rate`]: the real consumer on the real
//!    broker, `IngestConfig::batch_size` `BENCH_BATCH`, default 500), in this process, while a
//!    second task reads the first list page (`Store::list`, 50 rows) and the count every
//!    100 ms, as the UI would. The process's peak RSS (`VmHWM` of `/proc/self/status`, reset
//!    with `echo 5 > /proc/self/clear_refs` before the run) is reported beside it, in MiB.
//! 2. **search indexer**: the search indexer's rounds (`Store::index_search_backlog`, 1,000
//!    rows each, back to back as when ingest is quiet) move every text ingest wrote to
//!    `search_backlog` into the search index: how soon after a burst everything is indexed.
//! 3. **tier sorter**: the sorter's batches (`Store::sort_unsorted`, `SORT_BATCH` rows each,
//!    back to back, the rule set a server without a stored one runs) sort what ingest left
//!    unsorted (ingest sorts each new dead letter as it stores it, `docs/automation.md`,
//!    "Sorting"; a run of this bench before that sorted all of them here). The time of its
//!    candidate reads and of its write transactions is reported apart.
//! 4. **store limit, redrive's schema**: the rows ingest just stored are read back (every
//!    column ingest writes to `dead_letters`, and the row's searched text, exactly as
//!    stored), then written into a fresh database migrated with redrive's schema by plain
//!    prepared multi-row `INSERT`s (sqlx, no redrive store code), one transaction per batch
//!    of the same size, with the same durability (SQLite WAL, `synchronous=FULL`): `INSERT
//!    INTO dead_letters ... RETURNING id` (the tier in the row), then under those ids the
//!    `search_backlog` rows (the searched lengths, no text), as ingest writes them
//!    (migration 0028), and the `dead_letter_tiers` rows and `tier_assigned` events as
//!    ingest wrote them. Beside it, the same without the tier rows and events. This is the rate the database
//!    itself gives for redrive's rows: ingest cannot beat it.
//! 5. **the same with the text indexed in the transaction**: the text rows into
//!    `dead_letter_text` instead, as ingest wrote them before migration 0028 (migration 0024):
//!    what writing the search index inside ingest's transaction would cost.
//! 6. **the same without the searched text**: `dead_letters` only (its indexes and aggregate
//!    triggers), no text rows.
//! 7. **the same with `RETURNING`**: each statement returns the new rows' ids, as ingest's
//!    statements do (to name the backlog rows), nothing written with them: what `RETURNING`
//!    alone costs, beside what the backlog rows cost.
//! 8. **store limit, bare table**: the `dead_letters` rows into a table with the same
//!    columns and nothing else (no index, constraint or trigger): what the schema costs.
//!
//! `BENCH_BACKENDS=sqlite` or `=postgres` measures one database; `BENCH_INGEST_LIMITS=0` runs
//! only step 1 (for quick A/B runs of ingest, e.g. with `BENCH_KAFKA_PROPS`).
//!
//! Rates are msgs/s from the first statement (or the consumer's subscribe) to the last
//! commit (or the last record counted in the store).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use redrive_core::filter::ListQuery;
use redrive_core::store::Store;
use redrive_core::Filter;
use redrive_testkit::{self as kit, Backend};
use sqlx::{Connection, QueryBuilder};

/// The columns ingest writes (`core/src/store/insert.rs`), in one order for reading and
/// writing.
const COLUMNS: &str = "dlq_topic, dlq_partition, dlq_offset, dead_lettered_at_ms, fingerprint, \
     convention, source_topic, source_partition, source_offset, source_timestamp_ms, \
     consumer_group, error_class, error_message, retry_count, message_id, failed_at_ms, \
     decode_warnings, record_timestamp_ms, ingested_at_ms, headers, stack_trace, key, value, tier";
const NCOLS: usize = 24;

/// One stored dead letter, as the database holds it.
#[derive(sqlx::FromRow, Clone)]
struct StoredRow {
    dlq_topic: String,
    dlq_partition: i32,
    dlq_offset: i64,
    dead_lettered_at_ms: i64,
    fingerprint: String,
    convention: String,
    source_topic: Option<String>,
    source_partition: Option<i32>,
    source_offset: Option<i64>,
    source_timestamp_ms: Option<i64>,
    consumer_group: Option<String>,
    error_class: Option<String>,
    error_message: Option<String>,
    retry_count: Option<i32>,
    message_id: Option<String>,
    failed_at_ms: Option<i64>,
    decode_warnings: String,
    record_timestamp_ms: Option<i64>,
    ingested_at_ms: i64,
    headers: String,
    stack_trace: Option<String>,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    /// The tier ingest sorted it into (`None`: left to the sorter).
    tier: Option<String>,
    /// Its `dead_letter_tiers` row as ingest wrote it (`tier_reason` `None`: none).
    tier_rule: Option<String>,
    tier_rule_version: Option<i64>,
    tier_reason: Option<String>,
    tier_at_ms: Option<i64>,
    tier_auto_attempts: Option<i32>,
    tier_next_attempt_at_ms: Option<i64>,
    /// Its `dead_letter_text` row (`has_text` false: none, as for a record with no text).
    has_text: bool,
    text_message: Option<String>,
    text_stack_trace: Option<String>,
    text_payload: Option<String>,
}

impl StoredRow {
    /// Bytes of the row's variable-length columns (what the database writes, roughly).
    fn bytes(&self) -> usize {
        self.headers.len()
            + self.stack_trace.as_ref().map_or(0, String::len)
            + self.key.as_ref().map_or(0, Vec::len)
            + self.value.as_ref().map_or(0, Vec::len)
            + self.error_message.as_ref().map_or(0, String::len)
            + self.fingerprint.len()
            + self.dlq_topic.len()
    }
}

/// The figures of one database.
pub struct IngestFigures {
    pub backend: Backend,
    /// redrive's ingest, msgs/s.
    pub ingest: f64,
    /// Peak RSS of this process during the ingest, MiB.
    pub ingest_peak_mib: f64,
    /// The search indexer moving every text ingest wrote into the index, msgs/s.
    pub indexer: f64,
    /// The tier sorter sorting every dead letter ingest stored, msgs/s.
    pub sorter: f64,
    /// Of the sorter's time, reading its candidates, s.
    pub sorter_read_s: f64,
    /// Of the sorter's time, the rest: deciding and writing its batches, s.
    pub sorter_write_s: f64,
    /// Store limit into redrive's schema, `search_backlog`, tier rows and events included,
    /// msgs/s.
    pub limit_schema: f64,
    /// The same on SQLite with redrive's settings of ingest's connections (page cache, WAL
    /// checkpoint threshold) and its WAL checkpointer beside the inserts, msgs/s; `None` on
    /// PostgreSQL, whose settings are the server's.
    pub limit_settings: Option<f64>,
    /// The same without the tier rows and events, msgs/s.
    pub limit_untiered: f64,
    /// Dead letters ingest left unsorted, for the sorter.
    pub left_unsorted: u64,
    /// The same with the text written to the indexed table in the transaction, msgs/s.
    pub limit_indexed_text: f64,
    /// Store limit into redrive's schema without the searched text, msgs/s.
    pub limit_no_text: f64,
    /// The same, each statement `RETURNING` the new rows' ids as ingest's does, msgs/s.
    pub limit_returning: f64,
    /// Store limit into the bare table, msgs/s.
    pub limit_bare: f64,
    /// Average bytes of a stored row's variable-length columns.
    pub row_bytes: f64,
}

/// Peak RSS of this process since the last [`reset_peak_rss`], KiB.
pub fn peak_rss_kib() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .context("no VmHWM in /proc/self/status")?;
    Ok(line.trim().trim_end_matches("kB").trim().parse()?)
}

/// Resets the peak RSS of this process to its current RSS (Linux `clear_refs`, value 5).
pub fn reset_peak_rss() -> Result<()> {
    std::fs::write("/proc/self/clear_refs", "5")?;
    Ok(())
}

/// Runs the three measures for each database over `n` records of `topic`.
pub async fn measure(topic: &str, n: usize) -> Result<Vec<IngestFigures>> {
    let batch = crate::env_usize("BENCH_BATCH", 500);
    // `BENCH_INGEST_LIMITS=0`: ingest only, no indexer or store limits (quick A/B runs).
    let limits = std::env::var("BENCH_INGEST_LIMITS").unwrap_or_default() != "0";
    let mut out = Vec::new();
    for backend in crate::backends() {
        let (url, _dir) = kit::fresh_database(backend).await?;
        let store = Store::connect(&url).await?;
        store.migrate().await?;
        let pages = page_loop(store.clone());
        reset_peak_rss()?;
        eprintln!("ingest into {backend:?}: starting");
        let ingest = crate::ingest_into(&store, topic, n, true).await?;
        let ingest_peak_mib = peak_rss_kib()? as f64 / 1024.0;
        drop(pages);
        eprintln!("ingest into {backend:?}: {ingest:.0} msgs/s, peak RSS {ingest_peak_mib:.0} MiB");
        if !limits {
            store.close().await;
            if backend == Backend::Postgres {
                drop_postgres(&url).await;
            }
            continue;
        }
        let t = Instant::now();
        let mut indexed = 0u64;
        loop {
            let moved = store.index_search_backlog(1_000).await?;
            if moved == 0 {
                break;
            }
            indexed += moved;
        }
        let indexer = indexed as f64 / t.elapsed().as_secs_f64().max(1e-9);
        eprintln!("search indexer {backend:?}: {indexed} texts at {indexer:.0} msgs/s");
        let (left_unsorted, sorter, sorter_read_s, sorter_write_s) = sort_all(&store).await?;
        eprintln!(
            "tier sorter {backend:?}: {left_unsorted} left by ingest, {sorter:.0} msgs/s (candidates read {sorter_read_s:.1} s, written {sorter_write_s:.1} s)"
        );
        let rows = read_rows(&url, backend).await?;
        store.close().await;
        let row_bytes = rows.iter().map(StoredRow::bytes).sum::<usize>() as f64 / rows.len() as f64;
        let limit_schema = limit(backend, &rows, batch, Target::Schema).await?;
        let limit_settings = match backend {
            Backend::Sqlite => Some(limit(backend, &rows, batch, Target::SchemaSettings).await?),
            Backend::Postgres => None,
        };
        let limit_untiered = limit(backend, &rows, batch, Target::SchemaWithoutTiers).await?;
        let limit_indexed_text = limit(backend, &rows, batch, Target::SchemaIndexedText).await?;
        let limit_no_text = limit(backend, &rows, batch, Target::SchemaWithoutText).await?;
        let limit_returning = limit(backend, &rows, batch, Target::SchemaReturning).await?;
        let limit_bare = limit(backend, &rows, batch, Target::Bare).await?;
        eprintln!(
            "store limit {backend:?}: schema {limit_schema:.0} msgs/s, without tier rows {limit_untiered:.0} msgs/s, text indexed in the transaction {limit_indexed_text:.0} msgs/s, without the searched text {limit_no_text:.0} msgs/s (with RETURNING {limit_returning:.0}), bare table {limit_bare:.0} msgs/s, {row_bytes:.0} bytes/row"
        );
        drop(rows);
        if backend == Backend::Postgres {
            drop_postgres(&url).await;
        }
        out.push(IngestFigures {
            backend,
            ingest,
            ingest_peak_mib,
            indexer,
            sorter,
            sorter_read_s,
            sorter_write_s,
            limit_schema,
            limit_settings,
            limit_untiered,
            left_unsorted,
            limit_indexed_text,
            limit_no_text,
            limit_returning,
            limit_bare,
            row_bytes,
        });
    }
    Ok(out)
}

/// A task that reads the first list page and its match count (as the list page does) every
/// 100 ms until cancelled.
fn page_loop(store: Store) -> tokio_util::sync::DropGuard {
    let stop = tokio_util::sync::CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        let query = ListQuery {
            filter: Filter::default(),
            limit: 50,
            cursor: None,
        };
        while !token.is_cancelled() {
            let _ = store.list(&query).await;
            // What the list page's "N match" asks (the app's `MATCH_COUNT_CAP`).
            let _ = store.count_matching(&Filter::default(), 100_000).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    stop.drop_guard()
}

async fn read_rows(url: &str, backend: Backend) -> Result<Arc<Vec<StoredRow>>> {
    let columns: Vec<String> = COLUMNS
        .split(',')
        .map(|c| format!("d.{}", c.trim()))
        .collect();
    let sql = format!(
        "SELECT {}, t.id IS NOT NULL AS has_text, t.message AS text_message, \
         t.stack_trace AS text_stack_trace, t.payload AS text_payload, \
         tt.rule_name AS tier_rule, CAST(tt.rule_version AS BIGINT) AS tier_rule_version, \
         tt.reason AS tier_reason, tt.tier_at_ms, tt.auto_attempts AS tier_auto_attempts, \
         tt.next_attempt_at_ms AS tier_next_attempt_at_ms \
         FROM dead_letters d LEFT JOIN (SELECT id, message, stack_trace, payload \
         FROM dead_letter_text UNION ALL SELECT id, message, stack_trace, payload \
         FROM search_backlog_text) t ON t.id = d.id \
         LEFT JOIN dead_letter_tiers tt ON tt.dead_letter_id = d.id ORDER BY d.id",
        columns.join(", ")
    );
    let rows = match backend {
        Backend::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(url).await?;
            sqlx::query_as::<_, StoredRow>(&sql)
                .fetch_all(&mut c)
                .await?
        }
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(url).await?;
            sqlx::query_as::<_, StoredRow>(&sql)
                .fetch_all(&mut c)
                .await?
        }
    };
    Ok(Arc::new(rows))
}

macro_rules! push_row {
    ($qb:expr, $r:expr) => {{
        let r = $r;
        $qb.push("(");
        let mut s = $qb.separated(", ");
        s.push_bind(r.dlq_topic.clone())
            .push_bind(r.dlq_partition)
            .push_bind(r.dlq_offset)
            .push_bind(r.dead_lettered_at_ms)
            .push_bind(r.fingerprint.clone())
            .push_bind(r.convention.clone())
            .push_bind(r.source_topic.clone())
            .push_bind(r.source_partition)
            .push_bind(r.source_offset)
            .push_bind(r.source_timestamp_ms)
            .push_bind(r.consumer_group.clone())
            .push_bind(r.error_class.clone())
            .push_bind(r.error_message.clone())
            .push_bind(r.retry_count)
            .push_bind(r.message_id.clone())
            .push_bind(r.failed_at_ms)
            .push_bind(r.decode_warnings.clone())
            .push_bind(r.record_timestamp_ms)
            .push_bind(r.ingested_at_ms)
            .push_bind(r.headers.clone())
            .push_bind(r.stack_trace.clone())
            .push_bind(r.key.clone())
            .push_bind(r.value.clone())
            .push_bind(r.tier.clone());
        $qb.push(")");
    }};
}

/// The time (a `Duration`) to write `$rows` with plain prepared multi-row INSERTs (`$head`
/// then one `push_row!` per row) on connection `$c` of database `$db`: one transaction per
/// `$batch` rows, each statement holding as many rows as `$max_params` bind parameters allow
/// (SQLite's limit is 32,766, PostgreSQL's 65,535). `$text` is `(returning, table)`: with
/// `returning`, each statement returns the new ids; with `Some(table)` too, the rows' text
/// rows follow under them (`TEXT_ROWS` rows
/// per `INSERT INTO table`, as ingest writes them: `search_backlog` the searched lengths,
/// `dead_letter_text` the text itself). With `tiers` (third), the rows' `dead_letter_tiers`
/// rows and `tier_assigned` events follow under the new ids too, 250 per statement, as
/// ingest writes them when it sorts. A macro because the two databases'
/// connections and query builders are different types.
macro_rules! time_inserts {
    ($c:expr, $db:ty, $max_params:expr, $head:expr, $rows:expr, $batch:expr, $text:expr) => {{
        let (returning, text_table, tiers): (bool, Option<&str>, bool) = $text;
        let t = Instant::now();
        for chunk in $rows.chunks($batch.max(1)) {
            let mut tx = $c.begin().await?;
            for part in chunk.chunks($max_params / NCOLS) {
                let mut qb = QueryBuilder::<$db>::new($head);
                for (i, r) in part.iter().enumerate() {
                    if i > 0 {
                        qb.push(", ");
                    }
                    push_row!(qb, r);
                }
                if !returning {
                    qb.build().execute(&mut *tx).await?;
                    continue;
                }
                qb.push(" RETURNING id, dlq_topic, dlq_partition, dlq_offset");
                let ids: Vec<(i64, String, i32, i64)> =
                    qb.build_query_as().fetch_all(&mut *tx).await?;
                let by_coords: std::collections::HashMap<(&str, i32, i64), &StoredRow> = part
                    .iter()
                    .map(|r| ((r.dlq_topic.as_str(), r.dlq_partition, r.dlq_offset), r))
                    .collect();
                if tiers {
                    let sorted: Vec<(i64, &StoredRow)> = ids
                        .iter()
                        .filter_map(|(id, topic, p, o)| {
                            by_coords
                                .get(&(topic.as_str(), *p, *o))
                                .filter(|r| r.tier.is_some() && r.tier_reason.is_some())
                                .map(|r| (*id, *r))
                        })
                        .collect();
                    for rows in sorted.chunks(250) {
                        let mut qb = QueryBuilder::<$db>::new(
                            "INSERT INTO dead_letter_tiers (dead_letter_id, tier, rule_name, \
                             rule_version, reason, tier_at_ms, auto_attempts, \
                             next_attempt_at_ms, loop_guarded, escalated) ",
                        );
                        qb.push_values(rows.iter(), |mut b, (id, r)| {
                            b.push_bind(*id)
                                .push_bind(r.tier.clone())
                                .push_bind(r.tier_rule.clone())
                                .push_bind(r.tier_rule_version)
                                .push_bind(r.tier_reason.clone())
                                .push_bind(r.tier_at_ms)
                                .push_bind(r.tier_auto_attempts)
                                .push_bind(r.tier_next_attempt_at_ms)
                                .push_bind(0i32)
                                .push_bind(0i32);
                        });
                        qb.build().execute(&mut *tx).await?;
                        let mut qb = QueryBuilder::<$db>::new(
                            "INSERT INTO dead_letter_events (dead_letter_id, at_ms, kind, actor, detail) ",
                        );
                        qb.push_values(rows.iter(), |mut b, (id, r)| {
                            b.push_bind(*id)
                                .push_bind(r.tier_at_ms)
                                .push_bind("tier_assigned")
                                .push_bind("(rules)")
                                .push_bind(format!(
                                    "{}: {}",
                                    r.tier.as_deref().unwrap_or_default(),
                                    r.tier_reason.as_deref().unwrap_or_default()
                                ));
                        });
                        qb.build().execute(&mut *tx).await?;
                    }
                }
                let Some(table) = text_table else {
                    continue;
                };
                let texts: Vec<(i64, &StoredRow)> = ids
                    .iter()
                    .filter_map(|(id, topic, p, o)| {
                        by_coords
                            .get(&(topic.as_str(), *p, *o))
                            .filter(|r| r.has_text)
                            .map(|r| (*id, *r))
                    })
                    .collect();
                for rows in texts.chunks(TEXT_ROWS) {
                    let backlog = table == "search_backlog";
                    let mut qb = QueryBuilder::<$db>::new(if backlog {
                        "INSERT INTO search_backlog (id, stack_bytes, payload_bytes) VALUES "
                    } else {
                        "INSERT INTO dead_letter_text (id, message, stack_trace, payload) VALUES "
                    });
                    let mut s = qb.separated(", ");
                    for (id, r) in rows {
                        s.push("(").push_bind_unseparated(*id);
                        if backlog {
                            let len = |t: &Option<String>| t.as_ref().map(|t| t.len() as i64);
                            s.push_bind(len(&r.text_stack_trace))
                                .push_bind(len(&r.text_payload));
                        } else {
                            s.push_bind(r.text_message.clone())
                                .push_bind(r.text_stack_trace.clone())
                                .push_bind(r.text_payload.clone());
                        }
                        s.push_unseparated(")");
                    }
                    qb.build().execute(&mut *tx).await?;
                }
            }
            tx.commit().await?;
        }
        t.elapsed()
    }};
}

/// Text rows per statement in the store limit (ingest's
/// `TEXT_ROWS_PER_STATEMENT`, `core/src/store/search.rs`).
const TEXT_ROWS: usize = 500;

/// What a store limit writes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// redrive's schema, `dead_letters`, `search_backlog`, `dead_letter_tiers` and
    /// `dead_letter_events` (what ingest writes).
    Schema,
    /// [`Target::Schema`] on SQLite with ingest's connection settings
    /// (`SQLITE_WRITER_CACHE_KIB`, `SQLITE_WAL_AUTOCHECKPOINT_PAGES`) and redrive's WAL
    /// checkpointer on a connection of its own, as `serve` runs ingest.
    SchemaSettings,
    /// The same without the tier rows and events (what ingest wrote before it sorted).
    SchemaWithoutTiers,
    /// redrive's schema, `dead_letters` and `dead_letter_text` (the index written in the
    /// transaction, as before migration 0028).
    SchemaIndexedText,
    /// redrive's schema, `dead_letters` only.
    SchemaWithoutText,
    /// redrive's schema, `dead_letters` only, each statement `RETURNING` the new ids (what
    /// ingest's statements return), nothing written with them.
    SchemaReturning,
    /// A table with `dead_letters`' columns and nothing else.
    Bare,
}

/// msgs/s of plain prepared multi-row INSERTs of `rows` (one transaction per `batch`) into a
/// fresh database, as `target` says.
async fn limit(backend: Backend, rows: &[StoredRow], batch: usize, target: Target) -> Result<f64> {
    let schema = target != Target::Bare;
    let text = match target {
        Target::Schema | Target::SchemaSettings => (true, Some("search_backlog"), true),
        Target::SchemaWithoutTiers => (true, Some("search_backlog"), false),
        Target::SchemaIndexedText => (true, Some("dead_letter_text"), false),
        Target::SchemaReturning => (true, None, false),
        Target::SchemaWithoutText | Target::Bare => (false, None, false),
    };
    let (url, _dir) = kit::fresh_database(backend).await?;
    let bare = format!(
        "CREATE TABLE dead_letters (id {}, {})",
        match backend {
            Backend::Sqlite => "INTEGER PRIMARY KEY",
            Backend::Postgres => "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        },
        bare_columns(backend)
    );
    if schema {
        let store = Store::connect(&url).await?;
        store.migrate().await?;
        store.close().await;
    }
    let head = format!("INSERT INTO dead_letters ({COLUMNS}) VALUES ");
    let took = match backend {
        Backend::Sqlite => {
            use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
            use std::str::FromStr;
            let mut opts = SqliteConnectOptions::from_str(&url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .foreign_keys(true);
            let mut _checkpointer = None;
            if target == Target::SchemaSettings {
                use redrive_core::store::{
                    SQLITE_WAL_AUTOCHECKPOINT_PAGES, SQLITE_WRITER_CACHE_KIB,
                };
                opts = opts
                    .pragma("cache_size", format!("-{SQLITE_WRITER_CACHE_KIB}"))
                    .pragma(
                        "wal_autocheckpoint",
                        SQLITE_WAL_AUTOCHECKPOINT_PAGES.to_string(),
                    );
                _checkpointer = crate::start_checkpointer(&Store::connect(&url).await?).await?;
            }
            let mut c = sqlx::SqliteConnection::connect_with(&opts).await?;
            if !schema {
                sqlx::query(&bare).execute(&mut c).await?;
            }
            time_inserts!(c, sqlx::Sqlite, 32_766, &head, rows, batch, text)
        }
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(&url).await?;
            if !schema {
                sqlx::query(&bare).execute(&mut c).await?;
            }
            let took = time_inserts!(c, sqlx::Postgres, 65_535, &head, rows, batch, text);
            c.close().await.ok();
            drop_postgres(&url).await;
            took
        }
    };
    Ok(rows.len() as f64 / took.as_secs_f64().max(1e-9))
}

/// The ingest columns' definitions, without constraints.
fn bare_columns(backend: Backend) -> String {
    let (text, int, big, blob) = match backend {
        Backend::Sqlite => ("TEXT", "INTEGER", "INTEGER", "BLOB"),
        Backend::Postgres => ("TEXT", "INTEGER", "BIGINT", "BYTEA"),
    };
    let types = [
        text, int, big, big, text, text, text, int, big, big, text, text, text, int, text, big,
        text, big, big, text, text, blob, blob, text,
    ];
    COLUMNS
        .split(',')
        .map(str::trim)
        .zip(types)
        .map(|(c, t)| format!("{c} {t}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Prints the rows of the ingest table.
pub fn print(figures: &[IngestFigures], n: usize, raw: f64) {
    let cell = |f: &dyn Fn(&IngestFigures) -> String, b: Backend| {
        figures
            .iter()
            .find(|x| x.backend == b)
            .map(f)
            .unwrap_or_default()
    };
    let row = |name: &str, f: &dyn Fn(&IngestFigures) -> String| {
        println!(
            "| {name} | {} | {} |",
            cell(f, Backend::Sqlite),
            cell(f, Backend::Postgres)
        );
    };
    println!("| raw consume rate (count only), {n} records | {raw:.0} msgs/s | {raw:.0} msgs/s |");
    row(
        &format!(
            "store limit, redrive's schema: plain multi-row INSERTs of redrive's rows, their `search_backlog` rows, and their `dead_letter_tiers` rows and `tier_assigned` events, {n} rows"
        ),
        &|x| format!("{:.0} msgs/s", x.limit_schema),
    );
    row(
        "the same with ingest's SQLite settings (8 MiB page cache, WAL checkpoint threshold 10,000 pages) and redrive's WAL checkpointer beside it",
        &|x| match x.limit_settings {
            Some(v) => format!("{v:.0} msgs/s"),
            None => "— (the server's settings)".into(),
        },
    );
    row(
        "the same without the tier rows and events (what ingest wrote before it sorted)",
        &|x| {
            format!(
                "{:.0} msgs/s (the tier rows cost {:.0} %)",
                x.limit_untiered,
                (1.0 - x.limit_schema / x.limit_untiered) * 100.0
            )
        },
    );
    row(
        "the same with the searched text indexed in the transaction (`dead_letter_text`, as before migration 0028)",
        &|x| {
            format!(
                "{:.0} msgs/s (the index costs {:.0} % of that)",
                x.limit_indexed_text,
                (1.0 - x.limit_indexed_text / x.limit_schema) * 100.0
            )
        },
    );
    row(
        "the same without the searched text (`dead_letters` only)",
        &|x| {
            format!(
                "{:.0} msgs/s (the backlog rows cost {:.0} %)",
                x.limit_no_text,
                (1.0 - x.limit_schema / x.limit_no_text) * 100.0
            )
        },
    );
    row(
        "the same, each statement `RETURNING` the new ids (as ingest's do), no search rows",
        &|x| {
            format!(
                "{:.0} msgs/s (`RETURNING` costs {:.0} %)",
                x.limit_returning,
                (1.0 - x.limit_returning / x.limit_no_text) * 100.0
            )
        },
    );
    row(
        "store limit, bare table (same `dead_letters` rows, no index or trigger)",
        &|x| {
            format!(
                "{:.0} msgs/s (indexes and triggers cost {:.0} %)",
                x.limit_bare,
                (1.0 - x.limit_no_text / x.limit_bare) * 100.0
            )
        },
    );
    row(
        &format!("redrive ingest from the broker, {n} x 1 KiB Spring records"),
        &|x| {
            let settings = x
                .limit_settings
                .map(|v| format!(", {:.2}x with its settings", x.ingest / v))
                .unwrap_or_default();
            format!(
                "{:.0} msgs/s ({:.2}x the store limit{settings})",
                x.ingest,
                x.ingest / x.limit_schema
            )
        },
    );
    row(
        "search indexer after that ingest: every text moved into the search index (1,000 per round, back to back)",
        &|x| format!("{:.0} msgs/s", x.indexer),
    );
    row(
        "tier sorter after that ingest: the dead letters ingest left unsorted (`SORT_BATCH` per batch, back to back, default rule set)",
        &|x| {
            if x.left_unsorted == 0 {
                return "none left (ingest sorted every one)".to_string();
            }
            format!(
                "{} at {:.0} msgs/s (candidates read {:.1} s, batches written {:.1} s)",
                x.left_unsorted, x.sorter, x.sorter_read_s, x.sorter_write_s
            )
        },
    );
    row(
        "peak RSS during that ingest (the whole bench process, pages read every 100 ms; it keeps the heap of the earlier figures: the server's own peak is `BENCH_RSS`)",
        &|x| format!("{:.0} MiB", x.ingest_peak_mib),
    );
    row("stored row, variable-length columns", &|x| {
        format!("{:.0} bytes", x.row_bytes)
    });
}

/// Sorts every dead letter of `store` that ingest left unsorted as the server's sorter does
/// with no stored rule set (`RuleSetSpec::default()`), batch after batch: (how many, msgs/s,
/// s reading candidates, s writing). The read is timed on its own ([`Store::tier_candidates`], the sorter's page)
/// and subtracted from the batch's time ([`Store::sort_unsorted`] reads it again, warm).
async fn sort_all(store: &Store) -> Result<(u64, f64, f64, f64)> {
    use redrive_core::automation::{RuleSet, RuleSetSpec};
    use redrive_core::store::{CandidateScan, SORT_BATCH};
    let rules = RuleSet::compile(RuleSetSpec::default()).map_err(|e| anyhow::anyhow!(e.0))?;
    let (mut read, mut total, mut sorted) = (Duration::ZERO, Duration::ZERO, 0u64);
    loop {
        let t = Instant::now();
        let page = store
            .tier_candidates(&CandidateScan::unsorted(SORT_BATCH))
            .await?;
        read += t.elapsed();
        if page.is_empty() {
            break;
        }
        drop(page);
        let t = Instant::now();
        let report = store.sort_unsorted(&rules, None, SORT_BATCH).await?;
        total += t.elapsed();
        sorted += report.sorted;
        if report.read == 0 {
            break;
        }
    }
    // `sort_unsorted` read each page again: its write is its time less one read.
    let write = total.saturating_sub(read);
    Ok((
        sorted,
        sorted as f64 / total.as_secs_f64().max(1e-9),
        read.as_secs_f64(),
        write.as_secs_f64(),
    ))
}

/// Drops the bench's PostgreSQL database at `url` (its stores are large); errors are ignored.
async fn drop_postgres(url: &str) {
    let Some(name) = url
        .rsplit('/')
        .next()
        .map(|n| n.split('?').next().unwrap_or(n).to_string())
    else {
        return;
    };
    if let Ok(mut c) = sqlx::PgConnection::connect(&kit::postgres_admin_url()).await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut c)
            .await;
    }
}
