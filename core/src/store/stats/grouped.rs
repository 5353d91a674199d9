//! SQLite's aggregates kept per statement (migration 0037, `docs/stats.md`, "Per statement on
//! SQLite").
//!
//! SQLite runs a trigger once per row: ingest's insert ran seven aggregate upserts per dead
//! letter (migrations 0006, 0010, 0027, 0036) and a status change six more statements per row.
//! The writes that change thousands of rows at a time — ingest's batch insert
//! (`insert.rs`), a bulk replay's chunk (`replay_pending`, `bulk/chunk.rs`) and the relay's
//! mark (`replayed`, `outbox_mark.rs`) — instead apply the same changes themselves, grouped:
//! one statement per aggregate for all the rows of the statement, each the trigger's own
//! statement with `COUNT(*)` in place of 1. Around their statement they turn the table
//! `stats_switch` on and off again ([`switch!`]), inside their write transaction, and the
//! triggers skip rows written while it is on; SQLite has one writer at a time, so no other
//! write runs meanwhile, and every other write is still counted by the triggers, row by row.
//! PostgreSQL's triggers already run once per statement over its transition tables; nothing
//! here runs there ([`Dialect::ROW_TRIGGERS`]).
//!
//! The statements read the rows they count by id (`ids`: a JSON array), so they run after the
//! insert, and before or after a status change as long as `old` and `new` give the status
//! before and after it at that moment. Each mirrors its trigger exactly, ties included: the
//! test `stats::grouped::tests` writes the same dead letters through both ways and compares
//! every aggregate table row for row.

use sqlx::QueryBuilder;

use crate::store::dialect::Dialect;
use crate::store::Store;

impl Store {
    /// Whether redrive's bulk writes on this store keep the aggregates themselves: SQLite,
    /// unless [`Store::with_aggregates_by_trigger`].
    pub(crate) fn stats_per_statement<DB: Dialect>(&self) -> bool {
        DB::ROW_TRIGGERS && !self.stats_by_trigger
    }

    /// This store with every aggregate left to SQLite's per-row triggers, as before migration
    /// 0037: what tests compare the grouped statements with. No effect on PostgreSQL.
    #[doc(hidden)]
    pub fn with_aggregates_by_trigger(mut self) -> Store {
        self.stats_by_trigger = true;
        self
    }
}

/// Runs `UPDATE stats_switch SET grouped = 1` (`$on` true: the aggregates' triggers skip the
/// rows written until it is turned off) or `= 0` in `$tx`; a database error returns
/// `Err(StoreError)` from the enclosing function. Turn it on just before the statement whose
/// rows [`count_inserted`] or [`move_status`] count, and off just after it, in the same
/// transaction.
macro_rules! switch {
    ($tx:expr, $on:expr) => {{
        sqlx::query(if $on {
            "UPDATE stats_switch SET grouped = 1"
        } else {
            "UPDATE stats_switch SET grouped = 0"
        })
        .execute(&mut *$tx)
        .await
        .map_err($crate::store::dialect::store_error)?;
    }};
}
pub(crate) use switch;

/// The keys of `dl_stats_groups` (without `status`), as the triggers write them.
/// Named `k1`..`k5` for the `UPDATE ... FROM` that subtracts (SQLite names no columns of a
/// subquery from outside it).
const GROUP_KEYS: &str = "fingerprint AS k1, dlq_topic AS k2, COALESCE(source_topic, '') AS k3, \
                          COALESCE(consumer_group, '') AS k4, COALESCE(error_class, '') AS k5";

/// One statement: `head`, the ids' row source, then `tail`.
fn over_ids<'a, DB: Dialect>(head: &str, ids: &str, tail: &str) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(head);
    DB::push_json_ids(&mut qb, ids.to_owned());
    qb.push(tail);
    qb
}

