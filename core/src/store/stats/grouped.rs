//! SQLite's aggregates kept per statement (migration 0037, `docs/stats.md`, "Per statement on
//! SQLite").
//!
//! SQLite runs a trigger once per row: ingest's insert ran seven aggregate upserts per dead
//! letter (migrations 0006, 0010, 0027, 0036) and a status change six more statements per row.
//! The writes that change thousands of rows at a time — ingest's batch insert
//! (`insert.rs`), a bulk replay's chunk (`replay_pending`, `bulk/chunk.rs`) and the relay's
//! mark (`replayed`, `outbox_mark.rs`) — instead read their rows' aggregate keys once
//! ([`read_keys`]), apply each trigger's rule to them here, row by row in id order ([`Delta`]),
//! and write the sums: one multi-row upsert (or `UPDATE ... FROM (VALUES ...)` for a
//! trigger's decrement) per aggregate table. Around their own statement they turn the table
//! `stats_switch` on and off again ([`switch!`]), inside their write transaction, and the
//! triggers skip rows written while it is on; SQLite has one writer at a time, so no other
//! write runs meanwhile, and every other write is still counted by the triggers, row by row.
//! PostgreSQL's triggers already run once per statement over its transition tables; nothing
//! here runs there ([`Dialect::ROW_TRIGGERS`]).
//!
//! The result is the triggers' own, ties included: the test `stats::grouped::tests` writes the
//! same dead letters through both ways and compares every aggregate table row for row.

use std::collections::BTreeMap;

use sqlx::QueryBuilder;

use crate::store::dialect::{Dialect, Val};
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

/// One dead letter's aggregate keys as stored, read by [`read_keys`]: `source_topic`,
/// `consumer_group` and `tier` with NULL as '' (as the triggers key them), `error_class` as
/// stored (the fingerprints keep NULL) and `bytes` the key's and value's.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct KeyRow {
    fingerprint: String,
    dlq_topic: String,
    source_topic: String,
    consumer_group: String,
    error_class: Option<String>,
    tier: String,
    at_ms: i64,
    bytes: i64,
    /// The status before the write; `None` for an insert.
    old_status: Option<String>,
    new_status: String,
}

/// `SELECT` of the [`KeyRow`]s of the dead letters `ids` (a JSON array), in id order, with
/// `old` and `new` the SQL expressions of their status before and after the write as they
/// read when this runs (`NULL` and `status` after an insert).
pub(crate) fn read_keys<'a, DB: Dialect>(ids: &str, old: &str, new: &str) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(format!(
        "SELECT fingerprint, dlq_topic, COALESCE(source_topic, '') AS source_topic, \
         COALESCE(consumer_group, '') AS consumer_group, error_class, \
         COALESCE(tier, '') AS tier, dead_lettered_at_ms AS at_ms, \
         COALESCE(length(key), 0) + COALESCE(length(value), 0) AS bytes, \
         {old} AS old_status, {new} AS new_status FROM dead_letters WHERE id IN "
    ));
    DB::push_json_ids(&mut qb, ids.to_owned());
    qb.push(" ORDER BY id");
    qb
}

/// One value of an aggregate row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Cell {
    Text(String),
    NullableText(Option<String>),
    Int(i64),
}

/// An aggregate table as the triggers write it: its key columns and, per value column, the
/// `ON CONFLICT` assignment (`excluded.<col>` is the batch's value).
struct Table {
    name: &'static str,
    keys: &'static [&'static str],
    values: &'static [&'static str],
    on_conflict: &'static str,
}

