//! `redrive demo`: the small agent system of the seed design (`shared/seeds/000_*`, the "pet
//! project"), run against a real Kafka so that redrive has real dead letters of every kind.
//!
//! ```text
//!  producer ──► user_requests ──► agent (group demo-agent) ──► ledger: processed message_ids
//!  (every 2 s,        ▲              │ LLM call via circuit breaker (latency, timeouts,
//!   ~20 % poison)     │              │ invalid responses, rate limits, outage windows)
//!                     │              ├─ poison ─────────────────────────────► dlq_requests
//!   redrive replay ───┘              └─ transient ─► user_requests.retry.1 (≈1 s) ─► agent
//!                                                    user_requests.retry.2 (≈2 s) ─► agent
//!                                                    user_requests.retry.3 (≈4 s) ─► agent ─► dlq_requests
//! ```
//!
//! Reliability, as the seeds ask: manual commits only after a record's outcome is durable (the
//! ledger row, or the broker's acknowledgement of the retry/DLQ record); an idempotent producer
//! with `acks=all`; processing idempotent by `message_id` (a UNIQUE key in the demo's SQLite
//! file) and by redrive's `redrive-idempotency-key`, so a replay published twice is processed
//! once; bounded in-flight work per stage; exponential backoff with jitter between attempts;
//! a circuit breaker in front of the LLM. Dead letters carry the seed convention's headers
//! (see [`headers`]); poison is dead-lettered at once with `retryable: false`.
//!
//! The outage is switched on the control endpoint (see [`control`]), e.g.
//! `curl -X POST http://127.0.0.1:3001/outage/off`.

pub mod backoff;
pub mod breaker;
pub mod config;
pub mod control;
pub mod headers;
pub mod ledger;
pub mod llm;
pub mod request;
pub mod rng;

mod agent;
mod kafka;
mod producer;

use std::sync::Arc;
use std::time::Duration;

use rdkafka::producer::{FutureProducer, Producer};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use config::{DemoArgs, DemoConfig};
pub use control::{Control, OutageMode, StatusSnapshot};
pub use ledger::Ledger;

/// Why the demo could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A setting cannot work; the message says which.
    #[error("demo configuration: {0}")]
    Config(String),
    /// Kafka refused a client or a topic.
    #[error("Kafka: {0}")]
    Kafka(String),
    /// The demo's SQLite file could not be opened or written.
    #[error("demo database: {0}")]
    Ledger(#[from] sqlx::Error),
    /// The control endpoint could not listen. `cause` is not a `source`: the message already
    /// says it, and a reporter printing the chain would say it twice.
    #[error(
        "control endpoint on {addr}: {cause} (choose another with --control-listen, or `off`)"
    )]
    Control {
        addr: std::net::SocketAddr,
        cause: std::io::Error,
    },
    /// A task of the demo failed unexpectedly.
    #[error("demo task failed: {0}")]
    Task(String),
}

impl From<rdkafka::error::KafkaError> for DemoError {
    fn from(e: rdkafka::error::KafkaError) -> DemoError {
        DemoError::Kafka(e.to_string())
    }
}

/// What every task of a running demo shares.
pub(crate) struct Shared {
    pub config: DemoConfig,
    pub control: Control,
    pub ledger: Ledger,
    pub producer: FutureProducer,
    pub rng: rng::Rng,
    pub llm: llm::SimulatedLlm,
    pub backoff: backoff::Backoff,
    pub locks: agent::KeyLocks,
    /// Cancelled on shutdown, or when a task fails.
    pub stop: CancellationToken,
}

/// Runs the demo (producer, agent stages, control endpoint) until `shutdown` is cancelled,
/// then lets records in hand finish (at most 10 s), commits, and returns.
pub async fn run(config: DemoConfig, shutdown: CancellationToken) -> Result<(), DemoError> {
    let control = Control::new(&config);
    run_with(config, control, shutdown).await
}

