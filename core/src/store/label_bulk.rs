//! A label added to or removed from many dead letters at once: by ids in ONE transaction; by
//! filter as a resumable bulk action (`bulk.rs`: kind `label_add` / `label_remove`, chunks of
//! `CHUNK_ROWS` in id order, the cursor and progress in `bulk_actions` moving in the commit
//! of each chunk, ONE audit row with the last). See `labels.rs` for the single-target changes.

use sqlx::QueryBuilder;

use super::actions::{action_audit, clean_text, now_ms};
use super::bulk::{Bulk, BulkKind};
use super::dialect::{store_error, Dialect, Val};
use super::tx_retry::{retry_rolled_back, TxFailed};
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, NewAuditEntry, Selection};
use crate::filter::Filter;
use crate::labels::{parse_label, LabelOp, LabelOutcome, MAX_LABELS_PER_RECORD};

/// `SELECT COUNT(*)` of the dead letters among `ids_json` (a JSON array of ids) that (still)
/// match `selection`: what a chunk acts on, changed or skipped.
pub(super) fn label_matched_query<'a, DB: Dialect>(
    selection: &'a Selection,
    ids_json: String,
) -> QueryBuilder<'a, DB> {
    let mut qb: QueryBuilder<'a, DB> = QueryBuilder::new("SELECT COUNT(*) FROM dead_letters");
    super::actions::push_selection(&mut qb, selection);
    qb.push(" AND id IN ");
    DB::push_json_ids(&mut qb, ids_json);
    qb
}

/// The statement that adds (`INSERT ... RETURNING dead_letter_id`: those without the label
/// and below `MAX_LABELS_PER_RECORD`) or removes (`DELETE ... RETURNING dead_letter_id`)
/// `label` on the dead letters among `ids_json` that match `selection`. Returns the ids it
/// changed.
pub(super) fn label_change_query<'a, DB: Dialect>(
    selection: &'a Selection,
    ids_json: String,
    label: &'a str,
    op: LabelOp,
    now: i64,
    user: &'a str,
) -> QueryBuilder<'a, DB> {
    match op {
        LabelOp::Add => {
            let mut qb = QueryBuilder::new(
                "INSERT INTO dead_letter_labels \
                 (dead_letter_id, label, added_at_ms, added_by) SELECT id, ",
            );
            DB::bind(&mut qb, Val::Text(Some(label)));
            qb.push(", ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(", ");
            DB::bind(&mut qb, Val::Text(Some(user)));
            qb.push(" FROM dead_letters");
            super::actions::push_selection(&mut qb, selection);
            qb.push(" AND id IN ");
            DB::push_json_ids(&mut qb, ids_json);
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
            let mut qb = QueryBuilder::new("DELETE FROM dead_letter_labels WHERE label = ");
            DB::bind(&mut qb, Val::Text(Some(label)));
            qb.push(" AND dead_letter_id IN (SELECT id FROM dead_letters");
            super::actions::push_selection(&mut qb, selection);
            qb.push(" AND id IN ");
            DB::push_json_ids(&mut qb, ids_json);
            qb.push(") RETURNING dead_letter_id");
            qb
        }
    }
}