/// The seven statements that count the dead letters `ids` (a JSON array), just inserted with
/// the switch on, as the insert triggers `dl_stats_insert`, `dl_stats_groups_insert` and
/// `dl_stats_group_hours_insert` would have one row at a time. An error group first seen in
/// this batch takes its topics and error class from its earliest row (the lowest id among
/// equal times), as the triggers' strict `<` leaves them.
pub(crate) fn count_inserted<'a, DB: Dialect>(ids: &str) -> Vec<QueryBuilder<'a, DB>> {
    vec![
        over_ids(
            "INSERT INTO dl_stats_counts (dlq_topic, source_topic, status, n, bytes) \
             SELECT dlq_topic, COALESCE(source_topic, ''), status, COUNT(*), \
             SUM(COALESCE(length(key), 0) + COALESCE(length(value), 0)) \
             FROM dead_letters WHERE id IN ",
            ids,
            " GROUP BY 1, 2, 3 ON CONFLICT (dlq_topic, source_topic, status) \
             DO UPDATE SET n = n + excluded.n, bytes = bytes + excluded.bytes",
        ),
        over_ids(
            "INSERT INTO dl_stats_minutes (dlq_topic, source_topic, minute_ms, n, live_n) \
             SELECT dlq_topic, COALESCE(source_topic, ''), (dead_lettered_at_ms / 60000) * 60000, \
             COUNT(*), SUM(CASE WHEN status <> 'deleted' THEN 1 ELSE 0 END) \
             FROM dead_letters WHERE id IN ",
            ids,
            " GROUP BY 1, 2, 3 ON CONFLICT (dlq_topic, source_topic, minute_ms) \
             DO UPDATE SET n = n + excluded.n, live_n = live_n + excluded.live_n",
        ),
        over_ids(
            "INSERT INTO dl_stats_hours (dlq_topic, source_topic, hour_ms, n) \
             SELECT dlq_topic, COALESCE(source_topic, ''), \
             (dead_lettered_at_ms / 3600000) * 3600000, COUNT(*) \
             FROM dead_letters WHERE id IN ",
            ids,
            " GROUP BY 1, 2, 3 ON CONFLICT (dlq_topic, source_topic, hour_ms) \
             DO UPDATE SET n = n + excluded.n",
        ),
        over_ids(
            "INSERT INTO dl_stats_fingerprints \
             (fingerprint, first_seen_ms, last_seen_ms, n, dlq_topic, source_topic, error_class) \
             SELECT fingerprint, first_ms, last_ms, k, dlq_topic, source_topic, error_class \
             FROM (SELECT fingerprint, dlq_topic, COALESCE(source_topic, '') AS source_topic, \
                   error_class, \
                   MIN(dead_lettered_at_ms) OVER w AS first_ms, \
                   MAX(dead_lettered_at_ms) OVER w AS last_ms, COUNT(*) OVER w AS k, \
                   ROW_NUMBER() OVER (PARTITION BY fingerprint \
                                      ORDER BY dead_lettered_at_ms, id) AS place \
                   FROM dead_letters WHERE id IN ",
            ids,
            " WINDOW w AS (PARTITION BY fingerprint)) WHERE place = 1 \
             ON CONFLICT (fingerprint) DO UPDATE SET \
             n = n + excluded.n, \
             dlq_topic = CASE WHEN excluded.first_seen_ms < first_seen_ms \
                         THEN excluded.dlq_topic ELSE dlq_topic END, \
             source_topic = CASE WHEN excluded.first_seen_ms < first_seen_ms \
                            THEN excluded.source_topic ELSE source_topic END, \
             error_class = CASE WHEN excluded.first_seen_ms < first_seen_ms \
                           THEN excluded.error_class ELSE error_class END, \
             first_seen_ms = min(first_seen_ms, excluded.first_seen_ms), \
             last_seen_ms = max(last_seen_ms, excluded.last_seen_ms)",
        ),
        over_ids(
            "INSERT INTO dl_stats_fingerprint_hours (fingerprint, hour_ms, n) \
             SELECT fingerprint, (dead_lettered_at_ms / 3600000) * 3600000, COUNT(*) \
             FROM dead_letters WHERE id IN ",
            ids,
            " GROUP BY 1, 2 ON CONFLICT (fingerprint, hour_ms) DO UPDATE SET n = n + excluded.n",
        ),
        add_groups("status", ids, "TRUE"),
        add_group_hours("status", ids, "TRUE"),
    ]
}

