//! High watermarks of the DLQ partitions ingest has paused, for the lag figures.
//!
//! The lag ingest reports (`/readyz`, `redrive_ingest_lag_records`, the `ingest_lag` alert) is
//! librdkafka's statistics: high watermark − committed offset. librdkafka learns a partition's
//! high watermark only from Fetch responses ("The newest offset is automatically propagated in
//! FetchResponse.HighwaterMark", `rd_kafka_toppar_consumer_lag_req` in librdkafka 2.12's
//! `rdkafka_partition.c`), and a paused partition is not fetched: its high watermark freezes at
//! the last fetch, or stays unknown (−1) for a partition paused as it was assigned. That is
//! exactly when records wait in Kafka — retention backpressure holds a DLQ topic at its
//! limit, or a failing store paused everything — so the figure would say 0 while they pile up.
//!
//! So on each idle tick (`TICK_MS`, 5 s) ingest asks the partition leaders for the watermarks
//! of the partitions it has paused (`fetch_watermarks`, one ListOffsets round trip each, at
//! most [`PROBE_TIMEOUT`] each, off the async workers and off the consumer loop), and the
//! statistics callback uses the higher of the two high watermarks
//! (`IngestStatus::set_lag_from_stats`). Partitions that are fetched again drop out of the
//! probe: their Fetch responses are fresh.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::Consumer;

use super::{IngestConsumer, IngestStatus};

/// Longest wait for one partition's watermarks.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// At most this many paused partitions are probed per tick (the rest keep their last
/// reading), so a tick's probe stays a few seconds even with hundreds of paused partitions.
const MAX_PROBED: usize = 64;

/// Probes the paused partitions' watermarks in the background, one probe at a time.
#[derive(Debug, Default)]
pub(super) struct PausedLagProbe {
    in_flight: Arc<AtomicBool>,
    /// Where the next tick starts in the list of paused partitions (a rotating window when
    /// there are more than [`MAX_PROBED`]).
    next: usize,
}

impl PausedLagProbe {
    /// Starts a probe of `paused` (the partitions ingest has paused now) unless one is still
    /// running; forgets the watermarks of partitions no longer paused at once.
    pub(super) fn tick(
        &mut self,
        consumer: &Arc<IngestConsumer>,
        status: &Arc<IngestStatus>,
        paused: Vec<(String, i32)>,
    ) {
        status.retain_paused_watermarks(&paused);
        if paused.is_empty() || self.in_flight.swap(true, Ordering::SeqCst) {
            return;
        }
        let start = self.next % paused.len();
        let window: Vec<(String, i32)> = paused
            .iter()
            .cycle()
            .skip(start)
            .take(paused.len().min(MAX_PROBED))
            .cloned()
            .collect();
        self.next = start + window.len();
        let consumer = consumer.clone();
        let status = status.clone();
        let in_flight = self.in_flight.clone();
        tokio::task::spawn_blocking(move || {
            let mut read = BTreeMap::new();
            for (topic, partition) in window {
                match consumer.fetch_watermarks(&topic, partition, PROBE_TIMEOUT) {
                    Ok(marks) => {
                        read.insert((topic, partition), marks);
                    }
                    Err(e) => tracing::debug!(
                        target: "redrive::ingest",
                        topic, partition, error = %e,
                        "cannot read the watermarks of a paused partition"
                    ),
                }
            }
            status.add_paused_watermarks(read);
            in_flight.store(false, Ordering::SeqCst);
        });
    }
}
