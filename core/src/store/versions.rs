//! Edited versions of a dead letter (`dead_letter_versions`, migration 0014; `docs/replay.md`,
//! "Edit and replay"). The original key, value and headers stay in `dead_letters`, untouched
//! (version 0); each edit adds version `n + 1` with its whole record and a bounded diff
//! summary against version `n` (`crate::edit::diff`), and `dead_letters.edit_version` names
//! the latest.
//!
//! **Exactly one record per replay.** A replay's outbox row is pinned to the dead letter's
//! latest version when the replay is requested ([`LATEST_VERSION_ID`], in `insert_outbox`, for
//! a replay by ids, by filter, or right after an edit), and the relay's claim reads the pinned
//! version's key, value and headers *instead of* the original ([`CLAIM_RECORD_COLUMNS`]). A
//! dead letter is in at most one outbox row that is not done (a replay skips `replay_pending`
//! ones), and an edit is refused while it is `replay_pending`, so the version a pending row
//! publishes is always the latest, and the original is never published beside an edit.
//!
//! **Edit against replay.** The edit's first statement updates the dead letter's row
//! (`edit_version + 1`, only if not `deleted` or `replay_pending`): on PostgreSQL that row
//! lock orders the edit and a concurrent replay of the same dead letter (the replay's own
//! `UPDATE ... status = 'replay_pending'` waits, then sees the new version in its next
//! statement); on SQLite the write gate runs them one after the other.

use sqlx::QueryBuilder;

use super::actions::{action_audit, clean_text, insert_events_for_ids, now_ms, reason_suffix};
use super::codec::{decode_headers, encode_headers};
use super::dialect::{store_error, Dialect, Val};
use super::replay_request::{check_replay, insert_job, insert_outbox};
use super::{Pool, Store, StoreError};
use crate::actions::{
    Actor, JobStatus, NewAuditEntry, ReplayJob, ReplayOptions, ReplayRequest, Selection,
};
use crate::edit::diff::{summarize, Digest};
use crate::edit::{check, EditOutcome, EditRequest, Record, VersionInfo};

/// SQL expression, over a `dead_letters` row, for its latest version's id (`NULL` = never
/// edited): what a new outbox row is pinned to.
pub(super) const LATEST_VERSION_ID: &str = "(SELECT v.id FROM dead_letter_versions v \
     WHERE v.dead_letter_id = dead_letters.id AND v.version = dead_letters.edit_version)";

/// The claim's join of an outbox row `o` (dead letter `d`) to its pinned version `v`.
pub(super) const CLAIM_VERSION_JOIN: &str =
    "LEFT JOIN dead_letter_versions v ON v.id = o.version_id";

/// The claim's record columns: the pinned version's key, value and headers when the row has
/// one (a null key or value in a version stays null), else the original's; and the version.
pub(super) const CLAIM_RECORD_COLUMNS: &str = "CASE WHEN o.version_id IS NULL THEN d.key \
     ELSE v.key END AS key, CASE WHEN o.version_id IS NULL THEN d.value ELSE v.value END AS value, \
     CASE WHEN o.version_id IS NULL THEN d.headers ELSE v.headers END AS headers, \
     d.stack_trace AS stack_trace, \
     COALESCE(v.version, 0) AS version";

/// Most versions [`Store::versions`] returns (newest first); each carries a diff summary of
/// at most `edit::diff::MAX_SUMMARY_BYTES`.
pub const MAX_VERSIONS_LISTED: i64 = 50;

#[derive(Debug, sqlx::FromRow)]
struct RecordRow {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: String,
    /// The `stack_trace` column, which the headers may refer to (`codec::decode_headers`).
    stack_trace: Option<String>,
}

impl RecordRow {
    fn into_record(self) -> Result<Record, StoreError> {
        Ok(Record {
            key: self.key,
            value: self.value,
            headers: decode_headers(&self.headers, self.stack_trace.as_deref())?,
        })
    }
}

#[derive(Debug, sqlx::FromRow)]
struct InfoRow {
    dead_letter_id: i64,
    version: i32,
    created_at_ms: i64,
    created_by: String,
    reason: Option<String>,
    value_bytes: i64,
    value_sha256: Option<String>,
    diff: String,
}

impl TryFrom<InfoRow> for VersionInfo {
    type Error = StoreError;

