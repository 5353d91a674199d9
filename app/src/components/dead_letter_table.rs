use leptos::prelude::*;
use redrive_core::search::MatchField;
use redrive_core::DeadLetterSummary;

use super::{LabelChips, MalformedBadge, Picked, StatusBadge, TierBadge};
use crate::display::{format_time, shorten};

/// Longest error message shown in a list cell; the whole message is in the cell's tooltip and
/// on the detail page.
const MESSAGE_CHARS: usize = 140;

/// The dead-letter list: one row per dead letter, newest first, each linking to its detail.
/// With `picked` (a role that may act), each row has a checkbox `ids[]` for the list's action
/// form, and the header a select-all box (hydrated pages only).
#[component]
pub fn DeadLetterTable(
    items: Vec<DeadLetterSummary>,
    #[prop(optional)] picked: Option<Picked>,
) -> impl IntoView {
    if items.is_empty() {
        return view! { <p class="empty-state">"No dead letters match this filter."</p> }
            .into_any();
    }
    let ids: Vec<i64> = items.iter().map(|d| d.id).collect();
    let rows = items
        .into_iter()
        .map(|d| view! { <DeadLetterRow d=d picked=picked /> })
        .collect_view();
    let pick_all = picked.map(|p| {
        let all = ids.clone();
        view! {
            <th class="pick">
                <input
                    type="checkbox"
                    class="js-only"
                    aria-label="Select every dead letter on this page"
                    title="Select every dead letter on this page"
                    prop:checked=move || p.has_all(&ids)
                    on:change=move |ev| p.set_all(&all, event_target_checked(&ev))
                />
            </th>
        }
    });
    view! {
        <table class="data dead-letters">
            <thead>
                <tr>
                    {pick_all}
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
fn DeadLetterRow(d: DeadLetterSummary, picked: Option<Picked>) -> impl IntoView {
    let id = d.id;
    let href = format!("/dead-letters/{id}");
    let pick = picked.map(|p| {
        view! {
            <td class="pick">
                <input
                    type="checkbox"
                    name="ids[]"
                    value=id
                    aria-label=format!("Select dead letter {id}")
                    prop:checked=move || p.has(id)
                    on:change=move |ev| p.set(id, event_target_checked(&ev))
                />
            </td>
        }
    });
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
    // A search match in the message replaces the shortened message with the excerpt around
    // it; a match elsewhere is a line of its own under the message, naming the field.
    let in_message = d
        .search_match
        .as_ref()
        .is_some_and(|m| m.field == MatchField::Message);
    let message = (!in_message).then(|| shorten(&message_full, MESSAGE_CHARS));
    let excerpt = d.search_match.clone().map(|m| {
        let field = m.field;
        let body = view! {
            {m.cut_before.then_some("…")}
            {m.before}
            <mark>{m.matched}</mark>
            {m.after}
            {m.cut_after.then_some("…")}
        };
        if field == MatchField::Message {
            view! {
                <div class="message search-match" data-match-field=field.as_str() title=message_full.clone()>
                    {body}
                </div>
            }
            .into_any()
        } else {
            view! {
                <div class="search-match mono small" data-match-field=field.as_str()>
                    <span class="dim match-field">{field.label()} ": "</span>
                    {body}
                </div>
            }
            .into_any()
        }
    });
    let retries = d.retry_count.map(|r| r.to_string()).unwrap_or_default();
    let labelled = !(d.labels.is_empty() && d.group_labels.is_empty());
    let chips = labelled.then(|| {
        view! {
            <div class="labels">
                <LabelChips labels=d.labels.clone() />
                <LabelChips labels=d.group_labels.clone() group=true />
            </div>
        }
    });
    view! {
        <tr data-id=id>
            {pick}
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
                {message.map(|m| view! { <div class="message" title=message_full>{m}</div> })}
                {excerpt}
                {chips}
            </td>
            <td class="num mono">{retries}</td>
            <td class="nowrap">
                <StatusBadge status=d.status />
                " "
                <TierBadge tier=d.tier />
                {d.malformed.then(|| view! { " " <MalformedBadge /> })}
                {(d.repeat_failures > 0).then(|| view! {
                    " "
                    <span class="badge came-back" title="Came back after a replay: how many times">
                        {format!("came back ×{}", d.repeat_failures)}
                    </span>
                })}
            </td>
        </tr>
    }
}