/// The statements that move the dead letters `ids` (a JSON array) whose status goes from the
/// SQL expression `old` to `new` (both over the row's columns as they are when these run),
/// between the aggregates, as the update triggers `dl_stats_update`,
/// `dl_stats_live_minutes_update`, `dl_stats_groups_update` and `dl_stats_group_hours_update`
/// would one row at a time: a row whose status does not change is not counted, and a live
/// count moves only when the row becomes or stops being `deleted`. The statement that changes
/// the status must run with the switch on, and must change nothing else these aggregates are
/// keyed by (topics, consumer group, error class, fingerprint, tier, time).
pub(crate) fn move_status<'a, DB: Dialect>(
    ids: &str,
    old: &str,
    new: &str,
) -> Vec<QueryBuilder<'a, DB>> {
    let changes = format!("{old} IS NOT {new}");
    let live_changes = format!("({old} = 'deleted') IS NOT ({new} = 'deleted')");
    vec![
        over_ids(
            &format!(
                "UPDATE dl_stats_counts SET n = n - d.dn, bytes = bytes - d.dbytes \
                 FROM (SELECT dlq_topic AS k1, COALESCE(source_topic, '') AS k2, {old} AS k3, \
                       COUNT(*) AS dn, \
                       SUM(COALESCE(length(key), 0) + COALESCE(length(value), 0)) AS dbytes \
                       FROM dead_letters WHERE {changes} AND id IN "
            ),
            ids,
            " GROUP BY 1, 2, 3) AS d \
             WHERE dlq_topic = d.k1 AND source_topic = d.k2 AND status = d.k3",
        ),
        over_ids(
            &format!(
                "INSERT INTO dl_stats_counts (dlq_topic, source_topic, status, n, bytes) \
                 SELECT dlq_topic, COALESCE(source_topic, ''), {new}, COUNT(*), \
                 SUM(COALESCE(length(key), 0) + COALESCE(length(value), 0)) \
                 FROM dead_letters WHERE {changes} AND id IN "
            ),
            ids,
            " GROUP BY 1, 2, 3 ON CONFLICT (dlq_topic, source_topic, status) \
             DO UPDATE SET n = n + excluded.n, bytes = bytes + excluded.bytes",
        ),
        over_ids(
            &format!(
                "UPDATE dl_stats_minutes SET live_n = live_n - d.dn \
                 FROM (SELECT dlq_topic AS k1, COALESCE(source_topic, '') AS k2, \
                       (dead_lettered_at_ms / 60000) * 60000 AS k3, COUNT(*) AS dn \
                       FROM dead_letters \
                       WHERE {live_changes} AND {old} <> 'deleted' AND id IN "
            ),
            ids,
            " GROUP BY 1, 2, 3) AS d \
             WHERE dlq_topic = d.k1 AND source_topic = d.k2 AND minute_ms = d.k3",
        ),
        over_ids(
            &format!(
                "INSERT INTO dl_stats_minutes (dlq_topic, source_topic, minute_ms, n, live_n) \
                 SELECT dlq_topic, COALESCE(source_topic, ''), \
                 (dead_lettered_at_ms / 60000) * 60000, 0, COUNT(*) \
                 FROM dead_letters \
                 WHERE {live_changes} AND {new} <> 'deleted' AND id IN "
            ),
            ids,
            " GROUP BY 1, 2, 3 ON CONFLICT (dlq_topic, source_topic, minute_ms) \
             DO UPDATE SET live_n = live_n + excluded.live_n",
        ),
        over_ids(
            &format!(
                "UPDATE dl_stats_groups SET n = n - d.dn \
                 FROM (SELECT {GROUP_KEYS}, {old} AS k6, COALESCE(tier, '') AS k7, COUNT(*) AS dn \
                       FROM dead_letters WHERE {changes} AND id IN "
            ),
            ids,
            " GROUP BY 1, 2, 3, 4, 5, 6, 7) AS d \
             WHERE fingerprint = d.k1 AND dlq_topic = d.k2 AND source_topic = d.k3 \
             AND consumer_group = d.k4 AND error_class = d.k5 AND status = d.k6 \
             AND tier = d.k7",
        ),
        add_groups(new, ids, &changes),
        over_ids(
            &format!(
                "UPDATE dl_stats_group_hours SET n = n - d.dn \
                 FROM (SELECT (dead_lettered_at_ms / 3600000) * 3600000 AS k0, {GROUP_KEYS}, \
                       {old} AS k6, COALESCE(tier, '') AS k7, COUNT(*) AS dn \
                       FROM dead_letters WHERE {changes} AND id IN "
            ),
            ids,
            " GROUP BY 1, 2, 3, 4, 5, 6, 7, 8) AS d \
             WHERE hour_ms = d.k0 AND fingerprint = d.k1 AND dlq_topic = d.k2 \
             AND source_topic = d.k3 AND consumer_group = d.k4 AND error_class = d.k5 \
             AND status = d.k6 AND tier = d.k7",
        ),
        add_group_hours(new, ids, &changes),
    ]
}

