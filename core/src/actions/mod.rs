//! Actions on dead letters — replay, delete, restore — and what they leave behind: replay jobs,
//! outbox items, the append-only audit trail and each dead letter's history.
//!
//! Every action is ONE store transaction: the state change, its audit row, its history events
//! and (for a replay) one outbox row per dead letter, each with a fresh idempotency key
//! (`docs/invariants.md`, invariants 3–5). The replay relay publishes from the outbox afterwards.

use serde::{Deserialize, Serialize};

use crate::filter::{parse_time, Filter};

pub use crate::permission::Role;

mod audit_actions;
mod job;

pub use audit_actions::{audit_action_label, AUDIT_ACTIONS};
pub use job::{JobLag, JobQueueing, JobStatus, ReplayJob, TransformCounts};

/// Who is acting, and from where: written into every audit row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// User name (a token acts as its user; `via_token` tells them apart).
    pub user: String,
    /// The user's role as resolved when the request was authenticated: its name (what the
    /// UI and logs show), the permissions it grants and its DLQ-topic scope
    /// (`crate::permission`). Check powers with [`Actor::can`], never by comparing roles.
    pub role: Role,
    /// The API token's id when the request came with a Bearer token.
    pub via_token: Option<i64>,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
    /// True for a `read_only` API token ([`crate::auth::TokenScope::ReadOnly`]): it reads,
    /// and holds no permission whatsoever, whatever `role` is ([`Actor::can`]).
    #[serde(default)]
    pub read_only: bool,
}

impl Actor {
    /// `user` acting with `role` from a signed-in session: no API token, no client address or
    /// user agent recorded, not read-only. The shape of every actor that is not an HTTP request
    /// (CLI commands, config reloads, automation rules, tests, benches); a request's actor adds
    /// its token, address and user agent (`with_client`, or struct update syntax).
    pub fn new(user: impl Into<String>, role: Role) -> Actor {
        Actor {
            user: user.into(),
            role,
            via_token: None,
            client_ip: None,
            user_agent: None,
            read_only: false,
        }
    }

    /// [`Actor::new`] with the built-in [`Role::Operator`] (every permission but `manage_users`).
    pub fn operator(user: impl Into<String>) -> Actor {
        Actor::new(user, Role::Operator)
    }

    /// [`Actor::new`] with the built-in [`Role::Admin`] (every permission).
    pub fn admin(user: impl Into<String>) -> Actor {
        Actor::new(user, Role::Admin)
    }

    /// This actor as seen from client address `client_ip` (IPv4 or IPv6, as the audit trail
    /// shows it) with HTTP `User-Agent` `user_agent`.
    pub fn with_client(self, client_ip: impl Into<String>, user_agent: impl Into<String>) -> Actor {
        Actor {
            client_ip: Some(client_ip.into()),
            user_agent: Some(user_agent.into()),
            ..self
        }
    }
}

/// Which dead letters an action applies to: explicit ids, or everything matching a filter
/// (evaluated inside the action's transaction, so the count audited is the count acted on).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
// A filter is larger than a list of ids since it carries a DLQ-topic scope; a selection is
// made once per request, so the size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Selection {
    Ids(Vec<i64>),
    Filter(Filter),
}

/// A replay request. `target_topic: None` means each record's own source topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayRequest {
    pub selection: Selection,
    pub target_topic: Option<String>,
    /// Throttle, msgs/s; `None` = as fast as the relay goes.
    pub rate_per_sec: Option<u32>,
    pub reason: Option<String>,
    /// How the relay publishes this job beyond target and rate (canary, transform, order,
    /// placement, lag gate); every option off by default. Stored with the job.
    #[serde(default)]
    pub options: ReplayOptions,
}

