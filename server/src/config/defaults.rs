//! The built-in default of each top-level setting (`serde(default = ...)` of [`super::Config`]).

pub(super) fn default_database_url() -> String {
    "sqlite:redrive.db".to_string()
}

pub(super) fn default_database_wait_ms() -> u64 {
    60_000
}

pub(super) fn default_kafka_brokers() -> String {
    "127.0.0.1:9092".to_string()
}

pub(super) fn default_dlq_topics() -> Vec<String> {
    vec![
        r"^.*[._-]([Dd][Ll][Tt]|[Dd][Ll][Qq])$".to_string(),
        r"^([Dd][Ll][Qq])[._-].+$".to_string(),
        r"^dead-letter-topic-.+$".to_string(),
        r"^error\..+$".to_string(),
    ]
}

pub(super) fn default_group_id() -> String {
    "redrive".to_string()
}

pub(super) fn default_ingest_enabled() -> bool {
    true
}

pub(super) fn default_ingest_batch_size() -> usize {
    500
}

pub(super) fn default_ingest_linger_ms() -> u64 {
    50
}

pub(super) fn default_listen() -> String {
    "127.0.0.1:3000".to_string()
}

pub(super) fn default_site_root() -> String {
    "target/site".to_string()
}

pub(super) fn default_request_timeout_ms() -> u64 {
    30_000
}

pub(super) fn default_http_header_read_timeout_ms() -> u64 {
    10_000
}

pub(super) fn default_http_max_connections() -> usize {
    1024
}

pub(super) fn default_sign_in_per_user_global_per_min() -> u32 {
    100
}

pub(super) fn default_shutdown_timeout_ms() -> u64 {
    30_000
}

pub(super) fn default_log() -> String {
    "info".to_string()
}

pub(super) fn default_session_idle_timeout_ms() -> u64 {
    8 * 60 * 60 * 1000
}

pub(super) fn default_session_absolute_timeout_ms() -> u64 {
    7 * 24 * 60 * 60 * 1000
}

pub(super) fn default_sign_in_per_user_per_min() -> u32 {
    5
}

pub(super) fn default_sign_in_per_ip_per_min() -> u32 {
    20
}

/// Default [`Config::replay_outcome_window_ms`](super::Config::replay_outcome_window_ms): 1 h.
pub(super) fn default_replay_outcome_window_ms() -> u64 {
    redrive_core::outcome::DEFAULT_WINDOW_MS
}