/// The change of `$label` (`&str`) by `$op` (`LabelOp`) on the dead letters among `$ids`
/// (`&[i64]`) that (still) match `$sel` (`&Selection`), inside transaction `$tx` of the `DB`
/// in scope (inside `on_pool!`): the label rows and one history event per dead letter
/// changed, by `$user` (`&str`) at `$now` (ms). Shared by a change by ids
/// ([`Store::label_selection`]) and a bulk action's chunk (`bulk/chunk.rs`). Evaluates to
/// `(matched, changed)`: how many of `$ids` match, and the ids changed (sorted). A database
/// error returns `Err(StoreError.into())` from the enclosing function. A macro because the
/// two databases' transactions are different types.
macro_rules! label_ids_in_tx {
    ($tx:ident, $sel:expr, $ids:expr, $label:expr, $op:expr, $user:expr, $now:expr) => {{
        let (sel, ids, label, op, user, now): (
            &$crate::actions::Selection,
            &[i64],
            &str,
            $crate::labels::LabelOp,
            &str,
            i64,
        ) = ($sel, $ids, $label, $op, $user, $now);
        let mut changed: Vec<i64> = Vec::new();
        let mut matched = 0i64;
        if !ids.is_empty() {
            let ids_text = $crate::store::actions::ids_json(ids);
            matched = $crate::store::label_bulk::label_matched_query::<DB>(sel, ids_text.clone())
                .build_query_scalar::<i64>()
                .persistent(false)
                .fetch_one(&mut *$tx)
                .await
                .map_err($crate::store::dialect::store_error)?;
            changed = $crate::store::label_bulk::label_change_query::<DB>(
                sel, ids_text, label, op, now, user,
            )
            .build_query_scalar()
            .persistent(false)
            .fetch_all(&mut *$tx)
            .await
            .map_err($crate::store::dialect::store_error)?;
            changed.sort_unstable();
        }
        if !changed.is_empty() {
            $crate::store::actions::insert_events_for_ids::<DB>(
                &changed,
                now,
                op.event_kind(),
                user,
                |qb| {
                    <DB as $crate::store::dialect::Dialect>::bind(
                        qb,
                        $crate::store::dialect::Val::Text(Some(label)),
                    );
                },
                String::new(),
                None,
            )
            .build()
            .persistent(false)
            .execute(&mut *$tx)
            .await
            .map_err($crate::store::dialect::store_error)?;
        }
        (matched, changed)
    }};
}
pub(super) use label_ids_in_tx;

impl Store {
    /// Adds or removes `label` on every selected dead letter (its own labels; a group's labels
    /// are changed with [`Store::change_label`] on the group). Dead letters that already have
    /// (or lack) the label, or are at `MAX_LABELS_PER_RECORD`, are counted as skipped; each
    /// changed one gets a `label_added` / `label_removed` history event naming the actor, and
    /// the action ONE audit row (`label_add` / `label_remove`, count = changed, the ids or
    /// filter as given, detail `{"label", "skipped"}`).
    ///
    /// By ids: ONE transaction. By filter: a bulk action (`bulk.rs`) over the dead letters that
    /// match and exist when it starts, in id order, in chunks of `CHUNK_ROWS`, each one short
    /// transaction that re-checks the filter and moves the action's cursor in
    /// `bulk_actions` in the same commit; the audit row comes with the last chunk (outcome
    /// `ok: N changed, M skipped in K chunks`). A process that dies mid-way leaves the action
    /// `running`; [`Store::resume_bulk_actions`] finishes it from its cursor, so every dead
    /// letter is changed once and the action audited once (`…, resumed after an
    /// interruption`).
    ///
    /// Errors: `Invalid` (a label the rules refuse), `Unavailable`, `Database`.
    pub async fn label_selection(
        &self,
        actor: &Actor,
        selection: &Selection,
        label: &str,
        op: LabelOp,
    ) -> Result<LabelOutcome, StoreError> {
        self.label_selection_chunks(actor, selection, label, op, usize::MAX)
            .await
    }

