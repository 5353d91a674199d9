//! The server's part of scheduled reprocessing (`docs/automation.md`, "Health gates"): the
//! [`GateProbe`] the leader's scheduler asks (an HTTP GET with reqwest, a consumer group's
//! lag with the relay's reading on the blocking pool), and the `redrive_automation_*` series
//! (`docs/metrics.md`, "Automatic reprocessing"). Cardinality is bounded by the transient
//! rules of the rule set (times five outcomes).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use redrive_core::actions::LagGate;
use redrive_core::automation::rounds::{GateProbe, ProbeFuture, RoundsStatus};
use redrive_core::automation::rules::HttpGate;
use redrive_core::replay::RelayConfig;

/// The probe of `redrive serve`: reqwest for HTTP (no redirects followed: a gate answers
/// itself), the relay's Kafka settings for lag.
pub struct ServerProbe {
    client: reqwest::Client,
    relay: Arc<RelayConfig>,
}

impl ServerProbe {
    pub fn new(relay: RelayConfig) -> ServerProbe {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!(
                "redrive/",
                env!("CARGO_PKG_VERSION"),
                " (health gate)"
            ))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        ServerProbe {
            client,
            relay: Arc::new(relay),
        }
    }
}

impl GateProbe for ServerProbe {
    fn http<'a>(&'a self, gate: &'a HttpGate) -> ProbeFuture<'a, String> {
        Box::pin(async move {
            let timeout = Duration::from_millis(gate.timeout_ms.max(1));
            let answer = self
                .client
                .get(gate.url.clone())
                .timeout(timeout)
                .send()
                .await;
            match answer {
                Ok(r) if r.status().is_success() => Ok(format!("answered {}", r.status())),
                Ok(r) => Err(format!("answered {}", r.status())),
                Err(e) if e.is_timeout() => {
                    Err(format!("did not answer within {} ms", gate.timeout_ms))
                }
                Err(e) if e.is_connect() => Err("refused or unreachable (connect error)".into()),
                Err(e) => Err(format!("failed: {e}")),
            }
        })
    }

    fn lag<'a>(&'a self, gate: &'a LagGate, topics: &'a [String]) -> ProbeFuture<'a, i64> {
        let relay = self.relay.clone();
        let group = gate.group.clone();
        let topics = topics.to_vec();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                redrive_core::replay::read_group_lag(&relay, &group, &topics)
            })
            .await
            .map_err(|e| format!("the lag reading stopped: {e}"))?
        })
    }
}

/// Writes the series; without `status` (no scheduler) nothing is exported but the headers.
pub fn encode(enc: &mut DescriptorEncoder, status: Option<&Arc<RoundsStatus>>) -> std::fmt::Result {
    let snap = status.map(|s| s.snapshot()).unwrap_or_default();
    {
        let c = ConstCounter::new(0u64);
        let mut m = enc.encode_descriptor(
            "redrive_automation_rounds",
            "Scheduled rounds of automatic replay on this instance (the leader), by rule and \
             outcome (ran, nothing_due, gate_closed, paused, error).",
            None,
            c.metric_type(),
        )?;
        for (rule, r) in &snap {
            for (outcome, n) in &r.rounds {
                ConstCounter::new(*n)
                    .encode(m.encode_family(&[("rule", rule.as_str()), ("outcome", *outcome)])?)?;
            }
        }
    }
    {
        let c = ConstCounter::new(0u64);
        let mut m = enc.encode_descriptor(
            "redrive_automation_replayed",
            "Dead letters queued for replay by scheduled rounds, by rule.",
            None,
            c.metric_type(),
        )?;
        for (rule, r) in &snap {
            ConstCounter::new(r.replayed).encode(m.encode_family(&[("rule", rule.as_str())])?)?;
        }
    }
    {
        let g = ConstGauge::new(0i64);
        let mut m = enc.encode_descriptor(
            "redrive_automation_gate_open",
            "The last health gate check of a rule: 1 open, 0 closed (absent: not checked yet).",
            None,
            g.metric_type(),
        )?;
        for (rule, r) in &snap {
            if let Some(open) = r.gate_open {
                ConstGauge::new(i64::from(open))
                    .encode(m.encode_family(&[("rule", rule.as_str())])?)?;
            }
        }
    }
    {
        let g = ConstGauge::new(0i64);
        let mut m = enc.encode_descriptor(
            "redrive_automation_rule_paused",
            "1 for a scheduled rule that is paused (by itself or a person), else 0.",
            None,
            g.metric_type(),
        )?;
        for (rule, r) in &snap {
            ConstGauge::new(i64::from(r.paused))
                .encode(m.encode_family(&[("rule", rule.as_str())])?)?;
        }
    }
    Ok(())
}
