//! The write gate: on SQLite, every write of this process queues first-in-first-out before it
//! takes the database's write lock.
//!
//! SQLite has one writer at a time, and its busy handler is not a queue: a writer that finds
//! the lock taken sleeps and polls again with growing sleeps, and writers that come back
//! quickly (the relay's claims and marks, a bulk action's chunks, ingest batches) can take the
//! lock between its polls, again and again. A clean-clone CI run saw ingest wait 5,034 ms that
//! way and fail with "database is locked" (docs/replay.md, "Concurrency on SQLite").
//!
//! So on SQLite the store holds one [`tokio::sync::Mutex`] per database file for the whole
//! process — tokio documents it as "a guaranteed FIFO basis: the order in which tasks call
//! `lock` is the exact order in which they acquire it" — and [`Store::begin_write`] awaits it
//! before `BEGIN IMMEDIATE`. The returned [`WriteTx`] holds the gate until it is committed,
//! rolled back or dropped, so each writer of the process waits its turn once, in order, and
//! then finds SQLite's lock free (unless another *process* holds it: the CLI's `quarantine
//! retry` or `archive restore` against the same file still waits in SQLite's busy handler,
//! `busy_timeout`; docs/invariants.md, "Writers on SQLite"). Frequent single-statement writes
//! outside a transaction (session and token "last seen", quarantine retries, stats compaction)
//! pass the same gate through [`Store::gate_pass`].
//!
//! PostgreSQL has no gate: it has row locks and `SKIP LOCKED`, and several instances share one
//! database, which an in-process queue could not order anyway.
//!
//! A task that holds the gate and asks for it again would wait for itself forever. The gate
//! remembers the tokio task holding it and answers such a nested request with an error
//! (`StoreError::Database`, "nested write") instead of hanging; no store method begins a
//! write while it holds one (each write transaction runs only SQL on its own connection).

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex as StdMutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use sqlx::{Database, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::dialect::{store_error, Dialect};
use super::{Store, StoreError};

/// What the gate has seen since the process started: how often writers passed it, how long
/// they queued for it and how long they held it. Read by `/metrics`
/// (`redrive_store_write_gate_*`, docs/metrics.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteGateStats {
    /// Writes (transactions and single statements) that passed the gate.
    pub passes: u64,
    /// Of those, the ones that found it held and queued.
    pub queued: u64,
    /// Total time spent queued, over all passes.
    pub wait_total: Duration,
    /// Longest single wait.
    pub wait_max: Duration,
    /// Total time the gate was held (from getting it to commit, rollback or drop).
    pub hold_total: Duration,
    /// Longest single hold.
    pub hold_max: Duration,
}

/// The gate of one SQLite database, shared by every [`Store`] handle on it in this process.
#[derive(Debug, Default)]
pub(crate) struct WriteGate {
    lock: Arc<Mutex<()>>,
    /// The tokio task holding the gate, to answer a nested request with an error.
    holder: StdMutex<Option<tokio::task::Id>>,
    stats: StdMutex<WriteGateStats>,
}

/// A poisoned std mutex only means a panic elsewhere mid-update of plain data: still usable.
fn lock<T>(m: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One gate per database file in this process: two `Store::connect` of the same file (by
/// any spelling of its path) and every [`Store::with_own_pool`] handle share it.
pub(crate) fn gate_for_file(path: &Path) -> Arc<WriteGate> {
    static GATES: OnceLock<StdMutex<HashMap<PathBuf, Weak<WriteGate>>>> = OnceLock::new();
    let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut gates = lock(GATES.get_or_init(Default::default));
    gates.retain(|_, g| g.strong_count() > 0);
    if let Some(g) = gates.get(&key).and_then(Weak::upgrade) {
        return g;
    }
    let g = Arc::new(WriteGate::default());
    gates.insert(key, Arc::downgrade(&g));
    g
}

impl WriteGate {
    /// Waits for the gate, in arrival order. Errors: `Database` ("nested write") when the
    /// calling task already holds it.
    async fn enter(self: &Arc<Self>) -> Result<GatePass, StoreError> {
        let me = tokio::task::try_id();
        let asked = Instant::now();
        let (guard, queued) = match self.lock.clone().try_lock_owned() {
            Ok(g) => (g, false),
            Err(_) => {
                if me.is_some() && *lock(&self.holder) == me {
                    return Err(StoreError::Database(
                        "nested write: this task already holds the store's write gate (a \
                         write transaction), and waiting for it again would never end"
                            .into(),
                    ));
                }
                (self.lock.clone().lock_owned().await, true)
            }
        };
        let waited = asked.elapsed();
        *lock(&self.holder) = me;
        {
            let mut s = lock(&self.stats);
            s.passes += 1;
            if queued {
                s.queued += 1;
                s.wait_total += waited;
                s.wait_max = s.wait_max.max(waited);
            }
        }
        Ok(GatePass {
            held: Some(Held {
                gate: self.clone(),
                since: Instant::now(),
                _guard: guard,
            }),
        })
    }
}

#[derive(Debug)]
struct Held {
    gate: Arc<WriteGate>,
    since: Instant,
    _guard: OwnedMutexGuard<()>,
}

/// A turn at the write gate (or nothing, on PostgreSQL); the gate opens for the next writer
/// when this is dropped.
#[derive(Debug)]
#[must_use = "the gate opens again as soon as the pass is dropped"]
pub(crate) struct GatePass {
    held: Option<Held>,
}

impl Drop for GatePass {
    fn drop(&mut self) {
        if let Some(h) = &self.held {
            // Runs before the fields drop, so the holder is cleared before the next writer
            // gets the gate (and records itself).
            *lock(&h.gate.holder) = None;
            let held = h.since.elapsed();
            let mut s = lock(&h.gate.stats);
            s.hold_total += held;
            s.hold_max = s.hold_max.max(held);
        }
    }
}

/// A write transaction that holds the store's write gate until it ends: `commit`,
/// `rollback` or drop (a dropped transaction is rolled back, as sqlx's). Dereferences to the
/// connection, so statements run on `&mut *tx` as on a `sqlx::Transaction`.
#[derive(Debug)]
pub(crate) struct WriteTx<DB: Database> {
    // Declared before the pass: on drop, the transaction (its rollback) goes first.
    tx: Transaction<'static, DB>,
    _pass: GatePass,
}

impl<DB: Database> WriteTx<DB> {
    /// Commits, then opens the gate. Errors: as `sqlx::Transaction::commit`.
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        let WriteTx { tx, _pass } = self;
        tx.commit().await
    }

    /// Rolls back, then opens the gate. Errors: as `sqlx::Transaction::rollback`.
    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        let WriteTx { tx, _pass } = self;
        tx.rollback().await
    }
}

