//! Labels and notes read beside list rows, error groups and export pages: a few indexed
//! queries per page, keyed by the page's ids and fingerprints.

use std::collections::HashMap;

use sqlx::QueryBuilder;

use super::actions::ids_json;
use super::dialect::{store_error, Dialect, Val};
use super::stats::push_json_texts;
use super::{Pool, Store, StoreError};
use crate::model::{DeadLetterSummary, ErrorGroup};

#[derive(Debug, sqlx::FromRow)]
struct KeyedLabel {
    key: String,
    label: String,
}

/// (key as text, value) rows.
type KeyedText = (String, String);

/// `(?, ?, …)` of text binds.
fn push_text_list<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, items: &'a [String]) {
    qb.push("(");
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            qb.push(", ");
        }
        DB::bind(qb, Val::Text(Some(s.as_str())));
    }
    qb.push(")");
}

impl Store {
    /// Fills `labels` and `group_labels` of a page of list rows (two indexed queries).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub(crate) async fn attach_labels(
        &self,
        items: &mut [DeadLetterSummary],
    ) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = items.iter().map(|d| d.id).collect();
        let mut fps: Vec<String> = items.iter().map(|d| d.fingerprint.clone()).collect();
        fps.sort();
        fps.dedup();
        let (own, group) = self.labels_of(&ids, &fps).await?;
        for d in items.iter_mut() {
            d.labels = own.get(&d.id).cloned().unwrap_or_default();
            d.group_labels = group.get(&d.fingerprint).cloned().unwrap_or_default();
        }
        Ok(())
    }

    /// The labels of dead letters `ids` and of groups `fps`, each list sorted.
    async fn labels_of(
        &self,
        ids: &[i64],
        fps: &[String],
    ) -> Result<(HashMap<i64, Vec<String>>, HashMap<String, Vec<String>>), StoreError> {
        let ids_text = ids_json(ids);
        let (own, group): (Vec<KeyedLabel>, Vec<KeyedLabel>) = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT CAST(dead_letter_id AS TEXT) AS key, label FROM dead_letter_labels \
                 WHERE dead_letter_id IN ",
            );
            DB::push_json_ids(&mut qb, ids_text.clone());
            qb.push(" ORDER BY dead_letter_id, label");
            let own = qb
                .build_query_as()
                .persistent(false)
                .fetch_all(pool)
                .await
                .map_err(store_error)?;
            let group = if fps.is_empty() {
                Vec::new()
            } else {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "SELECT fingerprint AS key, label FROM group_labels WHERE fingerprint IN ",
                );
                push_text_list(&mut qb, fps);
                qb.push(" ORDER BY fingerprint, label");
                qb.build_query_as()
                    .persistent(false)
                    .fetch_all(pool)
                    .await
                    .map_err(store_error)?
            };
            Ok::<_, StoreError>((own, group))
        })?;
        let mut by_id: HashMap<i64, Vec<String>> = HashMap::new();
        for r in own {
            if let Ok(id) = r.key.parse::<i64>() {
                by_id.entry(id).or_default().push(r.label);
            }
        }
        let mut by_fp: HashMap<String, Vec<String>> = HashMap::new();
        for r in group {
            by_fp.entry(r.key).or_default().push(r.label);
        }
        Ok((by_id, by_fp))
    }

    /// The notes of dead letters `ids` and of groups `fps` (for the export).
    pub(crate) async fn notes_of(
        &self,
        ids: &[i64],
        fps: &[String],
    ) -> Result<(HashMap<i64, String>, HashMap<String, String>), StoreError> {
        let ids_text = ids_json(ids);
        let (own, group): (Vec<KeyedText>, Vec<KeyedText>) = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT CAST(dead_letter_id AS TEXT), note FROM dead_letter_notes \
                     WHERE dead_letter_id IN ",
            );
            DB::push_json_ids(&mut qb, ids_text.clone());
            let own = qb
                .build_query_as()
                .persistent(false)
                .fetch_all(pool)
                .await
                .map_err(store_error)?;
            let group = if fps.is_empty() {
                Vec::new()
            } else {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "SELECT fingerprint, note FROM group_notes WHERE fingerprint IN ",
                );
                push_text_list(&mut qb, fps);
                qb.build_query_as()
                    .persistent(false)
                    .fetch_all(pool)
                    .await
                    .map_err(store_error)?
            };
            Ok::<_, StoreError>((own, group))
        })?;
        Ok((
            own.into_iter()
                .filter_map(|(k, v)| k.parse::<i64>().ok().map(|id| (id, v)))
                .collect(),
            group.into_iter().collect(),
        ))
    }

    /// Fills `labels` (sorted) and `note` of error groups: one statement, keyed by a JSON
    /// array of the fingerprints so its text is the same for every page (kept prepared).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub(crate) async fn attach_group_triage(
        &self,
        groups: &mut [ErrorGroup],
    ) -> Result<(), StoreError> {
        if groups.is_empty() {
            return Ok(());
        }
        let fps: Vec<&str> = groups.iter().map(|g| g.fingerprint.as_str()).collect();
        let json = serde_json::to_string(&fps).map_err(|e| StoreError::Invalid(e.to_string()))?;
        // kind 0: a label, kind 1: the note.
        let rows: Vec<(String, i32, String)> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT fingerprint, CAST(0 AS INTEGER), label FROM group_labels \
                 WHERE fingerprint IN ",
            );
            push_json_texts::<DB>(&mut qb, json.clone());
            qb.push(
                " UNION ALL SELECT fingerprint, CAST(1 AS INTEGER), note FROM group_notes \
                 WHERE fingerprint IN ",
            );
            push_json_texts::<DB>(&mut qb, json);
            qb.push(" ORDER BY 1, 2, 3");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let mut labels: HashMap<String, Vec<String>> = HashMap::new();
        let mut notes: HashMap<String, String> = HashMap::new();
        for (fp, kind, text) in rows {
            if kind == 0 {
                labels.entry(fp).or_default().push(text);
            } else {
                notes.insert(fp, text);
            }
        }
        for g in groups.iter_mut() {
            g.labels = labels.remove(&g.fingerprint).unwrap_or_default();
            g.note = notes.remove(&g.fingerprint);
        }
        Ok(())
    }
}
