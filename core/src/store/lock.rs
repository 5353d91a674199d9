//! A PostgreSQL session-level advisory lock held on a connection of its own, the primitive
//! under [`crate::leader`]. The lock lives exactly as long as the database session: when the
//! process holding it dies (even by SIGKILL) the server closes the session and the lock is
//! free for another instance at once. Advisory locks are scoped to the current database, so
//! two redrive deployments on different databases of one server never contend.

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions as _, Connection as _};

use super::dialect::store_error;
use super::{Pool, Store, StoreError};

/// A held advisory lock (PostgreSQL only). Dropping it closes its connection, which releases
/// the lock; [`AdvisoryLock::release`] does so explicitly and faster.
#[derive(Debug)]
pub struct AdvisoryLock {
    conn: PgConnection,
    key: i64,
}

impl Store {
    /// Whether this store is shared by several processes that need one leader: PostgreSQL.
    /// A SQLite file has one writing process, so it is always its own leader.
    pub fn is_shared(&self) -> bool {
        matches!(self.pool, Pool::Postgres(_))
    }

    /// Tries once to take the session-level advisory lock `key` on a new, dedicated
    /// connection (never a pooled one: the pool could close or reuse it and silently drop
    /// the lock). `Ok(None)` when another session holds it or the store is SQLite.
    ///
    /// Errors: `Unavailable` when the database cannot be reached.
    pub async fn try_advisory_lock(&self, key: i64) -> Result<Option<AdvisoryLock>, StoreError> {
        let Pool::Postgres(pool) = &self.pool else {
            return Ok(None);
        };
        let opts: PgConnectOptions = (*pool.connect_options()).clone();
        let mut conn = opts
            .application_name("redrive-leader")
            .connect()
            .await
            .map_err(store_error)?;
        let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(key)
            .fetch_one(&mut conn)
            .await
            .map_err(store_error)?;
        if got {
            Ok(Some(AdvisoryLock { conn, key }))
        } else {
            let _ = conn.close().await;
            Ok(None)
        }
    }
}

impl AdvisoryLock {
    /// Confirms the lock is still held by this session (the session is alive and the lock is
    /// in `pg_locks` under its backend pid).
    ///
    /// Errors: `Unavailable` when the connection is gone (the lock may now be someone
    /// else's), `Conflict` when the session lives but no longer holds the lock.
    pub async fn check(&mut self) -> Result<(), StoreError> {
        // An advisory lock on one bigint key is recorded with the key's high and low 32 bits
        // in classid/objid and objsubid = 1 (PostgreSQL manual, "pg_locks").
        let held: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
             AND pid = pg_backend_pid() AND objsubid = 1 AND granted \
             AND classid::bigint = $1 AND objid::bigint = $2)",
        )
        .bind((self.key as u64 >> 32) as i64)
        .bind((self.key as u64 & 0xffff_ffff) as i64)
        .fetch_one(&mut self.conn)
        .await
        .map_err(store_error)?;
        if held {
            Ok(())
        } else {
            Err(StoreError::Conflict(format!(
                "advisory lock {} is no longer held by this session",
                self.key
            )))
        }
    }

    /// Releases the lock and closes its connection (best effort: a failure means the
    /// connection is already gone, which releases the lock too).
    pub async fn release(mut self) {
        let _ = sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(self.key)
            .execute(&mut self.conn)
            .await;
        let _ = self.conn.close().await;
    }
}

/// A stable advisory-lock key for a name (the first 8 bytes of its SHA-256, big-endian), so
/// a lock's purpose can be found again from its name.
pub fn lock_key(name: &str) -> i64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(name.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// One `redrive serve` per SQLite file: an exclusive OS lock (`flock`) on `PATH.serve-lock`
/// beside the database, held for the life of the process and released by the OS when it
/// ends, however it ends. A second instance on the same file would run a second ingest and
/// relay outside any leader election, so it is refused instead.
#[derive(Debug)]
pub struct ServeClaim {
    _file: std::fs::File,
}

impl Store {
    /// Claims this SQLite store for one serving process; `Ok(None)` for PostgreSQL (several
    /// instances elect a leader instead) and for in-memory SQLite.
    ///
    /// Errors: `Conflict` naming the lock file when another process holds it; `Database`
    /// when the lock file cannot be created.
    pub fn claim_single_server(&self) -> Result<Option<ServeClaim>, StoreError> {
        let Pool::Sqlite(pool) = &self.pool else {
            return Ok(None);
        };
        let db = pool.connect_options().get_filename().to_path_buf();
        let name = db.to_string_lossy();
        if name.is_empty() || name.contains(":memory:") || pool.options().get_max_connections() <= 1
        {
            return Ok(None);
        }
        // The file itself, not the spelling of its path: a symlink or `..` must find the same
        // lock. (A hard link under another name still would not; docs/deployment.md.)
        let db = std::fs::canonicalize(&db).unwrap_or(db);
        let mut lock_name = db.clone().into_os_string();
        lock_name.push(".serve-lock");
        let path = std::path::PathBuf::from(lock_name);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| StoreError::Database(format!("cannot open {}: {e}", path.display())))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(ServeClaim { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Conflict(format!(
                "another `redrive serve` is using {} (it holds {}); run one instance per \
                 SQLite file, or use PostgreSQL for several instances",
                db.display(),
                path.display()
            ))),
            Err(std::fs::TryLockError::Error(e)) => Err(StoreError::Database(format!(
                "cannot lock {}: {e}",
                path.display()
            ))),
        }
    }
}
