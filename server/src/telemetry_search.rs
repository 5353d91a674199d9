//! The `redrive_search_*` series (`docs/metrics.md`, "Search index"): how far the search
//! index is behind ingest (`redrive_core::search_indexer`). No labels.

use prometheus_client::encoding::DescriptorEncoder;
use redrive_core::search_indexer::IndexerStatus;

use crate::telemetry_write_gate::{counter, gauge};

/// Writes the series: the indexer's counters when this process runs one (`indexer`), and the
/// index's lag from `oldest_ms` (`ingested_at_ms` of the oldest dead letter not yet indexed,
/// read with the store sizes: `Some(None)` none, `None` not read yet) at `now_ms`.
pub fn encode(
    enc: &mut DescriptorEncoder,
    indexer: Option<&IndexerStatus>,
    oldest_ms: Option<Option<i64>>,
    now_ms: i64,
) -> std::fmt::Result {
    if let Some(oldest) = oldest_ms {
        let lag_ms = oldest.map_or(0, |at| (now_ms - at).max(0));
        gauge(
            enc,
            "redrive_search_index_lag_seconds",
            "Age of the oldest dead letter whose text is not yet in the search index (0: \
             none). Such dead letters are still found by search, by a bounded scan.",
            lag_ms as f64 / 1000.0,
        )?;
    }
    let Some(s) = indexer else {
        return Ok(());
    };
    counter(
        enc,
        "redrive_search_indexed",
        "Dead letters' searched texts this process moved into the search index.",
        s.indexed(),
    )?;
    counter(
        enc,
        "redrive_search_index_failures",
        "Search indexer rounds that failed (retried after a pause).",
        s.failures(),
    )
}
