//! `make bench`: the figures issue #2 asks for, each measured in the same run.
//!
//! 1. Ingest rate of `BENCH_RECORDS` (default 200,000) 1-KiB records carrying Spring
//!    `kafka_dlt-*` headers into SQLite and into PostgreSQL, beside the raw consume rate of the
//!    same topic (an rdkafka consumer that only counts), as a ratio.
//!    Beside it (issue 7): SQLite with `synchronous=NORMAL` (not power-loss safe) to show
//!    what the default `synchronous=FULL` costs; and the same records with 1 in 1,000
//!    hostile (10 KiB error class and message over their caps, 1,000 extra headers, NULs,
//!    markup), once as the stores accept them (caps) and once with 1 in 1,000 refused by a
//!    database trigger (so each is split out, tried in reduced form and quarantined).
//! 2. Replay (issue #3): `BENCH_REPLAY` (default 100,000) dead letters replayed unthrottled
//!    through the outbox and relay (idempotent producer, acks=all), in msgs/s, and a replay
//!    throttled at 1,000 msgs/s of `BENCH_THROTTLED` (default 10,000), its measured rate.
//!    Beside plain replay (issue 9): `unordered: true`, per-key order over 1,000 shared keys
//!    and over one key, and a trivial transform ([`replay_rows`] lists the sizes);
//!    `BENCH_REPLAY_ONLY=1` runs only the replay rows. Beside them (issue 13): one scheduled
//!    round over `BENCH_ROUNDS` (default 100,000) due transient dead letters — the round's
//!    own transaction, its job's publish rate, the gate overhead ([`rounds`]);
//!    `BENCH_ROUNDS_ONLY=1` runs only those rows.
//! 3. List-page latency (p50/p99 of `Store::list`, i.e. server side, without HTTP) over
//!    `BENCH_ROWS` (default 1,000,000) stored dead letters for four filters.
//! 4. Detail-page render time and the server's peak RSS for pathological dead letters (8 MiB
//!    value, 100k-deep JSON, 10k headers, a 1 MiB line, a 64 KiB header name), through the
//!    release binary ([`detail_page`]); `BENCH_DETAIL=0` skips it, `BENCH_DETAIL=only` runs
//!    only it.
//!
//! 5. Retention purge throughput (rows/s) without and with the archive, at `BENCH_PURGE`
//!    (default `BENCH_ROWS`) rows ([`purge`]); `BENCH_PURGE_ONLY=1` runs only it.
//! 6. Free-text search (issue 12 item 2): ingest with and without the search text and index
//!    (`BENCH_SEARCH_INGEST`, default 20,000 records), and list-page p50/p99 for a rare, a
//!    common and a 2 % term over `BENCH_SEARCH` (default `BENCH_ROWS`) rows ([`search`]);
//!    `BENCH_SEARCH_ONLY=1` runs only it, `BENCH_SEARCH=0` skips the latencies.
//!
//! 6. Several instances on one PostgreSQL (issue 12): ingest and replay rates of
//!    `BENCH_INSTANCES` (default 3; 0 skips) release `redrive serve` processes beside one
//!    ([`instances`]), over `BENCH_INSTANCES_RECORDS` (60,000) records and
//!    `BENCH_INSTANCES_REPLAY` (30,000) dead letters; `BENCH_INSTANCES_ONLY=1` runs only them.
//!
//! 7. Upgrading a SQLite store across migration 0029 (the large columns last): its time and
//!    disk use at `BENCH_ROWS` rows, and a list page of large values before and after
//!    ([`upgrade`]); `BENCH_UPGRADE=only` runs only it.
//!
//! Real broker and databases from the testkit (`REDRIVE_TEST_KAFKA_BROKERS`,
//! `REDRIVE_TEST_POSTGRES_URL`, or started by the testkit's scripts).

use anyhow::Result;
use redrive_testkit::{self as kit, Backend};

mod bulk_load;
mod detail_page;
mod ingest_limit;
mod ingest_rate;
mod instances;
mod list_latency;
mod overview_page;
mod pages_load;
mod purge;
mod release_server;
mod replay;
mod replay_rows;
mod rounds;
mod search;
mod server_rss;
mod shared_store;
mod spring_records;
mod synthetic;
mod upgrade;

use ingest_rate::{ingest_into, ingest_rate, raw_consume_rate, Variant};
use list_latency::{bulk_delete, list_latencies};
use spring_records::{
    produce_spring_records, produce_spring_records_with, spring_backlog, spring_headers,
};
use synthetic::{fill, filled_store, filled_store_at, synthetic};

pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const DAY_MS: i64 = 86_400_000;
const GROUPS: usize = 50;
const SOURCE_TOPICS: usize = 20;

/// jemalloc, as the server (`server/src/main.rs`): the in-process ingest and replay rows run
/// redrive's code with the allocator `serve` runs it with.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The WAL checkpointer `serve` runs beside its writers on SQLite
/// (`core/src/store/checkpoint.rs`), on a pool of its own, until the guard is dropped.
/// Nothing on PostgreSQL.
pub(crate) async fn start_checkpointer(
    store: &redrive_core::store::Store,
) -> Result<Option<tokio_util::sync::DropGuard>> {
    if store.backend() != "sqlite" {
        return Ok(None);
    }
    let stop = tokio_util::sync::CancellationToken::new();
    let own = store.with_own_pool(1).await?;
    tokio::spawn(own.run_checkpointer(stop.clone()));
    Ok(Some(stop.drop_guard()))
}

#[tokio::main]
async fn main() -> Result<()> {
    // `RUST_LOG=redrive::replay=debug` shows the relay's per-batch timings (claim, publish,
    // mark) on stderr; nothing is logged without it.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let detail = std::env::var("BENCH_DETAIL").unwrap_or_default();
    if detail == "only" {
        return print_detail_figures().await;
    }
    let records = env_usize("BENCH_RECORDS", 200_000);
    let rows = env_usize("BENCH_ROWS", 1_000_000);
    let queries = env_usize("BENCH_QUERIES", 200);
    // The large store the list, search, overview and load sections read, one per database,
    // filled on first use and dropped when the run ends ([`shared_store`]).
    let shared = shared_store::SharedStores::default();
    if std::env::var("BENCH_OVERVIEW").unwrap_or_default() == "only" {
        return print_overview_figures(&shared, records, rows).await;
    }
    if std::env::var("BENCH_UPGRADE").unwrap_or_default() == "only" {
        let figures = upgrade::measure(rows, queries).await?;
        println!();
        upgrade::print(&figures);
        return Ok(());
    }
    if let Ok(url) = std::env::var("BENCH_FILL") {
        // A store to keep, for profiling a server over it: migrate and bulk-load `rows`.
        let store = redrive_core::store::Store::connect(&url).await?;
        store.migrate().await?;
        store.close().await;
        let took =
            bulk_load::bulk_load(&url, rows, 1_796_104_800_000, bulk_load::Tiers::Sorted).await?;
        eprintln!(
            "filled {rows} rows into {url} in {:.1} s",
            took.as_secs_f64()
        );
        return Ok(());
    }
    let load = std::env::var("BENCH_LOAD").unwrap_or_default();
    if load == "only" {
        return print_load_figures(&shared, rows).await;
    }
    let rss_records = env_usize("BENCH_RSS_RECORDS", 1_000_000);
    if std::env::var("BENCH_RSS").unwrap_or_default() == "only" {
        return print_rss_figures(rss_records).await;
    }
    // Purge and bulk delete fill stores of their own (they empty them): at most 1M rows
    // unless asked, so that a 10M run does not fill two more 10M stores.
    let purge_rows = env_usize("BENCH_PURGE", rows.min(1_000_000));
    if std::env::var("BENCH_PURGE_ONLY").unwrap_or_default() == "1" {
        println!("| measure | SQLite | PostgreSQL |");
        println!("|---|---|---|");
        return purge::print_purge_figures(purge_rows).await;
    }
    let search_rows = env_usize("BENCH_SEARCH", rows);
    if std::env::var("BENCH_SEARCH_ONLY").unwrap_or_default() == "1" {
        return print_search_figures(&shared, search_rows, queries).await;
    }
    if std::env::var("BENCH_ROUNDS_ONLY").unwrap_or_default() == "1" {
        let figures = rounds::measure().await?;
        println!();
        println!("| measure | SQLite | PostgreSQL |");
        println!("|---|---|---|");
        rounds::print(&figures);
        return Ok(());
    }
    // Several instances on one PostgreSQL ([`instances`]): 0 skips the rows.
    let instance_count = env_usize("BENCH_INSTANCES", 3);
    let instance_records = env_usize("BENCH_INSTANCES_RECORDS", 60_000);
    let instance_replays = env_usize("BENCH_INSTANCES_REPLAY", 30_000);
    if std::env::var("BENCH_INSTANCES_ONLY").unwrap_or_default() == "1" {
        let figures =
            instances::measure(instance_count.max(1), instance_records, instance_replays).await?;
        println!();
        instances::print(&figures, instance_records, instance_replays);
        return Ok(());
    }
    if std::env::var("BENCH_REPLAY_ONLY").unwrap_or_default() == "1" {
        let replays = replay_rows::measure().await?;
        println!();
        println!("| measure | SQLite | PostgreSQL |");
        println!("|---|---|---|");
        replay_rows::print(&replays);
        return Ok(());
    }
    if std::env::var("BENCH_INGEST_ONLY").unwrap_or_default() == "1" {
        let topic = spring_backlog("bench_ingest.DLT", records).await?;
        let raw = raw_consume_rate(&topic, records)?;
        return print_ingest_figures(&topic, records, raw).await;
    }
    println!("redrive bench: {records} records for ingest, {rows} rows for the list, {queries} queries per filter");

    let topic = spring_backlog("bench_orders.DLT", records).await?;

    let raw = raw_consume_rate(&topic, records)?;
    let mut ingest_rates = Vec::new();
    for backend in Backend::ALL {
        ingest_rates.push((
            backend,
            ingest_rate(&topic, records, backend, Variant::Default).await?,
        ));
    }
    let sqlite_normal =
        ingest_rate(&topic, records, Backend::Sqlite, Variant::SqliteNormal).await?;

    let hostile_topic = kit::unique("bench_hostile.DLT");
    kit::create_topic(&hostile_topic, 4, &[("max.message.bytes", "8388608")]).await?;
    produce_spring_records_with(&hostile_topic, records, true).await?;
    let mut hostile = Vec::new();
    for backend in Backend::ALL {
        let accepted = ingest_rate(&hostile_topic, records, backend, Variant::Default).await?;
        let refused = ingest_rate(&hostile_topic, records, backend, Variant::RefuseHostile).await?;
        hostile.push((backend, accepted, refused));
    }

    let mut latencies = Vec::new();
    let replays = replay_rows::measure().await?;
    let round_figures = rounds::measure().await?;

    // BENCH_ROWS=0 measures ingest only.
    if rows > 0 {
        for backend in Backend::ALL {
            latencies.push((
                backend,
                list_latencies(&shared, backend, rows, queries).await?,
            ));
        }
    }
    // A bulk delete of every row on SQLite, in chunks (docs/replay.md, "Bulk actions").
    let bulk_n = env_usize("BENCH_BULK", rows.min(1_000_000));
    let bulk = if bulk_n > 0 {
        Some(bulk_delete(bulk_n).await?)
    } else {
        None
    };

    println!();
    println!("| measure | SQLite | PostgreSQL |");
    println!("|---|---|---|");
    println!("| raw consume rate (count only) | {raw:.0} msgs/s | {raw:.0} msgs/s |");
    let r = |b: Backend| {
        ingest_rates
            .iter()
            .find(|(x, _)| *x == b)
            .map(|(_, r)| *r)
            .unwrap_or(0.0)
    };
    println!(
        "| ingest rate, {records} x 1 KiB Spring records | {:.0} msgs/s ({:.2}x raw) | {:.0} msgs/s ({:.2}x raw) |",
        r(Backend::Sqlite),
        r(Backend::Sqlite) / raw,
        r(Backend::Postgres),
        r(Backend::Postgres) / raw
    );
    println!(
        "| ingest rate, SQLite synchronous=NORMAL instead of FULL (not power-loss safe) | {sqlite_normal:.0} msgs/s (FULL costs {:.0} %) | n/a |",
        (1.0 - r(Backend::Sqlite) / sqlite_normal) * 100.0
    );
    let hr = |b: Backend| {
        hostile
            .iter()
            .find(|(x, _, _)| *x == b)
            .map(|(_, a, r)| (*a, *r))
            .unwrap_or((0.0, 0.0))
    };
    let (sa, sr) = hr(Backend::Sqlite);
    let (pa, pr) = hr(Backend::Postgres);
    println!(
        "| ingest rate, 1 in 1,000 hostile (over the caps, 1,000 headers, NULs, markup) | {sa:.0} msgs/s ({:.2}x clean) | {pa:.0} msgs/s ({:.2}x clean) |",
        sa / r(Backend::Sqlite),
        pa / r(Backend::Postgres)
    );
    println!(
        "| ingest rate, 1 in 1,000 refused by the database (split, reduced, quarantined) | {sr:.0} msgs/s ({:.2}x clean) | {pr:.0} msgs/s ({:.2}x clean) |",
        sr / r(Backend::Sqlite),
        pr / r(Backend::Postgres)
    );
    replay_rows::print(&replays);
    rounds::print(&round_figures);
    let names = [
        "no filter",
        "one error group",
        "source topic + 1-day range",
        "free text in error message",
    ];
    for (i, name) in names.iter().enumerate().filter(|_| rows > 0) {
        let cell = |b: Backend| {
            latencies
                .iter()
                .find(|(x, _)| *x == b)
                .map(|(_, l)| format!("p50 {:.2} ms, p99 {:.2} ms", l[i].0, l[i].1))
                .unwrap_or_default()
        };
        println!(
            "| list page ({name}), {rows} rows | {} | {} |",
            cell(Backend::Sqlite),
            cell(Backend::Postgres)
        );
    }
    if let Some((total_s, longest_ms, chunks)) = bulk {
        println!(
            "| bulk delete of {bulk_n} rows by filter, in {chunks} chunks: total / longest write-lock hold | {total_s:.1} s / {longest_ms:.1} ms | not measured |"
        );
    }
    if purge_rows > 0 {
        purge::print_purge_figures(purge_rows).await?;
    }
    // Item 4 of issue 12: ingest beside the store's own insert rate, in the same run.
    print_ingest_figures(&topic, records, raw).await?;
    print_search_figures(&shared, search_rows, queries).await?;
    if detail != "0" {
        print_detail_figures().await?;
    }
    if instance_count > 0 {
        let figures =
            instances::measure(instance_count, instance_records, instance_replays).await?;
        println!();
        instances::print(&figures, instance_records, instance_replays);
    }
    if std::env::var("BENCH_OVERVIEW").unwrap_or_default() != "0" {
        print_overview_figures(&shared, records, rows).await?;
    }
    // Last of the sections on the shared stores: its server's ingest adds rows to them.
    if load != "0" {
        print_load_figures(&shared, rows).await?;
    }
    if rss_records > 0 && std::env::var("BENCH_RSS").unwrap_or_default() != "0" {
        print_rss_figures(rss_records).await?;
    }
    Ok(())
}

