//! The relay's settings ([`RelayConfig`]) and what it refuses to start with.

/// Relay settings (the server maps its configuration onto this).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayConfig {
    /// Bootstrap servers, e.g. `127.0.0.1:9092`.
    pub brokers: String,
    /// Extra librdkafka properties (SASL/SSL, compression, linger, ...), applied over
    /// redrive's own, except the reserved ones (idempotence, acks, the delivery timeout, the
    /// metadata wait, a transactional id): those are ignored with a warning, so that the
    /// relay's guarantees and its delivery/lease timing stay its own.
    pub kafka_properties: Vec<(String, String)>,
    /// Most outbox rows one claim takes (rows; default 1000). A throttled job claims at most
    /// one second's worth at its rate (and what it can publish in a quarter of the lease),
    /// so that several instances sharing its rate each hold a claim.
    pub batch_size: usize,
    /// How long a claim holds its rows, ms (default 30000). If the relay dies, another (or
    /// the same after a restart) publishes them again after this. Must exceed a batch's
    /// publish time: the delivery timeout is capped at half of it.
    pub lease_ms: u64,
    /// Publish attempts per record before it is given up as `replay_failed` (default 10).
    /// Errors that never pass (too large, not authorised, no such topic) fail at once
    /// instead; outages (Kafka unreachable) do not count, up to `outage_max_ms`.
    pub max_attempts: u32,
    /// Longest a job waits out an outage without counting attempts, ms (default 900000, 15
    /// min). The clock starts at the job's first failed batch and stops at its next
    /// published record; past it every outage failure counts an attempt, so a job whose
    /// cluster never comes back (or whose partition never gets a leader, or never enough
    /// in-sync replicas) ends `finished` with its rows `failed` instead of waiting forever.
    /// `0` counts attempts from the first outage.
    pub outage_max_ms: u64,
    /// First retry delay ceiling, ms (default 500); doubles per attempt, with full jitter.
    pub backoff_base_ms: u64,
    /// Largest retry delay ceiling, ms (default 60000).
    pub backoff_max_ms: u64,
    /// Forward the recognised convention's diagnostic headers (exception, original topic,
    /// retry counters) with the replayed record. Default `false`: the consumer sees the
    /// record as its producer sent it, and a retry counter does not send it straight back.
    pub forward_diagnostic_headers: bool,
    /// How often the relay looks for new work, ms (default 250): the delay between a replay
    /// request and its first publish.
    pub poll_interval_ms: u64,
    /// How long one record may wait for its delivery report before it counts as an outage,
    /// ms (librdkafka `message.timeout.ms`; default 10000, at most half the lease).
    pub delivery_timeout_ms: u64,
    /// Jobs worked on at the same time (default 4).
    pub max_parallel_jobs: usize,
    /// How long one reading of a lag-gated job's consumer group lag is used before it is
    /// read again, ms (default 1000; at least 100). A lag-gated job publishes at most
    /// `max_lag - lag` records per reading (`docs/replay.md`, "Lag-aware replay").
    pub lag_poll_ms: u64,
}

/// Default [`RelayConfig::brokers`].
pub fn default_brokers() -> String {
    "127.0.0.1:9092".to_string()
}
/// Default [`RelayConfig::batch_size`], rows: enough to keep thousands of records in flight
/// and amortise the mark transaction, small enough to mark in well under a second.
pub fn default_batch_size() -> usize {
    1000
}
/// Default [`RelayConfig::lease_ms`], ms: several delivery timeouts plus a mark.
pub fn default_lease_ms() -> u64 {
    30_000
}
/// Default [`RelayConfig::max_attempts`].
pub fn default_max_attempts() -> u32 {
    10
}
/// Default [`RelayConfig::outage_max_ms`], ms: longer than a rolling restart or a leader
/// election, short enough that a replay into a cluster that is gone ends within the hour.
pub fn default_outage_max_ms() -> u64 {
    900_000
}
/// Default [`RelayConfig::backoff_base_ms`], ms.
pub fn default_backoff_base_ms() -> u64 {
    500
}
/// Default [`RelayConfig::backoff_max_ms`], ms.
pub fn default_backoff_max_ms() -> u64 {
    60_000
}
/// Default [`RelayConfig::poll_interval_ms`], ms.
pub fn default_poll_interval_ms() -> u64 {
    250
}
/// Default [`RelayConfig::delivery_timeout_ms`], ms: long enough for a leader election,
/// short enough that an outage shows on the job page within seconds.
pub fn default_delivery_timeout_ms() -> u64 {
    10_000
}
/// Default [`RelayConfig::lag_poll_ms`], ms: a consumer commits every 5 s by default
/// (`auto.commit.interval.ms`), so reading more often than once a second gains little.
pub fn default_lag_poll_ms() -> u64 {
    1_000
}
/// Default [`RelayConfig::max_parallel_jobs`].
pub fn default_max_parallel_jobs() -> usize {
    4
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            brokers: default_brokers(),
            kafka_properties: Vec::new(),
            batch_size: default_batch_size(),
            lease_ms: default_lease_ms(),
            max_attempts: default_max_attempts(),
            outage_max_ms: default_outage_max_ms(),
            backoff_base_ms: default_backoff_base_ms(),
            backoff_max_ms: default_backoff_max_ms(),
            forward_diagnostic_headers: false,
            poll_interval_ms: default_poll_interval_ms(),
            delivery_timeout_ms: default_delivery_timeout_ms(),
            max_parallel_jobs: default_max_parallel_jobs(),
            lag_poll_ms: default_lag_poll_ms(),
        }
    }
}

