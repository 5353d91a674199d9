//! Error groups and "N match this filter" without a scan (issue 12 item 3; migration 0027,
//! `docs/stats.md`, "Error groups per filter").
//!
//! `dl_stats_groups` counts the stored dead letters per (fingerprint, DLQ topic, source topic,
//! consumer group, error class, status, tier; migration 0035 added the two in the middle),
//! kept exact by database triggers in the same transaction as every write.
//! A filter that names only those dimensions (and the user's DLQ-topic scope) is answered
//! from it: the groups' sizes exactly, then — for the at most `limit` groups shown — their
//! first / last seen and example dead letter by index seeks on `dead_letters_by_fingerprint`.
//! A time range over those dimensions is answered from their hours (`group_hours.rs`,
//! migration 0036) while its partial end hours stay small. Any other filter (free text,
//! labels, came back, a replay job, a range whose end hour holds too many rows) is answered
//! from the newest [`GROUPS_SCAN_ROWS`] matching rows only, and says so
//! ([`GroupsCounted::AmongNewest`]).

use sqlx::QueryBuilder;

use super::dialect::{store_error, Dialect, Val};
use super::rows::GroupRow;
use super::search_sql::is_sqlite;
use super::{sql, Pool, Store, StoreError};
use crate::filter::Filter;
use crate::model::{ErrorGroup, Status};

/// How many of the newest matching dead letters the groups of a filter the aggregate cannot
/// answer are counted among (100,000: a few tens of ms of index reads at 10M rows).
pub const GROUPS_SCAN_ROWS: i64 = 100_000;

/// How an error-group list's counts were taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GroupsCounted {
    /// Every matching dead letter is counted: from the maintained aggregate, or a filter
    /// matching fewer than [`GROUPS_SCAN_ROWS`] dead letters.
    Exact,
    /// Only the newest this many matching dead letters (by `dead_lettered_at_ms`, then id) are
    /// counted: more match, and the filter names something the aggregate does not keep. A
    /// group's count is then "at least", and a group whose dead letters are all older is
    /// missing.
    AmongNewest(i64),
}

/// The error groups of a filter ([`Store::error_groups_counted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// Largest first (ties: latest `last_seen_ms`, then fingerprint), at most the limit asked.
    pub groups: Vec<ErrorGroup>,
    pub counted: GroupsCounted,
}

/// True when `f` names only what `dl_stats_groups` keeps: fingerprint, DLQ topic, source
/// topic, consumer group, error class, status, tier, and the user's DLQ-topic scope.
pub(crate) fn aggregate_answers(f: &Filter) -> bool {
    // Every field named, so that a new one cannot be left out (a filter the aggregate does
    // not keep would be counted as if it were not there).
    let Filter {
        fingerprint: _,
        dlq_topic: _,
        source_topic: _,
        status: _,
        tier: _,
        dlq_topic_in: _,
        error_class: _,
        consumer_group: _,
        q,
        from_ms,
        to_ms,
        label,
        unlabelled,
        came_back,
        replay_job,
        came_back_from_job,
    } = f;
    q.is_none()
        && from_ms.is_none()
        && to_ms.is_none()
        && label.is_none()
        && !unlabelled
        && !came_back
        && replay_job.is_none()
        && came_back_from_job.is_none()
}

/// Appends the ` WHERE ...` of `f` over `dl_stats_groups` (`aggregate_answers(f)` holds).
pub(crate) fn push_aggregate_filter<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, f: &'a Filter) {
    let (op, status) = match f.status {
        Some(s) => (" = ", s),
        None => (" <> ", Status::Deleted),
    };
    qb.push(" WHERE status").push(op);
    DB::bind(qb, Val::Text(Some(status.as_str())));
    // '' stands for "none" in the aggregate; a filter value is never empty (`filter.rs`).
    for (column, value) in [
        ("fingerprint", &f.fingerprint),
        ("dlq_topic", &f.dlq_topic),
        ("source_topic", &f.source_topic),
        ("consumer_group", &f.consumer_group),
        ("error_class", &f.error_class),
    ] {
        if let Some(v) = value {
            qb.push(" AND ").push(column).push(" = ");
            DB::bind(qb, Val::Text(Some(v.as_str())));
        }
    }
    match f.tier.map(|t| t.tier()) {
        Some(Some(t)) => {
            qb.push(" AND tier = ");
            DB::bind(qb, Val::Text(Some(t.as_str())));
        }
        Some(None) => {
            qb.push(" AND tier = ''");
        }
        None => {
            qb.push(" AND tier <> 'archive'");
        }
    }
    sql::push_topic_in(qb, f.dlq_topic_in.as_deref());
}

