//! The store: dead letters in SQLite (embedded default, one file, WAL) or PostgreSQL.
//! All SQL of redrive lives under this module; dialect differences are handled here only
//! (`dialect.rs`), the SQL text is shared (`sql.rs`), rows map to the model in `rows.rs`.
//!
//! Layout: one table `dead_letters` (see `core/migrations/*/0001_dead_letters.sql`), unique on
//! (dlq_topic, dlq_partition, dlq_offset), timestamps as epoch ms, headers as a JSON list with
//! base64 values. The list is keyset-paginated on (dead_lettered_at_ms DESC, id DESC) and every
//! filter column has an index ending in that key (plus `status`, so counts and error groups
//! are answered from the index).
//!
//! Measured at 1,000,000 rows (the ignored `list_latency_probe` in `server/tests/store.rs`,
//! debug build, 2 cores): a list page for no filter or any one filter is an index range read,
//! p50 ~1-2 ms and p99 under 17 ms on both databases. Known costs: free text (`q`) for a
//! *rare* term scans every row on SQLite (~0.35 s per million rows with an optimised SQLite;
//! PostgreSQL uses its `pg_trgm` index, ~25 ms). [`Store::error_groups`] reads the maintained
//! aggregate `dl_stats_groups` (migrations 0027, 0035) for filters on fingerprint, topics,
//! consumer group, error class, status and tier, its hours `dl_stats_group_hours` (migration
//! 0036) for those with a time range, and counts at most the newest [`GROUPS_SCAN_ROWS`]
//! matching rows for any other.

mod checkpoint;
mod codec;
#[cfg(test)]
mod column_order_tests;
mod common_terms;
mod dialect;
mod facet_cache;
mod gate;
#[cfg(test)]
mod gate_tests;
mod migrate;
#[cfg(test)]
mod refail_tally_tests;
mod rows;
mod scan_share;
#[cfg(test)]
mod scope_tests;
mod sql;
#[cfg(test)]
mod status_time_tests;
#[cfg(test)]
pub(crate) mod test_file;
#[cfg(test)]
pub(crate) mod test_records;

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;

pub use self::checkpoint::{Checkpointed, CHECKPOINT_BUSY_MS, CHECKPOINT_IDLE_MS};
pub use self::connect::{sqlite_file, SqliteDurability};
use self::dialect::store_error;
use self::gate::WriteGate;
pub use self::gate::WriteGateStats;
use self::rows::SummaryRow;
use self::sql::FacetColumn;
use crate::filter::{ListQuery, DEFAULT_LIMIT, MAX_LIMIT};
use crate::model::{DeadLetter, DeadLetterSummary, ErrorGroup, Page};
use crate::{Cursor, Filter};

/// Errors from the store. `Unavailable` means "try again later" (connection refused, pool
/// timed out, database locked); ingest pauses and retries on it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported database URL `{0}`: use sqlite:PATH or postgres://...")]
    BadUrl(String),
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    #[error("migration failed: {0}")]
    Migrate(String),
    #[error("database error: {0}")]
    Database(String),
    #[error("stored data could not be read: {0}")]
    Corrupt(String),
    /// No such thing (a replay job, a dead letter); the message names it.
    #[error("not found: {0}")]
    NotFound(String),
    /// The request conflicts with the current state (e.g. cancelling a finished job).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The request itself is invalid (a bad topic name, a rate of 0, a reason too long);
    /// the message says what to change.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The database refused the data itself: a value too long for an index, a character its
    /// encoding cannot hold, a constraint, a row too big. Retrying the same data will not
    /// help; ingest stores the record in reduced form or quarantines it instead.
    #[error("the database refused the data: {0}")]
    Rejected(String),
}

