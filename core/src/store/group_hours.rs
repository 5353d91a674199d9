//! Error groups and "N match this filter" over a time range without a scan (issue 12 item 3;
//! migration 0036, `docs/stats.md`, "Error groups per filter").
//!
//! `dl_stats_group_hours` counts the stored dead letters per hour of dead-lettering and the
//! key of `dl_stats_groups`, kept exact by triggers in the same transaction as every write. A
//! filter that names a time range and otherwise only what the aggregate keeps
//! ([`hours_answer`]) is answered in one read snapshot:
//!
//! - the range's whole hours from the table (`SUM(n)` per fingerprint);
//! - its partial hours at either end ([`split`]: at most two, each under an hour) from the
//!   rows of the shorter side of the cut ([`Side::of`]): the end's own rows, or its whole
//!   hour from the table less the rest of the hour's rows. Each read is at most
//!   [`EDGE_SCAN_ROWS`]; an end holding more on both sides (an incident's hour) leaves the
//!   filter to the bounded count of the newest matches
//!   ([`super::GroupsCounted::AmongNewest`]), as before;
//! - for the shown groups only, first / last seen and the example by seeks in
//!   `dead_letters_by_fingerprint` within the range.
//!
//! Hours are `dead_lettered_at_ms` truncated to the hour, as SQLite's and PostgreSQL's integer
//! division computes it; the part of a range before 01:00 on 1970-01-01 is an end counted from
//! the rows, so bucket 0, which holds negative times too, is never summed.

use std::collections::HashMap;

use sqlx::QueryBuilder;

use super::dialect::{store_error, Dialect, Val};
use super::group_counts::push_aggregate_filter;
use super::search_sql::is_sqlite;
use super::{sql, Pool, Store, StoreError};
use crate::filter::Filter;
use crate::model::ErrorGroup;

/// One hour, ms: the bucket of `dl_stats_group_hours`.
pub const HOUR_MS: i64 = 3_600_000;

/// Most dead letters read from the rows at each partial end of a range, on one side of its cut
/// ([`Side::of`]; a few ms at 10M rows: a steady DLQ of 10M over 30 days holds about 14,000
/// an hour). An end holding more on both sides leaves the whole filter to
/// [`super::GROUPS_SCAN_ROWS`]' bounded count.
pub const EDGE_SCAN_ROWS: i64 = 20_000;

/// A time range cut at whole hours: `[hours_from, hours_to)` summed from the table (none when
/// `hours_to <= hours_from`; `None` is open), and the partial ends `[from, to)` counted from
/// the rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Split {
    pub hours_from: i64,
    pub hours_to: Option<i64>,
    pub ends: Vec<(i64, i64)>,
}

/// Cuts `[from, to)` (either `None`: open) at whole hours. The part before [`HOUR_MS`] (the
/// first hour of 1970, whose bucket 0 also holds negative times) is an end counted from the
/// rows. `None` for no range or an empty one.
pub(crate) fn split(from: Option<i64>, to: Option<i64>) -> Option<Split> {
    if from.is_none() && to.is_none() {
        return None;
    }
    let from = from.unwrap_or(i64::MIN);
    if to.is_some_and(|t| t <= from) {
        return None;
    }
    let mut ends = Vec::new();
    let mut start = from;
    if start < HOUR_MS {
        let end = to.map_or(HOUR_MS, |t| t.min(HOUR_MS));
        ends.push((start, end));
        if end == to.unwrap_or(i64::MAX) {
            return Some(Split {
                hours_from: HOUR_MS,
                hours_to: Some(HOUR_MS),
                ends,
            });
        }
        start = HOUR_MS;
    }
    let first = if start % HOUR_MS == 0 {
        start
    } else {
        (start / HOUR_MS).saturating_add(1).saturating_mul(HOUR_MS)
    };
    if start < first && to.is_none_or(|t| t >= first) {
        ends.push((start, first));
    }
    let Some(to) = to else {
        return Some(Split {
            hours_from: first,
            hours_to: None,
            ends,
        });
    };
    let last = (to / HOUR_MS) * HOUR_MS;
    if first > last {
        // Within one hour: the rows only.
        ends.push((start, to));
        return Some(Split {
            hours_from: first,
            hours_to: Some(first),
            ends,
        });
    }
    if last < to {
        ends.push((last, to));
    }
    Some(Split {
        hours_from: first,
        hours_to: Some(last),
        ends,
    })
}