const COUNTS: Table = Table {
    name: "dl_stats_counts",
    keys: &["dlq_topic", "source_topic", "status"],
    values: &["n", "bytes"],
    on_conflict: "n = n + excluded.n, bytes = bytes + excluded.bytes",
};
const MINUTES: Table = Table {
    name: "dl_stats_minutes",
    keys: &["dlq_topic", "source_topic", "minute_ms"],
    values: &["n", "live_n"],
    on_conflict: "n = n + excluded.n, live_n = live_n + excluded.live_n",
};
const HOURS: Table = Table {
    name: "dl_stats_hours",
    keys: &["dlq_topic", "source_topic", "hour_ms"],
    values: &["n"],
    on_conflict: "n = n + excluded.n",
};
const FINGERPRINTS: Table = Table {
    name: "dl_stats_fingerprints",
    keys: &["fingerprint"],
    values: &[
        "first_seen_ms",
        "last_seen_ms",
        "n",
        "dlq_topic",
        "source_topic",
        "error_class",
    ],
    // The insert trigger's own assignments (migration 0006).
    on_conflict: "n = n + excluded.n, \
        dlq_topic = CASE WHEN excluded.first_seen_ms < first_seen_ms \
                    THEN excluded.dlq_topic ELSE dlq_topic END, \
        source_topic = CASE WHEN excluded.first_seen_ms < first_seen_ms \
                       THEN excluded.source_topic ELSE source_topic END, \
        error_class = CASE WHEN excluded.first_seen_ms < first_seen_ms \
                      THEN excluded.error_class ELSE error_class END, \
        first_seen_ms = min(first_seen_ms, excluded.first_seen_ms), \
        last_seen_ms = max(last_seen_ms, excluded.last_seen_ms)",
};
const FINGERPRINT_HOURS: Table = Table {
    name: "dl_stats_fingerprint_hours",
    keys: &["fingerprint", "hour_ms"],
    values: &["n"],
    on_conflict: "n = n + excluded.n",
};
const GROUPS: Table = Table {
    name: "dl_stats_groups",
    keys: &[
        "fingerprint",
        "dlq_topic",
        "source_topic",
        "consumer_group",
        "error_class",
        "status",
        "tier",
    ],
    values: &["n", "last_seen_ms"],
    on_conflict: "n = n + excluded.n, last_seen_ms = max(last_seen_ms, excluded.last_seen_ms)",
};
const GROUP_HOURS: Table = Table {
    name: "dl_stats_group_hours",
    keys: &[
        "hour_ms",
        "fingerprint",
        "dlq_topic",
        "source_topic",
        "consumer_group",
        "error_class",
        "status",
        "tier",
    ],
    values: &["n"],
    on_conflict: "n = n + excluded.n",
};

/// What the triggers would have added to (`add`, their upserts) and taken from (`sub`, their
/// `UPDATE ... SET n = n - 1`, which never creates a row) each aggregate table, summed per
/// key, values in the order of [`Table::values`] (`sub`: `n`, or `live_n` for the minutes,
/// and `n`, `bytes` for the counts).
#[derive(Default)]
struct Delta {
    add: BTreeMap<&'static str, BTreeMap<Vec<Cell>, Vec<i64>>>,
    sub: BTreeMap<&'static str, BTreeMap<Vec<Cell>, Vec<i64>>>,
    /// Per fingerprint: (first seen, last seen, n, DLQ topic, source topic, error class) of
    /// the batch, its topics and class from its earliest row (the first in id order among
    /// equal times, which the triggers' strict `<` keeps).
    fingerprints: BTreeMap<String, Seen>,
}

/// An error group's (first seen, last seen, n, DLQ topic, source topic, error class).
type Seen = (i64, i64, i64, String, String, Option<String>);

const MINUTE: i64 = 60_000;
const HOUR: i64 = 3_600_000;

/// `t` floored to `unit` as SQLite's `(t / unit) * unit` does (toward zero).
fn floor(t: i64, unit: i64) -> i64 {
    (t / unit) * unit
}

/// Sums `v` into `row`, except a `last_seen_ms` value, which keeps the larger.
fn sum_into(table: &Table, row: &mut Vec<i64>, v: &[i64]) {
    if row.is_empty() {
        row.extend_from_slice(v);
        return;
    }
    for (i, x) in v.iter().enumerate() {
        if table.values.get(i) == Some(&"last_seen_ms") {
            row[i] = row[i].max(*x);
        } else {
            row[i] += x;
        }
    }
}

impl Delta {
    fn add(&mut self, table: &'static Table, key: Vec<Cell>, v: &[i64]) {
        let row = self
            .add
            .entry(table.name)
            .or_default()
            .entry(key)
            .or_default();
        sum_into(table, row, v);
    }

    fn sub(&mut self, table: &'static Table, key: Vec<Cell>, v: &[i64]) {
        let row = self
            .sub
            .entry(table.name)
            .or_default()
            .entry(key)
            .or_default();
        sum_into(table, row, v);
    }

