//! Per-key order in the outbox (`docs/replay.md`, "Per-key order"; migration 0016).
//!
//! The rows of one job with the same target topic and key form a *key group*
//! (`outbox.order_key`, a 64-bit hash, see [`crate::replay::order::order_key`]), ordered by
//! `outbox.order_pos` (the source offset, see [`crate::replay::order::order_pos`]) and then
//! by outbox id. Only a group's *head* — its earliest row not yet published — has
//! `held = 0`; every later row is `held = 1` and is never claimed (`Store::claim` only takes
//! `held = 0` rows). So at most one row per key is claimed or in flight, and a row is sent
//! only once every earlier row of its key is published:
//!
//! - **Insert** ([`places`], [`hold_later`]): each outbox row is written with its group and
//!   place (read from its dead letter first, so no row is updated after it is written), then
//!   every row of those groups that has an earlier unheld row becomes held (in a bulk replay
//!   a later chunk may hold a record that comes before a group's head from an earlier chunk:
//!   that head is held again).
//! - **Published** ([`release_next`]): the next held row of each published row's group is
//!   released, in the same transaction as the mark.
//! - **Retry, release, lease expiry**: the head stays the head (pending or claimed), so the
//!   rest of its group waits.
//! - **Failed for good** ([`fail_held`]): the held rest of the group fails with it, with a
//!   message naming the record that failed: publishing them would let them overtake it.
//!
//! Every statement is an index range on `outbox_by_order_key (job_id, order_key, held,
//! order_pos, id)` or `outbox_claimable`, never a scan of the job.

use sqlx::QueryBuilder;

use super::actions::ids_json;
use super::dialect::{Column, Dialect, Val};

/// What the store needs of a dead letter to place it in its key group.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(super) struct KeyRow {
    /// The dead letter's id.
    pub(super) id: i64,
    pub(super) source_topic: Option<String>,
    pub(super) source_offset: Option<i64>,
    /// `None` = a null key (no order constraint).
    pub(super) key: Option<Vec<u8>>,
}

/// `SELECT id, source_topic, source_offset, key FROM dead_letters WHERE id IN (ids)`: what
/// [`places`] needs, read in the inserting transaction before the outbox rows are written.
pub(super) fn read_keys<'a, DB: Dialect>(ids: &[i64]) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(
        "SELECT id, source_topic, source_offset, key FROM dead_letters WHERE id IN ",
    );
    DB::push_json_ids(&mut qb, ids_json(ids));
    qb
}

/// The key groups and places of a chunk of dead letters about to be queued by one job:
/// what `insert_outbox` writes with each new row, and which groups [`hold_later`] checks.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Places {
    /// (dead letter id, `order_key`, `order_pos`) of each dead letter with a key and a
    /// topic, ascending by id; the others get neither (no order constraint).
    pub(super) rows: Vec<(i64, i64, i64)>,
    /// The distinct `order_key`s of `rows`, ascending.
    groups: Vec<i64>,
}

/// Each dead letter's key group and place (of `rows`, published to `target`, `None` = each
/// one's source topic; see [`crate::replay::order::order_key`] and
/// [`crate::replay::order::order_pos`]).
pub(super) fn places(target: Option<&str>, rows: &[KeyRow]) -> Places {
    let mut places = Places::default();
    for r in rows {
        let Some(key) = r.key.as_deref() else {
            continue;
        };
        let Some(topic) = target.or(r.source_topic.as_deref()) else {
            continue;
        };
        let group = crate::replay::order::order_key(topic, key);
        let place = crate::replay::order::order_pos(r.source_offset, r.id);
        places.rows.push((r.id, group, place));
        places.groups.push(group);
    }
    places.rows.sort_unstable();
    places.groups.sort_unstable();
    places.groups.dedup();
    places
}