/// Appends ` AND ...` conditions selecting, among the rows `d` of one fingerprint, those
/// `f` matches (`aggregate_answers(f)` holds). Each is written so no index can serve it
/// (`d.status || ''`, `COALESCE(...)`): the only index the seek may use is
/// `dead_letters_by_fingerprint`, in `(dead_lettered_at_ms, id)` order, whatever the
/// planner thinks of a DLQ topic's or a status's index.
pub(crate) fn push_seek_filter<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, f: &'a Filter) {
    match f.status {
        Some(s) => {
            qb.push(" AND d.status || '' = ");
            DB::bind(qb, Val::Text(Some(s.as_str())));
        }
        None => {
            qb.push(" AND d.status <> 'deleted'");
        }
    }
    if let Some(t) = &f.dlq_topic {
        qb.push(" AND d.dlq_topic || '' = ");
        DB::bind(qb, Val::Text(Some(t.as_str())));
    }
    for (column, value) in [
        ("source_topic", &f.source_topic),
        ("consumer_group", &f.consumer_group),
        ("error_class", &f.error_class),
    ] {
        if let Some(v) = value {
            qb.push(" AND COALESCE(d.").push(column).push(", '') = ");
            DB::bind(qb, Val::Text(Some(v.as_str())));
        }
    }
    match f.tier.map(|t| t.tier()) {
        Some(Some(t)) => {
            qb.push(" AND COALESCE(d.tier, '') = ");
            DB::bind(qb, Val::Text(Some(t.as_str())));
        }
        Some(None) => {
            qb.push(" AND d.tier IS NULL");
        }
        None => {
            qb.push(" AND COALESCE(d.tier, '') <> 'archive'");
        }
    }
    if let Some(topics) = f.dlq_topic_in.as_deref() {
        qb.push(" AND d.dlq_topic || '' IN (NULL");
        for t in topics {
            qb.push(", ");
            DB::bind(qb, Val::Text(Some(t.as_str())));
        }
        qb.push(")");
    }
}

/// The largest `limit` groups of `f` from `dl_stats_groups`, with their first seen, last seen
/// and example (the newest matching row) by seeks in `dead_letters_by_fingerprint`. One
/// statement, so counts and seeks read one snapshot.
fn aggregate_groups<DB: Dialect>(f: &Filter, limit: i64) -> QueryBuilder<'_, DB> {
    let mut qb = QueryBuilder::new(
        "SELECT x.fingerprint, x.n, x.first_seen_ms, e.dead_lettered_at_ms AS last_seen_ms, \
         e.error_class, e.error_message FROM (SELECT g.fingerprint, g.n, \
         (SELECT d.dead_lettered_at_ms FROM dead_letters d WHERE d.fingerprint = g.fingerprint",
    );
    push_seek_filter(&mut qb, f);
    qb.push(
        " ORDER BY d.dead_lettered_at_ms, d.id LIMIT 1) AS first_seen_ms, \
         (SELECT d.id FROM dead_letters d WHERE d.fingerprint = g.fingerprint",
    );
    push_seek_filter(&mut qb, f);
    qb.push(
        " ORDER BY d.dead_lettered_at_ms DESC, d.id DESC LIMIT 1) AS example_id \
         FROM (SELECT fingerprint, CAST(SUM(n) AS BIGINT) AS n, MAX(last_seen_ms) AS last_bound \
         FROM dl_stats_groups",
    );
    push_aggregate_filter(&mut qb, f);
    qb.push(
        " GROUP BY fingerprint HAVING SUM(n) > 0 \
         ORDER BY 2 DESC, 3 DESC, 1 LIMIT ",
    );
    DB::bind(&mut qb, Val::I64(Some(limit)));
    qb.push(
        ") g) x JOIN dead_letters e ON e.id = x.example_id \
         ORDER BY x.n DESC, e.dead_lettered_at_ms DESC, x.fingerprint",
    );
    qb
}

