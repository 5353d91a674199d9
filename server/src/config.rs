//! redrive's configuration: ONE documented struct, read once at start-up.
//!
//! Sources, later ones winning: built-in defaults < `redrive.toml` (or `--config PATH`) <
//! `REDRIVE_*` environment variables < command-line flags. Each field's doc comment below is
//! its user documentation; `docs/configuration.md` carries the same table for readers of the
//! repository, and a test keeps the two in step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use figment::providers::{Format, Serialized, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use redrive_core::alerts::AlertsConfig;
use redrive_core::permission::{RoleConfig, Roles};
use redrive_core::replay::{self, RelayConfig};
use serde::{Deserialize, Deserializer, Serialize};

/// Prefix of every environment variable redrive reads as a setting.
pub const ENV_PREFIX: &str = "REDRIVE_";

/// File read when `--config` is not given, if it exists in the working directory.
pub const DEFAULT_CONFIG_FILE: &str = "redrive.toml";

/// Every setting of redrive. Field names are the keys of `redrive.toml`; the environment
/// variable is the upper-cased name with the `REDRIVE_` prefix (`database_url` ->
/// `REDRIVE_DATABASE_URL`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where dead letters are stored: `sqlite:PATH` (a single file, created if missing; good
    /// up to a few million dead letters on one machine) or `postgres://USER:PASS@HOST/DB`.
    /// Default `sqlite:redrive.db` (in the working directory) so that a first run needs nothing
    /// else.
    #[serde(default = "default_database_url", deserialize_with = "de::text")]
    pub database_url: String,

    /// How long `serve` and `migrate` keep retrying an unreachable database at start-up, in ms,
    /// with backoff from 0.5 s to 5 s, logging each attempt. Default 60000 (60 s): a database
    /// that is still starting (docker compose, a failover) should not crash redrive. `0` gives
    /// up at the first failure. A bad URL or failed migration stops at once either way.
    #[serde(default = "default_database_wait_ms")]
    pub database_wait_ms: u64,

    /// Kafka bootstrap servers, comma-separated `host:port`. Default `127.0.0.1:9092`, a local
    /// development broker.
    #[serde(default = "default_kafka_brokers", deserialize_with = "de::text")]
    pub kafka_brokers: String,

    /// DLQ topics to ingest. Comma-separated in the environment and on the command line, an
    /// array in `redrive.toml`. An entry starting with `^` is a regular expression matched
    /// against whole topic names (new matching topics are picked up as they appear); any other
    /// entry is an exact name. Default: the common naming conventions — names ending in
    /// `.DLT`/`-dlt`/`.DLQ`/`-dlq`/`_dlq` (any of `.`, `-`, `_`, upper or lower case: Spring
    /// Kafka, Kafka Connect and most hand-made DLQs), starting with `dlq.`/`dlq-`/`dlq_`,
    /// SmallRye's `dead-letter-topic-*` and Spring Cloud Stream's `error.*`. List your topics
    /// explicitly in production: a pattern can match more than you meant. Use the toml array
    /// for a regular expression that itself contains a comma.
    #[serde(default = "default_dlq_topics", deserialize_with = "de::topics")]
    pub dlq_topics: Vec<String>,

    /// Kafka consumer group redrive ingests with. Default `redrive`. Two redrive instances
    /// with the same group share the partitions; use different groups for independent copies.
    #[serde(default = "default_group_id", deserialize_with = "de::text")]
    pub group_id: String,

    /// Extra librdkafka properties for every Kafka client redrive creates (SASL, SSL, timeouts),
    /// applied after redrive's own. Default: none. In `redrive.toml` a `[kafka]` table with
    /// librdkafka's names (`security.protocol = "SASL_SSL"`, dotted keys are fine); in the
    /// environment one variable per property, `REDRIVE_KAFKA__` followed by the name with `.`
    /// written as `_` (`REDRIVE_KAFKA__SASL_MECHANISM=PLAIN` sets `sasl.mechanism`). Values that
    /// look secret (passwords, secrets, JAAS, tokens, private keys) are redacted by
    /// `redrive config`.
    #[serde(default, deserialize_with = "de::properties")]
    pub kafka: BTreeMap<String, String>,

    /// Whether `serve` runs the Kafka ingest. Default `true`. Turn it off to browse an existing
    /// store without a Kafka cluster (then `/readyz` checks the store only).
    #[serde(default = "default_ingest_enabled")]
    pub ingest_enabled: bool,

    /// Most dead letters written per store transaction (records). Default 500: large enough to
    /// amortise the commit (fsync), small enough to keep each transaction short.
    #[serde(default = "default_ingest_batch_size")]
    pub ingest_batch_size: usize,

    /// How long ingest waits for a batch to fill before writing what it has, in ms. Default 50:
    /// a lone dead letter is visible within a blink, while a burst is still written in batches.
    #[serde(default = "default_ingest_linger_ms")]
    pub ingest_linger_ms: u64,

    /// Address the web UI, JSON API, health and metrics listen on, `IP:PORT` (or
    /// `HOST:PORT`). Default `127.0.0.1:3000`: local only, since the UI shows message contents.
    /// Port `0` picks a free port; the log says which (`listening on http://ADDR`).
    #[serde(default = "default_listen", deserialize_with = "de::text")]
    pub listen: String,

    /// Directory of the UI's built assets (the wasm, JS and CSS under `pkg/`, as produced by
    /// `scripts/build-site`). Default `target/site`, where a source build puts them; the
    /// container image sets `/usr/share/redrive/site`.
    #[serde(default = "default_site_root", deserialize_with = "de::text")]
    pub site_root: String,

    /// Longest an HTTP request may take before redrive answers 503, in ms. Default 30000
    /// (30 s): generous for a large filter on a big store, short enough that a stuck database
    /// does not pile up requests.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,

    /// Longest wait for an HTTP request's complete head (request line and headers), in ms.
    /// Default 10000 (10 s). A connection that takes longer — a client trickling its headers,
    /// or one that connects and sends nothing — is closed; so is a keep-alive connection idle
    /// that long. `docs/security.md`, "Connections".
    #[serde(default = "default_http_header_read_timeout_ms")]
    pub http_header_read_timeout_ms: u64,

    /// Most HTTP connections served at once (1 to 1000000). Default 1024. Further connections
    /// wait in the kernel's listen backlog until one closes.
    #[serde(default = "default_http_max_connections")]
    pub http_max_connections: usize,

    /// On SIGINT/SIGTERM, how long `serve` waits for ingest to store the batch in hand and
    /// commit its offsets (and for open requests to finish), in ms. Default 30000 (30 s),
    /// below the 30 s grace period most orchestrators give before SIGKILL is likely; a batch
    /// cut short is simply re-read after restart (nothing is lost).
    #[serde(default = "default_shutdown_timeout_ms")]
    pub shutdown_timeout_ms: u64,

    /// Log filter, `RUST_LOG` syntax (`info`, `redrive=debug,tower_http=debug`, ...). Default
    /// `info`. Logs go to stderr; `tower_http=debug` logs every HTTP request.
    #[serde(default = "default_log", deserialize_with = "de::text")]
    pub log: String,

    /// Name of the first admin, created by `serve` at start-up when the store has no user at
    /// all (the creation is audited as `user_add`). Ignored once any user exists. Default
    /// empty (no bootstrap: create users with `redrive user add`). Set it together with
    /// `admin_password`.
    #[serde(default, deserialize_with = "de::text")]
    pub admin_user: String,

    /// Password of the bootstrap admin (see `admin_user`); at least 8 characters. Default
    /// empty. Redacted by `redrive config`; prefer the environment variable to the file.
    #[serde(default, deserialize_with = "de::text")]
    pub admin_password: String,

    /// A signed-in session ends after this long without a request, in ms. Default 28800000
    /// (8 h): a working day of idle tabs, not a forgotten laptop overnight.
    #[serde(default = "default_session_idle_timeout_ms")]
    pub session_idle_timeout_ms: u64,

    /// A session ends this long after sign-in whatever its activity, in ms. Default 604800000
    /// (7 days).
    #[serde(default = "default_session_absolute_timeout_ms")]
    pub session_absolute_timeout_ms: u64,

    /// Mark the session cookie `Secure` (sent over HTTPS only). Default `false`, because the
    /// default listen address is plain-HTTP localhost; set it to `true` whenever redrive is
    /// reached over HTTPS (behind a TLS-terminating proxy).
    #[serde(default)]
    pub cookie_secure: bool,

    /// Sign-in attempts allowed per user name from one client IP address per minute
    /// (successful ones count too); more are refused ("too many attempts") and audited as
    /// `sign_in_throttled`. Keyed by the (user, client) pair, so attempts from elsewhere
    /// cannot lock a user out of their own machine. Default 5. `0` = no limit.
    #[serde(default = "default_sign_in_per_user_per_min")]
    pub sign_in_per_user_per_min: u32,

    /// Sign-in attempts allowed per user name per minute from all clients together: bounds
    /// many clients guessing one user's password. Reaching it refuses that user from every
    /// client for a moment, so keep it well above `sign_in_per_user_per_min`. Default 100.
    /// `0` = no limit.
    #[serde(default = "default_sign_in_per_user_global_per_min")]
    pub sign_in_per_user_global_per_min: u32,

    /// Sign-in attempts allowed per client IP address per minute, whatever the user name.
    /// Default 20. `0` = no limit.
    #[serde(default = "default_sign_in_per_ip_per_min")]
    pub sign_in_per_ip_per_min: u32,

    /// Serve `/metrics` without authentication (for a Prometheus scraper). Default `false`:
    /// the metrics need a signed-in user or an API token (`Authorization: Bearer`).
    #[serde(default)]
    pub metrics_public: bool,

    /// Most outbox rows the replay relay claims and publishes as one batch (rows). Default
    /// 1000: thousands of records in flight, each batch recorded in one short store
    /// transaction. A throttled job claims at most what it publishes in a quarter lease.
    #[serde(default = "replay::default_batch_size")]
    pub relay_batch_size: usize,

    /// How long a relay's claim holds its outbox rows, in ms (at least 2000). Default 30000
    /// (30 s). If redrive dies mid-batch, the rows are published again after this, with the
    /// same idempotency keys. The delivery timeout is capped at half of it.
    #[serde(default = "replay::default_lease_ms")]
    pub relay_lease_ms: u64,

    /// Publish attempts per record before it is given up as `replay_failed` (at least 1).
    /// Default 10, with exponential backoff and full jitter between them. Errors that never
    /// pass (record too large, not authorised, no such topic) fail at once instead.
    #[serde(default = "replay::default_max_attempts")]
    pub relay_max_attempts: u32,

    /// Longest a replay job waits out a Kafka outage (unreachable cluster, a partition
    /// without a leader, not enough in-sync replicas) before its attempts are counted, in ms.
    /// Default 900000 (15 min): a rolling restart passes, a cluster that is gone ends the job
    /// (rows `failed` with the reason after `relay_max_attempts`) instead of holding it
    /// forever. `0` counts attempts from the first outage.
    #[serde(default = "replay::default_outage_max_ms")]
    pub relay_outage_max_ms: u64,

    /// First retry delay ceiling of the relay, in ms; doubles per attempt, with full jitter.
    /// Default 500.
    #[serde(default = "replay::default_backoff_base_ms")]
    pub relay_backoff_base_ms: u64,

    /// Largest retry delay ceiling of the relay, in ms (at least `relay_backoff_base_ms`).
    /// Default 60000 (1 min).
    #[serde(default = "replay::default_backoff_max_ms")]
    pub relay_backoff_max_ms: u64,

    /// How long one replayed record may wait for its delivery report before it counts as an
    /// outage, in ms (librdkafka's `message.timeout.ms`; within 1000 and half of
    /// `relay_lease_ms`). Default 10000. The `[kafka]` table cannot change it.
    #[serde(default = "replay::default_delivery_timeout_ms")]
    pub relay_delivery_timeout_ms: u64,

    /// How often the relay looks for new replay work, in ms: the delay between a replay
    /// request and its first publish. Default 250.
    #[serde(default = "replay::default_poll_interval_ms")]
    pub relay_poll_interval_ms: u64,

    /// Replay jobs the relay works on at the same time (at least 1). Default 4; a throttled
    /// job never holds up another.
    #[serde(default = "replay::default_max_parallel_jobs")]
    pub relay_max_parallel_jobs: usize,

    /// How long the relay uses one reading of a lag-gated replay's consumer group lag before
    /// it reads again, in ms (at least 100). Default 1000. A lag-gated job publishes at most
    /// `max_lag - lag` records per reading (`docs/replay.md`, "Lag-aware replay").
    #[serde(default = "replay::default_lag_poll_ms")]
    pub relay_lag_poll_ms: u64,

    /// Forward the recognised convention's diagnostic headers (exception, original topic,
    /// retry counters) with a replayed record. Default `false`: the consumer sees the record
    /// as its producer sent it, and a retry counter does not send it straight back.
    #[serde(default)]
    pub relay_forward_diagnostic_headers: bool,

    /// How long after its last publish a replayed dead letter is watched for a re-failure
    /// (its record coming back as a new dead letter, `docs/replay.md` "Outcome") before the
    /// detail page says "no re-failure seen", in ms. Default 3,600,000 (1 h).
    #[serde(default = "default_replay_outcome_window_ms")]
    pub replay_outcome_window_ms: u64,

    /// IP addresses of reverse proxies whose `X-Forwarded-For` header is believed. Comma list
    /// in the environment, an array in the file; exact addresses (no CIDR ranges). Default
    /// none: the client address is the TCP peer's. When the peer is listed, the client is the
    /// right-most `X-Forwarded-For` entry that is not itself a listed proxy. Used for sign-in
    /// throttling and the audit log.
    #[serde(default, deserialize_with = "de::topics")]
    pub trusted_proxies: Vec<String>,

    /// Built-in alerts: the `[alerts]` table of `redrive.toml` with its `[[alerts.rules]]` and
    /// `[alerts.notifiers.NAME]` (file only: there is no `REDRIVE_ALERTS` variable). Default:
    /// no rule. Every key, the rule kinds and the notification formats are in `docs/alerts.md`;
    /// a rule that cannot work stops start-up with a message naming it. Notifier secrets and
    /// routing keys are redacted by `redrive config`.
    #[serde(default)]
    pub alerts: AlertsConfig,
    /// Retention and the archive: the `[retention]` table of `redrive.toml` (file only; see
    /// `docs/retention.md` for every key). Default: deleted and replayed dead letters are
    /// purged 30 days after the delete or replay; live ones are kept; no archive.
    #[serde(default)]
    pub retention: redrive_core::retention::RetentionConfig,
    /// Custom roles, and DLQ-topic scopes of the built-in ones: the `[roles.NAME]` tables of
    /// `redrive.toml` (file only), each with `permissions` (names: `replay`, `delete`, `edit`,
    /// `annotate`, `approve`, `manage_rules`, `manage_users`; not on the built-in `viewer`,
    /// `operator`, `admin`) and optional `dlq_topics` (exact names, globs with `*`, or regular
    /// expressions starting with `^`): a user of the role sees and acts on only the dead
    /// letters of matching DLQ topics. Default: none, the three built-in roles over every
    /// topic. See `docs/access.md`.
    #[serde(default)]
    pub roles: BTreeMap<String, RoleConfig>,
    /// Four-eyes approval: the `[approval]` table of `redrive.toml` (file only): `min_records`
    /// (an action over at least this many dead letters needs approval; 0 = no threshold),
    /// `dlq_topics` (any action touching one of these DLQ topics needs approval; the syntax of
    /// `dlq_topics`), `expire_after_ms` (default 86400000), `actions` (default `["replay",
    /// "delete", "restore"]`). Default: off. `docs/replay.md`, "Four-eyes approval and
    /// required reasons".
    #[serde(default)]
    pub approval: redrive_core::approval::ApprovalConfig,
    /// Required reasons: the `[reasons]` table of `redrive.toml` (file only): `required`
    /// (a replay, delete, restore or edit without a reason is refused) and `pattern` (a
    /// regular expression a reason must match, e.g. `^[A-Z]+-\\d+`). Default: a reason is
    /// optional.
    #[serde(default)]
    pub reasons: redrive_core::approval::ReasonsConfig,
    /// OpenID Connect sign-in: the `[oidc]` table (`issuer_url`, `client_id`, `client_secret`
    /// or `client_secret_file`, `redirect_url`, `scopes`, `user_claim`, `groups_claim`,
    /// `role_mapping`, `default_role`, `disable_password_sign_in`); its text keys also as
    /// `REDRIVE_OIDC__KEY` (e.g. `REDRIVE_OIDC__CLIENT_SECRET`). Default: off. See
    /// `docs/access.md`, "Single sign-on". `redrive config` redacts the client secret.
    #[serde(default)]
    pub oidc: crate::auth::sso::OidcConfig,
    /// Reverse-proxy authentication: the `[proxy_auth]` table (`user_header`,
    /// `groups_header`), believed only from `trusted_proxies`; roles from `[oidc]
    /// role_mapping`. Default: off.
    #[serde(default)]
    pub proxy_auth: crate::auth::sso::ProxyAuthConfig,
    /// Automatic reprocessing rules: the `[automation]` table of `redrive.toml` (file only):
    /// `default_tier`, `poison_by_convention`, `loop_guard_returns` and the ordered
    /// `[[automation.rule]]` tables (`name`, `tier`, `match.*`, `schedule`, `gate`,
    /// `move_after`; every key in `docs/automation.md`, "Rules"). Checked at start-up with
    /// the rule set's own message; installed as a new rule set version (by `(config)`) only
    /// when it differs from the last one installed from the file, so rules edited in the UI
    /// since survive a restart with the same file. Default: none (the rules are edited in the
    /// UI; before any version every dead letter goes to `manual`).
    #[serde(default, skip_serializing_if = "AutomationTable::is_absent")]
    pub automation: AutomationTable,
    /// Schema-aware payloads: the `[schema_registry]` table (file only): `url` of a
    /// Confluent-compatible Schema Registry API, optional `username` / `password` (basic auth),
    /// `schema_dirs` of local schema files (`<id>.avsc`, `<id>.proto`, `<id>.json`),
    /// `timeout_ms` (default 2000). Default: off (values in the wire format show as hex). See
    /// `docs/payloads.md`. `redrive config` redacts the password.
    #[serde(default)]
    pub schema_registry: redrive_core::schema::SchemaRegistryConfig,
}

