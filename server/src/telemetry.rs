//! Observability of the server: typed events that log and count in one place, and the
//! Prometheus exposition served at `/metrics`.
//!
//! Ingest and the replay relay keep their own counters ([`IngestStatus`], [`RelayStatus`]);
//! they are read on each scrape rather than mirrored, so there is one source of truth. The
//! store-derived series (sizes, ages, ingested totals, jobs, error groups) come from the
//! maintained aggregates (`Store::stats`, `docs/stats.md`; never a scan of `dead_letters`),
//! cached for [`SIZE_REFRESH`] so that frequent scrapes cannot load the database. Every
//! metric is listed in `docs/metrics.md`.

mod aggregates;

use self::aggregates::StoreFigures;
use self::aggregates::PAIR_CAP;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use redrive_core::alerts::status::AlertStatus;
use redrive_core::ingest::IngestStatus;
use redrive_core::leader::Leadership;
use redrive_core::replay::RelayStatus;
use redrive_core::store::{Store, StoreError};
use redrive_core::Status;

/// Content type of the Prometheus text exposition format 0.0.4.
pub const METRICS_CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// How long a DLQ size count stays fresh (the `redrive_dead_letters` gauge).
pub const SIZE_REFRESH: Duration = Duration::from_secs(10);

/// Longest the size count may take during a scrape; past it the previous values are served.
const SIZE_QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// The server's metrics and events. Cheap to share (`Arc<Telemetry>`).
#[derive(Debug)]
pub struct Telemetry {
    registry: Registry,
    shared: Arc<Shared>,
    /// Serialises size refreshes: concurrent scrapes wait for one count instead of each
    /// running their own.
    refreshing: tokio::sync::Mutex<()>,
}

/// What the last refresh read from the store, and when.
type Sizes = (Instant, StoreFigures);

#[derive(Debug)]
struct Shared {
    ingest: Option<Arc<IngestStatus>>,
    /// The replay relay's counters, once [`Telemetry::with_relay`] named them.
    relay: std::sync::OnceLock<Arc<RelayStatus>>,
    /// Whether this instance leads the leader-only work, once [`Telemetry::with_leader`] named it.
    leader: std::sync::OnceLock<Leadership>,
    /// Store operations that failed outside ingest, by operation name (`list`, `get`, ...).
    store_errors: Mutex<BTreeMap<&'static str, u64>>,
    /// Latest store figures (aggregates) and when they were read.
    sizes: Mutex<Option<Sizes>>,
    /// Records in the quarantine table, counted with the sizes.
    quarantined: Mutex<Option<i64>>,
    /// The alert evaluator's and dispatcher's counters (`crate::alerts_metrics`).
    alerts: std::sync::OnceLock<Arc<AlertStatus>>,
    /// Retention's counters and backpressure, once [`Telemetry::with_retention`] named them.
    retention: std::sync::OnceLock<crate::telemetry_retention::RetentionMetrics>,
    /// The leader's sorter's counters, once [`Telemetry::set_sorter`] named them.
    sorter: std::sync::OnceLock<Arc<redrive_core::automation::sort_loop::SorterStatus>>,
    /// The SQLite write gate's figures, read from the store at each scrape (`None` on
    /// PostgreSQL).
    write_gate: Mutex<Option<redrive_core::store::WriteGateStats>>,
    /// The scheduler of automatic replays, once [`Telemetry::with_rounds`] named it.
    rounds: std::sync::OnceLock<Arc<redrive_core::automation::rounds::RoundsStatus>>,
    /// The search indexer's counters, once [`Telemetry::with_search_indexer`] named them.
    search_indexer: std::sync::OnceLock<Arc<redrive_core::search_indexer::IndexerStatus>>,
    /// `ingested_at_ms` of the oldest dead letter not yet in the search index, read with the
    /// sizes (`Some(None)`: none; `None`: not read yet).
    search_backlog_oldest: Mutex<Option<Option<i64>>>,
}