/// `(dead_lettered_at_ms, id) >= bound`, spelled as `page_with`'s cursor is.
fn push_at_or_after<DB: Dialect>(qb: &mut QueryBuilder<'_, DB>, bound: (i64, i64)) {
    qb.push(" AND dead_lettered_at_ms >= ");
    DB::bind(qb, Val::I64(Some(bound.0)));
    qb.push(" AND (dead_lettered_at_ms > ");
    DB::bind(qb, Val::I64(Some(bound.0)));
    qb.push(" OR id >= ");
    DB::bind(qb, Val::I64(Some(bound.1)));
    qb.push(")");
}

/// The groups of the rows matching `f` at or after `bound` (all of them for `None`), largest
/// first; the example is the group's newest row by id.
fn scanned_groups<DB: Dialect>(
    f: &Filter,
    bound: Option<(i64, i64)>,
    limit: i64,
) -> QueryBuilder<'_, DB> {
    let mut qb = QueryBuilder::new(
        "SELECT g.fingerprint, g.n, g.first_seen_ms, g.last_seen_ms, \
         d.error_class, d.error_message \
         FROM (SELECT fingerprint, CAST(COUNT(*) AS BIGINT) AS n, \
               MIN(dead_lettered_at_ms) AS first_seen_ms, \
               MAX(dead_lettered_at_ms) AS last_seen_ms, \
               MAX(id) AS example_id \
               FROM dead_letters",
    );
    sql::push_filter(&mut qb, f);
    if let Some(b) = bound {
        push_at_or_after(&mut qb, b);
    }
    qb.push(
        " GROUP BY fingerprint \
         ORDER BY n DESC, last_seen_ms DESC, fingerprint LIMIT ",
    );
    DB::bind(&mut qb, Val::I64(Some(limit)));
    qb.push(
        ") g JOIN dead_letters d ON d.id = g.example_id \
         ORDER BY g.n DESC, g.last_seen_ms DESC, g.fingerprint",
    );
    qb
}