impl<DB: Database> Deref for WriteTx<DB> {
    type Target = DB::Connection;
    fn deref(&self) -> &DB::Connection {
        &self.tx
    }
}

impl<DB: Database> DerefMut for WriteTx<DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        &mut self.tx
    }
}

/// How a write transaction begins. SQLite: `BEGIN IMMEDIATE` takes the write lock at once, so
/// a transaction that reads and then writes never fails with "database is locked" when it
/// tries to upgrade a read lock. PostgreSQL: a plain `BEGIN` (row locks do the rest). Private
/// to this module: every write transaction goes through [`Store::begin_write`].
fn begin_statement<DB: Dialect>() -> &'static str {
    if DB::ONE_WRITER {
        "BEGIN IMMEDIATE"
    } else {
        "BEGIN"
    }
}

impl Store {
    /// Begins a write transaction on `pool` (this store's pool, from `on_pool!`). On SQLite it
    /// first waits for this process's write gate, in arrival order, then runs `BEGIN
    /// IMMEDIATE`; the gate stays held until the transaction ends. On PostgreSQL it is a plain
    /// `BEGIN`, no gate.
    ///
    /// Errors: `Unavailable` (pool timeout, "database is locked" by another process after
    /// `busy_timeout`), `Database` ("nested write" when this task already holds a write
    /// transaction of this database, or another database error).
    pub(crate) async fn begin_write<DB: Dialect>(
        &self,
        pool: &sqlx::Pool<DB>,
    ) -> Result<WriteTx<DB>, StoreError> {
        // The connection first, then the gate: the gate is never held while its holder waits
        // for a pooled connection (20 page readers can keep the web's pool busy), only while
        // it writes. A writer waiting for the gate holds an idle connection of its own pool.
        let conn = pool.acquire().await.map_err(store_error)?;
        self.begin_write_on(conn).await
    }

    /// [`Store::begin_write`] on a connection already taken from this store's pool: waits
    /// for the gate, then begins. Errors: as [`Store::begin_write`].
    pub(crate) async fn begin_write_on<DB: Dialect>(
        &self,
        conn: sqlx::pool::PoolConnection<DB>,
    ) -> Result<WriteTx<DB>, StoreError> {
        let pass = self.gate_pass().await?;
        // What `Pool::begin_with` does, on a connection already in hand.
        let tx = Transaction::begin(conn, Some(begin_statement::<DB>().into()))
            .await
            .map_err(store_error)?;
        Ok(WriteTx { tx, _pass: pass })
    }

    /// A turn at the write gate for a single write statement outside a transaction
    /// (autocommit; `on_write_conn!` takes the connection, then this): hold it while the
    /// statement runs. Nothing on PostgreSQL or in-memory SQLite.
    ///
    /// Errors: `Database` ("nested write", as [`Store::begin_write`]).
    pub(crate) async fn gate_pass(&self) -> Result<GatePass, StoreError> {
        match &self.gate {
            Some(gate) => gate.enter().await,
            None => Ok(GatePass { held: None }),
        }
    }

    /// The write gate's figures for this database in this process (shared by every handle
    /// on it), or `None` on PostgreSQL (and in-memory SQLite), which have no gate.
    pub fn write_gate_stats(&self) -> Option<WriteGateStats> {
        self.gate.as_ref().map(|g| *lock(&g.stats))
    }
}

/// A transaction that only reads, outside the write gate: PostgreSQL's planner settings
/// (`SET LOCAL enable_seqscan = off`, the free-text search's index step) hold for one
/// transaction only. It must never write: a deferred SQLite transaction that reads then writes
/// fails with "database is locked" (use [`Store::begin_write`] for writes).
///
/// Errors: `Unavailable`, `Database` (from [`store_error`]).
pub(crate) async fn begin_read<DB: Database>(
    pool: &sqlx::Pool<DB>,
) -> Result<Transaction<'static, DB>, StoreError> {
    pool.begin().await.map_err(store_error)
}