impl Telemetry {
    /// `ingest` is `None` when ingest is disabled; its metrics then read zero.
    pub fn new(ingest: Option<Arc<IngestStatus>>) -> Telemetry {
        let shared = Arc::new(Shared {
            ingest,
            relay: std::sync::OnceLock::new(),
            leader: std::sync::OnceLock::new(),
            store_errors: Mutex::new(BTreeMap::new()),
            sizes: Mutex::new(None),
            quarantined: Mutex::new(None),
            alerts: std::sync::OnceLock::new(),
            retention: std::sync::OnceLock::new(),
            sorter: std::sync::OnceLock::new(),
            write_gate: Mutex::new(None),
            rounds: std::sync::OnceLock::new(),
            search_indexer: std::sync::OnceLock::new(),
            search_backlog_oldest: Mutex::new(None),
        });
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Exposition(shared.clone())));
        Telemetry {
            registry,
            shared,
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// Reads the replay relay's counters at each scrape (`redrive_relay_*`); without it they
    /// read zero.
    pub fn with_relay(self, relay: Arc<RelayStatus>) -> Telemetry {
        let _ = self.shared.relay.set(relay);
        self
    }

    /// Reports this instance's leadership at each scrape (`redrive_leader`); without it the
    /// gauge is not exported.
    pub fn with_leader(self, leader: Leadership) -> Telemetry {
        let _ = self.shared.leader.set(leader);
        self
    }

    /// Reads the alert counters at each scrape (`redrive_alert*`, see `crate::alerts_metrics`).
    pub fn with_alerts(self, alerts: Arc<AlertStatus>) -> Telemetry {
        let _ = self.shared.alerts.set(alerts);
        self
    }

    /// Reads retention's counters and backpressure at each scrape (`redrive_retention_*`).
    pub fn with_retention(
        self,
        metrics: crate::telemetry_retention::RetentionMetrics,
    ) -> Telemetry {
        let _ = self.shared.retention.set(metrics);
        self
    }

    /// Reads the sorter's counters at each scrape (`redrive_tier_*`, `crate::telemetry_tiers`).
    pub fn set_sorter(&self, sorter: Arc<redrive_core::automation::sort_loop::SorterStatus>) {
        let _ = self.shared.sorter.set(sorter);
    }

    /// Reads the scheduler's per-rule figures at each scrape (`redrive_automation_*`).
    pub fn with_rounds(
        self,
        rounds: Arc<redrive_core::automation::rounds::RoundsStatus>,
    ) -> Telemetry {
        let _ = self.shared.rounds.set(rounds);
        self
    }

    /// Reads the search indexer's counters at each scrape (`redrive_search_*`,
    /// `crate::telemetry_search`).
    pub fn with_search_indexer(
        self,
        indexer: Arc<redrive_core::search_indexer::IndexerStatus>,
    ) -> Telemetry {
        let _ = self.shared.search_indexer.set(indexer);
        self
    }

    /// Event: a store operation failed while serving a request, a probe or a scrape. Logs
    /// the detail (which users are not shown) and counts it in `redrive_store_errors_total`.
    pub fn store_error(&self, operation: &'static str, error: &StoreError) {
        tracing::warn!(operation, error = %error, "store operation failed");
        let mut m = lock(&self.shared.store_errors);
        *m.entry(operation).or_insert(0) += 1;
    }

    /// The Prometheus text exposition, refreshing the DLQ size counts first if stale.
    pub async fn render(&self, store: &Store) -> String {
        self.refresh_sizes(store).await;
        // Shared by every handle on the file, so the web's store tells the whole process.
        *lock(&self.shared.write_gate) = store.write_gate_stats();
        let mut out = String::new();
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        {
            // Only a `fmt::Write` into a String can fail here, which it does not; still, a
            // scrape must not panic.
            tracing::error!(error = %e, "encoding metrics failed");
            let _ = writeln!(out, "# encoding failed: {e}");
        }
        out
    }

    async fn refresh_sizes(&self, store: &Store) {
        if self.sizes_fresh() {
            return;
        }
        let _guard = self.refreshing.lock().await;
        if self.sizes_fresh() {
            return; // another scrape refreshed while we waited
        }
        let count_all = async {
            let stats = store.stats(now_ms()).await?;
            let (arrivals, arrivals_rest) = store.arrival_totals(PAIR_CAP).await?;
            let quarantined = store.quarantine_count().await?;
            let backlog_oldest = store.search_backlog_oldest_ms().await?;
            let figures = StoreFigures {
                stats,
                arrivals,
                arrivals_rest,
            };
            Ok::<_, StoreError>((figures, quarantined, backlog_oldest))
        };
        match tokio::time::timeout(SIZE_QUERY_TIMEOUT, count_all).await {
            Ok(Ok((sizes, quarantined, backlog_oldest))) => {
                *lock(&self.shared.sizes) = Some((Instant::now(), sizes));
                *lock(&self.shared.quarantined) = Some(quarantined);
                *lock(&self.shared.search_backlog_oldest) = Some(backlog_oldest);
            }
            Ok(Err(e)) => self.store_error("count", &e),
            Err(_) => self.store_error(
                "count",
                &StoreError::Unavailable(format!(
                    "counting dead letters took longer than {SIZE_QUERY_TIMEOUT:?}"
                )),
            ),
        }
    }

    fn sizes_fresh(&self) -> bool {
        matches!(&*lock(&self.shared.sizes), Some((at, _)) if at.elapsed() < SIZE_REFRESH)
    }
}