impl StoreError {
    /// True for "try again later" (the connection, the pool, a lock, a timeout, a full disk):
    /// ingest pauses and retries the same batch. Everything else is about the data or the
    /// schema, and retrying the same write would fail the same way.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// Most values [`Store::facets`] returns per list.
pub const FACET_CAP: u32 = 500;

/// How long a query waits for a pooled connection before `Unavailable`.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long SQLite waits for another writer's lock before "database is locked". SQLite's busy
/// handler is not a queue: a waiter polls with growing sleeps, and writers that keep coming
/// back can take the lock between its polls (the concurrency test once saw ingest starve past
/// 5 s behind the relay and a bulk action). Inside one process the write gate (`gate.rs`)
/// now queues every writer first-in-first-out before it asks SQLite, so this timeout only
/// bounds waits for *another process* — the CLI's `quarantine retry` or `archive restore`
/// against the file of a running server, a backup, an `sqlite3` shell — whose chunks can still
/// starve the one gate holder that polls. 30 s (5 s until the aggregates' triggers made
/// writes longer) keeps that harmless; docs/invariants.md, "Writers on SQLite".
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// SQLite's page cache per connection, KiB (`PRAGMA cache_size = -N`; SQLite's default is
/// 2,000 KiB). A cache is filled only by pages a connection reads, so a pool costs this much
/// per connection that did large reads or writes: ingest's own (inserts touch the leaf pages
/// of every index), the list's. The server opens 17 connections on SQLite (8 for pages, 2
/// ingest, 3 relay, 2 alerts, 2 retention). Measured (`docs/bench.md`, "SQLite's page
/// cache"): against a 200k-record backlog, the server peaked at 389 MiB with 8 MiB here and
/// 195 MiB with 2 MiB, ingesting at 2,904 and 2,600 msgs/s (one run each) and serving pages
/// no slower; the operating system's file cache holds the database pages either way. Issue
/// 12's bound: at most 250 MB resident while ingesting and serving (`docs/configuration.md`).
pub const SQLITE_CACHE_KIB: u32 = 2 * 1024;
/// SQLite memory-mapped I/O, bytes (`PRAGMA mmap_size`): off, as SQLite's default build has
/// it, stated here so that a database file is never mapped into the server's address space
/// (a mapped 10 GB store would count its touched pages as resident memory).
pub const SQLITE_MMAP_BYTES: u64 = 0;
/// WAL frames (pages) after which a committing SQLite connection checkpoints the WAL into
/// the database file (`PRAGMA wal_autocheckpoint`; SQLite's default is 1,000, about 4 MiB of
/// 4 KiB pages). A status change rewrites each dead letter's page and the same index pages
/// over and over; with 1,000 frames a 500-row replay chunk (3-4 MiB of WAL) checkpointed at
/// nearly every commit, on the writer's path: 12 ms of a 31 ms chunk was the commit. A
/// longer WAL copies each page once per checkpoint however often it changed meanwhile. A
/// 50,000-record replay on SQLite, request to `finished` (`docs/bench.md`, "2026-12-05
/// (6)"): 9,285-9,539 msgs/s with 1,000, 10,356-10,996 with 10,000. Ingest (pages written
/// once) did not change. Durability does not depend on it: every commit still fsyncs the WAL
/// (`synchronous=FULL`).
pub const SQLITE_WAL_AUTOCHECKPOINT_PAGES: u32 = 10_000;
/// The WAL file's size after a checkpoint that restarts it, bytes (`PRAGMA
/// journal_size_limit`; SQLite's default keeps it at its largest). A WAL that a long reader
/// let grow past [`SQLITE_WAL_AUTOCHECKPOINT_PAGES`] gives the disk back down to this.
pub const SQLITE_JOURNAL_SIZE_LIMIT_BYTES: u64 = 64 * 1024 * 1024;
/// SQLite's page cache for large write transactions, KiB: every connection of ingest's pool
/// keeps it ([`Store::with_ingest_pool`]), and a bulk action's chunk (a replay's request, a
/// delete, a restore, a label change) raises its connection's cache to it for the chunk's
/// transaction only (`bulk/chunk.rs`); the other connections keep [`SQLITE_CACHE_KIB`]. A
/// 500-record batch or chunk touches leaf pages of every index of the tables it writes; with
/// 2 MiB the cache filled inside the transaction and SQLite spilled dirty pages to the WAL
/// and read them back, again and again. Measured (`docs/bench.md`, "2026-12-06 (3)"):
/// - ingest of 100,000 1 KiB Spring records: the process read 1.13 GB and wrote 1.64 GB with
///   2 MiB, 0.66 GB and 1.39 GB with 4, 8, 16 or 32 MiB alike; 14,397 / 15,558 / 15,008 →
///   14,193 / 16,334 / 16,934 msgs/s with 8 MiB (alternating runs);
/// - a replay of 50,000 (request → `finished`): the request 5.3 / 5.0 / 5.7 → 4.9 / 4.5 /
///   4.1 s, the process's reads -21 %, writes -8 %.
///
/// 8 MiB is twice what a batch needs. Ingest's 2 connections cost at most 12 MiB more than
/// 2 MiB each would; a chunk's connection gives the memory back after its commit.
pub const SQLITE_WRITER_CACHE_KIB: u32 = 8 * 1024;
/// Rows a SQLite connection of ingest's pool buffers for its caller
/// ([`Store::with_ingest_pool`]): at least the most new ids one of ingest's
/// `INSERT … RETURNING` statements returns (`insert::PREPARED_ROWS`, 250), four small
/// columns each. Other pools keep sqlx's 50.
pub const SQLITE_INGEST_ROW_BUFFER: usize = 256;
/// Pool sizes: SQLite serialises writers anyway (WAL lets readers run beside them);
/// PostgreSQL is usually shared, so stay modest.
const SQLITE_MAX_CONNECTIONS: u32 = 8;
const POSTGRES_MAX_CONNECTIONS: u32 = 10;

#[derive(Clone, Debug)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to the concrete pool and `$DB` to its database type, so
/// one generic query builder serves both arms.
macro_rules! on_pool {
    ($store:expr, |$pool:ident, $DB:ident| $body:expr) => {
        match &$store.pool {
            Pool::Sqlite($pool) => {
                type $DB = sqlx::Sqlite;
                $body
            }
            Pool::Postgres($pool) => {
                type $DB = sqlx::Postgres;
                $body
            }
        }
    };
}

/// As `on_pool!`, for one write statement outside a transaction (autocommit), with `$conn`
/// bound to `&mut` a pooled connection: the connection is taken first and then this
/// process's write gate (`gate.rs`; nothing on PostgreSQL), held while `$body` runs — so the
/// gate is never held while waiting for a connection. A `?` in the expansion returns the
/// enclosing fn's `StoreError` (pool timeout, nested write).
macro_rules! on_write_conn {
    ($store:expr, |$conn:ident, $DB:ident| $body:expr) => {
        match &$store.pool {
            Pool::Sqlite(pool) => {
                type $DB = sqlx::Sqlite;
                let mut pooled = pool
                    .acquire()
                    .await
                    .map_err($crate::store::dialect::store_error)?;
                let _pass = $store.gate_pass().await?;
                let $conn: &mut sqlx::SqliteConnection = &mut pooled;
                $body
            }
            Pool::Postgres(pool) => {
                type $DB = sqlx::Postgres;
                let mut pooled = pool
                    .acquire()
                    .await
                    .map_err($crate::store::dialect::store_error)?;
                let $conn: &mut sqlx::PgConnection = &mut pooled;
                $body
            }
        }
    };
}

// The actions on dead letters (issue 3). Declared after `on_pool!` so they can use it.
mod actions;
mod alert_inputs;
mod alerts;
// Four-eyes approval (issue 10 item 4, migration 0020).
mod approvals;
mod audit;
mod bulk;
// Canary replay (issue 9 item 3, migration 0017).
pub(crate) mod canary;
mod confirm_all;
// Connecting: SQLite or PostgreSQL, own pools, ping, close.
mod connect;
mod export;
// Error groups and match counts from the maintained aggregate (issue 12 item 3, migration 0027).
mod group_counts;
mod group_hours;
pub use self::group_counts::{GroupListing, GroupsCounted, GROUPS_SCAN_ROWS};
pub use self::group_hours::EDGE_SCAN_ROWS;
mod insert;
pub use self::insert::Prepared;
mod job_control;
mod job_tallies;
mod jobs;
mod label_bulk;
mod label_reads;
mod labels;
mod lag;
mod lock;
// Per-key order of a replay job's outbox rows (issue 9, migration 0016).
mod order;
mod outbox;
mod outbox_mark;
pub(crate) mod outcome;
mod quarantine;
mod replay_request;
// A replay job's rate limit shared by every relay instance (issue 12, migration 0026).
mod replay_rate;
mod replay_sample;
// Automatic reprocessing (issue 13, migration 0022): the versioned rule set.
mod rounds;
mod rule_dry_run;
mod rule_sets;
mod rule_states;
mod scope;
pub use self::scope::there_is_no;
// Free-text search (issue 12 item 2, migration 0024).
mod search;
// The SQL of a search: text checks per database, the index step's queries, backlog rows.
mod search_sql;
// The search indexer's rounds (issue 12 item 4, migration 0028).
mod search_index;
pub use self::search::{
    BACKLOG_SCAN_ROWS as SEARCH_BACKLOG_SCAN_ROWS, COMMON_HITS as SEARCH_COMMON_HITS,
    EXTENDED_SCAN_ROWS as SEARCH_EXTENDED_SCAN_ROWS, INDEX_ROWS as SEARCH_INDEX_ROWS,
    PROBE_ROWS as SEARCH_PROBE_ROWS, SCAN_ROWS as SEARCH_SCAN_ROWS,
    WORD_CANDIDATES as SEARCH_WORD_CANDIDATES,
};
mod stats;
// Sorting dead letters into tiers (issue 13, migration 0022).
mod ingest_tiers;
mod tier_candidates;
mod tier_moves;
mod tiers;
mod transform_marks;
mod tx_retry;
mod versions;
// Retention and the archive (issue 8).
mod archive;
mod retention;

pub use self::lock::{lock_key, AdvisoryLock, ServeClaim};

pub use self::alert_inputs::{AlertFilter, GroupCount, LIVE_STATUSES, MAX_NEW_FINGERPRINTS};
pub use self::alerts::{
    AlertCycle, ClaimFor, DueDelivery, NewAlertEvent, ALERTS_ACTOR, MAX_STATE_ROWS,
};
pub use self::approvals::EXPIRY_ACTOR;
pub use self::archive::{ArchiveRow, RestoredDeadLetter};
pub use self::bulk::{longest_bulk_transaction, BulkAction, CHUNK_ROWS, STALE_AFTER_MS};
pub use self::canary::CANARY_ACTOR;
pub use self::confirm_all::{ConfirmAllError, ALL_OUTCOME};
pub use self::export::{ExportRecord, EXPORT_PAGE_ROWS};
pub(crate) use self::lag::{LagWrite, MAX_LAG_TOPICS};
pub(crate) use self::outbox::{ActiveJob, Claim, ClaimedRow};
pub(crate) use self::outbox_mark::{Failed, MarkBatch, Published, Retry};
pub(crate) use self::replay_rate::RateSlot;
pub use self::replay_rate::RateState;
pub use self::replay_request::check_options as check_replay_options;
pub use self::retention::{
    Candidate, CandidateQuery, RetentionRun, StatusUsage, DEPENDENT_TABLES, RUN_STALE_AFTER_MS,
};
pub use self::rounds::{
    rule_actor, DueSummary, RefailTally, RoundResult, RoundState, RULE_ACTOR_PREFIX,
};
pub use self::rule_dry_run::DRY_RUN_CHUNK;
pub use self::rule_sets::{RuleSetOrigin, RuleSetVersion, CONFIG_ACTOR};
pub use self::rule_states::version_info;
pub use self::scope::MAX_SCOPE_TOPICS;
pub use self::stats::{
    ArrivalBucket, ArrivalScope, ArrivalTotal, GroupStats, JobCounts, MatchCount, PerStatus,
    Resolution, StatsSnapshot, TopicStats, ARRIVALS_CAP, GROUP_HOURS_KEPT_MS, HOURS_KEPT_MS,
    HOUR_MS, MINUTES_KEPT_MS, MINUTE_MS, OTHER_SOURCES, STATS_ROW_CAP,
};
pub use self::tier_candidates::{CandidateScan, TierCandidate};
pub use self::tier_moves::{MoveReport, MOVE_BATCH};
pub use self::tiers::{check_loop_guard, decide, Decision, SortReport, SORTER_ACTOR, SORT_BATCH};
pub(crate) use self::transform_marks::{ScriptMarks, Skipped};
pub(crate) use self::tx_retry::retry_rolled_back;
pub use self::tx_retry::TX_ATTEMPTS;
pub use self::versions::MAX_VERSIONS_LISTED;
pub use crate::automation::view::{RuleState, TierTotal};

// Declared after `on_pool!` (macro_rules are textually scoped): users, sessions, API tokens.
mod auth;
pub use self::auth::{
    NewApiToken, NewSession, NewUser, SessionLimits, SessionRecord, TokenOwner, UserCredentials,
};
// Single sign-on (issue 10 item 5, migration 0021): OIDC sign-ins in progress, SSO users.
mod sso;
pub use self::sso::{OidcFlow, SsoUser, SSO_PASSWORD_HASH};

/// Handle to the store; cheap to clone (it wraps a connection pool).
#[derive(Clone, Debug)]
pub struct Store {
    pool: Pool,
    /// SQLite: this process's write gate for the database (`gate.rs`), shared by every
    /// handle on the same file. PostgreSQL and in-memory SQLite: none.
    gate: Option<Arc<WriteGate>>,
    /// Search terms the index step found too common (`common_terms.rs`), shared by the
    /// handle's clones and the handles of [`Store::with_own_pool`].
    common_terms: Arc<common_terms::CommonTerms>,
    /// Search scans a list announced, for its count to take (`scan_share.rs`); shared like
    /// `common_terms`.
    scan_share: Arc<scan_share::ScanShare>,
    /// The filter bar's choices, kept for a few seconds (`facet_cache.rs`); shared like
    /// `common_terms`.
    facet_cache: Arc<facet_cache::FacetCache>,
    /// The rule set ingest sorts new dead letters with, and what it and the sorter sorted
    /// (`ingest_tiers.rs`); shared like `common_terms`.
    ingest_tiers: Arc<ingest_tiers::IngestTiers>,
}

impl Store {
    /// "sqlite" or "postgres".
    pub fn backend(&self) -> &'static str {
        use self::dialect::Dialect;
        on_pool!(self, |_pool, DB| <DB as Dialect>::NAME)
    }

