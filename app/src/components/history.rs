use leptos::prelude::*;
use redrive_core::actions::HistoryEvent;

use crate::display::format_time;
use crate::query;

/// What a history event's `kind` means, in words.
fn describe(kind: &str) -> &'static str {
    match kind {
        "ingested" => "ingested",
        "replay_requested" => "replay requested",
        "published" => "published",
        "replay_failed" => "replay failed",
        "re_failed" => "came back after the replay (failed again)",
        "replay_cancelled" => "replay cancelled",
        "replay_skipped" => "replay skipped (transform)",
        "deleted" => "deleted",
        "restored" => "restored",
        "label_added" => "label added",
        "label_removed" => "label removed",
        "note_set" => "note set",
        "note_cleared" => "note cleared",
        "group_label_added" => "group label added",
        "group_label_removed" => "group label removed",
        "group_note_set" => "group note set",
        "group_note_cleared" => "group note cleared",
        _ => "event",
    }
}

/// One dead letter's own history, oldest first: ingested, replay requested by whom, published
/// at which partition and offset, deleted, restored, its labels and note and its group's. Every field is stored text, rendered as
/// text.
#[component]
pub fn History(events: Vec<HistoryEvent>) -> impl IntoView {
    if events.is_empty() {
        return view! { <p class="dim">"No history recorded."</p> }.into_any();
    }
    let rows = events
        .into_iter()
        .map(|e| {
            let words = describe(&e.kind);
            // An unknown kind is shown as stored, so nothing is hidden.
            let kind = if words == "event" {
                e.kind.clone()
            } else {
                words.to_string()
            };
            let job = e.job_id.clone().map(|j| {
                let href = format!("/jobs/{}", query::encode(&j));
                view! { <a class="mono" href=href>"job"</a> }
            });
            view! {
                <tr class=format!("event-{}", e.kind)>
                    <td class="mono nowrap">{format_time(e.at_ms)}</td>
                    <td class="nowrap">
                        <span class="event-kind">{kind}</span>
                    </td>
                    <td class="nowrap">{e.actor.clone().unwrap_or_default()}</td>
                    <td class="event-detail">{e.detail.clone().unwrap_or_default()}</td>
                    <td>{job}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data history">
            <thead>
                <tr>
                    <th class="col-time">"When (UTC)"</th>
                    <th>"What"</th>
                    <th>"Who"</th>
                    <th>"Detail"</th>
                    <th>"Job"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}
