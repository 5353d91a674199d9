//! Reading the maintained aggregates of migration 0006 (see `docs/stats.md`): counts per
//! (DLQ topic, source topic, status), arrivals per minute and per hour, and per error group
//! first/last seen. Database triggers on `dead_letters` keep those tables exact in the same
//! transaction as every insert, status change and row deletion; everything here reads only
//! them plus index seeks (the oldest dead letter per (DLQ topic, source topic, status) is one
//! seek in `dead_letters_by_pair_status`), never a scan of `dead_letters`, so it stays cheap at
//! 10M rows. The overview page, `/metrics` and the alert rules read these.
//!
//! "Live" means every status but `deleted`, as in the list's default [`crate::Filter`]: a
//! live count equals the number of rows the list shows for the same DLQ/source topic.
//! Arrival buckets are an arrival history keyed on `dead_lettered_at_ms` (floored to the
//! minute/hour, UTC epoch): a later status change or a purge does not take an arrival back.
//! Minute buckets also hold `live_n` (migration 0010): of those arrivals, the ones stored now
//! and not deleted — what "new in the last hour / 24 h" count, so that they equal the list
//! `/?from=<window start>` their links open.

mod snapshot;

use std::collections::{BTreeMap, HashMap};

use sqlx::QueryBuilder;

pub use self::snapshot::*;
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::filter::Filter;
use crate::model::Status;