/// Full HTML pages under load while ingest runs, both databases ([`pages_load`]):
/// `BENCH_LOAD_USERS` (20) users for `BENCH_LOAD_SECS` (30) s, ingest at `BENCH_LOAD_INGEST`
/// (1,000) msgs/s, over `rows` stored dead letters, on the databases of [`backends`]; one
/// phase per think time of `BENCH_LOAD_THINK_MS` (ms, comma-separated, default `0,1000`: a
/// closed loop, then users who read each page for a second).
/// `BENCH_LOAD=only` runs just this; `0` skips it.
async fn print_load_figures(shared: &shared_store::SharedStores, rows: usize) -> Result<()> {
    let users = env_usize("BENCH_LOAD_USERS", 20);
    let secs = env_usize("BENCH_LOAD_SECS", 30) as u64;
    let ingest = env_usize("BENCH_LOAD_INGEST", 1_000);
    let think: Vec<u64> = std::env::var("BENCH_LOAD_THINK_MS")
        .unwrap_or_else(|_| "0,1000".into())
        .split(',')
        .map(|t| t.trim().parse())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("BENCH_LOAD_THINK_MS: {e}"))?;
    let mut figs = Vec::new();
    for backend in backends() {
        figs.extend(pages_load::figures(shared, backend, rows, users, secs, &think, ingest).await?);
    }
    pages_load::print(rows, &figs);
    Ok(())
}

