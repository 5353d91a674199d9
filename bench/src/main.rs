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

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use redrive_core::filter::ListQuery;
use redrive_core::ingest::{self, IngestConfig, IngestStatus};
use redrive_core::model::{Convention, Header, NewDeadLetter, Normalized, RawRecord};
use redrive_core::store::Store;
use redrive_core::Filter;
use redrive_testkit::{self as kit, Backend, TestRecord};
use tokio_util::sync::CancellationToken;

mod bulk_load;
mod detail_page;
mod ingest_limit;
mod instances;
mod overview_page;
mod pages_load;
mod purge;
mod release_server;
mod replay;
mod replay_rows;
mod rounds;
mod search;
mod server_rss;
mod upgrade;

pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const DAY_MS: i64 = 86_400_000;
const GROUPS: usize = 50;
const SOURCE_TOPICS: usize = 20;

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
    if std::env::var("BENCH_OVERVIEW").unwrap_or_default() == "only" {
        return print_overview_figures(records, rows).await;
    }
    if std::env::var("BENCH_UPGRADE").unwrap_or_default() == "only" {
        let figures = upgrade::measure(rows, queries).await?;
        println!();
        upgrade::print(&figures);
        return Ok(());
    }
    let load = std::env::var("BENCH_LOAD").unwrap_or_default();
    if load == "only" {
        return print_load_figures(rows).await;
    }
    let rss_records = env_usize("BENCH_RSS_RECORDS", 1_000_000);
    if std::env::var("BENCH_RSS").unwrap_or_default() == "only" {
        return print_rss_figures(rss_records).await;
    }
    let purge_rows = env_usize("BENCH_PURGE", rows);
    if std::env::var("BENCH_PURGE_ONLY").unwrap_or_default() == "1" {
        println!("| measure | SQLite | PostgreSQL |");
        println!("|---|---|---|");
        return purge::print_purge_figures(purge_rows).await;
    }
    let search_rows = env_usize("BENCH_SEARCH", rows);
    if std::env::var("BENCH_SEARCH_ONLY").unwrap_or_default() == "1" {
        return print_search_figures(search_rows, queries).await;
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
        return print_ingest_figures(records).await;
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
            latencies.push((backend, list_latencies(backend, rows, queries).await?));
        }
    }
    // A bulk delete of every row on SQLite, in chunks (docs/replay.md, "Bulk actions").
    let bulk_n = env_usize("BENCH_BULK", rows);
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
    print_search_figures(search_rows, queries).await?;
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
        print_overview_figures(records, rows).await?;
    }
    if load != "0" {
        print_load_figures(rows).await?;
    }
    if rss_records > 0 && std::env::var("BENCH_RSS").unwrap_or_default() != "0" {
        print_rss_figures(rss_records).await?;
    }
    Ok(())
}

/// Full HTML pages under load while ingest runs, both databases ([`pages_load`]):
/// `BENCH_LOAD_USERS` (20) users for `BENCH_LOAD_SECS` (30) s, ingest at `BENCH_LOAD_INGEST`
/// (1,000) msgs/s, over `rows` stored dead letters. `BENCH_LOAD=only` runs just this; `0`
/// skips it.
async fn print_load_figures(rows: usize) -> Result<()> {
    let users = env_usize("BENCH_LOAD_USERS", 20);
    let secs = env_usize("BENCH_LOAD_SECS", 30) as u64;
    let ingest = env_usize("BENCH_LOAD_INGEST", 1_000);
    let mut figs = Vec::new();
    for backend in Backend::ALL {
        figs.push(
            pages_load::figures(backend, rows, users, secs, ingest, 1_796_104_800_000).await?,
        );
    }
    pages_load::print(rows, &figs);
    Ok(())
}