    /// `dl_stats_groups`' key of `r` under `status`.
    fn group_key(r: &KeyRow, status: &str) -> Vec<Cell> {
        vec![
            Cell::Text(r.fingerprint.clone()),
            Cell::Text(r.dlq_topic.clone()),
            Cell::Text(r.source_topic.clone()),
            Cell::Text(r.consumer_group.clone()),
            Cell::Text(r.error_class.clone().unwrap_or_default()),
            Cell::Text(status.to_owned()),
            Cell::Text(r.tier.clone()),
        ]
    }

    /// `dl_stats_group_hours`' key of `r` under `status`.
    fn group_hour_key(r: &KeyRow, status: &str) -> Vec<Cell> {
        let mut k = vec![Cell::Int(floor(r.at_ms, HOUR))];
        k.extend(Self::group_key(r, status));
        k
    }

    /// `r`'s DLQ and source topic, then `last`.
    fn topics_and(r: &KeyRow, last: Cell) -> Vec<Cell> {
        vec![
            Cell::Text(r.dlq_topic.clone()),
            Cell::Text(r.source_topic.clone()),
            last,
        ]
    }

    /// What the insert triggers do for `r` (migrations 0006, 0010, 0027, 0036).
    fn inserted(&mut self, r: &KeyRow) {
        let status = r.new_status.as_str();
        let live = i64::from(status != "deleted");
        let counts = Self::topics_and(r, Cell::Text(status.into()));
        self.add(&COUNTS, counts, &[1, r.bytes]);
        let minute = Cell::Int(floor(r.at_ms, MINUTE));
        self.add(&MINUTES, Self::topics_and(r, minute), &[1, live]);
        let hour = Cell::Int(floor(r.at_ms, HOUR));
        self.add(&HOURS, Self::topics_and(r, hour), &[1]);
        let f = self
            .fingerprints
            .entry(r.fingerprint.clone())
            .or_insert_with(|| {
                (
                    r.at_ms,
                    r.at_ms,
                    0,
                    r.dlq_topic.clone(),
                    r.source_topic.clone(),
                    r.error_class.clone(),
                )
            });
        if r.at_ms < f.0 {
            (f.0, f.3, f.4, f.5) = (
                r.at_ms,
                r.dlq_topic.clone(),
                r.source_topic.clone(),
                r.error_class.clone(),
            );
        }
        f.1 = f.1.max(r.at_ms);
        f.2 += 1;
        let fp_hour = vec![
            Cell::Text(r.fingerprint.clone()),
            Cell::Int(floor(r.at_ms, HOUR)),
        ];
        self.add(&FINGERPRINT_HOURS, fp_hour, &[1]);
        self.add(&GROUPS, Self::group_key(r, status), &[1, r.at_ms]);
        self.add(&GROUP_HOURS, Self::group_hour_key(r, status), &[1]);
    }

    /// What the update triggers do for `r`'s status change from `old` (its other keys
    /// unchanged; migrations 0006, 0010, 0027, 0036).
    fn moved(&mut self, r: &KeyRow, old: &str) {
        let new = r.new_status.as_str();
        if old == new {
            return;
        }
        self.sub(
            &COUNTS,
            Self::topics_and(r, Cell::Text(old.into())),
            &[1, r.bytes],
        );
        self.add(
            &COUNTS,
            Self::topics_and(r, Cell::Text(new.into())),
            &[1, r.bytes],
        );
        if (old == "deleted") != (new == "deleted") {
            let minute = Self::topics_and(r, Cell::Int(floor(r.at_ms, MINUTE)));
            if old != "deleted" {
                self.sub(&MINUTES, minute.clone(), &[1]);
            }
            if new != "deleted" {
                self.add(&MINUTES, minute, &[0, 1]);
            }
        }
        self.sub(&GROUPS, Self::group_key(r, old), &[1]);
        self.add(&GROUPS, Self::group_key(r, new), &[1, r.at_ms]);
        self.sub(&GROUP_HOURS, Self::group_hour_key(r, old), &[1]);
        self.add(&GROUP_HOURS, Self::group_hour_key(r, new), &[1]);
    }

