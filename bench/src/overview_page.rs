//! Overview page and `/metrics` latency over HTTP against the release `redrive` binary, at
//! `BENCH_ROWS` stored dead letters (issue 8: neither may scan the store per view or scrape).
//!
//! How it is measured: the run's shared store of each backend ([`crate::shared_store`]), filled
//! by the database itself (`bulk_load`, the migration 0006 triggers maintaining the aggregates
//! as rows go in), the
//! release binary serves it (beside this bench's executable, built by `scripts/bench`), and
//! `OVERVIEW_RUNS` sequential GETs of each path are timed, request to last byte on loopback.
//! `/metrics` serves cached store figures for 10 s, so its p50 is the cached scrape and the
//! first GET (reported apart) is the uncached one; `Store::stats` is also timed in process
//! (what one refresh costs).
//!
//! The error-groups page (issue 12 item 3) is timed the same way: `/groups` unfiltered,
//! filtered by one DLQ topic, and by a consumer group and an error class (the maintained
//! aggregate of migrations 0027 and 0035); over the last day, from a whole hour and from
//! minutes past one to minutes before `NOW` (the aggregate's hours, migration 0036, and for
//! the second its partial first and last hours from the rows); and the last day's unlabelled
//! dead letters (no aggregate keeps labels: the bounded scan of the newest 100,000 matches).

use std::time::{Duration, Instant};

use anyhow::Result;
use redrive_testkit::Backend;

use crate::release_server::{p50_p99, ReleaseServer};
use crate::shared_store::SharedStores;

const OVERVIEW_RUNS: usize = 50;
/// A consumer group and an error class of [`crate::synthetic`]'s rows (its group 1).
const GROUPS_BY_GROUP: &str =
    "/groups?consumer_group=group1&error_class=com.example.errors.Failure1Exception";
/// GETs of each time-range groups page (the bounded one reads ~100,000 rows).
const BOUNDED_RUNS: usize = 10;

/// One backend's figures, ms.
pub struct Figures {
    pub overview: (f64, f64),
    pub metrics_first: f64,
    pub metrics: (f64, f64),
    /// `/groups`, `/groups?dlq_topic=...`, `/groups?consumer_group=...&error_class=...`
    /// (the aggregate since migration 0035), `/groups?from=...` (the last day from a whole
    /// hour; the same from 17 minutes past to 3 minutes before: migration 0036's hours, each
    /// partial end as its hour less the other side's 17 and 3 minutes of rows; and from 30
    /// minutes past to 30 minutes before, the most rows an end reads: 30 minutes each),
    /// `/groups?from=...&unlabelled=true` (a bounded scan of the
    /// newest 100,000 matches): (p50, p99) ms.
    pub groups: (f64, f64),
    pub groups_by_topic: (f64, f64),
    pub groups_by_group: (f64, f64),
    pub groups_last_day: (f64, f64),
    pub groups_last_day_partial: (f64, f64),
    pub groups_last_day_halves: (f64, f64),
    pub groups_bounded: (f64, f64),
    /// `Store::stats` in process, median of 5.
    pub stats_ms: f64,
    /// How long the fill took, s.
    pub fill_s: f64,
}

/// Serves `shared`'s store of `rows` on `backend` (filled first if no section did) with the
/// release binary and times the pages. Errors: the binary is missing, the fill or the server
/// fails.
pub(crate) async fn figures(
    shared: &SharedStores,
    backend: Backend,
    rows: usize,
) -> Result<Figures> {
    let now = crate::shared_store::NOW;
    let filled = shared.get(backend, rows, "overview").await?;
    let db_url = filled.url.clone();
    let store = filled.connect().await?;
    let mut stats_times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        store.stats(now).await?;
        store.arrival_totals(400).await?;
        stats_times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let server = ReleaseServer::start(&db_url, &[], Duration::from_secs(120)).await?;
    let time = |path: &'static str| {
        let server = &server;
        async move { Ok::<f64, anyhow::Error>(server.get(path).await?.0) }
    };
    let metrics_first = time("/metrics").await?;
    let mut overview = Vec::new();
    let mut metrics = Vec::new();
    let mut groups = Vec::new();
    let mut groups_by_topic = Vec::new();
    let mut groups_by_group = Vec::new();
    let mut groups_bounded = Vec::new();
    for _ in 0..OVERVIEW_RUNS {
        overview.push(time("/overview").await?);
        metrics.push(time("/metrics").await?);
        groups.push(time("/groups").await?);
        groups_by_topic.push(time("/groups?dlq_topic=service3.events.DLT").await?);
        groups_by_group.push(time(GROUPS_BY_GROUP).await?);
    }
    // Apart, after the others: a bounded scan reads ~100,000 rows and evicts the cache the
    // other pages would otherwise find warm.
    let mut groups_last_day = Vec::new();
    let mut groups_last_day_partial = Vec::new();
    let mut groups_last_day_halves = Vec::new();
    let last_day = format!("/groups?from={}", now - crate::DAY_MS);
    let partial = format!(
        "/groups?from={}&to={}",
        now - crate::DAY_MS + 17 * 60_000,
        now - 3 * 60_000
    );
    let halves = format!(
        "/groups?from={}&to={}",
        now - crate::DAY_MS + 30 * 60_000,
        now - 30 * 60_000
    );
    let unlabelled = format!("{last_day}&unlabelled=true");
    for _ in 0..BOUNDED_RUNS {
        groups_last_day.push(server.get(&last_day).await?.0);
        groups_last_day_partial.push(server.get(&partial).await?.0);
        groups_last_day_halves.push(server.get(&halves).await?.0);
    }
    for _ in 0..BOUNDED_RUNS {
        groups_bounded.push(server.get(&unlabelled).await?.0);
    }
    server.stop().await;
    store.close().await;
    let mut s = stats_times;
    s.sort_by(f64::total_cmp);
    Ok(Figures {
        overview: p50_p99(overview),
        metrics_first,
        metrics: p50_p99(metrics),
        groups: p50_p99(groups),
        groups_by_topic: p50_p99(groups_by_topic),
        groups_by_group: p50_p99(groups_by_group),
        groups_last_day: p50_p99(groups_last_day),
        groups_last_day_partial: p50_p99(groups_last_day_partial),
        groups_last_day_halves: p50_p99(groups_last_day_halves),
        groups_bounded: p50_p99(groups_bounded),
        stats_ms: s[s.len() / 2],
        fill_s: filled.fill_s,
    })
}