/// A fresh 4-partition topic named after `prefix`, holding `records` 1 KiB Spring records
/// before anything consumes it (a backlog); returns its name.
async fn spring_backlog(prefix: &str, records: usize) -> Result<String> {
    let topic = kit::unique(prefix);
    kit::create_topic(&topic, 4, &[]).await?;
    let t = Instant::now();
    produce_spring_records(&topic, records).await?;
    eprintln!(
        "produced {records} records in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(topic)
}

/// `BENCH_RSS=only`: the release server's peak RSS while it ingests `records` and serves
/// pages, per database ([`server_rss`]).
async fn print_rss_figures(records: usize) -> Result<()> {
    use server_rss::Profile;
    let topic = spring_backlog("bench_rss.DLT", records).await?;
    let mut figures = Vec::new();
    for backend in Backend::ALL {
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

/// `BENCH_INGEST_ONLY=1`: ingest beside the store's own insert rate, with peak RSS
/// ([`ingest_limit`]).
async fn print_ingest_figures(records: usize) -> Result<()> {
    let topic = spring_backlog("bench_ingest.DLT", records).await?;
    let raw = raw_consume_rate(&topic, records)?;
    let figures = ingest_limit::measure(&topic, records).await?;
    println!();
    println!("| ingest (issue 12) | SQLite | PostgreSQL |");
    println!("|---|---|---|");
    ingest_limit::print(&figures, records, raw);
    Ok(())
}

/// The aggregates' cost at ingest (with and without the migration 0006 and 0027 triggers) and the
/// overview page / `/metrics` latency at `rows` ([`overview_page`]). `BENCH_OVERVIEW=only`
/// runs just this; `0` skips it.
async fn print_overview_figures(records: usize, rows: usize) -> Result<()> {
    let topic = kit::unique("bench_overview.DLT");
    kit::create_topic(&topic, 4, &[]).await?;
    produce_spring_records(&topic, records).await?;
    let mut ingest = Vec::new();
    for backend in Backend::ALL {
        let with = ingest_rate(&topic, records, backend, Variant::Default).await?;
        let without = ingest_rate(&topic, records, backend, Variant::NoAggregates).await?;
        ingest.push((with, without));
    }
    let mut pages = Vec::new();
    if rows > 0 {
        for backend in Backend::ALL {
            pages.push(Some(
                overview_page::figures(backend, rows, 1_796_104_800_000).await?,
            ));
        }
    } else {
        pages = vec![None, None];
    }
    println!();
    println!("| aggregates (migrations 0006, 0027) | SQLite | PostgreSQL |");
    println!("|---|---|---|");
    println!(
        "| ingest rate, {records} x 1 KiB Spring records, with / without the aggregate triggers | {:.0} / {:.0} msgs/s ({:.0} % cost) | {:.0} / {:.0} msgs/s ({:.0} % cost) |",
        ingest[0].0,
        ingest[0].1,
        (1.0 - ingest[0].0 / ingest[0].1) * 100.0,
        ingest[1].0,
        ingest[1].1,
        (1.0 - ingest[1].0 / ingest[1].1) * 100.0
    );
    if let (Some(a), Some(b)) = (&pages[0], &pages[1]) {
        println!(
            "| store filled by the database (triggers on), {rows} rows | {:.1} s | {:.1} s |",
            a.fill_s, b.fill_s
        );
        println!(
            "| GET /overview, {rows} rows (release binary, loopback) | p50 {:.1} ms, p99 {:.1} ms | p50 {:.1} ms, p99 {:.1} ms |",
            a.overview.0, a.overview.1, b.overview.0, b.overview.1
        );
        println!(
            "| GET /metrics, {rows} rows: first (reads the aggregates) / cached p50, p99 | {:.1} ms / p50 {:.1} ms, p99 {:.1} ms | {:.1} ms / p50 {:.1} ms, p99 {:.1} ms |",
            a.metrics_first, a.metrics.0, a.metrics.1, b.metrics_first, b.metrics.0, b.metrics.1
        );
        println!(
            "| Store::stats + arrival_totals in process (one /metrics refresh), {rows} rows | {:.1} ms | {:.1} ms |",
            a.stats_ms, b.stats_ms
        );
        for (what, x, y) in [
            ("GET /groups (aggregate)", a.groups, b.groups),
            (
                "GET /groups?dlq_topic=service3.events.DLT (aggregate)",
                a.groups_by_topic,
                b.groups_by_topic,
            ),
            (
                "GET /groups?consumer_group=group1 (bounded: newest 100,000 matches)",
                a.groups_bounded,
                b.groups_bounded,
            ),
        ] {
            println!(
                "| {what}, {rows} rows | p50 {:.1} ms, p99 {:.1} ms | p50 {:.1} ms, p99 {:.1} ms |",
                x.0, x.1, y.0, y.1
            );
        }
    }
    Ok(())
}

/// Free-text search (issue 12 item 2): what the search text and its index cost ingest
/// (`BENCH_SEARCH_INGEST` records, default 20,000, with and without), and list-page latency
/// of searches over `rows` bulk-loaded rows ([`search`]; `rows` 0 skips those).
/// `BENCH_SEARCH_ONLY=1` runs just this.
async fn print_search_figures(rows: usize, queries: usize) -> Result<()> {
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
            figures.push(search::measure(backend, rows, queries).await?);
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

fn spring_headers(i: usize) -> Vec<(String, Option<Vec<u8>>)> {
    let stack = format!(
        "org.springframework.kafka.listener.ListenerExecutionFailedException: Listener failed\n{}Caused by: java.util.concurrent.TimeoutException: Timeout after {} ms for order {i}\n\t... 12 more\n",
        "\tat com.example.orders.OrderListener.handle(OrderListener.java:42)\n".repeat(20),
        1000 + i % 7
    );
    vec![
        ("kafka_dlt-original-topic".into(), Some(b"orders".to_vec())),
        (
            "kafka_dlt-original-partition".into(),
            Some(((i % 4) as i32).to_be_bytes().to_vec()),
        ),
        (
            "kafka_dlt-original-offset".into(),
            Some((i as i64).to_be_bytes().to_vec()),
        ),
        (
            "kafka_dlt-original-timestamp".into(),
            Some(1_796_104_800_000i64.to_be_bytes().to_vec()),
        ),
        (
            "kafka_dlt-original-timestamp-type".into(),
            Some(b"CreateTime".to_vec()),
        ),
        (
            "kafka_dlt-original-consumer-group".into(),
            Some(b"orders-service".to_vec()),
        ),
        (
            "kafka_dlt-exception-fqcn".into(),
            Some(b"org.springframework.kafka.listener.ListenerExecutionFailedException".to_vec()),
        ),
        (
            "kafka_dlt-exception-cause-fqcn".into(),
            Some(b"java.util.concurrent.TimeoutException".to_vec()),
        ),
        (
            "kafka_dlt-exception-message".into(),
            Some(
                format!(
                    "Listener failed; Timeout after {} ms for order {i}",
                    1000 + i % 7
                )
                .into_bytes(),
            ),
        ),
        (
            "kafka_dlt-exception-stacktrace".into(),
            Some(stack.into_bytes()),
        ),
    ]
}

async fn produce_spring_records(topic: &str, n: usize) -> Result<()> {
    produce_spring_records_with(topic, n, false).await
}

/// Every 1,000th record (i % 1000 == 999) made hostile when `hostile`: key `hostile-{i}`,
/// a 10 KiB error class and message (over their caps), 1,000 extra headers, NULs and markup.
fn make_hostile(i: usize, r: &mut TestRecord) {
    let noise: String = (0..10_240 / 16)
        .map(|j| {
            format!(
                "{:016x}",
                (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ j
            )
        })
        .collect();
    r.key = Some(format!("hostile-{i}").into_bytes());
    for (name, value) in r.headers.iter_mut() {
        if name == "kafka_dlt-exception-fqcn" || name == "kafka_dlt-exception-message" {
            *value = Some(format!("<script>alert(1)</script>\0{noise}").into_bytes());
        }
    }
    r.headers
        .extend((0..1000).map(|j| (format!("x-h{j}"), Some(b"v\0<b>".to_vec()))));
}

async fn produce_spring_records_with(topic: &str, n: usize, hostile: bool) -> Result<()> {
    let producer = kit::producer(&[
        ("linger.ms", "20"),
        ("batch.size", "1000000"),
        ("queue.buffering.max.messages", "500000"),
        ("compression.type", "lz4"),
    ])?;
    let value = vec![b'x'; 1024];
    let chunk = 10_000;
    let mut i = 0;
    while i < n {
        let end = (i + chunk).min(n);
        let batch: Vec<TestRecord> = (i..end)
            .map(|j| {
                let mut r = TestRecord {
                    key: Some(format!("order-{j}").into_bytes()),
                    value: Some(value.clone()),
                    headers: spring_headers(j),
                    partition: Some((j % 4) as i32),
                    timestamp_ms: None,
                };
                if hostile && j % 1000 == 999 {
                    make_hostile(j, &mut r);
                }
                r
            })
            .collect();
        kit::produce_with(&producer, topic, &batch).await?;
        i = end;
    }
    Ok(())
}

/// msgs/s of a consumer that only counts, from subscribe to the n-th record.
fn raw_consume_rate(topic: &str, n: usize) -> Result<f64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kit::kafka_brokers())
        .set("group.id", kit::unique("bench_raw"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()?;
    consumer.subscribe(&[topic])?;
    let t = Instant::now();
    let mut count = 0usize;
    let deadline = Instant::now() + Duration::from_secs(600);
    while count < n {
        if Instant::now() > deadline {
            bail!("raw consumer saw only {count} of {n} records");
        }
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            m?;
            count += 1;
        }
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

/// How [`ingest_rate`] sets up its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// As `redrive serve` does.
    Default,
    /// SQLite with `synchronous=NORMAL`.
    SqliteNormal,
    /// Without the aggregate triggers of migrations 0006 and 0027 (dropped after migrating): what the
    /// maintained aggregates cost ingest.
    NoAggregates,
    /// A trigger refuses the hostile records (keys `hostile-*`) in `dead_letters`, so ingest
    /// splits each out, tries its reduced form (refused too) and quarantines it.
    RefuseHostile,
    /// Without free-text search (migrations 0024, 0028): `search_backlog`, where ingest notes
    /// the searched text, replaced by a view whose `INSTEAD OF INSERT` trigger discards the
    /// rows: what search costs ingest (the index itself is written later, by the indexer).
    NoSearch,
}

/// [`Variant::NoSearch`]'s statements, per database.
const SQLITE_NO_SEARCH: [&str; 4] = [
    "DROP VIEW search_backlog_text",
    "DROP TABLE search_backlog",
    "CREATE VIEW search_backlog AS SELECT 0 AS id, 0 AS stack_bytes, 0 AS payload_bytes WHERE 0",
    "CREATE TRIGGER search_backlog_discard INSTEAD OF INSERT ON search_backlog \
     BEGIN SELECT 1; END",
];
const POSTGRES_NO_SEARCH: [&str; 5] = [
    "DROP VIEW search_backlog_text",
    "DROP TABLE search_backlog",
    "CREATE VIEW search_backlog AS SELECT 0::bigint AS id, 0 AS stack_bytes, \
     0 AS payload_bytes WHERE false",
    "CREATE FUNCTION search_backlog_discard() RETURNS trigger LANGUAGE plpgsql AS \
     $$ BEGIN RETURN NULL; END $$",
    "CREATE TRIGGER search_backlog_discard INSTEAD OF INSERT ON search_backlog \
     FOR EACH ROW EXECUTE FUNCTION search_backlog_discard()",
];

const SQLITE_REFUSE: &str = "CREATE TRIGGER bench_refuse BEFORE INSERT ON dead_letters \
     WHEN substr(NEW.key, 1, 8) = CAST('hostile-' AS BLOB) \
     BEGIN SELECT RAISE(ABORT, 'refused by the bench trigger'); END";
const POSTGRES_REFUSE: [&str; 2] = [
    "CREATE FUNCTION bench_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
     IF substr(NEW.key, 1, 8) = 'hostile-'::bytea THEN \
     RAISE EXCEPTION 'refused by the bench trigger' USING ERRCODE = 'check_violation'; \
     END IF; RETURN NEW; END $$",
    "CREATE TRIGGER bench_refuse BEFORE INSERT ON dead_letters FOR EACH ROW \
     EXECUTE FUNCTION bench_refuse()",
];

async fn ingest_rate(topic: &str, n: usize, backend: Backend, variant: Variant) -> Result<f64> {
    use sqlx::Connection as _;
    let (url, _dir) = kit::fresh_database(backend).await?;
    let durability = match variant {
        Variant::SqliteNormal => redrive_core::store::SqliteDurability::Normal,
        _ => redrive_core::store::SqliteDurability::Full,
    };
    let store = Store::connect_with(&url, durability).await?;
    store.migrate().await?;
    if variant == Variant::NoAggregates {
        let drops = [
            "DROP TRIGGER dl_stats_insert",
            "DROP TRIGGER dl_stats_update",
            "DROP TRIGGER dl_stats_delete",
            "DROP TRIGGER dl_stats_groups_insert",
            "DROP TRIGGER dl_stats_groups_update",
            "DROP TRIGGER dl_stats_groups_delete",
        ];
        match backend {
            Backend::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&url).await?;
                for q in drops {
                    sqlx::query(q).execute(&mut c).await?;
                }
            }
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&url).await?;
                for q in drops {
                    sqlx::query(&format!("{q} ON dead_letters"))
                        .execute(&mut c)
                        .await?;
                }
            }
        }
    }
    if variant == Variant::NoSearch {
        match backend {
            Backend::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&url).await?;
                sqlx::query("DROP TRIGGER dead_letters_text_delete")
                    .execute(&mut c)
                    .await?;
                for q in SQLITE_NO_SEARCH {
                    sqlx::query(q).execute(&mut c).await?;
                }
            }
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&url).await?;
                for q in POSTGRES_NO_SEARCH {
                    sqlx::query(q).execute(&mut c).await?;
                }
            }
        }
    }
    if variant == Variant::RefuseHostile {
        match backend {
            Backend::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&url).await?;
                sqlx::query(SQLITE_REFUSE).execute(&mut c).await?;
            }
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&url).await?;
                for q in POSTGRES_REFUSE {
                    sqlx::query(q).execute(&mut c).await?;
                }
            }
        }
    }
    let refused = if variant == Variant::RefuseHostile {
        n / 1000
    } else {
        0
    };
    let rate = ingest_into(&store, topic, n, variant != Variant::NoAggregates).await?;
    let quarantined = store.quarantine_count().await? as usize;
    if quarantined != refused {
        bail!("{quarantined} records quarantined, expected {refused}");
    }
    eprintln!("ingest into {backend:?} ({variant:?}): {rate:.0} msgs/s");
    Ok(rate)
}