impl Store {
    /// Error groups of the dead letters matching `filter`, largest first, at most `limit`,
    /// and how they were counted.
    ///
    /// A filter naming only fingerprint, DLQ topic, source topic, consumer group, error class,
    /// status and tier is answered from the maintained aggregate (migrations 0027, 0035):
    /// exact counts, no scan; the first / last seen (ms) and the example (class and message of the group's newest matching dead
    /// letter) are read for the shown groups only. Those with a time range are answered the
    /// same way from the hours of migration 0036 (exact; the range's partial end hours counted
    /// from at most `EDGE_SCAN_ROWS` rows each, `group_hours.rs`). Any other filter, or a range
    /// whose end hour holds more, counts the newest
    /// [`GROUPS_SCAN_ROWS`] matching dead letters ([`GroupsCounted::AmongNewest`] when more
    /// match; the example is then the newest stored by id among them). Ties: latest
    /// `last_seen_ms`, then fingerprint (on the aggregate path the cut at `limit` among
    /// equal counts uses the latest arrival ever counted under the group's keys). Each group
    /// carries its triage labels and note.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn error_groups_counted(
        &self,
        filter: &Filter,
        limit: u32,
    ) -> Result<GroupListing, StoreError> {
        self.error_groups_scanning(filter, limit, GROUPS_SCAN_ROWS)
            .await
    }

    /// [`Store::error_groups_counted`] with the bound of the fallback scan chosen
    /// (`scan_rows` ≥ 1 newest matching dead letters; tests use a small one).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn error_groups_scanning(
        &self,
        filter: &Filter,
        limit: u32,
        scan_rows: i64,
    ) -> Result<GroupListing, StoreError> {
        let limit = i64::from(limit);
        let scan_rows = scan_rows.max(1);
        let edge_rows = scan_rows.min(super::group_hours::EDGE_SCAN_ROWS);
        if let Some(mut groups) = self.groups_by_hour(filter, limit, edge_rows).await? {
            // A time range over the aggregate's dimensions (migration 0036).
            self.attach_group_triage(&mut groups).await?;
            return Ok(GroupListing {
                groups,
                counted: GroupsCounted::Exact,
            });
        }
        let (rows, counted): (Vec<GroupRow>, GroupsCounted) = if aggregate_answers(filter) {
            let rows = on_pool!(self, |pool, DB| {
                // Kept prepared: its text depends only on which dimensions the filter names,
                // and on PostgreSQL planning it took longer than running it (1.9 ms against
                // 1.5 ms at 1M rows).
                let mut qb = aggregate_groups::<DB>(filter, limit);
                if is_sqlite::<DB>() {
                    qb.build_query_as()
                        .fetch_all(pool)
                        .await
                        .map_err(store_error)
                } else {
                    // PostgreSQL estimates each of the seeks' conditions it has no statistics
                    // for (`COALESCE(d.consumer_group, '') = ...`) at 0.5 %: with two, it
                    // expects no row of a group to match and reads all of them (a bitmap
                    // scan, then a sort) instead of walking the index to the first match,
                    // 170 ms for a group of 20,000 (`docs/bench.md`, "2026-12-07").
                    let mut tx = super::gate::begin_read(pool).await?;
                    sqlx::query("SET LOCAL enable_bitmapscan = off")
                        .execute(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    let rows = qb
                        .build_query_as()
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    tx.rollback().await.map_err(store_error)?;
                    Ok(rows)
                }
            })?;
            (rows, GroupsCounted::Exact)
        } else {
            on_pool!(self, |pool, DB| {
                // The newest `scan_rows`-th match and whether one more follows it.
                let mut qb = sql::page::<DB>("", "dead_lettered_at_ms, id", filter, None, 2);
                qb.push(" OFFSET ");
                DB::bind(&mut qb, Val::I64(Some(scan_rows - 1)));
                let edge: Vec<(i64, i64)> = qb
                    .build_query_as()
                    .persistent(false)
                    .fetch_all(pool)
                    .await
                    .map_err(store_error)?;
                // Exactly `scan_rows` matches are still every match.
                let bound = (edge.len() > 1).then(|| edge[0]);
                let mut qb = scanned_groups::<DB>(filter, bound, limit);
                let rows = qb
                    .build_query_as()
                    .persistent(false)
                    .fetch_all(pool)
                    .await
                    .map_err(store_error)?;
                let counted = match bound {
                    Some(_) => GroupsCounted::AmongNewest(scan_rows),
                    None => GroupsCounted::Exact,
                };
                Ok::<_, StoreError>((rows, counted))
            })?
        };
        let mut groups: Vec<ErrorGroup> = rows.into_iter().map(ErrorGroup::from).collect();
        self.attach_group_triage(&mut groups).await?;
        Ok(GroupListing { groups, counted })
    }

    /// How many dead letters match `filter` exactly, from the maintained aggregate (migration
    /// 0027), or for a time range from its hours (migration 0036, [`Store::count_by_hour`]);
    /// `None` when the filter names something neither keeps ([`aggregate_answers`]) or a
    /// range's partial end holds too many rows.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub(crate) async fn aggregate_count(&self, filter: &Filter) -> Result<Option<i64>, StoreError> {
        if !aggregate_answers(filter) {
            // A time range: from the hours' aggregate (migration 0036) when it can answer.
            return self.count_by_hour(filter).await;
        }
        let n: Option<i64> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("SELECT CAST(SUM(n) AS BIGINT) FROM dl_stats_groups");
            push_aggregate_filter(&mut qb, filter);
            qb.build_query_scalar()
                .persistent(false)
                .fetch_one(pool)
                .await
        })
        .map_err(store_error)?;
        Ok(Some(n.unwrap_or(0)))
    }
}
