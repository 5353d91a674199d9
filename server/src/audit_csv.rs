//! `GET /api/v1/audit.csv`: the (filtered) audit trail as CSV, newest first, streamed.
//!
//! The store is read one keyset page of [`AUDIT_MAX_LIMIT`] rows at a time (its `before_id`
//! cursor) and each page is written out before the next is read: memory is bounded by one page
//! however long the trail. The first page is read before the response starts, so a store that
//! does not answer is a 503 with a message; a failure after that cuts the download short (the
//! client sees a broken transfer, never a file that looks complete) and is logged.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use redrive_core::actions::{AuditEntry, AuditQuery, AUDIT_MAX_LIMIT};
use redrive_core::store::Store;

use crate::api::{rfc3339, AppState};
use crate::api_error::ApiError;

/// Header of the CSV export, one column per `AuditItem` field.
pub const AUDIT_CSV_COLUMNS: [&str; 14] = [
    "id",
    "at",
    "actor",
    "action",
    "count",
    "ids",
    "filter",
    "reason",
    "client_ip",
    "user_agent",
    "outcome",
    "job_id",
    "via_token",
    "detail",
];

/// A cell that a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab, CR) gets a
/// leading `'` (OWASP "CSV injection"); everything else is written as is.
pub fn cell(s: &str) -> String {
    match s.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') if s != "-" => format!("'{s}"),
        _ => s.to_string(),
    }
}

/// `rows` as CSV lines (with the header line first when `header`).
fn csv_chunk(rows: &[AuditEntry], header: bool) -> Result<Bytes, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    if header {
        w.write_record(AUDIT_CSV_COLUMNS)?;
    }
    for a in rows {
        let opt = |v: &Option<String>| cell(v.as_deref().unwrap_or(""));
        w.write_record([
            a.id.to_string(),
            rfc3339(a.at_ms).unwrap_or_default(),
            cell(&a.actor),
            cell(&a.action),
            a.count.to_string(),
            opt(&a.ids),
            opt(&a.filter),
            opt(&a.reason),
            opt(&a.client_ip),
            opt(&a.user_agent),
            cell(&a.outcome),
            opt(&a.job_id),
            a.via_token.map(|t| t.to_string()).unwrap_or_default(),
            opt(&a.detail),
        ])?;
    }
    w.into_inner()
        .map(Bytes::from)
        .map_err(|e| e.into_error().into())
}

/// What the stream carries from page to page.
struct Pages {
    store: Store,
    query: AuditQuery,
    /// The first chunk (header and first page), written before any further read.
    first: Option<Bytes>,
    /// False once a page came back without a next cursor.
    more: bool,
}

fn broken(what: &str, e: impl std::fmt::Display) -> std::io::Error {
    tracing::error!(error = %e, "the audit CSV stopped part-way: {what}");
    std::io::Error::other(format!("the audit CSV stopped part-way: {what}"))
}

/// The next chunk of the body: the first one, then one page at a time, then the end.
async fn next_chunk(mut st: Pages) -> Result<Option<(Bytes, Pages)>, std::io::Error> {
    if let Some(first) = st.first.take() {
        return Ok(Some((first, st)));
    }
    if !st.more {
        return Ok(None);
    }
    let page = st
        .store
        .audit(&st.query)
        .await
        .map_err(|e| broken("the store failed", e))?;
    advance(&mut st, page.next_cursor.as_deref());
    let chunk = csv_chunk(&page.items, false).map_err(|e| broken("CSV", e))?;
    Ok(Some((chunk, st)))
}

fn advance(st: &mut Pages, next_cursor: Option<&str>) {
    match next_cursor.and_then(|c| c.parse::<i64>().ok()) {
        Some(before) => st.query.before_id = Some(before),
        None => st.more = false,
    }
}

/// The streamed response for `q` (its `limit` is replaced by the page size).
pub async fn respond(state: &AppState, mut q: AuditQuery) -> Result<Response, ApiError> {
    q.limit = AUDIT_MAX_LIMIT;
    let page = state
        .store
        .audit(&q)
        .await
        .map_err(|e| state.action_failed("audit", e))?;
    let first = csv_chunk(&page.items, true).map_err(|e| {
        tracing::error!(error = %e, "writing the audit CSV");
        ApiError::Unavailable
    })?;
    let mut st = Pages {
        store: state.store.clone(),
        query: q,
        first: Some(first),
        more: true,
    };
    advance(&mut st, page.next_cursor.as_deref());
    let mut res = Body::from_stream(futures::stream::try_unfold(st, next_chunk)).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"redrive-audit.csv\""),
    );
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells() {
        assert_eq!(cell("=SUM(A1)"), "'=SUM(A1)");
        assert_eq!(cell("-"), "-");
        assert_eq!(cell("alice"), "alice");
        let header = csv_chunk(&[], true).unwrap();
        assert_eq!(
            &header[..],
            format!("{}\n", AUDIT_CSV_COLUMNS.join(",")).as_bytes()
        );
    }
}