/// The `[automation]` table: a rule set as `redrive_core::automation::RuleSetSpec` reads it,
/// or nothing. (A newtype so that `Config` keeps `Eq`: the spec holds `f64`s, compared as
/// values, never NaN after [`AutomationTable::rule_set`] checked them.)
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AutomationTable(pub Option<redrive_core::automation::RuleSetSpec>);

impl Eq for AutomationTable {}

impl AutomationTable {
    /// True when `redrive.toml` has no `[automation]` table.
    pub fn is_absent(&self) -> bool {
        self.0.is_none()
    }

    /// The table as rule set TOML text (without the `automation.` prefix: the text the UI
    /// edits), compiled; `None` without a table. The text is the spec written back
    /// (`RuleSet::to_toml`): comments of the file are not kept, and the same table always
    /// gives the same text, so an unchanged file is recognised at the next start.
    ///
    /// Errors: the rule set's own message (what to change), prefixed `[automation]`.
    pub fn rule_set(&self) -> Result<Option<(String, redrive_core::automation::RuleSet)>, String> {
        let Some(spec) = &self.0 else {
            return Ok(None);
        };
        let set = redrive_core::automation::RuleSet::compile(spec.clone())
            .map_err(|e| format!("[automation]: {e} (see docs/automation.md)"))?;
        let text = set.to_toml();
        Ok(Some((text, set)))
    }
}