/// A replay job's publishing options, stored with the job as JSON (`replay_jobs.options`)
/// and read by the relay with each claim. `{}` (the default) is a plain replay: per-key
/// order, partition by the producer's key hash, no canary, no transform.
///
/// Unknown fields are refused (a typo in an API request is a 422, not an ignored option).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplayOptions {
    /// Transform on replay: a Rhai script run on each record before it is published, which
    /// returns the record to publish (changed or not) or skips it (`docs/replay.md`,
    /// "Transform on replay"). `None` = records are published as stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transform: Option<TransformOptions>,
    /// Turns per-key order off. By default (`false`) records with the same target topic and
    /// key are published one at a time in source order: a record is not sent while an
    /// earlier one of its key in the job is not yet published (retrying, claimed, in
    /// flight); when one fails for good the later ones of its key fail with it instead of
    /// overtaking it. Null keys carry no order. `true`: every record is independent (the
    /// relay's full batch parallelism). `docs/replay.md`, "Per-key order".
    #[serde(skip_serializing_if = "is_false")]
    pub unordered: bool,
    /// Publish each record to the partition it came from (`source_partition`, as the
    /// convention decoded it) instead of letting the producer pick one by key hash. A record
    /// whose partition the target topic does not have (or whose partition is unknown) fails
    /// with a message naming the partition and the target's partition count: it is never
    /// remapped. `docs/replay.md`, "Original partition".
    #[serde(skip_serializing_if = "is_false")]
    pub original_partition: bool,
    /// Canary replay: publish the first records alone, wait, and pause the job by itself if
    /// too many of them come back as dead letters (`docs/replay.md`, "Canary replay").
    /// `None` = no canary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryOptions>,
    /// Lag-aware replay: the consumer group that reads the target topic(s), and the most
    /// records it may be behind. The relay reads the group's lag on the job's target topics
    /// every `relay_lag_poll_ms` and claims nothing while it is at or over `max_lag`;
    /// below, at most `max_lag - lag` records per reading. A lag that cannot be read holds
    /// the job too (never published blind). `None` = no gate. `docs/replay.md`,
    /// "Lag-aware replay".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag_gate: Option<LagGate>,
}

/// A replay's lag gate (`ReplayOptions::lag_gate`, `docs/replay.md`, "Lag-aware replay").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LagGate {
    /// The consumer group's id (`group.id`), 1 to [`MAX_GROUP_ID_BYTES`] bytes, no control
    /// characters, no leading or trailing space. redrive only reads its committed offsets; it
    /// never joins the group.
    pub group: String,
    /// The most records the group may be behind on the job's target topics (Σ over their
    /// partitions of high watermark − committed offset), records, at least 1.
    pub max_lag: u64,
}

/// Longest accepted consumer group id, bytes (Kafka itself has no tighter rule; the limit
/// keeps a typo'd paste out of the job row).
pub const MAX_GROUP_ID_BYTES: usize = 255;

impl LagGate {
    /// Checks the group id and the limit. Errors: what to change.
    pub fn check(&self) -> Result<(), String> {
        let g = &self.group;
        if g.trim().is_empty() {
            return Err(
                "the lag gate's consumer group is empty; name the group that reads \
                        the target topic, or give no lag gate"
                    .into(),
            );
        }
        if g.len() > MAX_GROUP_ID_BYTES {
            return Err(format!(
                "the lag gate's consumer group is {} bytes; at most {MAX_GROUP_ID_BYTES}",
                g.len()
            ));
        }
        if g.trim() != g {
            return Err(format!(
                "the lag gate's consumer group `{g}` starts or ends with a space; a group id \
                 is matched exactly, so give it without"
            ));
        }
        if g.chars().any(char::is_control) {
            return Err(
                "the lag gate's consumer group contains a control character; not a group id".into(),
            );
        }
        if self.max_lag == 0 {
            return Err(
                "the lag gate's max_lag must be at least 1 record (0 would never publish)".into(),
            );
        }
        if self.max_lag > i64::MAX as u64 {
            return Err(format!(
                "the lag gate's max_lag must be at most {} records",
                i64::MAX
            ));
        }
        Ok(())
    }
}

/// serde's `skip_serializing_if` for flags that are off: a plain job's options stay `{}`.
fn is_false(b: &bool) -> bool {
    !*b
}

/// A replay's transform: the script and its per-record limits (`docs/replay.md`). Checked
/// (compiled) when the replay is requested; the script is stored with the job, its SHA-256
/// in the audit row and on the job page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransformOptions {
    /// The Rhai script's text, at most [`MAX_TRANSFORM_SCRIPT_BYTES`] bytes of UTF-8.
    pub script: String,
    /// Wall-clock limit per record, ms ([`TRANSFORM_TIME_LIMIT_MS`] when absent; 1 to
    /// [`MAX_TRANSFORM_TIME_LIMIT_MS`]). A record that takes longer fails with the reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit_ms: Option<u32>,
    /// Rhai operations per record (roughly one per expression node, variable read, call or
    /// loop iteration; [`TRANSFORM_MAX_OPERATIONS`] when absent; 1,000 to
    /// [`MAX_TRANSFORM_OPERATIONS`]). A record that needs more fails with the reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_operations: Option<u64>,
}

