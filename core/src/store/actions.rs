//! The actions on dead letters: delete and restore, and what every action shares (the
//! selection's SQL, eligibility, dry runs, history events, the audit row). Requesting a replay
//! is `replay_request.rs`; cancelling a job is `job_control.rs`.
//!
//! An action on explicit ids is ONE transaction: the state change, the history events, the
//! audit row and (for a replay) the job and its outbox rows (`docs/invariants.md`, invariants
//! 3–5). An action over a filter runs in chunks of short transactions (`bulk/`: the audit
//! row with the final count comes with the last chunk, a replay job stays `preparing` until
//! then, an interrupted action is resumed).
//!
//! A selection by filter goes through [`sql::push_filter`], the same WHERE the list and count
//! use, and the dry runs share each action's eligibility condition, so a dry-run count and
//! the action can only disagree if the data changed in between.
//!
//! Status rules:
//! - replay queues dead letters that are not `deleted` and not already `replay_pending`, and
//!   have a target (the override, else their source topic); the rest are counted as skipped.
//! - delete acts on dead letters that are not `deleted` and not `replay_pending` (a pending
//!   one is in a job's outbox: cancel the job first).
//! - restore acts on `deleted` ones and puts back the status they had before.

use sqlx::QueryBuilder;

use super::approvals::{approval_detail, claim_in_tx, ApprovalLink};
use super::bulk::{Bulk, BulkKind};
use super::dialect::{store_error, Dialect, Val};
use super::sql;
use super::tx_retry::{retry_rolled_back, TxFailed};
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, DryRun, NewAuditEntry, Selection};
use crate::filter::Filter;
use crate::model::Status;

/// Statuses a replay or delete leaves alone.
pub(super) const NOT_ACTIONABLE: &str = "('deleted', 'replay_pending')";

pub(crate) use crate::clock::now_ms;

/// `[1,2,3]`: the JSON array text [`Dialect::push_json_ids`] reads.
pub(crate) fn ids_json(ids: &[i64]) -> String {
    let mut s = String::with_capacity(ids.len() * 8 + 2);
    s.push('[');
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&id.to_string());
    }
    s.push(']');
    s
}

/// The filter as a JSON object of the fields that are set, with the list's query names
/// (`{"fingerprint":"…","status":"new"}`): what the audit row shows as "the filter as given".
pub(crate) fn filter_json(f: &Filter) -> String {
    let map: serde_json::Map<String, serde_json::Value> = f
        .to_pairs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v)))
        .collect();
    serde_json::Value::Object(map).to_string()
}

/// PostgreSQL text cannot hold U+0000: free text from a request is stored with U+FFFD instead.
pub(crate) fn clean_text(s: &str) -> String {
    s.replace('\0', "\u{FFFD}")
}

/// The trimmed reason, `None` if empty. Errors: `Invalid` when longer than
/// [`crate::actions::MAX_REASON_CHARS`].
pub(super) fn check_reason(reason: Option<&str>) -> Result<Option<String>, StoreError> {
    crate::request::reason(reason)
        .map(|r| r.map(|r| clean_text(&r)))
        .map_err(|e| StoreError::Invalid(e.0))
}

/// The audit row of a dead-letter action: actor, selection (ids or filter as given), reason.
pub(super) fn action_audit(
    actor: &Actor,
    action: &str,
    selection: &Selection,
    count: i64,
    reason: Option<&str>,
    outcome: String,
) -> NewAuditEntry {
    let (ids, filter) = match selection {
        Selection::Ids(ids) => (Some(ids_json(ids)), None),
        Selection::Filter(f) => (None, Some(filter_json(f))),
    };
    // An "all" action (empty filter) got past the typed-count confirmation
    // (`confirm_all.rs`): its row says so, in words and in `detail`.
    let (outcome, detail) = if selection.is_all() {
        (
            format!("{outcome}; {}", super::confirm_all::ALL_OUTCOME),
            Some(serde_json::json!({ "all": true }).to_string()),
        )
    } else {
        (outcome, None)
    };
    NewAuditEntry {
        count,
        ids,
        filter,
        reason: reason.map(str::to_string),
        detail,
        ..NewAuditEntry::by(actor, action, &outcome)
    }
}