/// `BENCH_RSS=only`: the release server's peak RSS while it ingests `records` and serves
/// pages, per database ([`server_rss`]).
async fn print_rss_figures(records: usize) -> Result<()> {
    use server_rss::Profile;
    let topic = spring_backlog("bench_rss.DLT", records).await?;
    let mut figures = Vec::new();
    for backend in backends() {
        figures.push(server_rss::measure(backend, &Profile::redrive(), &topic, records).await?);
    }
    // `BENCH_RSS_PROFILES=0` skips the SQLite runs with other fetch sizes.
    if std::env::var("BENCH_RSS_PROFILES").unwrap_or_default() != "0" {
        for profile in Profile::comparisons() {
            figures.push(server_rss::measure(Backend::Sqlite, &profile, &topic, records).await?);
        }
    }
    println!();
    println!("server memory (issue 12 item 6):");
    println!();
    server_rss::print(&figures);
    Ok(())
}

/// Ingest beside the store's own insert rate, with peak RSS ([`ingest_limit`]), over the
/// `records` already in `topic` (`raw`: its raw consume rate, msgs/s). `BENCH_INGEST_ONLY=1`
/// runs just this.
async fn print_ingest_figures(topic: &str, records: usize, raw: f64) -> Result<()> {
    let figures = ingest_limit::measure(topic, records).await?;
    println!();
    println!("| ingest (issue 12) | SQLite | PostgreSQL |");
    println!("|---|---|---|");
    ingest_limit::print(&figures, records, raw);
    Ok(())
}