/// After a chunk's outbox rows were written with their [`places`]: every unheld row of those
/// groups with an earlier unheld row becomes held (in a bulk replay a later chunk may hold a
/// record that comes before a group's head from an earlier chunk: that head is held again).
/// `None` when no row has a group.
///
/// The rows just inserted start unheld; so does each group's head from an earlier chunk.
/// Held rows all come after their group's head, so "an earlier unheld row" is the same as
/// "an earlier row", and the group's minimum is the one row no statement order can change:
/// the result does not depend on how the database sees its own updates.
///
/// On PostgreSQL the statement holds every unheld row of each group but its first, read
/// per group from `outbox_by_order_key` (`LATERAL ... OFFSET 1`): the same rows. The
/// `EXISTS` form below let PostgreSQL's planner, which estimates a new job's rows at one
/// until the outbox is analyzed again, scan every pending row of the job for each chunk, so
/// a bulk replay's request took time quadratic in its size (docs/bench.md "2026-12-05 (5)").
/// Run it with [`hold_later_in!`]: on PostgreSQL with sorts disabled for the statement,
/// because the rows of a new job are estimated at about one in every index, and with that
/// estimate the planner at times probed `outbox_claimable (job_id, status, held, id)` or
/// `outbox_by_job` per group and sorted, a scan of the job's rows each (1.0-1.5 s per
/// 500-row chunk at 10,000 rows, auto_explain); only `outbox_by_order_key` gives the rows
/// in order without a sort. SQLite has no `LATERAL` and probes the index itself.
pub(super) fn hold_later<'a, DB: Dialect>(
    job_id: &'a str,
    places: &Places,
) -> Option<QueryBuilder<'a, DB>> {
    if places.groups.is_empty() {
        return None;
    }
    if DB::LATERAL {
        let mut qb: QueryBuilder<'a, DB> =
            QueryBuilder::new("UPDATE outbox SET held = 1 WHERE id IN (SELECT o.id FROM ");
        DB::push_columns(&mut qb, vec![Column::I64(places.groups.clone())]);
        qb.push(" AS g CROSS JOIN LATERAL (SELECT l.id FROM outbox l WHERE l.job_id = ");
        DB::bind(&mut qb, Val::Text(Some(job_id)));
        qb.push(
            " AND l.order_key = g.column1 AND l.held = 0 AND l.status = 'pending' \
             ORDER BY l.order_pos, l.id OFFSET 1) AS o)",
        );
        return Some(qb);
    }
    let mut qb: QueryBuilder<'a, DB> =
        QueryBuilder::new("UPDATE outbox SET held = 1 WHERE job_id = ");
    DB::bind(&mut qb, Val::Text(Some(job_id)));
    qb.push(" AND status = 'pending' AND held = 0 AND order_key IN ");
    DB::push_json_ids(&mut qb, ids_json(&places.groups));
    qb.push(
        " AND EXISTS (SELECT 1 FROM outbox e WHERE e.job_id = outbox.job_id \
         AND e.order_key = outbox.order_key AND e.held = 0 AND e.status = 'pending' \
         AND (e.order_pos, e.id) < (outbox.order_pos, outbox.id))",
    );
    Some(qb)
}

/// Runs [`hold_later`] of job `$job_id` (`&str`) over `$places` (`&Places`) in transaction
/// `$tx` of the `DB` in scope (inside `on_pool!`); on PostgreSQL between `SET LOCAL
/// enable_sort = off` and `on` (see [`hold_later`]). A database error returns
/// `Err(StoreError)` from the enclosing function. A macro because the two databases'
/// transactions are different types.
macro_rules! hold_later_in {
    ($tx:expr, $job_id:expr, $places:expr) => {{
        if let Some(mut qb) = $crate::store::order::hold_later::<DB>($job_id, $places) {
            let planned = <DB as $crate::store::dialect::Dialect>::LATERAL;
            if planned {
                sqlx::query::<DB>("SET LOCAL enable_sort = off")
                    .execute(&mut *$tx)
                    .await
                    .map_err($crate::store::dialect::store_error)?;
            }
            qb.build()
                .persistent(false)
                .execute(&mut *$tx)
                .await
                .map_err($crate::store::dialect::store_error)?;
            if planned {
                sqlx::query::<DB>("SET LOCAL enable_sort = on")
                    .execute(&mut *$tx)
                    .await
                    .map_err($crate::store::dialect::store_error)?;
            }
        }
    }};
}
pub(super) use hold_later_in;

/// `SELECT 1 FROM outbox WHERE job_id = ? AND status = 'pending' AND held = 1 LIMIT 1`:
/// whether any row of the job still waits for an earlier one of its key (one probe of
/// `outbox_claimable (job_id, status, held, id)`). Rows are held only when the job's outbox
/// is written, before it runs, so once this is empty it stays empty, and a mark skips
/// [`release_next`] (which probes once per published row) for a job whose keys are distinct.
pub(super) fn any_held<'a, DB: Dialect>(job_id: &'a str) -> QueryBuilder<'a, DB> {
    let mut qb: QueryBuilder<'a, DB> = QueryBuilder::new("SELECT 1 FROM outbox WHERE job_id = ");
    DB::bind(&mut qb, Val::Text(Some(job_id)));
    qb.push(" AND status = 'pending' AND held = 1 LIMIT 1");
    qb
}