/// `f` without its time range, when the rest is what `dl_stats_groups` keeps and the range is
/// one [`split`] can cut: the aggregate and the split answer `f`.
pub(crate) fn hours_answer(f: &Filter) -> Option<(Filter, Split)> {
    let rest = Filter {
        from_ms: None,
        to_ms: None,
        ..f.clone()
    };
    if !super::group_counts::aggregate_answers(&rest) {
        return None;
    }
    Some((rest, split(f.from_ms, f.to_ms)?))
}

/// Per fingerprint: how many match, and the latest time known among them (an hour's start, or
/// an end row's time: for the order of equal counts).
type Counts = HashMap<String, (i64, i64)>;

fn add(counts: &mut Counts, rows: Vec<(String, i64, i64)>) {
    for (fp, n, latest) in rows {
        let e = counts.entry(fp).or_insert((0, i64::MIN));
        e.0 += n;
        e.1 = e.1.max(latest);
    }
}

/// Takes `rows` (outside the range) off `counts`; their times say nothing of the range's.
fn subtract(counts: &mut Counts, rows: Vec<(String, i64, i64)>) {
    for (fp, n, _) in rows {
        counts.entry(fp).or_insert((0, i64::MIN)).0 -= n;
    }
}

/// `SELECT fingerprint, SUM(n), MAX(hour_ms)` of `rest`'s keys in the split's whole hours.
fn hour_sums<'a, DB: Dialect>(rest: &'a Filter, s: &Split) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(
        "SELECT fingerprint, CAST(SUM(n) AS BIGINT), CAST(MAX(hour_ms) AS BIGINT) \
         FROM dl_stats_group_hours",
    );
    push_aggregate_filter(&mut qb, rest);
    push_hours(&mut qb, s);
    qb.push(" GROUP BY fingerprint HAVING SUM(n) <> 0");
    qb
}

/// Appends ` AND` the split's whole hours.
fn push_hours<DB: Dialect>(qb: &mut QueryBuilder<'_, DB>, s: &Split) {
    qb.push(" AND hour_ms >= ");
    DB::bind(qb, Val::I64(Some(s.hours_from)));
    if let Some(to) = s.hours_to {
        qb.push(" AND hour_ms < ");
        DB::bind(qb, Val::I64(Some(to)));
    }
}

/// Per fingerprint, the count and newest time of at most `cap + 1` rows matching `end`.
fn end_counts<DB: Dialect>(end: &Filter, cap: i64) -> QueryBuilder<'_, DB> {
    let mut qb = QueryBuilder::new(
        "SELECT fingerprint, CAST(COUNT(*) AS BIGINT), CAST(MAX(dead_lettered_at_ms) AS BIGINT) \
         FROM (SELECT fingerprint, dead_lettered_at_ms FROM dead_letters",
    );
    sql::push_filter(&mut qb, end);
    qb.push(" LIMIT ");
    DB::bind(&mut qb, Val::I64(Some(cap + 1)));
    qb.push(") AS e GROUP BY fingerprint");
    qb
}

/// `rest` over `[from, to)`.
fn end_filter(rest: &Filter, (from, to): (i64, i64)) -> Filter {
    Filter {
        from_ms: Some(from),
        to_ms: Some(to),
        ..rest.clone()
    }
}

/// The first seen, last seen and example (class, message of the newest) of each of `shown`
/// among the rows `f` matches, by seeks in `dead_letters_by_fingerprint`.
#[derive(Debug, sqlx::FromRow)]
struct Shown {
    fingerprint: String,
    first_seen_ms: i64,
    last_seen_ms: i64,
    error_class: Option<String>,
    error_message: Option<String>,
}