/// Runs redrive's ingest of `topic` into `store` (a fresh consumer group) until `n` records
/// are stored or quarantined; msgs/s from the start to the n-th record counted.
///
/// The stored records are counted every 100 ms from the maintained aggregate
/// ([`Store::all_count`], what the pages read) when `aggregates` is true; an exact
/// `COUNT(*)` (a scan of `dead_letters`, which on PostgreSQL took a fifth of the database's CPU
/// while it ingested, at 10 polls a second) only for a store whose aggregate triggers were
/// dropped.
async fn ingest_into(store: &Store, topic: &str, n: usize, aggregates: bool) -> Result<f64> {
    let config = IngestConfig {
        brokers: kit::kafka_brokers(),
        topics: vec![topic.to_string()],
        group_id: kit::unique("bench_ingest"),
        batch_size: env_usize("BENCH_BATCH", 500),
        linger_ms: 50,
        // `BENCH_KAFKA_PROPS=name=value,name=value`: librdkafka properties applied last, as
        // a user's `kafka_properties` are (for comparing fetch sizes in process).
        kafka_properties: std::env::var("BENCH_KAFKA_PROPS")
            .unwrap_or_default()
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect(),
        backpressure: None,
    };
    let shutdown = CancellationToken::new();
    let t = Instant::now();
    let task = tokio::spawn(ingest::run(
        config,
        store.clone(),
        Arc::new(IngestStatus::default()),
        shutdown.clone(),
    ));
    let all = Filter::default();
    kit::wait_for("ingest of every record", Duration::from_secs(900), || {
        let store = store.clone();
        let all = all.clone();
        async move {
            let stored = if aggregates {
                store.all_count().await.ok()?
            } else {
                store.count(&all).await.ok()?
            } as usize;
            let quarantined = store.quarantine_count().await.ok()? as usize;
            (stored + quarantined >= n).then_some(())
        }
    })
    .await?;
    let rate = n as f64 / t.elapsed().as_secs_f64();
    shutdown.cancel();
    task.await??;
    Ok(rate)
}

