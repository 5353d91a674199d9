//! The append-only audit trail and each dead letter's own history.
//!
//! `audit_log` has no UPDATE or DELETE path in redrive, and the database refuses both (a
//! trigger on each backend, see migration 0002). History events are written by the actions
//! and the relay in their own transactions; the `ingested` event is derived from the dead
//! letter's `ingested_at_ms`, so ingest writes no extra row per record.

use sqlx::QueryBuilder;

use super::actions::clean_text;
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::{
    AuditEntry, AuditQuery, HistoryEvent, NewAuditEntry, AUDIT_DEFAULT_LIMIT, AUDIT_MAX_LIMIT,
};
use crate::model::Page;

const AUDIT_COLUMNS: &str = "id, at_ms, actor, action, count, ids, filter, reason, client_ip, \
     user_agent, outcome, job_id, via_token, detail";

/// `INSERT` of one audit row at `at_ms`. Free text has U+0000 replaced (PostgreSQL text
/// cannot hold it).
pub(crate) fn insert_audit<'a, DB: Dialect>(e: &NewAuditEntry, at_ms: i64) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(format!(
        "INSERT INTO audit_log ({}) VALUES (",
        AUDIT_COLUMNS.trim_start_matches("id, ")
    ));
    let text = |s: &Option<String>| Val::OwnedText(s.as_deref().map(clean_text));
    let actor = if e.actor.trim().is_empty() {
        "-".to_string()
    } else {
        clean_text(&e.actor)
    };
    let values = [
        Val::I64(Some(at_ms)),
        Val::OwnedText(Some(actor)),
        Val::OwnedText(Some(clean_text(&e.action))),
        Val::I64(Some(e.count)),
        text(&e.ids),
        text(&e.filter),
        text(&e.reason),
        text(&e.client_ip),
        text(&e.user_agent),
        Val::OwnedText(Some(clean_text(&e.outcome))),
        text(&e.job_id),
        Val::I64(e.via_token),
        text(&e.detail),
    ];
    for (i, v) in values.into_iter().enumerate() {
        if i > 0 {
            qb.push(", ");
        }
        DB::bind(&mut qb, v);
    }
    qb.push(")");
    qb
}

#[derive(Debug, sqlx::FromRow)]
struct AuditRow {
    id: i64,
    at_ms: i64,
    actor: String,
    action: String,
    count: i64,
    ids: Option<String>,
    filter: Option<String>,
    reason: Option<String>,
    client_ip: Option<String>,
    user_agent: Option<String>,
    outcome: String,
    job_id: Option<String>,
    via_token: Option<i64>,
    detail: Option<String>,
}

impl From<AuditRow> for AuditEntry {
    fn from(r: AuditRow) -> AuditEntry {
        AuditEntry {
            id: r.id,
            at_ms: r.at_ms,
            actor: r.actor,
            action: r.action,
            count: r.count,
            ids: r.ids,
            filter: r.filter,
            reason: r.reason,
            client_ip: r.client_ip,
            user_agent: r.user_agent,
            outcome: r.outcome,
            job_id: r.job_id,
            via_token: r.via_token,
            detail: r.detail,
        }
    }
}

#[derive(Debug, sqlx::FromRow)]
struct EventRow {
    at_ms: i64,
    kind: String,
    actor: Option<String>,
    detail: Option<String>,
    job_id: Option<String>,
}

#[derive(Debug, sqlx::FromRow)]
struct IngestRow {
    ingested_at_ms: i64,
    fingerprint: String,
    dlq_topic: String,
    dlq_partition: i32,
    dlq_offset: i64,
}

fn audit_query<'a, DB: Dialect>(q: &'a AuditQuery, fetch: i64) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(format!("SELECT {AUDIT_COLUMNS} FROM audit_log WHERE 1 = 1"));
    if let Some(a) = &q.actor {
        qb.push(" AND actor = ");
        DB::bind(&mut qb, Val::Text(Some(a)));
    }
    if let Some(a) = &q.action {
        qb.push(" AND action = ");
        DB::bind(&mut qb, Val::Text(Some(a)));
    }
    if let Some(from) = q.from_ms {
        qb.push(" AND at_ms >= ");
        DB::bind(&mut qb, Val::I64(Some(from)));
    }
    if let Some(to) = q.to_ms {
        qb.push(" AND at_ms < ");
        DB::bind(&mut qb, Val::I64(Some(to)));
    }
    if let Some(before) = q.before_id {
        qb.push(" AND id < ");
        DB::bind(&mut qb, Val::I64(Some(before)));
    }
    qb.push(" ORDER BY id DESC LIMIT ");
    DB::bind(&mut qb, Val::I64(Some(fetch)));
    qb
}

/// Most of an error group's events (labels, note) shown in each of its dead letters' history.
const GROUP_EVENTS_IN_HISTORY: i64 = 200;