    /// [`Store::label_selection`] that stops a by-filter action after at most `max_chunks`
    /// chunks, leaving it `running` in `bulk_actions` exactly as a process that died there
    /// would (crash tests resume it with [`Store::resume_bulk_actions`] or a restart).
    /// Returns what the chunks it ran changed and skipped. A selection by ids is one
    /// transaction whatever `max_chunks`.
    ///
    /// Errors: as [`Store::label_selection`].
    pub async fn label_selection_chunks(
        &self,
        actor: &Actor,
        selection: &Selection,
        label: &str,
        op: LabelOp,
        max_chunks: usize,
    ) -> Result<LabelOutcome, StoreError> {
        let label = parse_label(label).map_err(|e| StoreError::Invalid(e.to_string()))?;
        // Held to the actor's DLQ-topic scope (`scope.rs`) before anything is read.
        let selection = &self.scope_selection(actor, selection).await?;
        let outcome = match selection {
            Selection::Ids(ids) => self.label_ids(actor, selection, ids, &label, op).await?,
            Selection::Filter(filter) => {
                self.label_filter(actor, filter, &label, op, max_chunks)
                    .await?
            }
        };
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

    async fn label_filter(
        &self,
        actor: &Actor,
        filter: &Filter,
        label: &str,
        op: LabelOp,
        max_chunks: usize,
    ) -> Result<LabelOutcome, StoreError> {
        let max_id = self.max_dead_letter_id().await?;
        let mut bulk = Bulk::new(BulkKind::Label(op), actor, filter, None, None, max_id);
        bulk.label = Some(label.to_string());
        let bulk = self.run_bulk_chunks(bulk, max_chunks).await?;
        Ok(LabelOutcome {
            changed: bulk.done,
            skipped: bulk.skipped,
        })
    }

    /// ONE transaction of a change by ids: the change on `ids` (re-checked against the
    /// selection), their events, and the audit row.
    async fn label_ids(
        &self,
        actor: &Actor,
        selection: &Selection,
        ids: &[i64],
        label: &str,
        op: LabelOp,
    ) -> Result<LabelOutcome, StoreError> {
        let now = now_ms();
        let user = clean_text(&actor.user);
        // Tried again when rolled back for a transient reason (`tx_retry.rs`): it re-checks
        // the selection and each dead letter's labels.
        let user = &user;
        retry_rolled_back(op.audit_action(), || async move {
            on_pool!(self, |pool, DB| {
                let mut tx = self.begin_write(pool).await?;
                let (matched, changed) = label_ids_in_tx!(tx, selection, ids, label, op, user, now);
                let outcome = LabelOutcome {
                    changed: changed.len() as i64,
                    skipped: (matched - changed.len() as i64).max(0),
                };
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
                        format!(
                            "ok: {} changed, {} skipped",
                            outcome.changed, outcome.skipped
                        ),
                    )
                };
                super::audit::insert_audit::<DB>(&audit, now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                tx.commit().await.map_err(TxFailed::at_commit)?;
                Ok::<LabelOutcome, TxFailed>(outcome)
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Convention, NewDeadLetter, Normalized, RawRecord};
    use crate::store::bulk::CHUNK_ROWS;

    fn dead_letter(offset: i64) -> NewDeadLetter {
        NewDeadLetter {
            record: RawRecord {
                dlq_topic: "orders.DLT".into(),
                dlq_partition: 0,
                dlq_offset: offset,
                timestamp_ms: Some(1_000),
                key: None,
                value: Some(b"v".to_vec()),
                headers: vec![],
            },
            convention: Convention::Unknown,
            fingerprint: "f".into(),
            normalized: Normalized::default(),
            dead_lettered_at_ms: 1_000 + offset,
            ingested_at_ms: 1_000,
        }
    }

    async fn audits(store: &Store, action: &str) -> Vec<crate::actions::AuditEntry> {
        let q = crate::actions::AuditQuery {
            action: Some(action.to_string()),
            limit: 100,
            ..crate::actions::AuditQuery::default()
        };
        store.audit(&q).await.unwrap().items
    }

    /// A label added by filter and then removed by filter, each interrupted after its first
    /// chunk: `running` in `bulk_actions` without an audit row; resumed, each finishes with
    /// every dead letter changed once and ONE audit row.
    #[tokio::test]
    async fn an_interrupted_bulk_label_and_unlabel_are_resumed_once() {
        let (store, _dir) = crate::store::test_file::sqlite_store("t.db").await;
        let n = (CHUNK_ROWS + 120) as i64;
        let rows: Vec<NewDeadLetter> = (0..n).map(dead_letter).collect();
        store.insert_batch(&rows).await.unwrap();
        let all = Selection::Filter(Filter::default());
        for op in [LabelOp::Add, LabelOp::Remove] {
            let half = store
                .label_selection_chunks(&Actor::operator("eve"), &all, "needs-fix", op, 1)
                .await
                .unwrap();
            assert_eq!(half.changed, CHUNK_ROWS as i64);
            let running = &store.bulk_actions(10).await.unwrap()[0];
            assert_eq!(
                (running.kind.as_str(), running.status.as_str()),
                (op.audit_action(), "running")
            );
            assert_eq!(running.label.as_deref(), Some("needs-fix"));
            assert!(audits(&store, op.audit_action()).await.is_empty());
            assert_eq!(store.resume_bulk_actions(0).await.unwrap(), 1);
            let done = &store.bulk_actions(10).await.unwrap()[0];
            assert_eq!((done.status.as_str(), done.done), ("done", n));
            let audit = audits(&store, op.audit_action()).await;
            assert_eq!(audit.len(), 1, "{audit:?}");
            assert_eq!(audit[0].count, n);
            assert!(
                audit[0].outcome.contains("resumed after an interruption"),
                "{}",
                audit[0].outcome
            );
            assert_eq!(store.resume_bulk_actions(0).await.unwrap(), 0);
        }
    }
}
