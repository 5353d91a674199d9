//! Server functions of the automation pages (`docs/automation.md`, "Editing rules", "Dry
//! run"): the active rule set with each rule's state and the dead letters per tier
//! (`/automation`, any signed-in user), the rule set editor with its dry run and save
//! (`/automation/edit`, the `manage_rules` permission), the versions (`/automation/versions`,
//! `/automation/versions/N`, any signed-in user), and pausing / resuming a transient rule
//! (`manage_rules`).
//!
//! The editor works without JavaScript: its one form posts to [`submit_rule_set`] (`op` =
//! `dry_run` or `save`). A dry run, and a save the rule set refuses, keep the edited text as
//! a *draft* in this process's memory (at most [`MAX_DRAFTS`], for [`DRAFT_TTL_MS`], only
//! for the user who wrote it) and answer a redirect to `/automation/edit?draft=ID`, where
//! the page shows the text again with the result or the error above it. A saved version
//! redirects to its page. (Behind a load balancer without sticky sessions a draft may be
//! on another instance: the editor then says so and shows the active text.)

use leptos::prelude::*;
use redrive_core::automation::dry_run::DryRun;
use redrive_core::automation::view::{AutomationOverview, VersionInfo, VersionText};
use serde::{Deserialize, Serialize};

/// Most drafts kept in memory (the oldest go first).
pub const MAX_DRAFTS: usize = 64;
/// How long a draft is kept, ms (15 minutes).
pub const DRAFT_TTL_MS: i64 = 15 * 60 * 1000;

/// What `/automation` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutomationPageData {
    pub overview: AutomationOverview,
    /// Whether the caller holds `manage_rules` (edit, pause, resume).
    pub can_manage: bool,
}

/// What `/automation/edit` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditorData {
    /// The active version (`None` before any).
    pub active_version: Option<i64>,
    /// The text in the editor: the draft's, else the active version's.
    pub source: String,
    /// The draft's reason, if any.
    pub reason: String,
    /// `[reasons] required`: a save needs a reason.
    pub reason_required: bool,
    /// `[reasons] pattern`, if any.
    pub reason_pattern: Option<String>,
    /// Why the last save was refused (the rule set's message), if it was.
    pub error: Option<String>,
    /// The last dry run of the draft, if one was asked for.
    pub dry_run: Option<DryRun>,
    /// The active version when the draft was made, if it differs from the active one now
    /// (someone saved meanwhile).
    pub draft_base: Option<i64>,
    /// The URL named a draft that is gone (expired, or kept by another instance).
    pub draft_missing: bool,
}

/// The notice shown after a change, from the URL's `done=CODE`: only known codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutomationNotice {
    Saved,
    Paused,
    Resumed,
}

impl AutomationNotice {
    /// The `done` value.
    pub fn code(self) -> &'static str {
        match self {
            AutomationNotice::Saved => "saved",
            AutomationNotice::Paused => "paused",
            AutomationNotice::Resumed => "resumed",
        }
    }

    /// Parses a `done` value.
    pub fn parse(v: &str) -> Option<AutomationNotice> {
        [
            AutomationNotice::Saved,
            AutomationNotice::Paused,
            AutomationNotice::Resumed,
        ]
        .into_iter()
        .find(|n| n.code() == v)
    }

    /// The sentence shown.
    pub fn sentence(self) -> &'static str {
        match self {
            AutomationNotice::Saved => {
                "The rule set was saved as a new version; it is active now (the sorter uses it \
                 for dead letters it sorts from now on)."
            }
            AutomationNotice::Paused => {
                "The rule was paused: it runs no more rounds until resumed."
            }
            AutomationNotice::Resumed => "The rule was resumed: its next round runs on schedule.",
        }
    }
}

/// The automation page's data (any signed-in user).
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_automation() -> Result<AutomationPageData, ServerFnError> {
    use redrive_core::permission::Permission;
    let actor = crate::auth_context::signed_in()?;
    let overview = seam::store()?
        .automation_overview()
        .await
        .map_err(|e| seam::failed("read the rule set", e))?;
    Ok(AutomationPageData {
        overview,
        can_manage: actor.can(Permission::ManageRules),
    })
}

/// The versions of the rule set, newest first, at most 500 (any signed-in user).
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_rule_versions() -> Result<Vec<VersionInfo>, ServerFnError> {
    crate::auth_context::signed_in()?;
    let versions = seam::store()?
        .rule_set_versions(500)
        .await
        .map_err(|e| seam::failed("read the rule set versions", e))?;
    Ok(versions
        .iter()
        .map(redrive_core::store::version_info)
        .collect())
}

