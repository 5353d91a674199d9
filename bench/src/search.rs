//! Free-text search (issue 12 item 2): the list page's latency with `q` (`Store::list`, in
//! process, without HTTP) over the run's shared store of `BENCH_SEARCH` rows (default
//! `BENCH_ROWS`; [`crate::shared_store`]), per database, for:
//!
//! - a *rare* term: `order N after`, one dead letter's message (a different one for each
//!   query, so no two queries read the same rows);
//! - a *common* term: `while processing`, in 49 of 50 messages (answered by the scan step);
//! - a term in 1 of 50 messages, `connection reset` (more matches than the index step takes at
//!   1M rows, too few in the newest rows to fill a page: the bounded scan's partial page);
//! - that term under a filter no match meets (source topic `service3.events`): the worst
//!   case of a common term with a narrow filter, bounded by the scan;
//! - both again with a term new to the store handle at each query (substrings of
//!   `Connection reset while calling payments`, also in 1 of 50 messages): the store remembers
//!   a term the index step found too common (`core/src/store/common_terms.rs`), so the
//!   repeated term above measures the pages after the first, these the first.
//!
//! And the store's count of the same searches is not timed (the page's "N match" line runs
//! the same bounded steps). `docs/bench.md` keeps the figures.

use std::time::Instant;

use anyhow::{bail, Result};
use redrive_core::filter::ListQuery;
use redrive_core::store::Store;
use redrive_core::Filter;
use redrive_testkit::Backend;

use crate::shared_store::SharedStores;
use crate::{percentile, GROUPS};

/// p50 and p99 of one search, ms, and how many items its first page held (the last query's).
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
    pub items: usize,
}

/// One database's figures.
pub struct Figures {
    pub backend: Backend,
    pub rows: usize,
    pub fill_s: f64,
    pub rare: Latency,
    pub common: Latency,
    pub two_percent: Latency,
    pub two_percent_narrow: Latency,
    pub two_percent_new: Latency,
    pub two_percent_narrow_new: Latency,
}

/// Times `queries` list pages per search over `shared`'s store of `rows` synthetic dead
/// letters on `backend` (filled first if no section did).
pub(crate) async fn measure(
    shared: &SharedStores,
    backend: Backend,
    rows: usize,
    queries: usize,
) -> Result<Figures> {
    let filled = shared.get(backend, rows, "search").await?;
    let fill_s = filled.fill_s;
    let store = filled.connect().await?;
    // Rows whose message is `Failure g while processing order i after ...` (not group 7).
    let rare_row = move |k: usize| {
        let mut i = (rows / 3 + k * 7919) % rows;
        if i % GROUPS == 7 {
            i += 1;
        }
        i % rows
    };
    let rare = time(
        &store,
        queries,
        move |k| Filter {
            q: Some(format!("order {} after", rare_row(k))),
            ..Filter::default()
        },
        true,
    )
    .await?;
    let common = time(
        &store,
        queries,
        |_| Filter {
            q: Some("while processing".into()),
            ..Filter::default()
        },
        true,
    )
    .await?;
    let two_percent = time(
        &store,
        queries,
        |_| Filter {
            q: Some("connection reset".into()),
            ..Filter::default()
        },
        true,
    )
    .await?;
    let two_percent_narrow = time(
        &store,
        queries,
        |_| Filter {
            q: Some("connection reset".into()),
            source_topic: Some("service3.events".into()),
            ..Filter::default()
        },
        false,
    )
    .await?;
    // At most 399 queries each (798 such terms exist), no term in both.
    let fresh = queries.min(399);
    let terms = new_two_percent_terms(2 * fresh);
    let two_percent_new = time(
        &store,
        fresh,
        |k| Filter {
            q: Some(terms[2 * k].clone()),
            ..Filter::default()
        },
        true,
    )
    .await?;
    let two_percent_narrow_new = time(
        &store,
        fresh,
        |k| Filter {
            q: Some(terms[2 * k + 1].clone()),
            source_topic: Some("service3.events".into()),
            ..Filter::default()
        },
        false,
    )
    .await?;
    eprintln!(
        "search on {backend:?}: rare {:.2}/{:.2} ms, common {:.2}/{:.2} ms, 2 % {:.2}/{:.2} ms, 2 % narrow {:.2}/{:.2} ms",
        rare.p50, rare.p99, common.p50, common.p99, two_percent.p50, two_percent.p99,
        two_percent_narrow.p50, two_percent_narrow.p99
    );
    store.close().await;
    Ok(Figures {
        backend,
        rows,
        fill_s,
        rare,
        common,
        two_percent,
        two_percent_narrow,
        two_percent_new,
        two_percent_narrow_new,
    })
}