pub use crate::canary::{
    CanaryOptions, CanaryState, CanaryStatus, Percent, CANARY_WAIT_MS, MAX_CANARY_RECORDS,
    MAX_CANARY_WAIT_MS, MIN_CANARY_WAIT_MS,
};

/// Longest accepted transform script, bytes of UTF-8 (it travels in the confirmation page's
/// URL, and a transform is meant to be small).
pub const MAX_TRANSFORM_SCRIPT_BYTES: usize = 8 * 1024;
/// Default wall-clock limit of a transform per record, ms.
pub const TRANSFORM_TIME_LIMIT_MS: u32 = 100;
/// Highest accepted `time_limit_ms`, ms.
pub const MAX_TRANSFORM_TIME_LIMIT_MS: u32 = 10_000;
/// Default operation limit of a transform per record.
pub const TRANSFORM_MAX_OPERATIONS: u64 = 1_000_000;
/// Lowest accepted `max_operations`.
pub const MIN_TRANSFORM_OPERATIONS: u64 = 1_000;
/// Highest accepted `max_operations`.
pub const MAX_TRANSFORM_OPERATIONS: u64 = 1_000_000_000;

impl TransformOptions {
    /// The per-record wall-clock limit in effect, ms.
    pub fn time_limit_ms(&self) -> u32 {
        self.time_limit_ms.unwrap_or(TRANSFORM_TIME_LIMIT_MS)
    }

    /// The per-record operation limit in effect.
    pub fn max_operations(&self) -> u64 {
        self.max_operations.unwrap_or(TRANSFORM_MAX_OPERATIONS)
    }