/// '' in the aggregates = no source topic.
pub(super) fn source(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

#[derive(sqlx::FromRow)]
struct CountRow {
    dlq_topic: String,
    source_topic: String,
    status: String,
    n: i64,
    bytes: i64,
    oldest_ms: Option<i64>,
}

#[derive(sqlx::FromRow)]
struct WindowRow {
    dlq_topic: String,
    source_topic: String,
    last_hour: i64,
    last_day: i64,
}

#[derive(sqlx::FromRow)]
struct PairCountRow {
    dlq_topic: String,
    source_topic: String,
    n: i64,
}

#[derive(sqlx::FromRow)]
struct BucketRow {
    dlq_topic: String,
    source_topic: String,
    start_ms: i64,
    n: i64,
}

#[derive(sqlx::FromRow)]
struct GroupRow {
    fingerprint: String,
    first_seen_ms: i64,
    last_seen_ms: i64,
    n: i64,
    dlq_topic: String,
    source_topic: String,
    error_class: Option<String>,
}

impl From<GroupRow> for GroupStats {
    fn from(r: GroupRow) -> Self {
        GroupStats {
            fingerprint: r.fingerprint,
            first_seen_ms: r.first_seen_ms,
            last_seen_ms: r.last_seen_ms,
            stored: r.n,
            dlq_topic: r.dlq_topic,
            source_topic: source(r.source_topic),
            error_class: r.error_class,
        }
    }
}

const GROUP_COLUMNS: &str =
    "fingerprint, first_seen_ms, last_seen_ms, n, dlq_topic, source_topic, error_class";

/// The count rows with their oldest dead letter, one index seek each. The two branches keep
/// each seek an equality lookup (`IS NULL` for the '' source topic).
const COUNTS_SQL: &str = "SELECT c.dlq_topic, c.source_topic, c.status, \
     CAST(c.n AS BIGINT) AS n, CAST(c.bytes AS BIGINT) AS bytes, \
     CASE WHEN c.source_topic = '' THEN \
       (SELECT MIN(d.dead_lettered_at_ms) FROM dead_letters d WHERE d.dlq_topic = c.dlq_topic \
         AND d.source_topic IS NULL AND d.status = c.status) \
     ELSE \
       (SELECT MIN(d.dead_lettered_at_ms) FROM dead_letters d WHERE d.dlq_topic = c.dlq_topic \
         AND d.source_topic = c.source_topic AND d.status = c.status) \
     END AS oldest_ms \
     FROM dl_stats_counts c WHERE c.n > 0 ORDER BY c.n DESC, c.dlq_topic, c.source_topic, c.status \
     LIMIT ";

impl Store {
    /// A snapshot of the aggregates at `now_ms` (epoch ms): per (DLQ topic, source topic)
    /// counts and bytes per status, the oldest stored dead letter per status, live arrivals
    /// in the last hour and 24 h (dead letters dead-lettered since the window start, to the
    /// minute, that are stored now and not deleted: see [`StatsSnapshot::hour_since_ms`]), error groups
    /// (total, new in 24 h) and replay jobs per status.
    ///
    /// Cost: reads the aggregate tables (at most [`STATS_ROW_CAP`] count rows, one index seek
    /// each, and up to 1,440 minute buckets per pair) and `replay_jobs`; never scans
    /// `dead_letters`. Errors: `Unavailable`, `Database`, `Corrupt` (an unknown status).
    pub async fn stats(&self, now_ms: i64) -> Result<StatsSnapshot, StoreError> {
        let hour_since_ms = Resolution::Minute.floor(now_ms - HOUR_MS);
        let day_since_ms = Resolution::Minute.floor(now_ms - 24 * HOUR_MS);
        let rows: Vec<CountRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(COUNTS_SQL);
            DB::bind(&mut qb, Val::I64(Some(STATS_ROW_CAP + 1)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let truncated = rows.len() as i64 > STATS_ROW_CAP;

        let mut pairs: BTreeMap<(String, String), TopicStats> = BTreeMap::new();
        for r in rows.into_iter().take(STATS_ROW_CAP as usize) {
            let status = parse_status(&r.status)?;
            let e = pair_entry(&mut pairs, r.dlq_topic, r.source_topic);
            *e.counts.get_mut(status) = r.n;
            *e.bytes.get_mut(status) = r.bytes;
            *e.oldest_ms.get_mut(status) = r.oldest_ms;
        }
        if truncated {
            self.fold_remainder(&mut pairs).await?;
        }

        let windows: Vec<WindowRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT dlq_topic, source_topic, \
                 CAST(SUM(CASE WHEN minute_ms >= ",
            );
            DB::bind(&mut qb, Val::I64(Some(hour_since_ms)));
            qb.push(
                " THEN live_n ELSE 0 END) AS BIGINT) AS last_hour, \
                 CAST(SUM(live_n) AS BIGINT) AS last_day \
                 FROM dl_stats_minutes WHERE minute_ms >= ",
            );
            DB::bind(&mut qb, Val::I64(Some(day_since_ms)));
            qb.push(" GROUP BY dlq_topic, source_topic");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        for w in windows {
            // Arrivals into a pair that has nothing stored any more still count.
            let key = (w.dlq_topic, w.source_topic);
            if !truncated || pairs.contains_key(&key) {
                let e = pair_entry(&mut pairs, key.0, key.1);
                e.new_last_hour = w.last_hour;
                e.new_last_24h = w.last_day;
            }
        }

        let new_groups: Vec<PairCountRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT dlq_topic, source_topic, CAST(COUNT(*) AS BIGINT) AS n \
                 FROM dl_stats_fingerprints WHERE first_seen_ms >= ",
            );
            DB::bind(&mut qb, Val::I64(Some(day_since_ms)));
            qb.push(" GROUP BY dlq_topic, source_topic");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let mut error_groups_new_24h = 0;
        for g in new_groups {
            error_groups_new_24h += g.n;
            if let Some(e) = pairs.get_mut(&(g.dlq_topic, g.source_topic)) {
                e.new_groups_24h = g.n;
            }
        }

        let error_groups_total: i64 = on_pool!(self, |pool, _DB| {
            sqlx::query_scalar(
                "SELECT CAST(COUNT(*) AS BIGINT) FROM dl_stats_fingerprints WHERE n > 0",
            )
            .fetch_one(pool)
            .await
        })
        .map_err(store_error)?;

        let replay_jobs = self.job_counts().await?;

        let mut pairs: Vec<TopicStats> = pairs.into_values().collect();
        pairs.sort_by(|a, b| {
            b.counts
                .live()
                .cmp(&a.counts.live())
                .then_with(|| b.new_last_24h.cmp(&a.new_last_24h))
        });
        Ok(StatsSnapshot {
            at_ms: now_ms,
            hour_since_ms,
            day_since_ms,
            pairs,
            truncated,
            error_groups_total,
            error_groups_new_24h,
            replay_jobs,
        })
    }

    /// Replay jobs per status and the sum of their published / failed records. Reads
    /// `replay_jobs` (one row per job ever created) and the tally rows of running jobs. Errors: `Unavailable`, `Database`.
    pub async fn job_counts(&self) -> Result<JobCounts, StoreError> {
        let rows: Vec<(String, i64, i64, i64)> = on_pool!(self, |pool, _DB| {
            sqlx::query_as(&format!(
                "SELECT status, CAST(COUNT(*) AS BIGINT), CAST(COALESCE(SUM({}), 0) AS BIGINT), \
                 CAST(COALESCE(SUM({}), 0) AS BIGINT) FROM replay_jobs GROUP BY status",
                crate::store::job_tallies::counter("published"),
                crate::store::job_tallies::counter("failed"),
            ))
            .fetch_all(pool)
            .await
        })
        .map_err(store_error)?;
        let mut c = JobCounts::default();
        for (status, n, published, failed) in rows {
            match status.as_str() {
                "preparing" => c.preparing = n,
                "running" => c.running = n,
                "waiting" => c.waiting = n,
                "finished" => c.finished = n,
                "cancelled" => c.cancelled = n,
                _ => {}
            }
            c.published += published;
            c.failed += failed;
        }
        Ok(c)
    }

    /// Arrivals per bucket of `resolution` with `from_ms <= start < to_ms` (epoch ms), per
    /// (DLQ topic, source topic) in `scope`, oldest first; at most [`ARRIVALS_CAP`] buckets
    /// (the newest). Buckets with no arrival are absent. Older than the kept window
    /// ([`MINUTES_KEPT_MS`], [`HOURS_KEPT_MS`]) there is nothing.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn arrivals(
        &self,
        resolution: Resolution,
        from_ms: i64,
        to_ms: i64,
        scope: &ArrivalScope,
    ) -> Result<Vec<ArrivalBucket>, StoreError> {
        let (table, column) = resolution.table();
        let mut rows: Vec<BucketRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT dlq_topic, source_topic, {column} AS start_ms, CAST(n AS BIGINT) AS n \
                 FROM {table} WHERE {column} >= "
            ));
            DB::bind(&mut qb, Val::I64(Some(from_ms)));
            qb.push(format!(" AND {column} < "));
            DB::bind(&mut qb, Val::I64(Some(to_ms)));
            if let Some(t) = &scope.dlq_topic {
                qb.push(" AND dlq_topic = ");
                DB::bind(&mut qb, Val::Text(Some(t.as_str())));
            }
            if let Some(t) = &scope.source_topic {
                qb.push(" AND source_topic = ");
                DB::bind(&mut qb, Val::Text(Some(t.as_str())));
            }
            super::sql::push_topic_in(&mut qb, scope.dlq_topic_in.as_deref());
            qb.push(format!(" ORDER BY {column} DESC LIMIT "));
            DB::bind(&mut qb, Val::I64(Some(ARRIVALS_CAP)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        rows.reverse();
        Ok(rows
            .into_iter()
            .map(|r| ArrivalBucket {
                dlq_topic: r.dlq_topic,
                source_topic: source(r.source_topic),
                start_ms: r.start_ms,
                count: r.n,
            })
            .collect())
    }

    /// Arrivals in `scope` summed per bucket: `(bucket start ms, count)` for every bucket of
    /// `[floor(from_ms), to_ms)`, zeros included, oldest first — a chart's series.
    ///
    /// Errors: as [`Store::arrivals`].
    pub async fn arrival_series(
        &self,
        resolution: Resolution,
        from_ms: i64,
        to_ms: i64,
        scope: &ArrivalScope,
    ) -> Result<Vec<(i64, i64)>, StoreError> {
        let start = resolution.floor(from_ms);
        let buckets = self.arrivals(resolution, start, to_ms, scope).await?;
        let mut sums: HashMap<i64, i64> = HashMap::new();
        for b in buckets {
            *sums.entry(b.start_ms).or_default() += b.count;
        }
        let w = resolution.bucket_ms();
        let mut out = Vec::new();
        let mut t = start;
        while t < to_ms {
            out.push((t, sums.get(&t).copied().unwrap_or(0)));
            t += w;
        }
        Ok(out)
    }

    /// Error groups first seen at or after `since_ms` (epoch ms), newest first, at most
    /// `limit` (an index range on `first_seen_ms`). Errors: `Unavailable`, `Database`.
    pub async fn new_error_groups(
        &self,
        since_ms: i64,
        limit: u32,
    ) -> Result<Vec<GroupStats>, StoreError> {
        let rows: Vec<GroupRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {GROUP_COLUMNS} FROM dl_stats_fingerprints WHERE first_seen_ms >= "
            ));
            DB::bind(&mut qb, Val::I64(Some(since_ms)));
            qb.push(" ORDER BY first_seen_ms DESC, fingerprint LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(i64::from(limit))));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        Ok(rows.into_iter().map(GroupStats::from).collect())
    }

    /// The aggregates of the given error groups (primary-key lookups; unknown ones are
    /// absent), in no particular order. Errors: `Unavailable`, `Database`.
    pub async fn error_group_stats(
        &self,
        fingerprints: &[String],
    ) -> Result<Vec<GroupStats>, StoreError> {
        if fingerprints.is_empty() {
            return Ok(Vec::new());
        }
        let json =
            serde_json::to_string(fingerprints).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let rows: Vec<GroupRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {GROUP_COLUMNS} FROM dl_stats_fingerprints WHERE fingerprint IN "
            ));
            push_json_texts::<DB>(&mut qb, json);
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        Ok(rows.into_iter().map(GroupStats::from).collect())
    }

    /// Hourly arrivals of the given error groups between `from_ms` and `to_ms` (epoch ms):
    /// fingerprint → `(hour start ms, count)` for every hour of `[floor_hour(from_ms),
    /// to_ms)`, zeros included, oldest first (the groups page's sparkline). Hours that start
    /// at or after `to_ms` are not read. Kept [`GROUP_HOURS_KEPT_MS`].
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn error_group_trends(
        &self,
        fingerprints: &[String],
        from_ms: i64,
        to_ms: i64,
    ) -> Result<HashMap<String, Vec<(i64, i64)>>, StoreError> {
        if fingerprints.is_empty() {
            return Ok(HashMap::new());
        }
        let start = Resolution::Hour.floor(from_ms);
        let json =
            serde_json::to_string(fingerprints).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let rows: Vec<(String, i64, i64)> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT fingerprint, hour_ms, CAST(n AS BIGINT) FROM dl_stats_fingerprint_hours \
                 WHERE hour_ms >= ",
            );
            DB::bind(&mut qb, Val::I64(Some(start)));
            qb.push(" AND hour_ms < ");
            DB::bind(&mut qb, Val::I64(Some(to_ms)));
            qb.push(" AND fingerprint IN ");
            push_json_texts::<DB>(&mut qb, json);
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let mut sums: HashMap<(String, i64), i64> = HashMap::new();
        for (f, h, n) in rows {
            sums.insert((f, h), n);
        }
        let mut out = HashMap::new();
        for f in fingerprints {
            let mut series = Vec::new();
            let mut t = start;
            while t < to_ms {
                series.push((t, sums.get(&(f.clone(), t)).copied().unwrap_or(0)));
                t += HOUR_MS;
            }
            out.insert(f.clone(), series);
        }
        Ok(out)
    }

    /// [`Store::error_group_trends`] and [`Store::error_group_stats`] of the same groups, read
    /// at once on two connections (the groups page needs both after its groups).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn error_group_trends_and_stats(
        &self,
        fingerprints: &[String],
        from_ms: i64,
        to_ms: i64,
    ) -> Result<(HashMap<String, Vec<(i64, i64)>>, Vec<GroupStats>), StoreError> {
        tokio::try_join!(
            self.error_group_trends(fingerprints, from_ms, to_ms),
            self.error_group_stats(fingerprints)
        )
    }

    /// How many dead letters match `filter`, never more than `cap + 1` rows read: from the
    /// error-group aggregate (migration 0027) when the filter names only fingerprint, DLQ
    /// topic, source topic, status and tier (exact), otherwise a count of at most `cap + 1`
    /// index entries (`Exact` below the cap, `MoreThan(cap)` above). With free text (`q`), the search's bounded steps
    /// (`store/search.rs`): exact when they see every match, else `AtLeast`.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn count_matching(
        &self,
        filter: &Filter,
        cap: i64,
    ) -> Result<MatchCount, StoreError> {
        if let Some(n) = self.aggregate_count(filter).await? {
            return Ok(MatchCount::Exact(n));
        }
        if let Some(q) = filter.q.as_deref() {
            // Free text: bounded as the list is (`search.rs`).
            return self.search_count(filter, q, cap).await;
        }
        let n: i64 = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT CAST(COUNT(*) AS BIGINT) FROM (SELECT 1 FROM dead_letters",
            );
            super::sql::push_filter(&mut qb, filter);
            qb.push(" LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(cap + 1)));
            qb.push(") AS bounded");
            qb.build_query_scalar().fetch_one(pool).await
        })
        .map_err(store_error)?;
        Ok(if n > cap {
            MatchCount::MoreThan(cap)
        } else {
            MatchCount::Exact(n)
        })
    }

    /// Drops arrival buckets older than they are kept, relative to `now_ms` (epoch ms):
    /// minutes beyond [`MINUTES_KEPT_MS`], error-group hours beyond [`GROUP_HOURS_KEPT_MS`],
    /// and count rows at zero. Hour buckets beyond [`HOURS_KEPT_MS`] are folded into the
    /// pair's bucket `hour_ms = 0` (in one transaction), so [`Store::arrival_totals`] stays
    /// a total ever. Counts and first/last seen are never dropped. `serve` runs it every few
    /// minutes; returns the rows removed. Errors: `Unavailable`, `Database`.
    pub async fn compact_stats(&self, now_ms: i64) -> Result<u64, StoreError> {
        let steps: [(&str, i64); 2] = [
            (
                "DELETE FROM dl_stats_minutes WHERE minute_ms < ",
                now_ms - MINUTES_KEPT_MS,
            ),
            (
                "DELETE FROM dl_stats_fingerprint_hours WHERE hour_ms < ",
                now_ms - GROUP_HOURS_KEPT_MS,
            ),
        ];
        let mut removed = 0;
        for (sql, cut) in steps {
            removed += on_write_conn!(self, |conn, DB| {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(sql);
                DB::bind(&mut qb, Val::I64(Some(cut)));
                qb.build()
                    .execute(&mut *conn)
                    .await
                    .map(|r| r.rows_affected())
            })
            .map_err(store_error)?;
        }
        let cut = now_ms - HOURS_KEPT_MS;
        removed += on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let n = async {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "INSERT INTO dl_stats_hours AS h (dlq_topic, source_topic, hour_ms, n) \
                     SELECT dlq_topic, source_topic, 0, SUM(n) FROM dl_stats_hours \
                     WHERE hour_ms <> 0 AND hour_ms < ",
                );
                DB::bind(&mut qb, Val::I64(Some(cut)));
                qb.push(
                    " GROUP BY dlq_topic, source_topic ORDER BY dlq_topic, source_topic \
                     ON CONFLICT (dlq_topic, source_topic, hour_ms) DO UPDATE SET n = h.n + excluded.n",
                );
                qb.build().execute(&mut *tx).await?;
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "DELETE FROM dl_stats_hours WHERE hour_ms <> 0 AND hour_ms < ",
                );
                DB::bind(&mut qb, Val::I64(Some(cut)));
                let n = qb.build().execute(&mut *tx).await?.rows_affected();
                Ok::<u64, sqlx::Error>(n)
            }
            .await
            .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<u64, StoreError>(n)
        })?;
        // `n = 0 AND bytes = 0` in the DELETE itself: a row a concurrent writer has just
        // incremented is not removed.
        removed += on_write_conn!(self, |conn, _DB| {
            sqlx::query("DELETE FROM dl_stats_counts WHERE n = 0 AND bytes = 0")
                .execute(&mut *conn)
                .await
                .map(|r| r.rows_affected())
        })
        .map_err(store_error)?;
        // Migration 0027's error-group keys, and 0036's hours of them, nothing is stored
        // under any more.
        for sql in [
            "DELETE FROM dl_stats_groups WHERE n = 0",
            "DELETE FROM dl_stats_group_hours WHERE n = 0",
        ] {
            removed += on_write_conn!(self, |conn, _DB| {
                sqlx::query(sql)
                    .execute(&mut *conn)
                    .await
                    .map(|r| r.rows_affected())
            })
            .map_err(store_error)?;
        }
        Ok(removed)
    }

    /// Dead letters ever stored per (DLQ topic, source topic) since the aggregates exist
    /// (migration 0006; rows stored before it count from their last 35 days): the sum of the
    /// hour buckets, compaction folding old ones into bucket 0. Never decreases, purges
    /// included — the `redrive_dead_letters_ingested_by_topic_total` counter. Largest first,
    /// at most `limit` pairs, and — when more pairs exist — the exact sum of all the others
    /// (`Some(rest)`). Errors: `Unavailable`, `Database`.
    pub async fn arrival_totals(
        &self,
        limit: u32,
    ) -> Result<(Vec<ArrivalTotal>, Option<i64>), StoreError> {
        let rows: Vec<PairCountRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT dlq_topic, source_topic, CAST(SUM(n) AS BIGINT) AS n FROM dl_stats_hours \
                 GROUP BY dlq_topic, source_topic ORDER BY 3 DESC, 1, 2 LIMIT ",
            );
            DB::bind(&mut qb, Val::I64(Some(i64::from(limit) + 1)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let truncated = rows.len() > limit as usize;
        let top: Vec<ArrivalTotal> = rows
            .into_iter()
            .take(limit as usize)
            .map(|r| ArrivalTotal {
                dlq_topic: r.dlq_topic,
                source_topic: source(r.source_topic),
                total: r.n,
            })
            .collect();
        // What the cut left out, exactly: the grand total minus the pairs returned.
        let rest = if truncated {
            let all: Option<i64> = on_pool!(self, |pool, DB| {
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("SELECT CAST(SUM(n) AS BIGINT) FROM dl_stats_hours");
                qb.build_query_scalar().fetch_one(pool).await
            })
            .map_err(store_error)?;
            Some(all.unwrap_or(0) - top.iter().map(|a| a.total).sum::<i64>())
        } else {
            None
        };
        Ok((top, rest))
    }
}