fn default_database_url() -> String {
    "sqlite:redrive.db".to_string()
}

fn default_database_wait_ms() -> u64 {
    60_000
}

fn default_kafka_brokers() -> String {
    "127.0.0.1:9092".to_string()
}

fn default_dlq_topics() -> Vec<String> {
    vec![
        r"^.*[._-]([Dd][Ll][Tt]|[Dd][Ll][Qq])$".to_string(),
        r"^([Dd][Ll][Qq])[._-].+$".to_string(),
        r"^dead-letter-topic-.+$".to_string(),
        r"^error\..+$".to_string(),
    ]
}

fn default_group_id() -> String {
    "redrive".to_string()
}

fn default_ingest_enabled() -> bool {
    true
}

fn default_ingest_batch_size() -> usize {
    500
}

fn default_ingest_linger_ms() -> u64 {
    50
}

fn default_listen() -> String {
    "127.0.0.1:3000".to_string()
}

fn default_site_root() -> String {
    "target/site".to_string()
}

fn default_request_timeout_ms() -> u64 {
    30_000
}

fn default_http_header_read_timeout_ms() -> u64 {
    10_000
}

fn default_http_max_connections() -> usize {
    1024
}

fn default_sign_in_per_user_global_per_min() -> u32 {
    100
}

fn default_shutdown_timeout_ms() -> u64 {
    30_000
}

fn default_log() -> String {
    "info".to_string()
}

fn default_session_idle_timeout_ms() -> u64 {
    8 * 60 * 60 * 1000
}

fn default_session_absolute_timeout_ms() -> u64 {
    7 * 24 * 60 * 60 * 1000
}

fn default_sign_in_per_user_per_min() -> u32 {
    5
}

