//! Server functions pausing and resuming a replay job from its page (plain forms, no
//! JavaScript needed, CSRF-checked like the other actions: see `actions_api`). Both are
//! audited with the actor and the optional reason (`Store::pause_job`, `resume_job`) and go
//! back to the job's page.

use leptos::prelude::*;
use redrive_core::actions::ReplayJob;

/// Pauses a running or waiting replay job: the relay stops claiming its rows and hands back
/// the ones it holds unsent. Back to the job.
#[server(endpoint = "ui/pause-job")]
pub async fn pause_replay_job(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    job_id: String,
    #[server(default)] reason: String,
) -> Result<ReplayJob, ServerFnError> {
    let _ = csrf;
    let store = crate::actions_api::store_for_labels()?;
    let actor = crate::actions_api::permitted_for_labels(
        redrive_core::permission::Permission::Replay,
        "pause_job",
    )
    .await?;
    let reason = Some(reason.trim()).filter(|r| !r.is_empty());
    let job = store
        .pause_job(&actor, job_id.trim(), reason)
        .await
        .map_err(|e| crate::actions_api::failed_for_labels("pause the replay job", e))?;
    leptos_axum::redirect(&format!("/jobs/{}", crate::query::encode(&job.id)));
    Ok(job)
}

/// Resumes a paused replay job where it stopped. Back to the job.
#[server(endpoint = "ui/resume-job")]
pub async fn resume_replay_job(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    job_id: String,
    #[server(default)] reason: String,
) -> Result<ReplayJob, ServerFnError> {
    let _ = csrf;
    let store = crate::actions_api::store_for_labels()?;
    let actor = crate::actions_api::permitted_for_labels(
        redrive_core::permission::Permission::Replay,
        "resume_job",
    )
    .await?;
    let reason = Some(reason.trim()).filter(|r| !r.is_empty());
    let job = store
        .resume_job(&actor, job_id.trim(), reason)
        .await
        .map_err(|e| crate::actions_api::failed_for_labels("resume the replay job", e))?;
    leptos_axum::redirect(&format!("/jobs/{}", crate::query::encode(&job.id)));
    Ok(job)
}
