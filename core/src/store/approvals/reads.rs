//! Reading approval requests (expiring the due ones first): the listing
//! ([`Store::approval_requests`]), one request ([`Store::approval_request`]) and the pending
//! one a decision needs.

use sqlx::QueryBuilder;

use super::request_row::{RequestRow, COLUMNS};
use crate::approval::{ApprovalRequest, RequestStatus, MAX_REQUESTS_LISTED};
use crate::store::dialect::{store_error, Dialect, Val};
use crate::store::{Pool, Store, StoreError};

impl Store {
    /// Approval requests, newest first, at most `limit` (1 to [`MAX_REQUESTS_LISTED`]), only
    /// those of `status` when given. Expires the due ones first.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn approval_requests(
        &self,
        status: Option<RequestStatus>,
        limit: u32,
    ) -> Result<Vec<ApprovalRequest>, StoreError> {
        self.expire_approval_requests().await?;
        let limit = i64::from(limit.clamp(1, MAX_REQUESTS_LISTED));
        let rows: Vec<RequestRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new(format!("SELECT {COLUMNS} FROM approval_requests"));
            if let Some(s) = status {
                qb.push(" WHERE status = ");
                DB::bind(&mut qb, Val::Text(Some(s.as_str())));
            }
            qb.push(" ORDER BY id DESC LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(limit)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        rows.into_iter().map(ApprovalRequest::try_from).collect()
    }

    /// One approval request (expiring the due ones first), `None` if there is no such id.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn approval_request(&self, id: i64) -> Result<Option<ApprovalRequest>, StoreError> {
        self.expire_approval_requests().await?;
        let row: Option<RequestRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {COLUMNS} FROM approval_requests WHERE id = "
            ));
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        row.map(ApprovalRequest::try_from).transpose()
    }

    /// The pending request `id`, or why it cannot be decided: `NotFound`, or `Conflict`
    /// naming its status (an expired one says so).
    pub(super) async fn pending_request(&self, id: i64) -> Result<ApprovalRequest, StoreError> {
        let r = self
            .approval_request(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("approval request {id}")))?;
        match r.status {
            RequestStatus::Pending => Ok(r),
            RequestStatus::Expired => Err(StoreError::Conflict(format!(
                "approval request {id} expired without a decision; nothing was done (ask for \
                 the action again)"
            ))),
            s => Err(StoreError::Conflict(format!(
                "approval request {id} is already {}; only a pending request can be decided",
                s.as_str()
            ))),
        }
    }
}