fn default_sign_in_per_ip_per_min() -> u32 {
    20
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database_url: default_database_url(),
            database_wait_ms: default_database_wait_ms(),
            kafka_brokers: default_kafka_brokers(),
            dlq_topics: default_dlq_topics(),
            group_id: default_group_id(),
            kafka: BTreeMap::new(),
            ingest_enabled: default_ingest_enabled(),
            ingest_batch_size: default_ingest_batch_size(),
            ingest_linger_ms: default_ingest_linger_ms(),
            listen: default_listen(),
            site_root: default_site_root(),
            request_timeout_ms: default_request_timeout_ms(),
            http_header_read_timeout_ms: default_http_header_read_timeout_ms(),
            http_max_connections: default_http_max_connections(),
            shutdown_timeout_ms: default_shutdown_timeout_ms(),
            log: default_log(),
            admin_user: String::new(),
            admin_password: String::new(),
            session_idle_timeout_ms: default_session_idle_timeout_ms(),
            session_absolute_timeout_ms: default_session_absolute_timeout_ms(),
            cookie_secure: false,
            sign_in_per_user_per_min: default_sign_in_per_user_per_min(),
            sign_in_per_user_global_per_min: default_sign_in_per_user_global_per_min(),
            sign_in_per_ip_per_min: default_sign_in_per_ip_per_min(),
            metrics_public: false,
            relay_batch_size: replay::default_batch_size(),
            relay_lease_ms: replay::default_lease_ms(),
            relay_max_attempts: replay::default_max_attempts(),
            relay_outage_max_ms: replay::default_outage_max_ms(),
            relay_backoff_base_ms: replay::default_backoff_base_ms(),
            relay_backoff_max_ms: replay::default_backoff_max_ms(),
            relay_delivery_timeout_ms: replay::default_delivery_timeout_ms(),
            relay_poll_interval_ms: replay::default_poll_interval_ms(),
            relay_max_parallel_jobs: replay::default_max_parallel_jobs(),
            relay_lag_poll_ms: replay::default_lag_poll_ms(),
            relay_forward_diagnostic_headers: false,
            replay_outcome_window_ms: default_replay_outcome_window_ms(),
            trusted_proxies: Vec::new(),
            alerts: AlertsConfig::default(),
            retention: redrive_core::retention::RetentionConfig::default(),
            roles: BTreeMap::new(),
            approval: Default::default(),
            reasons: Default::default(),
            oidc: crate::auth::sso::OidcConfig::default(),
            proxy_auth: crate::auth::sso::ProxyAuthConfig::default(),
            automation: AutomationTable::default(),
            schema_registry: Default::default(),
        }
    }
}

/// Fields whose environment value is taken verbatim as text (never parsed as a number or a
/// list), so that `REDRIVE_GROUP_ID=42` is the group "42" and a password keeps its quotes.
const TEXT_FIELDS: &[&str] = &[
    "database_url",
    "kafka_brokers",
    "dlq_topics",
    "group_id",
    "listen",
    "site_root",
    "log",
    "admin_user",
    "admin_password",
    "trusted_proxies",
];

/// Keys of `[oidc]` also read from `REDRIVE_OIDC__KEY`, verbatim (the table's other keys are
/// lists and tables: file only).
const OIDC_TEXT_FIELDS: &[&str] = &[
    "issuer_url",
    "client_id",
    "client_secret",
    "client_secret_file",
    "redirect_url",
    "user_claim",
    "groups_claim",
    "default_role",
];

/// Fields whose environment value is parsed (numbers, `true`/`false`).
const TYPED_FIELDS: &[&str] = &[
    "database_wait_ms",
    "ingest_enabled",
    "ingest_batch_size",
    "ingest_linger_ms",
    "request_timeout_ms",
    "http_header_read_timeout_ms",
    "http_max_connections",
    "shutdown_timeout_ms",
    "session_idle_timeout_ms",
    "session_absolute_timeout_ms",
    "cookie_secure",
    "sign_in_per_user_per_min",
    "sign_in_per_user_global_per_min",
    "sign_in_per_ip_per_min",
    "metrics_public",
    "relay_batch_size",
    "relay_lease_ms",
    "relay_max_attempts",
    "relay_outage_max_ms",
    "relay_backoff_base_ms",
    "relay_backoff_max_ms",
    "relay_delivery_timeout_ms",
    "relay_poll_interval_ms",
    "relay_max_parallel_jobs",
    "relay_lag_poll_ms",
    "relay_forward_diagnostic_headers",
    "replay_outcome_window_ms",
];

/// `REDRIVE_*` variables that are not settings and are not worth a warning (the config file
/// path, the client commands' server and token (docs/cli.md), and the variables of the
/// project's own scripts and tests).
fn is_known_non_setting(var: &str) -> bool {
    matches!(
        var,
        "REDRIVE_CONFIG" | "REDRIVE_CACHE" | "REDRIVE_SERVER" | "REDRIVE_TOKEN"
    ) || var.starts_with("REDRIVE_TEST_")
}

/// Why the configuration could not be used. Each message names the source to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration file `{0}` does not exist (given with --config or REDRIVE_CONFIG)")]
    MissingFile(PathBuf),
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// Settings given on the command line (`None` = not given). They win over every other source.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Overrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kafka_brokers: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dlq_topics: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site_root: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingest_enabled: Option<bool>,
}

/// The loaded configuration and what is worth telling about how it was put together.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    /// The file that was read, if any.
    pub file: Option<PathBuf>,
    /// `REDRIVE_*` variables that are not settings (probably typos); logged at start-up.
    pub ignored_env: Vec<String>,
}

