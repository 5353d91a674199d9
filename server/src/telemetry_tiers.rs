//! The `redrive_tier_*` series (`docs/metrics.md`, "Automation tiers"): what ingest and the
//! leader's sorter did on this instance since start — dead letters sorted per tier, moved by
//! age, and the passes that failed. Cardinality: four tiers.

use std::sync::atomic::Ordering;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use redrive_core::automation::sort_loop::SorterStatus;
use redrive_core::automation::Tier;

fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let c = ConstCounter::new(v);
    let m = enc.encode_descriptor(name, help, None, c.metric_type())?;
    c.encode(m)
}

/// Writes the series; without `sorter` (not started) every counter reads zero.
pub fn encode(enc: &mut DescriptorEncoder, sorter: Option<&SorterStatus>) -> std::fmt::Result {
    {
        let c = ConstCounter::new(0u64);
        let mut m = enc.encode_descriptor(
            "redrive_tier_sorted",
            "Dead letters sorted into each automation tier on this instance, by ingest as it \
             stored them or by the leader's sorter.",
            None,
            c.metric_type(),
        )?;
        for t in Tier::ALL {
            let n = sorter.map_or(0, |s| s.sorted_into(t));
            ConstCounter::new(n).encode(m.encode_family(&[("tier", t.as_str())])?)?;
        }
    }
    counter(
        enc,
        "redrive_tier_moved",
        "Dead letters moved to another tier by a rule's move_after (age-based movement).",
        sorter.map_or(0, |s| s.moved_total.load(Ordering::Relaxed)),
    )?;
    counter(
        enc,
        "redrive_tier_sorter_errors",
        "Sorter or age-move passes that failed (store unavailable, a rule set version that \
         does not compile); retried a second later.",
        sorter.map_or(0, |s| s.errors_total.load(Ordering::Relaxed)),
    )?;
    let g = ConstGauge::new(sorter.map_or(0, |s| s.version.load(Ordering::Relaxed) as i64));
    let m = enc.encode_descriptor(
        "redrive_tier_rule_set_version",
        "The rule set version the sorter uses on this instance (0: none stored, or not leading).",
        None,
        g.metric_type(),
    )?;
    g.encode(m)
}
