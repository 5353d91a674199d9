//! Resuming interrupted bulk actions ([`Store::resume_bulk_actions`]): claiming a stale
//! `running` action, and its state in memory rebuilt from its row. "The module docs" below
//! are `mod.rs`'s.

use sqlx::QueryBuilder;

use super::{Bulk, BulkKind};
use crate::actions::Actor;
use crate::filter::Filter;
use crate::store::actions::now_ms;
use crate::store::dialect::{store_error, Dialect, Val};
use crate::store::{Pool, Store, StoreError};

/// What a resumed action needs beyond its row.
#[derive(Debug, sqlx::FromRow)]
struct ResumeRow {
    id: i64,
    kind: String,
    actor_json: String,
    reason: Option<String>,
    job_id: Option<String>,
    label: Option<String>,
    max_id: i64,
    cursor_id: i64,
    done: i64,
    skipped: i64,
    skipped_without_target: i64,
    chunks: i64,
    filter: String,
}

impl Store {
    /// Finishes every `running` bulk action that has not moved for `stale_after_ms` (its
    /// process died, see the module docs), each from its cursor. Returns how many it
    /// finished. Another instance resuming the same action at the same time loses the race
    /// on the `updated_at_ms` claim and leaves it alone.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt` (a row this build cannot read).
    pub async fn resume_bulk_actions(&self, stale_after_ms: i64) -> Result<u64, StoreError> {
        let now = now_ms();
        let rows: Vec<ResumeRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT id, kind, actor_json, reason, job_id, label, max_id, cursor_id, done, \
                 skipped, skipped_without_target, chunks, filter FROM bulk_actions \
                 WHERE status = 'running' AND updated_at_ms <= ",
            );
            DB::bind(&mut qb, Val::I64(Some(now - stale_after_ms)));
            qb.push(" ORDER BY id");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let mut finished = 0;
        for r in rows {
            // Claim it: only one resumer moves `updated_at_ms` from the value it read.
            let claimed = on_write_conn!(self, |conn, DB| {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "UPDATE bulk_actions SET resumed = resumed + 1, updated_at_ms = ",
                );
                DB::bind(&mut qb, Val::I64(Some(now_ms())));
                qb.push(" WHERE status = 'running' AND id = ");
                DB::bind(&mut qb, Val::I64(Some(r.id)));
                qb.push(" AND cursor_id = ");
                DB::bind(&mut qb, Val::I64(Some(r.cursor_id)));
                qb.push(" AND updated_at_ms <= ");
                DB::bind(&mut qb, Val::I64(Some(now - stale_after_ms)));
                qb.build()
                    .execute(&mut *conn)
                    .await
                    .map(|d| d.rows_affected())
            })
            .map_err(store_error)?;
            if claimed == 0 {
                continue;
            }
            let job_id = r.job_id.clone();
            let mut bulk = resume_state(r)?;
            if bulk.kind == BulkKind::Replay {
                let id = job_id.unwrap_or_default();
                let job = self.job(&id).await?.ok_or_else(|| {
                    StoreError::Corrupt(format!("bulk action's replay job {id} is missing"))
                })?;
                bulk.job = Some(job);
            }
            tracing::warn!(
                bulk_action = bulk.id,
                kind = bulk.kind.name(),
                done = bulk.done,
                "resuming a bulk action that was interrupted"
            );
            self.run_bulk(bulk).await?;
            finished += 1;
        }
        Ok(finished)
    }
}

/// The in-memory state of an interrupted action, from its row (and its job, for a replay).
///
/// Errors: `Corrupt` for an unknown kind or an unreadable actor or filter.
fn resume_state(r: ResumeRow) -> Result<Bulk, StoreError> {
    let kind = BulkKind::parse(&r.kind)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown bulk action kind `{}`", r.kind)))?;
    let actor: Actor = serde_json::from_str(&r.actor_json)
        .map_err(|e| StoreError::Corrupt(format!("bulk action {}: actor: {e}", r.id)))?;
    let filter: Filter = serde_json::from_str(&r.filter)
        .map_err(|e| StoreError::Corrupt(format!("bulk action {}: filter: {e}", r.id)))?;
    Ok(Bulk {
        id: Some(r.id),
        kind,
        actor,
        filter,
        reason: r.reason,
        job: None,
        label: r.label,
        max_id: r.max_id,
        cursor: r.cursor_id,
        done: r.done,
        skipped: r.skipped,
        skipped_without_target: r.skipped_without_target,
        chunks: r.chunks,
        resumed: true,
        cancelled: false,
        approval: None,
    })
}
