//! Dead letters as the tier rules read them (`docs/automation.md`, "Sorting" and "Dry run"):
//! the row's matching fields, its labels (own and its error group's) and what its earlier
//! self left (came back after a replay: automatic attempts, loop guard). One reader for the
//! sorter ([`Store::sort_unsorted`]) and a rule set's dry run ([`Store::dry_run_rule_set`]).

use std::collections::HashMap;

use sqlx::QueryBuilder;

use super::actions::ids_json;
use super::codec::decode_headers;
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::automation::{MatchInput, Tier};
use crate::model::{Convention, Header};

/// Which dead letters [`Store::tier_candidates`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CandidateScan {
    /// Only those not sorted yet (`dead_letters.tier` NULL).
    pub unsorted_only: bool,
    /// Skip `deleted` ones.
    pub live_only: bool,
    /// Newest id first (ids below `from_id`) instead of oldest first (ids above it).
    pub newest_first: bool,
    /// Keyset position: the last id of the previous page (`None`: from the start).
    pub from_id: Option<i64>,
    /// Most rows (1..=5,000).
    pub limit: u32,
    /// Read each row's labels (two more queries per page).
    pub with_labels: bool,
}

impl CandidateScan {
    /// The sorter's page: unsorted, oldest first, with labels.
    pub fn unsorted(limit: u32) -> Self {
        CandidateScan {
            unsorted_only: true,
            live_only: false,
            newest_first: false,
            from_id: None,
            limit,
            with_labels: true,
        }
    }
}

/// One dead letter as a rule reads it, plus what its earlier self (if it came back after a
/// replay) left for the loop guard and escalation.
#[derive(Debug, Clone)]
pub struct TierCandidate {
    pub id: i64,
    pub dlq_topic: String,
    pub source_topic: Option<String>,
    pub consumer_group: Option<String>,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    pub fingerprint: String,
    pub convention: Convention,
    /// Raw headers (empty when the stored list cannot be read).
    pub headers: Vec<Header>,
    /// Own labels and its error group's, sorted, deduplicated.
    pub labels: Vec<String>,
    /// Epoch ms.
    pub dead_lettered_at_ms: i64,
    /// Its current tier (`None`: unsorted).
    pub tier: Option<Tier>,
    /// How many times it has come back after replays (0: it did not come from a replay).
    pub repeat_failures: i32,
    /// Its earlier self's automatic attempts (0 when none or not linked).
    pub earlier_auto_attempts: i32,
    /// Whether its earlier self was loop-guarded.
    pub earlier_loop_guarded: bool,
}

impl TierCandidate {
    /// The rule-matching view of it at `now_ms`.
    pub fn input(&self, now_ms: i64) -> MatchInput<'_> {
        MatchInput {
            dlq_topic: &self.dlq_topic,
            source_topic: self.source_topic.as_deref(),
            consumer_group: self.consumer_group.as_deref(),
            error_class: self.error_class.as_deref(),
            error_message: self.error_message.as_deref(),
            fingerprint: &self.fingerprint,
            convention: self.convention,
            headers: &self.headers,
            labels: &self.labels,
            age_ms: now_ms.saturating_sub(self.dead_lettered_at_ms),
        }
    }
}

#[derive(Debug, sqlx::FromRow)]
struct CandidateRow {
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
    repeat_failures: Option<i32>,
    earlier_auto_attempts: Option<i32>,
    earlier_loop_guarded: Option<i32>,
}

const CANDIDATE_SELECT: &str = "SELECT d.id, d.dlq_topic, d.source_topic, d.consumer_group, \
     d.error_class, d.error_message, d.fingerprint, d.convention, d.headers, d.stack_trace, \
     d.dead_lettered_at_ms, d.tier, l.repeat_failures, \
     e.auto_attempts AS earlier_auto_attempts, e.loop_guarded AS earlier_loop_guarded \
     FROM dead_letters d ";

const CANDIDATE_JOINS: &str = "LEFT JOIN dead_letter_links l ON l.dead_letter_id = d.id \
     LEFT JOIN dead_letter_tiers e ON e.dead_letter_id = l.earlier_id ";

/// The candidate page's statement, after `prefix` (`""`, or `EXPLAIN ...` in tests).
fn candidate_query<'a, DB: Dialect>(
    prefix: &str,
    scan: &CandidateScan,
    limit: i64,
) -> QueryBuilder<'a, DB> {
    let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!("{prefix}{CANDIDATE_SELECT}"));
    if scan.unsorted_only && DB::INDEXED_BY {
        // The unsorted ones from the partial index (migration 0022), not a rowid scan past
        // every sorted row (measured: 250 ms a page at 1M rows with the first 2.5 % sorted).
        qb.push("INDEXED BY dead_letters_unsorted ");
    }
    qb.push(CANDIDATE_JOINS);
    qb.push("WHERE 1 = 1");
    if scan.unsorted_only {
        qb.push(" AND d.tier IS NULL");
    }
    if scan.live_only {
        qb.push(" AND d.status <> 'deleted'");
    }
    if let Some(from) = scan.from_id {
        qb.push(if scan.newest_first {
            " AND d.id < "
        } else {
            " AND d.id > "
        });
        DB::bind(&mut qb, Val::I64(Some(from)));
    }
    qb.push(if scan.newest_first {
        " ORDER BY d.id DESC LIMIT "
    } else {
        " ORDER BY d.id LIMIT "
    });
    DB::bind(&mut qb, Val::I64(Some(limit)));
    qb
}

