//! List-page latency over the run's shared store (`make bench` rows 3, `Store::list`, server
//! side; [`crate::shared_store`]) and a bulk delete of every row of a store of its own on SQLite.

use std::time::Instant;

use anyhow::{bail, Result};
use redrive_core::filter::ListQuery;
use redrive_core::Filter;
use redrive_testkit::Backend;

use crate::shared_store::SharedStores;
use crate::{filled_store, percentile, synthetic, DAY_MS};

/// (p50, p99) in ms for each of the four filters, over `shared`'s store of `rows` on `backend`.
pub(crate) async fn list_latencies(
    shared: &SharedStores,
    backend: Backend,
    rows: usize,
    queries: usize,
) -> Result<Vec<(f64, f64)>> {
    let now = crate::shared_store::NOW;
    let filled = shared.get(backend, rows, "list pages").await?;
    let store = filled.connect().await?;
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
    store.close().await;
    Ok(out)
}

/// A delete of `n` rows by filter on SQLite: (total s, longest chunk transaction ms, chunks).
pub(crate) async fn bulk_delete(n: usize) -> Result<(f64, f64, i64)> {
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
