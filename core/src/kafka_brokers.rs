//! What redrive's Kafka clients share: a client left with no broker at all and how it gets its
//! bootstrap servers back, and librdkafka's log forwarded to `tracing` (`forward_log`).
//!
//! Since librdkafka 2.10 a client removes every broker a Metadata response does not list
//! ("Remove unavailable brokers and their thread", with KIP-899). A KRaft broker in
//! controlled shutdown answers Metadata for a while with no broker at all and its partitions
//! leaderless; a client that asks in that window (a consumer looking for the lost leader does,
//! within milliseconds) forgets the one broker it knew. Its bootstrap entry was already
//! dropped at its first Metadata response, so nothing is left to connect to: re-bootstrap
//! only starts on a broker's state change or a metadata request, and neither happens without
//! a broker. The client stays disconnected for good, after the broker is back
//! (librdkafka issue #5301, open; reproduced here with librdkafka 2.12.1, the version
//! rdkafka-sys 4.10 builds: `docs/deployment.md`, "A Kafka client left with no broker").
//!
//! [`BrokerWatch`] sees that state in the client's statistics report (no broker whose
//! `source` is `configured` or `learned`; what is left is `logical`, the group coordinator's
//! handle, and `internal`) and [`BrokerWatch::rejoin`] adds the bootstrap servers again
//! (`rd_kafka_brokers_add`), which starts the connection. Ingest's consumer and the relay's
//! producer both carry one. It needs statistics (`statistics.interval.ms` > 0, which both set
//! to 5 s unless `[kafka]` turns them off).

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, Ordering};

use rdkafka::client::{Client, ClientContext};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::statistics::Statistics;

/// Forwards one line of librdkafka's log to `tracing` (target `librdkafka`) at the matching
/// level: what every redrive client context's `log` does.
pub(crate) fn forward_log(level: RDKafkaLogLevel, fac: &str, log_message: &str) {
    match level {
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => {
            tracing::error!(target: "librdkafka", "{fac} {log_message}")
        }
        RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", "{fac} {log_message}"),
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
            tracing::info!(target: "librdkafka", "{fac} {log_message}")
        }
        RDKafkaLogLevel::Debug => tracing::debug!(target: "librdkafka", "{fac} {log_message}"),
    }
}

/// Whether the client of `stats` still has a broker to connect to: one whose `source` is
/// `configured` (from `bootstrap.servers`) or `learned` (from a Metadata response), whatever
/// its state. `logical` (the group coordinator's handle) and `internal` ones do not count.
pub fn knows_a_broker(stats: &Statistics) -> bool {
    stats
        .brokers
        .values()
        .any(|b| b.source == "configured" || b.source == "learned")
}

/// Follows a client's statistics and puts its bootstrap servers back when it has no broker
/// left (see the module's documentation).
#[derive(Debug, Default)]
pub struct BrokerWatch {
    orphaned: AtomicBool,
}

impl BrokerWatch {
    /// Records what the client's latest statistics report says: called from the context's
    /// `stats` callback.
    pub fn observe(&self, stats: &Statistics) {
        self.orphaned
            .store(!knows_a_broker(stats), Ordering::SeqCst);
    }

    /// When the latest report showed no broker, adds `bootstrap` (a `bootstrap.servers` list)
    /// to `client` again and returns true; else does nothing and returns false. The flag is
    /// cleared, so the servers are added once per report that shows no broker (librdkafka
    /// keeps each list added for its later re-bootstraps: at most one a statistics interval
    /// while the client has no broker, none otherwise).
    pub fn rejoin<C: ClientContext>(&self, client: &Client<C>, bootstrap: &str) -> bool {
        if !self.orphaned.swap(false, Ordering::SeqCst) {
            return false;
        }
        let Ok(list) = CString::new(bootstrap) else {
            return false;
        };
        // SAFETY: `client` owns a live `rd_kafka_t` for as long as the borrow lasts, and
        // `rd_kafka_brokers_add` copies the list before it returns (librdkafka's rdkafka.h:
        // "may be called at any time"; brokers already known are left as they are).
        let added =
            unsafe { rdkafka::bindings::rd_kafka_brokers_add(client.native_ptr(), list.as_ptr()) };
        tracing::warn!(
            target: "redrive::kafka",
            bootstrap,
            added,
            "the Kafka client had no broker left (a Metadata response listed none: \
             librdkafka issue #5301); its bootstrap servers are added again"
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::consumer::Consumer;

    fn stats(json: &str) -> Statistics {
        serde_json::from_str(json).expect("a statistics report")
    }

    /// Reports of librdkafka 2.12.1, captured from a real broker by
    /// `core/testdata/librdkafka-stats/capture.py`.
    #[test]
    fn a_client_left_with_only_its_logical_broker_knows_none() {
        let connected = stats(include_str!("../testdata/librdkafka-stats/connected.json"));
        let orphaned = stats(include_str!("../testdata/librdkafka-stats/orphaned.json"));
        assert!(knows_a_broker(&connected));
        assert!(!knows_a_broker(&orphaned));
        // What is left is the group coordinator's logical handle.
        assert!(orphaned
            .brokers
            .values()
            .all(|b| b.source == "logical" || b.source == "internal"));
    }

    #[test]
    fn the_watch_rejoins_once_per_report_without_a_broker() {
        let connected = stats(include_str!("../testdata/librdkafka-stats/connected.json"));
        let orphaned = stats(include_str!("../testdata/librdkafka-stats/orphaned.json"));
        let client: rdkafka::consumer::BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .create()
            .expect("a client");
        let watch = BrokerWatch::default();
        watch.observe(&connected);
        assert!(!watch.rejoin(client.client(), "127.0.0.1:1"));
        watch.observe(&orphaned);
        assert!(watch.rejoin(client.client(), "127.0.0.1:1"));
        assert!(
            !watch.rejoin(client.client(), "127.0.0.1:1"),
            "once per report"
        );
    }
}
