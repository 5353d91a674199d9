//! A write transaction rolled back for a transient reason, tried again: on PostgreSQL the
//! victim of a deadlock (40P01) with another writer of the same dead letters and aggregate
//! rows (the tier sorter, ingest, another action), on either database a lock or a connection
//! lost before the commit. Only a transaction that re-checks what it changes (its filter,
//! each dead letter's condition) is repeated this way: a bulk action's chunk (`bulk/run.rs`),
//! a delete or restore of picked dead letters (`actions.rs`), a replay of picked dead letters
//! (`replay_request.rs`, each attempt from the job as requested), a label change of picked
//! dead letters (`label_bulk.rs`), a retention purge's chunk
//! (`crate::retention::purge::purge_chunk_retrying`).

use std::future::Future;

use super::dialect::store_error;
use super::StoreError;

/// Attempts at a transaction rolled back for a transient reason: after 100 ms, then 200 ms.
pub const TX_ATTEMPTS: u32 = 3;

/// A write transaction that failed, and whether it is known to have written nothing.
#[derive(Debug)]
pub(crate) struct TxFailed {
    pub error: StoreError,
    /// The failure came before the commit: the transaction was rolled back (by the database,
    /// or when its connection went), so it changed nothing and can be tried again. `false`
    /// when the commit itself failed: a connection lost while committing leaves it unknown
    /// whether it was written, so it is never repeated.
    pub before_commit: bool,
}

impl From<StoreError> for TxFailed {
    fn from(error: StoreError) -> Self {
        TxFailed {
            error,
            before_commit: true,
        }
    }
}

impl TxFailed {
    /// The commit's own error (`tx.commit().await.map_err(TxFailed::at_commit)`).
    pub(crate) fn at_commit(e: sqlx::Error) -> Self {
        TxFailed {
            error: store_error(e),
            before_commit: false,
        }
    }

    /// Whether trying the same transaction again is safe and may succeed.
    pub(crate) fn retryable(&self) -> bool {
        self.before_commit && self.error.is_transient()
    }
}

/// Runs `tx` (a whole write transaction) until it commits, tried again while it fails
/// [`TxFailed::retryable`], at most [`TX_ATTEMPTS`] times; `what` names it in the log.
///
/// Errors: the last attempt's.
pub(crate) async fn retry_rolled_back<T, F, Fut>(what: &str, mut tx: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, TxFailed>>,
{
    let mut attempt = 1;
    loop {
        match tx().await {
            Ok(v) => return Ok(v),
            Err(f) if f.retryable() && attempt < TX_ATTEMPTS => {
                tracing::warn!(what, attempt, error = %f.error, "write transaction rolled back; trying it again");
                tokio::time::sleep(std::time::Duration::from_millis(100 * u64::from(attempt)))
                    .await;
                attempt += 1;
            }
            Err(f) => return Err(f.error),
        }
    }
}
