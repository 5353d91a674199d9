//! The `REDRIVE_*` environment as a figment provider: which variables are settings, which
//! are taken verbatim, which are parsed, which are ignored.

use figment::value::{Dict, Map, Value};
use figment::{Metadata, Profile, Provider};

use super::ENV_PREFIX;

/// Fields whose environment value is taken verbatim as text (never parsed as a number or a
/// list), so that `REDRIVE_GROUP_ID=42` is the group "42" and a password keeps its quotes.
pub(super) const TEXT_FIELDS: &[&str] = &[
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
pub(super) const OIDC_TEXT_FIELDS: &[&str] = &[
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
pub(super) const TYPED_FIELDS: &[&str] = &[
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
pub(super) fn is_known_non_setting(var: &str) -> bool {
    matches!(
        var,
        "REDRIVE_CONFIG" | "REDRIVE_CACHE" | "REDRIVE_SERVER" | "REDRIVE_TOKEN"
    ) || var.starts_with("REDRIVE_TEST_")
}

/// The `REDRIVE_*` environment as a figment provider. Figment's own `Env` parses every value
/// (`42` becomes a number, `"x"` loses its quotes), which would break a numeric group id or a
/// password; here text settings are taken verbatim and only typed ones are parsed.
pub(super) struct EnvProvider {
    dict: Dict,
    pub(super) ignored: Vec<String>,
}

impl EnvProvider {
    pub(super) fn new(env: impl IntoIterator<Item = (String, String)>) -> EnvProvider {
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
