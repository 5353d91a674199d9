//! The JSON API (`/api/v1/...`) and the health and metrics endpoints (raw downloads are in
//! `raw.rs`).
//!
//! The response shapes here are a public contract: they are dedicated DTOs mapped from the core
//! model, so that an internal refactor cannot silently change what API clients receive. Every
//! failure answers JSON `{"error": "..."}` with a message saying what to do next; bad input is a
//! 4xx, never a 500, and nothing here panics on request or store data.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use chrono::{DateTime, SecondsFormat, Utc};
use redrive_core::ingest::{IngestSnapshot, IngestStatus};
use redrive_core::replay::{RelaySnapshot, RelayStatus};
use redrive_core::store::{GroupsCounted, Store, StoreError};
use redrive_core::{DeadLetter, DeadLetterSummary, ErrorGroup, Header, ListQuery};
use serde::Serialize;

use crate::auth::Caller;
use crate::telemetry::{Telemetry, METRICS_CONTENT_TYPE};

/// How long `/readyz` waits for the store to answer a ping.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

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

    fn failure(&self) -> Option<String> {
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

    fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Errors

pub use crate::api_error::ApiError;

impl AppState {
    /// Logs and counts a store failure, and turns it into the 503 the client sees.
    pub(crate) fn store_failed(&self, operation: &'static str, e: StoreError) -> ApiError {
        self.telemetry.store_error(operation, &e);
        ApiError::Unavailable
    }
}

// ---------------------------------------------------------------------------------------------
// DTOs: the public shape of the API

/// One dead letter in a list (`GET /api/v1/dead-letters`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeadLetterItem {
    pub id: i64,
    pub dlq_topic: String,
    pub dlq_partition: i32,
    pub dlq_offset: i64,
    pub source_topic: Option<String>,
    pub source_partition: Option<i32>,
    pub source_offset: Option<i64>,
    pub consumer_group: Option<String>,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    pub retry_count: Option<i32>,
    /// `new`, `replay_pending`, `replayed`, `replay_failed`, `re_failed` or `deleted`.
    pub status: &'static str,
    /// The recognised header convention (`spring_dlt`, `kafka_connect`, ..., `unknown`).
    pub convention: &'static str,
    /// Error fingerprint, 16 lowercase hex characters: the error group.
    pub fingerprint: String,
    /// RFC 3339 UTC with milliseconds, e.g. `2026-12-01T06:00:00.123Z`.
    pub dead_lettered_at: Option<String>,
    /// True when decoding the headers met a problem (see `decode_warnings`).
    pub malformed: bool,
    /// Its own triage labels, sorted.
    pub labels: Vec<String>,
    /// Its error group's triage labels, sorted.
    pub group_labels: Vec<String>,
    /// Its automation tier: `transient`, `manual`, `poison` or `archive`; `null` while not
    /// sorted yet (`docs/automation.md`, "Tiers in the UI and API").
    pub tier: Option<&'static str>,
    /// With free text `q`: where it matched and the text around the match (`docs/triage.md`,
    /// "Search"); absent without `q`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<MatchItem>,
}

/// Where a dead letter matched the free text `q`: `field` is `message`, `stack_trace` or
/// `payload`; `before` + `match` + `after` is an excerpt of that field (plain text, as stored:
/// escape it before putting it in markup), `match` the matched part.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct MatchItem {
    pub field: &'static str,
    pub before: String,
    #[serde(rename = "match")]
    pub matched: String,
    pub after: String,
}

/// How and why a dead letter got its tier, and its automation state (`docs/automation.md`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TieringItem {
    pub tier: &'static str,
    /// The rule that gave it; `null` for the default tier or a poison signal.
    pub rule: Option<String>,
    /// The rule set version used.
    pub rule_version: Option<i64>,
    /// One line: which conditions matched, or why it escalated, was loop-guarded or moved.
    pub reason: String,
    /// When it entered this tier, RFC 3339 UTC.
    pub tier_at: Option<String>,
    /// Automatic replays so far (carried over from its earlier self when it came back).
    pub auto_attempts: i32,
    /// Its rule's `schedule.max_attempts` (transient rules only).
    pub max_attempts: Option<u32>,
    /// When the next automatic replay is due, RFC 3339 UTC; `null`: none is due.
    pub next_attempt_at: Option<String>,
    /// Taken out of automation by the loop guard: a manual replay needs the `approve`
    /// permission and a reason.
    pub loop_guarded: bool,
    /// Moved to `manual` after its automatic attempts were used up.
    pub escalated: bool,
}

