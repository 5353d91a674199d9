use leptos::prelude::*;
use redrive_core::ErrorGroup;

use super::LabelChips;
use crate::api::{HourlyTrend, TrendWindow};
use crate::components::Sparkline;
use crate::display::{format_time, shorten};
use crate::query;

/// Longest example message shown in a cell.
const MESSAGE_CHARS: usize = 160;

/// Error groups, largest first; each links to the list narrowed to its fingerprint (keeping
/// the rest of the current filter, given as `filter`). `trends` (arrivals per bucket over
/// `window`: the filter's time range, else the last 24 h) and `new` (first seen in the last
/// 24 h) are in the same order as `groups`.
#[component]
pub fn ErrorGroupTable(
    groups: Vec<ErrorGroup>,
    #[prop(optional)] trends: Vec<HourlyTrend>,
    #[prop(optional)] window: TrendWindow,
    #[prop(optional)] new: Vec<bool>,
    filter: Vec<(String, String)>,
) -> impl IntoView {
    if groups.is_empty() {
        return view! { <p class="empty-state">"No error groups match this filter."</p> }
            .into_any();
    }
    let span = if window.ranged {
        format!(
            "from {} to {} UTC",
            format_time(window.start_ms),
            format_time(window.end_ms)
        )
    } else {
        "in the last 24 h".to_string()
    };
    let (heading, heading_title) = if window.ranged {
        let mut t = format!("Arrivals of each error group {span}");
        if window.cut {
            t.push_str(&format!(
                " (hourly counts are kept {} days: the range's older part is not drawn)",
                window.kept_ms / (24 * 3_600_000)
            ));
        }
        ("In the range", t)
    } else {
        (
            "Last 24 h",
            "Arrivals of each error group per hour in the last 24 h".to_string(),
        )
    };
    let rows = groups
        .into_iter()
        .enumerate()
        .map(|(i, g)| {
            let trend = trends.get(i).cloned().unwrap_or_default();
            let is_new = new.get(i).copied().unwrap_or(false);
            let mut pairs: Vec<(&str, &str)> = query::filter_only(&filter)
                .into_iter()
                .filter(|(k, _)| *k != "fingerprint")
                .collect();
            pairs.push(("fingerprint", g.fingerprint.as_str()));
            let href = query::href("/", pairs);
            let class = g
                .error_class
                .clone()
                .unwrap_or_else(|| "(no error class)".into());
            let example_full = g.example_message.clone().unwrap_or_default();
            let example = shorten(&example_full, MESSAGE_CHARS);
            let triage_href = format!("/groups/{}", query::encode(&g.fingerprint));
            let note = g.note.clone().map(|n| {
                let short = shorten(&n, MESSAGE_CHARS);
                view! { <div class="note small" title=n>{short}</div> }
            });
            let labels = g.labels.clone();
            view! {
                <tr>
                    <td class="num mono count">{g.count}</td>
                    <td class="error-cell">
                        {is_new.then(|| view! { <span class="badge new" title="error group first seen in the last 24 h">"new group"</span> " " })}
                        <a class="mono error-class" href=href.clone()>{class}</a>
                        <div class="message" title=example_full>{example}</div>
                    </td>
                    <td class="triage-cell">
                        <div class="labels"><LabelChips labels=labels group=true /></div>
                        {note}
                        <a class="small" href=triage_href>"labels and note"</a>
                    </td>
                    <td>
                        <Sparkline
                            start_ms=trend.start_ms
                            bucket_ms=window.bucket_ms
                            counts=trend.counts
                            span=span.clone()
                        />
                    </td>
                    <td class="mono nowrap">{format_time(g.first_seen_ms)}</td>
                    <td class="mono nowrap">{format_time(g.last_seen_ms)}</td>
                    <td class="mono">
                        <a href=href>{g.fingerprint.clone()}</a>
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data groups">
            <thead>
                <tr>
                    <th class="num">"Count"</th>
                    <th>"Error"</th>
                    <th>"Labels and note"</th>
                    <th title=heading_title>{heading}</th>
                    <th>"First seen (UTC)"</th>
                    <th>"Last seen (UTC)"</th>
                    <th>"Fingerprint"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}
