//! `redrive serve` and `redrive migrate`: start-up, the background tasks, graceful shutdown.
//!
//! Start-up order: database (retried while unreachable, for `database_wait_ms`), migrations,
//! the listener, ingest, then HTTP. Shutdown (SIGINT or SIGTERM): stop accepting connections
//! and cancel ingest together; ingest stores the batch in hand and commits its offsets, the
//! relay marks the batch it published, the alert dispatcher records the notifications in
//! flight; wait for all, at most `shutdown_timeout_ms`; close the store; exit 0. A second signal exits at
//! once (nothing is lost: uncommitted records are re-read at the next start).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use redrive_core::alerts::evaluate::{self, EvaluatorInputs, IsLeader};
use redrive_core::alerts::status::AlertStatus;
use redrive_core::alerts::AlertsConfig;
use redrive_core::ingest::{self, IngestConfig, IngestError, IngestStatus};
use redrive_core::leader::{LeaderConfig, Leadership};
use redrive_core::replay;
use redrive_core::store::{Store, StoreError};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::{AppState, IngestHealth, RelayHealth};
use crate::config::{redact_url, Config};
use crate::router;
use crate::site;
use crate::telemetry::Telemetry;

mod shutdown;

/// First wait between two attempts to reach the database at start-up.
const FIRST_RETRY: Duration = Duration::from_millis(500);
/// Longest wait between two attempts.
const MAX_RETRY: Duration = Duration::from_secs(5);
/// Connections of ingest's own pool (one writer, and the occasional lookup).
const INGEST_POOL: u32 = 2;
/// Connections of the relay's own pool (its claims and marks, and the rows it loads).
const RELAY_POOL: u32 = 3;
/// Connections of the alert evaluator's and dispatcher's own pool.
const ALERTS_POOL: u32 = 2;
/// Connections of retention's own pool (its counts, candidate reads and purge chunks).
const RETENTION_POOL: u32 = 2;
/// Connections of the search indexer's pool (one round at a time).
const INDEXER_POOL: u32 = 1;
/// Connections of the SQLite WAL checkpointer's pool.
const CHECKPOINT_POOL: u32 = 1;
/// How often `serve` looks for bulk actions whose process died mid-way, to finish them.
const BULK_RESUME_EVERY: Duration = Duration::from_secs(60);

/// Why `serve` or `migrate` stopped with a failure. Each message says what to check.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "cannot use the database at {url}: {cause} (check database_url / REDRIVE_DATABASE_URL)"
    )]
    Database { url: String, cause: StoreError },
    #[error(
        "the database at {url} was still unreachable after {waited_s} s: {cause} \
         (is it running? raise database_wait_ms to wait longer)"
    )]
    DatabaseTimeout {
        url: String,
        waited_s: u64,
        cause: StoreError,
    },
    #[error("{0}")]
    AlreadyServing(StoreError),
    #[error("cannot listen on {addr}: {cause} (is the port in use? set listen / REDRIVE_LISTEN)")]
    Bind { addr: String, cause: std::io::Error },
    #[error("ingest stopped: {0} (check kafka_brokers, dlq_topics and the [kafka] properties)")]
    Ingest(IngestError),
    #[error("ingest stopped unexpectedly: {0}")]
    IngestCrashed(String),
    #[error("{0} (fix admin_user / admin_password, or unset them once users exist)")]
    Bootstrap(crate::auth::cli::BootstrapError),
    #[error("the HTTP server failed: {0}")]
    Http(std::io::Error),
    #[error("cannot install the [automation] rules of redrive.toml: {0}")]
    Automation(StoreError),
    #[error(
        "shutdown took longer than {0} ms; records not yet committed will be re-read at the \
         next start (raise shutdown_timeout_ms to wait longer)"
    )]
    ShutdownTimeout(u64),
}

/// `redrive migrate`: applies the migrations and returns.
pub async fn migrate(config: &Config) -> Result<(), ServeError> {
    let shutdown = CancellationToken::new();
    tokio::spawn(shutdown::watch_signals(shutdown.clone()));
    let Some(store) = open_store(config, &shutdown).await? else {
        return Ok(());
    };
    tracing::info!(
        backend = store.backend(),
        "migrations applied; the database is up to date"
    );
    store.close().await;
    Ok(())
}