/// Appends ` WHERE <selection>`: the list's filter (so `status` absent means "not deleted"),
/// or `id IN (<ids>)` for explicit ids (any status).
pub(crate) fn push_selection<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, sel: &'a Selection) {
    match sel {
        Selection::Filter(f) => sql::push_filter(qb, f),
        Selection::Ids(ids) => {
            qb.push(" WHERE id IN ");
            DB::push_json_ids(qb, ids_json(ids));
        }
    }
}

/// The condition (after the selection's WHERE) a replay queues: actionable and with a target.
pub(super) fn push_replayable<'a, DB: Dialect>(
    qb: &mut QueryBuilder<'a, DB>,
    target: Option<&'a str>,
) {
    qb.push(" AND status NOT IN ").push(NOT_ACTIONABLE);
    qb.push(" AND COALESCE(");
    DB::bind(qb, Val::Text(target));
    qb.push(", source_topic) IS NOT NULL");
}

/// The condition (after the selection's WHERE) a delete acts on.
pub(super) fn push_deletable<DB: Dialect>(qb: &mut QueryBuilder<'_, DB>) {
    qb.push(" AND status NOT IN ").push(NOT_ACTIONABLE);
}

/// The condition (after the selection's WHERE) a restore acts on.
pub(super) fn push_restorable<DB: Dialect>(qb: &mut QueryBuilder<'_, DB>) {
    qb.push(" AND status = 'deleted'");
}

/// One group of the replay dry run: a target topic and a status.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct DryRow {
    target: Option<String>,
    status: String,
    n: i64,
}

/// `SELECT <target>, status, COUNT(*) ... FROM dead_letters` of [`DryRow`]s, to which the
/// caller appends its WHERE and ` GROUP BY 1, 2`.
pub(super) fn dry_run_head<'a, DB: Dialect>(target: Option<&'a str>) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new("SELECT COALESCE(");
    DB::bind(&mut qb, Val::Text(target));
    qb.push(", source_topic) AS target, status, COUNT(*) AS n FROM dead_letters");
    qb
}

pub(super) fn dry_run_query<'a, DB: Dialect>(
    sel: &'a Selection,
    target: Option<&'a str>,
) -> QueryBuilder<'a, DB> {
    let mut qb = dry_run_head(target);
    push_selection(&mut qb, sel);
    qb.push(" GROUP BY 1, 2");
    qb
}

pub(super) fn dry_run_from(rows: Vec<DryRow>) -> DryRun {
    let mut out = DryRun {
        total: 0,
        per_target: Vec::new(),
        without_target: 0,
        skipped: 0,
        loop_guarded: 0,
        per_status: Vec::new(),
    };
    let mut per_target: std::collections::BTreeMap<String, i64> = Default::default();
    let mut per_status: std::collections::HashMap<Status, i64> = Default::default();
    for r in rows {
        out.total += r.n;
        let status = Status::parse(&r.status);
        if let Some(s) = status {
            *per_status.entry(s).or_default() += r.n;
        }
        // What `NOT_ACTIONABLE` names: a replay skips them.
        let skip = matches!(status, Some(Status::Deleted | Status::ReplayPending));
        match (skip, r.target) {
            (true, _) => out.skipped += r.n,
            (false, None) => out.without_target += r.n,
            (false, Some(t)) => *per_target.entry(t).or_default() += r.n,
        }
    }
    out.per_target = per_target.into_iter().collect();
    out.per_target
        .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out.per_status = Status::ALL
        .into_iter()
        .filter_map(|s| per_status.get(&s).map(|n| (s, *n)))
        .collect();
    out
}

