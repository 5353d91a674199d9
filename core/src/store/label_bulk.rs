//! A label added to or removed from many dead letters at once: by ids in ONE transaction,
//! by filter in chunks of `CHUNK_ROWS` like the other bulk actions (`bulk.rs`), ONE audit
//! row per action. See `labels.rs` for the single-target changes.

use sqlx::QueryBuilder;

use super::actions::{action_audit, clean_text, ids_json, insert_events_for_ids, now_ms};
use super::bulk::CHUNK_ROWS;
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, NewAuditEntry, Selection};
use crate::labels::{parse_label, LabelOp, LabelOutcome, MAX_LABELS_PER_RECORD};

impl Store {
    /// Adds or removes `label` on every selected dead letter (its own labels; a group's labels
    /// are changed with [`Store::change_label`] on the group). By ids: ONE transaction. By
    /// filter: in chunks of `CHUNK_ROWS` dead letters (like the other bulk actions: the ones
    /// that match and exist when it starts, in id order, each chunk one short transaction
    /// that re-checks the filter), with a `label_added` / `label_removed` history event per
    /// changed dead letter in the chunk that changed it, and ONE audit row (`label_add` /
    /// `label_remove`, count = changed, the ids or filter as given, detail `{"label",
    /// "skipped"}`) with the last chunk. Dead letters that already have (or lack) the label,
    /// or are at `MAX_LABELS_PER_RECORD`, are counted as skipped. An interrupted run leaves
    /// the chunks it committed, each dead letter's history naming the actor; running it again
    /// finishes it (adding a label twice changes nothing).
    ///
    /// Errors: `Invalid` (a label the rules refuse), `Unavailable`, `Database`.
    pub async fn label_selection(
        &self,
        actor: &Actor,
        selection: &Selection,
        label: &str,
        op: LabelOp,
    ) -> Result<LabelOutcome, StoreError> {
        let label = parse_label(label).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let mut outcome = LabelOutcome::default();
        match selection {
            Selection::Ids(ids) => {
                self.label_chunk(actor, selection, ids, &label, op, &mut outcome, Some(1))
                    .await?;
            }
            Selection::Filter(filter) => {
                let max_id = self.max_dead_letter_id().await?;
                let mut cursor = 0i64;
                let mut chunks = 0usize;
                loop {
                    let ids: Vec<i64> = on_pool!(self, |pool, DB| {
                        let mut qb: QueryBuilder<'_, DB> =
                            QueryBuilder::new("SELECT id FROM dead_letters");
                        super::sql::push_filter(&mut qb, filter);
                        qb.push(" AND id > ");
                        DB::bind(&mut qb, Val::I64(Some(cursor)));
                        qb.push(" AND id <= ");
                        DB::bind(&mut qb, Val::I64(Some(max_id)));
                        qb.push(" ORDER BY id LIMIT ");
                        DB::bind(&mut qb, Val::I64(Some(CHUNK_ROWS as i64)));
                        qb.build_query_scalar::<i64>().fetch_all(pool).await
                    })
                    .map_err(store_error)?;
                    chunks += 1;
                    let last = ids.len() < CHUNK_ROWS;
                    let audit_chunks = last.then_some(chunks);
                    self.label_chunk(
                        actor,
                        selection,
                        &ids,
                        &label,
                        op,
                        &mut outcome,
                        audit_chunks,
                    )
                    .await?;
                    match ids.last() {
                        Some(&id) if !last => cursor = id,
                        _ => break,
                    }
                }
            }
        }
        tracing::info!(
            actor = %actor.user,
            %label,
            action = op.audit_action(),
            changed = outcome.changed,
            skipped = outcome.skipped,
            "labels changed"
        );
        Ok(outcome)
    }

