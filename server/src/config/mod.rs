//! redrive's configuration: ONE documented struct, read once at start-up.
//!
//! Sources, later ones winning: built-in defaults < `redrive.toml` (or `--config PATH`) <
//! `REDRIVE_*` environment variables < command-line flags. Each field's doc comment below is
//! its user documentation; `docs/configuration.md` carries the same table for readers of the
//! repository, and a test keeps the two in step.
//!
//! The struct and its defaults are here ([`Config`], `defaults`); the rest is split by what it
//! does: `load` (sources merged, checked, `ConfigError`, `Overrides`, `Loaded`, and what the
//! rest of the server derives from a `Config`), `env` (the `REDRIVE_*` provider), `de` (the
//! lenient deserializers), `redact` (secrets hidden for logs and `redrive config`),
//! `automation` (the `[automation]` table).

mod automation;
mod de;
mod defaults;
mod env;
mod load;
mod redact;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use redrive_core::alerts::AlertsConfig;
use redrive_core::permission::RoleConfig;
use redrive_core::replay;
use serde::{Deserialize, Serialize};

pub use automation::AutomationTable;
use defaults::*;
pub use load::{Loaded, Overrides};
pub use redact::redact_url;

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
    /// Port `0` picks a free port; stdout says which (`listening on http://ADDR`).
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