    fn try_from(r: InfoRow) -> Result<VersionInfo, StoreError> {
        let diff = serde_json::from_str(&r.diff).map_err(|e| {
            StoreError::Corrupt(format!(
                "dead letter {} version {}: diff summary: {e}",
                r.dead_letter_id, r.version
            ))
        })?;
        Ok(VersionInfo {
            dead_letter_id: r.dead_letter_id,
            version: r.version,
            created_at_ms: r.created_at_ms,
            created_by: r.created_by,
            reason: r.reason,
            value_bytes: r.value_bytes,
            value_sha256: r.value_sha256,
            diff,
        })
    }
}

#[derive(Debug, sqlx::FromRow)]
struct StateRow {
    status: String,
    source_topic: Option<String>,
}

const INFO_COLUMNS: &str = "dead_letter_id, version, created_at_ms, created_by, reason, \
     value_bytes, value_sha256, diff";

/// `SELECT key, value, headers` of version `version` of `id` (0 = the original).
fn record_query<'a, DB: Dialect>(id: i64, version: i32) -> QueryBuilder<'a, DB> {
    let mut qb = if version == 0 {
        let mut qb = QueryBuilder::new(
            "SELECT key, value, headers, stack_trace FROM dead_letters WHERE id = ",
        );
        DB::bind(&mut qb, Val::I64(Some(id)));
        qb
    } else {
        let mut qb = QueryBuilder::new(
            "SELECT key, value, headers, CAST(NULL AS TEXT) AS stack_trace FROM dead_letter_versions \
             WHERE dead_letter_id = ",
        );
        DB::bind(&mut qb, Val::I64(Some(id)));
        qb
    };
    if version != 0 {
        qb.push(" AND version = ");
        DB::bind(&mut qb, Val::I32(Some(version)));
    }
    qb
}