    /// One page of dead letters matching `query.filter`, ordered by
    /// (dead_lettered_at DESC, id DESC), starting after `query.cursor` (keyset, never OFFSET).
    ///
    /// `query.limit` 0 means [`DEFAULT_LIMIT`]; above [`MAX_LIMIT`] it is capped.
    /// `next_cursor` is set when more rows follow (it encodes the page's last row).
    ///
    /// With free text (`q`), each item carries where it matched
    /// ([`DeadLetterSummary::search_match`]), and the work is bounded (`search.rs`): a page
    /// may hold fewer than `limit` items and still have a `next_cursor`, when the search
    /// stopped after reading [`SEARCH_SCAN_ROWS`] dead letters; the next page continues
    /// with older ones.
    /// Errors: `Unavailable`, `Database`, `Corrupt` (a stored row that does not parse).
    pub async fn list(&self, query: &ListQuery) -> Result<Page<DeadLetterSummary>, StoreError> {
        let limit = match query.limit {
            0 => DEFAULT_LIMIT,
            n => n.min(MAX_LIMIT),
        } as usize;
        // One row more than the page tells whether another page follows.
        let fetch = limit as i64 + 1;
        // A search (`q`) is answered in bounded steps (`search.rs`) and may stop before a full
        // page: `stopped_at` is then where the next page continues.
        let (rows, stopped_at) = match query.filter.q.as_deref() {
            Some(q) => self.search_rows(query, q, fetch).await?,
            None => {
                let rows: Vec<SummaryRow> = on_pool!(self, |pool, DB| {
                    let mut qb = sql::list::<DB>("", &query.filter, query.cursor, fetch);
                    qb.build_query_as().fetch_all(pool).await
                })
                .map_err(store_error)?;
                (rows, None)
            }
        };
        let more = rows.len() > limit;
        let mut items = rows
            .into_iter()
            .take(limit)
            .map(SummaryRow::into_summary)
            .collect::<Result<Vec<_>, _>>()?;
        self.attach_labels(&mut items).await?;
        if let Some(q) = query.filter.q.as_deref() {
            self.attach_search_matches(&mut items, q).await?;
        }
        let next_cursor = match items.last() {
            Some(last) if more => Some(
                Cursor {
                    dead_lettered_at_ms: last.dead_lettered_at_ms,
                    id: last.id,
                }
                .encode(),
            ),
            _ => stopped_at.map(|c| c.encode()),
        };
        Ok(Page { items, next_cursor })
    }

