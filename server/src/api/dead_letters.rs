//! The dead-letter handlers: the list (`GET /api/v1/dead-letters`) and one whole record
//! (`GET /api/v1/dead-letters/{id}`).

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::Json;

use super::dead_letter_dto::{DeadLetterItem, DeadLetterPage, DeadLetterRecord, ValueSchemaItem};
use super::params::{list_query, not_found, parse_id};
use super::{ApiError, AppState};
use crate::auth::Caller;

// ---------------------------------------------------------------------------------------------
// Handlers

/// `GET /api/v1/dead-letters?FILTER&limit=&cursor=`: newest first, keyset-paginated.
pub async fn list_dead_letters(
    State(state): State<AppState>,
    Caller(actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<DeadLetterPage>, ApiError> {
    let mut query = list_query(raw.as_deref())?;
    state
        .store
        .limit_to_scope(&actor, &mut query.filter)
        .await
        .map_err(|e| state.store_failed("list", e))?;
    let page = state
        .store
        .list(&query)
        .await
        .map_err(|e| state.store_failed("list", e))?;
    Ok(Json(DeadLetterPage {
        items: page.items.iter().map(DeadLetterItem::from).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// `GET /api/v1/dead-letters/{id}`: the full record.
pub async fn get_dead_letter(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<DeadLetterRecord>, ApiError> {
    let id = parse_id(path)?;
    let dl = state
        .store
        .get(id)
        .await
        .map_err(|e| state.store_failed("get", e))?
        // Outside the caller's DLQ-topic scope a record is absent.
        .filter(|d| actor.sees_topic(&d.summary.dlq_topic))
        .ok_or_else(|| not_found(id))?;
    let chain = state
        .store
        .replay_chain_from(id, dl.link.as_ref().map(|l| l.earlier_id))
        .await
        .map_err(|e| state.store_failed("replay_chain", e))?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut record = DeadLetterRecord::new(&dl, &chain, now_ms);
    if let (Some(resolver), Some(value)) = (
        redrive_core::schema::resolver::installed(),
        dl.record.value.as_deref(),
    ) {
        record.value_schema = resolver
            .decode_value(value, redrive_app::display::caps::VALUE_TEXT_BYTES)
            .await
            .map(ValueSchemaItem::new);
    }
    Ok(Json(record))
}
