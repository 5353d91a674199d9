//! SQLite WAL checkpoints beside the writers instead of on their path.
//!
//! In WAL mode a commit appends pages to the `-wal` file; a checkpoint copies them into the
//! database file. By default the connection whose commit takes the WAL past
//! `wal_autocheckpoint` pages ([`super::SQLITE_WAL_AUTOCHECKPOINT_PAGES`]) runs that
//! checkpoint itself, inside the writer's call: during a backlog ingest one batch in about
//! fourteen took 65-75 ms instead of 19 ms (`docs/bench.md`, "2026-12-06 (2)"). The
//! checkpointer runs `PRAGMA wal_checkpoint(PASSIVE)` on a connection of its own while the
//! WAL has pages to copy, so that copy (and the database file's fsync) runs on its own thread,
//! beside the next write. A passive checkpoint takes no write lock and waits for no one: it
//! copies what no reader still needs, and the writer's own checkpoint at the threshold is
//! left with little to copy. Durability does not change: every commit still fsyncs the WAL.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Pool, Store, StoreError};

/// How often the checkpointer looks at the WAL while it had nothing to copy, ms.
pub const CHECKPOINT_IDLE_MS: u64 = 200;

/// How long the checkpointer waits after a checkpoint that copied pages, ms: the writer
/// appends about 700 pages per 500-record batch (1 KiB Spring records), and a pass every
/// 20 ms copies a batch or two at a time.
pub const CHECKPOINT_BUSY_MS: u64 = 20;

/// What one `PRAGMA wal_checkpoint(PASSIVE)` reported, in WAL frames (pages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpointed {
    /// Frames in the WAL file (`log`; -1 if the database is not in WAL mode).
    pub wal_frames: i64,
    /// Of those, frames now copied into the database file (`checkpointed`).
    pub copied_frames: i64,
}

impl Store {
    /// A SQLite database in a file (the stores that have a write gate): the only kind with a
    /// WAL to checkpoint.
    fn has_wal(&self) -> bool {
        matches!(self.pool, Pool::Sqlite(_)) && self.gate.is_some()
    }

    /// One passive checkpoint on a connection of this store's pool. `Ok(None)` on PostgreSQL
    /// and in-memory SQLite (nothing to checkpoint).
    ///
    /// Errors: `Unavailable` (pool timeout, database unreachable), `Database` otherwise.
    pub async fn checkpoint_wal(&self) -> Result<Option<Checkpointed>, StoreError> {
        let Pool::Sqlite(pool) = &self.pool else {
            return Ok(None);
        };
        if !self.has_wal() {
            return Ok(None);
        }
        let (_busy, wal_frames, copied_frames): (i64, i64, i64) =
            sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
                .fetch_one(pool)
                .await
                .map_err(super::dialect::store_error)?;
        Ok(Some(Checkpointed {
            wal_frames,
            copied_frames,
        }))
    }

    /// Runs passive checkpoints until `shutdown` (see the module docs): one every
    /// [`CHECKPOINT_BUSY_MS`] while they copy pages, every [`CHECKPOINT_IDLE_MS`] otherwise.
    /// Returns at once on PostgreSQL and in-memory SQLite. Give it a store with a pool of its
    /// own ([`Store::with_own_pool`]) so that it never waits behind the pages' readers. A
    /// failed checkpoint is logged at debug level and tried again at the next pass: the
    /// writers' own checkpoint still runs at the threshold. Closes this handle's pool when it
    /// returns at shutdown.
    pub async fn run_checkpointer(self, shutdown: CancellationToken) {
        if !self.has_wal() {
            return;
        }
        let mut copied_before = 0i64;
        loop {
            let wait = match self.checkpoint_wal().await {
                // Pages were copied since the last pass (or the WAL restarted): look again soon.
                Ok(Some(c)) if c.copied_frames != copied_before && c.copied_frames > 0 => {
                    copied_before = c.copied_frames;
                    CHECKPOINT_BUSY_MS
                }
                Ok(c) => {
                    copied_before = c.map_or(0, |c| c.copied_frames);
                    CHECKPOINT_IDLE_MS
                }
                Err(e) => {
                    tracing::debug!(error = %e, "WAL checkpoint failed; trying again");
                    CHECKPOINT_IDLE_MS
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => {
                    // Its connection is closed here, not left to the pool's drop.
                    self.close().await;
                    return;
                }
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_file::sqlite_store;
    use crate::store::test_records::dead_letter;

    #[tokio::test]
    async fn a_passive_checkpoint_copies_the_wal_of_a_file_store() {
        let (store, _dir) = sqlite_store("checkpoint.db").await;
        let batch: Vec<_> = (0..200).map(|i| dead_letter(i, None)).collect();
        store.insert_batch(&batch).await.expect("insert");
        let c = store
            .checkpoint_wal()
            .await
            .expect("checkpoint")
            .expect("a file store has a WAL");
        assert!(c.wal_frames > 0, "{c:?}");
        // No reader holds an older snapshot: every frame is copied.
        assert_eq!(c.copied_frames, c.wal_frames, "{c:?}");
    }

    #[tokio::test]
    async fn nothing_to_checkpoint_in_memory() {
        let store = Store::connect("sqlite::memory:").await.expect("connect");
        store.migrate().await.expect("migrate");
        assert_eq!(store.checkpoint_wal().await.expect("checkpoint"), None);
        // Returns at once: nothing to run.
        store.run_checkpointer(CancellationToken::new()).await;
    }

    #[tokio::test]
    async fn the_checkpointer_copies_what_is_written_and_stops_at_shutdown() {
        let (store, dir) = sqlite_store("checkpointer.db").await;
        let file = dir.path().join("checkpointer.db");
        let batch: Vec<_> = (0..500).map(|i| dead_letter(i, None)).collect();
        store.insert_batch(&batch).await.expect("insert");
        // The new pages are in the WAL only: the writers' threshold (10,000 pages) is far off.
        let before = std::fs::metadata(&file).expect("db file").len();
        let stop = CancellationToken::new();
        let task = tokio::spawn(
            store
                .with_own_pool(1)
                .await
                .expect("own pool")
                .run_checkpointer(stop.clone()),
        );
        let mut after = before;
        for _ in 0..500 {
            after = std::fs::metadata(&file).expect("db file").len();
            if after > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(CHECKPOINT_BUSY_MS)).await;
        }
        assert!(after > before, "the database file stayed at {before} bytes");
        stop.cancel();
        task.await.expect("the checkpointer ends at shutdown");
    }
}