    /// SHA-256 of the script's UTF-8 bytes, 64 lowercase hex digits: what the audit row and
    /// the job page show to identify the script.
    pub fn script_sha256(&self) -> String {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(self.script.as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Checks the sizes and limits (not the script's syntax: that needs the engine, see
    /// `redrive_core::replay::transform::Transform::compile`). Errors: what to change.
    pub fn check_limits(&self) -> Result<(), String> {
        if self.script.trim().is_empty() {
            return Err("the transform script is empty; give a script, or no transform".into());
        }
        if self.script.len() > MAX_TRANSFORM_SCRIPT_BYTES {
            return Err(format!(
                "the transform script is {} bytes; at most {MAX_TRANSFORM_SCRIPT_BYTES} bytes",
                self.script.len()
            ));
        }
        if let Some(t) = self.time_limit_ms {
            if t == 0 || t > MAX_TRANSFORM_TIME_LIMIT_MS {
                return Err(format!(
                    "the transform's time_limit_ms must be from 1 to \
                     {MAX_TRANSFORM_TIME_LIMIT_MS} ms (got {t})"
                ));
            }
        }
        if let Some(n) = self.max_operations {
            if !(MIN_TRANSFORM_OPERATIONS..=MAX_TRANSFORM_OPERATIONS).contains(&n) {
                return Err(format!(
                    "the transform's max_operations must be from {MIN_TRANSFORM_OPERATIONS} \
                     to {MAX_TRANSFORM_OPERATIONS} (got {n})"
                ));
            }
        }
        Ok(())
    }
}

impl ReplayOptions {
    /// The JSON stored in `replay_jobs.options`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }

    /// Parses `replay_jobs.options`; an empty text is the default.
    ///
    /// Errors: the serde message, for a stored value this version cannot read.
    pub fn from_json(text: &str) -> Result<ReplayOptions, String> {
        if text.trim().is_empty() {
            return Ok(ReplayOptions::default());
        }
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// Whether a replay over a filter with these options is published while its chunks are
    /// still queueing it (`store/bulk/`, `docs/replay.md` "Publishing while queueing"): true
    /// when nothing needs the whole outbox first. Per-key order does (a later chunk may hold
    /// a record that comes before a key's head from an earlier chunk), and so does a canary
    /// (its size is a share of the job's final total). Such a job is `running` from its
    /// first chunk, which writes a `replay_started` audit row; the last chunk writes the
    /// `replay` row with the final count as for any bulk action.
    pub fn publishes_while_queueing(&self) -> bool {
        self.unordered && self.canary.is_none()
    }
}

/// What a replay would do, shown before "replay all matching" acts.
///
/// `total = per_target counts + without_target + skipped`; the replay queues exactly
/// [`DryRun::queued`] of them (barring changes in between).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DryRun {
    /// Dead letters selected (every status the selection matches).
    pub total: i64,
    /// (target topic, count) of the dead letters a replay would queue, largest first
    /// (ties by topic name).
    pub per_target: Vec<(String, i64)>,
    /// Replayable dead letters without a source topic and no override: they cannot go
    /// "to source", and a replay skips them.
    pub without_target: i64,
    /// Selected dead letters a replay skips because they are `deleted` or already
    /// `replay_pending` (in another job's outbox).
    #[serde(default)]
    pub skipped: i64,
    /// Selected dead letters the loop guard took out of automation (`docs/automation.md`,
    /// "Escalation and loop guard"): replaying them by hand needs the `approve` permission
    /// and a reason.
    #[serde(default)]
    pub loop_guarded: i64,
    /// (status, count) of the selected dead letters, in [`Status::ALL`]'s order, only the
    /// statuses present: what a replay "of all matching" takes besides `new` ones (a filter
    /// without `status` takes every status but `deleted` and `replay_pending`).
    #[serde(default)]
    pub per_status: Vec<(crate::model::Status, i64)>,
}

impl DryRun {
    /// How many dead letters a replay of this selection would queue.
    pub fn queued(&self) -> i64 {
        self.per_target.iter().map(|(_, n)| n).sum()
    }
}

/// One entry of the append-only audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at_ms: i64,
    /// User name, or `-` for an anonymous failed sign-in.
    pub actor: String,
    /// One of [`AUDIT_ACTIONS`]: e.g. `replay`, `delete`, `sign_in`, `token_create`.
    pub action: String,
    /// How many dead letters it touched (0 for non-dead-letter actions).
    pub count: i64,
    /// The ids acted on, when given as ids (JSON array text), else `None`.
    pub ids: Option<String>,
    /// The filter acted on, when given as a filter (JSON text), else `None`.
    pub filter: Option<String>,
    pub reason: Option<String>,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
    /// `ok`, `denied`, `failed: ...`; a replay's says how many were queued and skipped
    /// (`ok: 998 queued, 2 skipped (1 without a target topic)`) and `job_id` names the job.
    pub outcome: String,
    pub job_id: Option<String>,
    /// The API token's id when the actor used a Bearer token.
    #[serde(default)]
    pub via_token: Option<i64>,
    /// What the change was beyond its selection, JSON text: a label change's
    /// `{"target", "label", "before", "after"}`, a note's `{"target", "before", "after"}`, an
    /// export's `{"rows"}` (migration 0009). `None` for other actions.
    #[serde(default)]
    pub detail: Option<String>,
}

/// An audit row to append with `Store::record_audit` (sign-ins, user and token changes, denied
/// attempts, ...). The dead-letter actions write their own rows inside their transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewAuditEntry {
    /// User name, or `-` when unknown (e.g. a failed sign-in for no such user).
    pub actor: String,
    /// One of [`AUDIT_ACTIONS`]: e.g. `sign_in`, `user_add`, `token_create`.
    pub action: String,
    /// `ok`, `denied`, `failed: ...`.
    pub outcome: String,
    /// How many dead letters it concerned (0 for non-dead-letter actions).
    pub count: i64,
    /// JSON array text of ids, if any.
    pub ids: Option<String>,
    /// JSON object text of a filter, if any.
    pub filter: Option<String>,
    pub reason: Option<String>,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
    pub job_id: Option<String>,
    pub via_token: Option<i64>,
    /// JSON text: what changed, before and after (see [`AuditEntry::detail`]).
    pub detail: Option<String>,
}

impl NewAuditEntry {
    /// A row for `actor` doing `action` with `outcome`, carrying the actor's IP, user agent and
    /// token id; other fields empty.
    pub fn by(actor: &Actor, action: &str, outcome: &str) -> NewAuditEntry {
        NewAuditEntry {
            actor: actor.user.clone(),
            action: action.to_string(),
            outcome: outcome.to_string(),
            client_ip: actor.client_ip.clone(),
            user_agent: actor.user_agent.clone(),
            via_token: actor.via_token,
            ..NewAuditEntry::default()
        }
    }
}

/// Filters of the audit page and `GET /api/v1/audit` (query names: `actor`, `action`, `from`,
/// `to`, `limit`, `cursor`). `actor` and `action` match exactly; `from_ms` is inclusive,
/// `to_ms` exclusive; `limit` 0 means [`AUDIT_DEFAULT_LIMIT`], above [`AUDIT_MAX_LIMIT`] it is
/// capped. A page's `next_cursor` is the decimal id to pass as `before_id`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditQuery {
    pub actor: Option<String>,
    pub action: Option<String>,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    pub limit: u32,
    /// Show entries with an id below this (keyset on id DESC).
    pub before_id: Option<i64>,
}

