//! The store's half of a rule set's dry run (`crate::automation::dry_run`,
//! `docs/automation.md`, "Dry run"): reads the live dead letters (every status but
//! `deleted`), newest id first, in chunks of [`DRY_RUN_CHUNK`], at most
//! [`MAX_DRY_RUN_ROWS`], and counts where the rule set would put each. Read-only: nothing is
//! written, and each chunk is its own short read (no long transaction holds the database).

use std::collections::{BTreeMap, BTreeSet};

use sqlx::QueryBuilder;

use super::codec::decode_headers;
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::automation::dry_run::{DryRun, DryRunTally, MAX_DRY_RUN_ROWS};
use crate::automation::{MatchInput, RuleSet, Tier};
use crate::model::Convention;

/// Dead letters read per query.
pub const DRY_RUN_CHUNK: i64 = 2_000;

/// (dead letter id, label).
type OwnLabel = (i64, String);
/// (fingerprint, label).
type GroupLabel = (String, String);

#[derive(Debug, sqlx::FromRow)]
struct DryRow {
    id: i64,
    dlq_topic: String,
    source_topic: Option<String>,
    consumer_group: Option<String>,
    error_class: Option<String>,
    error_message: Option<String>,
    fingerprint: String,
    convention: String,
    headers: String,
    /// The `stack_trace` column, which the headers may refer to (`codec::decode_headers`).
    stack_trace: Option<String>,
    dead_lettered_at_ms: i64,
    tier: Option<String>,
}

impl Store {
    /// What `set` would do to the newest live dead letters (at most `max_rows`, capped at
    /// [`MAX_DRY_RUN_ROWS`]), ages measured at `now_ms` (epoch ms). Labels (a record's own and
    /// its error group's) are read only when a rule matches on labels. A record whose stored
    /// headers cannot be decoded is matched without headers.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn dry_run_rule_set(
        &self,
        set: &RuleSet,
        now_ms: i64,
        max_rows: u64,
    ) -> Result<DryRun, StoreError> {
        let max_rows = max_rows.min(MAX_DRY_RUN_ROWS);
        let wants_labels = set.spec.rules.iter().any(|r| !r.matches.labels.is_empty());
        let total: i64 = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT CAST(COUNT(*) AS BIGINT) FROM dead_letters WHERE status <> 'deleted'",
            );
            qb.build_query_scalar::<i64>()
                .fetch_one(pool)
                .await
                .map_err(store_error)
        })?;
        let mut tally = DryRunTally::new(set);
        let mut before: Option<i64> = None;
        let mut read: u64 = 0;
        while read < max_rows {
            let limit = DRY_RUN_CHUNK.min((max_rows - read) as i64);
            let rows: Vec<DryRow> = on_pool!(self, |pool, DB| {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "SELECT id, dlq_topic, source_topic, consumer_group, error_class, \
                     error_message, fingerprint, convention, headers, stack_trace, dead_lettered_at_ms, \
                     tier FROM dead_letters WHERE status <> 'deleted'",
                );
                if let Some(b) = before {
                    qb.push(" AND id < ");
                    DB::bind(&mut qb, Val::I64(Some(b)));
                }
                qb.push(" ORDER BY id DESC LIMIT ");
                DB::bind(&mut qb, Val::I64(Some(limit)));
                qb.build_query_as::<DryRow>()
                    .fetch_all(pool)
                    .await
                    .map_err(store_error)
            })?;
            let Some(last) = rows.last() else { break };
            before = Some(last.id);
            read += rows.len() as u64;
            let labels = if wants_labels {
                self.dry_run_labels(&rows).await?
            } else {
                BTreeMap::new()
            };
            let none: Vec<String> = Vec::new();
            for r in &rows {
                let headers =
                    decode_headers(&r.headers, r.stack_trace.as_deref()).unwrap_or_default();
                let input = MatchInput {
                    dlq_topic: &r.dlq_topic,
                    source_topic: r.source_topic.as_deref(),
                    consumer_group: r.consumer_group.as_deref(),
                    error_class: r.error_class.as_deref(),
                    error_message: r.error_message.as_deref(),
                    fingerprint: &r.fingerprint,
                    convention: Convention::parse(&r.convention),
                    headers: &headers,
                    labels: labels.get(&r.id).unwrap_or(&none),
                    age_ms: now_ms.saturating_sub(r.dead_lettered_at_ms),
                };
                tally.add(&set.assign(&input), r.tier.as_deref().and_then(Tier::parse));
            }
            if (rows.len() as i64) < limit {
                break;
            }
        }
        Ok(tally.finish(total.max(0) as u64))
    }

    /// Each row's labels: its own and its error group's, sorted, without repeats.
    async fn dry_run_labels(
        &self,
        rows: &[DryRow],
    ) -> Result<BTreeMap<i64, Vec<String>>, StoreError> {
        let ids = super::actions::ids_json(&rows.iter().map(|r| r.id).collect::<Vec<_>>());
        let fingerprints: BTreeSet<&str> = rows.iter().map(|r| r.fingerprint.as_str()).collect();
        let fps_json = serde_json::to_string(&fingerprints).unwrap_or_else(|_| "[]".into());
        let (own, group): (Vec<OwnLabel>, Vec<GroupLabel>) = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT dead_letter_id, label FROM dead_letter_labels WHERE dead_letter_id IN ",
            );
            DB::push_json_ids(&mut qb, ids);
            let own = qb
                .build_query_as::<(i64, String)>()
                .fetch_all(pool)
                .await
                .map_err(store_error)?;
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT fingerprint, label FROM group_labels WHERE fingerprint IN ",
            );
            push_json_texts::<DB>(&mut qb, fps_json);
            let group = qb
                .build_query_as::<(String, String)>()
                .fetch_all(pool)
                .await
                .map_err(store_error)?;
            Ok::<_, StoreError>((own, group))
        })?;
        let mut by_fp: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (fp, l) in &group {
            by_fp.entry(fp.as_str()).or_default().push(l.as_str());
        }
        let mut out: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
        for (id, l) in own {
            out.entry(id).or_default().insert(l);
        }
        for r in rows {
            if let Some(ls) = by_fp.get(r.fingerprint.as_str()) {
                let e = out.entry(r.id).or_default();
                e.extend(ls.iter().map(|l| l.to_string()));
            }
        }
        Ok(out
            .into_iter()
            .map(|(id, s)| (id, s.into_iter().collect()))
            .collect())
    }
}

/// Appends a parenthesised subquery yielding the strings of the JSON array `json`.
fn push_json_texts<DB: Dialect>(qb: &mut QueryBuilder<'_, DB>, json: String) {
    if <DB as Dialect>::NAME == "sqlite" {
        qb.push("(SELECT value FROM json_each(");
        DB::bind(qb, Val::OwnedText(Some(json)));
        qb.push("))");
    } else {
        qb.push("(SELECT jsonb_array_elements_text(CAST(");
        DB::bind(qb, Val::OwnedText(Some(json)));
        qb.push(" AS jsonb)))");
    }
}