/// `SELECT COUNT(*)` of the selection under an action's condition.
fn count_query<'a, DB: Dialect>(
    sel: &'a Selection,
    condition: fn(&mut QueryBuilder<'a, DB>),
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new("SELECT COUNT(*) FROM dead_letters");
    push_selection(&mut qb, sel);
    condition(&mut qb);
    qb
}

/// `UPDATE dead_letters SET <set>` (the SQL text `set` that gives `status` the SQL expression
/// `to`, then [`push_status_changed_at`] at `now`, epoch ms) over the selection under
/// `condition`, `RETURNING id`.
pub(super) fn update_returning_ids<'a, DB: Dialect>(
    set: &str,
    to: &str,
    now: i64,
    sel: &'a Selection,
    condition: impl FnOnce(&mut QueryBuilder<'a, DB>),
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(format!("UPDATE dead_letters SET {set}"));
    push_status_changed_at(&mut qb, to, now);
    push_selection(&mut qb, sel);
    condition(&mut qb);
    qb.push(" RETURNING id");
    qb
}

/// Appends `, status_changed_at_ms = CASE WHEN status = <to> THEN status_changed_at_ms ELSE
/// <now> END` to an `UPDATE dead_letters SET` that gives `status` the SQL expression `to`
/// (`'replayed'`, or over the row's columns as they were): the time of a status change,
/// written by the statement itself. On SQLite the trigger `dead_letters_status_changed`
/// (migration 0032) then leaves the row alone, where it would write it a second time; on
/// PostgreSQL its BEFORE trigger sets the same column in the same write.
pub(super) fn push_status_changed_at<DB: Dialect>(
    qb: &mut QueryBuilder<'_, DB>,
    to: &str,
    now: i64,
) {
    qb.push(format!(
        ", status_changed_at_ms = CASE WHEN status = {to} THEN status_changed_at_ms ELSE "
    ));
    DB::bind(qb, Val::I64(Some(now)));
    qb.push(" END");
}

/// One history event per dead letter of `ids`; `detail` pushes an SQL text expression over
/// the dead letter's columns (binding any user text), to which the bound `suffix` is appended.
#[allow(clippy::too_many_arguments)]
pub(crate) fn insert_events_for_ids<'a, DB: Dialect>(
    ids: &[i64],
    at_ms: i64,
    kind: &'a str,
    actor: &'a str,
    detail: impl FnOnce(&mut QueryBuilder<'a, DB>),
    suffix: String,
    job_id: Option<&'a str>,
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(
        "INSERT INTO dead_letter_events (dead_letter_id, at_ms, kind, actor, detail, job_id) \
         SELECT id, ",
    );
    DB::bind(&mut qb, Val::I64(Some(at_ms)));
    qb.push(", ");
    DB::bind(&mut qb, Val::Text(Some(kind)));
    qb.push(", ");
    DB::bind(&mut qb, Val::Text(Some(actor)));
    qb.push(", ");
    detail(&mut qb);
    qb.push(" || ");
    DB::bind(&mut qb, Val::OwnedText(Some(suffix)));
    qb.push(", ");
    DB::bind(&mut qb, Val::Text(job_id));
    qb.push(" FROM dead_letters WHERE id IN ");
    DB::push_json_ids(&mut qb, ids_json(ids));
    qb
}

/// `; reason: …` for an event's detail, or nothing.
pub(super) fn reason_suffix(reason: Option<&str>) -> String {
    reason.map(|r| format!("; reason: {r}")).unwrap_or_default()
}

