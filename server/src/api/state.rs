//! The state every handler gets ([`AppState`]), and what `/readyz` knows about ingest and the
//! replay relay ([`IngestHealth`], [`RelayHealth`]).

use std::sync::{Arc, Mutex};

use redrive_core::ingest::IngestStatus;
use redrive_core::replay::RelayStatus;
use redrive_core::store::Store;

use crate::telemetry::Telemetry;

/// Everything a handler needs; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub telemetry: Arc<Telemetry>,
    pub ingest: IngestHealth,
    /// The replay relay's live state, for `/readyz` (and `/metrics`, via the telemetry).
    pub relay: RelayHealth,
    /// Sessions, tokens, throttling (`auth`): handlers check roles with it.
    pub auth: crate::auth::AuthState,
    /// Retention: backpressure (paused DLQ topics), counters, the archive settings.
    pub retention: crate::api_archive::RetentionHealth,
    /// Four-eyes approval and required reasons (`[approval]`, `[reasons]`; `api_approvals`).
    pub approval: Arc<redrive_core::approval::ApprovalPolicy>,
}

/// What `/readyz` knows about ingest.
#[derive(Clone)]
pub struct IngestHealth {
    /// `ingest_enabled` from the configuration.
    pub enabled: bool,
    /// The bootstrap servers, for messages.
    pub brokers: String,
    pub status: Arc<IngestStatus>,
    /// Why ingest stopped, once it has stopped with an error (the process then shuts down).
    pub failure: Arc<Mutex<Option<String>>>,
}

impl IngestHealth {
    /// Records that ingest stopped with `message`.
    pub fn set_failure(&self, message: String) {
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(message);
    }

    pub(super) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// What `/readyz` knows about the replay relay.
#[derive(Clone, Default)]
pub struct RelayHealth {
    pub status: Arc<RelayStatus>,
    /// Why the relay stopped, once it has stopped with an error (a `[kafka]` property
    /// librdkafka refuses); replays then wait until redrive is restarted with a fix.
    pub failure: Arc<Mutex<Option<String>>>,
}

impl RelayHealth {
    /// Records that the relay stopped with `message`.
    pub fn set_failure(&self, message: String) {
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(message);
    }

    pub(super) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
