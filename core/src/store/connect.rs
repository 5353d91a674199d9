//! Connecting to the store: SQLite (file or memory, WAL, the durability chosen) or
//! PostgreSQL, a handle with a pool of its own, the readiness ping and the graceful close.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::dialect::{self, store_error};
use super::{
    gate, Pool, Store, StoreError, ACQUIRE_TIMEOUT, POSTGRES_MAX_CONNECTIONS, SQLITE_BUSY_TIMEOUT,
    SQLITE_CACHE_KIB, SQLITE_MAX_CONNECTIONS, SQLITE_MMAP_BYTES,
};

/// When a SQLite commit is durable (`PRAGMA synchronous`, in WAL mode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SqliteDurability {
    /// `synchronous=FULL` (the default): the WAL is fsynced at every commit, so a commit that
    /// returned survives power loss. Ingest commits Kafka offsets right after its store
    /// commit, and the relay publishes after its outbox commit: both rely on this.
    #[default]
    Full,
    /// `synchronous=NORMAL`: the WAL is fsynced only at checkpoints; a commit survives a
    /// crash of redrive but may be lost on power loss or an OS crash (the last commits before
    /// it), after their Kafka offsets were committed. Faster; for throwaway stores and to
    /// measure the cost of `Full` (`make bench`).
    Normal,
}