/// Releases the next held row of the key group of each of `published` (outbox ids just
/// marked published): one statement, one index probe per group. The published rows are
/// found by primary key: on SQLite `NOT INDEXED`, as under an empty outbox's statistics
/// (an analyzed store before its first replay) it scanned all of `outbox_by_order_key`
/// instead, 38-59 ms a mark at 450,000 rows (docs/bench.md "2026-12-06 (8)").
pub(super) fn release_next<'a, DB: Dialect>(published: &[i64]) -> QueryBuilder<'a, DB> {
    let by_id = if DB::INDEXED_BY { " NOT INDEXED" } else { "" };
    let mut qb: QueryBuilder<'a, DB> = QueryBuilder::new(format!(
        "UPDATE outbox SET held = 0 WHERE id IN (SELECT (SELECT n.id FROM outbox n \
         WHERE n.job_id = p.job_id AND n.order_key = p.order_key AND n.held = 1 \
         AND n.status = 'pending' ORDER BY n.order_pos, n.id LIMIT 1) \
         FROM outbox p{by_id} WHERE p.order_key IS NOT NULL AND p.id IN ",
    ));
    DB::push_json_ids(&mut qb, ids_json(published));
    qb.push(")");
    qb
}

/// The held rest of the key group of `failed` (an outbox row that just failed for good,
/// of dead letter `dead_letter_id`): failed too, with `attempts` unchanged, because
/// publishing them would let them overtake it. Returns their dead letters' ids.
pub(super) fn fail_held<'a, DB: Dialect>(
    failed_outbox_id: i64,
    dead_letter_id: i64,
) -> QueryBuilder<'a, DB> {
    let mut qb: QueryBuilder<'a, DB> =
        QueryBuilder::new("UPDATE outbox SET status = 'failed', held = 0, last_error = ");
    DB::bind(
        &mut qb,
        Val::OwnedText(Some(held_back_error(dead_letter_id))),
    );
    qb.push(
        " WHERE held = 1 AND status = 'pending' \
         AND job_id = (SELECT f.job_id FROM outbox f WHERE f.id = ",
    );
    DB::bind(&mut qb, Val::I64(Some(failed_outbox_id)));
    qb.push(") AND order_key = (SELECT f.order_key FROM outbox f WHERE f.id = ");
    DB::bind(&mut qb, Val::I64(Some(failed_outbox_id)));
    qb.push(") RETURNING dead_letter_id");
    qb
}

/// The error of a record held back behind `dead_letter_id`, which failed for good.
pub(crate) fn held_back_error(dead_letter_id: i64) -> String {
    format!(
        "not sent: dead letter #{dead_letter_id}, earlier in source order with the same key, \
         failed to publish, and per-key order keeps the later records of a key from \
         overtaking it; fix it and replay them together (or replay with per-key order off)"
    )
}

#[cfg(test)]
mod tests {
    use super::super::{MarkBatch, Published, Store};
    use crate::actions::{Actor, ReplayOptions, ReplayRequest, Selection};
    use crate::model::{Convention, NewDeadLetter, Normalized, RawRecord};

    const KEYS: i64 = 12;
    const PER_KEY: i64 = 50;

    /// `KEYS` x `PER_KEY` records ingested in scrambled source order: more than one bulk
    /// chunk (500), so heads of one chunk meet earlier records in the next.
    fn scrambled() -> Vec<NewDeadLetter> {
        let mut pairs: Vec<(i64, i64)> = (0..KEYS)
            .flat_map(|k| (0..PER_KEY).map(move |o| (k, o)))
            .collect();
        pairs.sort_by_key(|(k, o)| ((k * PER_KEY + o) * 7_919) % 10_007);
        pairs
            .into_iter()
            .enumerate()
            .map(|(i, (k, o))| NewDeadLetter {
                record: RawRecord {
                    dlq_topic: "orders.DLT".into(),
                    dlq_partition: 0,
                    dlq_offset: i as i64,
                    timestamp_ms: Some(1_000),
                    key: Some(format!("key-{k}").into_bytes()),
                    value: Some(format!("key-{k}:{o}").into_bytes()),
                    headers: vec![],
                },
                convention: Convention::Unknown,
                fingerprint: "f".into(),
                normalized: Normalized {
                    source_topic: Some("orders".into()),
                    source_offset: Some(1_000 + o),
                    ..Normalized::default()
                },
                dead_lettered_at_ms: 1_000,
                ingested_at_ms: 1_000,
            })
            .collect()
    }