impl Store {
    /// How many dead letters [`Store::delete`] of `selection` would delete now.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn delete_dry_run(&self, selection: &Selection) -> Result<i64, StoreError> {
        on_pool!(self, |pool, DB| {
            count_query::<DB>(selection, push_deletable)
                .build_query_scalar::<i64>()
                .fetch_one(pool)
                .await
        })
        .map_err(store_error)
    }

    /// How many dead letters [`Store::restore`] of `selection` would restore now.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn restore_dry_run(&self, selection: &Selection) -> Result<i64, StoreError> {
        on_pool!(self, |pool, DB| {
            count_query::<DB>(selection, push_restorable)
                .build_query_scalar::<i64>()
                .fetch_one(pool)
                .await
        })
        .map_err(store_error)
    }

    /// Soft-deletes the selected dead letters that are neither `deleted` nor `replay_pending`,
    /// in ONE transaction with a `deleted` history event each and one audit row (`delete`).
    /// They leave the default list, stay under `status=deleted`, and can be restored.
    /// Returns how many were deleted (the audit row's count).
    ///
    /// Errors: `Invalid` (reason too long), `NotFound("dead letter N")` for a picked id that
    /// is not there or outside the actor's scope (nothing changed), `Unavailable`, `Database`.
    pub async fn delete(
        &self,
        actor: &Actor,
        selection: &Selection,
        reason: Option<&str>,
    ) -> Result<u64, StoreError> {
        self.set_status(actor, selection, reason, StatusAction::Delete, None)
            .await
    }

    /// Restores the selected `deleted` dead letters to the status they had before the delete,
    /// in ONE transaction with a `restored` history event each and one audit row (`restore`).
    /// Returns how many were restored.
    ///
    /// Errors: `Invalid` (reason too long), `NotFound("dead letter N")` for a picked id that
    /// is not there or outside the actor's scope (nothing changed), `Unavailable`, `Database`.
    pub async fn restore(
        &self,
        actor: &Actor,
        selection: &Selection,
        reason: Option<&str>,
    ) -> Result<u64, StoreError> {
        self.set_status(actor, selection, reason, StatusAction::Restore, None)
            .await
    }

    /// [`Store::delete`] (`delete` true) or [`Store::restore`] carrying out an approved
    /// request (`approvals/approve.rs`; see [`Store::replay_as`]).
    pub(super) async fn change_status_as(
        &self,
        actor: &Actor,
        selection: &Selection,
        reason: Option<&str>,
        delete: bool,
        approval: Option<&ApprovalLink>,
    ) -> Result<u64, StoreError> {
        let action = if delete {
            StatusAction::Delete
        } else {
            StatusAction::Restore
        };
        self.set_status(actor, selection, reason, action, approval)
            .await
    }

    async fn set_status(
        &self,
        actor: &Actor,
        selection: &Selection,
        reason: Option<&str>,
        action: StatusAction,
        approval: Option<&ApprovalLink>,
    ) -> Result<u64, StoreError> {
        let reason = check_reason(reason)?;
        // Held to the actor's DLQ-topic scope (`scope.rs`) before anything is read.
        let selection = &self.scope_selection(actor, selection).await?;
        let now = now_ms();
        let user = clean_text(&actor.user);
        if let Selection::Filter(filter) = selection {
            // Over a filter: in chunks (`bulk/`), the audit row with the last one.
            let kind = match action {
                StatusAction::Delete => BulkKind::Delete,
                StatusAction::Restore => BulkKind::Restore,
            };
            let max_id = match approval.and_then(|a| a.max_id) {
                Some(m) => m,
                None => self.max_dead_letter_id().await?,
            };
            let mut bulk = Bulk::new(kind, actor, filter, reason, None, max_id);
            bulk.approval = approval.cloned();
            let bulk = self.run_bulk(bulk).await?;
            tracing::info!(
                actor = %user,
                action = action.name(),
                count = bulk.done,
                chunks = bulk.chunks,
                "dead letters changed"
            );
            return Ok(u64::try_from(bulk.done).unwrap_or(0));
        }
        let suffix = reason_suffix(reason.as_deref());
        let (set, to, kind, detail_sql) = match action {
            StatusAction::Delete => (
                "status_before = status, status = 'deleted'",
                "'deleted'",
                "deleted",
                "'was ' || COALESCE(status_before, 'new')",
            ),
            StatusAction::Restore => (
                "status = COALESCE(status_before, 'new'), status_before = NULL",
                "COALESCE(status_before, 'new')",
                "restored",
                "'back to ' || status",
            ),
        };
        // One transaction, tried again when it is rolled back for a transient reason (a
        // deadlock with the tier sorter on PostgreSQL): it re-checks each dead letter's
        // status, and an approval's claim is rolled back with it (`tx_retry.rs`).
        let (user_ref, reason_ref, suffix_ref) = (&user, &reason, &suffix);
        let n = retry_rolled_back(action.name(), || async move {
            let (user, reason) = (user_ref, reason_ref);
            on_pool!(self, |pool, DB| {
                let mut tx = self.begin_write(pool).await?;
                if let Some(link) = approval {
                    claim_in_tx!(tx, link, None, now);
                }
                let mut ids: Vec<i64> =
                    update_returning_ids::<DB>(set, to, now, selection, |qb| match action {
                        StatusAction::Delete => push_deletable(qb),
                        StatusAction::Restore => push_restorable(qb),
                    })
                    .build_query_scalar()
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(store_error)?;
                ids.sort_unstable();
                if !ids.is_empty() {
                    insert_events_for_ids::<DB>(
                        &ids,
                        now,
                        kind,
                        user,
                        |qb| {
                            qb.push(detail_sql);
                        },
                        suffix_ref.clone(),
                        None,
                    )
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                }
                let audit = action_audit(
                    actor,
                    action.name(),
                    selection,
                    ids.len() as i64,
                    reason.as_deref(),
                    "ok".to_string(),
                );
                let audit = NewAuditEntry {
                    detail: approval_detail(audit.detail.clone(), approval),
                    ..audit
                };
                super::audit::insert_audit::<DB>(&audit, now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                tx.commit().await.map_err(TxFailed::at_commit)?;
                Ok::<u64, TxFailed>(ids.len() as u64)
            })
        })
        .await?;
        tracing::info!(actor = %user, action = action.name(), count = n, "dead letters changed");
        Ok(n)
    }
}