impl Store {
    /// Connects to `url`: `sqlite:PATH` / `sqlite://PATH` (file created if missing, WAL mode)
    /// or `postgres://...` / `postgresql://...`. Does not run migrations.
    ///
    /// SQLite connections use WAL, `synchronous=FULL` (see [`SqliteDurability`]: a commit is
    /// on disk when it returns, power loss included, so ingest may then commit the Kafka
    /// offsets), a 30 s busy timeout and foreign keys; writes of this process queue at the
    /// file's write gate (one per file, shared by every handle on it: `gate.rs`).
    /// `sqlite::memory:` works (one connection, kept open) for throwaway use.
    ///
    /// Errors: `BadUrl` for another scheme or an unparsable URL, `Unavailable` if the database
    /// cannot be reached or opened.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        Store::connect_with(url, SqliteDurability::default()).await
    }

    /// As [`Store::connect`], with SQLite's commit durability chosen (ignored for PostgreSQL,
    /// whose `synchronous_commit` is the server's setting).
    pub async fn connect_with(
        url: &str,
        durability: SqliteDurability,
    ) -> Result<Store, StoreError> {
        let bad_url = || StoreError::BadUrl(redact(url));
        if url.starts_with("sqlite:") {
            let opts = SqliteConnectOptions::from_str(url)
                .map_err(|_| bad_url())?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(match durability {
                    SqliteDurability::Full => SqliteSynchronous::Full,
                    SqliteDurability::Normal => SqliteSynchronous::Normal,
                })
                .busy_timeout(SQLITE_BUSY_TIMEOUT)
                .pragma("cache_size", format!("-{SQLITE_CACHE_KIB}"))
                .pragma("mmap_size", SQLITE_MMAP_BYTES.to_string())
                .pragma(
                    "wal_autocheckpoint",
                    super::SQLITE_WAL_AUTOCHECKPOINT_PAGES.to_string(),
                )
                .pragma(
                    "journal_size_limit",
                    super::SQLITE_JOURNAL_SIZE_LIMIT_BYTES.to_string(),
                )
                .foreign_keys(true);
            let in_memory = url.contains(":memory:") || url.contains("mode=memory");
            if !in_memory {
                create_parent_dir(opts.get_filename())?;
            }
            let pool_opts = if in_memory {
                // Every SQLite connection to `:memory:` is a database of its own: keep exactly
                // one, forever, or the data would vanish with it.
                SqlitePoolOptions::new()
                    .max_connections(1)
                    .min_connections(1)
                    .idle_timeout(None)
                    .max_lifetime(None)
            } else {
                SqlitePoolOptions::new().max_connections(SQLITE_MAX_CONNECTIONS)
            };
            let file = opts.get_filename().to_path_buf();
            let pool = connect_sqlite(pool_opts.acquire_timeout(ACQUIRE_TIMEOUT), opts)
                .await
                .map_err(connect_error)?;
            // After the connect, so the file exists and its canonical path names it. An
            // in-memory store has one connection, which already serialises its writers (and a
            // gate taken after that one connection could never be released to a writer
            // waiting for it).
            let gate = (!in_memory).then(|| gate::gate_for_file(&file));
            Ok(Store {
                pool: Pool::Sqlite(pool),
                gate,
                common_terms: Arc::default(),
                scan_share: Arc::default(),
                facet_cache: Arc::default(),
                ingest_tiers: Arc::default(),
            })
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            // JIT off for redrive's sessions: its statements do bounded work, and a cost
            // estimate that crosses `jit_above_cost` (a misestimated seek) made PostgreSQL
            // compile a plan for 40+ ms to run it in under 1 ms (`docs/bench.md`, "2026-12-07").
            let opts = PgConnectOptions::from_str(url)
                .map_err(|_| bad_url())?
                .options([("jit", "off")]);
            let pool = PgPoolOptions::new()
                .max_connections(POSTGRES_MAX_CONNECTIONS)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect_with(opts)
                .await
                .map_err(connect_error)?;
            Ok(Store {
                pool: Pool::Postgres(pool),
                gate: None,
                common_terms: Arc::default(),
                scan_share: Arc::default(),
                facet_cache: Arc::default(),
                ingest_tiers: Arc::default(),
            })
        } else {
            Err(bad_url())
        }
    }

    /// Another handle on the same database with a connection pool of its own, of at most
    /// `max_connections`. `serve` gives ingest, the replay relay and the web their own pools,
    /// so that none can take every connection from the others (slow pages cannot make
    /// ingest wait for a connection, nor a burst of relay marks the pages). SQLite writers
    /// still take turns for the one write lock, each transaction short. A one-connection
    /// store (`sqlite::memory:`, a database of its own per connection) is shared as it is.
    ///
    /// Errors: `Unavailable` when the database cannot be reached.
    pub async fn with_own_pool(&self, max_connections: u32) -> Result<Store, StoreError> {
        self.own_pool(max_connections, false).await
    }

    /// [`Store::with_own_pool`] for ingest, which writes 500-record batches and reads back
    /// only small rows. On SQLite each connection:
    /// - hands up to [`super::SQLITE_INGEST_ROW_BUFFER`] rows to the caller before its worker
    ///   thread waits for the caller to take them (sqlx's default is 50, so a full chunk's 250
    ///   new ids of an `INSERT … RETURNING` cost the writer five waits); the other pools keep
    ///   sqlx's default, as their rows can hold whole payloads;
    /// - keeps a page cache of [`super::SQLITE_WRITER_CACHE_KIB`] instead of
    ///   [`super::SQLITE_CACHE_KIB`], so a batch's index pages stay in it until the commit
    ///   instead of being spilled to the WAL and read back.
    ///
    /// Errors: as [`Store::with_own_pool`].
    pub async fn with_ingest_pool(&self, max_connections: u32) -> Result<Store, StoreError> {
        self.own_pool(max_connections, true).await
    }

    async fn own_pool(&self, max_connections: u32, ingest: bool) -> Result<Store, StoreError> {
        let n = max_connections.max(1);
        match &self.pool {
            Pool::Sqlite(p) if p.options().get_max_connections() <= 1 => Ok(self.clone()),
            Pool::Sqlite(p) => {
                let mut opts = (*p.connect_options()).clone();
                if ingest {
                    opts = opts
                        .row_buffer_size(super::SQLITE_INGEST_ROW_BUFFER)
                        .pragma("cache_size", format!("-{}", super::SQLITE_WRITER_CACHE_KIB));
                }
                let pool = SqlitePoolOptions::new()
                    .max_connections(n)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect_with(opts)
                    .await
                    .map_err(connect_error)?;
                Ok(Store {
                    pool: Pool::Sqlite(pool),
                    gate: self.gate.clone(),
                    common_terms: self.common_terms.clone(),
                    scan_share: self.scan_share.clone(),
                    facet_cache: self.facet_cache.clone(),
                    ingest_tiers: self.ingest_tiers.clone(),
                })
            }
            Pool::Postgres(p) => {
                let opts = (*p.connect_options()).clone();
                let pool = PgPoolOptions::new()
                    .max_connections(n)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect_with(opts)
                    .await
                    .map_err(connect_error)?;
                Ok(Store {
                    pool: Pool::Postgres(pool),
                    gate: None,
                    common_terms: self.common_terms.clone(),
                    scan_share: self.scan_share.clone(),
                    facet_cache: self.facet_cache.clone(),
                    ingest_tiers: self.ingest_tiers.clone(),
                })
            }
        }
    }

    /// Cheap round trip, for `/readyz`.
    ///
    /// Errors: `Unavailable` when the database cannot be reached, `Database` otherwise.
    pub async fn ping(&self) -> Result<(), StoreError> {
        on_pool!(self, |pool, _DB| {
            sqlx::query("SELECT 1").execute(pool).await.map(|_| ())
        })
        .map_err(store_error)
    }

    /// Closes the pool, waiting for checked-out connections to be returned (graceful shutdown;
    /// on SQLite this also checkpoints the WAL when the last connection closes).
    pub async fn close(&self) {
        match &self.pool {
            Pool::Sqlite(p) => p.close().await,
            Pool::Postgres(p) => p.close().await,
        }
    }
}