/// The databases to measure: `BENCH_BACKENDS` (`sqlite`, `postgres`, comma-separated;
/// default both). Read by the ingest-only figures ([`ingest_limit`]) and the search
/// latencies ([`search`]).
fn backends() -> Vec<Backend> {
    let wanted = std::env::var("BENCH_BACKENDS")
        .unwrap_or_default()
        .to_lowercase();
    Backend::ALL
        .into_iter()
        .filter(|b| wanted.is_empty() || wanted.contains(&format!("{b:?}").to_lowercase()))
        .collect()
}

fn synthetic(i: usize, now: i64) -> NewDeadLetter {
    let group = i % GROUPS;
    let class = format!("com.example.errors.Failure{group}Exception");
    let message = if group == 7 {
        format!("Connection reset while calling payments for order {i}")
    } else {
        format!(
            "Failure {group} while processing order {i} after {} ms",
            i % 1000
        )
    };
    let source_topic = format!("service{}.events", i % SOURCE_TOPICS);
    let fingerprint = redrive_core::fingerprint::fingerprint(Some(&class), Some(&message));
    let at = now - (i as i64 * 30 * DAY_MS / 1_000_000) % (30 * DAY_MS);
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: format!("{source_topic}.DLT"),
            dlq_partition: (i % 4) as i32,
            dlq_offset: i as i64,
            timestamp_ms: Some(at),
            key: Some(format!("order-{i}").into_bytes()),
            value: Some(vec![b'v'; 256]),
            headers: vec![Header {
                name: "kafka_dlt-original-topic".into(),
                value: Some(source_topic.clone().into_bytes()),
            }],
        },
        convention: Convention::SpringDlt,
        normalized: Normalized {
            source_topic: Some(source_topic),
            source_partition: Some((i % 4) as i32),
            source_offset: Some(i as i64),
            consumer_group: Some(format!("group{}", i % 5)),
            error_class: Some(class),
            error_message: Some(message),
            retry_count: Some(3),
            ..Normalized::default()
        },
        fingerprint,
        dead_lettered_at_ms: at,
        ingested_at_ms: now,
    }
}