    async fn store() -> Store {
        let url = std::env::var("REDRIVE_ORDER_TEST_URL")
            .unwrap_or_else(|_| "sqlite::memory:".to_string());
        let store = Store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        store
    }

    /// Claims everything claimable, publishes it, and returns each claim's values: with
    /// per-key order every claim holds one record per key, the next in source order.
    #[tokio::test]
    async fn only_each_keys_next_record_is_claimable_across_chunks() {
        let store = store().await;
        store.insert_batch(&scrambled()).await.unwrap();
        let job = store
            .request_replay(
                &Actor::operator("eve"),
                &ReplayRequest {
                    selection: Selection::Filter(crate::Filter::default()),
                    target_topic: None,
                    rate_per_sec: None,
                    reason: None,
                    options: ReplayOptions::default(),
                },
            )
            .await
            .unwrap();
        assert_eq!(job.total, KEYS * PER_KEY);
        let mut next: std::collections::HashMap<String, i64> = Default::default();
        for round in 0..PER_KEY {
            let claim = store
                .claim(&job.id, 10_000, 60_000, None, true)
                .await
                .unwrap();
            assert_eq!(claim.rows.len() as i64, KEYS, "round {round}: one per key");
            for r in &claim.rows {
                let v = String::from_utf8(r.value.clone().unwrap()).unwrap();
                let (k, o) = v.rsplit_once(':').unwrap();
                let o: i64 = o.parse().unwrap();
                let want = next.entry(k.to_string()).or_insert(0);
                assert_eq!(o, *want, "round {round}: {k}");
                *want += 1;
            }
            // Nothing more while these are in flight.
            let more = store
                .claim(&job.id, 10_000, 60_000, None, true)
                .await
                .unwrap();
            assert!(more.rows.is_empty(), "round {round}");
            let summary = store
                .mark(&MarkBatch {
                    job_id: job.id.clone(),
                    claim_token: claim.token.clone(),
                    actor: "eve".into(),
                    published: claim
                        .rows
                        .iter()
                        .map(|r| Published {
                            outbox_id: r.outbox_id,
                            partition: 0,
                            offset: 0,
                        })
                        .collect(),
                    last: round == PER_KEY - 1,
                    ..MarkBatch::default()
                })
                .await
                .unwrap();
            assert_eq!(summary.published as i64, KEYS);
        }
        let done = store.job(&job.id).await.unwrap().unwrap();
        assert_eq!(done.status, crate::actions::JobStatus::Finished);
    }

    /// A replay by ids of more dead letters than one SQLite statement can bind three values
    /// for (32,766 / 3): every one queued, the outbox in id order, a place for each keyed one
    /// and none for the keyless ones.
    #[tokio::test]
    async fn a_replay_by_ids_beyond_one_statements_binds_queues_every_one_in_order() {
        const N: i64 = 11_000;
        let store = Store::connect("sqlite::memory:").await.unwrap();
        store.migrate().await.unwrap();
        let batch: Vec<NewDeadLetter> = (0..N)
            .map(|i| {
                // Every third one without a key: no order constraint.
                let key = (i % 3 != 0).then(|| format!("key-{}", i % 7));
                let mut d = crate::store::test_records::dead_letter(i, key);
                d.normalized.source_offset = Some(i);
                d
            })
            .collect();
        for chunk in batch.chunks(2_000) {
            store.insert_batch(chunk).await.unwrap();
        }
        let pool = crate::store::test_file::sqlite_pool(&store);
        let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM dead_letters ORDER BY id")
            .fetch_all(pool)
            .await
            .unwrap();
        let job = store
            .request_replay(
                &Actor::operator("eve"),
                &ReplayRequest {
                    selection: crate::request::ids(ids.clone()).unwrap(),
                    target_topic: None,
                    rate_per_sec: None,
                    reason: None,
                    options: ReplayOptions::default(),
                },
            )
            .await
            .unwrap();
        assert_eq!(job.total, N);
        // (dead letter id, order_key, order_pos, the dead letter's key), in outbox order.
        type Row = (i64, Option<i64>, Option<i64>, Option<Vec<u8>>);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT o.dead_letter_id, o.order_key, o.order_pos, d.key FROM outbox o \
             JOIN dead_letters d ON d.id = o.dead_letter_id ORDER BY o.id",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), ids);
        for (id, key, pos, dl_key) in &rows {
            assert_eq!(
                key.is_some(),
                dl_key.is_some(),
                "dead letter {id}: its group"
            );
            assert_eq!(
                pos.is_some(),
                dl_key.is_some(),
                "dead letter {id}: its place"
            );
        }
    }
}