impl From<&redrive_core::automation::TierInfo> for TieringItem {
    fn from(t: &redrive_core::automation::TierInfo) -> Self {
        TieringItem {
            tier: t.tier.as_str(),
            rule: t.rule.clone(),
            rule_version: t.rule_version,
            reason: t.reason.clone(),
            tier_at: rfc3339(t.tier_at_ms),
            auto_attempts: t.auto_attempts,
            max_attempts: t.max_attempts,
            next_attempt_at: t.next_attempt_at_ms.and_then(rfc3339),
            loop_guarded: t.loop_guarded,
            escalated: t.escalated,
        }
    }
}

/// A whole dead letter (`GET /api/v1/dead-letters/{id}`): the list fields plus the stack
/// trace, the raw record (base64; JSON `null` for a null key, value or header value) and the
/// bookkeeping.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeadLetterRecord {
    #[serde(flatten)]
    pub item: DeadLetterItem,
    pub stack_trace: Option<String>,
    /// Timestamp of the original record, RFC 3339 UTC, if a header gave it.
    pub source_timestamp: Option<String>,
    /// Application message id (seed `message_id`, Watermill's uuid), if any.
    pub message_id: Option<String>,
    /// Timestamp of the record in the DLQ topic, RFC 3339 UTC, if it has one.
    pub dlq_timestamp: Option<String>,
    /// When redrive stored it, RFC 3339 UTC.
    pub ingested_at: Option<String>,
    /// How many times redrive has replayed it.
    pub replay_count: i32,
    /// Problems met while decoding the headers; empty for a clean record.
    pub decode_warnings: Vec<String>,
    /// The record key, base64 (standard alphabet, padded); `null` for a null key.
    pub key: Option<String>,
    /// The record value, base64; `null` for a tombstone.
    pub value: Option<String>,
    /// Every header in record order, duplicates kept.
    pub headers: Vec<HeaderItem>,
    /// What became of its replays and what it came back from (`docs/replay.md`, "Outcome").
    pub replay_outcome: crate::api_outcome::ReplayOutcomeItem,
    /// The value decoded with its schema, when it is in the Schema Registry wire format and
    /// `[schema_registry]` is configured; absent otherwise (`docs/payloads.md`). `value` above
    /// is the stored bytes either way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_schema: Option<ValueSchemaItem>,
    /// Its tier's rule, reason and automation state; `null` while not sorted yet.
    pub tiering: Option<TieringItem>,
}

/// A wire-format value decoded for reading (`docs/payloads.md`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ValueSchemaItem {
    /// The schema id in the value's header (bytes 1..5, big-endian).
    pub schema_id: u32,
    /// `AVRO`, `PROTOBUF` or `JSON`; `null` when the schema could not be fetched.
    pub schema_type: Option<&'static str>,
    /// Protobuf: the full name of the message decoded.
    pub message: Option<String>,
    /// The decoded value (Avro: fields in schema order, unions unwrapped; Protobuf: the
    /// Protobuf JSON mapping); `null` when it could not be decoded or was cut.
    pub decoded: Option<serde_json::Value>,
    /// True when the decoded JSON was longer than the display cap (256 KiB): `decoded` is
    /// then `null`; the raw `value` is whole.
    pub cut: bool,
    /// Why there is no decoded value: `could not fetch (...)` or `does not decode (...)`.
    pub error: Option<String>,
}

impl ValueSchemaItem {
    fn new(v: redrive_core::schema::ValueSchema) -> Self {
        let (decoded, message, cut, error) = match v.decoded {
            Ok(d) if d.cut => (None, d.message, true, None),
            Ok(d) => match serde_json::from_str(&d.json) {
                Ok(json) => (Some(json), d.message, false, None),
                Err(e) => (
                    None,
                    d.message,
                    false,
                    Some(format!("does not decode ({e})")),
                ),
            },
            Err(e) => (None, None, false, Some(e)),
        };
        ValueSchemaItem {
            schema_id: v.schema_id,
            schema_type: v.schema_type.map(|t| t.as_str()),
            message,
            decoded,
            cut,
            error,
        }
    }
}

/// One Kafka header.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HeaderItem {
    pub name: String,
    /// Base64 of the value bytes; `null` for a null-valued header (distinct from `""`).
    pub value: Option<String>,
}

/// A page of dead letters.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeadLetterPage {
    pub items: Vec<DeadLetterItem>,
    /// Pass as `cursor` to get the next (older) page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// One error group (`GET /api/v1/error-groups`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorGroupItem {
    pub fingerprint: String,
    pub error_class: Option<String>,
    pub example_message: Option<String>,
    pub count: i64,
    pub first_seen: Option<String>,
    pub last_seen: Option<String>,
    /// The group's triage labels, sorted.
    pub labels: Vec<String>,
    /// The group's triage note.
    pub note: Option<String>,
}

