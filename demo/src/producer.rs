//! The producer of user requests: one every `interval_ms`, keyed by its `message_id`, a
//! `poison_ratio` share of them malformed. Each acknowledged request is written to the ledger's
//! `produced` table, so "nothing was lost" can be checked against it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;

use crate::control::bump;
use crate::kafka::{self, Outgoing};
use crate::ledger::Position;
use crate::request;
use crate::{DemoError, Shared};

/// Produces until `count` requests are out or the demo stops.
pub(crate) async fn run(sh: Arc<Shared>) -> Result<(), DemoError> {
    let mut tick = tokio::time::interval(Duration::from_millis(sh.config.interval_ms.max(1)));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut i: u64 = 0;
    while sh.config.count.is_none_or(|c| i < c) {
        tokio::select! {
            _ = sh.stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let req = request::new_request(&sh.rng);
        let poison = request::poison_for(i, sh.config.poison_ratio, &sh.rng);
        let value = request::encode(&req, poison);
        let id = req.message_id.to_string();
        let headers = vec![(
            "content-type".to_string(),
            Some(b"application/json".to_vec()),
        )];
        let out = Outgoing {
            topic: &sh.config.source_topic,
            key: Some(id.as_bytes()),
            value: Some(&value),
            headers: &headers,
        };
        let Some((partition, offset)) = kafka::send_until_acked(&sh.producer, &out, &sh.stop).await
        else {
            break;
        };
        let kind = poison.map_or("valid", |p| p.as_str());
        let at = Position {
            topic: sh.config.source_topic.clone(),
            partition,
            offset,
        };
        // The record is out; failing to note it must not stop the demo.
        if let Err(e) = sh.ledger.record_produced(&id, kind, &at).await {
            tracing::warn!(message_id = %id, error = %e, "demo: could not note a produced request");
        }
        bump(&sh.control.stats().produced);
        if poison.is_some() {
            bump(&sh.control.stats().produced_poison);
        }
        tracing::debug!(message_id = %id, kind, partition, offset, "demo: produced");
        i += 1;
    }
    tracing::info!(produced = i, "demo: producer finished");
    Ok(())
}