/// `dl_stats_groups` += the rows `ids` matching `cond`, with status `status`.
fn add_groups<'a, DB: Dialect>(status: &str, ids: &str, cond: &str) -> QueryBuilder<'a, DB> {
    over_ids(
        &format!(
            "INSERT INTO dl_stats_groups (fingerprint, dlq_topic, source_topic, \
             consumer_group, error_class, status, tier, n, last_seen_ms) \
             SELECT {GROUP_KEYS}, {status}, COALESCE(tier, ''), COUNT(*), \
             MAX(dead_lettered_at_ms) FROM dead_letters WHERE {cond} AND id IN "
        ),
        ids,
        " GROUP BY 1, 2, 3, 4, 5, 6, 7 ON CONFLICT (fingerprint, dlq_topic, source_topic, \
         consumer_group, error_class, status, tier) DO UPDATE SET n = n + excluded.n, \
         last_seen_ms = max(last_seen_ms, excluded.last_seen_ms)",
    )
}

/// `dl_stats_group_hours` += the rows `ids` matching `cond`, with status `status`.
fn add_group_hours<'a, DB: Dialect>(status: &str, ids: &str, cond: &str) -> QueryBuilder<'a, DB> {
    over_ids(
        &format!(
            "INSERT INTO dl_stats_group_hours (hour_ms, fingerprint, dlq_topic, source_topic, \
             consumer_group, error_class, status, tier, n) \
             SELECT (dead_lettered_at_ms / 3600000) * 3600000, {GROUP_KEYS}, {status}, \
             COALESCE(tier, ''), COUNT(*) FROM dead_letters WHERE {cond} AND id IN "
        ),
        ids,
        " GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ON CONFLICT (hour_ms, fingerprint, dlq_topic, \
         source_topic, consumer_group, error_class, status, tier) \
         DO UPDATE SET n = n + excluded.n",
    )
}

/// Runs the statements of [`count_inserted`] or [`move_status`] in `$tx`; a database error
/// returns `Err(StoreError)` from the enclosing function.
macro_rules! run_grouped {
    ($tx:expr, $statements:expr) => {{
        for mut qb in $statements {
            qb.build()
                .execute(&mut *$tx)
                .await
                .map_err($crate::store::dialect::store_error)?;
        }
    }};
}
pub(crate) use run_grouped;