impl Store {
    /// Dead letters as rules read them, as `scan` says: at most `scan.limit` (≤ 5,000),
    /// from after (oldest first) or before (newest first) `scan.from_id`, their labels read
    /// only when `scan.with_labels`. Used by the sorter (unsorted, oldest first) and by a
    /// rule set's dry run (live, newest first).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn tier_candidates(
        &self,
        scan: &CandidateScan,
    ) -> Result<Vec<TierCandidate>, StoreError> {
        let limit = i64::from(scan.limit.clamp(1, 5_000));
        let rows: Vec<CandidateRow> = on_pool!(self, |pool, DB| {
            let mut qb = candidate_query::<DB>("", scan, limit);
            qb.build_query_as::<CandidateRow>()
                .fetch_all(pool)
                .await
                .map_err(store_error)
        })?;
        let labels = if scan.with_labels {
            self.labels_for_candidates(&rows).await?
        } else {
            Default::default()
        };
        Ok(rows
            .into_iter()
            .map(|r| {
                let mut l: Vec<String> = labels
                    .0
                    .get(&r.id)
                    .into_iter()
                    .chain(labels.1.get(&r.fingerprint))
                    .flatten()
                    .cloned()
                    .collect();
                l.sort();
                l.dedup();
                TierCandidate {
                    id: r.id,
                    headers: decode_headers(&r.headers, r.stack_trace.as_deref())
                        .unwrap_or_default(),
                    labels: l,
                    dlq_topic: r.dlq_topic,
                    source_topic: r.source_topic,
                    consumer_group: r.consumer_group,
                    error_class: r.error_class,
                    error_message: r.error_message,
                    convention: Convention::parse(&r.convention),
                    fingerprint: r.fingerprint,
                    dead_lettered_at_ms: r.dead_lettered_at_ms,
                    tier: r.tier.as_deref().and_then(Tier::parse),
                    repeat_failures: r.repeat_failures.unwrap_or(0),
                    earlier_auto_attempts: r.earlier_auto_attempts.unwrap_or(0),
                    earlier_loop_guarded: r.earlier_loop_guarded.unwrap_or(0) != 0,
                }
            })
            .collect())
    }

    /// Own labels by dead-letter id and group labels by fingerprint, for a batch.
    #[allow(clippy::type_complexity)]
    async fn labels_for_candidates(
        &self,
        rows: &[CandidateRow],
    ) -> Result<(HashMap<i64, Vec<String>>, HashMap<String, Vec<String>>), StoreError> {
        if rows.is_empty() {
            return Ok(Default::default());
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let mut fps: Vec<&str> = rows.iter().map(|r| r.fingerprint.as_str()).collect();
        fps.sort_unstable();
        fps.dedup();
        let fps_json = serde_json::to_string(&fps).unwrap_or_else(|_| "[]".into());
        let (own, group): (Vec<(i64, String)>, Vec<(String, String)>) =
            on_pool!(self, |pool, DB| {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "SELECT dead_letter_id, label FROM dead_letter_labels WHERE dead_letter_id IN ",
                );
                DB::push_json_ids(&mut qb, ids_json(&ids));
                let own = qb
                    .build_query_as::<(i64, String)>()
                    .fetch_all(pool)
                    .await
                    .map_err(store_error)?;
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "SELECT fingerprint, label FROM group_labels WHERE fingerprint IN ",
                );
                super::stats::push_json_texts(&mut qb, fps_json);
                let group = qb
                    .build_query_as::<(String, String)>()
                    .fetch_all(pool)
                    .await
                    .map_err(store_error)?;
                Ok::<_, StoreError>((own, group))
            })?;
        let mut a: HashMap<i64, Vec<String>> = HashMap::new();
        for (id, l) in own {
            a.entry(id).or_default().push(l);
        }
        let mut b: HashMap<String, Vec<String>> = HashMap::new();
        for (f, l) in group {
            b.entry(f).or_default().push(l);
        }
        Ok((a, b))
    }
}

#[cfg(test)]
mod tests {
    use sqlx::Row;

    use super::*;

    /// SQLite reads the sorter's page from the partial index of unsorted dead letters: its
    /// planner, left alone, scans the table in id order past every sorted row (on a 1M-row
    /// store with its statistics, `SCAN d`), so each round got slower as sorting went on.
    #[tokio::test]
    async fn sqlite_reads_the_unsorted_from_their_index() {
        let (store, _dir) = super::super::test_file::sqlite_store("plan.db").await;
        let pool = super::super::test_file::sqlite_pool(&store);
        // The statistics of a store where every row is in the partial index (as after a
        // backlog's ingest), under which the planner chose the rowid scan.
        sqlx::query("ANALYZE").execute(pool).await.expect("analyze");
        sqlx::query(
            "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES \
             ('dead_letters', 'dead_letters_unsorted', '1000000 1'), \
             ('dead_letters', NULL, '1000000')",
        )
        .execute(pool)
        .await
        .expect("statistics");
        sqlx::query("ANALYZE sqlite_schema")
            .execute(pool)
            .await
            .expect("load statistics");
        let plan: Vec<String> = candidate_query::<sqlx::Sqlite>(
            "EXPLAIN QUERY PLAN ",
            &CandidateScan::unsorted(500),
            500,
        )
        .build()
        .fetch_all(pool)
        .await
        .expect("plan")
        .iter()
        .map(|r| r.get::<String, _>("detail"))
        .collect();
        assert!(
            plan.iter()
                .any(|l| l.contains("USING INDEX dead_letters_unsorted")),
            "plan: {plan:?}"
        );
    }
}