/// `n` distinct terms in exactly the messages of group 7 (1 of 50): substrings of at least 10
/// characters of its message's start that hold `reset` or `calling` (the other groups'
/// messages share only `while` and ` order` with it), in several spellings of case.
fn new_two_percent_terms(n: usize) -> Vec<String> {
    const TEXT: &str = "Connection reset while calling payments";
    let mut terms = Vec::new();
    for len in (10..=TEXT.len()).rev() {
        for start in 0..=TEXT.len() - len {
            let t = &TEXT[start..start + len];
            if t.contains("reset") || t.contains("calling") {
                terms.push(t.to_string());
                terms.push(t.to_uppercase());
                terms.push(t.to_lowercase());
            }
        }
    }
    terms.sort();
    terms.dedup();
    assert!(terms.len() >= n, "{} terms, {n} wanted", terms.len());
    // Spread over lengths and positions rather than the first n in order.
    let step = terms.len() / n;
    terms.into_iter().step_by(step.max(1)).take(n).collect()
}

/// p50/p99 of `queries` first pages (50 items) of the search `filter(k)`, `k` in
/// `0..queries`; with `want_items`, a page without items is an error (the data is wrong).
async fn time(
    store: &Store,
    queries: usize,
    filter: impl Fn(usize) -> Filter,
    want_items: bool,
) -> Result<Latency> {
    let mut times = Vec::with_capacity(queries);
    let mut items = 0;
    for k in 0..queries {
        let query = ListQuery {
            filter: filter(k),
            limit: 50,
            cursor: None,
        };
        let t = Instant::now();
        let page = store.list(&query).await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        items = page.items.len();
        if want_items && page.items.is_empty() {
            bail!(
                "search {:?} matched nothing: the bench data is wrong",
                query.filter
            );
        }
    }
    times.sort_by(|a, b| a.total_cmp(b));
    Ok(Latency {
        p50: percentile(&times, 0.5),
        p99: percentile(&times, 0.99),
        items,
    })
}

/// Table rows for `figures` (one per database, SQLite first).
pub fn print(figures: &[Figures]) {
    let cell = |b: Backend, f: &dyn Fn(&Figures) -> String| {
        figures
            .iter()
            .find(|x| x.backend == b)
            .map(f)
            .unwrap_or_else(|| "not measured".into())
    };
    let Some(rows) = figures.first().map(|f| f.rows) else {
        return;
    };
    let lat = |l: &Latency| {
        format!(
            "p50 {:.2} ms, p99 {:.2} ms ({} items)",
            l.p50, l.p99, l.items
        )
    };
    println!(
        "| search store filled by the database (with its search text and index), {rows} rows | {} | {} |",
        cell(Backend::Sqlite, &|f| format!("{:.1} s", f.fill_s)),
        cell(Backend::Postgres, &|f| format!("{:.1} s", f.fill_s))
    );
    type Pick = fn(&Figures) -> &Latency;
    let lines: [(&str, Pick); 6] = [
        ("rare term (`order N after`, 1 row)", |f| &f.rare),
        ("common term (`while processing`, 98 % of rows)", |f| {
            &f.common
        }),
        ("2 % term (`connection reset`)", |f| &f.two_percent),
        ("2 % term under a source-topic filter it never meets", |f| {
            &f.two_percent_narrow
        }),
        ("2 % term, a new one at each query", |f| &f.two_percent_new),
        (
            "2 % term under a filter it never meets, a new one at each query",
            |f| &f.two_percent_narrow_new,
        ),
    ];
    for (name, pick) in lines {
        println!(
            "| search list page, {name}, {rows} rows | {} | {} |",
            cell(Backend::Sqlite, &|f| lat(pick(f))),
            cell(Backend::Postgres, &|f| lat(pick(f)))
        );
    }
}