/// As [`run`], with a [`Control`] the caller keeps (to switch the outage, read the counters).
pub async fn run_with(
    config: DemoConfig,
    control: Control,
    shutdown: CancellationToken,
) -> Result<(), DemoError> {
    config.validate()?;
    if config.create_topics {
        kafka::ensure_topics(&config).await?;
    }
    let ledger = Ledger::open(&config.database_url).await?;
    let listener = match config.control_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|cause| DemoError::Control { addr, cause })?,
        ),
        None => None,
    };
    let stop = shutdown.child_token();
    let shared = Arc::new(Shared {
        producer: kafka::producer(&config)?,
        rng: rng::Rng::new(config.seed),
        llm: llm::SimulatedLlm {
            latency_ms: config.llm_latency_ms,
            timeout_ms: config.llm_timeout_ms,
            failure_ratio: config.failure_ratio,
        },
        backoff: backoff::Backoff {
            base_ms: config.backoff_base_ms,
            max_ms: config.backoff_max_ms,
            jitter: config.jitter,
        },
        locks: agent::KeyLocks::default(),
        control: control.clone(),
        ledger,
        stop: stop.clone(),
        config,
    });
    let cfg = &shared.config;
    tracing::info!(
        source = %cfg.source_topic, dlq = %cfg.dlq_topic, group = %cfg.group_id,
        retries = cfg.max_retries, interval_ms = cfg.interval_ms,
        control = ?cfg.control_listen, "demo: starting"
    );

    let mut tasks: JoinSet<Result<(), DemoError>> = JoinSet::new();
    let stages = std::iter::once(agent::Stage {
        index: 0,
        topic: cfg.source_topic.clone(),
        group: cfg.group_id.clone(),
    })
    .chain((1..=cfg.max_retries).map(|n| agent::Stage {
        index: n,
        topic: cfg.retry_topic(n),
        group: format!("{}.retry.{n}", cfg.group_id),
    }));
    for stage in stages {
        tasks.spawn(agent::run_stage(stage, shared.clone()));
    }
    if cfg.count != Some(0) {
        tasks.spawn(producer::run(shared.clone()));
    }
    if let Some(listener) = listener {
        let (control, stop) = (control.clone(), stop.clone());
        tasks.spawn(async move {
            control::serve(listener, control, stop).await;
            Ok(())
        });
    }
    tasks.spawn(log_status(control, stop.clone()));

    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        let failed = match joined {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(e) => Some(DemoError::Task(e.to_string())),
        };
        if let Some(e) = failed {
            tracing::error!(error = %e, "demo: a task failed; stopping");
            stop.cancel();
            first_error.get_or_insert(e);
        }
    }
    if let Err(e) = shared.producer.flush(Duration::from_secs(10)) {
        tracing::warn!(error = %e, "demo: flushing the producer failed");
    }
    tracing::info!("demo: stopped");
    first_error.map_or(Ok(()), Err)
}

/// Runs the demo until SIGINT (Ctrl-C) or SIGTERM, then stops cleanly: what `redrive demo`
/// does.
pub async fn run_until_signal(config: DemoConfig) -> Result<(), DemoError> {
    let shutdown = CancellationToken::new();
    let trigger = shutdown.clone();
    tokio::spawn(async move {
        let name = next_signal().await;
        tracing::info!("demo: {name} received; stopping (records in hand get up to 10 s)");
        trigger.cancel();
        // A stop that hangs must not need SIGKILL: with the broker gone, a stage's final
        // synchronous commit and its consumer's close can block for minutes, and on the
        // runtime's worker threads. A plain thread ends the process after
        // `FORCED_EXIT_AFTER` whatever the runtime is doing; a second signal ends it at once
        // (if a worker is free to notice). Nothing is lost either way: uncommitted records
        // are read again at the next start and the ledger drops the duplicates.
        std::thread::spawn(|| {
            std::thread::sleep(FORCED_EXIT_AFTER);
            tracing::warn!(
                "demo: still stopping after {} s; exiting now",
                FORCED_EXIT_AFTER.as_secs()
            );
            std::process::exit(130);
        });
        let again = next_signal().await;
        tracing::warn!("demo: {again} received while stopping; exiting now");
        std::process::exit(130);
    });
    run(config, shutdown).await
}

/// How long `redrive demo` may take to stop after SIGINT/SIGTERM before it exits anyway:
/// the stages' 10 s grace for records in hand, their final commits, and a margin.
pub const FORCED_EXIT_AFTER: Duration = Duration::from_secs(30);

async fn next_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    "SIGINT"
}

/// One log line every 10 s with the counters, so `make demo`'s console shows the flow.
async fn log_status(control: Control, stop: CancellationToken) -> Result<(), DemoError> {
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tick.tick() => {}
        }
        let s = control.snapshot();
        tracing::info!(
            produced = s.produced, poison = s.produced_poison, processed = s.processed,
            retried = s.retried, dlq_transient = s.dead_lettered_transient,
            dlq_poison = s.dead_lettered_poison, duplicates = s.duplicates,
            outage = s.outage_active, breaker = ?s.breaker,
            "demo: status"
        );
    }
}