impl Store {
    /// Appends one audit row (sign-ins, failed sign-ins, sign-outs, user and token changes,
    /// denied attempts). The dead-letter actions write theirs inside their own transaction;
    /// this is for everything else. An empty actor is stored as `-`. Returns the row's id.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn record_audit(&self, entry: &NewAuditEntry) -> Result<i64, StoreError> {
        let now = super::actions::now_ms();
        on_write_conn!(self, |conn, DB| {
            let mut qb = insert_audit::<DB>(entry, now);
            qb.push(" RETURNING id");
            qb.build_query_scalar::<i64>().fetch_one(&mut *conn).await
        })
        .map_err(store_error)
    }

    /// One page of the audit trail, newest first (keyset on id DESC: `before_id` continues
    /// after the previous page's `next_cursor`, the decimal id of its last row). `limit` 0
    /// means [`AUDIT_DEFAULT_LIMIT`]; above [`AUDIT_MAX_LIMIT`] it is capped.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn audit(&self, query: &AuditQuery) -> Result<Page<AuditEntry>, StoreError> {
        let limit = match query.limit {
            0 => AUDIT_DEFAULT_LIMIT,
            n => n.min(AUDIT_MAX_LIMIT),
        } as usize;
        let rows: Vec<AuditRow> = on_pool!(self, |pool, DB| {
            let mut qb = audit_query::<DB>(query, limit as i64 + 1);
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let more = rows.len() > limit;
        let items: Vec<AuditEntry> = rows.into_iter().take(limit).map(AuditEntry::from).collect();
        let next_cursor = match items.last() {
            Some(last) if more => Some(last.id.to_string()),
            _ => None,
        };
        Ok(Page { items, next_cursor })
    }

    /// A dead letter's history, oldest first: `ingested` (from its `ingested_at_ms`, with the
    /// DLQ position as detail), then every event the actions and the relay recorded
    /// (`replay_requested`, `published`, `replay_failed`, `re_failed`, `replay_cancelled`,
    /// `replay_skipped`, `edited`, `deleted`, `restored`, `archive_restored`, `tier_assigned`,
    /// `tier_moved`, `label_added`, `label_removed`, `note_set`, `note_cleared`; the UI's
    /// words for each and the detail each carries: `app/src/components/history.rs`) and the newest
    /// 200 triage events of its error group (the same kinds prefixed `group_`), in the order
    /// they happened.
    ///
    /// Errors: `NotFound` (no such dead letter), `Unavailable`, `Database`.
    pub async fn history(&self, dead_letter_id: i64) -> Result<Vec<HistoryEvent>, StoreError> {
        let (ingest, events, group) = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT ingested_at_ms, fingerprint, dlq_topic, dlq_partition, dlq_offset \
                 FROM dead_letters WHERE id = ",
            );
            DB::bind(&mut qb, Val::I64(Some(dead_letter_id)));
            let ingest: Option<IngestRow> = qb
                .build_query_as()
                .fetch_optional(pool)
                .await
                .map_err(store_error)?;
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT at_ms, kind, actor, detail, job_id FROM dead_letter_events \
                 WHERE dead_letter_id = ",
            );
            DB::bind(&mut qb, Val::I64(Some(dead_letter_id)));
            qb.push(" ORDER BY id");
            let events: Vec<EventRow> = qb
                .build_query_as()
                .fetch_all(pool)
                .await
                .map_err(store_error)?;
            // Its error group's triage events (labels, note), the newest few, oldest first.
            let group: Vec<EventRow> = match &ingest {
                None => Vec::new(),
                Some(i) => {
                    let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                        "SELECT at_ms, kind, actor, detail, CAST(NULL AS TEXT) AS job_id FROM group_events \
                         WHERE fingerprint = ",
                    );
                    DB::bind(&mut qb, Val::Text(Some(i.fingerprint.as_str())));
                    qb.push(" ORDER BY id DESC LIMIT ");
                    DB::bind(&mut qb, Val::I64(Some(GROUP_EVENTS_IN_HISTORY)));
                    let mut rows: Vec<EventRow> = qb
                        .build_query_as()
                        .fetch_all(pool)
                        .await
                        .map_err(store_error)?;
                    rows.reverse();
                    rows
                }
            };
            Ok::<_, StoreError>((ingest, events, group))
        })?;
        let ingest =
            ingest.ok_or_else(|| StoreError::NotFound(format!("dead letter {dead_letter_id}")))?;
        let mut out = Vec::with_capacity(events.len() + 1);
        out.push(HistoryEvent {
            at_ms: ingest.ingested_at_ms,
            kind: "ingested".to_string(),
            actor: None,
            detail: Some(format!(
                "from {} partition {} offset {}",
                ingest.dlq_topic, ingest.dlq_partition, ingest.dlq_offset
            )),
            job_id: None,
        });
        out.extend(events.into_iter().map(|e| HistoryEvent {
            at_ms: e.at_ms,
            kind: e.kind,
            actor: e.actor,
            detail: e.detail,
            job_id: e.job_id,
        }));
        out.extend(group.into_iter().map(|e| HistoryEvent {
            at_ms: e.at_ms,
            kind: format!("group_{}", e.kind),
            actor: e.actor,
            detail: e.detail,
            job_id: None,
        }));
        // Stable: at the same ms the record's own events come before its group's.
        out.sort_by_key(|e| e.at_ms);
        Ok(out)
    }
}