impl Config {
    /// Loads the configuration from every source. `file` is `--config`; without it,
    /// `redrive.toml` is read if it exists. `env` is the process environment (a parameter so
    /// that tests need not touch the real one).
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        overrides: &Overrides,
    ) -> Result<Loaded, ConfigError> {
        let file = match file {
            Some(p) if !p.exists() => return Err(ConfigError::MissingFile(p.to_path_buf())),
            Some(p) => Some(p.to_path_buf()),
            None => Some(PathBuf::from(DEFAULT_CONFIG_FILE)).filter(|p| p.exists()),
        };
        let env = EnvProvider::new(env);
        let ignored_env = env.ignored.clone();
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(path) = &file {
            figment = figment.merge(Toml::file(path));
        }
        let figment = figment.merge(env).merge(Serialized::defaults(overrides));
        let config: Config = figment
            .extract()
            .map_err(|e| ConfigError::Invalid(describe_figment_error(e, &figment)))?;
        config.validate()?;
        Ok(Loaded {
            config,
            file,
            ignored_env,
        })
    }

    /// Checks what serde cannot: values that parse but cannot work.
    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(m.to_string()));
        if self.ingest_batch_size == 0 {
            return bad("`ingest_batch_size` must be at least 1");
        }
        if self.ingest_enabled && self.dlq_topics.is_empty() {
            return bad(
                "`dlq_topics` is empty: list the DLQ topics to ingest (REDRIVE_DLQ_TOPICS) \
                 or set `ingest_enabled = false`",
            );
        }
        if self.request_timeout_ms == 0 {
            return bad("`request_timeout_ms` must be at least 1");
        }
        if self.http_header_read_timeout_ms == 0 {
            return bad("`http_header_read_timeout_ms` must be at least 1");
        }
        if !(1..=1_000_000).contains(&self.http_max_connections) {
            return bad("`http_max_connections` must be between 1 and 1000000");
        }
        if self.listen.trim().is_empty() {
            return bad("`listen` is empty: give an address such as 127.0.0.1:3000");
        }
        if self.session_idle_timeout_ms == 0 || self.session_absolute_timeout_ms == 0 {
            return bad(
                "`session_idle_timeout_ms` and `session_absolute_timeout_ms` must be at least 1",
            );
        }
        if self.admin_user.is_empty() != self.admin_password.is_empty() {
            return bad(
                "set both `admin_user` and `admin_password` (REDRIVE_ADMIN_USER, \
                 REDRIVE_ADMIN_PASSWORD) to create the first admin, or neither",
            );
        }
        if let Err(e) = self.relay_config().check() {
            return Err(ConfigError::Invalid(format!(
                "{e} (the `relay_*` settings, and `kafka_brokers`)"
            )));
        }
        if let Err(e) = self.retention.check() {
            return Err(ConfigError::Invalid(e));
        }
        self.approval_policy().map_err(ConfigError::Invalid)?;
        if let Some(p) = self
            .trusted_proxies
            .iter()
            .find(|p| p.parse::<std::net::IpAddr>().is_err())
        {
            return Err(ConfigError::Invalid(format!(
                "`trusted_proxies`: `{p}` is not an IP address (ranges are not supported)"
            )));
        }
        self.alerts
            .validate()
            .and_then(|()| self.alerts.check_dlq_scopes(&self.dlq_topics))
            .map_err(|e| ConfigError::Invalid(format!("{e} (see docs/alerts.md)")))?;
        self.roles()?;
        self.automation.rule_set().map_err(ConfigError::Invalid)?;
        self.oidc
            .validate()
            .and_then(|()| self.proxy_auth.validate(&self.trusted_proxies))
            .map_err(|e| ConfigError::Invalid(format!("{e} (see docs/access.md)")))?;
        Ok(())
    }

    /// The roles of this configuration: the built-in ones plus `[roles]`, for
    /// `redrive_core::permission::install_roles`.
    ///
    /// Errors: `Invalid` naming the role (an unknown permission, a bad topic pattern, ...).
    pub fn roles(&self) -> Result<Roles, ConfigError> {
        Roles::from_config(&self.roles)
            .map_err(|e| ConfigError::Invalid(format!("[roles]: {e} (see docs/access.md)")))
    }

    /// The configuration as `redrive.toml` text, with secrets replaced by `REDACTED`: what
    /// `redrive config` prints.
    pub fn to_redacted_toml(&self) -> Result<String, ConfigError> {
        let mut shown = self.clone();
        shown.database_url = redact_url(&shown.database_url);
        shown.retention = shown.retention.redacted(REDACTED);
        if !shown.admin_password.is_empty() {
            shown.admin_password = REDACTED.to_string();
        }
        for (name, value) in shown.kafka.iter_mut() {
            if is_secret_property(name) {
                *value = REDACTED.to_string();
            }
        }
        shown.alerts = shown.alerts.redacted(REDACTED);
        if !shown.oidc.client_secret.is_empty() {
            shown.oidc.client_secret = REDACTED.to_string();
        }
        if shown.schema_registry.password.is_some() {
            shown.schema_registry.password = Some(REDACTED.to_string());
        }
        if let Some(url) = &shown.schema_registry.url {
            shown.schema_registry.url = Some(redact_url(url));
        }
        toml::to_string(&shown).map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// The replay relay's settings: the `relay_*` fields, the brokers and the `[kafka]`
    /// properties (the relay ignores the few it reserves, see `docs/replay.md`).
    pub fn relay_config(&self) -> RelayConfig {
        RelayConfig {
            brokers: self.kafka_brokers.clone(),
            kafka_properties: self.kafka_properties(),
            batch_size: self.relay_batch_size,
            lease_ms: self.relay_lease_ms,
            max_attempts: self.relay_max_attempts,
            outage_max_ms: self.relay_outage_max_ms,
            backoff_base_ms: self.relay_backoff_base_ms,
            backoff_max_ms: self.relay_backoff_max_ms,
            forward_diagnostic_headers: self.relay_forward_diagnostic_headers,
            poll_interval_ms: self.relay_poll_interval_ms,
            delivery_timeout_ms: self.relay_delivery_timeout_ms,
            max_parallel_jobs: self.relay_max_parallel_jobs,
            lag_poll_ms: self.relay_lag_poll_ms,
        }
    }

    /// `[approval]` and `[reasons]`, checked and compiled. Errors: what to change.
    pub fn approval_policy(&self) -> Result<redrive_core::approval::ApprovalPolicy, String> {
        redrive_core::approval::ApprovalPolicy::new(&self.approval, &self.reasons)
    }

    /// The Kafka properties as ingest takes them.
    pub fn kafka_properties(&self) -> Vec<(String, String)> {
        self.kafka
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// Figment's errors carry the key and the source ("for key `ingest_batch_size` in
/// environment variable(s) REDRIVE_*"); keep all of them, joined by `; `. An error inside an
/// `[[alerts.rules]]` table, whose key is a position (`alerts.rules.2.threshold`), names the
/// rule instead: ``alert rule `depth` (rule 3 of [[alerts.rules]]): `threshold`: invalid
/// type: found string "ten", expected u64 (in TOML file redrive.toml)``.
fn describe_figment_error(e: figment::Error, figment: &Figment) -> String {
    e.into_iter()
        .map(|e| describe_rule_error(&e, figment).unwrap_or_else(|| e.to_string()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The message of an error in rule `alerts.rules.N`, naming the rule by its `name`.
fn describe_rule_error(e: &figment::Error, figment: &Figment) -> Option<String> {
    let (head, rest) = e.path.split_at_checked(3)?;
    if head[0] != "alerts" || head[1] != "rules" {
        return None;
    }
    let index: usize = head[2].parse().ok()?;
    let name = figment
        .find_value("alerts.rules")
        .ok()
        .and_then(|v| v.into_array())
        .and_then(|mut rules| (index < rules.len()).then(|| rules.swap_remove(index)))
        .and_then(|r| r.find("name"))
        .and_then(|n| n.into_string());
    let rule = match name {
        Some(n) => format!("alert rule `{n}` (rule {} of [[alerts.rules]])", index + 1),
        None => format!(
            "alert rule {} of [[alerts.rules]] (it has no `name`)",
            index + 1
        ),
    };
    let field = if rest.is_empty() {
        String::new()
    } else {
        format!("`{}`: ", rest.join("."))
    };
    let source = e
        .metadata
        .as_ref()
        .map(|m| match &m.source {
            Some(src) => format!(" (in {} {src})", m.name),
            None => format!(" (in {})", m.name),
        })
        .unwrap_or_default();
    Some(format!("{rule}: {field}{}{source}", e.kind))
}

const REDACTED: &str = "REDACTED";

/// True for librdkafka properties that hold secrets (`sasl.password`,
/// `sasl.oauthbearer.client.secret`, `ssl.key.password`, `ssl.key.pem`, `sasl.jaas.config`, ...).
fn is_secret_property(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "password",
        "secret",
        "jaas",
        "token",
        "key.pem",
        "oauthbearer.config",
    ]
    .iter()
    .any(|s| n.contains(s))
}

/// Hides the password of `scheme://user:password@host/...` and a `password=` query parameter,
/// for logs, messages and `redrive config`.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                let from = rest_start + colon + 1;
                let to = rest_start + at;
                out.replace_range(from..to, REDACTED);
            }
        }
    }
    if let Some(q) = out.find('?') {
        let (base, query) = out.split_at(q + 1);
        let query = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}={REDACTED}"),
                _ => kv.to_string(),
            })
            .collect::<Vec<_>>()
            .join("&");
        out = format!("{base}{query}");
    }
    out
}

