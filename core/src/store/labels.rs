//! Triage labels and notes (migration 0009) on one dead letter or one error group. Many dead
//! letters at once: `label_bulk.rs`; labels read beside list rows: `label_reads.rs`.
//!
//! Every change is ONE write transaction: the change, a history event (the dead letter's in
//! `dead_letter_events`, the group's in `group_events`, which every dead letter of the group
//! shows) and one audit row whose `detail` holds the label or the note before and after. A
//! request that changes nothing (a label already there, a note set to what it is) writes
//! nothing. Rules for labels and notes: `crate::labels`, `docs/limits.md`.

use sqlx::QueryBuilder;

use super::actions::{clean_text, ids_json, now_ms};
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, NewAuditEntry};
use crate::labels::{
    parse_label, parse_note, Annotations, LabelInfo, LabelOp, NoteInfo, Target, Triage,
    MAX_LABELS_PER_RECORD,
};

/// Longest excerpt of a note kept in a history event's detail (the audit row has it whole).
const NOTE_IN_HISTORY_CHARS: usize = 200;

#[derive(Debug, sqlx::FromRow)]
struct LabelRow {
    label: String,
    added_at_ms: i64,
    added_by: String,
}

#[derive(Debug, sqlx::FromRow)]
struct NoteRow {
    note: String,
    updated_at_ms: i64,
    updated_by: String,
}

/// The tables and key column of a target's labels and note, and its key as bound text.
struct Tables {
    labels: &'static str,
    notes: &'static str,
    key: &'static str,
}

fn tables(target: &Target) -> Tables {
    match target {
        Target::DeadLetter(_) => Tables {
            labels: "dead_letter_labels",
            notes: "dead_letter_notes",
            key: "dead_letter_id",
        },
        Target::Group(_) => Tables {
            labels: "group_labels",
            notes: "group_notes",
            key: "fingerprint",
        },
    }
}

/// Binds the target's key (an integer id or a fingerprint).
fn bind_key<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, target: &'a Target) {
    match target {
        Target::DeadLetter(id) => DB::bind(qb, Val::I64(Some(*id))),
        Target::Group(fp) => DB::bind(qb, Val::Text(Some(fp.as_str()))),
    }
}

/// `{"dead_letter": 12}` / `{"group": "…"}`: the target in an audit row's detail.
fn target_json(target: &Target) -> serde_json::Value {
    match target {
        Target::DeadLetter(id) => serde_json::json!({ "dead_letter": id }),
        Target::Group(fp) => serde_json::json!({ "group": fp }),
    }
}

/// A fingerprint as redrive computes them: 16 lowercase hex characters.
fn check_fingerprint(fp: &str) -> Result<(), StoreError> {
    if fp.len() == 16 && fp.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "`{}` is not an error-group fingerprint (16 lowercase hex characters)",
            fp.chars().take(40).collect::<String>()
        )))
    }
}

/// The audit row of a change on one target.
fn target_audit(
    actor: &Actor,
    action: &str,
    target: &Target,
    detail: serde_json::Value,
) -> NewAuditEntry {
    let (ids, filter, count) = match target {
        Target::DeadLetter(id) => (Some(ids_json(&[*id])), None, 1),
        // The group is named as the filter that lists its dead letters.
        Target::Group(fp) => (
            None,
            Some(serde_json::json!({ "fingerprint": fp }).to_string()),
            0,
        ),
    };
    NewAuditEntry {
        ids,
        filter,
        count,
        detail: Some(detail.to_string()),
        ..NewAuditEntry::by(actor, action, "ok")
    }
}

fn excerpt(text: &str) -> String {
    let mut out: String = text.chars().take(NOTE_IN_HISTORY_CHARS).collect();
    if text.chars().count() > NOTE_IN_HISTORY_CHARS {
        out.push('…');
    }
    out
}

/// Appends the event for a change on `target` (a dead letter's history or its group's).
fn insert_event<'a, DB: Dialect>(
    target: &'a Target,
    at_ms: i64,
    kind: &'a str,
    actor: String,
    detail: Option<String>,
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(match target {
        Target::DeadLetter(_) => {
            "INSERT INTO dead_letter_events (dead_letter_id, at_ms, kind, actor, detail) VALUES ("
        }
        Target::Group(_) => {
            "INSERT INTO group_events (fingerprint, at_ms, kind, actor, detail) VALUES ("
        }
    });
    bind_key(&mut qb, target);
    qb.push(", ");
    DB::bind(&mut qb, Val::I64(Some(at_ms)));
    qb.push(", ");
    DB::bind(&mut qb, Val::Text(Some(kind)));
    qb.push(", ");
    DB::bind(&mut qb, Val::OwnedText(Some(actor)));
    qb.push(", ");
    DB::bind(&mut qb, Val::OwnedText(detail));
    qb.push(")");
    qb
}