/// A fresh, migrated store of `backend` holding `rows` [`synthetic`] dead letters ([`fill`]).
async fn filled_store(
    backend: Backend,
    rows: usize,
    now: i64,
) -> Result<(Store, tempfile::TempDir)> {
    let (store, dir, _url) = filled_store_at(backend, rows, now).await?;
    Ok((store, dir))
}

/// [`filled_store`], with the store's URL (`sqlite:...` or `postgres://...`).
async fn filled_store_at(
    backend: Backend,
    rows: usize,
    now: i64,
) -> Result<(Store, tempfile::TempDir, String)> {
    let (url, dir) = kit::fresh_database(backend).await?;
    let store = Store::connect(&url).await?;
    store.migrate().await?;
    fill(&url, rows, now).await?;
    Ok((store, dir, url))
}

/// Fills the migrated, empty store at `url` with `rows` [`synthetic`] dead letters, generated
/// by the database itself ([`bulk_load`]): 10M rows in minutes instead of an hour.
async fn fill(url: &str, rows: usize, now: i64) -> Result<()> {
    let took = bulk_load::bulk_load(url, rows, now).await?;
    eprintln!(
        "filled {rows} rows in {:.1} s ({:.0} rows/s)",
        took.as_secs_f64(),
        rows as f64 / took.as_secs_f64().max(1e-9)
    );
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// (p50, p99) in ms for each of the four filters.
async fn list_latencies(backend: Backend, rows: usize, queries: usize) -> Result<Vec<(f64, f64)>> {
    let now = 1_796_104_800_000i64;
    let (store, _dir) = filled_store(backend, rows, now).await?;
    let group_fp = synthetic(7, now).fingerprint;
    let filters = [
        Filter::default(),
        Filter {
            fingerprint: Some(group_fp),
            ..Filter::default()
        },
        Filter {
            source_topic: Some("service3.events".into()),
            from_ms: Some(now - 7 * DAY_MS),
            to_ms: Some(now - 6 * DAY_MS),
            ..Filter::default()
        },
        Filter {
            q: Some("connection reset".into()),
            ..Filter::default()
        },
    ];
    let mut out = Vec::new();
    for filter in filters {
        let query = ListQuery {
            filter,
            limit: 50,
            cursor: None,
        };
        let mut times = Vec::with_capacity(queries);
        for _ in 0..queries {
            let t = Instant::now();
            let page = store.list(&query).await?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            if page.items.is_empty() {
                bail!(
                    "filter {:?} matched nothing: the bench data is wrong",
                    query.filter
                );
            }
        }
        times.sort_by(|a, b| a.total_cmp(b));
        out.push((percentile(&times, 0.5), percentile(&times, 0.99)));
    }
    eprintln!("list latencies on {backend:?}: {out:?}");
    Ok(out)
}

/// A delete of `n` rows by filter on SQLite: (total s, longest chunk transaction ms, chunks).
async fn bulk_delete(n: usize) -> Result<(f64, f64, i64)> {
    use redrive_core::actions::{Actor, Selection};
    let now = 1_796_104_800_000i64;
    let (store, _dir) = filled_store(Backend::Sqlite, n, now).await?;
    let actor = Actor::operator("bench");
    let t = Instant::now();
    let deleted = store
        .delete(&actor, &Selection::Filter(Filter::default()), Some("bench"))
        .await?;
    let total = t.elapsed().as_secs_f64();
    if deleted != n as u64 {
        bail!("the bulk delete changed {deleted} of {n} rows");
    }
    let chunks = store.bulk_actions(1).await?.first().map_or(1, |b| b.chunks);
    let longest = redrive_core::store::longest_bulk_transaction().as_secs_f64() * 1000.0;
    eprintln!(
        "bulk delete of {n}: {total:.1} s, longest transaction {longest:.1} ms, {chunks} chunks"
    );
    Ok((total, longest, chunks))
}
