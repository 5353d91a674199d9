//! A bulk action as recorded in `bulk_actions` ([`BulkAction`], read back by
//! [`BULK_COLUMNS`]) and the listing of them ([`Store::bulk_actions`]). "The module docs"
//! below are `mod.rs`'s.

use sqlx::QueryBuilder;

use crate::store::dialect::{store_error, Dialect, Val};
use crate::store::{Pool, Store, StoreError};

/// One bulk action, as recorded in `bulk_actions` (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BulkAction {
    pub id: i64,
    /// `replay`, `delete`, `restore`, `label_add` or `label_remove`.
    pub kind: String,
    /// `running` (in progress, or interrupted and waiting to be resumed) or `done`.
    pub status: String,
    pub actor: String,
    /// The filter (its JSON form, as in a replay job's `selection`).
    pub filter: String,
    pub reason: Option<String>,
    /// For a replay: the job being filled.
    pub job_id: Option<String>,
    /// For `label_add` / `label_remove`: the label (normalised).
    pub label: Option<String>,
    /// Dead letters with an id at or below this are covered.
    pub max_id: i64,
    /// Dead letters with an id at or below this are done.
    pub cursor_id: i64,
    /// Dead letters changed so far.
    pub done: i64,
    /// Matched but left alone (replay: deleted, already pending, or without a target).
    pub skipped: i64,
    /// Write transactions committed.
    pub chunks: i64,
    /// Times it was resumed after an interruption.
    pub resumed: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub finished_at_ms: Option<i64>,
}

const BULK_COLUMNS: &str = "id, kind, status, actor, filter, reason, job_id, label, max_id, \
     cursor_id, done, skipped, chunks, resumed, created_at_ms, updated_at_ms, finished_at_ms";

#[derive(Debug, sqlx::FromRow)]
struct BulkRow {
    id: i64,
    kind: String,
    status: String,
    actor: String,
    filter: String,
    reason: Option<String>,
    job_id: Option<String>,
    label: Option<String>,
    max_id: i64,
    cursor_id: i64,
    done: i64,
    skipped: i64,
    chunks: i64,
    resumed: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
    finished_at_ms: Option<i64>,
}

impl From<BulkRow> for BulkAction {
    fn from(r: BulkRow) -> BulkAction {
        BulkAction {
            id: r.id,
            kind: r.kind,
            status: r.status,
            actor: r.actor,
            filter: r.filter,
            reason: r.reason,
            job_id: r.job_id,
            label: r.label,
            max_id: r.max_id,
            cursor_id: r.cursor_id,
            done: r.done,
            skipped: r.skipped,
            chunks: r.chunks,
            resumed: r.resumed,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            finished_at_ms: r.finished_at_ms,
        }
    }
}

impl Store {
    /// Bulk actions, newest first, at most `limit` (capped at 500): the running ones show
    /// what a half-done action has done so far.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn bulk_actions(&self, limit: u32) -> Result<Vec<BulkAction>, StoreError> {
        let limit = i64::from(limit.clamp(1, 500));
        let rows: Vec<BulkRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {BULK_COLUMNS} FROM bulk_actions ORDER BY id DESC LIMIT "
            ));
            DB::bind(&mut qb, Val::I64(Some(limit)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        Ok(rows.into_iter().map(BulkAction::from).collect())
    }
}