    /// One transaction of [`Store::label_selection`]: the change on `ids` (re-checked against
    /// the selection), their events, and — with `audit_chunks` (the number of chunks, given
    /// for the last one) — the audit row.
    #[allow(clippy::too_many_arguments)]
    async fn label_chunk(
        &self,
        actor: &Actor,
        selection: &Selection,
        ids: &[i64],
        label: &str,
        op: LabelOp,
        outcome: &mut LabelOutcome,
        audit_chunks: Option<usize>,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let user = clean_text(&actor.user);
        let ids_text = ids_json(ids);
        on_pool!(self, |pool, DB| {
            let mut tx = pool
                .begin_with(<DB as Dialect>::BEGIN_WRITE)
                .await
                .map_err(store_error)?;
            let mut changed: Vec<i64> = Vec::new();
            let mut matched = 0i64;
            if !ids.is_empty() {
                // The chunk's dead letters that (still) match the selection.
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("SELECT COUNT(*) FROM dead_letters");
                super::actions::push_selection(&mut qb, selection);
                qb.push(" AND id IN ");
                DB::push_json_ids(&mut qb, ids_text.clone());
                matched = qb
                    .build_query_scalar::<i64>()
                    .persistent(false)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(store_error)?;
                let mut qb: QueryBuilder<'_, DB> = match op {
                    LabelOp::Add => {
                        let mut qb = QueryBuilder::new(
                            "INSERT INTO dead_letter_labels \
                             (dead_letter_id, label, added_at_ms, added_by) SELECT id, ",
                        );
                        DB::bind(&mut qb, Val::Text(Some(label)));
                        qb.push(", ");
                        DB::bind(&mut qb, Val::I64(Some(now)));
                        qb.push(", ");
                        DB::bind(&mut qb, Val::Text(Some(user.as_str())));
                        qb.push(" FROM dead_letters");
                        super::actions::push_selection(&mut qb, selection);
                        qb.push(" AND id IN ");
                        DB::push_json_ids(&mut qb, ids_text.clone());
                        qb.push(
                            " AND id NOT IN (SELECT dead_letter_id FROM dead_letter_labels \
                             WHERE label = ",
                        );
                        DB::bind(&mut qb, Val::Text(Some(label)));
                        qb.push(
                            ") AND (SELECT COUNT(*) FROM dead_letter_labels c \
                             WHERE c.dead_letter_id = dead_letters.id) < ",
                        );
                        DB::bind(&mut qb, Val::I64(Some(MAX_LABELS_PER_RECORD as i64)));
                        qb.push(" ON CONFLICT DO NOTHING RETURNING dead_letter_id");
                        qb
                    }
                    LabelOp::Remove => {
                        let mut qb =
                            QueryBuilder::new("DELETE FROM dead_letter_labels WHERE label = ");
                        DB::bind(&mut qb, Val::Text(Some(label)));
                        qb.push(" AND dead_letter_id IN (SELECT id FROM dead_letters");
                        super::actions::push_selection(&mut qb, selection);
                        qb.push(" AND id IN ");
                        DB::push_json_ids(&mut qb, ids_text.clone());
                        qb.push(") RETURNING dead_letter_id");
                        qb
                    }
                };
                changed = qb
                    .build_query_scalar()
                    .persistent(false)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(store_error)?;
                changed.sort_unstable();
            }
            if !changed.is_empty() {
                insert_events_for_ids::<DB>(
                    &changed,
                    now,
                    op.event_kind(),
                    &user,
                    |qb| {
                        DB::bind(qb, Val::Text(Some(label)));
                    },
                    String::new(),
                    None,
                )
                .build()
                .persistent(false)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            }
            outcome.changed += changed.len() as i64;
            outcome.skipped += (matched - changed.len() as i64).max(0);
            if let Some(chunks) = audit_chunks {
                let how = if chunks > 1 {
                    format!(" in {chunks} chunks")
                } else {
                    String::new()
                };
                let result = format!(
                    "ok: {} changed, {} skipped{how}",
                    outcome.changed, outcome.skipped
                );
                let audit = NewAuditEntry {
                    detail: Some(
                        serde_json::json!({ "label": label, "skipped": outcome.skipped })
                            .to_string(),
                    ),
                    ..action_audit(
                        actor,
                        op.audit_action(),
                        selection,
                        outcome.changed,
                        None,
                        result,
                    )
                };
                super::audit::insert_audit::<DB>(&audit, now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<(), StoreError>(())
        })
    }
}