impl AuditQuery {
    /// Parses the audit query (`actor`, `action` (exact), `from`, `to` (the list's time forms,
    /// see [`crate::filter::parse_time`]), `limit` (1 to [`AUDIT_MAX_LIMIT`]), `cursor` (a
    /// previous page's `next_cursor`)), shared by the audit page and `GET /api/v1/audit` so both
    /// accept exactly the same. Empty values are unset; unknown or repeated names are errors,
    /// whose message says what to send instead.
    pub fn from_pairs<'a, I>(pairs: I) -> Result<AuditQuery, String>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut q = AuditQuery::default();
        let mut seen: Vec<&str> = Vec::new();
        for (k, v) in pairs {
            if seen.contains(&k) {
                return Err(format!("`{k}` is given twice; give it once"));
            }
            seen.push(k);
            let v = v.trim();
            if v.is_empty() {
                continue;
            }
            match k {
                "actor" => q.actor = Some(v.to_string()),
                "action" if !AUDIT_ACTIONS.contains(&v) => {
                    return Err(format!(
                        "no audit action is called `{v}`; the actions: {}",
                        AUDIT_ACTIONS.join(", ")
                    ))
                }
                "action" => q.action = Some(v.to_string()),
                "from" => q.from_ms = Some(parse_time("from", v).map_err(|e| e.to_string())?),
                "to" => q.to_ms = Some(parse_time("to", v).map_err(|e| e.to_string())?),
                "limit" => {
                    q.limit = v
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (1..=AUDIT_MAX_LIMIT).contains(n))
                        .ok_or_else(|| {
                            format!("`limit` must be a whole number from 1 to {AUDIT_MAX_LIMIT}")
                        })?
                }
                "cursor" => {
                    q.before_id = Some(v.parse::<i64>().map_err(|_| {
                        "`cursor` is not valid: pass a previous page's `next_cursor`".to_string()
                    })?)
                }
                other => {
                    return Err(format!(
                        "unknown parameter `{other}`; the audit takes actor, action, from, to, \
                         limit and cursor"
                    ))
                }
            }
        }
        if let (Some(a), Some(b)) = (q.from_ms, q.to_ms) {
            if a >= b {
                return Err("`from` must be before `to`".to_string());
            }
        }
        Ok(q)
    }
}

/// Audit page size when none is asked for.
pub const AUDIT_DEFAULT_LIMIT: u32 = 50;
/// Largest audit page (CSV export pages through).
pub const AUDIT_MAX_LIMIT: u32 = 1000;

/// Most jobs `Store::jobs` returns.
pub const MAX_JOBS_LIMIT: u32 = 500;

/// Longest accepted action reason, in characters.
pub const MAX_REASON_CHARS: usize = 2000;
/// Highest accepted replay rate, msgs/s.
pub const MAX_RATE_PER_SEC: u32 = 1_000_000;

/// True if `name` is a legal Kafka topic name: 1 to 249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// One event in a dead letter's own history (detail page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    pub at_ms: i64,
    /// `ingested`, `replay_requested`, `published`, `replay_failed`, `re_failed`, `replay_cancelled`,
    /// `replay_skipped`, `edited`, `deleted`, `restored`, `archive_restored`, `tier_assigned`,
    /// `tier_moved`, `label_added`, `label_removed`, `note_set`, `note_cleared`, and the group's
    /// triage kinds prefixed `group_` (the UI's wording for each: `app/src/components/history.rs`).
    pub kind: String,
    pub actor: Option<String>,
    /// e.g. `orders partition 2 offset 1234`, an error, or the reason.
    pub detail: Option<String>,
    pub job_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_options_default_is_empty_json_and_unknown_fields_are_refused() {
        assert_eq!(ReplayOptions::default().to_json(), "{}");
        assert_eq!(ReplayOptions::from_json(""), Ok(ReplayOptions::default()));
        assert_eq!(ReplayOptions::from_json("{}"), Ok(ReplayOptions::default()));
        let e = ReplayOptions::from_json(r#"{"canary_percnt": 1}"#).unwrap_err();
        assert!(e.contains("canary_percnt"), "{e}");
    }
}