/// The `REDRIVE_*` environment as a figment provider. Figment's own `Env` parses every value
/// (`42` becomes a number, `"x"` loses its quotes), which would break a numeric group id or a
/// password; here text settings are taken verbatim and only typed ones are parsed.
struct EnvProvider {
    dict: Dict,
    ignored: Vec<String>,
}

impl EnvProvider {
    fn new(env: impl IntoIterator<Item = (String, String)>) -> EnvProvider {
        let mut dict = Dict::new();
        let mut kafka = Dict::new();
        let mut oidc = Dict::new();
        let mut ignored = Vec::new();
        for (var, raw) in env {
            let Some(rest) = var.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            let key = rest.to_ascii_lowercase();
            if let Some(prop) = key.strip_prefix("kafka__") {
                if !prop.is_empty() {
                    kafka.insert(prop.replace('_', "."), Value::from(raw));
                }
            } else if let Some(field) = key
                .strip_prefix("oidc__")
                .filter(|f| OIDC_TEXT_FIELDS.contains(f))
            {
                oidc.insert(field.to_string(), Value::from(raw));
            } else if TEXT_FIELDS.contains(&key.as_str()) {
                dict.insert(key, Value::from(raw));
            } else if TYPED_FIELDS.contains(&key.as_str()) {
                let value = raw
                    .parse::<Value>()
                    .unwrap_or_else(|_| Value::from(raw.clone()));
                dict.insert(key, value);
            } else if !is_known_non_setting(&var) {
                ignored.push(var);
            }
        }
        if !kafka.is_empty() {
            dict.insert("kafka".to_string(), Value::from(kafka));
        }
        if !oidc.is_empty() {
            dict.insert("oidc".to_string(), Value::from(oidc));
        }
        ignored.sort();
        EnvProvider { dict, ignored }
    }
}

impl Provider for EnvProvider {
    fn metadata(&self) -> Metadata {
        Metadata::named("environment variable(s) REDRIVE_*")
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Ok(Profile::Default.collect(self.dict.clone()))
    }
}

/// Lenient deserializers: the same setting arrives as TOML (typed), as an environment string
/// or as a flag.
mod de {
    use std::collections::BTreeMap;
    use std::fmt;

    use serde::de::{self, MapAccess, SeqAccess, Visitor};

    use super::Deserializer;

    /// A scalar (string, number or bool) as text: TOML `group_id = 42` is the group "42".
    struct Scalar;

    impl<'de> Visitor<'de> for Scalar {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
            Ok(v)
        }
        fn visit_char<E: de::Error>(self, v: char) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i128<E: de::Error>(self, v: i128) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u128<E: de::Error>(self, v: u128) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
            Ok(v.to_string())
        }
    }

    pub(super) fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        d.deserialize_any(Scalar)
    }

    struct ScalarSeed;

    impl<'de> de::DeserializeSeed<'de> for ScalarSeed {
        type Value = String;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
            d.deserialize_any(Scalar)
        }
    }

    /// `"a,b"` (environment, flags) or `["a", "b"]` (TOML). Entries are trimmed; empty ones
    /// dropped, so a trailing comma is harmless.
    pub(super) fn topics<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        struct Topics;
        impl<'de> Visitor<'de> for Topics {
            type Value = Vec<String>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a comma-separated string or a list of topic names and patterns")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<String>, E> {
                Ok(v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
                let mut out = Vec::new();
                while let Some(s) = seq.next_element_seed(ScalarSeed)? {
                    let s = s.trim();
                    if !s.is_empty() {
                        out.push(s.to_string());
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_any(Topics)
    }

    /// A table of librdkafka properties. TOML's dotted keys (`security.protocol = "SSL"`)
    /// arrive as nested tables and are flattened back into dotted names; values become text.
    pub(super) fn properties<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, String>, D::Error> {
        d.deserialize_any(Props)
    }

    /// One value in the property table: text, or a nested table (already flattened).
    enum Node {
        Leaf(String),
        Table(BTreeMap<String, String>),
    }

    impl<'de> serde::Deserialize<'de> for Node {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
            struct NodeVisitor;
            impl<'de> Visitor<'de> for NodeVisitor {
                type Value = Node;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a string, number, boolean or table")
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
                    Scalar.visit_str(v).map(Node::Leaf)
                }
                fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
                    Scalar.visit_bool(v).map(Node::Leaf)
                }
                fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
                    Scalar.visit_i64(v).map(Node::Leaf)
                }
                fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
                    Scalar.visit_u64(v).map(Node::Leaf)
                }
                fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
                    Scalar.visit_f64(v).map(Node::Leaf)
                }
                fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Node, A::Error> {
                    Props.visit_map(map).map(Node::Table)
                }
            }
            d.deserialize_any(NodeVisitor)
        }
    }

    struct Props;
    impl<'de> Visitor<'de> for Props {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a table of librdkafka properties")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(key) = map.next_key::<String>()? {
                match map.next_value::<Node>()? {
                    Node::Leaf(v) => {
                        out.insert(key, v);
                    }
                    Node::Table(inner) => {
                        for (k, v) in inner {
                            out.insert(format!("{key}.{k}"), v);
                        }
                    }
                }
            }
            Ok(out)
        }
    }
}

