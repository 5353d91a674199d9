//! The `redrive_store_write_gate_*` series (`docs/metrics.md`, "Store write gate"): how often
//! this process's writes passed SQLite's in-process write gate, how long they queued for it
//! and how long they held it (`redrive_core::store::WriteGateStats`). Not exported on
//! PostgreSQL, which has no gate. No labels.

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use redrive_core::store::WriteGateStats;

/// One constant counter without labels (shared with the other small `telemetry_*` modules).
pub(crate) fn counter<N>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    v: N,
) -> std::fmt::Result
where
    ConstCounter<N>: EncodeMetric,
{
    let c = ConstCounter::new(v);
    let m = enc.encode_descriptor(name, help, None, c.metric_type())?;
    c.encode(m)
}

/// One constant gauge without labels.
pub(crate) fn gauge(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    v: f64,
) -> std::fmt::Result {
    let g = ConstGauge::new(v);
    let m = enc.encode_descriptor(name, help, None, g.metric_type())?;
    g.encode(m)
}

/// Writes the series for `stats` (read at scrape time from the store); nothing for `None`.
pub fn encode(enc: &mut DescriptorEncoder, stats: Option<WriteGateStats>) -> std::fmt::Result {
    let Some(s) = stats else {
        return Ok(());
    };
    counter(
        enc,
        "redrive_store_write_gate_passes",
        "SQLite writes (transactions and single statements) of this process that passed the \
         first-in-first-out write gate.",
        s.passes,
    )?;
    counter(
        enc,
        "redrive_store_write_gate_queued",
        "Of those, the writes that found the gate held and queued for it.",
        s.queued,
    )?;
    counter(
        enc,
        "redrive_store_write_gate_wait_seconds",
        "Total time writes spent queued for the write gate.",
        s.wait_total.as_secs_f64(),
    )?;
    gauge(
        enc,
        "redrive_store_write_gate_wait_max_seconds",
        "Longest single wait for the write gate since the process started.",
        s.wait_max.as_secs_f64(),
    )?;
    counter(
        enc,
        "redrive_store_write_gate_hold_seconds",
        "Total time the write gate was held (a write transaction from its turn to its end).",
        s.hold_total.as_secs_f64(),
    )?;
    gauge(
        enc,
        "redrive_store_write_gate_hold_max_seconds",
        "Longest single hold of the write gate since the process started.",
        s.hold_max.as_secs_f64(),
    )
}