/// Shortest accepted lease, ms.
pub const MIN_LEASE_MS: u64 = 2_000;
/// How long before its lease ends a claim stops trying to mark (so that a mark never races
/// a reclaim), ms.
pub(crate) const LEASE_MARGIN_MS: u64 = 1_000;

impl RelayConfig {
    /// The delivery timeout actually used, ms: within [1 s, lease / 2].
    pub fn effective_delivery_timeout_ms(&self) -> u64 {
        self.delivery_timeout_ms
            .clamp(1_000, (self.lease_ms / 2).max(1_000))
    }

    /// The lag poll interval actually used, ms (at least 100).
    pub(crate) fn effective_lag_poll_ms(&self) -> u64 {
        self.lag_poll_ms.max(100)
    }

    /// Rows one claim of a job with this rate (msgs/s) takes: `batch_size`, and for a
    /// throttled job at most one second's worth and what it can publish in a quarter of the
    /// lease (at least 1).
    pub(crate) fn claim_size(&self, rate_per_sec: Option<u32>) -> usize {
        let max = self.batch_size.max(1);
        match rate_per_sec {
            None => max,
            Some(r) => {
                let quarter_lease = (u64::from(r) * self.lease_ms / 4_000).max(1);
                let per_claim = quarter_lease.min(u64::from(r)).max(1);
                max.min(usize::try_from(per_claim).unwrap_or(max))
            }
        }
    }

    /// Refuses settings the relay cannot work with: no brokers, a lease under
    /// [`MIN_LEASE_MS`], a backoff base above its cap, zero attempts, an empty batch.
    ///
    /// Errors: `BadConfig` naming the setting.
    pub fn check(&self) -> Result<(), RelayError> {
        if self.brokers.trim().is_empty() {
            return Err(RelayError::BadConfig("no Kafka brokers configured".into()));
        }
        if self.lease_ms < MIN_LEASE_MS {
            return Err(RelayError::BadConfig(format!(
                "lease_ms must be at least {MIN_LEASE_MS} (got {})",
                self.lease_ms
            )));
        }
        if self.max_attempts == 0 {
            return Err(RelayError::BadConfig(
                "max_attempts must be at least 1".into(),
            ));
        }
        if self.batch_size == 0 || self.max_parallel_jobs == 0 {
            return Err(RelayError::BadConfig(
                "batch_size and max_parallel_jobs must be at least 1".into(),
            ));
        }
        if self.backoff_base_ms > self.backoff_max_ms {
            return Err(RelayError::BadConfig(format!(
                "backoff_base_ms ({}) must not exceed backoff_max_ms ({})",
                self.backoff_base_ms, self.backoff_max_ms
            )));
        }
        Ok(())
    }
}

/// Errors that stop the relay at start-up (bad configuration). Outages of Kafka or the
/// store do not: the relay waits them out and reports them in [`RelayStatus`](super::RelayStatus).
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("Kafka producer error: {0}")]
    Kafka(String),
    #[error("bad relay configuration: {0}")]
    BadConfig(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttled_claims_fit_the_lease() {
        let c = RelayConfig::default();
        assert_eq!(c.claim_size(None), 1000);
        assert_eq!(c.claim_size(Some(10)), 10); // one second's worth
        assert_eq!(c.claim_size(Some(500)), 500);
        assert_eq!(c.claim_size(Some(1_000_000)), 1000);
        let tiny = RelayConfig {
            lease_ms: 2_000,
            ..RelayConfig::default()
        };
        assert_eq!(tiny.claim_size(Some(1)), 1);
    }

    #[test]
    fn delivery_timeout_stays_under_half_the_lease() {
        let c = RelayConfig {
            lease_ms: 4_000,
            delivery_timeout_ms: 10_000,
            ..RelayConfig::default()
        };
        assert_eq!(c.effective_delivery_timeout_ms(), 2_000);
        assert!(RelayConfig {
            lease_ms: 100,
            ..RelayConfig::default()
        }
        .check()
        .is_err());
        assert!(RelayConfig::default().check().is_ok());
    }
}