impl Store {
    /// The labels (sorted) and note of `target`; empty when it has none (or does not exist).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn annotations(&self, target: &Target) -> Result<Annotations, StoreError> {
        let t = tables(target);
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT label, added_at_ms, added_by FROM {} WHERE {} = ",
                t.labels, t.key
            ));
            bind_key(&mut qb, target);
            qb.push(" ORDER BY label");
            let labels: Vec<LabelRow> = qb
                .build_query_as()
                .fetch_all(pool)
                .await
                .map_err(store_error)?;
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT note, updated_at_ms, updated_by FROM {} WHERE {} = ",
                t.notes, t.key
            ));
            bind_key(&mut qb, target);
            let note: Option<NoteRow> = qb
                .build_query_as()
                .fetch_optional(pool)
                .await
                .map_err(store_error)?;
            Ok(Annotations {
                labels: labels
                    .into_iter()
                    .map(|r| LabelInfo {
                        label: r.label,
                        added_at_ms: r.added_at_ms,
                        added_by: r.added_by,
                    })
                    .collect(),
                note: note.map(|n| NoteInfo {
                    text: n.note,
                    updated_at_ms: n.updated_at_ms,
                    updated_by: n.updated_by,
                }),
            })
        })
    }

    /// A dead letter's triage: its own labels and note and its error group's, or `None` if
    /// there is no such dead letter.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn triage(&self, id: i64) -> Result<Option<Triage>, StoreError> {
        let fingerprint: Option<String> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("SELECT fingerprint FROM dead_letters WHERE id = ");
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.build_query_scalar().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        let Some(fingerprint) = fingerprint else {
            return Ok(None);
        };
        let record = self.annotations(&Target::DeadLetter(id)).await?;
        let group = self
            .annotations(&Target::Group(fingerprint.clone()))
            .await?;
        Ok(Some(Triage {
            fingerprint,
            record,
            group,
        }))
    }

    /// `NotFound` unless `target` exists (a dead letter with that id; an error group with at
    /// least one dead letter); `Invalid` for a malformed fingerprint.
    /// `Ok` if `target` exists within `actor`'s DLQ-topic scope (a group: has a dead letter
    /// there); else `NotFound`, as if absent.
    async fn check_target(&self, actor: &Actor, target: &Target) -> Result<(), StoreError> {
        if let Target::Group(fp) = target {
            check_fingerprint(fp)?;
        }
        let scope = self.topics_in_scope(actor).await?;
        let found: Option<i64> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(match target {
                Target::DeadLetter(_) => "SELECT id FROM dead_letters WHERE id = ",
                Target::Group(_) => "SELECT id FROM dead_letters WHERE fingerprint = ",
            });
            bind_key(&mut qb, target);
            super::sql::push_topic_in(&mut qb, scope.as_deref());
            qb.push(" LIMIT 1");
            qb.build_query_scalar().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        match found {
            Some(_) => Ok(()),
            None => Err(StoreError::NotFound(target.describe())),
        }
    }

    /// Adds (`LabelOp::Add`) or removes `label` on `target`, in ONE transaction with its
    /// history event (`label_added` / `label_removed`) and an audit row (`label_add` /
    /// `label_remove`, detail `{"target", "label", "before", "after"}`). Returns `false` when
    /// nothing changed (the label was already there, or was not there to remove): then
    /// nothing is written.
    ///
    /// Errors: `Invalid` (a label the rules refuse, a bad fingerprint, or a target already at
    /// [`MAX_LABELS_PER_RECORD`]), `NotFound` (no such dead letter or group), `Unavailable`,
    /// `Database`.
    pub async fn change_label(
        &self,
        actor: &Actor,
        target: &Target,
        label: &str,
        op: LabelOp,
    ) -> Result<bool, StoreError> {
        let label = parse_label(label).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.check_target(actor, target).await?;
        let t = tables(target);
        let now = now_ms();
        let user = clean_text(&actor.user);
        let changed = on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new(format!("SELECT label FROM {} WHERE {} = ", t.labels, t.key));
            bind_key(&mut qb, target);
            qb.push(" ORDER BY label");
            let before: Vec<String> = qb
                .build_query_scalar()
                .fetch_all(&mut *tx)
                .await
                .map_err(store_error)?;
            let has = before.contains(&label);
            match op {
                LabelOp::Add if has => return Ok(false),
                LabelOp::Remove if !has => return Ok(false),
                LabelOp::Add if before.len() >= MAX_LABELS_PER_RECORD => {
                    return Err(StoreError::Invalid(format!(
                        "{} already has {MAX_LABELS_PER_RECORD} labels, the most it may have; \
                         remove one first",
                        target.describe()
                    )))
                }
                _ => {}
            }
            let mut qb: QueryBuilder<'_, DB> = match op {
                LabelOp::Add => {
                    let mut qb = QueryBuilder::new(format!(
                        "INSERT INTO {} ({}, label, added_at_ms, added_by) VALUES (",
                        t.labels, t.key
                    ));
                    bind_key(&mut qb, target);
                    qb.push(", ");
                    DB::bind(&mut qb, Val::Text(Some(label.as_str())));
                    qb.push(", ");
                    DB::bind(&mut qb, Val::I64(Some(now)));
                    qb.push(", ");
                    DB::bind(&mut qb, Val::Text(Some(user.as_str())));
                    qb.push(") ON CONFLICT DO NOTHING");
                    qb
                }
                LabelOp::Remove => {
                    let mut qb =
                        QueryBuilder::new(format!("DELETE FROM {} WHERE {} = ", t.labels, t.key));
                    bind_key(&mut qb, target);
                    qb.push(" AND label = ");
                    DB::bind(&mut qb, Val::Text(Some(label.as_str())));
                    qb
                }
            };
            let n = qb
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?
                .rows_affected();
            if n == 0 {
                // A concurrent request made the same change first.
                return Ok(false);
            }
            insert_event::<DB>(
                target,
                now,
                op.event_kind(),
                user.clone(),
                Some(label.clone()),
            )
            .build()
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
            let mut after = before.clone();
            match op {
                LabelOp::Add => {
                    after.push(label.clone());
                    after.sort();
                }
                LabelOp::Remove => after.retain(|l| *l != label),
            }
            let detail = serde_json::json!({
                "target": target_json(target),
                "label": label,
                "before": before,
                "after": after,
            });
            let audit = target_audit(actor, op.audit_action(), target, detail);
            super::audit::insert_audit::<DB>(&audit, now)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<bool, StoreError>(true)
        })?;
        if changed {
            tracing::info!(actor = %user, target = %target.describe(), %label, action = op.audit_action(), "label changed");
        }
        Ok(changed)
    }

    /// Sets the note of `target` to `text` (edited in place; an empty text clears it), in ONE
    /// transaction with a history event (`note_set` with the first 200 characters, or
    /// `note_cleared`) and an audit row (`note_set`, detail `{"target", "before", "after"}`,
    /// the whole texts, `null` for none). Returns the note now (`None` when cleared). A text
    /// equal to the current note changes nothing and writes nothing.
    ///
    /// Errors: `Invalid` (longer than `MAX_NOTE_CHARS`, a bad fingerprint), `NotFound`,
    /// `Unavailable`, `Database`.
    pub async fn set_note(
        &self,
        actor: &Actor,
        target: &Target,
        text: &str,
    ) -> Result<Option<NoteInfo>, StoreError> {
        let note = parse_note(text).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.check_target(actor, target).await?;
        let t = tables(target);
        let now = now_ms();
        let user = clean_text(&actor.user);
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT note, updated_at_ms, updated_by FROM {} WHERE {} = ",
                t.notes, t.key
            ));
            bind_key(&mut qb, target);
            let before: Option<NoteRow> = qb
                .build_query_as()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
            if before.as_ref().map(|b| &b.note) == note.as_ref() {
                return Ok(before.map(|b| NoteInfo {
                    text: b.note,
                    updated_at_ms: b.updated_at_ms,
                    updated_by: b.updated_by,
                }));
            }
            let mut qb: QueryBuilder<'_, DB> = match &note {
                Some(n) => {
                    let mut qb = QueryBuilder::new(format!(
                        "INSERT INTO {} ({}, note, updated_at_ms, updated_by) VALUES (",
                        t.notes, t.key
                    ));
                    bind_key(&mut qb, target);
                    qb.push(", ");
                    DB::bind(&mut qb, Val::Text(Some(n.as_str())));
                    qb.push(", ");
                    DB::bind(&mut qb, Val::I64(Some(now)));
                    qb.push(", ");
                    DB::bind(&mut qb, Val::Text(Some(user.as_str())));
                    qb.push(format!(
                        ") ON CONFLICT ({}) DO UPDATE SET note = excluded.note, \
                         updated_at_ms = excluded.updated_at_ms, updated_by = excluded.updated_by",
                        t.key
                    ));
                    qb
                }
                None => {
                    let mut qb =
                        QueryBuilder::new(format!("DELETE FROM {} WHERE {} = ", t.notes, t.key));
                    bind_key(&mut qb, target);
                    qb
                }
            };
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            let (kind, detail) = match &note {
                Some(n) => ("note_set", Some(excerpt(n))),
                None => ("note_cleared", None),
            };
            insert_event::<DB>(target, now, kind, user.clone(), detail)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            let detail = serde_json::json!({
                "target": target_json(target),
                "before": before.as_ref().map(|b| b.note.as_str()),
                "after": note.as_deref(),
            });
            let audit = target_audit(actor, "note_set", target, detail);
            super::audit::insert_audit::<DB>(&audit, now)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            tracing::info!(actor = %user, target = %target.describe(), cleared = note.is_none(), "note set");
            Ok::<_, StoreError>(note.map(|text| NoteInfo {
                text,
                updated_at_ms: now,
                updated_by: user.clone(),
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_checked() {
        assert!(check_fingerprint("0123456789abcdef").is_ok());
        assert!(check_fingerprint("0123456789ABCDEF").is_err());
        assert!(check_fingerprint("x").is_err());
        assert_eq!(excerpt("short"), "short");
        assert_eq!(excerpt(&"a".repeat(300)).chars().count(), 201);
    }
}
