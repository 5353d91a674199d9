//! The `quarantine` table (migration 0004): records the store refused even in reduced form,
//! kept with their coordinates and the error until `redrive quarantine retry` stores them.
//! See [`crate::quarantine`].

use sqlx::QueryBuilder;

use super::codec::{decode_record, encode_record};
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::limits;
use crate::model::RawRecord;
use crate::quarantine::{QuarantinedRecord, MAX_ERROR_BYTES, MAX_LIST_LIMIT};

const COLUMNS: &str = "id, dlq_topic, dlq_partition, dlq_offset, record_timestamp_ms, \
     quarantined_at_ms, error, record_bytes, (record IS NOT NULL) AS payload_kept, attempts, \
     last_attempt_at_ms";

#[derive(Debug, sqlx::FromRow)]
struct Row {
    id: i64,
    dlq_topic: String,
    dlq_partition: i32,
    dlq_offset: i64,
    record_timestamp_ms: Option<i64>,
    quarantined_at_ms: i64,
    error: String,
    record_bytes: i64,
    payload_kept: bool,
    attempts: i32,
    last_attempt_at_ms: i64,
}

impl From<Row> for QuarantinedRecord {
    fn from(r: Row) -> Self {
        QuarantinedRecord {
            id: r.id,
            dlq_topic: r.dlq_topic,
            dlq_partition: r.dlq_partition,
            dlq_offset: r.dlq_offset,
            record_timestamp_ms: r.record_timestamp_ms,
            quarantined_at_ms: r.quarantined_at_ms,
            error: r.error,
            record_bytes: r.record_bytes,
            payload_kept: r.payload_kept,
            attempts: r.attempts,
            last_attempt_at_ms: r.last_attempt_at_ms,
        }
    }
}