use redrive_core::clock::now_ms;

/// A poisoned lock only means another thread panicked mid-update of a counter; the value is
/// still usable for metrics.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads everything at scrape time: one place that names every metric redrive exports.
#[derive(Debug)]
struct Exposition(Arc<Shared>);

impl Exposition {
    fn counter(
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        value: u64,
    ) -> Result<(), std::fmt::Error> {
        let c = ConstCounter::new(value);
        let m = enc.encode_descriptor(name, help, None, c.metric_type())?;
        c.encode(m)
    }

    fn gauge(
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        value: i64,
    ) -> Result<(), std::fmt::Error> {
        let g = ConstGauge::new(value);
        let m = enc.encode_descriptor(name, help, None, g.metric_type())?;
        g.encode(m)
    }
}

impl Exposition {
    /// The `redrive_relay_*` series.
    fn encode_relay(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snap = self.0.relay.get().map(|r| r.snapshot()).unwrap_or_default();
        Self::counter(
            enc,
            "redrive_relay_published",
            "Outbox rows the replay relay published and recorded (each row once).",
            snap.published_total,
        )?;
        Self::counter(
            enc,
            "redrive_relay_failed",
            "Outbox rows given up (dead letter replay_failed): refused for good, or out of attempts.",
            snap.failed_total,
        )?;
        Self::counter(
            enc,
            "redrive_relay_rejected",
            "Records Kafka refused for good (too large, not authorised, no such topic), failed without a retry.",
            snap.rejected_total,
        )?;
        Self::counter(
            enc,
            "redrive_relay_retried",
            "Failed publish attempts that will be retried after a backoff.",
            snap.retried_total,
        )?;
        Self::counter(
            enc,
            "redrive_relay_released",
            "Outbox rows handed back without an attempt counted (Kafka unreachable, shutdown).",
            snap.released_total,
        )?;
        Self::gauge(
            enc,
            "redrive_relay_running",
            "1 while the replay relay runs, else 0.",
            i64::from(snap.running),
        )?;
        Self::gauge(
            enc,
            "redrive_relay_active_jobs",
            "Replay jobs the relay is working on now.",
            i64::try_from(snap.active_jobs).unwrap_or(i64::MAX),
        )?;
        {
            // Absent until the relay's first publish says either way.
            let g = ConstGauge::new(0i64);
            let m = enc.encode_descriptor(
                "redrive_relay_kafka_reachable",
                "1 when the relay's last publish reached Kafka, 0 when Kafka was unreachable.",
                None,
                g.metric_type(),
            )?;
            if let Some(up) = snap.kafka_reachable {
                ConstGauge::new(i64::from(up)).encode(m)?;
            }
        }
        Self::gauge(
            enc,
            "redrive_relay_last_error_timestamp_seconds",
            "Unix time of the relay's last error (Kafka or store; 0 = none yet).",
            snap.last_error_at_ms.map_or(0, |ms| ms / 1000),
        )
    }
}

impl Collector for Exposition {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snap = self.0.ingest.as_ref().map(|s| s.snapshot());
        let ingest =
            |f: fn(&redrive_core::ingest::IngestSnapshot) -> u64| snap.as_ref().map(f).unwrap_or(0);

