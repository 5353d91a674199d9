//! Detail-page render time and peak RSS for pathological dead letters (issue #7: every page
//! is bounded by what it shows, `docs/limits.md`, "Display caps").
//!
//! How it is measured: the release `redrive` binary (beside this bench's own executable,
//! built by `scripts/bench`) serves a fresh SQLite store holding one dead letter per shape.
//! For each shape the server's peak RSS is reset (`echo 5 > /proc/PID/clear_refs`), the detail
//! page is fetched once to warm up and then `DETAIL_RUNS` times, and the server's `VmHWM` is
//! read from `/proc/PID/status`: the peak while it rendered that shape. Time is the median
//! wall time of one GET (request to last byte, loopback, no compression), so it includes
//! reading the record from the store.

use std::time::Duration;

use anyhow::Result;
use redrive_core::model::{Convention, Header, NewDeadLetter, Normalized, RawRecord};
use redrive_core::store::Store;
use redrive_testkit::{self as kit, Backend};

use crate::release_server::ReleaseServer;

const DETAIL_RUNS: usize = 5;

/// One measured shape.
pub struct Figure {
    pub shape: &'static str,
    /// Stored size of the record's key + value + headers, bytes.
    pub stored_bytes: usize,
    /// The page's HTML, bytes.
    pub page_bytes: usize,
    /// Median GET time, ms.
    pub median_ms: f64,
    /// Server peak RSS while rendering it, KiB.
    pub peak_rss_kib: u64,
}

fn record(offset: i64, value: Vec<u8>, headers: Vec<Header>) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: "bench_detail.DLT".into(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(1_796_104_800_000),
            key: Some(b"key".to_vec()),
            value: Some(value),
            headers,
        },
        convention: Convention::Unknown,
        normalized: Normalized {
            error_class: Some("com.example.Pathological".into()),
            error_message: Some("pathological shape".into()),
            ..Normalized::default()
        },
        fingerprint: "0000000000000000".into(),
        dead_lettered_at_ms: 1_796_104_800_000 + offset,
        ingested_at_ms: 1_796_104_800_000 + offset,
    }
}

fn shapes() -> Vec<(&'static str, NewDeadLetter)> {
    let h = |name: String, v: &[u8]| Header {
        name,
        value: Some(v.to_vec()),
    };
    let mut nested = vec![b'['; 100_000];
    nested.extend(vec![b']'; 100_000]);
    let mut json = b"{\"items\":[".to_vec();
    while json.len() < 8 << 20 {
        json.extend_from_slice(b"{\"sku\":\"A-1\",\"qty\":1,\"note\":\"\\u202e x\"},");
    }
    json.extend_from_slice(b"{}]}");
    vec![
        (
            "small JSON (baseline)",
            record(0, b"{\"a\":1}".to_vec(), vec![]),
        ),
        ("8 MiB JSON value", record(1, json, vec![])),
        ("8 MiB binary value", record(2, vec![0xff; 8 << 20], vec![])),
        ("100k-deep JSON nesting", record(3, nested, vec![])),
        ("1 MiB single line", record(4, vec![b'x'; 1 << 20], vec![])),
        (
            "10k headers",
            record(
                5,
                b"{}".to_vec(),
                (0..10_000).map(|i| h(format!("h{i}"), b"value")).collect(),
            ),
        ),
        (
            "64 KiB header name",
            record(6, b"{}".to_vec(), vec![h("n".repeat(64 * 1024), b"v")]),
        ),
    ]
}

fn stored_bytes(d: &NewDeadLetter) -> usize {
    d.record.key.as_ref().map_or(0, Vec::len)
        + d.record.value.as_ref().map_or(0, Vec::len)
        + d.record
            .headers
            .iter()
            .map(|h| h.name.len() + h.value.as_ref().map_or(0, Vec::len))
            .sum::<usize>()
}

/// Measures every shape; `Err` when the release binary is missing or the server fails.
pub async fn figures() -> Result<Vec<Figure>> {
    let (db_url, _dir) = kit::fresh_database(Backend::Sqlite).await?;
    let store = Store::connect(&db_url).await?;
    store.migrate().await?;
    let shapes = shapes();
    let records: Vec<NewDeadLetter> = shapes.iter().map(|(_, d)| d.clone()).collect();
    store.insert_batch(&records).await?;
    let server = ReleaseServer::start(&db_url, &[], Duration::from_secs(60)).await?;
    let ids: Vec<i64> = {
        let q = redrive_core::filter::ListQuery::from_pairs([("limit", "100")])?;
        let mut items = store.list(&q).await?.items;
        items.sort_by_key(|d| d.dlq_offset);
        items.iter().map(|d| d.id).collect()
    };
    let mut out = Vec::new();
    for ((shape, d), id) in shapes.iter().zip(ids) {
        let url = format!("/dead-letters/{id}");
        server.reset_peak()?;
        let (_, page_bytes) = server.get(&url).await?;
        let mut times = Vec::new();
        for _ in 0..DETAIL_RUNS {
            times.push(server.get(&url).await?.0);
        }
        times.sort_by(f64::total_cmp);
        let figure = Figure {
            shape,
            stored_bytes: stored_bytes(d),
            page_bytes,
            median_ms: times[times.len() / 2],
            peak_rss_kib: server.peak_rss_kib()?,
        };
        eprintln!(
            "detail page, {shape}: {} bytes, {:.1} ms, peak RSS {} KiB",
            figure.page_bytes, figure.median_ms, figure.peak_rss_kib
        );
        out.push(figure);
    }
    server.stop().await;
    Ok(out)
}