/// Version `version` with its text and diff; `None` when not stored.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_rule_version(version: i64) -> Result<Option<VersionText>, ServerFnError> {
    crate::auth_context::signed_in()?;
    seam::store()?
        .rule_set_version_text(version)
        .await
        .map_err(|e| seam::failed("read the rule set version", e))
}

/// The editor's data (`manage_rules`; a refusal is audited `rule_set_edit` `denied`):
/// the draft `draft` if it is this user's and still kept, else the active text.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_rule_editor(
    #[server(default)] draft: String,
) -> Result<EditorData, ServerFnError> {
    let actor = seam::manager("rule_set_edit").await?;
    let store = seam::store()?;
    let active = store
        .active_rule_set()
        .await
        .map_err(|e| seam::failed("read the rule set", e))?;
    let policy = crate::approvals_api::policy();
    let active_version = active.as_ref().map(|v| v.version);
    let mut data = EditorData {
        active_version,
        source: active.map(|v| v.source).unwrap_or_default(),
        reason: String::new(),
        reason_required: policy.reason_required(),
        reason_pattern: policy.reason_pattern().map(str::to_string),
        error: None,
        dry_run: None,
        draft_base: None,
        draft_missing: false,
    };
    if !draft.trim().is_empty() {
        match seam::drafts::take(draft.trim(), &actor.user) {
            Some(d) => {
                data.source = d.source;
                data.reason = d.reason;
                data.error = d.error;
                data.dry_run = d.dry_run;
                data.draft_base = (d.base != active_version).then_some(d.base).flatten();
            }
            None => data.draft_missing = true,
        }
    }
    Ok(data)
}

/// The editor's form (`manage_rules`): `op` = `dry_run` (count what `source` would do to the
/// stored dead letters; nothing is written) or `save` (a new version, audited
/// `rule_set_save` with `reason`; `[reasons]` applies). A dry run and a refused save come
/// back to the editor with the text kept (see the module docs); a saved version goes to its
/// page. Returns the saved version number, or 0.
#[server(endpoint = "ui/automation/rules")]
pub async fn submit_rule_set(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    #[server(default)] source: String,
    #[server(default)] reason: String,
    #[server(default)] op: String,
) -> Result<i64, ServerFnError> {
    use redrive_core::automation::dry_run::MAX_DRY_RUN_ROWS;
    use redrive_core::automation::RuleSet;
    use redrive_core::store::{RuleSetOrigin, StoreError};
    let _ = csrf;
    let action = if op == "save" {
        "rule_set_save"
    } else {
        "rule_set_dry_run"
    };
    let actor = seam::manager(action).await?;
    let store = seam::store()?;
    // A browser sends CRLF line ends from a textarea; the rule set is stored with LF.
    let source = source.replace("\r\n", "\n");
    let base = store
        .active_rule_set()
        .await
        .map_err(|e| seam::failed("read the rule set", e))?
        .map(|v| v.version);
    let mut draft = seam::drafts::Draft {
        user: actor.user.clone(),
        source: source.clone(),
        reason: reason.clone(),
        error: None,
        dry_run: None,
        base,
        at_ms: seam::now_ms(),
    };
    match op.as_str() {
        "dry_run" => {
            match RuleSet::parse_toml(&source) {
                Ok(set) => {
                    let run = store
                        .dry_run_rule_set(&set, seam::now_ms(), MAX_DRY_RUN_ROWS)
                        .await
                        .map_err(|e| seam::failed("run the dry run", e))?;
                    draft.dry_run = Some(run);
                }
                Err(e) => draft.error = Some(format!("This rule set cannot be used: {e}")),
            }
            seam::back_to_draft(draft);
            Ok(0)
        }
        "save" => {
            let policy = crate::approvals_api::policy();
            if let Err(m) = policy.check_reason(Some(reason.as_str())) {
                draft.error = Some(format!("Not saved: {m}."));
                seam::back_to_draft(draft);
                return Ok(0);
            }
            match store
                .save_rule_set(&actor, RuleSetOrigin::Ui, &source, Some(reason.as_str()))
                .await
            {
                Ok(v) => {
                    leptos_axum::redirect(&format!(
                        "/automation/versions/{}?done={}",
                        v.version,
                        AutomationNotice::Saved.code()
                    ));
                    Ok(v.version)
                }
                Err(StoreError::Invalid(m)) => {
                    draft.error = Some(format!("Not saved: {m}"));
                    seam::back_to_draft(draft);
                    Ok(0)
                }
                Err(e) => Err(seam::failed("save the rule set", e)),
            }
        }
        _ => Err(crate::refusal::refused(
            crate::refusal::INVALID,
            "Unknown action: use the Dry run or Save button.",
        )),
    }
}