/// Connects and migrates, retrying while the database is unreachable (for `database_wait_ms`).
/// `Ok(None)` when a signal arrived meanwhile.
async fn open_store(
    config: &Config,
    shutdown: &CancellationToken,
) -> Result<Option<Store>, ServeError> {
    let url = redact_url(&config.database_url);
    let started = Instant::now();
    let wait = Duration::from_millis(config.database_wait_ms);
    let mut delay = FIRST_RETRY;
    loop {
        let attempt = async {
            let store = Store::connect(&config.database_url).await?;
            store.migrate().await?;
            Ok::<_, StoreError>(store)
        };
        let result = tokio::select! {
            r = attempt => r,
            _ = shutdown.cancelled() => return Ok(None),
        };
        match result {
            Ok(store) => return Ok(Some(store)),
            Err(cause @ StoreError::Unavailable(_)) => {
                if started.elapsed() + delay > wait {
                    return Err(ServeError::DatabaseTimeout {
                        url,
                        waited_s: started.elapsed().as_secs(),
                        cause,
                    });
                }
                tracing::warn!(
                    database = %url,
                    error = %cause,
                    retry_in_ms = delay.as_millis() as u64,
                    "the database is not reachable yet; retrying"
                );
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.cancelled() => return Ok(None),
                }
                delay = (delay * 2).min(MAX_RETRY);
            }
            Err(cause) => return Err(ServeError::Database { url, cause }),
        }
    }
}

/// Schema-aware payloads (`docs/payloads.md`): the `[schema_registry]` resolver the detail
/// page and the JSON API decode wire-format values with. A resolver that cannot be built (TLS
/// setup) is logged and values show as before: a registry is never needed to serve.
fn install_schema_resolver(config: &Config) {
    let c = &config.schema_registry;
    if !c.is_enabled() {
        return;
    }
    match redrive_core::schema::SchemaResolver::new(c.clone()) {
        Ok(r) => {
            redrive_core::schema::resolver::install(r);
            tracing::info!(
                url = c.url.as_deref().map(redact_url).unwrap_or_default(),
                schema_dirs = c.schema_dirs.len(),
                "schema-aware payloads on"
            );
        }
        Err(e) => tracing::error!(error = %e, "schema-aware payloads off"),
    }
}

