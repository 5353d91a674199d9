//! Four-eyes approval and required reasons (issue 10, item 4; `docs/replay.md`, "Four-eyes
//! approval and required reasons").
//!
//! - **Approval.** With `[approval]` configured, a replay, delete or restore over at least
//!   `min_records` dead letters, or touching a dead letter of one of the `dlq_topics`, is not
//!   carried out when asked: it becomes a pending [`ApprovalRequest`] (the whole request, its
//!   selection bounded to what the requester saw, the count and per-DLQ-topic breakdown at
//!   request time). Another user holding [`crate::permission::Permission::Approve`] approves it
//!   (then the action runs as if the requester had made it directly, its audit row naming
//!   both) or declines it (nothing is written but the audit row). The requester may cancel it;
//!   it expires after `expire_after_ms`.
//! - **Reasons.** With `[reasons] required = true` a replay, delete, restore or edit without a
//!   reason is refused; with a `pattern`, a reason that does not match it is refused
//!   ([`ApprovalPolicy::check_reason`]).
//!
//! [`ApprovalConfig`] and [`ReasonsConfig`] are the `redrive.toml` tables; [`ApprovalPolicy`]
//! is both, checked and compiled once at start-up.

use serde::{Deserialize, Serialize};

use crate::actions::{Actor, ReplayRequest};
use crate::permission::TopicPattern;

/// Default [`ApprovalConfig::expire_after_ms`]: 24 h.
pub const DEFAULT_EXPIRE_AFTER_MS: u64 = 86_400_000;
/// Shortest accepted [`ApprovalConfig::expire_after_ms`], ms.
pub const MIN_EXPIRE_AFTER_MS: u64 = 1_000;
/// Longest accepted [`ApprovalConfig::expire_after_ms`], ms (30 days).
pub const MAX_EXPIRE_AFTER_MS: u64 = 30 * 86_400_000;
/// Most requests one list returns.
pub const MAX_REQUESTS_LISTED: u32 = 500;

/// An action four-eyes approval can apply to; `snake_case` in `redrive.toml` and the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    Replay,
    Delete,
    Restore,
}

impl ActionKind {
    pub const ALL: [ActionKind; 3] = [ActionKind::Replay, ActionKind::Delete, ActionKind::Restore];

    /// `replay`, `delete`, `restore` (also the audit action of the action itself).
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::Replay => "replay",
            ActionKind::Delete => "delete",
            ActionKind::Restore => "restore",
        }
    }

    /// Parses [`Self::as_str`]'s names.
    pub fn parse(s: &str) -> Option<ActionKind> {
        ActionKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// The `[approval]` table of `redrive.toml` (file only). Approval is off when `min_records`
/// is 0 and `dlq_topics` is empty (the default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalConfig {
    /// An action over at least this many dead letters (those it would change, counted when
    /// it is asked for) needs approval. 0 = no threshold.
    pub min_records: u64,
    /// Any action touching a dead letter of one of these DLQ topics needs approval, whatever
    /// its size. The syntax of a role's topic scope ([`TopicPattern`]): an exact topic name,
    /// a glob with `*` (`payments.*`), or a regular expression starting with `^`.
    pub dlq_topics: Vec<String>,
    /// A pending request expires this long after it was made, ms (1,000 to 30 days; default
    /// 86,400,000 = 24 h). An expired request cannot be approved.
    pub expire_after_ms: u64,
    /// Which actions approval applies to (default all: `replay`, `delete`, `restore`).
    pub actions: Vec<ActionKind>,
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        ApprovalConfig {
            min_records: 0,
            dlq_topics: Vec::new(),
            expire_after_ms: DEFAULT_EXPIRE_AFTER_MS,
            actions: ActionKind::ALL.to_vec(),
        }
    }
}

/// The `[reasons]` table of `redrive.toml` (file only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReasonsConfig {
    /// A replay, delete, restore or edit without a reason is refused (422).
    pub required: bool,
    /// A regular expression a given reason must match (searched, so anchor it with `^` to
    /// match from the start: `^[A-Z]+-\d+` for a ticket id). Empty = any reason.
    pub pattern: Option<String>,
}

/// [`ApprovalConfig`] and [`ReasonsConfig`], checked and compiled. `Default` is "no approval,
/// no reason required".
#[derive(Debug, Clone, Default)]
pub struct ApprovalPolicy {
    min_records: u64,
    topics: Vec<TopicPattern>,
    expire_after_ms: u64,
    actions: Vec<ActionKind>,
    reason_required: bool,
    reason_pattern: Option<(String, regex::Regex)>,
}