/// The file a `sqlite:` database URL names, parsed as [`Store::connect`] parses it (sqlx's
/// `SqliteConnectOptions`); `None` for a PostgreSQL URL, an in-memory SQLite database
/// (`sqlite::memory:`, `mode=memory`) or a URL that does not parse. The store commands
/// (`redrive token create`, `user ...`) check that it exists before connecting, which would
/// create it.
pub fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    if !url.starts_with("sqlite:") || url.contains(":memory:") || url.contains("mode=memory") {
        return None;
    }
    SqliteConnectOptions::from_str(url)
        .ok()
        .map(|o| o.get_filename().to_path_buf())
}

/// SQLite creates the database file but not its directory: create that too, so a fresh
/// `sqlite:data/redrive.db` just works. Errors: `Unavailable` naming the directory.
fn create_parent_dir(file: &std::path::Path) -> Result<(), StoreError> {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.exists() => std::fs::create_dir_all(dir)
            .map_err(|e| {
                StoreError::Unavailable(format!("cannot create directory {}: {e}", dir.display()))
            }),
        _ => Ok(()),
    }
}

/// Connects a SQLite pool, waiting out another connection's first switch of the same new
/// file to WAL. SQLite answers `SQLITE_BUSY` at once, without calling the busy handler, to a
/// `PRAGMA journal_mode = WAL` (run by every new connection) that meets another connection
/// switching a new file to WAL: the switch takes its exclusive lock in one attempt. Two
/// processes (or pools) opening one new file at the same moment hit it: Python's sqlite3,
/// two threads opening one new file at once with a 10 s busy timeout, failed 7 and 12 times
/// in 300 trials (`docs/invariants.md`, "Writers on SQLite"). So a busy connect is tried
/// again every 50 ms until the busy timeout has passed, as the busy handler would have.
async fn connect_sqlite(
    pool_opts: SqlitePoolOptions,
    opts: SqliteConnectOptions,
) -> Result<SqlitePool, sqlx::Error> {
    let deadline = std::time::Instant::now() + SQLITE_BUSY_TIMEOUT;
    loop {
        match pool_opts.clone().connect_with(opts.clone()).await {
            Err(e) if dialect::is_sqlite_busy(&e) && std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return other,
        }
    }
}

/// A failed connect is always "try again later", except a misconfiguration (bad URL option,
/// authentication) which retrying will not fix.
fn connect_error(e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::Configuration(c) => StoreError::BadUrl(c.to_string()),
        other => store_error(other),
    }
}