#[cfg(test)]
mod tests {
    use crate::actions::{Actor, ReplayOptions, ReplayRequest, Selection};
    use crate::model::{Convention, NewDeadLetter, Normalized, RawRecord};
    use crate::store::{MarkBatch, Pool, Published, Store};
    use crate::Filter;

    const HOUR_MS: i64 = 3_600_000;
    /// Every aggregate table, whole, in one order.
    const TABLES: [&str; 7] = [
        "SELECT dlq_topic, source_topic, status, n, bytes FROM dl_stats_counts ORDER BY 1, 2, 3",
        "SELECT dlq_topic, source_topic, minute_ms, n, live_n FROM dl_stats_minutes \
         ORDER BY 1, 2, 3",
        "SELECT dlq_topic, source_topic, hour_ms, n FROM dl_stats_hours ORDER BY 1, 2, 3",
        "SELECT fingerprint, first_seen_ms, last_seen_ms, n, dlq_topic, source_topic, \
         COALESCE(error_class, '<null>') FROM dl_stats_fingerprints ORDER BY 1",
        "SELECT fingerprint, hour_ms, n FROM dl_stats_fingerprint_hours ORDER BY 1, 2",
        "SELECT fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier, \
         n, last_seen_ms FROM dl_stats_groups ORDER BY 1, 2, 3, 4, 5, 6, 7",
        "SELECT hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class, \
         status, tier, n FROM dl_stats_group_hours ORDER BY 1, 2, 3, 4, 5, 6, 7, 8",
    ];

    /// A dead letter of `fingerprint` at `at_ms`, varied by `i`: two DLQ topics, a source
    /// topic or none, an error class or none, two consumer groups, a key of `i % 5` bytes or
    /// none, a value of up to 100 bytes.
    fn row(offset: i64, fingerprint: &str, at_ms: i64, i: i64) -> NewDeadLetter {
        NewDeadLetter {
            record: RawRecord {
                dlq_topic: if i % 3 == 0 { "b.DLT" } else { "a.DLT" }.into(),
                dlq_partition: 0,
                dlq_offset: offset,
                timestamp_ms: Some(at_ms),
                key: (i % 5 != 0).then(|| vec![b'k'; (i % 5) as usize]),
                value: Some(vec![b'v'; (i % 101) as usize]),
                headers: vec![],
            },
            convention: Convention::Unknown,
            fingerprint: fingerprint.into(),
            normalized: Normalized {
                source_topic: (i % 4 != 0).then(|| format!("src-{}", i % 2)),
                consumer_group: Some(format!("cg-{}", i % 2)),
                error_class: (i % 7 != 0).then(|| format!("E{}", i % 3)),
                ..Normalized::default()
            },
            dead_lettered_at_ms: at_ms,
            ingested_at_ms: at_ms,
        }
    }

    /// 1,300 dead letters over three hours in four error groups, times repeating so that an
    /// error group's first time is shared by rows of different topics and classes.
    fn first_batch(base: i64) -> Vec<NewDeadLetter> {
        (0..1_300)
            .map(|i| row(i, &format!("f{}", i % 4), base + (i / 7) * 60_000, i))
            .collect()
    }

    /// Every row of every aggregate table, as text cells.
    type Tables = Vec<Vec<String>>;

    async fn aggregates(store: &Store) -> Tables {
        let Pool::Sqlite(pool) = &store.pool else {
            unreachable!("SQLite only")
        };
        let mut out = Vec::new();
        for sql in TABLES {
            let rows: Vec<sqlx::sqlite::SqliteRow> =
                sqlx::query(sql).fetch_all(pool).await.unwrap();
            for r in rows {
                use sqlx::Row;
                let cells: Vec<String> = (0..r.len())
                    .map(|i| {
                        r.try_get::<i64, _>(i)
                            .map(|v| v.to_string())
                            .or_else(|_| r.try_get::<String, _>(i))
                            .unwrap()
                    })
                    .collect();
                out.push(cells);
            }
            out.push(vec![format!("-- end of {sql}")]);
        }
        out
    }