/// `redrive serve`: UI, JSON API, health, metrics and ingest until SIGINT/SIGTERM.
pub async fn serve(config: Config) -> Result<(), ServeError> {
    let shutdown = CancellationToken::new();
    tokio::spawn(shutdown::watch_signals(shutdown.clone()));

    let Some(store) = open_store(&config, &shutdown).await? else {
        return Ok(());
    };
    // Held until `serve` returns; the OS releases it however the process ends.
    let _claim = store
        .claim_single_server()
        .map_err(ServeError::AlreadyServing)?;
    tracing::info!(
        backend = store.backend(),
        database = %redact_url(&config.database_url),
        "store ready"
    );

    let listener = TcpListener::bind(&config.listen)
        .await
        .map_err(|cause| ServeError::Bind {
            addr: config.listen.clone(),
            cause,
        })?;
    let addr = listener.local_addr().map_err(|cause| ServeError::Bind {
        addr: config.listen.clone(),
        cause,
    })?;

    // Ingest, the relay and the web each have a pool of their own: none can starve the
    // others of connections (docs/replay.md, "Concurrency on SQLite").
    // Ingest's pool buffers more returned rows: its statements return only ids.
    let own_pool = |n: u32, ingest: bool| {
        let store = store.clone();
        let url = redact_url(&config.database_url);
        async move {
            let pool = if ingest {
                store.with_ingest_pool(n).await
            } else {
                store.with_own_pool(n).await
            };
            pool.map_err(|cause| ServeError::Database { url, cause })
        }
    };
    let ingest_store = own_pool(INGEST_POOL, true).await?;
    let relay_store = own_pool(RELAY_POOL, false).await?;
    let alerts_store = own_pool(ALERTS_POOL, false).await?;
    tokio::spawn(resume_bulk_actions(store.clone(), shutdown.child_token()));
    // The work that runs once per store, not per instance (alerts, retention) waits for this.
    let leader = Leadership::start(&store, LeaderConfig::default(), shutdown.child_token());
    tokio::spawn(compact_stats(store.clone(), shutdown.child_token()));

    let status = Arc::new(IngestStatus::default());
    let health = IngestHealth {
        enabled: config.ingest_enabled,
        brokers: config.kafka_brokers.clone(),
        status: status.clone(),
        failure: Arc::new(Mutex::new(None)),
    };
    let relay_health = RelayHealth::default();
    let alerts_config = Arc::new(config.alerts.clone());
    redrive_core::outcome::set_window_ms(config.replay_outcome_window_ms);
    install_schema_resolver(&config);
    let alert_status = Arc::new(
        AlertStatus::default()
            .with_rules(config.alerts.rules.iter().map(|r| r.name.as_str()))
            .with_notifiers(config.alerts.notifiers.keys().map(String::as_str)),
    );
    // Retention (docs/retention.md): usage checks and backpressure on every instance, purges
    // on the leader only.
    let retention = crate::api_archive::RetentionHealth {
        config: config.retention.clone(),
        backpressure: Arc::new(redrive_core::retention::Backpressure::new(
            &config.retention,
        )),
        status: Arc::default(),
    };
    let rounds_status = Arc::new(redrive_core::automation::rounds::RoundsStatus::default());
    // SQLite: the WAL is copied into the database file beside the writers, not by the commit
    // that takes it past the threshold (`store/checkpoint.rs`). Nothing on PostgreSQL.
    if store.backend() == "sqlite" {
        tokio::spawn(
            own_pool(CHECKPOINT_POOL, false)
                .await?
                .run_checkpointer(shutdown.child_token()),
        );
    }
    // The search index is written behind ingest, on every instance (docs/triage.md, "Not yet
    // indexed"); ingest has the first claim on the store.
    let indexer_status = Arc::new(redrive_core::search_indexer::IndexerStatus::default());
    tokio::spawn(redrive_core::search_indexer::run(
        own_pool(INDEXER_POOL, false).await?,
        config.ingest_enabled.then(|| status.clone()),
        indexer_status.clone(),
        redrive_core::search_indexer::IndexerConfig::default(),
        shutdown.child_token(),
    ));
    let telemetry = Arc::new(
        Telemetry::new(config.ingest_enabled.then(|| status.clone()))
            .with_rounds(rounds_status.clone())
            .with_relay(relay_health.status.clone())
            .with_leader(leader.clone())
            .with_alerts(alert_status.clone())
            .with_retention(crate::telemetry_retention::RetentionMetrics {
                status: retention.status.clone(),
                backpressure: retention.backpressure.clone(),
            })
            .with_search_indexer(indexer_status.clone()),
    );
    let notify_task = start_alerts(
        &config,
        alerts_config,
        alerts_store.clone(),
        config.ingest_enabled.then(|| status.clone()),
        alert_status,
        leader.clone(),
        &shutdown,
    );
    let retention_store = own_pool(RETENTION_POOL, false).await?;
    tokio::spawn(redrive_core::retention::run(
        config.retention.clone(),
        retention_store.clone(),
        retention.backpressure.clone(),
        retention.status.clone(),
        {
            let leader = leader.clone();
            move || leader.is_leader()
        },
        shutdown.child_token(),
    ));
    // Automatic reprocessing (docs/automation.md): ingest sorts new dead letters into tiers
    // with the active rule set version as it stores them, the leader's sorter the rest. Both
    // count into the store's one status.
    let sorter_status = store.sorter_status();
    telemetry.set_sorter(sorter_status.clone());
    tokio::spawn(redrive_core::automation::sort_loop::run(
        store.clone(),
        {
            let leader = leader.clone();
            move || leader.is_leader()
        },
        sorter_status.clone(),
        |_| {},
        shutdown.child_token(),
    ));
    // ... and runs the transient rules' scheduled rounds behind their health gates.
    tokio::spawn(redrive_core::automation::rounds::run(
        store.clone(),
        {
            let leader = leader.clone();
            move || leader.is_leader()
        },
        Arc::new(crate::automation_rounds::ServerProbe::new(
            config.relay_config(),
        )),
        rounds_status,
        shutdown.child_token(),
    ));
    crate::auth::cli::bootstrap_admin(&store, &config)
        .await
        .map_err(ServeError::Bootstrap)?;
    install_automation_rules(&store, &config).await?;
    // `Config::validate` compiled it once already: this cannot fail.
    let approval = Arc::new(config.approval_policy().unwrap_or_default());
    let state = AppState {
        auth: crate::auth::AuthState::new(store.clone(), &config),
        store: store.clone(),
        telemetry,
        ingest: health.clone(),
        relay: relay_health.clone(),
        retention: retention.clone(),
        approval: approval.clone(),
    };
    let app = router::app(
        state,
        site_router(&store, &config, addr, approval.clone()),
        Duration::from_millis(config.request_timeout_ms),
    );

    let ingest_task = if config.ingest_enabled {
        let ingest_config = IngestConfig {
            brokers: config.kafka_brokers.clone(),
            topics: config.dlq_topics.clone(),
            group_id: config.group_id.clone(),
            batch_size: config.ingest_batch_size,
            linger_ms: config.ingest_linger_ms,
            kafka_properties: config.kafka_properties(),
            backpressure: Some(retention.backpressure.clone()),
        };
        Some(tokio::spawn(ingest::run(
            ingest_config,
            ingest_store.clone(),
            status,
            shutdown.child_token(),
        )))
    } else {
        tracing::info!("ingest is disabled (ingest_enabled = false): serving the store only");
        None
    };

    // The replay relay (issue 3) publishes the outbox; it stops with `shutdown` and `finish`
    // waits for it, so batches already published are marked before the store closes.
    let relay_task = {
        let run = replay::run(
            config.relay_config(),
            relay_store.clone(),
            relay_health.status.clone(),
            shutdown.child_token(),
        );
        let relay_health = relay_health.clone();
        Some(tokio::spawn(async move {
            let r = run.await;
            if let Err(e) = &r {
                tracing::error!("the replay relay stopped: {e}");
                relay_health.set_failure(e.to_string());
            }
            r
        }))
    };

    // Header read timeout and connection limit (`http_server.rs`, docs/security.md).
    crate::http_server::warn_if_exposed(addr, config.cookie_secure);
    let server = crate::http_server::run(
        listener,
        app,
        crate::http_server::HttpLimits {
            header_read_timeout: Duration::from_millis(config.http_header_read_timeout_ms),
            max_connections: config.http_max_connections,
        },
        shutdown.clone(),
    );
    let server_task = tokio::spawn(server);

    // On stdout, alone on its line: what scripts and tests that start redrive on port 0 wait
    // for (`server/tests/it/support`). The log (stderr, often shipped elsewhere) has it as a
    // field of its own line, worded differently so that a terminal showing both does not read
    // the same sentence twice.
    println!("listening on http://{addr}");
    tracing::info!(%addr, "serving HTTP");

    // Run until a signal, the server failing, or ingest stopping on its own (bad config).
    let mut ingest_task = ingest_task;
    let mut server_task = Some(server_task);
    let mut failure: Option<ServeError> = None;
    tokio::select! {
        _ = shutdown.cancelled() => {}
        r = shutdown::wait_task(&mut server_task) => {
            server_task = None;
            failure = shutdown::server_outcome(r).err();
            shutdown.cancel();
        }
        r = shutdown::wait_task(&mut ingest_task) => {
            ingest_task = None;
            let err = shutdown::ingest_outcome(r).err().unwrap_or_else(|| {
                ServeError::IngestCrashed("it returned before shutdown was requested".into())
            });
            // `main` logs the error once the shutdown below is done.
            health.set_failure(err.to_string());
            failure = Some(err);
            shutdown.cancel();
        }
    }
    let running = shutdown::Running {
        stores: vec![
            store,
            ingest_store,
            relay_store,
            alerts_store,
            retention_store,
        ],
        ingest_task,
        relay_task,
        notify_task,
        leader,
    };
    running
        .finish(server_task, failure, config.shutdown_timeout_ms)
        .await
}

