//! The `redrive_retention_*` series (`docs/metrics.md`, "Retention"): purges by DLQ topic and
//! reason, archive and run counters, and the DLQ topics ingest has paused at a limit.
//! Cardinality is bounded by the DLQ topics in the store (times five reasons).

use std::sync::Arc;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use redrive_core::retention::{Backpressure, RetentionStatus};

/// What the exposition reads.
#[derive(Debug, Clone)]
pub struct RetentionMetrics {
    pub status: Arc<RetentionStatus>,
    pub backpressure: Arc<Backpressure>,
}

fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let c = ConstCounter::new(v);
    let m = enc.encode_descriptor(name, help, None, c.metric_type())?;
    c.encode(m)
}

/// Writes the series; without `metrics` (retention not started) the counters read zero.
pub fn encode(enc: &mut DescriptorEncoder, metrics: Option<&RetentionMetrics>) -> std::fmt::Result {
    let snap = metrics.map(|m| m.status.snapshot()).unwrap_or_default();
    {
        let c = ConstCounter::new(0u64);
        let mut m = enc.encode_descriptor(
            "redrive_retention_purged",
            "Dead letters deleted for good by retention, by DLQ topic and the limit that purged them.",
            None,
            c.metric_type(),
        )?;
        for (topic, reason, n) in &snap.purged {
            ConstCounter::new(*n).encode(
                m.encode_family(&[("dlq_topic", topic.as_str()), ("reason", reason.as_str())])?,
            )?;
        }
    }
    counter(
        enc,
        "redrive_retention_archived",
        "Dead letters written to the archive before a purge.",
        snap.archived_total,
    )?;
    counter(
        enc,
        "redrive_retention_runs",
        "Retention purge runs finished on this instance (the leader).",
        snap.runs_total,
    )?;
    counter(
        enc,
        "redrive_retention_chunks",
        "Delete transactions committed by retention purges.",
        snap.chunks_total,
    )?;
    counter(
        enc,
        "redrive_retention_failures",
        "Retention ticks that failed (store or archive errors); retried at the next interval.",
        snap.failures_total,
    )?;
    let paused = metrics.map(|m| m.backpressure.paused()).unwrap_or_default();
    let g = ConstGauge::new(0i64);
    let mut m = enc.encode_descriptor(
        "redrive_ingest_backpressure_paused",
        "1 for each DLQ topic whose ingest is paused at a retention limit (action = backpressure).",
        None,
        g.metric_type(),
    )?;
    for p in &paused {
        ConstGauge::new(1i64).encode(m.encode_family(&[
            ("dlq_topic", p.dlq_topic.as_str()),
            ("reason", p.reason.as_str()),
        ])?)?;
    }
    Ok(())
}
