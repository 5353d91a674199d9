//! Loading: the sources merged (defaults < file < environment < flags), the result checked,
//! and what the rest of the server derives from a [`Config`].

use std::path::{Path, PathBuf};

use figment::providers::{Format, Serialized, Toml};
use figment::Figment;
use redrive_core::permission::Roles;
use redrive_core::replay::RelayConfig;
use serde::Serialize;

use super::env::EnvProvider;
use super::redact::{is_secret_property, redact_url, REDACTED};
use super::{Config, DEFAULT_CONFIG_FILE};

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
pub(super) fn describe_figment_error(e: figment::Error, figment: &Figment) -> String {
    e.into_iter()
        .map(|e| describe_rule_error(&e, figment).unwrap_or_else(|| e.to_string()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The message of an error in rule `alerts.rules.N`, naming the rule by its `name`.
pub(super) fn describe_rule_error(e: &figment::Error, figment: &Figment) -> Option<String> {
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