/// Key + value + header names and values of `record`, bytes.
pub(crate) fn record_bytes(record: &RawRecord) -> i64 {
    let n = record.key.as_ref().map_or(0, Vec::len)
        + record.value.as_ref().map_or(0, Vec::len)
        + record
            .headers
            .iter()
            .map(|h| h.name.len() + h.value.as_ref().map_or(0, Vec::len))
            .sum::<usize>();
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Store {
    /// Quarantines `record` with `error` (stored as printable ASCII, at most
    /// [`MAX_ERROR_BYTES`]) at `now_ms`. With `keep_payload` the raw record is kept (as ASCII
    /// JSON in a BLOB/BYTEA); without it only its coordinates and size are (for a record the
    /// database cannot hold at all). Returns false if these coordinates were already
    /// quarantined (a redelivery): the first entry is kept.
    ///
    /// Errors: `Unavailable` (retry later), `Rejected` / `Database` if even this is refused.
    pub async fn quarantine_record(
        &self,
        record: &RawRecord,
        error: &str,
        keep_payload: bool,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let error = limits::ascii(error, MAX_ERROR_BYTES);
        let payload = keep_payload.then(|| encode_record(record));
        let done = on_write_conn!(self, |conn, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "INSERT INTO quarantine (dlq_topic, dlq_partition, dlq_offset, \
                 record_timestamp_ms, quarantined_at_ms, error, record_bytes, record, attempts, \
                 last_attempt_at_ms) VALUES (",
            );
            let values = [
                Val::Text(Some(record.dlq_topic.as_str())),
                Val::I32(Some(record.dlq_partition)),
                Val::I64(Some(record.dlq_offset)),
                Val::I64(record.timestamp_ms),
                Val::I64(Some(now_ms)),
                Val::Text(Some(error.as_str())),
                Val::I64(Some(record_bytes(record))),
                Val::Bytes(payload.as_deref()),
                Val::I32(Some(1)),
                Val::I64(Some(now_ms)),
            ];
            for (i, v) in values.into_iter().enumerate() {
                if i > 0 {
                    qb.push(", ");
                }
                DB::bind(&mut qb, v);
            }
            qb.push(") ON CONFLICT (dlq_topic, dlq_partition, dlq_offset) DO NOTHING");
            qb.build()
                .persistent(false)
                .execute(&mut *conn)
                .await
                .map(|done| done.rows_affected())
                .map_err(store_error)
        })?;
        Ok(done > 0)
    }

    /// Quarantined records, newest first (by id), at most `limit` (capped at
    /// [`MAX_LIST_LIMIT`]; 0 means 50), with ids below `before_id` if given (the next page).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn list_quarantine(
        &self,
        limit: u32,
        before_id: Option<i64>,
    ) -> Result<Vec<QuarantinedRecord>, StoreError> {
        let limit = match limit {
            0 => 50,
            n => n.min(MAX_LIST_LIMIT),
        };
        let rows: Vec<Row> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new(format!("SELECT {COLUMNS} FROM quarantine"));
            if let Some(before) = before_id {
                qb.push(" WHERE id < ");
                DB::bind(&mut qb, Val::I64(Some(before)));
            }
            qb.push(" ORDER BY id DESC LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(i64::from(limit))));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        Ok(rows.into_iter().map(QuarantinedRecord::from).collect())
    }

    /// How many records are in quarantine. Errors: `Unavailable`, `Database`.
    pub async fn quarantine_count(&self) -> Result<i64, StoreError> {
        on_pool!(self, |pool, _DB| {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM quarantine")
                .fetch_one(pool)
                .await
        })
        .map_err(store_error)
    }

    /// One quarantined record with its raw record (`None` when it was not kept), or `None`
    /// if there is no such quarantine id.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt` if the kept record does not parse.
    pub async fn quarantined(
        &self,
        id: i64,
    ) -> Result<Option<(QuarantinedRecord, Option<RawRecord>)>, StoreError> {
        let row: Option<(Row, Option<Vec<u8>>)> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new(format!("SELECT {COLUMNS} FROM quarantine WHERE id = "));
            DB::bind(&mut qb, Val::I64(Some(id)));
            let row: Option<Row> = qb
                .build_query_as()
                .fetch_optional(pool)
                .await
                .map_err(store_error)?;
            match row {
                None => Ok::<_, StoreError>(None),
                Some(row) => {
                    let mut qb: QueryBuilder<'_, DB> =
                        QueryBuilder::new("SELECT record FROM quarantine WHERE id = ");
                    DB::bind(&mut qb, Val::I64(Some(id)));
                    let payload: Option<Option<Vec<u8>>> = qb
                        .build_query_scalar()
                        .fetch_optional(pool)
                        .await
                        .map_err(store_error)?;
                    Ok(Some((row, payload.flatten())))
                }
            }
        })?;
        match row {
            None => Ok(None),
            Some((row, payload)) => {
                let record = payload.as_deref().map(decode_record).transpose()?;
                Ok(Some((row.into(), record)))
            }
        }
    }

    /// Deletes quarantine row `id` (its record has been stored). Returns false if it was gone.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn release_quarantined(&self, id: i64) -> Result<bool, StoreError> {
        let done = on_write_conn!(self, |conn, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("DELETE FROM quarantine WHERE id = ");
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.build()
                .execute(&mut *conn)
                .await
                .map(|d| d.rows_affected())
        })
        .map_err(store_error)?;
        Ok(done > 0)
    }

    /// Records a failed retry of quarantine row `id`: one more attempt, the new `error`.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn quarantine_attempt_failed(
        &self,
        id: i64,
        error: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let error = limits::ascii(error, MAX_ERROR_BYTES);
        on_write_conn!(self, |conn, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE quarantine SET attempts = attempts + 1, error = ");
            DB::bind(&mut qb, Val::Text(Some(error.as_str())));
            qb.push(", last_attempt_at_ms = ");
            DB::bind(&mut qb, Val::I64(Some(now_ms)));
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.build().execute(&mut *conn).await.map(|_| ())
        })
        .map_err(store_error)
    }
}