        Self::counter(
            &mut enc,
            "redrive_dead_letters_ingested",
            "Dead letters stored by ingest that were new (redeliveries excluded).",
            ingest(|s| s.records_new),
        )?;
        Self::counter(
            &mut enc,
            "redrive_ingest_records",
            "Records written by ingest, including redeliveries the store already had.",
            ingest(|s| s.records_ingested),
        )?;
        Self::counter(
            &mut enc,
            "redrive_ingest_batches",
            "Store transactions committed by ingest.",
            ingest(|s| s.batches),
        )?;
        Self::counter(
            &mut enc,
            "redrive_ingest_commit_failures",
            "Kafka offset commits that failed (the records were stored; at worst re-read).",
            ingest(|s| s.commit_failures),
        )?;
        Self::counter(
            &mut enc,
            "redrive_ingest_batches_split",
            "Batches the store refused for a reason about the data, split by ingest to store \
             record by record.",
            ingest(|s| s.batches_split),
        )?;
        Self::counter(
            &mut enc,
            "redrive_ingest_records_reduced",
            "Records the store refused as decoded and ingest stored in reduced form (raw \
             bytes whole, decoded text cut; flagged malformed).",
            ingest(|s| s.records_reduced),
        )?;
        Self::counter(
            &mut enc,
            "redrive_ingest_records_quarantined",
            "Records the store refused even in reduced form, put in quarantine by ingest.",
            ingest(|s| s.records_quarantined),
        )?;
        if let Some(n) = *lock(&self.0.quarantined) {
            Self::gauge(
                &mut enc,
                "redrive_quarantined_records",
                "Records in quarantine now (see /quarantine; `redrive quarantine retry`).",
                n,
            )?;
        }
        Self::gauge(
            &mut enc,
            "redrive_ingest_ready",
            "1 when ingest runs with Kafka reachable and the store writable, else 0.",
            i64::from(snap.as_ref().is_some_and(|s| s.ready)),
        )?;
        Self::gauge(
            &mut enc,
            "redrive_ingest_assigned_partitions",
            "DLQ partitions currently assigned to this instance.",
            snap.as_ref()
                .map_or(0, |s| s.assigned_partitions.len() as i64),
        )?;
        Self::gauge(
            &mut enc,
            "redrive_ingest_last_store_write_timestamp_seconds",
            "Unix time of ingest's last successful store write (0 = none yet).",
            snap.as_ref()
                .and_then(|s| s.last_store_write_ms)
                .map_or(0, |ms| ms / 1000),
        )?;

        self.encode_relay(&mut enc)?;
        if let Some(leader) = self.0.leader.get() {
            Self::gauge(
                &mut enc,
                "redrive_leader",
                "1 when this instance runs the leader-only work (alerts, retention), else 0. \
                 Always 1 on SQLite; on PostgreSQL exactly one instance should read 1.",
                i64::from(leader.is_leader()),
            )?;
        }
        crate::alerts_metrics::encode(&mut enc, self.0.alerts.get().map(|a| a.snapshot()))?;
        crate::telemetry_retention::encode(&mut enc, self.0.retention.get())?;
        crate::telemetry_tiers::encode(&mut enc, self.0.sorter.get().map(|s| s.as_ref()))?;
        crate::telemetry_write_gate::encode(&mut enc, *lock(&self.0.write_gate))?;
        crate::automation_rounds::encode(&mut enc, self.0.rounds.get())?;
        crate::telemetry_search::encode(
            &mut enc,
            self.0.search_indexer.get().map(|s| s.as_ref()),
            *lock(&self.0.search_backlog_oldest),
            now_ms(),
        )?;

        {
            let c = ConstCounter::new(0u64);
            let mut m = enc.encode_descriptor(
                "redrive_store_errors",
                "Failed store operations, by component and operation.",
                None,
                c.metric_type(),
            )?;
            ConstCounter::new(ingest(|s| s.store_failures))
                .encode(m.encode_family(&[("component", "ingest"), ("operation", "write")])?)?;
            for (op, n) in lock(&self.0.store_errors).iter() {
                ConstCounter::new(*n)
                    .encode(m.encode_family(&[("component", "server"), ("operation", *op)])?)?;
            }
        }

        {
            // The descriptor is written even before the first successful count, so that the
            // series is discoverable; samples appear once the store has answered.
            let g = ConstGauge::new(0i64);
            let mut m = enc.encode_descriptor(
                "redrive_dead_letters",
                "Dead letters in the store by status (from the aggregates, read at most every 10 s).",
                None,
                g.metric_type(),
            )?;
            if let Some((_, figures)) = &*lock(&self.0.sizes) {
                let totals = figures.stats.totals();
                for status in Status::ALL {
                    ConstGauge::new(totals.counts.get(status))
                        .encode(m.encode_family(&[("status", status.as_str())])?)?;
                }
            }
        }
        {
            let figures = lock(&self.0.sizes).as_ref().map(|(_, f)| f.clone());
            aggregates::encode(&mut enc, figures.as_ref(), now_ms())?;
        }
        aggregates::encode_lag(
            &mut enc,
            snap.as_ref()
                .map_or(&[][..], |s| s.partition_lag.as_slice()),
        )?;

        Ok(())
    }
}