/// Pauses (`op` = `pause`) or resumes (`resume`) transient rule `rule` (`manage_rules`;
/// audited `rule_pause` / `rule_resume` with `reason`) and answers its state. Back to
/// `/automation`.
#[server(endpoint = "ui/automation/pause")]
pub async fn pause_rule(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    rule: String,
    op: String,
    #[server(default)] reason: String,
) -> Result<redrive_core::automation::view::RuleState, ServerFnError> {
    let _ = csrf;
    let (paused, action, notice) = match op.as_str() {
        "pause" => (true, "rule_pause", AutomationNotice::Paused),
        "resume" => (false, "rule_resume", AutomationNotice::Resumed),
        _ => {
            return Err(crate::refusal::refused(
                crate::refusal::INVALID,
                "Unknown action: use the Pause or Resume button.",
            ))
        }
    };
    let actor = seam::manager(action).await?;
    let state = seam::store()?
        .set_rule_paused(&actor, rule.trim(), paused, Some(reason.as_str()))
        .await
        .map_err(|e| seam::failed("change the rule", e))?;
    leptos_axum::redirect(&format!(
        "/automation?done={}#rule-{}",
        notice.code(),
        crate::query::encode(rule.trim())
    ));
    Ok(state)
}

#[cfg(feature = "ssr")]
mod seam {
    use leptos::prelude::*;
    use redrive_core::actions::Actor;
    use redrive_core::permission::Permission;

    use crate::auth_context;
    use crate::http_status::HttpStatus;

    pub use crate::actions_api::failed_for_labels as failed;
    pub use crate::actions_api::store_for_labels as store;

    /// Epoch ms now (the server's clock).
    pub fn now_ms() -> i64 {
        chrono::Utc::now().timestamp_millis()
    }

    /// Who may manage rules, or 403 (audited `denied` for `action`).
    pub async fn manager(action: &str) -> Result<Actor, ServerFnError> {
        let status = HttpStatus::current();
        auth_context::authorize_permission(Permission::ManageRules, action)
            .await
            .inspect_err(|_| status.set(403))
    }

    /// Keeps `draft` and redirects to the editor showing it.
    pub fn back_to_draft(draft: drafts::Draft) {
        let id = drafts::put(draft);
        leptos_axum::redirect(&format!("/automation/edit?draft={id}"));
    }

    /// The editor's drafts, in this process's memory (see the module docs).
    pub mod drafts {
        use std::collections::VecDeque;
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::Mutex;

        use redrive_core::automation::dry_run::DryRun;

        use super::super::{DRAFT_TTL_MS, MAX_DRAFTS};

        /// One kept draft.
        #[derive(Debug, Clone)]
        pub struct Draft {
            /// Whose it is: only they get it back.
            pub user: String,
            pub source: String,
            pub reason: String,
            pub error: Option<String>,
            pub dry_run: Option<DryRun>,
            /// The active version when it was made.
            pub base: Option<i64>,
            /// Epoch ms.
            pub at_ms: i64,
        }

        static DRAFTS: Mutex<VecDeque<(String, Draft)>> = Mutex::new(VecDeque::new());
        static NEXT: AtomicU64 = AtomicU64::new(1);

        /// Keeps `d`; returns its id (a counter and the time: a draft is given back only to
        /// its user, so the id need not be secret).
        pub fn put(d: Draft) -> String {
            let id = format!("{:x}-{:x}", d.at_ms, NEXT.fetch_add(1, Ordering::Relaxed));
            let mut all = DRAFTS.lock().unwrap_or_else(|p| p.into_inner());
            let oldest = d.at_ms - DRAFT_TTL_MS;
            all.retain(|(_, x)| x.at_ms >= oldest);
            while all.len() >= MAX_DRAFTS {
                all.pop_front();
            }
            all.push_back((id.clone(), d));
            id
        }

        /// Draft `id` if it is `user`'s and not expired (it stays kept: reloading the
        /// page shows it again).
        pub fn take(id: &str, user: &str) -> Option<Draft> {
            let all = DRAFTS.lock().unwrap_or_else(|p| p.into_inner());
            let now = super::now_ms();
            all.iter()
                .find(|(k, d)| k == id && d.user == user && d.at_ms >= now - DRAFT_TTL_MS)
                .map(|(_, d)| d.clone())
        }
    }
}
