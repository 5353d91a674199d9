//! The canary of a replay (`docs/replay.md`, "Canary replay"): its section on the job page,
//! and its fields on the confirmation page's replay form (plain form fields: they work
//! without JavaScript).

use leptos::prelude::*;
use redrive_core::actions::{JobStatus, ReplayJob};
use redrive_core::canary::{CanaryState, CanaryStatus};

use crate::display::format_time;

/// The job page's "Canary" section: the plan, where the canary is (size, published, came
/// back, the watch's end) and the verdict with its reason. Nothing for a job without one.
#[component]
pub fn CanarySection(job: ReplayJob) -> impl IntoView {
    let (Some(opts), Some(c)) = (job.options.canary.clone(), job.canary.clone()) else {
        return ().into_any();
    };
    let state_line = state_line(&c, job.status);
    let class = match c.state {
        CanaryState::Failed => "canary-state canary-failed",
        CanaryState::Passed => "canary-state canary-passed",
        _ => "canary-state",
    };
    let verdict = c.reason.clone().map(|r| {
        let at = c
            .decided_at_ms
            .map(|t| format!(" (decided {} UTC)", format_time(t)))
            .unwrap_or_default();
        view! { <p class="canary-reason">{r}{at}</p> }
    });
    let resume_hint = (c.state == CanaryState::Failed && job.status == JobStatus::Paused).then(|| {
        view! {
            <p class="dim small">
                "Resuming publishes the rest of the job at its normal rate, without a second canary."
            </p>
        }
    });
    view! {
        <section class="job-canary">
            <h2>"Canary"</h2>
            <p class="canary-plan">{format!("Plan: {}.", opts.describe())}</p>
            <p class=class>{state_line}</p>
            {verdict}
            {resume_hint}
        </section>
    }
    .into_any()
}

/// "canary: watching until 2026-12-01 23:40:10 UTC — 10 of 10 published, 0 came back".
fn state_line(c: &CanaryStatus, job: JobStatus) -> String {
    let size = c.size.unwrap_or(0);
    let counts = format!(
        "{} of {size} published{}, {} came back",
        c.published,
        if c.failed > 0 {
            format!(", {} failed to publish", c.failed)
        } else {
            String::new()
        },
        c.refailed
    );
    let unfinished = job.is_final();
    match c.state {
        CanaryState::Starting if unfinished => {
            "canary: not started (the job ended before it ran)".to_string()
        }
        CanaryState::Starting => {
            "canary: starting — its size is fixed when the job first runs".to_string()
        }
        CanaryState::Publishing if unfinished => {
            format!("canary: not finished (the job ended while it published) — {counts}")
        }
        CanaryState::Publishing => format!("canary: publishing — {counts}"),
        CanaryState::Watching if unfinished => {
            format!("canary: not finished (the job ended while it was watched) — {counts}")
        }
        CanaryState::Watching => format!(
            "canary: watching until {} UTC — {counts}",
            c.watch_until_ms.map(format_time).unwrap_or_default()
        ),
        CanaryState::Passed => format!("canary: passed — {counts}"),
        CanaryState::Failed => format!("canary: failed — {counts}"),
    }
}

/// The replay form's canary fields: size (a count or a percentage), wait (s), threshold.
#[component]
pub fn CanaryFields() -> impl IntoView {
    view! {
        <fieldset class="canary-fields">
            <legend>"Canary (optional)"</legend>
            <label>
                <span>"Publish first (records, or % of the job)"</span>
                <input type="text" name="canary_size" inputmode="decimal" placeholder="e.g. 10 or 1 %" />
            </label>
            <label>
                <span>"Then watch for re-failures (s)"</span>
                <input type="number" name="canary_wait_s" min="1" max="86400" step="1" placeholder="300" />
            </label>
            <label>
                <span>"Pause the job if more than this many come back"</span>
                <input type="number" name="canary_max_refailed" min="0" step="1" placeholder="0" />
            </label>
            <span class="dim small">
                "The rest is published only if the canary passes; otherwise the job pauses itself and says why."
            </span>
        </fieldset>
    }
}