fn parse_status(s: &str) -> Result<Status, StoreError> {
    Status::parse(s)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown status `{s}` in dl_stats_counts")))
}

#[derive(sqlx::FromRow)]
struct TopicStatusRow {
    dlq_topic: String,
    status: String,
    n: i64,
    bytes: i64,
}

impl Store {
    /// When [`STATS_ROW_CAP`] cut the (DLQ topic, source topic, status) rows, adds what was
    /// cut back per DLQ topic and status, under the source topic [`OTHER_SOURCES`]: the
    /// per-DLQ-topic figures and the totals stay exact however many source topics exist.
    /// Reads `dl_stats_counts` grouped by (DLQ topic, status) — a result bounded by the DLQ
    /// topics — and, per remainder, the oldest row through the `(dlq_topic, dead_lettered_at_ms)`
    /// index.
    async fn fold_remainder(
        &self,
        pairs: &mut BTreeMap<(String, String), TopicStats>,
    ) -> Result<(), StoreError> {
        let exact: Vec<TopicStatusRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT dlq_topic, status, CAST(SUM(n) AS BIGINT) AS n, \
                 CAST(SUM(bytes) AS BIGINT) AS bytes FROM dl_stats_counts WHERE n > 0 \
                 GROUP BY dlq_topic, status",
            );
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        for r in exact {
            let status = parse_status(&r.status)?;
            let (mut n, mut bytes) = (0i64, 0i64);
            for ((dlq, _), p) in pairs.iter() {
                if *dlq == r.dlq_topic {
                    n += p.counts.get(status);
                    bytes += p.bytes.get(status);
                }
            }
            if r.n <= n {
                continue;
            }
            let oldest: Option<i64> = on_pool!(self, |pool, DB| {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "SELECT MIN(dead_lettered_at_ms) FROM dead_letters WHERE dlq_topic = ",
                );
                DB::bind(&mut qb, Val::Text(Some(r.dlq_topic.as_str())));
                qb.push(" AND status = ");
                DB::bind(&mut qb, Val::Text(Some(r.status.as_str())));
                qb.build_query_scalar().fetch_one(pool).await
            })
            .map_err(store_error)?;
            let e = pair_entry(pairs, r.dlq_topic, OTHER_SOURCES.to_string());
            *e.counts.get_mut(status) = r.n - n;
            *e.bytes.get_mut(status) = r.bytes - bytes;
            *e.oldest_ms.get_mut(status) = oldest;
        }
        Ok(())
    }
}

/// The source topic under which [`Store::stats`] reports, per DLQ topic, the dead letters of
/// the source topics beyond [`STATS_ROW_CAP`]. Parentheses cannot occur in a Kafka topic
/// name, so it never stands for a real one (a header could still spell it; it is shown as
/// what it is).
pub const OTHER_SOURCES: &str = "(other source topics)";

fn pair_entry(
    pairs: &mut BTreeMap<(String, String), TopicStats>,
    dlq: String,
    src: String,
) -> &mut TopicStats {
    pairs
        .entry((dlq.clone(), src.clone()))
        .or_insert_with(|| TopicStats {
            dlq_topic: Some(dlq),
            source_topic: source(src),
            ..TopicStats::default()
        })
}

/// Appends a parenthesised subquery yielding the strings of the JSON array `json`: one bind
/// parameter however many there are.
pub(crate) fn push_json_texts<DB: Dialect>(qb: &mut QueryBuilder<'_, DB>, json: String) {
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
