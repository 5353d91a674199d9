use std::time::Duration;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use super::{LoadError, NotFound};
use crate::actions_api::{get_replay_job, CancelReplayJob, JobSnapshot};
use crate::auth_context::{may, use_session, CsrfField, Permission};
use crate::components::{ActionError, CanarySection, JobLagGate, JobProgress, JobStatusBadge};
use crate::http_status::HttpStatus;
use crate::job_control_api::{PauseReplayJob, ResumeReplayJob};
use crate::wire;

/// How often the hydrated page asks for the job while it runs.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// Without JavaScript, a running job's page reloads itself this often: a `<meta>` refresh
/// inside `<noscript>`, so that a browser running scripts (which polls instead) ignores it.
/// Constant markup, no user data.
const NOSCRIPT_REFRESH: &str = r#"<meta http-equiv="refresh" content="2">"#;

/// `/jobs/:id`: one replay job's progress, live. Hydrated, the page fetches the job again
/// every second while it is running or waiting; without JavaScript it refreshes itself.
#[component]
pub fn JobPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").unwrap_or_default());
    let job = wire::resource(id, get_replay_job);
    let session = use_session();
    let cancel = ServerAction::<CancelReplayJob>::new();
    let pause = ServerAction::<PauseReplayJob>::new();
    let resume = ServerAction::<ResumeReplayJob>::new();
    let status = HttpStatus::current();

    // Each answer for an active job schedules the next fetch (effects run in the browser only).
    Effect::new(move |_| {
        let active = matches!(job.get(), Some(Ok(Some(ref s)))
            if s.job.status.is_active() || s.job.status == redrive_core::actions::JobStatus::Preparing);
        if active {
            if let Ok(handle) = set_timeout_with_handle(move || job.refetch(), POLL_EVERY) {
                on_cleanup(move || handle.clear());
            }
        }
    });
    // A cancel (hydrated) shows its outcome at once.
    Effect::new(move |_| {
        let done = matches!(cancel.value().get(), Some(Ok(_)))
            || matches!(pause.value().get(), Some(Ok(_)))
            || matches!(resume.value().get(), Some(Ok(_)));
        if done {
            job.refetch();
        }
    });

    view! {
        // Transition, not Suspense: a refetch keeps the page as it is until the answer arrives.
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let label = id();
                let status = status.clone();
                Suspend::new(async move {
                    let can_act = may(&session.0.await, Permission::Replay);
                    match job.await {
                        Ok(Some(snapshot)) => view! {
                            <Job snapshot=snapshot can_act=can_act cancel=cancel pause=pause resume=resume />
                        }
                        .into_any(),
                        Ok(None) => view! { <NotFound what=format!("replay job {label}") /> }
                            .into_any(),
                        Err(error) => {
                            status.set(503);
                            view! { <LoadError error=error /> }.into_any()
                        }
                    }
                })
            }}
        </Transition>
    }
}

