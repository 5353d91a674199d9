//! The health and metrics endpoints: `/healthz` (liveness), `/readyz` (readiness, with
//! details for a signed-in caller) and `/metrics` (Prometheus).

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use redrive_core::ingest::IngestSnapshot;
use redrive_core::replay::RelaySnapshot;
use redrive_core::store::StoreError;
use serde::Serialize;

use super::AppState;
use crate::telemetry::METRICS_CONTENT_TYPE;

/// How long `/readyz` waits for the store to answer a ping.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /healthz`: the process is up and serving HTTP. Checks nothing else, on purpose: a
/// liveness probe that fails on a database outage would restart a healthy process.
pub async fn healthz() -> &'static str {
    "ok"
}

/// The body of `/readyz`.
#[derive(Debug, Serialize)]
pub struct Readiness {
    pub ready: bool,
    /// What is wrong, as a sentence; absent when ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub store: StoreReadiness,
    pub ingest: IngestReadiness,
    pub relay: RelayReadiness,
    /// DLQ topics whose ingest is paused at a retention limit (`docs/retention.md`). A paused
    /// topic does not make redrive unready: it is working as configured.
    pub retention: crate::api_archive::RetentionReadiness,
}

/// Replay relay part of `/readyz`: its live counters, and why it stopped if it did. Kafka
/// being unreachable *for the relay* does not make redrive unready (replays wait it out, see
/// `kafka_reachable` and the job's `waiting` status); a stopped relay does.
#[derive(Debug, Serialize)]
pub struct RelayReadiness {
    /// Why the relay stopped, if it stopped with an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    #[serde(flatten)]
    pub status: RelaySnapshot,
}

/// Store part of `/readyz`.
#[derive(Debug, Serialize)]
pub struct StoreReadiness {
    pub ok: bool,
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
}

/// Ingest part of `/readyz`.
#[derive(Debug, Serialize)]
pub struct IngestReadiness {
    pub enabled: bool,
    /// Why ingest stopped, if it stopped with an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Ingest's live state (absent when ingest is disabled).
    #[serde(flatten)]
    pub status: Option<IngestSnapshot>,
}

/// `/readyz` for a caller who is not signed in: the verdict only.
#[derive(Debug, Serialize)]
pub struct AnonymousReadiness {
    pub ready: bool,
}

/// `GET /readyz`: 200 when the store answers a ping, ingest (if enabled) is running with
/// Kafka reachable and the store writable, and the replay relay has not stopped with an
/// error; otherwise 503. A signed-in caller (session or API token) gets the details
/// ([`Readiness`]: what is wrong, the relay's counters, paused topics); anyone else only
/// `{"ready": bool}` — the status code is what a probe needs, and the details name brokers,
/// topics and errors (`docs/security.md`).
pub async fn readyz(
    State(state): State<AppState>,
    caller: Option<axum::Extension<redrive_core::actions::Actor>>,
) -> Response {
    let details = readiness(&state).await;
    let status = if details.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    match caller {
        Some(_) => (status, Json(details)).into_response(),
        None => (
            status,
            Json(AnonymousReadiness {
                ready: details.ready,
            }),
        )
            .into_response(),
    }
}

/// What `/readyz` finds.
async fn readiness(state: &AppState) -> Readiness {
    let mut problems = Vec::new();
    let store_ok = match tokio::time::timeout(PING_TIMEOUT, state.store.ping()).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            state.telemetry.store_error("ping", &e);
            problems.push("the database does not answer (see redrive's log)".to_string());
            false
        }
        Err(_) => {
            state.telemetry.store_error(
                "ping",
                &StoreError::Unavailable(format!("no answer within {PING_TIMEOUT:?}")),
            );
            problems.push(format!(
                "the database did not answer within {} s",
                PING_TIMEOUT.as_secs()
            ));
            false
        }
    };

    let ingest = &state.ingest;
    let snap = ingest.status.snapshot();
    let stopped = ingest.failure();
    if ingest.enabled {
        if let Some(why) = &stopped {
            problems.push(format!("ingest stopped: {why}"));
        } else if !snap.running {
            problems.push("ingest is not running yet".to_string());
        } else {
            if !snap.kafka_connected {
                problems.push(format!(
                    "Kafka is not reachable at {} (check kafka_brokers and the [kafka] \
                     properties)",
                    ingest.brokers
                ));
            }
            if !snap.store_ok {
                problems.push(match &snap.last_error {
                    Some(e) => format!("ingest cannot write to the store: {e}"),
                    None => "ingest has not written to the store yet".to_string(),
                });
            }
        }
    }

    let relay = state.relay.status.snapshot();
    let relay_stopped = state.relay.failure();
    if let Some(why) = &relay_stopped {
        problems.push(format!("the replay relay stopped: {why}"));
    }

    let ready = problems.is_empty();
    Readiness {
        ready,
        error: (!ready).then(|| problems.join("; ")),
        store: StoreReadiness {
            ok: store_ok,
            backend: state.store.backend(),
        },
        ingest: IngestReadiness {
            enabled: ingest.enabled,
            stopped,
            status: ingest.enabled.then_some(snap),
        },
        relay: RelayReadiness {
            stopped: relay_stopped,
            status: relay,
        },
        retention: state.retention.readiness(),
    }
}

/// `GET /metrics`: Prometheus text format 0.0.4.
pub async fn metrics(State(state): State<AppState>) -> Response {
    let body = state.telemetry.render(&state.store).await;
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(METRICS_CONTENT_TYPE),
        )],
        body,
    )
        .into_response()
}