fn shown_details<'a, DB: Dialect>(
    f: &'a Filter,
    rest: &'a Filter,
    shown: &'a [String],
) -> QueryBuilder<'a, DB> {
    let from = f.from_ms.unwrap_or(i64::MIN);
    let to = f.to_ms.unwrap_or(i64::MAX);
    let mut qb = QueryBuilder::new(
        "SELECT x.fingerprint, x.first_seen_ms, e.dead_lettered_at_ms AS last_seen_ms, \
         e.error_class, e.error_message FROM (SELECT g.fingerprint, \
         (SELECT d.dead_lettered_at_ms FROM dead_letters d WHERE d.fingerprint = g.fingerprint",
    );
    let range = |qb: &mut QueryBuilder<'a, DB>| {
        qb.push(" AND d.dead_lettered_at_ms >= ");
        DB::bind(qb, Val::I64(Some(from)));
        qb.push(" AND d.dead_lettered_at_ms < ");
        DB::bind(qb, Val::I64(Some(to)));
    };
    super::group_counts::push_seek_filter(&mut qb, rest);
    range(&mut qb);
    qb.push(
        " ORDER BY d.dead_lettered_at_ms, d.id LIMIT 1) AS first_seen_ms, \
         (SELECT d.id FROM dead_letters d WHERE d.fingerprint = g.fingerprint",
    );
    super::group_counts::push_seek_filter(&mut qb, rest);
    range(&mut qb);
    qb.push(
        " ORDER BY d.dead_lettered_at_ms DESC, d.id DESC LIMIT 1) AS example_id \
         FROM (SELECT DISTINCT fingerprint FROM dl_stats_groups WHERE fingerprint IN (NULL",
    );
    for fp in shown {
        qb.push(", ");
        DB::bind(&mut qb, Val::Text(Some(fp.as_str())));
    }
    qb.push(")) g) x JOIN dead_letters e ON e.id = x.example_id");
    qb
}

/// The largest `limit` of `counts` (ties: the latest time known, then fingerprint).
fn largest(counts: Counts, limit: i64) -> Vec<(String, i64)> {
    let mut all: Vec<(String, (i64, i64))> = counts.into_iter().filter(|(_, c)| c.0 > 0).collect();
    all.sort_by(|a, b| {
        b.1 .0
            .cmp(&a.1 .0)
            .then(b.1 .1.cmp(&a.1 .1))
            .then(a.0.cmp(&b.0))
    });
    all.truncate(usize::try_from(limit).unwrap_or(0));
    all.into_iter().map(|(fp, (n, _))| (fp, n)).collect()
}

/// Runs `$sql` in transaction `$tx` on PostgreSQL only (a setting).
macro_rules! on_postgres {
    ($tx:expr, $DB:ty, $sql:expr) => {
        if !is_sqlite::<$DB>() {
            sqlx::query($sql)
                .execute(&mut *$tx)
                .await
                .map_err(store_error)?;
        }
    };
}

/// Opens a read transaction seeing one snapshot for all its statements: SQLite's (WAL) from
/// its first read, PostgreSQL's `REPEATABLE READ`.
macro_rules! begin_snapshot {
    ($pool:expr, $DB:ty) => {{
        let mut tx = super::gate::begin_read($pool).await?;
        on_postgres!(
            tx,
            $DB,
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
        );
        tx
    }};
}

/// How an end of a range is counted from the rows ([`Side::of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Side {
    /// The end's own rows: `[from, to)`.
    Rows((i64, i64)),
    /// Its hour `hour` from the table minus the rest of that hour's rows (one or two pieces,
    /// together shorter than the end): an end covering most of its hour reads fewer rows.
    HourLess { hour: i64, rest: Vec<(i64, i64)> },
}

impl Side {
    /// The ways to count `end` (one of [`Split::ends`]), the one reading the shorter time
    /// first; the second is tried when the first holds more rows than the bound. The part
    /// before [`HOUR_MS`] is counted from its rows only (bucket 0 holds negative times).
    pub(crate) fn of((from, to): (i64, i64)) -> Vec<Side> {
        let rows = Side::Rows((from, to));
        if from < HOUR_MS {
            return vec![rows];
        }
        let hour = (from / HOUR_MS) * HOUR_MS;
        let rest: Vec<(i64, i64)> = [(hour, from), (to, hour + HOUR_MS)]
            .into_iter()
            .filter(|(a, b)| a < b)
            .collect();
        let hour_less = Side::HourLess { hour, rest };
        // `to - from` is under an hour (an end of `split`), so the rest is not empty.
        if to - from > HOUR_MS / 2 {
            vec![hour_less, rows]
        } else {
            vec![rows, hour_less]
        }
    }
}

