//! One chunk's write transaction ([`Store::commit_chunk`]): a cancelled replay job seen, an
//! approval claimed, the per-action statements (replay, label, delete / restore) on the
//! chunk's ids, the action's row and a replay job's totals, and with the last chunk the
//! audit row.

use std::sync::atomic::Ordering;

use sqlx::QueryBuilder;

use super::{Bulk, BulkKind, LONGEST_CHUNK_US};
use crate::actions::{JobStatus, NewAuditEntry, ReplayJob};
use crate::store::actions::{
    action_audit, clean_text, dry_run_from, ids_json, insert_events_for_ids, now_ms,
    push_deletable, push_replayable, push_restorable, push_status_changed_at, reason_suffix,
    DryRow,
};
use crate::store::dialect::{store_error, Dialect, Val};
use crate::store::replay_request::{insert_job, insert_outbox};
use crate::store::tx_retry::TxFailed;
use crate::store::{Pool, Store, StoreError};

// A chunk's outbox rows are one `INSERT` (`insert_outbox`).
const _: () = assert!(super::CHUNK_ROWS <= crate::store::replay_request::OUTBOX_ROWS_PER_STATEMENT);

/// Appends ` AND id IN (<ids>)`.
fn push_ids<DB: Dialect>(qb: &mut QueryBuilder<'_, DB>, ids: &[i64]) {
    qb.push(" AND id IN ");
    DB::push_json_ids(qb, ids_json(ids));
}

/// SQLite's statement setting a connection's page cache to `kib` KiB. Pages a transaction
/// dirtied stay cached until its commit whatever the size; a smaller size frees the rest as
/// they are released.
fn cache_pragma(kib: u32) -> String {
    format!("PRAGMA cache_size = -{kib}")
}

/// The audit row `action` of `bulk` as it stands (count: what it changed so far): the actor,
/// the filter as given, the reason, `outcome`, and as detail `detail` (else "all" when the
/// filter is empty) with a replay's options and an approval's link.
fn audit_entry(
    bulk: &Bulk,
    action: &str,
    outcome: String,
    detail: Option<String>,
) -> NewAuditEntry {
    let base = action_audit(
        &bulk.actor,
        action,
        &bulk.selection(),
        bulk.done,
        bulk.reason.as_deref(),
        outcome,
    );
    NewAuditEntry {
        job_id: bulk.job.as_ref().map(|j| j.id.clone()),
        detail: crate::store::approvals::approval_detail(
            crate::store::replay_request::replay_detail(
                detail.or(base.detail.clone()),
                bulk.job.as_ref().map(|j| &j.options),
            ),
            bulk.approval.as_ref(),
        ),
        ..base
    }
}

