//! The store side of the archive (`docs/retention.md`, "Archive"): reading whole dead letters
//! with their history for the archive writer, walking a filter by id for an on-demand
//! archive, and storing archived dead letters again (`redrive archive restore`), idempotent on
//! (DLQ topic, partition, offset).

use std::collections::HashMap;

use sqlx::QueryBuilder;

use super::actions::{ids_json, now_ms};
use super::dialect::{store_error, Dialect, Val};
use super::insert::{write_rows, Row};
use super::rows::FullRow;
use super::sql::FULL_COLUMNS;
use super::{Pool, Store, StoreError};
use crate::actions::HistoryEvent;
use crate::filter::Filter;
use crate::model::{DeadLetter, NewDeadLetter};

/// One dead letter as the archive holds it: the whole record, its status and its history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveRow {
    pub dead_letter: DeadLetter,
    pub status_before: Option<String>,
    /// Its history events (without the derived `ingested` one), in order.
    pub history: Vec<HistoryEvent>,
}

/// A dead letter to store again from an archive.
#[derive(Debug, Clone)]
pub struct RestoredDeadLetter {
    pub new: NewDeadLetter,
    pub status: String,
    pub status_before: Option<String>,
    pub replay_count: i32,
    pub history: Vec<HistoryEvent>,
}

#[derive(Debug, sqlx::FromRow)]
struct EventRow {
    dead_letter_id: i64,
    at_ms: i64,
    kind: String,
    actor: Option<String>,
    detail: Option<String>,
    job_id: Option<String>,
}

#[derive(Debug, sqlx::FromRow)]
struct StatusBeforeRow {
    id: i64,
    status_before: Option<String>,
}