impl ApprovalPolicy {
    /// Checks and compiles the two tables. Errors: what to change, naming the key.
    pub fn new(a: &ApprovalConfig, r: &ReasonsConfig) -> Result<ApprovalPolicy, String> {
        let mut topics = Vec::with_capacity(a.dlq_topics.len());
        for t in a
            .dlq_topics
            .iter()
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
        {
            topics
                .push(TopicPattern::parse(t).map_err(|e| format!("`[approval] dlq_topics`: {e}"))?);
        }
        let on = a.min_records > 0 || !topics.is_empty();
        if !(MIN_EXPIRE_AFTER_MS..=MAX_EXPIRE_AFTER_MS).contains(&a.expire_after_ms) {
            return Err(format!(
                "`[approval] expire_after_ms` must be from {MIN_EXPIRE_AFTER_MS} to \
                 {MAX_EXPIRE_AFTER_MS} ms (got {})",
                a.expire_after_ms
            ));
        }
        if on && a.actions.is_empty() {
            return Err(
                "`[approval] actions` is empty: list the actions that need approval \
                 (replay, delete, restore), or turn approval off (min_records = 0, no dlq_topics)"
                    .into(),
            );
        }
        let reason_pattern = match r.pattern.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(p) => Some((
                p.to_string(),
                regex::Regex::new(p).map_err(|e| {
                    format!("`[reasons] pattern`: `{p}` is not a regular expression: {e}")
                })?,
            )),
        };
        Ok(ApprovalPolicy {
            min_records: a.min_records,
            topics,
            expire_after_ms: a.expire_after_ms,
            actions: if on { a.actions.clone() } else { Vec::new() },
            reason_required: r.required,
            reason_pattern,
        })
    }

    /// True if some action may need approval.
    pub fn approval_on(&self) -> bool {
        !self.actions.is_empty()
    }

    /// True if `kind` may need approval (then its size and topics decide).
    pub fn gates(&self, kind: ActionKind) -> bool {
        self.actions.contains(&kind)
    }

    /// How long a request stays pending, ms.
    pub fn expire_after_ms(&self) -> i64 {
        i64::try_from(self.expire_after_ms).unwrap_or(i64::MAX)
    }

    /// Why an action of `kind` that would change `count` dead letters, `per_topic` of them
    /// per DLQ topic, needs approval (a sentence), or `None` when it does not.
    pub fn why(&self, kind: ActionKind, count: i64, per_topic: &[(String, i64)]) -> Option<String> {
        if !self.gates(kind) || count <= 0 {
            return None;
        }
        let mut why = Vec::new();
        if self.min_records > 0 && u64::try_from(count).unwrap_or(0) >= self.min_records {
            why.push(format!(
                "it acts on {count} dead letters (approval from {})",
                self.min_records
            ));
        }
        let hit: Vec<&str> = per_topic
            .iter()
            .filter(|(t, n)| *n > 0 && self.topics.iter().any(|p| p.matches(t)))
            .map(|(t, _)| t.as_str())
            .collect();
        if !hit.is_empty() {
            why.push(format!(
                "it touches DLQ topic{} {} (approval required)",
                if hit.len() == 1 { "" } else { "s" },
                hit.iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// The reason pattern, as configured.
    pub fn reason_pattern(&self) -> Option<&str> {
        self.reason_pattern.as_ref().map(|(p, _)| p.as_str())
    }

    /// True when a reason is required.
    pub fn reason_required(&self) -> bool {
        self.reason_required
    }

    /// Checks an action's reason (trimmed; empty = none) against `[reasons]`. Errors: the
    /// sentence to show (422), naming the pattern.
    pub fn check_reason(&self, reason: Option<&str>) -> Result<(), String> {
        let reason = reason.map(str::trim).filter(|r| !r.is_empty());
        let shape = self
            .reason_pattern()
            .map(|p| format!(" matching `{p}`"))
            .unwrap_or_default();
        match (reason, &self.reason_pattern) {
            (None, _) if self.reason_required => Err(format!(
                "a reason is required for this action: give one{shape} (`[reasons]` in \
                 redrive.toml)"
            )),
            (None, _) | (Some(_), None) => Ok(()),
            (Some(r), Some((p, re))) if !re.is_match(r) => Err(format!(
                "the reason `{}` does not match the required pattern `{p}` (`[reasons]` in \
                 redrive.toml); e.g. start it with a ticket id",
                r.chars().take(80).collect::<String>()
            )),
            (Some(_), Some(_)) => Ok(()),
        }
    }
}

/// Where a request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestStatus {
    /// Waiting for another user's decision; nothing is written yet.
    Pending,
    /// Approved: the action ran (see the request's `job_id` for a replay).
    Approved,
    /// Declined: nothing was written but the audit row.
    Declined,
    /// Not decided within `expire_after_ms`; cannot be approved.
    Expired,
    /// Withdrawn by its requester.
    Cancelled,
}

impl RequestStatus {
    pub const ALL: [RequestStatus; 5] = [
        RequestStatus::Pending,
        RequestStatus::Approved,
        RequestStatus::Declined,
        RequestStatus::Expired,
        RequestStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Pending => "pending",
            RequestStatus::Approved => "approved",
            RequestStatus::Declined => "declined",
            RequestStatus::Expired => "expired",
            RequestStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<RequestStatus> {
        RequestStatus::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// An action waiting for (or past) approval: everything needed to carry it out later exactly
/// as asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub id: i64,
    pub kind: ActionKind,
    /// The selection, target, rate, options and reason as asked (for delete and restore only
    /// the selection and reason count).
    pub request: ReplayRequest,
    /// For a selection by filter: only dead letters with an id at or below this are acted on
    /// (the highest id when the request was made), so records arriving later are not swept
    /// in. `None` for explicit ids.
    pub max_id: Option<i64>,
    /// Who asked, from where (the action's audit row is theirs).
    pub requested_by: Actor,
    /// Dead letters the action would have changed when it was asked for.
    pub count: i64,
    /// Of them, per DLQ topic (largest first).
    pub per_topic: Vec<(String, i64)>,
    /// Why it needs approval.
    pub why: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub status: RequestStatus,
    /// Who approved, declined or cancelled it, when, and their reason.
    pub decided_by: Option<String>,
    pub decided_at_ms: Option<i64>,
    pub decision_reason: Option<String>,
    /// An approved replay's job.
    pub job_id: Option<String>,
}

impl ApprovalRequest {
    /// Whether `user` may approve or decline it: anyone (holding the approve permission)
    /// but its requester. Errors: the sentence for a 403.
    pub fn check_decider(&self, user: &str) -> Result<(), String> {
        if self.requested_by.user == user {
            return Err(format!(
                "you asked for request {} yourself: another user with the `approve` \
                 permission must approve or decline it (you may cancel it)",
                self.id
            ));
        }
        Ok(())
    }

    /// Whether `user` may cancel it: only its requester. Errors: the sentence for a 403.
    pub fn check_canceller(&self, user: &str) -> Result<(), String> {
        if self.requested_by.user != user {
            return Err(format!(
                "only {} (who asked for request {}) may cancel it; decline it instead",
                self.requested_by.user, self.id
            ));
        }
        Ok(())
    }
}

/// What approving a request did: the request as decided, and the action's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalOutcome {
    pub request: ApprovalRequest,
    /// Dead letters changed (deleted, restored) or queued for replay.
    pub affected: i64,
    /// The replay job, for a replay.
    pub job: Option<crate::actions::ReplayJob>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(min: u64, topics: &[&str], pattern: Option<&str>) -> ApprovalPolicy {
        ApprovalPolicy::new(
            &ApprovalConfig {
                min_records: min,
                dlq_topics: topics.iter().map(|t| t.to_string()).collect(),
                ..ApprovalConfig::default()
            },
            &ReasonsConfig {
                required: pattern.is_some(),
                pattern: pattern.map(str::to_string),
            },
        )
        .unwrap()
    }

    #[test]
    fn size_and_topics_decide() {
        let p = policy(10, &["^payments\\..*$", "orders.DLT"], None);
        let t = |s: &str, n| (s.to_string(), n);
        assert!(p.why(ActionKind::Replay, 9, &[t("x", 9)]).is_none());
        assert!(p.why(ActionKind::Replay, 10, &[t("x", 10)]).is_some());
        let why = p
            .why(ActionKind::Delete, 1, &[t("payments.DLT", 1)])
            .unwrap();
        assert!(why.contains("payments.DLT"), "{why}");
        assert!(p
            .why(ActionKind::Delete, 1, &[t("orders.DLT", 1)])
            .is_some());
        assert!(p
            .why(ActionKind::Delete, 1, &[t("orders.DLTX", 1)])
            .is_none());
        assert!(p.why(ActionKind::Delete, 0, &[]).is_none());
        assert!(!ApprovalPolicy::default().approval_on());
        assert!(ApprovalPolicy::default()
            .why(ActionKind::Replay, 1_000_000, &[])
            .is_none());
    }

    #[test]
    fn bad_tables_are_refused() {
        let r = ReasonsConfig::default();
        let a = |f: fn(&mut ApprovalConfig)| {
            let mut c = ApprovalConfig {
                min_records: 5,
                ..ApprovalConfig::default()
            };
            f(&mut c);
            ApprovalPolicy::new(&c, &r)
        };
        // The syntax of a role's scope: a glob is a pattern, a bad name or regex is refused.
        assert!(a(|c| c.dlq_topics = vec!["payments.*".into()]).is_ok());
        assert!(a(|c| c.dlq_topics = vec!["pay ments".into()]).is_err());
        assert!(a(|c| c.dlq_topics = vec!["^(".into()]).is_err());
        assert!(a(|c| c.expire_after_ms = 0).is_err());
        assert!(a(|c| c.actions.clear()).is_err());
        let bad = ReasonsConfig {
            required: true,
            pattern: Some("[".into()),
        };
        let e = ApprovalPolicy::new(&ApprovalConfig::default(), &bad).unwrap_err();
        assert!(e.contains("[reasons] pattern"), "{e}");
    }

    #[test]
    fn reasons_are_checked() {
        let p = policy(0, &[], Some(r"^[A-Z]+-\d+"));
        let e = p.check_reason(None).unwrap_err();
        assert!(e.contains(r"^[A-Z]+-\d+"), "{e}");
        assert!(p.check_reason(Some("  ")).is_err());
        let e = p.check_reason(Some("because")).unwrap_err();
        assert!(e.contains(r"^[A-Z]+-\d+"), "{e}");
        assert!(p.check_reason(Some("OPS-12 replay after fix")).is_ok());
        assert!(ApprovalPolicy::default().check_reason(None).is_ok());
    }
}