    /// The same writes on two stores, one keeping the aggregates per statement and one by
    /// the per-row triggers: ingest (a redelivered offset, ties on first-seen times, an
    /// error group seen earlier later on), a replay over a filter in several chunks, marks
    /// (published, and a failure: triggers), deletes and restores (triggers). After each, the
    /// seven aggregate tables are equal row for row.
    #[tokio::test]
    async fn grouped_statements_leave_the_aggregates_the_triggers_leave() {
        let base = 1_796_104_800_000 - 3 * HOUR_MS;
        let mut stores = Vec::new();
        for by_trigger in [false, true] {
            let s = Store::connect("sqlite::memory:").await.unwrap();
            s.migrate().await.unwrap();
            stores.push(if by_trigger {
                s.with_aggregates_by_trigger()
            } else {
                s
            });
        }
        let actor = Actor::operator("eve");
        let mut steps: Vec<Vec<(&str, Tables)>> = Vec::new();
        for store in &stores {
            let mut seen = Vec::new();
            let batch = first_batch(base);
            assert_eq!(store.insert_batch(&batch[..800]).await.unwrap(), 800);
            // 700..800 again: redelivered, skipped.
            assert_eq!(store.insert_batch(&batch[700..]).await.unwrap(), 500);
            seen.push(("ingest", aggregates(store).await));
            // Group f1 again, earlier than its first time, from the other topic; f9 new,
            // its first time shared by two rows.
            let later: Vec<NewDeadLetter> = (0..40)
                .map(|i| {
                    let fp = if i % 2 == 0 { "f1" } else { "f9" };
                    row(5_000 + i, fp, base - HOUR_MS + (i / 4) * 1_000, i + 1)
                })
                .collect();
            assert_eq!(store.insert_batch(&later).await.unwrap(), 40);
            seen.push(("an earlier first time", aggregates(store).await));
            // Some deleted before the replay (triggers), so its filter skips them.
            let deleted = store
                .delete(&actor, &Selection::Ids((1..=60).collect()), None)
                .await
                .unwrap();
            assert_eq!(deleted, 60);
            let job = store
                .request_replay(
                    &actor,
                    &ReplayRequest {
                        selection: Selection::Filter(Filter {
                            dlq_topic: Some("a.DLT".into()),
                            ..Filter::default()
                        }),
                        target_topic: None,
                        rate_per_sec: None,
                        reason: None,
                        options: ReplayOptions::default(),
                    },
                )
                .await
                .unwrap();
            assert!(job.total > 500, "more than one chunk: {}", job.total);
            seen.push(("replay request", aggregates(store).await));
            let claim = store.claim(&job.id, 600, 60_000, None, true).await.unwrap();
            let (fail, publish) = claim.rows.split_at(3);
            store
                .mark(&MarkBatch {
                    job_id: job.id.clone(),
                    claim_token: claim.token.clone(),
                    actor: "eve".into(),
                    published: publish
                        .iter()
                        .map(|r| Published {
                            outbox_id: r.outbox_id,
                            partition: 0,
                            offset: r.outbox_id,
                        })
                        .collect(),
                    failed: fail
                        .iter()
                        .map(|r| crate::store::Failed {
                            outbox_id: r.outbox_id,
                            dead_letter_id: r.dead_letter_id,
                            error: "refused".into(),
                        })
                        .collect(),
                    ..MarkBatch::default()
                })
                .await
                .unwrap();
            seen.push(("marks", aggregates(store).await));
            store
                .restore(&actor, &Selection::Ids((1..=30).collect()), None)
                .await
                .unwrap();
            seen.push(("restore", aggregates(store).await));
            steps.push(seen);
        }
        let by_trigger = steps.pop().unwrap();
        let grouped = steps.pop().unwrap();
        for ((step, got), (_, want)) in grouped.iter().zip(&by_trigger) {
            assert!(got.len() > 20, "{step}: aggregates written");
            assert_eq!(got, want, "after {step}");
        }
    }
}
