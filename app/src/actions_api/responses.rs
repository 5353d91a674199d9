//! What the action server functions answer: [`ActionDone`], [`Preview`] and [`JobSnapshot`].

use redrive_core::actions::{DryRun, ReplayJob};
use serde::{Deserialize, Serialize};

use super::Op;

/// What an action did (the hydrated page reads it; a plain form follows the redirect).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionDone {
    pub op: Op,
    /// Dead letters deleted or restored, or queued for replay.
    pub affected: i64,
    /// The replay job, for a replay.
    pub job_id: Option<String>,
    /// The approval request it became instead (four-eyes approval, `approvals_api`): nothing
    /// was done yet, `affected` is the count it would change.
    #[serde(default)]
    pub request_id: Option<i64>,
}

/// What "… all matching" would do, shown on the confirmation page before it acts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    pub op: Op,
    /// The filter, normalised (the list's parameter names, times as epoch ms): exactly what
    /// the confirmation form sends back.
    pub filter: Vec<(String, String)>,
    /// The replay's target-topic override; `None` = each record's source topic.
    pub target_topic: Option<String>,
    /// A replay's dry run (`None` for delete and restore).
    pub dry_run: Option<DryRun>,
    /// The label to add or remove (label changes only), normalised.
    #[serde(default)]
    pub label: Option<String>,
    /// How many dead letters the action would change now.
    pub count: i64,
    /// For an empty filter ("all"): the number of dead letters it matches now, which the
    /// person must type to confirm (`Store::check_confirm_all`); `None` for any other filter.
    #[serde(default)]
    pub confirm_all: Option<i64>,
    /// A replay's transform script as typed (the `transform` parameter), `None` without one.
    #[serde(default)]
    pub transform: Option<String>,
    /// Why the script cannot be used (it does not compile, or is too long); the sample is then
    /// shown without it and the replay cannot be confirmed with it.
    #[serde(default)]
    pub transform_error: Option<String>,
    /// A replay's sample: the first records per target topic, after the transform if any.
    #[serde(default)]
    pub sample: Option<redrive_core::replay_sample::ReplaySample>,
    /// Why a label change cannot be confirmed: no label was typed, or it is not a label
    /// (`label` is then `None`). The page says what to type (422) and offers no Confirm.
    #[serde(default)]
    pub label_error: Option<String>,
}

/// A replay job as read at `as_of_ms` (epoch ms, the server's clock: the reference for a
/// running job's measured rate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSnapshot {
    pub job: ReplayJob,
    pub as_of_ms: i64,
    /// The re-failure watch window in force (`replay_outcome_window_ms`), ms.
    #[serde(default)]
    pub window_ms: u64,
}