#[component]
fn Job(
    snapshot: JobSnapshot,
    can_act: bool,
    cancel: ServerAction<CancelReplayJob>,
    pause: ServerAction<PauseReplayJob>,
    resume: ServerAction<ResumeReplayJob>,
) -> impl IntoView {
    let JobSnapshot {
        job,
        as_of_ms,
        window_ms,
    } = snapshot;
    let outcome = outcome_line(&job, as_of_ms, window_ms);
    // A job still queueing its rows (`preparing`) can be paused or cancelled too.
    let active =
        job.status.is_active() || job.status == redrive_core::actions::JobStatus::Preparing;
    let paused = job.status == redrive_core::actions::JobStatus::Paused;
    let id = job.id.clone();
    let (pause_id, resume_id) = (id.clone(), id.clone());
    // The list, narrowed to this job's dead letters (`replay_job`, `came_back_from_job`).
    let took = crate::query::href("/", [("replay_job", id.as_str())]);
    let came_back = crate::query::href("/", [("came_back_from_job", id.as_str())]);
    let failed = crate::query::href(
        "/",
        [("replay_job", id.as_str()), ("status", "replay_failed")],
    );
    let title = format!(
        "Replay job {} · redrive",
        job.id.chars().take(8).collect::<String>()
    );
    let error = move || {
        cancel
            .value()
            .get()
            .and_then(Result::err)
            .or_else(|| pause.value().get().and_then(Result::err))
            .or_else(|| resume.value().get().and_then(Result::err))
    };
    view! {
        <Title text=title />
        {active.then(|| view! { <noscript inner_html=NOSCRIPT_REFRESH></noscript> })}
        <p class="crumbs">
            <a href="/jobs">"← Replay jobs"</a>
        </p>
        <h1 class="detail-title">
            "Replay job " <span class="mono">{job.id.clone()}</span> " "
            <JobStatusBadge status=job.status />
        </h1>
        {move || error().map(|e| view! { <ActionError error=e /> })}
        {job.options.transform.as_ref().map(|t| {
            let c = job.transform;
            view! {
                <section class="job-transform">
                    <h2>"Transform"</h2>
                    <p>
                        "Script SHA-256 "
                        <span class="mono transform-sha256">{t.script_sha256()}</span>
                        {format!(
                            " ({} bytes; limits {} ms and {} operations per record).",
                            t.script.len(),
                            t.time_limit_ms(),
                            t.max_operations()
                        )}
                    </p>
                    <p class="transform-counts">
                        {format!(
                            "{} transformed and published, {} skipped by the script, {} failed by the script (not published).",
                            c.transformed, c.skipped, c.failed
                        )}
                    </p>
                    <details>
                        <summary>"The script"</summary>
                        <pre class="mono">{crate::display::visible::shown(&t.script, 64 * 1024, crate::display::visible::Lines::Keep).text}</pre>
                    </details>
                </section>
            }
        })}
        <JobProgress job=job.clone() as_of_ms=as_of_ms />
        <CanarySection job=job.clone() />
        <JobLagGate job=job.clone() />
        {outcome}
        {(active && can_act).then(|| view! {
            <ActionForm action=pause attr:class="pause-job">
                <CsrfField />
                <input type="hidden" name="job_id" value=pause_id />
                <label>
                    <span>"Reason (optional, audited)"</span>
                    <input type="text" name="reason" maxlength="2000" placeholder="e.g. INC-1234 downstream overloaded" />
                </label>
                <button type="submit" class="secondary-button">"Pause the replay"</button>
                " "
                <span class="dim small">
                    "Nothing more is published until it is resumed; what is published stays published."
                </span>
            </ActionForm>
        })}
        {(paused && can_act).then(|| view! {
            <ActionForm action=resume attr:class="resume-job">
                <CsrfField />
                <input type="hidden" name="job_id" value=resume_id />
                <label>
                    <span>"Reason (optional, audited)"</span>
                    <input type="text" name="reason" maxlength="2000" />
                </label>
                <button type="submit">"Resume the replay"</button>
            </ActionForm>
        })}
        {((active || paused) && can_act).then(|| view! {
            <ActionForm action=cancel attr:class="cancel-job">
                <CsrfField />
                <input type="hidden" name="job_id" value=id />
                <button type="submit" class="danger">"Cancel the replay"</button>
                " "
                <span class="dim small">
                    "Rows not yet published are released; their dead letters go back to their previous status."
                </span>
            </ActionForm>
        })}
        <p class="job-links">
            <a href=took>"Dead letters this replay took"</a>
            " · "
            <a href=came_back>"Came back after this replay"</a>
            " · "
            <a href=failed>"Its failed publishes"</a>
            " · "
            <a href="/audit?action=replay">"Audit trail"</a>
        </p>
    }
}

/// "Came back: N of M published" and, once the job finished longer ago than the watch
/// window, "no re-failure seen" for the rest (or that every one came back) (`docs/replay.md`, "Outcome"). Nothing before
/// anything was published.
fn outcome_line(
    job: &redrive_core::actions::ReplayJob,
    as_of_ms: i64,
    window_ms: u64,
) -> Option<impl IntoView> {
    (job.published > 0).then(|| {
        let rest = (job.published - job.refailed).max(0);
        let watch = match job.finished_at_ms {
            // Nothing left to watch ("watching the other 0" read as if something were).
            Some(_) if rest == 0 => "every published record came back".to_string(),
            Some(f) if as_of_ms >= f.saturating_add(i64::try_from(window_ms).unwrap_or(i64::MAX)) => {
                format!("no re-failure seen for the other {rest} within the watch window")
            }
            Some(f) => format!(
                "watching the other {rest} for re-failures until {} UTC",
                crate::display::format_time(f.saturating_add(i64::try_from(window_ms).unwrap_or(i64::MAX)))
            ),
            None => "watching for re-failures while it runs".to_string(),
        };
        view! {
            <p class="job-outcome">
                <strong class="refailed">{format!("Came back: {} of {} published", job.refailed, job.published)}</strong>
                " — " {watch}
            </p>
        }
    })
}
