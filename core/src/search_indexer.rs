//! The search indexer (issue 12 item 4, migration 0028; `docs/triage.md`, "Not yet
//! indexed"): moves the searched text of new dead letters from `search_backlog`, where ingest
//! writes it, into the search index, behind ingest.
//!
//! **Why behind.** Writing the trigram index (SQLite FTS5, PostgreSQL `pg_trgm` GIN) cost
//! 73–85 % of a stored batch's time (`docs/bench.md`). Ingest decides how soon a record is
//! durable and its offset committed — how much of a DLQ burst redrive holds before Kafka's
//! retention deletes it — so ingest writes the text to an unindexed table and this task indexes
//! it afterwards. Nothing is unsearchable meanwhile: search reads the backlog too (scanned,
//! bounded; `core/src/store/search.rs`).
//!
//! **Ingest first.** On SQLite the indexer and ingest share one writer. While ingest is working
//! through a backlog at the store's speed (it wrote a *full* batch within
//! [`IndexerConfig::ingest_quiet`]), the indexer runs one round per
//! [`IndexerConfig::busy_interval`]; otherwise (ingest quiet, or keeping up with the arrivals
//! in partial batches, leaving the store idle most of the time) it runs rounds back to back
//! until the backlog is empty. PostgreSQL follows the same rule (the two share the CPU), and
//! every instance runs an indexer: rounds take rows with `SKIP LOCKED`, so they split the work.
//!
//! How far behind it is: `/metrics` `redrive_search_index_lag_seconds` (the age of the oldest
//! dead letter not yet indexed) and `redrive_search_indexed_total`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::ingest::IngestStatus;
use crate::store::Store;

/// Pace of the indexer. All durations are wall-clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexerConfig {
    /// Backlog rows one round moves, in one transaction (default 1,000: about 0.4 s of
    /// SQLite's write lock on 2 cores, measured in `docs/bench.md`).
    pub round_rows: i64,
    /// How long after ingest's last full batch the indexer counts ingest as busy (default 1 s).
    pub ingest_quiet: Duration,
    /// Pause between rounds while ingest is busy (default 2 s).
    pub busy_interval: Duration,
    /// Pause between looks at an empty backlog (default 500 ms): how soon a new dead letter
    /// is in the index when ingest is quiet.
    pub idle_poll: Duration,
    /// Pause after a failed round (default 5 s).
    pub retry: Duration,
}

impl Default for IndexerConfig {
    fn default() -> Self {
        IndexerConfig {
            round_rows: 1_000,
            ingest_quiet: Duration::from_secs(1),
            busy_interval: Duration::from_secs(2),
            idle_poll: Duration::from_millis(500),
            retry: Duration::from_secs(5),
        }
    }
}

/// What the indexer has done since the process started (read by `/metrics`).
#[derive(Debug, Default)]
pub struct IndexerStatus {
    indexed: AtomicU64,
    rounds: AtomicU64,
    failures: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl IndexerStatus {
    /// Dead letters' texts moved into the search index by this process.
    pub fn indexed(&self) -> u64 {
        self.indexed.load(Ordering::Relaxed)
    }

    /// Rounds that moved at least one row.
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// Rounds that failed (the store refused or could not be reached; retried).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The last failure's message, until a round succeeds.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_error(&self, e: Option<String>) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = e;
    }
}

use crate::clock::now_ms;

/// Runs the indexer on `store` until `shutdown` (a round in progress finishes: it is one
/// transaction). `ingest` is this process's ingest, whose last full batch decides whether
/// ingest is busy (`None`: ingest is off, never busy).
pub async fn run(
    store: Store,
    ingest: Option<Arc<IngestStatus>>,
    status: Arc<IndexerStatus>,
    config: IndexerConfig,
    shutdown: CancellationToken,
) {
    let ingest_busy = || {
        ingest.as_ref().is_some_and(|s| {
            let last = s.last_full_batch_ms();
            last > 0 && now_ms() - last < config.ingest_quiet.as_millis() as i64
        })
    };
    loop {
        if shutdown.is_cancelled() {
            return;
        }
        let pause = match round(&store, config.round_rows).await {
            Ok(0) => config.idle_poll,
            Ok(n) => {
                status.indexed.fetch_add(n, Ordering::Relaxed);
                status.rounds.fetch_add(1, Ordering::Relaxed);
                status.set_error(None);
                if ingest_busy() {
                    config.busy_interval
                } else {
                    Duration::ZERO
                }
            }
            Err(e) => {
                status.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "search indexer: round failed; retrying");
                status.set_error(Some(e.to_string()));
                config.retry
            }
        };
        if pause.is_zero() {
            tokio::task::yield_now().await;
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// One round: a read to see whether there is anything (an empty backlog costs no write
/// transaction, so no turn at SQLite's write gate), then the move.
async fn round(store: &Store, rows: i64) -> Result<u64, crate::store::StoreError> {
    if store.search_backlog_is_empty().await? {
        return Ok(0);
    }
    store.index_search_backlog(rows).await
}
