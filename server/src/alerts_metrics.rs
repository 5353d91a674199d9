//! The alert series of `/metrics` (`docs/metrics.md`), read from
//! [`AlertStatus`](redrive_core::alerts::status::AlertStatus) at each scrape. Bounded: one
//! `redrive_alerts` series per configured rule and state (3 per rule), three counters per
//! configured notifier.

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use redrive_core::alerts::status::AlertStatusSnapshot;
use redrive_core::alerts::AlertState;

/// Picks one of a notifier's (delivered, retried, failed) counts.
type Pick = fn(&(u64, u64, u64)) -> u64;

/// Writes the alert series; `None` (no alerts wired) writes zeros for the unlabelled ones.
pub fn encode(
    enc: &mut DescriptorEncoder,
    snap: Option<AlertStatusSnapshot>,
) -> Result<(), std::fmt::Error> {
    let snap = snap.unwrap_or_default();
    {
        let g = ConstGauge::new(0i64);
        let mut m = enc.encode_descriptor(
            "redrive_alerts",
            "Scopes of each alert rule by state (ok = resolved scopes still shown on /alerts).",
            None,
            g.metric_type(),
        )?;
        for rule in &snap.rules {
            for state in AlertState::ALL {
                let n = snap
                    .states
                    .iter()
                    .filter(|(r, s, _)| r == rule && s == state.as_str())
                    .map(|(_, _, n)| *n)
                    .sum::<i64>();
                ConstGauge::new(n).encode(
                    m.encode_family(&[("rule", rule.as_str()), ("state", state.as_str())])?,
                )?;
            }
        }
    }
    let counters: [(&str, &str, Pick); 3] = [
        (
            "redrive_alert_notifications_delivered",
            "Alert notifications delivered (2xx), by notifier.",
            |c| c.0,
        ),
        (
            "redrive_alert_notification_retries",
            "Failed alert notification attempts that will be retried, by notifier.",
            |c| c.1,
        ),
        (
            "redrive_alert_notifications_failed",
            "Alert notifications given up after their attempts (see /alerts and the audit trail), by notifier.",
            |c| c.2,
        ),
    ];
    for (name, help, pick) in counters {
        let c = ConstCounter::new(0u64);
        let mut m = enc.encode_descriptor(name, help, None, c.metric_type())?;
        for (notifier, counts) in &snap.notifications {
            ConstCounter::new(pick(counts))
                .encode(m.encode_family(&[("notifier", notifier.as_str())])?)?;
        }
    }
    let c = ConstCounter::new(snap.evaluations);
    c.encode(enc.encode_descriptor(
        "redrive_alert_evaluations",
        "Alert evaluations completed by this instance (the leader).",
        None,
        c.metric_type(),
    )?)?;
    let c = ConstCounter::new(snap.evaluation_failures);
    c.encode(enc.encode_descriptor(
        "redrive_alert_evaluation_failures",
        "Alert evaluations that failed (store errors); retried at the next interval.",
        None,
        c.metric_type(),
    )?)?;
    let g = ConstGauge::new(i64::from(snap.leader));
    g.encode(enc.encode_descriptor(
        "redrive_alert_evaluator_leader",
        "1 when this instance evaluates the alert rules (the leader), else 0.",
        None,
        g.metric_type(),
    )?)?;
    let g = ConstGauge::new(snap.last_evaluation_ms.map_or(0, |ms| ms / 1000));
    g.encode(enc.encode_descriptor(
        "redrive_alert_last_evaluation_timestamp_seconds",
        "Unix time of this instance's last successful alert evaluation (0 = none).",
        None,
        g.metric_type(),
    )?)
}
