//! The search indexer's store side (migration 0028; [`crate::search_indexer`] runs it):
//! moving the dead letters ingest noted in `search_backlog` into `dead_letter_text` (their
//! text read through the view `search_backlog_text`), which carries the search index (SQLite
//! FTS5 through its triggers, PostgreSQL's `pg_trgm` GIN index).

use sqlx::QueryBuilder;

use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};

impl Store {
    /// One indexer round: moves the oldest `max_rows` rows (by dead letter id) of
    /// `search_backlog` into `dead_letter_text` (their text as `search_backlog_text` gives
    /// it), in one transaction. Returns how many rows left the backlog (0: it was empty).
    ///
    /// SQLite: under the write gate, the round's highest id is read, then every backlog row up
    /// to it is copied and deleted (one writer: nothing else changes the backlog meanwhile);
    /// the view reads the backlog first (its `CROSS JOIN`), so a round reads its own rows.
    /// PostgreSQL: one statement, `DELETE ... RETURNING` the ids and lengths whose text the
    /// INSERT copies from `dead_letters` (the expressions of the view `search_backlog_text`,
    /// written out: through the view, the INSERT would read the backlog a second time, and
    /// the planner hashed all of it each round; now each round reads its own rows by primary
    /// key only, whatever the backlog's size), the rows
    /// taken `FOR UPDATE SKIP LOCKED`, so the rounds of several instances never take the same
    /// row and never wait for each other. It writes each text `lower()`ed and `lowered = true`
    /// (migration 0031: a search's row check then needs no `lower()` of the text). A text row already indexed under that id (none is
    /// expected) is kept and the backlog's copy dropped.
    ///
    /// Errors: `Unavailable` (retry later), `Database`. On error nothing moved.
    pub async fn index_search_backlog(&self, max_rows: i64) -> Result<u64, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let moved = if <DB as Dialect>::ONE_WRITER {
                let mut qb = QueryBuilder::<DB>::new(
                    "SELECT MAX(id) FROM (SELECT id FROM search_backlog ORDER BY id LIMIT ",
                );
                DB::bind(&mut qb, Val::I64(Some(max_rows.max(1))));
                qb.push(") AS round");
                let last: Option<i64> = qb
                    .build_query_scalar()
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(store_error)?;
                let Some(last) = last else {
                    tx.rollback().await.map_err(store_error)?;
                    return Ok(0);
                };
                let mut qb = QueryBuilder::<DB>::new(
                    "INSERT INTO dead_letter_text (id, message, stack_trace, payload) \
                     SELECT id, message, stack_trace, payload FROM search_backlog_text \
                     WHERE id <= ",
                );
                DB::bind(&mut qb, Val::I64(Some(last)));
                qb.push(" ON CONFLICT (id) DO NOTHING");
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
                let mut qb = QueryBuilder::<DB>::new("DELETE FROM search_backlog WHERE id <= ");
                DB::bind(&mut qb, Val::I64(Some(last)));
                qb.build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?
                    .rows_affected()
            } else {
                let mut qb = QueryBuilder::<DB>::new(
                    "WITH moved AS (DELETE FROM search_backlog WHERE id IN \
                     (SELECT id FROM search_backlog ORDER BY id LIMIT ",
                );
                DB::bind(&mut qb, Val::I64(Some(max_rows.max(1))));
                qb.push(
                    " FOR UPDATE SKIP LOCKED) RETURNING id, stack_bytes, payload_bytes), \
                     ins AS (INSERT INTO dead_letter_text \
                     (id, message, stack_trace, payload, lowered) \
                     SELECT d.id, lower(d.error_message), \
                     lower(convert_from(substring(convert_to(d.stack_trace, 'UTF8') \
                     FROM 1 FOR m.stack_bytes), 'UTF8')), \
                     lower(convert_from(substring(d.value FROM 1 FOR m.payload_bytes), 'UTF8')), \
                     true FROM moved m JOIN dead_letters d ON d.id = m.id \
                     ON CONFLICT (id) DO NOTHING) \
                     SELECT COUNT(*) FROM moved",
                );
                let n: i64 = qb
                    .build_query_scalar()
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(store_error)?;
                n as u64
            };
            tx.commit().await.map_err(store_error)?;
            Ok(moved)
        })
    }

    /// How far the search index is behind: the `ingested_at_ms` (epoch ms) of the oldest
    /// dead letter whose text is still in `search_backlog`, or `None` when the backlog is
    /// empty (everything stored is searchable through the index). Two primary-key reads,
    /// whatever the backlog's size.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn search_backlog_oldest_ms(&self) -> Result<Option<i64>, StoreError> {
        on_pool!(self, |pool, DB| {
            sqlx::query_scalar::<DB, Option<i64>>(
                "SELECT (SELECT d.ingested_at_ms FROM dead_letters d WHERE d.id = \
                 (SELECT MIN(id) FROM search_backlog))",
            )
            .fetch_one(pool)
            .await
        })
        .map_err(store_error)
    }

    /// Whether `search_backlog` holds any row (one index probe).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn search_backlog_is_empty(&self) -> Result<bool, StoreError> {
        let any: Option<i64> = on_pool!(self, |pool, DB| {
            sqlx::query_scalar::<DB, i64>("SELECT id FROM search_backlog LIMIT 1")
                .fetch_optional(pool)
                .await
        })
        .map_err(store_error)?;
        Ok(any.is_none())
    }
}