/// The URL with any password replaced by `***`, for error messages and logs.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// Distinct values present in the store, for the filter bar's drop-downs.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_file::sqlite_url;

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("sqlite:/tmp/a.db"), "sqlite:/tmp/a.db");
    }

    #[tokio::test]
    async fn refuses_other_schemes() {
        assert!(matches!(
            Store::connect("mysql://x").await,
            Err(StoreError::BadUrl(_))
        ));
    }

    async fn pragma<T>(c: &mut sqlx::SqliteConnection, name: &str) -> T
    where
        T: for<'r> sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite> + Send + Unpin,
    {
        sqlx::query_scalar(&format!("PRAGMA {name}"))
            .fetch_one(c)
            .await
            .unwrap_or_else(|e| panic!("PRAGMA {name}: {e}"))
    }

    /// Every SQLite connection runs with the WAL settings of `store/mod.rs` (WAL, `FULL`, the
    /// checkpoint interval, the WAL's size limit, no memory map), whichever pool connection
    /// answers.
    #[tokio::test]
    async fn sqlite_connections_have_the_wal_settings() {
        let (store, _dir) = crate::store::test_file::sqlite_store("pragmas.db").await;
        let pool = crate::store::test_file::sqlite_pool(&store);
        let mut held = Vec::new();
        for _ in 0..3 {
            let mut c = pool.acquire().await.expect("connection");
            assert_eq!(pragma::<String>(&mut c, "journal_mode").await, "wal");
            assert_eq!(pragma::<i64>(&mut c, "synchronous").await, 2, "FULL");
            assert_eq!(
                pragma::<i64>(&mut c, "wal_autocheckpoint").await,
                i64::from(crate::store::SQLITE_WAL_AUTOCHECKPOINT_PAGES)
            );
            assert_eq!(
                pragma::<i64>(&mut c, "journal_size_limit").await as u64,
                crate::store::SQLITE_JOURNAL_SIZE_LIMIT_BYTES
            );
            assert_eq!(
                pragma::<i64>(&mut c, "mmap_size").await as u64,
                crate::store::SQLITE_MMAP_BYTES
            );
            assert_eq!(
                pragma::<i64>(&mut c, "cache_size").await,
                -i64::from(crate::store::SQLITE_CACHE_KIB)
            );
            held.push(c);
        }
    }

    /// Ingest's pool keeps the larger page cache on each of its connections, with the same WAL
    /// settings; another pool of the same store keeps the small one.
    #[tokio::test]
    async fn the_ingest_pool_has_the_larger_page_cache() {
        let (store, _dir) = crate::store::test_file::sqlite_store("ingest_cache.db").await;
        let ingest = store.with_ingest_pool(2).await.expect("ingest pool");
        let web = store.with_own_pool(2).await.expect("own pool");
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut c = crate::store::test_file::sqlite_pool(&ingest)
                .acquire()
                .await
                .expect("connection");
            assert_eq!(
                pragma::<i64>(&mut c, "cache_size").await,
                -i64::from(crate::store::SQLITE_WRITER_CACHE_KIB)
            );
            assert_eq!(pragma::<String>(&mut c, "journal_mode").await, "wal");
            assert_eq!(pragma::<i64>(&mut c, "synchronous").await, 2, "FULL");
            held.push(c);
        }
        let mut c = crate::store::test_file::sqlite_pool(&web)
            .acquire()
            .await
            .expect("connection");
        assert_eq!(
            pragma::<i64>(&mut c, "cache_size").await,
            -i64::from(crate::store::SQLITE_CACHE_KIB)
        );
    }

    /// SQLite refuses a new connection's switch to WAL at once while another connection switches
    /// the same new file; the connect tries again. Without that, about 1 trial in 30 failed with
    /// "(code: 5) database is locked".
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_openers_of_one_new_file_both_connect() {
        for trial in 0..100 {
            let (url, _dir) = sqlite_url("new.db");
            let (a, b) = tokio::join!(Store::connect(&url), Store::connect(&url));
            a.unwrap_or_else(|e| panic!("trial {trial}, first: {e}"));
            b.unwrap_or_else(|e| panic!("trial {trial}, second: {e}"));
        }
    }
}