/// Default [`Config::replay_outcome_window_ms`]: 1 h.
fn default_replay_outcome_window_ms() -> u64 {
    redrive_core::outcome::DEFAULT_WINDOW_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn load(file: Option<&Path>, vars: &[(&str, &str)], o: &Overrides) -> Config {
        Config::load(file, env(vars), o).unwrap().config
    }

    /// Every field name of `Config`, from its serialised form.
    fn field_names() -> Vec<String> {
        match toml::Value::try_from(Config::default()) {
            Ok(toml::Value::Table(t)) => t.keys().cloned().collect(),
            other => panic!("Config does not serialise to a table: {other:?}"),
        }
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = load(None, &[], &Overrides::default());
        assert_eq!(c, Config::default());
        assert_eq!(c.database_url, "sqlite:redrive.db");
        assert_eq!(c.kafka_brokers, "127.0.0.1:9092");
        assert_eq!(c.group_id, "redrive");
        assert_eq!(c.listen, "127.0.0.1:3000");
        assert_eq!(c.ingest_batch_size, 500);
        assert_eq!(c.ingest_linger_ms, 50);
        assert!(c.ingest_enabled);
    }

    #[test]
    fn roles_come_from_the_file_and_bad_ones_stop_start_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redrive.toml");
        std::fs::write(
            &path,
            r#"
[roles.payments-oncall]
permissions = ["replay", "annotate"]
dlq_topics = ["payments.*", "^orders-.*-dlt$"]

[roles.operator]
dlq_topics = ["orders.DLT"]
"#,
        )
        .unwrap();
        let c = load(Some(&path), &[], &Overrides::default());
        let roles = c.roles().unwrap();
        let oncall = roles.get("payments-oncall").unwrap();
        assert!(oncall.grants(redrive_core::permission::Permission::Replay));
        assert!(!oncall.grants(redrive_core::permission::Permission::Delete));
        assert_eq!(
            roles
                .get("operator")
                .unwrap()
                .dlq_topics()
                .map(<[String]>::len),
            Some(1)
        );
        for (toml, expected) in [
            (
                "[roles.x]\npermissions = [\"replay\", \"nuke\"]\n",
                "[roles]: role `x`: `permissions`: `nuke` is not a permission",
            ),
            (
                "[roles.x]\ndlq_topics = [\"^(\"]\n",
                "[roles]: role `x`: `dlq_topics`: `^(` is not a valid regular expression",
            ),
            (
                "[roles.x]\ndlq_topics = [\"orders DLT\"]\n",
                "is not a DLQ-topic pattern",
            ),
            (
                "[roles.admin]\npermissions = [\"replay\"]\n",
                "the permissions of a built-in role are fixed",
            ),
            ("[roles.x]\ncolour = \"red\"\n", "colour"),
        ] {
            std::fs::write(&path, toml).unwrap();
            let err = Config::load(Some(&path), env(&[]), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{toml}: {err}");
        }
    }

    #[test]
    fn file_then_env_then_flags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redrive.toml");
        std::fs::write(
            &path,
            r#"
group_id = "from-file"
listen = "127.0.0.1:4000"
kafka_brokers = "file:9092"
dlq_topics = ["orders.DLT", "^.*-dlt$"]
ingest_batch_size = 100

[kafka]
security.protocol = "SASL_SSL"
"sasl.mechanism" = "PLAIN"
"socket.timeout.ms" = 5000
"#,
        )
        .unwrap();
        let c = load(
            Some(&path),
            &[
                ("REDRIVE_GROUP_ID", "42"),
                ("REDRIVE_LISTEN", "127.0.0.1:5000"),
                ("REDRIVE_INGEST_LINGER_MS", "7"),
                ("REDRIVE_KAFKA__SASL_USERNAME", "me"),
                ("REDRIVE_KAFKA__SASL_PASSWORD", "\"quoted,secret\""),
                ("OTHER", "x"),
            ],
            &Overrides {
                listen: Some("127.0.0.1:0".into()),
                ..Overrides::default()
            },
        );
        assert_eq!(c.group_id, "42");
        assert_eq!(c.listen, "127.0.0.1:0");
        assert_eq!(c.kafka_brokers, "file:9092");
        assert_eq!(c.dlq_topics, vec!["orders.DLT", "^.*-dlt$"]);
        assert_eq!(c.ingest_batch_size, 100);
        assert_eq!(c.ingest_linger_ms, 7);
        assert_eq!(c.kafka["security.protocol"], "SASL_SSL");
        assert_eq!(c.kafka["sasl.mechanism"], "PLAIN");
        assert_eq!(c.kafka["socket.timeout.ms"], "5000");
        assert_eq!(c.kafka["sasl.username"], "me");
        assert_eq!(c.kafka["sasl.password"], "\"quoted,secret\"");
    }

    #[test]
    fn oidc_from_the_file_and_its_secret_from_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redrive.toml");
        std::fs::write(
            &path,
            r#"
trusted_proxies = ["10.0.0.5"]

[oidc]
issuer_url = "https://idp.example.com/realms/ops"
client_id = "redrive"
redirect_url = "https://redrive.example.com/auth/oidc/callback"
role_mapping = { "redrive-admins" = "admin", "oncall" = "operator" }

[proxy_auth]
user_header = "X-Forwarded-User"
groups_header = "X-Forwarded-Groups"
"#,
        )
        .unwrap();
        let c = load(
            Some(&path),
            &[("REDRIVE_OIDC__CLIENT_SECRET", "s3cr=t,\"x\"")],
            &Overrides::default(),
        );
        assert_eq!(c.oidc.client_id, "redrive");
        assert_eq!(c.oidc.client_secret, "s3cr=t,\"x\"");
        assert_eq!(c.oidc.scopes, ["openid", "profile", "email", "groups"]);
        assert_eq!(c.oidc.role_mapping["oncall"], "operator");
        assert_eq!(c.proxy_auth.user_header, "X-Forwarded-User");
        let shown = c.to_redacted_toml().unwrap();
        assert!(!shown.contains("s3cr=t"), "{shown}");
        // A role that does not exist stops start-up.
        std::fs::write(&path, "[oidc]\nrole_mapping = { \"ops\" = \"root\" }\n").unwrap();
        let e = Config::load(Some(&path), Vec::new(), &Overrides::default()).unwrap_err();
        assert!(e.to_string().contains("root"), "{e}");
        // Proxy headers without a trusted proxy stop start-up.
        std::fs::write(&path, "[proxy_auth]\nuser_header = \"X-User\"\n").unwrap();
        let e = Config::load(Some(&path), Vec::new(), &Overrides::default()).unwrap_err();
        assert!(e.to_string().contains("trusted_proxies"), "{e}");
    }

    #[test]
    fn topics_from_env_are_a_comma_list() {
        let c = load(
            None,
            &[("REDRIVE_DLQ_TOPICS", " dlq_requests, ^.*\\.DLT$ ,,")],
            &Overrides::default(),
        );
        assert_eq!(c.dlq_topics, vec!["dlq_requests", "^.*\\.DLT$"]);
    }

    #[test]
    fn mistakes_are_reported_with_their_source() {
        let err = Config::load(
            None,
            env(&[("REDRIVE_INGEST_BATCH_SIZE", "lots")]),
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("ingest_batch_size"), "{err}");
        assert!(err.contains("REDRIVE_"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("typo.toml");
        std::fs::write(&path, "databse_url = \"x\"\n").unwrap();
        let err = Config::load(Some(&path), env(&[]), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("databse_url"), "{err}");

        let missing = dir.path().join("nope.toml");
        assert!(matches!(
            Config::load(Some(&missing), env(&[]), &Overrides::default()),
            Err(ConfigError::MissingFile(_))
        ));
        assert!(Config::load(
            None,
            env(&[("REDRIVE_INGEST_BATCH_SIZE", "0")]),
            &Overrides::default()
        )
        .is_err());
    }

    #[test]
    fn unknown_variables_are_reported_not_fatal() {
        let l = Config::load(
            None,
            env(&[
                ("REDRIVE_DATABSE_URL", "x"),
                ("REDRIVE_TEST_KAFKA_BROKERS", "y"),
                ("REDRIVE_CONFIG", "z"),
            ]),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(l.ignored_env, vec!["REDRIVE_DATABSE_URL"]);
    }

    #[test]
    fn the_schema_registry_table_is_read_and_its_password_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("redrive.toml");
        std::fs::write(
            &file,
            "[schema_registry]\nurl = \"http://registry:8081\"\nusername = \"u\"\n\
             password = \"hunter2\"\nschema_dirs = [\"/etc/schemas\"]\ntimeout_ms = 750\n",
        )
        .unwrap();
        let c = load(Some(&file), &[], &Overrides::default());
        let r = &c.schema_registry;
        assert_eq!(r.url.as_deref(), Some("http://registry:8081"));
        assert_eq!(r.schema_dirs, vec![PathBuf::from("/etc/schemas")]);
        assert_eq!(r.timeout_ms, Some(750));
        assert!(r.is_enabled());
        let shown = c.to_redacted_toml().unwrap();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!load(None, &[], &Overrides::default())
            .schema_registry
            .is_enabled());
    }

    #[test]
    fn secrets_are_redacted() {
        let mut c = Config {
            database_url: "postgres://redrive:s3cret@db:5432/redrive?sslmode=require&password=p"
                .into(),
            ..Config::default()
        };
        c.kafka.insert("sasl.password".into(), "hunter2".into());
        c.kafka.insert("sasl.mechanism".into(), "PLAIN".into());
        let text = c.to_redacted_toml().unwrap();
        assert!(
            !text.contains("s3cret") && !text.contains("hunter2"),
            "{text}"
        );
        assert!(
            text.contains("postgres://redrive:REDACTED@db:5432/redrive"),
            "{text}"
        );
        assert!(text.contains("password=REDACTED"), "{text}");
        assert!(text.contains("PLAIN"), "{text}");
        // What `redrive config` prints is itself a valid configuration file.
        let back: Config = toml::from_str(&text).unwrap();
        assert_eq!(back.kafka["sasl.mechanism"], "PLAIN");
        assert_eq!(redact_url("sqlite:redrive.db"), "sqlite:redrive.db");
    }

    #[test]
    fn relay_settings_reach_the_relay_and_are_checked() {
        let c = load(
            None,
            &[
                ("REDRIVE_RELAY_OUTAGE_MAX_MS", "120000"),
                ("REDRIVE_RELAY_MAX_ATTEMPTS", "3"),
                ("REDRIVE_RELAY_FORWARD_DIAGNOSTIC_HEADERS", "true"),
            ],
            &Overrides::default(),
        );
        let r = c.relay_config();
        assert_eq!(r.outage_max_ms, 120_000);
        assert_eq!(r.max_attempts, 3);
        assert!(r.forward_diagnostic_headers);
        assert_eq!(r.lease_ms, replay::default_lease_ms());
        assert_eq!(r.brokers, c.kafka_brokers);
        assert_eq!(
            Config::default().relay_config(),
            RelayConfig::default(),
            "the same defaults on both sides"
        );
        for bad in [
            ("REDRIVE_RELAY_LEASE_MS", "100"),
            ("REDRIVE_RELAY_MAX_ATTEMPTS", "0"),
            ("REDRIVE_RELAY_BACKOFF_BASE_MS", "120000"),
        ] {
            let err = Config::load(None, env(&[bad]), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains("relay"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn approval_and_reasons_tables_are_checked_at_start_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redrive.toml");
        let refused = |text: &str| {
            std::fs::write(&path, text).unwrap();
            Config::load(Some(&path), env(&[]), &Overrides::default())
                .unwrap_err()
                .to_string()
        };
        // The role-scope syntax: a glob is a pattern; a name with a space is neither.
        let e = refused("[approval]\nmin_records = 10\ndlq_topics = [\"pay ments.*\"]\n");
        assert!(
            e.contains("[approval] dlq_topics") && e.contains("pay ments.*"),
            "{e}"
        );
        let e = refused("[approval]\nmin_records = 10\nexpire_after_ms = 0\n");
        assert!(e.contains("expire_after_ms"), "{e}");
        let e = refused("[approval]\nmin_record = 10\n");
        assert!(e.contains("min_record"), "{e}");
        let e = refused("[approval]\nmin_records = 10\nactions = [\"purge\"]\n");
        assert!(e.contains("purge"), "{e}");
        let e = refused("[reasons]\nrequired = true\npattern = '^[A-Z+-\\d+'\n");
        assert!(e.contains("[reasons] pattern"), "{e}");

        std::fs::write(
            &path,
            "[approval]\nmin_records = 10\ndlq_topics = ['^payments\\..*$', 'orders.DLT']\n\
             expire_after_ms = 60000\n\n[reasons]\nrequired = true\npattern = '^[A-Z]+-\\d+'\n",
        )
        .unwrap();
        let c = load(Some(&path), &[], &Overrides::default());
        assert_eq!(c.approval.min_records, 10);
        assert_eq!(c.approval.expire_after_ms, 60_000);
        let policy = c.approval_policy().unwrap();
        assert!(policy.approval_on());
        assert_eq!(policy.reason_pattern(), Some(r"^[A-Z]+-\d+"));
        let printed = c.to_redacted_toml().unwrap();
        assert!(
            printed.contains("[approval]") && printed.contains("[reasons]"),
            "{printed}"
        );
        assert!(!load(None, &[], &Overrides::default())
            .approval_policy()
            .unwrap()
            .approval_on());
    }

    #[test]
    fn the_automation_table_is_checked_at_start_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redrive.toml");
        std::fs::write(
            &path,
            "[automation]\ndefault_tier = \"manual\"\n\n[[automation.rule]]\nname = \"t\"\n\
             tier = \"transient\"\nmatch.error_classes = [\"*Timeout*\"]\n\
             schedule = { every = \"5m\" }\n",
        )
        .unwrap();
        let c = load(Some(&path), &[], &Overrides::default());
        let (text, set) = c.automation.rule_set().unwrap().expect("a rule set");
        assert_eq!(set.rules[0].name, "t");
        // The text is the UI's (no `automation.` prefix) and reads back to the same spec.
        assert!(text.contains("[[rule]]"), "{text}");
        let again = redrive_core::automation::RuleSet::parse_toml(&text).unwrap();
        assert_eq!(again.spec, set.spec);
        assert!(c
            .to_redacted_toml()
            .unwrap()
            .contains("[[automation.rule]]"));

        std::fs::write(
            &path,
            "[[automation.rule]]\nname = \"m\"\ntier = \"manual\"\nschedule = {}\n",
        )
        .unwrap();
        let e = Config::load(Some(&path), env(&[]), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("[automation]") && e.contains("only a transient rule"),
            "{e}"
        );
        assert!(load(None, &[], &Overrides::default())
            .automation
            .rule_set()
            .unwrap()
            .is_none());
    }

    #[test]
    fn every_field_has_an_environment_kind() {
        for name in field_names() {
            // Tables read from the file (`kafka` also from REDRIVE_KAFKA__*, `oidc` from
            // REDRIVE_OIDC__*).
            if matches!(
                name.as_str(),
                "kafka"
                    | "alerts"
                    | "retention"
                    | "roles"
                    | "approval"
                    | "reasons"
                    | "oidc"
                    | "proxy_auth"
                    | "automation"
                    | "schema_registry"
            ) {
                continue;
            }
            assert!(
                TEXT_FIELDS.contains(&name.as_str()) || TYPED_FIELDS.contains(&name.as_str()),
                "`{name}` is in neither TEXT_FIELDS nor TYPED_FIELDS"
            );
        }
    }

    #[test]
    fn the_example_file_is_a_valid_configuration() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../redrive.toml.example");
        let c = load(Some(&path), &[], &Overrides::default());
        assert_eq!(c.dlq_topics, vec!["orders.DLT", "dlq_requests", "^.*-dlt$"]);
        assert_eq!(c.listen, default_listen());
    }

    #[test]
    fn every_field_is_documented_in_docs_configuration_md() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
        let doc = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        for name in field_names() {
            assert!(
                doc.contains(&format!("| `{name}` |")),
                "docs/configuration.md has no table row for `{name}`"
            );
            if name != "kafka" {
                let var = format!("`REDRIVE_{}`", name.to_ascii_uppercase());
                assert!(
                    doc.contains(&var),
                    "docs/configuration.md does not mention {var}"
                );
            }
        }
    }
}
