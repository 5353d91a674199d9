use leptos::prelude::*;
use leptos_meta::Title;

use super::LoadError;
use crate::actions_api::list_replay_jobs;
use crate::components::{job_settled, JobStatusBadge};
use crate::display::format_time;
use crate::http_status::HttpStatus;
use crate::query;
use crate::wire;

/// `/jobs`: the most recent replay jobs, newest first, each linking to its page, with its
/// counts (came back: published records that came back as dead letters, as on its page).
#[component]
pub fn JobsPage() -> impl IntoView {
    let jobs = wire::resource(|| (), |_| list_replay_jobs());
    let status = HttpStatus::current();
    view! {
        <Title text="Replay jobs · redrive" />
        <h1>"Replay jobs"</h1>
        <Suspense fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let status = status.clone();
                Suspend::new(async move {
                    match jobs.await {
                        Ok(list) if list.is_empty() => view! {
                            <p class="empty-state">
                                "No replay jobs yet. Pick dead letters on the "
                                <a href="/">"list"</a>
                                " and replay them."
                            </p>
                        }
                        .into_any(),
                        Ok(list) => {
                            let rows = list
                                .into_iter()
                                .map(|j| {
                                    let href = format!("/jobs/{}", query::encode(&j.id));
                                    let short: String = j.id.chars().take(8).collect();
                                    let settled = job_settled(&j);
                                    view! {
                                        <tr>
                                            <td class="mono nowrap">{format_time(j.created_at_ms)}</td>
                                            <td>{j.created_by.clone()}</td>
                                            <td class="num mono">
                                                {j.total}
                                                {j.queueing.is_some().then(|| view! {
                                                    <span class="dim small">" so far"</span>
                                                })}
                                            </td>
                                            <td class="num mono">{j.published}</td>
                                            <td class="num mono">{j.failed}</td>
                                            <td class="num mono">{j.refailed}</td>
                                            <td class="nowrap">
                                                <JobStatusBadge status=j.status />
                                                {(j.total > 0 && j.status.is_active()).then(|| view! {
                                                    " "
                                                    <progress max=j.total value=settled></progress>
                                                })}
                                                {j.queueing.is_some().then(|| view! {
                                                    " "
                                                    <span
                                                        class="dim small queueing-tag"
                                                        title="Its rows are still being queued: the total grows until the last chunk."
                                                    >
                                                        "still queueing"
                                                    </span>
                                                })}
                                                {j.canary.as_ref().map(|c| view! {
                                                    " "
                                                    <span class="dim small canary-tag">{format!("canary {}", c.state.as_str())}</span>
                                                })}
                                            </td>
                                            <td class="mono">
                                                {match j.target_topic.clone() {
                                                    Some(t) => view! { <span>{t}</span> }.into_any(),
                                                    None => view! { <span class="dim">"source"</span> }.into_any(),
                                                }}
                                            </td>
                                            <td>
                                                <a class="mono" href=href>{short}</a>
                                            </td>
                                        </tr>
                                    }
                                })
                                .collect_view();
                            view! {
                                <table class="data jobs">
                                    <thead>
                                        <tr>
                                            <th class="col-time">"Created (UTC)"</th>
                                            <th>"By"</th>
                                            <th class="num">"Total"</th>
                                            <th class="num">"Published"</th>
                                            <th class="num">"Failed"</th>
                                            <th
                                                class="num"
                                                title="Published, then the record came back as a new dead letter"
                                            >
                                                "Came back"
                                            </th>
                                            <th>"Status"</th>
                                            <th>"Target"</th>
                                            <th>"Job"</th>
                                        </tr>
                                    </thead>
                                    <tbody>{rows}</tbody>
                                </table>
                            }
                            .into_any()
                        }
                        Err(error) => {
                            status.set(503);
                            view! { <LoadError error=error /> }.into_any()
                        }
                    }
                })
            }}
        </Suspense>
    }
}