    /// The database's plan for [`Store::list`] of `query`, one line per element (SQLite's
    /// `EXPLAIN QUERY PLAN` details, PostgreSQL's `EXPLAIN` text). For benchmarks and tests
    /// that check a filter is served by an index rather than a scan and sort.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn explain_list(&self, query: &ListQuery) -> Result<Vec<String>, StoreError> {
        use self::dialect::Dialect;
        use sqlx::Row;
        let fetch = i64::from(query.limit.max(1)) + 1;
        on_pool!(self, |pool, DB| {
            let mut qb =
                sql::list::<DB>(<DB as Dialect>::EXPLAIN, &query.filter, query.cursor, fetch);
            let rows = qb.build().fetch_all(pool).await.map_err(store_error)?;
            rows.iter()
                .map(|r| r.try_get::<String, _>(<DB as Dialect>::EXPLAIN_COLUMN))
                .collect::<Result<Vec<_>, _>>()
                .map_err(store_error)
        })
    }

    /// How many dead letters match `filter`.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn count(&self, filter: &Filter) -> Result<i64, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb = sql::count::<DB>(filter);
            qb.build_query_scalar::<i64>().fetch_one(pool).await
        })
        .map_err(store_error)
    }

    /// The whole dead letter (with its labels and its group's), or `None` if there is no
    /// such id.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt` (stored headers or status that do not parse).
    pub async fn get(&self, id: i64) -> Result<Option<DeadLetter>, StoreError> {
        // The row, its tiering and its link in one statement: one snapshot, so a dead letter
        // is never shown with a tiering but without its tier (the sorter writes both in one
        // transaction), and one round trip instead of three.
        let row: Option<rows::GetRow> = on_pool!(self, |pool, DB| {
            let mut qb = sql::get::<DB>(id);
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        let Some(rows::GetRow {
            full,
            tiering,
            link,
        }) = row
        else {
            return Ok(None);
        };
        let mut d = full.into_dead_letter()?;
        self.attach_labels(std::slice::from_mut(&mut d.summary))
            .await?;
        d.link = link.into_link();
        d.tiering = match tiering.into_row() {
            Some(r) => Some(self.tiering(r).await?),
            None => None,
        };
        Ok(Some(d))
    }

    /// Error groups of the dead letters matching `filter`, largest first, at most `limit`:
    /// [`Store::error_groups_counted`]'s groups (see there for how they are counted).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn error_groups(
        &self,
        filter: &Filter,
        limit: u32,
    ) -> Result<Vec<ErrorGroup>, StoreError> {
        Ok(self.error_groups_counted(filter, limit).await?.groups)
    }

    /// Distinct values for the filter bar's choices: (source topics, DLQ topics, consumer groups).
    ///
    /// Each list is sorted ascending (byte order on SQLite, the column's collation on
    /// PostgreSQL), holds at most [`FACET_CAP`] values, and counts every stored dead letter
    /// (deleted ones too). Read at most every few seconds (`facet_cache.rs`): a value this
    /// handle stores is offered at once, another instance's or a purge's within
    /// `facet_cache::FRESH_FOR`.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn facets(&self) -> Result<Facets, StoreError> {
        if let Some(f) = self.facet_cache.get() {
            return Ok(f);
        }
        let read_at = std::time::Instant::now();
        let f = Facets {
            source_topics: self.facet(FacetColumn::SourceTopic).await?,
            dlq_topics: self.facet(FacetColumn::DlqTopic).await?,
            consumer_groups: self.facet(FacetColumn::ConsumerGroup).await?,
        };
        self.facet_cache.put(&f, read_at);
        Ok(f)
    }

    async fn facet(&self, column: FacetColumn) -> Result<Vec<String>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb = sql::facet::<DB>(column, i64::from(FACET_CAP));
            qb.build_query_scalar::<String>().fetch_all(pool).await
        })
        .map_err(store_error)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Facets {
    pub source_topics: Vec<String>,
    pub dlq_topics: Vec<String>,
    pub consumer_groups: Vec<String>,
}