    /// The statements that write it: per table, the subtractions (`UPDATE ... FROM (VALUES
    /// ...)`: rows that exist only, as the triggers' `UPDATE`), then the additions (`INSERT
    /// ... ON CONFLICT`), each cut under the database's bind limit.
    fn statements<'a, DB: Dialect>(self) -> Vec<QueryBuilder<'a, DB>> {
        let Delta {
            mut add,
            mut sub,
            fingerprints,
        } = self;
        let ints = |v: Vec<i64>| v.into_iter().map(Cell::Int).collect::<Vec<_>>();
        let mut out = Vec::new();
        for table in [
            &COUNTS,
            &MINUTES,
            &HOURS,
            &FINGERPRINTS,
            &FINGERPRINT_HOURS,
            &GROUPS,
            &GROUP_HOURS,
        ] {
            if let Some(rows) = sub.remove(table.name) {
                let rows: Vec<Cells> = rows.into_iter().map(|(k, v)| (k, ints(v))).collect();
                out.extend(statements_of::<DB>(table, &rows, subtract::<DB>));
            }
            let rows: Vec<Cells> = if table.name == FINGERPRINTS.name {
                fingerprints
                    .iter()
                    .map(|(fp, (first, last, n, dlq, src, class))| {
                        (
                            vec![Cell::Text(fp.clone())],
                            vec![
                                Cell::Int(*first),
                                Cell::Int(*last),
                                Cell::Int(*n),
                                Cell::Text(dlq.clone()),
                                Cell::Text(src.clone()),
                                Cell::NullableText(class.clone()),
                            ],
                        )
                    })
                    .collect()
            } else {
                add.remove(table.name)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, ints(v)))
                    .collect()
            };
            out.extend(statements_of::<DB>(table, &rows, upsert::<DB>));
        }
        out
    }
}

/// One aggregate row: its key cells and its value cells.
type Cells = (Vec<Cell>, Vec<Cell>);

/// `build` over `rows` in chunks under the database's bind limit (none when `rows` is empty).
fn statements_of<'a, DB: Dialect>(
    table: &Table,
    rows: &[Cells],
    build: fn(&Table, &[Cells]) -> QueryBuilder<'a, DB>,
) -> Vec<QueryBuilder<'a, DB>> {
    let binds = rows.first().map_or(1, |(k, v)| k.len() + v.len());
    let per = ((DB::MAX_BINDS - 8) / binds).clamp(1, 2_000);
    rows.chunks(per).map(|chunk| build(table, chunk)).collect()
}

/// The statements that count the dead letters whose [`KeyRow`]s are `rows` (read in id
/// order by [`read_keys`]), just inserted with the switch on, as the insert triggers
/// `dl_stats_insert`, `dl_stats_groups_insert` and `dl_stats_group_hours_insert` would have
/// one row at a time: one upsert per aggregate table (or a few, under the bind limit).
pub(crate) fn count_inserted<'a, DB: Dialect>(rows: &[KeyRow]) -> Vec<QueryBuilder<'a, DB>> {
    let mut d = Delta::default();
    for r in rows {
        d.inserted(r);
    }
    d.statements()
}

/// The statements that move the dead letters whose [`KeyRow`]s are `rows` between the
/// aggregates for their status change (`old_status` to `new_status`), as the update
/// triggers `dl_stats_update`, `dl_stats_live_minutes_update`, `dl_stats_groups_update` and
/// `dl_stats_group_hours_update` would one row at a time: a row whose status does not change
/// is not counted, and a live count moves only when a row becomes or stops being `deleted`.
/// The write must change nothing else these aggregates are keyed by (topics, consumer group,
/// error class, fingerprint, tier, time), run with the switch on, and give every row the
/// same new status (so no key is both taken from and added to).
pub(crate) fn move_status<'a, DB: Dialect>(rows: &[KeyRow]) -> Vec<QueryBuilder<'a, DB>> {
    let mut d = Delta::default();
    for r in rows {
        if let Some(old) = &r.old_status {
            d.moved(r, old);
        }
    }
    d.statements()
}

fn push_cell<DB: Dialect>(qb: &mut QueryBuilder<'_, DB>, c: &Cell) {
    match c {
        Cell::Text(s) => DB::bind(qb, Val::OwnedText(Some(s.clone()))),
        Cell::NullableText(s) => DB::bind(qb, Val::OwnedText(s.clone())),
        Cell::Int(i) => DB::bind(qb, Val::I64(Some(*i))),
    }
}

/// `(k.., v..), (k.., v..)`.
fn push_values<DB: Dialect>(qb: &mut QueryBuilder<'_, DB>, rows: &[Cells]) {
    for (i, (k, v)) in rows.iter().enumerate() {
        qb.push(if i > 0 { ", (" } else { "(" });
        for (j, c) in k.iter().chain(v).enumerate() {
            if j > 0 {
                qb.push(", ");
            }
            push_cell(qb, c);
        }
        qb.push(")");
    }
}