/// Starts the alert evaluator and the notification dispatcher (`docs/alerts.md`). Both run
/// on the leader only (`leader`: always on SQLite; one instance per PostgreSQL store).
/// Returns the dispatcher's task: shutdown waits for it, so notifications in flight are
/// recorded before the store closes (and not sent again after a restart).
#[allow(clippy::too_many_arguments)]
fn start_alerts(
    config: &Config,
    alerts: Arc<AlertsConfig>,
    store: Store,
    ingest: Option<Arc<IngestStatus>>,
    status: Arc<AlertStatus>,
    leader: Leadership,
    shutdown: &CancellationToken,
) -> JoinHandle<()> {
    let is_leader: IsLeader = Arc::new(move || leader.is_leader());
    if !alerts.rules.is_empty() {
        tracing::info!(
            rules = alerts.rules.len(),
            notifiers = alerts.notifiers.len(),
            interval_ms = alerts.interval_ms,
            "alert rules loaded"
        );
    }
    tokio::spawn(evaluate::run(
        alerts.clone(),
        store.clone(),
        EvaluatorInputs {
            ingest,
            group_id: config.group_id.clone(),
        },
        status.clone(),
        is_leader.clone(),
        shutdown.child_token(),
    ));
    tokio::spawn(crate::notify::dispatch::run(
        alerts,
        store,
        status,
        is_leader,
        Arc::new(tokio::sync::Notify::new()),
        shutdown.child_token(),
    ))
}