#[derive(Debug, Clone, Copy)]
enum StatusAction {
    Delete,
    Restore,
}

impl StatusAction {
    /// The audit action name.
    fn name(self) -> &'static str {
        match self {
            StatusAction::Delete => "delete",
            StatusAction::Restore => "restore",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_filters_as_json() {
        assert_eq!(ids_json(&[]), "[]");
        assert_eq!(ids_json(&[3, 1, -2]), "[3,1,-2]");
        let f = Filter {
            fingerprint: Some("ab\"c".into()),
            status: Some(crate::model::Status::New),
            ..Filter::default()
        };
        let v: serde_json::Value = serde_json::from_str(&filter_json(&f)).unwrap();
        assert_eq!(v["fingerprint"], "ab\"c");
        assert_eq!(v["status"], "new");
        assert_eq!(filter_json(&Filter::default()), "{}");
    }

    #[test]
    fn dry_run_groups_add_up() {
        let row = |target: Option<&str>, status: &str, n: i64| DryRow {
            target: target.map(String::from),
            status: status.into(),
            n,
        };
        let d = dry_run_from(vec![
            row(Some("b"), "new", 2),
            row(Some("a"), "new", 1),
            row(Some("a"), "re_failed", 1),
            row(Some("c"), "replayed", 5),
            row(None, "new", 1),
            row(Some("a"), "deleted", 2),
            row(Some("a"), "replay_pending", 1),
            row(None, "deleted", 1),
        ]);
        assert_eq!(d.total, 14);
        assert_eq!(
            d.per_target,
            vec![("c".into(), 5), ("a".into(), 2), ("b".into(), 2)]
        );
        assert_eq!(d.without_target, 1);
        assert_eq!(d.skipped, 4);
        assert_eq!(d.queued(), 9);
        assert_eq!(
            d.per_status,
            vec![
                (Status::New, 4),
                (Status::ReplayPending, 1),
                (Status::Replayed, 5),
                (Status::ReFailed, 1),
                (Status::Deleted, 3),
            ]
        );
    }
}