impl Store {
    /// ONE write transaction: the chunk's changes, the action's progress, and — for the last
    /// chunk — the audit row (and a replay job's "go"). Returns the action as this commit
    /// left it; `bulk` itself is never changed, so a rolled-back chunk can be run again.
    ///
    /// Errors: the store's (`Unavailable`, `Database`, an approval's `Conflict`), with
    /// whether they came before the commit ([`TxFailed`]).
    pub(super) async fn commit_chunk(
        &self,
        bulk: &Bulk,
        ids: &[i64],
        last: bool,
    ) -> Result<Bulk, TxFailed> {
        let now = now_ms();
        let selection = bulk.selection();
        let user = clean_text(&bulk.actor.user);
        let mut next = bulk.clone();
        let target = bulk.job.as_ref().and_then(|j| j.target_topic.clone());
        let target = target.as_deref();
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let locked_at = std::time::Instant::now();
            // SQLite: the chunk's pages stay cached until its commit, not spilled to the WAL
            // and read back (`SQLITE_WRITER_CACHE_KIB`); the connection gets its small cache
            // back before the commit. If the chunk fails before that, its connection keeps
            // the larger cache until the pool closes it (idle 10 min, or 30 min old).
            if DB::ONE_WRITER {
                sqlx::query(&cache_pragma(crate::store::SQLITE_WRITER_CACHE_KIB))
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            // A replay whose job was cancelled while preparing queues nothing more: this
            // chunk ends the action (its audit row says so). The job's row is locked first, so
            // a cancel committing meanwhile is seen (PostgreSQL re-reads the row after the
            // cancel's lock) and never leaves rows queued under a cancelled job.
            let cancelled = match &next.job {
                Some(job) if next.chunks > 0 || next.resumed => {
                    let mut qb: QueryBuilder<'_, DB> =
                        QueryBuilder::new("UPDATE replay_jobs SET status = status WHERE id = ");
                    DB::bind(&mut qb, Val::Text(Some(&job.id)));
                    qb.push(" RETURNING status");
                    let status: Option<String> = qb
                        .build_query_scalar()
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    status.as_deref() == Some("cancelled")
                }
                _ => false,
            };
            next.cancelled = cancelled;
            // An approved request: claimed in the first chunk's transaction (rolled back,
            // nothing done, when it was decided or expired meanwhile).
            if let (Some(link), 0, false) = (&next.approval, next.chunks, next.resumed) {
                let job_id = next.job.as_ref().map(|j| j.id.as_str());
                crate::store::approvals::claim_in_tx!(tx, link, job_id, now);
            }
            let (ids, last): (&[i64], bool) = if cancelled { (&[], true) } else { (ids, last) };
            // The replay job exists from the first chunk on: `preparing` until the last chunk,
            // or `running` at once when it is published while queueing (`Bulk::streams`; its
            // `replay_started` audit row is written below, in this transaction).
            let streaming = next.streams() && !last;
            if let (Some(job), 0, false) = (&next.job, next.chunks, next.resumed) {
                let job = ReplayJob {
                    status: if streaming {
                        JobStatus::Running
                    } else {
                        JobStatus::Preparing
                    },
                    ..job.clone()
                };
                insert_job::<DB>(&job)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            let changed: Vec<i64> = if ids.is_empty() {
                Vec::new()
            } else {
                match next.kind {
                    BulkKind::Replay => {
                        let mut qb: QueryBuilder<'_, DB> =
                            crate::store::actions::dry_run_head(target);
                        crate::store::actions::push_selection(&mut qb, &selection);
                        push_ids(&mut qb, ids);
                        qb.push(" GROUP BY 1, 2");
                        let dry: Vec<DryRow> = qb
                            .build_query_as()
                            .persistent(false)
                            .fetch_all(&mut *tx)
                            .await
                            .map_err(store_error)?;
                        let dry = dry_run_from(dry);
                        let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                            "UPDATE dead_letters SET status_before = status, \
                             status = 'replay_pending'",
                        );
                        push_status_changed_at(&mut qb, "'replay_pending'", now);
                        crate::store::actions::push_selection(&mut qb, &selection);
                        push_replayable(&mut qb, target);
                        push_ids(&mut qb, ids);
                        qb.push(" RETURNING id");
                        let mut queued: Vec<i64> = qb
                            .build_query_scalar()
                            .persistent(false)
                            .fetch_all(&mut *tx)
                            .await
                            .map_err(store_error)?;
                        queued.sort_unstable();
                        let skipped = (dry.total - queued.len() as i64).max(0);
                        next.skipped += skipped;
                        next.skipped_without_target += dry.without_target.min(skipped);
                        if let (Some(job), false) = (&next.job, queued.is_empty()) {
                            // Per-key order (`order.rs`): each row's key group and place,
                            // written with it; heads unheld.
                            let places = if job.options.unordered {
                                crate::store::order::Places::default()
                            } else {
                                let keys: Vec<crate::store::order::KeyRow> =
                                    crate::store::order::read_keys::<DB>(&queued)
                                        .build_query_as()
                                        .persistent(false)
                                        .fetch_all(&mut *tx)
                                        .await
                                        .map_err(store_error)?;
                                crate::store::order::places(target, &keys)
                            };
                            insert_outbox::<DB>(&job.id, &queued, target, now, &places.rows)
                                .build()
                                .persistent(false)
                                .execute(&mut *tx)
                                .await
                                .map_err(store_error)?;
                            crate::store::order::hold_later_in!(tx, &job.id, &places);
                            insert_events_for_ids::<DB>(
                                &queued,
                                now,
                                "replay_requested",
                                &job.created_by,
                                |qb| {
                                    qb.push("'to ' || COALESCE(");
                                    DB::bind(qb, Val::Text(target));
                                    qb.push(", source_topic)");
                                },
                                reason_suffix(next.reason.as_deref()),
                                Some(&job.id),
                            )
                            .build()
                            .persistent(false)
                            .execute(&mut *tx)
                            .await
                            .map_err(store_error)?;
                        }
                        queued
                    }
                    BulkKind::Label(op) => {
                        let label = next.label.clone().ok_or_else(|| {
                            StoreError::Corrupt("a label bulk action without a label".into())
                        })?;
                        let (matched, changed) = crate::store::label_bulk::label_ids_in_tx!(
                            tx, &selection, ids, &label, op, &user, now
                        );
                        next.skipped += (matched - changed.len() as i64).max(0);
                        changed
                    }
                    BulkKind::Delete | BulkKind::Restore => {
                        let (set, to, kind, detail_sql) = if next.kind == BulkKind::Delete {
                            (
                                "status_before = status, status = 'deleted'",
                                "'deleted'",
                                "deleted",
                                "'was ' || COALESCE(status_before, 'new')",
                            )
                        } else {
                            (
                                "status = COALESCE(status_before, 'new'), status_before = NULL",
                                "COALESCE(status_before, 'new')",
                                "restored",
                                "'back to ' || status",
                            )
                        };
                        let mut qb: QueryBuilder<'_, DB> =
                            QueryBuilder::new(format!("UPDATE dead_letters SET {set}"));
                        push_status_changed_at(&mut qb, to, now);
                        crate::store::actions::push_selection(&mut qb, &selection);
                        if next.kind == BulkKind::Delete {
                            push_deletable(&mut qb);
                        } else {
                            push_restorable(&mut qb);
                        }
                        push_ids(&mut qb, ids);
                        qb.push(" RETURNING id");
                        let mut changed: Vec<i64> = qb
                            .build_query_scalar()
                            .persistent(false)
                            .fetch_all(&mut *tx)
                            .await
                            .map_err(store_error)?;
                        changed.sort_unstable();
                        if !changed.is_empty() {
                            insert_events_for_ids::<DB>(
                                &changed,
                                now,
                                kind,
                                &user,
                                |qb| {
                                    qb.push(detail_sql);
                                },
                                reason_suffix(next.reason.as_deref()),
                                None,
                            )
                            .build()
                            .persistent(false)
                            .execute(&mut *tx)
                            .await
                            .map_err(store_error)?;
                        }
                        changed
                    }
                }
            };
            next.done += changed.len() as i64;
            next.cursor = if last {
                next.max_id
            } else {
                ids.last().copied().unwrap_or(next.cursor)
            };

            // The action's own row: written with the first chunk that is not the last.
            match next.id {
                None if !last => {
                    let actor_json = serde_json::to_string(&next.actor)
                        .map_err(|e| StoreError::Invalid(format!("actor: {e}")))?;
                    let filter_json = serde_json::to_string(&next.filter)
                        .map_err(|e| StoreError::Invalid(format!("filter: {e}")))?;
                    let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                        "INSERT INTO bulk_actions (kind, status, actor, actor_json, filter, \
                         reason, job_id, label, max_id, cursor_id, done, skipped, \
                         skipped_without_target, chunks, created_at_ms, updated_at_ms) VALUES (",
                    );
                    let job_id = next.job.as_ref().map(|j| j.id.clone());
                    let values = [
                        Val::Text(Some(next.kind.name())),
                        Val::Text(Some("running")),
                        Val::OwnedText(Some(user.clone())),
                        Val::OwnedText(Some(clean_text(&actor_json))),
                        Val::OwnedText(Some(clean_text(&filter_json))),
                        Val::OwnedText(next.reason.clone()),
                        Val::OwnedText(job_id),
                        Val::OwnedText(next.label.clone()),
                        Val::I64(Some(next.max_id)),
                        Val::I64(Some(next.cursor)),
                        Val::I64(Some(next.done)),
                        Val::I64(Some(next.skipped)),
                        Val::I64(Some(next.skipped_without_target)),
                        Val::I64(Some(next.chunks + 1)),
                        Val::I64(Some(now)),
                        Val::I64(Some(now)),
                    ];
                    for (i, v) in values.into_iter().enumerate() {
                        if i > 0 {
                            qb.push(", ");
                        }
                        DB::bind(&mut qb, v);
                    }
                    qb.push(") RETURNING id");
                    let id: i64 = qb
                        .build_query_scalar()
                        .fetch_one(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    next.id = Some(id);
                }
                None => {}
                Some(id) => {
                    let mut qb: QueryBuilder<'_, DB> =
                        QueryBuilder::new("UPDATE bulk_actions SET cursor_id = ");
                    DB::bind(&mut qb, Val::I64(Some(next.cursor)));
                    qb.push(", done = ");
                    DB::bind(&mut qb, Val::I64(Some(next.done)));
                    qb.push(", skipped = ");
                    DB::bind(&mut qb, Val::I64(Some(next.skipped)));
                    qb.push(", skipped_without_target = ");
                    DB::bind(&mut qb, Val::I64(Some(next.skipped_without_target)));
                    qb.push(", chunks = chunks + 1, updated_at_ms = ");
                    DB::bind(&mut qb, Val::I64(Some(now)));
                    if last {
                        qb.push(", status = 'done', finished_at_ms = ");
                        DB::bind(&mut qb, Val::I64(Some(now)));
                    }
                    qb.push(" WHERE id = ");
                    DB::bind(&mut qb, Val::I64(Some(id)));
                    qb.build().execute(&mut *tx).await.map_err(store_error)?;
                }
            }

            // `running` since its first chunk (this one or an earlier one).
            let streamed = streaming || next.streamed();
            if let Some(job) = &mut next.job {
                job.total = next.done;
                job.skipped = next.skipped;
                job.skipped_without_target = next.skipped_without_target;
                // The status this chunk gives the job; `None` leaves it as the relay (or a
                // person) set it.
                let status = if last && cancelled {
                    Some(JobStatus::Cancelled)
                } else if last && job.total == 0 {
                    job.finished_at_ms = Some(now);
                    Some(JobStatus::Finished)
                } else if streamed {
                    // Published while queueing: `running` since the first chunk, and the
                    // relay's to change (`waiting` in an outage), or a person's (`paused`).
                    // It finishes once the action is done and nothing is left (below).
                    None
                } else if last {
                    Some(JobStatus::Running)
                } else {
                    // Still queueing: the relay must not publish (nor mark) any of its rows
                    // before the last chunk (`request_replay` hands over a `running` job).
                    Some(JobStatus::Preparing)
                };
                if let Some(status) = status {
                    job.status = status;
                }
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("UPDATE replay_jobs SET total = ");
                DB::bind(&mut qb, Val::I64(Some(job.total)));
                qb.push(", skipped = ");
                DB::bind(&mut qb, Val::I64(Some(job.skipped)));
                qb.push(", skipped_without_target = ");
                DB::bind(&mut qb, Val::I64(Some(job.skipped_without_target)));
                if status.is_none() && last {
                    // A job whose action was started by a version that did not publish while
                    // queueing, and resumed by this one, is still `preparing`: it goes now.
                    qb.push(
                        ", status = CASE WHEN status = 'preparing' THEN 'running' ELSE status END",
                    );
                }
                if let Some(status) = status {
                    // A pause (or a cancel) while preparing is a person's: kept as it is.
                    qb.push(
                        ", status = CASE WHEN status IN ('paused', 'cancelled') THEN status ELSE ",
                    );
                    DB::bind(&mut qb, Val::Text(Some(status.as_str())));
                    qb.push(" END, finished_at_ms = CASE WHEN status IN ('paused', 'cancelled') THEN finished_at_ms ELSE ");
                    DB::bind(&mut qb, Val::I64(job.finished_at_ms));
                    qb.push(" END");
                }
                qb.push(" WHERE id = ");
                DB::bind(&mut qb, Val::Text(Some(&job.id)));
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
                // The relay may have published every row of a streaming job before its last
                // chunk: nothing would finish it then. The action's row is `done` above, so
                // the finish condition (`outbox_mark.rs`) holds once no row is left.
                if last && status.is_none() {
                    crate::store::outbox_mark::finish_in_tx!(tx, &job.id, now);
                }
            }

            if streaming && next.chunks == 0 && !next.resumed {
                // Published while queueing: the job is `running` from this commit on, so its
                // audit row is written now, before any record of it can be published.
                let audit = audit_entry(&next, "replay_started", next.start_outcome(), None);
                crate::store::audit::insert_audit::<DB>(&audit, now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            if last {
                // A label change names its label and what it left alone (`docs/triage.md`).
                // An "all" action says so (`confirm_all.rs`), beside the label.
                let detail = next.label.as_ref().map(|label| {
                    let mut d = serde_json::json!({ "label": label, "skipped": next.skipped });
                    if selection.is_all() {
                        d["all"] = serde_json::Value::Bool(true);
                    }
                    d.to_string()
                });
                let audit = audit_entry(&next, next.kind.name(), next.outcome(), detail);
                crate::store::audit::insert_audit::<DB>(&audit, now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            if DB::ONE_WRITER {
                sqlx::query(&cache_pragma(crate::store::SQLITE_CACHE_KIB))
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            tx.commit().await.map_err(TxFailed::at_commit)?;
            let held = u64::try_from(locked_at.elapsed().as_micros()).unwrap_or(u64::MAX);
            LONGEST_CHUNK_US.fetch_max(held, Ordering::Relaxed);
            Ok::<(), TxFailed>(())
        })?;
        next.chunks += 1;
        Ok(next)
    }
}