impl Store {
    /// Saves an edit of dead letter `id` as its next version, in ONE transaction: the version
    /// row (whole record, value length and SHA-256, diff summary), `dead_letters.edit_version`,
    /// an `edited` history event, and an `edit` audit row whose `detail` is
    /// `{"target": "dead_letter:ID", "version", "base_version", "diff": {...}}` (bounded, see
    /// `edit::diff`). With `req.replay`, the same transaction also queues the new version for
    /// replay: a job of one record, its outbox row pinned to the new version, a
    /// `replay_requested` event and a `replay` audit row naming the job.
    ///
    /// Errors: `NotFound` (no such dead letter), `Conflict` (it is deleted — restore it
    /// first; it is waiting in a replay job — cancel the job first; `base_version` is not the
    /// latest — another edit was saved meanwhile), `Invalid` (an edit that breaks a limit of
    /// `edit::check` or changes nothing, a reason too long, a bad target topic, no target
    /// for the replay), `Unavailable`, `Database`. On error nothing is changed.
    pub async fn edit_dead_letter(
        &self,
        actor: &Actor,
        id: i64,
        req: &EditRequest,
    ) -> Result<EditOutcome, StoreError> {
        // Outside the actor's DLQ-topic scope the record is absent (`scope.rs`).
        self.check_ids_in_scope(actor, &[id]).await?;
        // The replay's checks (target topic, reason), as for any replay.
        let replay_req = ReplayRequest {
            selection: Selection::Ids(vec![id]),
            target_topic: req.replay.as_ref().and_then(|r| r.target_topic.clone()),
            rate_per_sec: None,
            reason: req.reason.clone(),
            options: ReplayOptions::default(),
        };
        let (target, reason) = check_replay(&replay_req)?;
        // What the request itself carries can be checked before any lock is taken.
        check(&req.edit.apply(&Record::default())).map_err(|e| StoreError::Invalid(e.0))?;
        let replay = req.replay.is_some();
        let now = now_ms();
        let user = clean_text(&actor.user);
        let selection = Selection::Ids(vec![id]);
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE dead_letters SET edit_version = edit_version + 1");
            if replay {
                qb.push(", status_before = status, status = 'replay_pending'");
            }
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.push(" AND status NOT IN ('deleted', 'replay_pending')");
            if replay {
                qb.push(" AND COALESCE(");
                DB::bind(&mut qb, Val::Text(target.as_deref()));
                qb.push(", source_topic) IS NOT NULL");
            }
            qb.push(" RETURNING edit_version");
            let version: Option<i32> = qb
                .build_query_scalar()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
            let Some(version) = version else {
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("SELECT status, source_topic FROM dead_letters WHERE id = ");
                DB::bind(&mut qb, Val::I64(Some(id)));
                let state: Option<StateRow> = qb
                    .build_query_as()
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_error)?;
                tx.rollback().await.map_err(store_error)?;
                return Err(match state {
                    None => StoreError::NotFound(format!("dead letter {id}")),
                    Some(s) if s.status == "deleted" => StoreError::Conflict(format!(
                        "dead letter {id} is deleted; restore it before editing it"
                    )),
                    Some(s) if s.status == "replay_pending" => StoreError::Conflict(format!(
                        "dead letter {id} is waiting in a replay job; cancel the job (or let it \
                         finish) before editing it"
                    )),
                    Some(s) if s.source_topic.is_none() => StoreError::Invalid(format!(
                        "dead letter {id} has no source topic to replay to; give a target topic"
                    )),
                    Some(_) => StoreError::Database(format!(
                        "dead letter {id} could not be edited for no known reason"
                    )),
                });
            };
            let base_version = version - 1;
            if let Some(b) = req.base_version {
                if b != base_version {
                    tx.rollback().await.map_err(store_error)?;
                    return Err(StoreError::Conflict(format!(
                        "you edited version {b} of dead letter {id}, but version {base_version} \
                         is the latest now (saved meanwhile); reload it and edit again"
                    )));
                }
            }
            let base: Option<RecordRow> = record_query::<DB>(id, base_version)
                .build_query_as()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
            let base = base
                .ok_or_else(|| {
                    StoreError::Corrupt(format!(
                        "dead letter {id}: version {base_version} is missing"
                    ))
                })?
                .into_record()?;
            let record = req.edit.apply(&base);
            if let Err(e) = check(&record) {
                tx.rollback().await.map_err(store_error)?;
                return Err(StoreError::Invalid(e.0));
            }
            if record == base {
                tx.rollback().await.map_err(store_error)?;
                return Err(StoreError::Invalid(format!(
                    "the edit changes nothing: key, value and headers are those of version \
                     {base_version}; change something, or replay the dead letter as it is"
                )));
            }
            let diff = summarize(&base, &record);
            let digest = Digest::of(record.value.as_deref());
            let diff_json = serde_json::to_string(&diff)
                .map_err(|e| StoreError::Database(format!("diff summary: {e}")))?;
            let info = VersionInfo {
                dead_letter_id: id,
                version,
                created_at_ms: now,
                created_by: user.clone(),
                reason: reason.clone(),
                value_bytes: digest.bytes as i64,
                value_sha256: digest.sha256.clone(),
                diff: diff.clone(),
            };
            let headers = encode_headers(&record.headers);
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "INSERT INTO dead_letter_versions (dead_letter_id, version, key, value, headers, \
                 value_bytes, value_sha256, created_at_ms, created_by, reason, diff) VALUES (",
            );
            let values = [
                Val::I64(Some(id)),
                Val::I32(Some(version)),
                Val::Bytes(record.key.as_deref()),
                Val::Bytes(record.value.as_deref()),
                Val::Text(Some(headers.as_str())),
                Val::I64(Some(info.value_bytes)),
                Val::Text(info.value_sha256.as_deref()),
                Val::I64(Some(now)),
                Val::Text(Some(user.as_str())),
                Val::Text(reason.as_deref()),
                Val::Text(Some(diff_json.as_str())),
            ];
            for (i, v) in values.into_iter().enumerate() {
                if i > 0 {
                    qb.push(", ");
                }
                DB::bind(&mut qb, v);
            }
            qb.push(")");
            qb.build()
                .persistent(false)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            insert_events_for_ids::<DB>(
                &[id],
                now,
                "edited",
                &user,
                |qb| {
                    qb.push("''");
                },
                format!(
                    "version {version}: {}{}",
                    diff.one_line(),
                    reason_suffix(reason.as_deref())
                ),
                None,
            )
            .build()
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
            let detail = serde_json::json!({
                "target": format!("dead_letter:{id}"),
                "version": version,
                "base_version": base_version,
                "diff": diff,
            })
            .to_string();
            let audit = NewAuditEntry {
                detail: Some(detail),
                ..action_audit(
                    actor,
                    "edit",
                    &selection,
                    1,
                    reason.as_deref(),
                    format!("ok: version {version} saved ({})", diff.one_line()),
                )
            };
            super::audit::insert_audit::<DB>(&audit, now)
                .build()
                .persistent(false)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;

            let mut job = None;
            if replay {
                let j = ReplayJob {
                    id: uuid::Uuid::new_v4().to_string(),
                    status: JobStatus::Running,
                    created_by: user.clone(),
                    created_at_ms: now,
                    started_at_ms: None,
                    finished_at_ms: None,
                    target_topic: target.clone(),
                    rate_per_sec: None,
                    reason: reason.clone(),
                    total: 1,
                    published: 0,
                    failed: 0,
                    cancelled: 0,
                    skipped: 0,
                    skipped_without_target: 0,
                    last_error: None,
                    selection: serde_json::to_string(&selection)
                        .map_err(|e| StoreError::Invalid(format!("selection: {e}")))?,
                    options: ReplayOptions::default(),
                    transform: Default::default(),
                    refailed: 0,
                    canary: None,
                    lag: Default::default(),
                    queueing: None,
                };
                insert_job::<DB>(&j)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                insert_outbox::<DB>(&j.id, &[id], target.as_deref(), now, &[])
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                insert_events_for_ids::<DB>(
                    &[id],
                    now,
                    "replay_requested",
                    &user,
                    |qb| {
                        qb.push("'to ' || COALESCE(");
                        DB::bind(qb, Val::Text(target.as_deref()));
                        qb.push(", source_topic)");
                    },
                    format!(
                        " (edited version {version}){}",
                        reason_suffix(reason.as_deref())
                    ),
                    Some(&j.id),
                )
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
                let audit = NewAuditEntry {
                    job_id: Some(j.id.clone()),
                    ..action_audit(
                        actor,
                        "replay",
                        &selection,
                        1,
                        reason.as_deref(),
                        format!(
                            "ok: 1 queued, 0 skipped (0 without a target topic); edited \
                             version {version}"
                        ),
                    )
                };
                super::audit::insert_audit::<DB>(&audit, now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                job = Some(j);
            }
            tx.commit().await.map_err(store_error)?;
            tracing::info!(dead_letter = id, version, actor = %user, replay, "dead letter edited");
            Ok(EditOutcome { version: info, job })
        })
    }

    /// The saved versions of dead letter `id`, newest first, at most [`MAX_VERSIONS_LISTED`]
    /// (the count of all is the dead letter's latest version number). Empty if it was never
    /// edited or does not exist.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt` (a stored diff this build cannot read).
    pub async fn versions(&self, id: i64) -> Result<Vec<VersionInfo>, StoreError> {
        let rows: Vec<InfoRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {INFO_COLUMNS} FROM dead_letter_versions WHERE dead_letter_id = "
            ));
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.push(" ORDER BY version DESC LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(MAX_VERSIONS_LISTED)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        rows.into_iter().map(VersionInfo::try_from).collect()
    }

    /// The latest version number of dead letter `id` (0 = never edited), `None` if there is no
    /// such dead letter.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn latest_version(&self, id: i64) -> Result<Option<i32>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("SELECT edit_version FROM dead_letters WHERE id = ");
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.build_query_scalar().fetch_optional(pool).await
        })
        .map_err(store_error)
    }

    /// The key, value and headers of version `version` of dead letter `id` (0 = the original,
    /// byte-exact as ingested), `None` if there is no such dead letter or version.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt` (stored headers that do not parse).
    pub async fn version_record(
        &self,
        id: i64,
        version: i32,
    ) -> Result<Option<Record>, StoreError> {
        if version < 0 {
            return Ok(None);
        }
        let row: Option<RecordRow> = on_pool!(self, |pool, DB| {
            record_query::<DB>(id, version)
                .build_query_as()
                .fetch_optional(pool)
                .await
        })
        .map_err(store_error)?;
        row.map(RecordRow::into_record).transpose()
    }

    /// One saved version's facts and diff (`version` ≥ 1), `None` if there is none.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn version_info(
        &self,
        id: i64,
        version: i32,
    ) -> Result<Option<VersionInfo>, StoreError> {
        let row: Option<InfoRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {INFO_COLUMNS} FROM dead_letter_versions WHERE dead_letter_id = "
            ));
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.push(" AND version = ");
            DB::bind(&mut qb, Val::I32(Some(version)));
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        row.map(VersionInfo::try_from).transpose()
    }
}
