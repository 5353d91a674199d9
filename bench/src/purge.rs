//! Retention purge throughput (`docs/retention.md`): `BENCH_PURGE` (default `BENCH_ROWS`)
//! stored dead letters, all past `max_age_ms`, purged by retention's own tick (the code the
//! leader runs) in chunks of 1,000, without and with the archive written first (gzip JSON
//! Lines to a directory), on both databases. `BENCH_PURGE_ONLY=1` runs just this.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Result};
use redrive_core::retention::{purge, Backpressure, RetentionConfig, RetentionStatus};
use redrive_testkit::Backend;

/// rows/s of purging `rows` dead letters on `backend`, archiving first when `archive`.
pub async fn purge_rate(backend: Backend, rows: usize, archive: bool) -> Result<(f64, u64)> {
    let now = chrono::Utc::now().timestamp_millis() + 1;
    let (store, _dir) = super::filled_store(backend, rows, now).await?;
    let archive_dir = tempfile::tempdir()?;
    let mut toml_text = format!(
        "chunk_rows = 1000\nmax_rows_per_run = {}\n[default]\nmax_age_ms = 1\npurge_new = true\n",
        rows.max(1)
    );
    if archive {
        toml_text.push_str(&format!(
            "[archive]\nlocation = \"{}\"\n",
            archive_dir.path().display()
        ));
    }
    let config: RetentionConfig = toml::from_str(&toml_text)?;
    let target = purge::archive_target(&config)?;
    let bp = Arc::new(Backpressure::new(&config));
    let status = RetentionStatus::default();
    // Dead letters are dead-lettered up to `now`: wait until all are past 1 ms.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let t = Instant::now();
    let mut purged = 0;
    let mut chunks = 0;
    while let Some(r) = purge::tick(&config, &store, &bp, &status, target.as_ref(), true).await? {
        purged += r.purged;
        chunks += r.chunks;
        if r.purged == 0 {
            break;
        }
    }
    let took = t.elapsed().as_secs_f64();
    if purged != rows as u64 {
        bail!("the purge removed {purged} of {rows} rows");
    }
    eprintln!("purge of {rows} on {backend:?} (archive: {archive}): {took:.1} s, {chunks} chunks");
    Ok((rows as f64 / took.max(1e-9), chunks))
}

/// Prints the purge rows of the bench table.
pub async fn print_purge_figures(rows: usize) -> Result<()> {
    let mut cells = Vec::new();
    for archive in [false, true] {
        let mut row = Vec::new();
        for backend in Backend::ALL {
            let (rate, chunks) = purge_rate(backend, rows, archive).await?;
            row.push(format!("{rate:.0} rows/s ({chunks} chunks)"));
        }
        cells.push((archive, row));
    }
    for (archive, row) in cells {
        let what = if archive {
            "with the archive first (gzip JSON Lines to a directory)"
        } else {
            "without archive"
        };
        println!(
            "| retention purge of {rows} rows, {what} | {} | {} |",
            row[0], row[1]
        );
    }
    Ok(())
}
