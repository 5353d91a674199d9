use leptos::prelude::*;
use redrive_core::actions::{JobStatus, ReplayJob};

use crate::display::format_time;

/// A replay job's state as a coloured badge.
#[component]
pub fn JobStatusBadge(status: JobStatus) -> impl IntoView {
    view! { <span class=format!("badge job-{}", status.as_str())>{status.as_str()}</span> }
}

/// Rows settled so far: published, failed, released by a cancel, or skipped by the job's
/// transform script.
pub fn settled(job: &ReplayJob) -> i64 {
    job.published + job.failed + job.cancelled + job.transform.skipped
}

/// The measured publish rate, msgs/s, over the time the relay has worked on the job (until
/// now while it runs); `None` before it started.
pub fn measured_rate(job: &ReplayJob, now_ms: i64) -> Option<f64> {
    let start = job.started_at_ms?;
    let end = job.finished_at_ms.unwrap_or(now_ms);
    let secs = (end - start) as f64 / 1000.0;
    (secs > 0.0).then(|| job.published as f64 / secs)
}

/// While the job's bulk action still queues its rows (`ReplayJob::queueing`): how far it has
/// come, when publishing starts, and whether it was interrupted.
fn queueing_notice(job: &ReplayJob, as_of_ms: i64) -> Option<impl IntoView> {
    let q = job.queueing?;
    let when = if job.status == JobStatus::Preparing {
        if job.options.canary.is_some() {
            " Publishing starts when every row is queued: the canary is a share of the final total."
        } else {
            " Publishing starts when every row is queued: per-key order needs the whole outbox."
        }
    } else {
        " Rows are published as they are queued; the total grows until every row is queued."
    };
    let stalled = q.interrupted(as_of_ms).then(|| {
        format!(
            " No chunk since {} UTC: the queueing was interrupted, and the server resumes it \
             from there within a minute.",
            format_time(q.updated_at_ms)
        )
    });
    Some(view! {
        <div class="notice queueing" role="status">
            <strong>"Still queueing."</strong>
            {format!(
                " {} queued so far in {} chunks; dead letters up to #{} of #{} swept.",
                job.total, q.chunks, q.cursor_id, q.max_id
            )}
            {when}
            {stalled}
        </div>
    })
}

/// A job's progress: the bar (`<progress>`, published + failed + cancelled of total), the
/// counts, the timing and rates, and — while Kafka is unreachable — that the relay is waiting
/// and its last error.
#[component]
pub fn JobProgress(
    job: ReplayJob,
    /// When the server read the job, epoch ms (the "now" of a running job's rate: the server's
    /// clock, so the hydrated page shows what the server rendered).
    as_of_ms: i64,
) -> impl IntoView {
    let done = settled(&job);
    let total = job.total;
    let percent = if total > 0 {
        (done as f64 * 100.0 / total as f64).floor() as i64
    } else {
        100
    };
    let rate = measured_rate(&job, as_of_ms)
        .map(|r| format!("{r:.0} msgs/s"))
        .unwrap_or_else(|| "—".to_string());
    let limit = job
        .rate_per_sec
        .map(|r| format!("{r} msgs/s"))
        .unwrap_or_else(|| "none".to_string());
    let target = job
        .target_topic
        .clone()
        .unwrap_or_else(|| "each record's source topic".to_string());
    let time = |t: Option<i64>| {
        t.map(|t| format!("{} UTC", format_time(t)))
            .unwrap_or_else(|| "—".to_string())
    };
    let waiting = (job.status == JobStatus::Waiting).then(|| {
        let err = job
            .last_error
            .clone()
            .unwrap_or_else(|| "no error reported yet".to_string());
        view! {
            <div class="notice waiting" role="status">
                <strong>"Waiting: Kafka is unreachable."</strong>
                " The relay backs off and resumes by itself. Last error: "
                <span class="mono">{err}</span>
            </div>
        }
    });
    let queueing = queueing_notice(&job, as_of_ms);
    let so_far = if job.queueing.is_some() {
        " so far"
    } else {
        ""
    };
    let last_error = (job.status != JobStatus::Waiting)
        .then(|| job.last_error.clone())
        .flatten();
    let skipped = (job.skipped > 0).then(|| {
        let without = job.skipped_without_target;
        let detail = if without > 0 {
            format!(
                "{} skipped ({without} without a source topic to replay to; the rest deleted \
                 or already waiting in another replay job)",
                job.skipped
            )
        } else {
            format!(
                "{} skipped (deleted, or already waiting in another replay job)",
                job.skipped
            )
        };
        view! {
            <dt>"Skipped"</dt>
            <dd>{detail}</dd>
        }
    });
    // Order and placement (`docs/replay.md`, "Per-key order", "Original partition").
    let order = if job.options.unordered {
        "none: every record independent (per-key order off)"
    } else {
        "per key: a key\u{2019}s records one at a time, in source order"
    };
    let partition = if job.options.original_partition {
        "each record\u{2019}s original partition (never remapped)"
    } else {
        "picked by the producer (key hash)"
    };
    // An empty job is complete: a full bar rather than an empty one.
    let (bar_max, bar_value) = if total > 0 { (total, done) } else { (1, 1) };
    view! {
        {waiting}
        {queueing}
        <div class="job-bar">
            <progress max=bar_max value=bar_value aria-label="Replay progress">
                {format!("{percent} %")}
            </progress>
            <span class="mono">
                <span class="job-settled">{done}</span>
                " of "
                <span class="job-total">{total}</span>
                {format!("{so_far} ({percent} %)")}
            </span>
        </div>
        <dl class="facts job-facts">
            <dt>"Status"</dt>
            <dd class="job-status">{job.status.as_str()}</dd>
            <dt>"Total"</dt>
            <dd class="mono">{total}{so_far}</dd>
            <dt>"Published"</dt>
            <dd class="mono job-published">{job.published}</dd>
            <dt>"Failed"</dt>
            <dd class="mono job-failed">{job.failed}</dd>
            {(job.cancelled > 0).then(|| view! {
                <dt>"Released by cancel"</dt>
                <dd class="mono">{job.cancelled}</dd>
            })}
            {skipped}
            <dt>"Target"</dt>
            <dd class="mono">{target}</dd>
            <dt>"Rate limit"</dt>
            <dd class="mono">{limit}</dd>
            <dt>"Order"</dt>
            <dd class="job-order">{order}</dd>
            <dt>"Partition"</dt>
            <dd class="job-partition">{partition}</dd>
            <dt>"Measured rate"</dt>
            <dd class="mono">{rate}</dd>
            <dt>"Requested"</dt>
            <dd>
                <span class="mono">{time(Some(job.created_at_ms))}</span>
                " by "
                <strong>{job.created_by.clone()}</strong>
            </dd>
            <dt>"Started"</dt>
            <dd class="mono">{time(job.started_at_ms)}</dd>
            <dt>"Finished"</dt>
            <dd class="mono">{time(job.finished_at_ms)}</dd>
            <dt>"Reason"</dt>
            <dd>{job.reason.clone().unwrap_or_else(|| "—".to_string())}</dd>
            {last_error.map(|e| view! {
                <dt>"Last error"</dt>
                <dd class="mono">{e}</dd>
            })}
        </dl>
    }
}
