//! A lag-gated replay job's gate on its page (`docs/replay.md`, "Lag-aware replay"): the
//! consumer group, the limit, the lag last read and when, and whether the relay holds the
//! job back or publishes.

use leptos::prelude::*;
use redrive_core::actions::ReplayJob;

use crate::display::format_time;

/// The job's lag gate section; nothing for a job without one. Live with the page (the job
/// page refetches the job every second while it runs).
#[component]
pub fn JobLagGate(job: ReplayJob) -> impl IntoView {
    let gate = job.options.lag_gate.clone()?;
    let lag = job.lag.clone();
    let active = job.status.is_active();
    let lag_text = match lag.records {
        Some(n) => format!("{n} records behind"),
        None => "not read yet".to_string(),
    };
    let read_at = lag
        .read_at_ms
        .map(|t| format!(" (read {} UTC)", format_time(t)))
        .unwrap_or_default();
    let state = match (lag.held_since_ms, active) {
        (_, false) => None,
        (Some(since), true) => Some(view! {
            <p class="lag-held">
                <strong>"Held back"</strong>
                {format!(
                    " since {} UTC: nothing is published while the group is {} or more records behind{}.",
                    format_time(since),
                    gate.max_lag,
                    if lag.error.is_some() { ", or its lag cannot be read" } else { "" }
                )}
            </p>
        }
        .into_any()),
        (None, true) if lag.read_at_ms.is_some() => Some(view! {
            <p class="lag-publishing">
                {format!(
                    "Publishing: at most {} more records until the next reading.",
                    (i64::try_from(gate.max_lag).unwrap_or(i64::MAX) - lag.records.unwrap_or(0)).max(0)
                )}
            </p>
        }
        .into_any()),
        (None, true) => None,
    };
    let error = lag.error.map(|e| {
        view! {
            <p class="lag-error notice">"The lag cannot be read: " <span class="mono">{e}</span></p>
        }
    });
    Some(view! {
        <section class="job-lag-gate">
            <h2>"Lag gate"</h2>
            <p>
                "Consumer group " <strong class="mono lag-group">{gate.group.clone()}</strong>
                {format!(", at most {} records behind on the target topics. ", gate.max_lag)}
                <span class="lag-records">{lag_text}</span>
                <span class="dim">{read_at}</span>
            </p>
            {state}
            {error}
        </section>
    })
}