/// The error groups matching a filter, largest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorGroupList {
    pub items: Vec<ErrorGroupItem>,
    /// True when every matching dead letter is counted: a filter on fingerprint, DLQ topic,
    /// source topic, status and tier only (read from the maintained aggregate), or one that
    /// matches fewer dead letters than `counted_among_newest` would be.
    pub exact: bool,
    /// When not `exact`: the counts are of this many newest matching dead letters only
    /// (100,000; by dead-letter time, then id), so each `count` is "at least" and a group
    /// whose dead letters are all older is missing. `null` when `exact`.
    pub counted_among_newest: Option<i64>,
}

/// Epoch ms as RFC 3339 UTC with milliseconds; `None` only for a time outside chrono's range
/// (±262,000 years), which no real record has.
pub fn rfc3339(ms: i64) -> Option<String> {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl From<&DeadLetterSummary> for DeadLetterItem {
    fn from(s: &DeadLetterSummary) -> Self {
        DeadLetterItem {
            id: s.id,
            dlq_topic: s.dlq_topic.clone(),
            dlq_partition: s.dlq_partition,
            dlq_offset: s.dlq_offset,
            source_topic: s.source_topic.clone(),
            source_partition: s.source_partition,
            source_offset: s.source_offset,
            consumer_group: s.consumer_group.clone(),
            error_class: s.error_class.clone(),
            error_message: s.error_message.clone(),
            retry_count: s.retry_count,
            status: s.status.as_str(),
            convention: s.convention.as_str(),
            fingerprint: s.fingerprint.clone(),
            dead_lettered_at: rfc3339(s.dead_lettered_at_ms),
            malformed: s.malformed,
            labels: s.labels.clone(),
            group_labels: s.group_labels.clone(),
            tier: s.tier.map(|t| t.as_str()),
            matched: s.search_match.as_ref().map(|m| MatchItem {
                field: m.field.as_str(),
                before: m.before.clone(),
                matched: m.matched.clone(),
                after: m.after.clone(),
            }),
        }
    }
}

impl DeadLetterRecord {
    /// The JSON of `d`, with its replay `chain` (`Store::replay_chain`) read at `now_ms`.
    pub fn new(d: &DeadLetter, chain: &redrive_core::outcome::ReplayChain, now_ms: i64) -> Self {
        let n = &d.normalized;
        DeadLetterRecord {
            item: DeadLetterItem::from(&d.summary),
            stack_trace: n.stack_trace.clone(),
            source_timestamp: n.source_timestamp_ms.and_then(rfc3339),
            message_id: n.message_id.clone(),
            dlq_timestamp: d.record.timestamp_ms.and_then(rfc3339),
            ingested_at: rfc3339(d.ingested_at_ms),
            replay_count: d.replay_count,
            decode_warnings: n.decode_warnings.clone(),
            key: d.record.key.as_deref().map(b64),
            value: d.record.value.as_deref().map(b64),
            headers: d.record.headers.iter().map(HeaderItem::from).collect(),
            replay_outcome: crate::api_outcome::ReplayOutcomeItem::new(
                d,
                chain,
                now_ms,
                redrive_core::outcome::window_ms(),
            ),
            value_schema: None,
            tiering: d.tiering.as_ref().map(TieringItem::from),
        }
    }
}

impl From<&Header> for HeaderItem {
    fn from(h: &Header) -> Self {
        HeaderItem {
            name: h.name.clone(),
            value: h.value.as_deref().map(b64),
        }
    }
}

impl From<&ErrorGroup> for ErrorGroupItem {
    fn from(g: &ErrorGroup) -> Self {
        ErrorGroupItem {
            fingerprint: g.fingerprint.clone(),
            error_class: g.error_class.clone(),
            example_message: g.example_message.clone(),
            count: g.count,
            first_seen: rfc3339(g.first_seen_ms),
            last_seen: rfc3339(g.last_seen_ms),
            labels: g.labels.clone(),
            note: g.note.clone(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parameter parsing

/// Parses the query string with the shared [`ListQuery`] rules (unknown, repeated or malformed
/// parameters are refused).
fn list_query(raw: Option<&str>) -> Result<ListQuery, ApiError> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(raw.unwrap_or("")).map_err(|_| {
            ApiError::BadRequest(
                "the query string is not valid URL encoding (name=value pairs joined by &)".into(),
            )
        })?;
    Ok(ListQuery::from_pairs(
        pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )?)
}

/// A dead-letter id from the path: a whole number, else 400.
pub(crate) fn parse_id(path: Result<Path<String>, PathRejection>) -> Result<i64, ApiError> {
    let raw = match path {
        Ok(Path(s)) => s,
        Err(_) => {
            return Err(ApiError::BadRequest(
                "the dead-letter id is not valid".into(),
            ))
        }
    };
    raw.trim().parse::<i64>().map_err(|_| {
        ApiError::BadRequest(format!(
            "`{raw}` is not a dead-letter id: ids are whole numbers, as in /api/v1/dead-letters/42"
        ))
    })
}

pub(crate) fn not_found(id: i64) -> ApiError {
    ApiError::NotFound(format!(
        "no dead letter with id {id}; it may never have existed or been purged \
         (list them at /api/v1/dead-letters)"
    ))
}

// ---------------------------------------------------------------------------------------------
// Handlers

/// `GET /api/v1/dead-letters?FILTER&limit=&cursor=`: newest first, keyset-paginated.
pub async fn list_dead_letters(
    State(state): State<AppState>,
    Caller(actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<DeadLetterPage>, ApiError> {
    let mut query = list_query(raw.as_deref())?;
    state
        .store
        .limit_to_scope(&actor, &mut query.filter)
        .await
        .map_err(|e| state.store_failed("list", e))?;
    let page = state
        .store
        .list(&query)
        .await
        .map_err(|e| state.store_failed("list", e))?;
    Ok(Json(DeadLetterPage {
        items: page.items.iter().map(DeadLetterItem::from).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// `GET /api/v1/dead-letters/{id}`: the full record.
pub async fn get_dead_letter(
    State(state): State<AppState>,
    Caller(actor): Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<DeadLetterRecord>, ApiError> {
    let id = parse_id(path)?;
    let dl = state
        .store
        .get(id)
        .await
        .map_err(|e| state.store_failed("get", e))?
        // Outside the caller's DLQ-topic scope a record is absent.
        .filter(|d| actor.sees_topic(&d.summary.dlq_topic))
        .ok_or_else(|| not_found(id))?;
    let chain = state
        .store
        .replay_chain_from(id, dl.link.as_ref().map(|l| l.earlier_id))
        .await
        .map_err(|e| state.store_failed("replay_chain", e))?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut record = DeadLetterRecord::new(&dl, &chain, now_ms);
    if let (Some(resolver), Some(value)) = (
        redrive_core::schema::resolver::installed(),
        dl.record.value.as_deref(),
    ) {
        record.value_schema = resolver
            .decode_value(value, redrive_app::display::caps::VALUE_TEXT_BYTES)
            .await
            .map(ValueSchemaItem::new);
    }
    Ok(Json(record))
}

/// `GET /api/v1/error-groups?FILTER&limit=`: groups by fingerprint, largest first.
pub async fn list_error_groups(
    State(state): State<AppState>,
    Caller(actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<ErrorGroupList>, ApiError> {
    let mut query = list_query(raw.as_deref())?;
    state
        .store
        .limit_to_scope(&actor, &mut query.filter)
        .await
        .map_err(|e| state.store_failed("error_groups", e))?;
    if query.cursor.is_some() {
        return Err(ApiError::BadRequest(
            "`cursor` does not apply to error groups: they come as one list of at most `limit` \
             (up to 500), largest first"
                .into(),
        ));
    }
    let listing = state
        .store
        .error_groups_counted(&query.filter, query.limit)
        .await
        .map_err(|e| state.store_failed("error_groups", e))?;
    let counted_among_newest = match listing.counted {
        GroupsCounted::Exact => None,
        GroupsCounted::AmongNewest(n) => Some(n),
    };
    Ok(Json(ErrorGroupList {
        items: listing.groups.iter().map(ErrorGroupItem::from).collect(),
        exact: counted_among_newest.is_none(),
        counted_among_newest,
    }))
}

/// Any other path under `/api/`: a JSON 404 instead of the UI's HTML page.
pub async fn api_not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::NotFound(format!(
        "no API route {method} {}; see /api/v1/dead-letters, /api/v1/dead-letters/{{id}} and \
         /api/v1/error-groups",
        uri.path()
    ))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(
            rfc3339(1_764_568_800_123).as_deref(),
            Some("2025-12-01T06:00:00.123Z")
        );
        assert_eq!(rfc3339(0).as_deref(), Some("1970-01-01T00:00:00.000Z"));
        assert_eq!(rfc3339(i64::MAX), None);
    }

    #[test]
    fn query_strings_are_parsed_strictly() {
        assert!(list_query(None).is_ok());
        assert!(list_query(Some("q=a%20b&limit=5")).is_ok());
        assert!(matches!(
            list_query(Some("colour=red")),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(
            list_query(Some("limit=501")),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(
            list_query(Some("q=%ZZ")),
            Err(ApiError::BadRequest(_)) | Ok(_)
        ));
    }

    #[test]
    fn ids_must_be_numbers() {
        assert_eq!(parse_id(Ok(Path("42".into()))).ok(), Some(42));
        assert!(matches!(
            parse_id(Ok(Path("abc".into()))),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(
            parse_id(Ok(Path("99999999999999999999".into()))),
            Err(ApiError::BadRequest(_))
        ));
    }
}
