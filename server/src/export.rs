//! `GET /api/v1/dead-letters/export?<filter>` and `GET /dead-letters/export.jsonl?<filter>`
//! (the UI's download link): every dead letter matching the list's filter, as JSON Lines
//! (`docs/export.md`: schema `redrive.dead_letter.v1`, exact bytes in base64, labels and
//! notes), newest first.
//!
//! Streamed: the store is read one keyset page of `EXPORT_PAGE_ROWS` whole records at a time
//! and each page is written out before the next is read, so memory is bounded by one page
//! however many rows match, and the response starts at once. Audited once (`export`, the
//! filter as given, count = rows written) when the stream ends: `ok`, `failed: ...` (the
//! store failed part-way: the download is cut short, which the client sees as a broken
//! transfer, not as a complete file), or `incomplete: ...` (the client stopped reading).

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use redrive_core::actions::{Actor, NewAuditEntry};
use redrive_core::store::{Store, EXPORT_PAGE_ROWS};
use redrive_core::{Cursor, Filter, ListQuery};

use crate::api::AppState;
use crate::api_error::ApiError;
use crate::auth::Caller;

/// The routes of this module, state applied.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/dead-letters/export", get(export))
        .route("/dead-letters/export.jsonl", get(export))
        .with_state(state)
}

/// The filter of an export request: the list's parameters; `limit` and `cursor` are refused
/// (an export writes every matching row).
pub fn export_filter(raw: Option<&str>) -> Result<Filter, ApiError> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(raw.unwrap_or("")).map_err(|_| {
            ApiError::BadRequest(
                "the query string is not valid URL encoding (name=value pairs joined by &)".into(),
            )
        })?;
    if let Some((k, _)) = pairs.iter().find(|(k, _)| k == "limit" || k == "cursor") {
        return Err(ApiError::BadRequest(format!(
            "`{k}` pages the list; an export writes every dead letter matching the filter \
             (narrow it with the filter parameters instead)"
        )));
    }
    ListQuery::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map(|q| q.filter)
        .map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// What the stream carries from page to page; writes the audit row when it is dropped
/// before the end (the client went away).
struct Export {
    store: Store,
    actor: Actor,
    filter: Filter,
    cursor: Option<Cursor>,
    rows: i64,
    done: bool,
    audited: bool,
}

impl Export {
    fn audit_entry(&self, outcome: String) -> NewAuditEntry {
        NewAuditEntry {
            count: self.rows,
            filter: Some(filter_json(&self.filter)),
            detail: Some(serde_json::json!({ "rows": self.rows, "format": "jsonl" }).to_string()),
            ..NewAuditEntry::by(&self.actor, "export", &outcome)
        }
    }

    async fn audit(&mut self, outcome: String) {
        self.audited = true;
        let entry = self.audit_entry(outcome);
        if let Err(e) = self.store.record_audit(&entry).await {
            tracing::error!(error = %e, "could not audit an export");
        }
        tracing::info!(actor = %self.actor.user, rows = self.rows, "export ended");
    }
}

impl Drop for Export {
    fn drop(&mut self) {
        if self.audited {
            return;
        }
        let entry = self.audit_entry(format!(
            "incomplete: the client stopped reading after {} rows",
            self.rows
        ));
        let store = self.store.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = store.record_audit(&entry).await {
                    tracing::error!(error = %e, "could not audit an export");
                }
            });
        }
    }
}

/// The filter as the audit shows it (`{"source_topic": "orders", ...}`).
fn filter_json(f: &Filter) -> String {
    let map: serde_json::Map<String, serde_json::Value> = f
        .to_pairs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v)))
        .collect();
    serde_json::Value::Object(map).to_string()
}

/// The next chunk of the body: one page of lines, or the end.
async fn next_page(mut st: Export) -> Result<Option<(Bytes, Export)>, std::io::Error> {
    if st.done {
        let outcome = "ok".to_string();
        st.audit(outcome).await;
        return Ok(None);
    }
    let page = match st
        .store
        .export_page(&st.filter, st.cursor, EXPORT_PAGE_ROWS)
        .await
    {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %e, rows = st.rows, "export failed part-way");
            st.audit(format!("failed after {} rows: {e}", st.rows))
                .await;
            // An error ends the body abnormally: the client sees a broken download.
            return Err(std::io::Error::other("the store failed during the export"));
        }
    };
    if page.len() < EXPORT_PAGE_ROWS as usize {
        st.done = true;
    }
    let Some(last) = page.last() else {
        st.audit("ok".to_string()).await;
        return Ok(None);
    };
    st.cursor = Some(Cursor {
        dead_lettered_at_ms: last.dead_letter.summary.dead_lettered_at_ms,
        id: last.dead_letter.summary.id,
    });
    let mut buf = Vec::new();
    for r in &page {
        buf.extend_from_slice(&redrive_core::export::line(r));
    }
    st.rows += page.len() as i64;
    Ok(Some((Bytes::from(buf), st)))
}

/// `GET /api/v1/dead-letters/export` (viewer): the filtered set as JSON Lines, streamed.
pub async fn export(
    State(state): State<AppState>,
    Caller(actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let mut filter = export_filter(raw.as_deref())?;
    state
        .store
        .limit_to_scope(&actor, &mut filter)
        .await
        .map_err(|e| state.action_failed("export", e))?;
    let st = Export {
        store: state.store.clone(),
        actor,
        filter,
        cursor: None,
        rows: 0,
        done: false,
        audited: false,
    };
    let body = Body::from_stream(futures::stream::try_unfold(st, next_page));
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/jsonl; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"redrive-dead-letters.jsonl\""),
    );
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_filters_are_the_lists() {
        let f = export_filter(Some("source_topic=orders&label=needs-fix")).unwrap();
        assert_eq!(f.source_topic.as_deref(), Some("orders"));
        assert_eq!(f.label.as_deref(), Some("needs-fix"));
        assert!(export_filter(None).unwrap().is_empty());
        assert!(matches!(
            export_filter(Some("limit=5")),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(
            export_filter(Some("colour=red")),
            Err(ApiError::BadRequest(_))
        ));
    }
}