/// The aggregates' cost at ingest (with and without the triggers of migrations 0006, 0027 and
/// 0036, and without 0036's alone) and the
/// overview page / `/metrics` latency at `rows` ([`overview_page`]). `BENCH_OVERVIEW=only`
/// runs just this; `0` skips it. The databases of `BENCH_BACKENDS` ([`backends`]); `records`
/// 0 skips the ingest rows, `rows` 0 the pages.
async fn print_overview_figures(
    shared: &shared_store::SharedStores,
    records: usize,
    rows: usize,
) -> Result<()> {
    let wanted = backends();
    // Per database (SQLite, PostgreSQL): (with, without any, without 0036's) msgs/s.
    let mut ingest: [Option<(f64, f64, f64)>; 2] = [None, None];
    if records > 0 {
        let topic = kit::unique("bench_overview.DLT");
        kit::create_topic(&topic, 4, &[]).await?;
        produce_spring_records(&topic, records).await?;
        for (i, backend) in Backend::ALL.into_iter().enumerate() {
            if !wanted.contains(&backend) {
                continue;
            }
            let with = ingest_rate(&topic, records, backend, Variant::Default).await?;
            let none = ingest_rate(&topic, records, backend, Variant::NoAggregates).await?;
            let hours = ingest_rate(&topic, records, backend, Variant::NoGroupHours).await?;
            ingest[i] = Some((with, none, hours));
        }
    }
    let mut pages: [Option<overview_page::Figures>; 2] = [None, None];
    if rows > 0 {
        for (i, backend) in Backend::ALL.into_iter().enumerate() {
            if wanted.contains(&backend) {
                pages[i] = Some(overview_page::figures(shared, backend, rows).await?);
            }
        }
    }
    // One table row: a cell per database, "not measured" for one not asked for.
    fn row<T>(what: &str, cells: &[Option<T>; 2], cell: impl Fn(&T) -> String) {
        let [a, b] = cells
            .each_ref()
            .map(|c| c.as_ref().map_or_else(|| "not measured".to_string(), &cell));
        println!("| {what} | {a} | {b} |");
    }
    let rate = |w: f64, wo: f64| {
        format!(
            "{w:.0} / {wo:.0} msgs/s ({:.0} % cost)",
            (1.0 - w / wo) * 100.0
        )
    };
    let p = |x: (f64, f64)| format!("p50 {:.1} ms, p99 {:.1} ms", x.0, x.1);
    println!();
    println!("| aggregates (migrations 0006, 0027, 0035, 0036) | SQLite | PostgreSQL |");
    println!("|---|---|---|");
    if records > 0 {
        row(
            &format!("ingest rate, {records} x 1 KiB Spring records, with / without the aggregate triggers"),
            &ingest,
            |i| rate(i.0, i.1),
        );
        row(
            &format!("ingest rate, {records} x 1 KiB Spring records, with / without migration 0036's triggers only (error groups per hour)"),
            &ingest,
            |i| rate(i.0, i.2),
        );
    }
    if rows == 0 {
        return Ok(());
    }
    row(
        &format!("store filled by the database (triggers on), {rows} rows"),
        &pages,
        |f| format!("{:.1} s", f.fill_s),
    );
    row(
        &format!("GET /overview, {rows} rows (release binary, loopback)"),
        &pages,
        |f| p(f.overview),
    );
    row(
        &format!("GET /metrics, {rows} rows: first (reads the aggregates) / cached p50, p99"),
        &pages,
        |f| format!("{:.1} ms / {}", f.metrics_first, p(f.metrics)),
    );
    row(
        &format!("Store::stats + arrival_totals in process (one /metrics refresh), {rows} rows"),
        &pages,
        |f| format!("{:.1} ms", f.stats_ms),
    );
    // A page's (p50, p99) among the figures.
    type Pick = fn(&overview_page::Figures) -> (f64, f64);
    let groups: [(&str, Pick); 7] = [
        ("GET /groups (aggregate)", |f| f.groups),
        ("GET /groups?dlq_topic=service3.events.DLT (aggregate)", |f| f.groups_by_topic),
        (
            "GET /groups?consumer_group=group1&error_class=… (aggregate, migration 0035)",
            |f| f.groups_by_group,
        ),
        (
            "GET /groups?from=(the last day, from a whole hour) (aggregate's hours, migration 0036)",
            |f| f.groups_last_day,
        ),
        (
            "GET /groups?from=…&to=… (the last day, 17 min past to 3 min before whole hours) (hours; each end its hour less 17 / 3 min of rows)",
            |f| f.groups_last_day_partial,
        ),
        (
            "GET /groups?from=…&to=… (the last day, 30 min past to 30 min before whole hours) (hours; 30 min of rows at each end, the most)",
            |f| f.groups_last_day_halves,
        ),
        (
            "GET /groups?from=(the last day)&unlabelled=true (bounded: newest 100,000 matches)",
            |f| f.groups_bounded,
        ),
    ];
    for (what, get) in groups {
        row(&format!("{what}, {rows} rows"), &pages, |f| p(get(f)));
    }
    Ok(())
}