/// One hour's `[hour, hour + HOUR_MS)` as a split of whole hours only.
fn one_hour(hour: i64) -> Split {
    Split {
        hours_from: hour,
        hours_to: Some(hour + HOUR_MS),
        ends: Vec::new(),
    }
}

/// In transaction `$tx` of database `$DB`: per fingerprint, the rows of `$rest` over the
/// `[from, to)` pieces `$pieces`, when they are at most `$cap` together (`None` for more).
macro_rules! rows_within {
    ($tx:expr, $DB:ty, $rest:expr, $pieces:expr, $cap:expr) => {{
        let (rest, cap): (&Filter, i64) = ($rest, $cap);
        let mut got = Vec::new();
        let mut read = 0i64;
        for piece in $pieces {
            let f = end_filter(rest, piece);
            let rows: Vec<(String, i64, i64)> = end_counts::<$DB>(&f, cap - read)
                .build_query_as()
                .persistent(false)
                .fetch_all(&mut *$tx)
                .await
                .map_err(store_error)?;
            read += rows.iter().map(|r| r.1).sum::<i64>();
            got.extend(rows);
            if read > cap {
                break;
            }
        }
        (read <= cap).then_some(got)
    }};
}

/// In transaction `$tx` of database `$DB`: per fingerprint, the sum of `$rest`'s keys over
/// split `$s`'s whole hours.
macro_rules! hours_within {
    ($tx:expr, $DB:ty, $rest:expr, $s:expr) => {{
        let rows: Vec<(String, i64, i64)> = hour_sums::<$DB>($rest, $s)
            .build_query_as()
            .persistent(false)
            .fetch_all(&mut *$tx)
            .await
            .map_err(store_error)?;
        rows
    }};
}

/// In transaction `$tx` of database `$DB`: the [`Counts`] of `$rest` over split `$s`. Each
/// end is counted by the first of its [`Side::of`] that reads at most `$edge_rows` rows. An
/// end no side can count returns `Ok(None)` from the enclosing function, an error
/// `Err(StoreError)`. Macros because the two databases' transactions are different types
/// (inside `on_pool!`).
macro_rules! range_counts {
    ($tx:expr, $DB:ty, $rest:expr, $s:expr, $edge_rows:expr) => {{
        let (rest, s, edge_rows): (&Filter, &Split, i64) = ($rest, $s, $edge_rows);
        let mut counts = Counts::new();
        'ends: for end in &s.ends {
            for side in Side::of(*end) {
                match side {
                    Side::Rows(piece) => {
                        if let Some(rows) = rows_within!($tx, $DB, rest, [piece], edge_rows) {
                            add(&mut counts, rows);
                            continue 'ends;
                        }
                    }
                    Side::HourLess { hour, rest: pieces } => {
                        if let Some(rows) = rows_within!($tx, $DB, rest, pieces, edge_rows) {
                            add(&mut counts, hours_within!($tx, $DB, rest, &one_hour(hour)));
                            subtract(&mut counts, rows);
                            continue 'ends;
                        }
                    }
                }
            }
            return Ok(None);
        }
        if s.hours_to.is_none_or(|to| to > s.hours_from) {
            add(&mut counts, hours_within!($tx, $DB, rest, s));
        }
        counts
    }};
}