/// `INSERT INTO table (keys, values) VALUES ... ON CONFLICT (keys) DO UPDATE SET ...`.
fn upsert<'a, DB: Dialect>(table: &Table, rows: &[Cells]) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(format!(
        "INSERT INTO {} ({}, {}) VALUES ",
        table.name,
        table.keys.join(", "),
        table.values.join(", ")
    ));
    push_values(&mut qb, rows);
    qb.push(format!(
        " ON CONFLICT ({}) DO UPDATE SET {}",
        table.keys.join(", "),
        table.on_conflict
    ));
    qb
}

/// `UPDATE table SET n = n - d.columnK FROM (VALUES ...) AS d WHERE key = d.column1 AND ...`
/// (the minutes take `live_n`; the counts `n` and `bytes`).
fn subtract<'a, DB: Dialect>(table: &Table, rows: &[Cells]) -> QueryBuilder<'a, DB> {
    let taken: &[&str] = match table.name {
        "dl_stats_minutes" => &["live_n"],
        "dl_stats_counts" => &["n", "bytes"],
        _ => &["n"],
    };
    let set: Vec<String> = taken
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{c} = {c} - d.column{}", table.keys.len() + 1 + i))
        .collect();
    let mut qb = QueryBuilder::new(format!(
        "UPDATE {} SET {} FROM (VALUES ",
        table.name,
        set.join(", ")
    ));
    push_values(&mut qb, rows);
    qb.push(") AS d WHERE ");
    for (j, key) in table.keys.iter().enumerate() {
        if j > 0 {
            qb.push(" AND ");
        }
        qb.push(format!("{key} = d.column{}", j + 1));
    }
    qb
}

/// Reads the [`KeyRow`]s of `$ids` (a JSON array) with `$old` / `$new` ([`read_keys`]),
/// then runs `$statements` (`count_inserted` or `move_status`) over them in `$tx` of `$DB`;
/// a database error returns `Err(StoreError)` from the enclosing function.
macro_rules! run_grouped {
    ($tx:expr, $DB:ty, $ids:expr, $old:expr, $new:expr, $statements:ident) => {{
        let rows: Vec<$crate::store::stats::grouped::KeyRow> =
            $crate::store::stats::grouped::read_keys::<$DB>($ids, $old, $new)
                .build_query_as()
                .fetch_all(&mut *$tx)
                .await
                .map_err($crate::store::dialect::store_error)?;
        for mut qb in $crate::store::stats::grouped::$statements::<$DB>(&rows) {
            qb.build()
                .persistent(false)
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

    use super::{Cell, Delta, KeyRow};

    fn key_row(old: &str, new: &str) -> KeyRow {
        KeyRow {
            fingerprint: "f".into(),
            dlq_topic: "a.DLT".into(),
            source_topic: String::new(),
            consumer_group: String::new(),
            error_class: None,
            tier: String::new(),
            at_ms: 61_000,
            bytes: 5,
            old_status: Some(old.into()),
            new_status: new.into(),
        }
    }

    /// Out of `deleted` a minute's live count +1 (its arrivals `n` unchanged), into it -1, and
    /// nothing for a change between two live statuses: the rule of
    /// `dl_stats_live_minutes_update`, which no grouped write reaches today (none deletes).
    #[test]
    fn a_live_count_moves_only_into_or_out_of_deleted() {
        let minute = vec![
            Cell::Text("a.DLT".into()),
            Cell::Text(String::new()),
            Cell::Int(60_000),
        ];
        let mut d = Delta::default();
        d.moved(&key_row("deleted", "new"), "deleted");
        assert_eq!(d.add["dl_stats_minutes"][&minute], vec![0, 1]);
        assert!(!d.sub.contains_key("dl_stats_minutes"));
        let mut d = Delta::default();
        d.moved(&key_row("new", "deleted"), "new");
        assert_eq!(d.sub["dl_stats_minutes"][&minute], vec![1]);
        assert!(!d.add.contains_key("dl_stats_minutes"));
        let mut d = Delta::default();
        d.moved(&key_row("new", "replayed"), "new");
        assert!(!d.add.contains_key("dl_stats_minutes") && !d.sub.contains_key("dl_stats_minutes"));
        assert_eq!(d.sub["dl_stats_counts"].values().next(), Some(&vec![1, 5]));
    }

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