/// Finishes bulk actions whose process died mid-way (`docs/replay.md`, "Bulk actions"): at
/// start-up and then every [`BULK_RESUME_EVERY`], any action that has not moved for
/// [`redrive_core::store::STALE_AFTER_MS`].
async fn resume_bulk_actions(store: Store, shutdown: CancellationToken) {
    loop {
        match store
            .resume_bulk_actions(redrive_core::store::STALE_AFTER_MS)
            .await
        {
            Ok(0) => {}
            Ok(n) => tracing::info!(finished = n, "interrupted bulk actions finished"),
            Err(e) => tracing::warn!(error = %e, "cannot resume interrupted bulk actions yet"),
        }
        tokio::select! {
            _ = tokio::time::sleep(BULK_RESUME_EVERY) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// How often `serve` drops arrival buckets beyond their kept windows.
const STATS_COMPACT_EVERY: std::time::Duration = std::time::Duration::from_secs(300);

/// Drops arrival buckets older than they are kept (`docs/stats.md`, "Compaction"): at
/// start-up and then every [`STATS_COMPACT_EVERY`]. Small deletes by an index on the bucket
/// time; the counts themselves are never compacted.
async fn compact_stats(store: Store, shutdown: CancellationToken) {
    loop {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        match store.compact_stats(now).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(removed = n, "stats buckets compacted"),
            Err(e) => tracing::warn!(error = %e, "cannot compact stats buckets yet"),
        }
        tokio::select! {
            _ = tokio::time::sleep(STATS_COMPACT_EVERY) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Installs `[automation]` of `redrive.toml` as a new rule set version (actor `(config)`)
/// when its text differs from the last version installed from the file
/// (`Store::install_config_rule_set`; `docs/automation.md`, "Rule set versions"). Two
/// instances starting together may race for the same version number: the loser tries once
/// more, and then finds the text installed.
async fn install_automation_rules(store: &Store, config: &Config) -> Result<(), ServeError> {
    // `Config::validate` compiled it already: an error here cannot happen.
    let Ok(Some((text, _))) = config.automation.rule_set() else {
        return Ok(());
    };
    let installed = match store.install_config_rule_set(&text).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "installing the [automation] rules failed; trying once more");
            store
                .install_config_rule_set(&text)
                .await
                .map_err(ServeError::Automation)?
        }
    };
    match installed {
        Some(v) => tracing::info!(
            version = v.version,
            "installed the [automation] rules of redrive.toml as rule set version {}",
            v.version
        ),
        None => tracing::debug!("the [automation] rules of redrive.toml are installed already"),
    }
    Ok(())
}

/// The UI's router (the Leptos pages, their server functions and the static site), serving
/// assets from `site_root`.
fn site_router(
    store: &Store,
    config: &Config,
    addr: SocketAddr,
    approval: Arc<redrive_core::approval::ApprovalPolicy>,
) -> Router {
    site::site_router_full(
        store.clone(),
        site::leptos_options(&config.site_root, addr),
        Arc::new(config.alerts.redacted("REDACTED")),
        approval,
    )
}