impl Store {
    /// The error groups of `f` from `dl_stats_group_hours` ([`hours_answer`]): exact counts,
    /// first / last seen and example, largest first, at most `limit`. `None` when the table
    /// cannot answer `f`, or an end of its range holds more than `edge_rows` matching rows.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub(crate) async fn groups_by_hour(
        &self,
        f: &Filter,
        limit: i64,
        edge_rows: i64,
    ) -> Result<Option<Vec<ErrorGroup>>, StoreError> {
        let Some((rest, s)) = hours_answer(f) else {
            return Ok(None);
        };
        on_pool!(self, |pool, DB| {
            let mut tx = begin_snapshot!(pool, DB);
            let counts = range_counts!(tx, DB, &rest, &s, edge_rows);
            let top = largest(counts, limit);
            if top.is_empty() {
                return Ok(Some(Vec::new()));
            }
            let fps: Vec<String> = top.iter().map(|t| t.0.clone()).collect();
            // For the seeks only (`group_counts.rs` says why): with it, the hours' sum above
            // read the whole table instead of its range (16 ms against 3 ms at 1M rows).
            on_postgres!(tx, DB, "SET LOCAL enable_bitmapscan = off");
            let details: Vec<Shown> = shown_details::<DB>(f, &rest, &fps)
                .build_query_as()
                .persistent(false)
                .fetch_all(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.rollback().await.map_err(store_error)?;
            let mut by_fp: HashMap<String, Shown> = details
                .into_iter()
                .map(|d| (d.fingerprint.clone(), d))
                .collect();
            let mut groups: Vec<ErrorGroup> = top
                .into_iter()
                .filter_map(|(fp, n)| {
                    // Every counted group has a row in the snapshot; one missing would be
                    // an aggregate out of step, shown without it rather than failing.
                    let d = by_fp.remove(&fp)?;
                    Some(ErrorGroup {
                        fingerprint: fp,
                        error_class: d.error_class,
                        example_message: d.error_message,
                        count: n,
                        first_seen_ms: d.first_seen_ms,
                        last_seen_ms: d.last_seen_ms,
                        labels: Vec::new(),
                        note: None,
                    })
                })
                .collect();
            groups.sort_by(|a, b| {
                b.count
                    .cmp(&a.count)
                    .then(b.last_seen_ms.cmp(&a.last_seen_ms))
                    .then(a.fingerprint.cmp(&b.fingerprint))
            });
            Ok(Some(groups))
        })
    }

    /// How many dead letters match `f` exactly, from `dl_stats_group_hours` and its range's
    /// ends ([`hours_answer`]); `None` when the table cannot answer `f` or an end holds more
    /// than [`EDGE_SCAN_ROWS`] matching rows.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub(crate) async fn count_by_hour(&self, f: &Filter) -> Result<Option<i64>, StoreError> {
        let Some((rest, s)) = hours_answer(f) else {
            return Ok(None);
        };
        on_pool!(self, |pool, DB| {
            let mut tx = begin_snapshot!(pool, DB);
            let counts = range_counts!(tx, DB, &rest, &s, EDGE_SCAN_ROWS);
            tx.rollback().await.map_err(store_error)?;
            Ok(Some(counts.values().map(|c| c.0).sum()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = HOUR_MS;

    #[test]
    fn a_range_is_cut_at_whole_hours() {
        // Aligned: hours only.
        assert_eq!(
            split(Some(10 * H), Some(20 * H)),
            Some(Split {
                hours_from: 10 * H,
                hours_to: Some(20 * H),
                ends: vec![]
            })
        );
        // Both ends partial.
        assert_eq!(
            split(Some(10 * H + 5), Some(20 * H + 7)),
            Some(Split {
                hours_from: 11 * H,
                hours_to: Some(20 * H),
                ends: vec![(10 * H + 5, 11 * H), (20 * H, 20 * H + 7)]
            })
        );
        // Up to a whole hour.
        assert_eq!(
            split(Some(10 * H + 5), Some(11 * H)),
            Some(Split {
                hours_from: 11 * H,
                hours_to: Some(11 * H),
                ends: vec![(10 * H + 5, 11 * H)]
            })
        );
        // Open end.
        assert_eq!(
            split(Some(10 * H + 5), None),
            Some(Split {
                hours_from: 11 * H,
                hours_to: None,
                ends: vec![(10 * H + 5, 11 * H)]
            })
        );
        // Across one boundary, no whole hour.
        assert_eq!(
            split(Some(10 * H + 5), Some(11 * H + 7)),
            Some(Split {
                hours_from: 11 * H,
                hours_to: Some(11 * H),
                ends: vec![(10 * H + 5, 11 * H), (11 * H, 11 * H + 7)]
            })
        );
        // Within one hour.
        assert_eq!(
            split(Some(10 * H + 5), Some(10 * H + 7)),
            Some(Split {
                hours_from: 11 * H,
                hours_to: Some(11 * H),
                ends: vec![(10 * H + 5, 10 * H + 7)]
            })
        );
        // Empty, or no range.
        assert_eq!(split(Some(10 * H), Some(10 * H)), None);
        assert_eq!(split(Some(10 * H), Some(9 * H)), None);
        assert_eq!(split(None, None), None);
        // Before 01:00 on 1970-01-01 (bucket 0 holds negative times too): from the rows.
        assert_eq!(
            split(None, Some(3 * H)),
            Some(Split {
                hours_from: H,
                hours_to: Some(3 * H),
                ends: vec![(i64::MIN, H)]
            })
        );
        assert_eq!(
            split(Some(-5), Some(H - 1)),
            Some(Split {
                hours_from: H,
                hours_to: Some(H),
                ends: vec![(-5, H - 1)]
            })
        );
        assert_eq!(
            split(Some(H - 1), None),
            Some(Split {
                hours_from: H,
                hours_to: None,
                ends: vec![(H - 1, H)]
            })
        );
        assert_eq!(
            split(Some(H), Some(H + 5)),
            Some(Split {
                hours_from: H,
                hours_to: Some(H),
                ends: vec![(H, H + 5)]
            })
        );
    }

    #[test]
    fn an_end_is_counted_from_the_shorter_time_first() {
        let m = 60_000;
        // 10 minutes of the hour: its own rows first, the hour less 50 minutes second.
        assert_eq!(
            Side::of((10 * H + 50 * m, 11 * H)),
            vec![
                Side::Rows((10 * H + 50 * m, 11 * H)),
                Side::HourLess {
                    hour: 10 * H,
                    rest: vec![(10 * H, 10 * H + 50 * m)]
                }
            ]
        );
        // 55 minutes from the hour's start: the hour less its last 5 minutes first.
        assert_eq!(
            Side::of((20 * H, 20 * H + 55 * m)),
            vec![
                Side::HourLess {
                    hour: 20 * H,
                    rest: vec![(20 * H + 55 * m, 21 * H)]
                },
                Side::Rows((20 * H, 20 * H + 55 * m))
            ]
        );
        // Within the hour, both sides of it left out.
        assert_eq!(
            Side::of((20 * H + 2 * m, 20 * H + 58 * m))[0],
            Side::HourLess {
                hour: 20 * H,
                rest: vec![(20 * H, 20 * H + 2 * m), (20 * H + 58 * m, 21 * H)]
            }
        );
        // Half an hour exactly: the rows.
        assert_eq!(
            Side::of((20 * H, 20 * H + 30 * m))[0],
            Side::Rows((20 * H, 20 * H + 30 * m))
        );
        // Before 01:00 on 1970-01-01: the rows only.
        assert_eq!(Side::of((i64::MIN, H)), vec![Side::Rows((i64::MIN, H))]);
        assert_eq!(Side::of((5, 55 * m)), vec![Side::Rows((5, 55 * m))]);
    }

    #[test]
    fn only_a_range_over_the_aggregate_s_dimensions_is_answered() {
        let f = |edit: fn(&mut Filter)| {
            let mut f = Filter {
                from_ms: Some(10 * H),
                dlq_topic: Some("orders.DLT".into()),
                ..Filter::default()
            };
            edit(&mut f);
            hours_answer(&f).map(|(rest, _)| rest)
        };
        let rest = f(|_| {}).expect("answered");
        assert_eq!((rest.from_ms, rest.to_ms), (None, None));
        assert_eq!(rest.dlq_topic.as_deref(), Some("orders.DLT"));
        assert!(f(|f| f.to_ms = Some(12 * H)).is_some());
        assert!(
            f(|f| f.from_ms = None).is_none(),
            "no range: the aggregate's"
        );
        assert!(f(|f| {
            f.from_ms = None;
            f.to_ms = Some(12 * H)
        })
        .is_some());
        assert!(f(|f| f.q = Some("boom".into())).is_none());
        assert!(f(|f| f.label = Some("x".into())).is_none());
        assert!(f(|f| f.unlabelled = true).is_none());
        assert!(f(|f| f.came_back = true).is_none());
    }
}
