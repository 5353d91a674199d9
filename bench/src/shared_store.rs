//! The large store that the sections reading one share, one per database and size: the list
//! pages ([`crate::list_latency`]), search ([`crate::search`]), the overview and groups pages
//! ([`crate::overview_page`]) and the pages under load ([`crate::pages_load`], run after the
//! others: its server's ingest adds rows).
//!
//! Each of those sections filled a store of its own before, so one `make bench` at 10M rows
//! filled eight 10M-row stores (13–18 min each on this project's 2-core machines,
//! `docs/bench.md`), about two hours of fills; it now fills two. The benchmark asks for
//! every figure at 10M side by side in one run (issue 12, "Benchmark").
//!
//! The store is bulk-loaded by the database itself ([`crate::bulk_load`], `Tiers::Sorted`:
//! sorted into tiers as the server's sorter leaves a store that has been running) with the
//! rows of [`crate::synthetic`] at [`NOW`], the clock every section's filters and time ranges
//! use. It is dropped (the PostgreSQL database too, by [`kit::TestDatabase`]) with the
//! [`SharedStores`], at the end of the run or when a section fails.
//!
//! Disk: both databases' stores are kept until the run ends, about 16 GB (SQLite) and 20 GB
//! (PostgreSQL) at 10M rows.

use std::sync::Arc;

use anyhow::Result;
use redrive_core::store::Store;
use redrive_testkit::{self as kit, Backend};

use crate::bulk_load::{bulk_load, Tiers};

/// The bench's clock (epoch ms) for the shared stores: what [`crate::synthetic`]'s times are
/// relative to.
pub(crate) const NOW: i64 = 1_796_104_800_000;

/// One filled store: where it is and how long the database took to fill it.
pub(crate) struct Filled {
    pub(crate) url: String,
    /// Seconds from the empty migrated store to the last row and index.
    pub(crate) fill_s: f64,
    _db: kit::TestDatabase,
}

impl Filled {
    /// A new handle (pool) on the store.
    pub(crate) async fn connect(&self) -> Result<Store> {
        Ok(Store::connect(&self.url).await?)
    }
}

/// The stores filled so far in this run, filled on first use.
#[derive(Default)]
pub(crate) struct SharedStores {
    filled: tokio::sync::Mutex<Vec<(Backend, usize, Arc<Filled>)>>,
}

impl SharedStores {
    /// The store of `backend` with `rows` [`crate::synthetic`] dead letters, filled now if no
    /// section asked for it before. `what` names the asking section in the progress line.
    ///
    /// Errors: the database's or the broker-free fill's ([`bulk_load`]).
    pub(crate) async fn get(
        &self,
        backend: Backend,
        rows: usize,
        what: &str,
    ) -> Result<Arc<Filled>> {
        let mut filled = self.filled.lock().await;
        if let Some((_, _, f)) = filled.iter().find(|(b, r, _)| *b == backend && *r == rows) {
            eprintln!(
                "{what}: the shared store of {rows} rows on {backend:?} (filled in {:.1} s)",
                f.fill_s
            );
            return Ok(f.clone());
        }
        let (url, db) = kit::fresh_database(backend).await?;
        let store = Store::connect(&url).await?;
        store.migrate().await?;
        store.close().await;
        let took = bulk_load(&url, rows, NOW, Tiers::Sorted).await?;
        let fill_s = took.as_secs_f64();
        eprintln!(
            "{what}: filled the shared store of {rows} rows on {backend:?} in {fill_s:.1} s ({:.0} rows/s)",
            rows as f64 / fill_s.max(1e-9)
        );
        let f = Arc::new(Filled {
            url,
            fill_s,
            _db: db,
        });
        filled.push((backend, rows, f.clone()));
        Ok(f)
    }
}