/// Free-text search (issue 12 item 2): what the search text and its index cost ingest
/// (`BENCH_SEARCH_INGEST` records, default 20,000, with and without), and list-page latency
/// of searches over `rows` bulk-loaded rows ([`search`]; `rows` 0 skips those).
/// `BENCH_SEARCH_ONLY=1` runs just this.
async fn print_search_figures(
    shared: &shared_store::SharedStores,
    rows: usize,
    queries: usize,
) -> Result<()> {
    let records = env_usize("BENCH_SEARCH_INGEST", 20_000);
    let mut ingest = Vec::new();
    if records > 0 {
        let topic = kit::unique("bench_search.DLT");
        kit::create_topic(&topic, 4, &[]).await?;
        produce_spring_records(&topic, records).await?;
        for backend in Backend::ALL {
            let with = ingest_rate(&topic, records, backend, Variant::Default).await?;
            let without = ingest_rate(&topic, records, backend, Variant::NoSearch).await?;
            ingest.push((with, without));
        }
    }
    let mut figures = Vec::new();
    if rows > 0 {
        for backend in backends() {
            figures.push(search::measure(shared, backend, rows, queries).await?);
        }
    }
    println!();
    println!("| free-text search (migration 0024) | SQLite | PostgreSQL |");
    println!("|---|---|---|");
    if let [s, p] = ingest[..] {
        println!(
            "| ingest rate, {records} x 1 KiB Spring records (1.5 KiB stack trace), with / without search | {:.0} / {:.0} msgs/s ({:.0} % cost) | {:.0} / {:.0} msgs/s ({:.0} % cost) |",
            s.0,
            s.1,
            (1.0 - s.0 / s.1) * 100.0,
            p.0,
            p.1,
            (1.0 - p.0 / p.1) * 100.0
        );
    }
    search::print(&figures);
    Ok(())
}

async fn print_detail_figures() -> Result<()> {
    let figures = detail_page::figures().await?;
    println!();
    println!("| detail page of (release binary, SQLite) | stored | page | time (median of 5 GETs) | server peak RSS |");
    println!("|---|---|---|---|---|");
    for f in figures {
        println!(
            "| {} | {} bytes | {} bytes | {:.1} ms | {:.1} MiB |",
            f.shape,
            f.stored_bytes,
            f.page_bytes,
            f.median_ms,
            f.peak_rss_kib as f64 / 1024.0
        );
    }
    Ok(())
}

/// The databases to measure: `BENCH_BACKENDS` (`sqlite`, `postgres`, comma-separated;
/// default both). Read by the ingest-only figures ([`ingest_limit`]), the search
/// latencies ([`search`]), the overview and groups pages ([`overview_page`]) and the
/// server's memory ([`server_rss`]).
fn backends() -> Vec<Backend> {
    let wanted = std::env::var("BENCH_BACKENDS")
        .unwrap_or_default()
        .to_lowercase();
    Backend::ALL
        .into_iter()
        .filter(|b| wanted.is_empty() || wanted.contains(&format!("{b:?}").to_lowercase()))
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}
