//! Lazy expiry of approval requests: [`Store::expire_approval_requests`], run before every
//! read of the requests, and the actor of its audit rows ([`EXPIRY_ACTOR`]).

use sqlx::QueryBuilder;

use crate::actions::NewAuditEntry;
use crate::store::actions::now_ms;
use crate::store::dialect::{store_error, Dialect, Val};
use crate::store::{Pool, Store, StoreError};

/// The actor of the audit rows of expiries (no person decided them).
pub const EXPIRY_ACTOR: &str = "redrive";

impl Store {
    /// Marks the pending requests past their expiry as `expired`, with an audit row each
    /// (`approval_expire`, actor [`EXPIRY_ACTOR`]), in one transaction. Returns how many.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn expire_approval_requests(&self) -> Result<u64, StoreError> {
        let now = now_ms();
        // A read first: the write transaction is taken only when something expired.
        let due: i64 = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT COUNT(*) FROM approval_requests WHERE status = 'pending' AND \
                 expires_at_ms <= ",
            );
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.build_query_scalar().fetch_one(pool).await
        })
        .map_err(store_error)?;
        if due == 0 {
            return Ok(0);
        }
        let n = on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "UPDATE approval_requests SET status = 'expired', decided_at_ms = expires_at_ms \
                 WHERE status = 'pending' AND expires_at_ms <= ",
            );
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(" RETURNING id, requested_by, kind, record_count");
            let rows: Vec<(i64, String, String, i64)> = qb
                .build_query_as()
                .fetch_all(&mut *tx)
                .await
                .map_err(store_error)?;
            for (id, by, kind, count) in &rows {
                let audit = NewAuditEntry {
                    actor: EXPIRY_ACTOR.to_string(),
                    action: "approval_expire".to_string(),
                    outcome: "ok: expired without a decision".to_string(),
                    count: *count,
                    detail: Some(
                        serde_json::json!({"request_id": id, "kind": kind, "requested_by": by})
                            .to_string(),
                    ),
                    ..NewAuditEntry::default()
                };
                crate::store::audit::insert_audit::<DB>(&audit, now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<u64, StoreError>(rows.len() as u64)
        })?;
        if n > 0 {
            tracing::info!(expired = n, "approval requests expired");
        }
        Ok(n)
    }
}