impl Store {
    /// The dead letters of `ids` that still exist, whole, with their history, in id order.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt` (a stored row that does not parse).
    pub async fn archive_rows(&self, ids: &[i64]) -> Result<Vec<ArchiveRow>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let json = ids_json(ids);
        let (rows, before, events) = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {FULL_COLUMNS} FROM dead_letters WHERE id IN "
            ));
            DB::push_json_ids(&mut qb, json.clone());
            qb.push(" ORDER BY id");
            let rows: Vec<FullRow> = qb
                .build_query_as()
                .persistent(false)
                .fetch_all(pool)
                .await
                .map_err(store_error)?;
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("SELECT id, status_before FROM dead_letters WHERE id IN ");
            DB::push_json_ids(&mut qb, json.clone());
            let before: Vec<StatusBeforeRow> = qb
                .build_query_as()
                .persistent(false)
                .fetch_all(pool)
                .await
                .map_err(store_error)?;
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT dead_letter_id, at_ms, kind, actor, detail, job_id \
                 FROM dead_letter_events WHERE dead_letter_id IN ",
            );
            DB::push_json_ids(&mut qb, json);
            qb.push(" ORDER BY dead_letter_id, id");
            let events: Vec<EventRow> = qb
                .build_query_as()
                .persistent(false)
                .fetch_all(pool)
                .await
                .map_err(store_error)?;
            Ok::<_, StoreError>((rows, before, events))
        })?;
        let before: HashMap<i64, Option<String>> = before
            .into_iter()
            .map(|r| (r.id, r.status_before))
            .collect();
        let mut history: HashMap<i64, Vec<HistoryEvent>> = HashMap::new();
        for e in events {
            history
                .entry(e.dead_letter_id)
                .or_default()
                .push(HistoryEvent {
                    at_ms: e.at_ms,
                    kind: e.kind,
                    actor: e.actor,
                    detail: e.detail,
                    job_id: e.job_id,
                });
        }
        rows.into_iter()
            .map(|r| {
                let d = r.into_dead_letter()?;
                let id = d.summary.id;
                Ok(ArchiveRow {
                    status_before: before.get(&id).cloned().flatten(),
                    history: history.remove(&id).unwrap_or_default(),
                    dead_letter: d,
                })
            })
            .collect()
    }

    /// Up to `limit` ids of dead letters matching `filter` with `after_id < id <= max_id`, in
    /// id order: the pages of an on-demand archive.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn filter_ids_after(
        &self,
        filter: &Filter,
        after_id: i64,
        max_id: i64,
        limit: usize,
    ) -> Result<Vec<i64>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new("SELECT id FROM dead_letters");
            super::sql::push_filter(&mut qb, filter);
            qb.push(" AND id > ");
            DB::bind(&mut qb, Val::I64(Some(after_id)));
            qb.push(" AND id <= ");
            DB::bind(&mut qb, Val::I64(Some(max_id)));
            qb.push(" ORDER BY id LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(limit as i64)));
            qb.build_query_scalar::<i64>()
                .persistent(false)
                .fetch_all(pool)
                .await
        })
        .map_err(store_error)
    }

    /// The highest dead letter id now (0 when empty).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn highest_dead_letter_id(&self) -> Result<i64, StoreError> {
        self.max_dead_letter_id().await
    }

    /// Stores archived dead letters again in ONE transaction: a (DLQ topic, partition,
    /// offset) already stored is left as it is; a new one gets its archived status, replay
    /// count and history, plus an `archive_restored` event by `actor` naming `source`.
    /// Returns how many were new.
    ///
    /// Errors: `Unavailable`, `Rejected` (the database refused a record's data), `Database`.
    pub async fn restore_archived(
        &self,
        records: &[RestoredDeadLetter],
        actor: &str,
        source: &str,
    ) -> Result<u64, StoreError> {
        if records.is_empty() {
            return Ok(0);
        }
        let now = now_ms();
        let by_coords: HashMap<(&str, i32, i64), &RestoredDeadLetter> = records
            .iter()
            .map(|r| {
                let rec = &r.new.record;
                (
                    (rec.dlq_topic.as_str(), rec.dlq_partition, rec.dlq_offset),
                    r,
                )
            })
            .collect();
        let rows: Vec<Row<'_>> = records.iter().map(|r| Row::full(&r.new)).collect();
        let detail = format!("from the archive {source}");
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            // Their searched text too (migration 0028), in this transaction.
            let inserted = write_rows!(tx, DB, &rows);
            for ins in &inserted {
                let key = (ins.dlq_topic.as_str(), ins.dlq_partition, ins.dlq_offset);
                let Some(r) = by_coords.get(&key) else {
                    continue;
                };
                if r.status != "new" || r.replay_count != 0 || r.status_before.is_some() {
                    let mut qb: QueryBuilder<'_, DB> =
                        QueryBuilder::new("UPDATE dead_letters SET status = ");
                    DB::bind(&mut qb, Val::Text(Some(&r.status)));
                    qb.push(", status_before = ");
                    DB::bind(&mut qb, Val::Text(r.status_before.as_deref()));
                    qb.push(", replay_count = ");
                    DB::bind(&mut qb, Val::I32(Some(r.replay_count)));
                    qb.push(" WHERE id = ");
                    DB::bind(&mut qb, Val::I64(Some(ins.id)));
                    qb.build().execute(&mut *tx).await.map_err(store_error)?;
                }
                let restored = HistoryEvent {
                    at_ms: now,
                    kind: "archive_restored".to_string(),
                    actor: Some(actor.to_string()),
                    detail: Some(detail.clone()),
                    job_id: None,
                };
                for e in r.history.iter().chain(std::iter::once(&restored)) {
                    let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                        "INSERT INTO dead_letter_events \
                         (dead_letter_id, at_ms, kind, actor, detail, job_id) VALUES (",
                    );
                    DB::bind(&mut qb, Val::I64(Some(ins.id)));
                    qb.push(", ");
                    DB::bind(&mut qb, Val::I64(Some(e.at_ms)));
                    qb.push(", ");
                    DB::bind(&mut qb, Val::Text(Some(&e.kind)));
                    qb.push(", ");
                    DB::bind(&mut qb, Val::Text(e.actor.as_deref()));
                    qb.push(", ");
                    DB::bind(&mut qb, Val::Text(e.detail.as_deref()));
                    qb.push(", ");
                    DB::bind(&mut qb, Val::Text(e.job_id.as_deref()));
                    qb.push(")");
                    qb.build().execute(&mut *tx).await.map_err(store_error)?;
                }
            }
            tx.commit().await.map_err(store_error)?;
            Ok(inserted.len() as u64)
        })
    }
}
