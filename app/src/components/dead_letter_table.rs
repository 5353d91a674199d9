use leptos::prelude::*;
use redrive_core::DeadLetterSummary;

use super::{MalformedBadge, StatusBadge};
use crate::display::{format_time, shorten};

/// Longest error message shown in a list cell; the whole message is in the cell's tooltip and
/// on the detail page.
const MESSAGE_CHARS: usize = 140;

/// The dead-letter list: one row per dead letter, newest first, each linking to its detail.
#[component]
pub fn DeadLetterTable(items: Vec<DeadLetterSummary>) -> impl IntoView {
    if items.is_empty() {
        return view! { <p class="empty-state">"No dead letters match this filter."</p> }
            .into_any();
    }
    let rows = items
        .into_iter()
        .map(|d| view! { <DeadLetterRow d=d /> })
        .collect_view();
    view! {
        <table class="data dead-letters">
            <thead>
                <tr>
                    <th class="col-time">"Dead-lettered (UTC)"</th>
                    <th>"Source"</th>
                    <th>"Error"</th>
                    <th class="num">"Retries"</th>
                    <th>"Status"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

#[component]
fn DeadLetterRow(d: DeadLetterSummary) -> impl IntoView {
    let href = format!("/dead-letters/{}", d.id);
    let source = match &d.source_topic {
        Some(topic) => {
            let position = match (d.source_partition, d.source_offset) {
                (Some(p), Some(o)) => format!("p{p} @ {o}"),
                (Some(p), None) => format!("p{p}"),
                (None, Some(o)) => format!("@ {o}"),
                (None, None) => String::new(),
            };
            view! {
                <span class="topic">{topic.clone()}</span>
                " "
                <span class="mono dim">{position}</span>
            }
            .into_any()
        }
        None => view! { <span class="dim">"unknown"</span> }.into_any(),
    };
    let dlq = format!("{} p{} @ {}", d.dlq_topic, d.dlq_partition, d.dlq_offset);
    let no_error = d.error_class.is_none() && d.error_message.is_none();
    let class = d.error_class.clone().unwrap_or_default();
    let message_full = d.error_message.clone().unwrap_or_default();
    let message = shorten(&message_full, MESSAGE_CHARS);
    let retries = d.retry_count.map(|r| r.to_string()).unwrap_or_default();
    view! {
        <tr>
            <td class="mono nowrap">
                <a href=href>{format_time(d.dead_lettered_at_ms)}</a>
            </td>
            <td>
                <div>{source}</div>
                <div class="mono dim small" title="DLQ topic, partition and offset">{dlq}</div>
            </td>
            <td class="error-cell">
                {no_error.then(|| view! { <span class="dim">"no error recorded"</span> })}
                <div class="mono error-class">{class}</div>
                <div class="message" title=message_full>{message}</div>
            </td>
            <td class="num mono">{retries}</td>
            <td class="nowrap">
                <StatusBadge status=d.status />
                {d.malformed.then(|| view! { " " <MalformedBadge /> })}
            </td>
        </tr>
    }
}
