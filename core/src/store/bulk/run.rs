//! Running a bulk action chunk by chunk, in a task of its own ([`Store::run_bulk`]): the
//! highest id it covers, and each chunk's ids, read outside any write transaction (the
//! transaction itself: `chunk.rs`).

use sqlx::QueryBuilder;

use super::{Bulk, BulkKind, CHUNK_ROWS};
use crate::store::actions::{push_deletable, push_restorable};
use crate::store::dialect::{store_error, Dialect, Val};
use crate::store::tx_retry::retry_rolled_back;
use crate::store::{Pool, Store, StoreError};

impl Store {
    /// The highest dead letter id now (0 when empty): a bulk action covers up to it.
    pub(crate) async fn max_dead_letter_id(&self) -> Result<i64, StoreError> {
        on_pool!(self, |pool, _DB| {
            sqlx::query_scalar::<_, i64>("SELECT COALESCE(MAX(id), 0) FROM dead_letters")
                .fetch_one(pool)
                .await
        })
        .map_err(store_error)
    }

    /// Runs `bulk` to the end, chunk by chunk, in a task of its own: a caller that gives up
    /// (an HTTP request that times out) does not stop it half-way. Returns it as finished.
    ///
    /// Errors: those of a chunk (`Unavailable`, `Database`); the action then stays `running`
    /// and is resumed by [`Store::resume_bulk_actions`].
    pub(crate) async fn run_bulk(&self, bulk: Bulk) -> Result<Bulk, StoreError> {
        self.run_bulk_chunks(bulk, usize::MAX).await
    }

    /// [`Store::run_bulk`] for at most `max_chunks` chunks (tests stop an action half-way
    /// with it, as a crash would).
    pub(crate) async fn run_bulk_chunks(
        &self,
        bulk: Bulk,
        max_chunks: usize,
    ) -> Result<Bulk, StoreError> {
        let store = self.clone();
        let task = tokio::spawn(async move {
            let mut bulk = bulk;
            for _ in 0..max_chunks {
                if store.bulk_step(&mut bulk).await? {
                    break;
                }
            }
            Ok::<Bulk, StoreError>(bulk)
        });
        task.await
            .map_err(|e| StoreError::Database(format!("bulk action task failed: {e}")))?
    }

    /// Reads the next chunk's ids and commits it, tried again with the same ids while it is
    /// rolled back for a transient reason (`tx_retry.rs`: a deadlock's victim on
    /// PostgreSQL, a lock or a connection lost; never a failed commit), at most
    /// [`crate::store::TX_ATTEMPTS`] times: the chunk re-checks its filter and each dead letter's
    /// condition. Returns `true` after the last chunk (or the chunk that found its replay
    /// job cancelled).
    ///
    /// Errors: the last attempt's.
    async fn bulk_step(&self, bulk: &mut Bulk) -> Result<bool, StoreError> {
        let ids = self.next_chunk_ids(bulk).await?;
        let last = ids.len() < CHUNK_ROWS;
        let current: &Bulk = bulk;
        let next =
            retry_rolled_back(bulk.kind.name(), || self.commit_chunk(current, &ids, last)).await?;
        *bulk = next;
        Ok(last || bulk.cancelled)
    }

    /// The ids of the next chunk, read outside any write transaction: for a replay every
    /// dead letter the filter matches (so the skipped ones are counted), for a delete or a
    /// restore those the action applies to.
    async fn next_chunk_ids(&self, bulk: &Bulk) -> Result<Vec<i64>, StoreError> {
        let selection = bulk.selection();
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new("SELECT id FROM dead_letters");
            crate::store::actions::push_selection(&mut qb, &selection);
            match bulk.kind {
                // Every match, so the ones left alone are counted as skipped.
                BulkKind::Replay | BulkKind::Label(_) => {}
                BulkKind::Delete => push_deletable(&mut qb),
                BulkKind::Restore => push_restorable(&mut qb),
            }
            qb.push(" AND id > ");
            DB::bind(&mut qb, Val::I64(Some(bulk.cursor)));
            qb.push(" AND id <= ");
            DB::bind(&mut qb, Val::I64(Some(bulk.max_id)));
            qb.push(" ORDER BY id LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(CHUNK_ROWS as i64)));
            qb.build_query_scalar::<i64>().fetch_all(pool).await
        })
        .map_err(store_error)
    }
}
