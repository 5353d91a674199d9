//! `/overview`: the first page after sign-in. Per DLQ topic and per source topic: live count,
//! new in the last hour / 24 h, oldest age, replayed / failed / deleted counts, new error
//! groups; a dead-letter rate chart (per minute over 6 h, or per hour over 7 days); replay
//! jobs in progress; error groups first seen in the last 24 h. Every number links into the
//! list filtered to exactly what it counts. Read from the maintained aggregates only
//! (`docs/stats.md`), so it costs the same at 10M rows as at 10.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::{BadQuery, LoadError};
use crate::api::Listing;
use crate::components::RateChart;
use crate::display::caps::NAME_BYTES;
use crate::display::{format_time, visible};
use crate::http_status::HttpStatus;
use crate::overview_api::{get_overview, ChartRange, Overview, TopicRow, OVERVIEW_TOPIC_CAP};
use crate::query::href;
use crate::wire;

/// Which table a row belongs to: its filter parameter.
#[derive(Clone, Copy)]
enum Kind {
    Dlq,
    Source,
}

impl Kind {
    fn param(self) -> &'static str {
        match self {
            Kind::Dlq => "dlq_topic",
            Kind::Source => "source_topic",
        }
    }
}

/// "3 h 12 min", "5 min", "2 d 4 h" for an age in ms.
pub fn age_text(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    let (d, h, m) = (s / 86_400, (s % 86_400) / 3600, (s % 3600) / 60);
    if d > 0 {
        format!("{d} d {h} h")
    } else if h > 0 {
        format!("{h} h {m} min")
    } else if m > 0 {
        format!("{m} min")
    } else {
        format!("{s} s")
    }
}

/// A count linking to the list under `pairs`; 0 is plain text (nothing to see there).
fn count_link(n: i64, link: Option<String>) -> AnyView {
    match link {
        Some(h) if n > 0 => view! { <a class="num" href=h>{n.to_string()}</a> }.into_any(),
        _ => view! { <span class="num dim">{n.to_string()}</span> }.into_any(),
    }
}

#[component]
fn TopicTable(
    caption: &'static str,
    kind: Kind,
    rows: Vec<TopicRow>,
    more: usize,
    hour_since_ms: i64,
    day_since_ms: i64,
    at_ms: i64,
) -> impl IntoView {
    let hour = hour_since_ms.to_string();
    let day = day_since_ms.to_string();
    let body = rows
        .into_iter()
        .map(|r| {
            // Links carry the exact stored topic (`filter_value`), the page shows `name`
            // (cut, hidden characters marked). Dead letters without a source topic cannot be
            // filtered for: no links there.
            let exact = r.filter_value.clone();
            let link = |extra: &[(&str, &str)]| {
                exact.as_deref().map(|n| {
                    let mut pairs = vec![(kind.param(), n)];
                    pairs.extend_from_slice(extra);
                    href("/", pairs)
                })
            };
            let oldest = r.oldest_live_ms.map(|ms| {
                let to = (ms + 1).to_string();
                let title = format!("{} UTC", format_time(ms));
                let text = age_text(at_ms - ms);
                match link(&[("to", to.as_str())]) {
                    Some(h) => view! { <a href=h title=title>{text}</a> }.into_any(),
                    None => view! { <span title=title>{text}</span> }.into_any(),
                }
            });
            let label = match (&r.name, link(&[])) {
                (Some(n), Some(h)) => view! { <a href=h class="mono">{n.clone()}</a> }.into_any(),
                (Some(n), None) => view! { <span class="mono">{n.clone()}</span> }.into_any(),
                (None, _) => view! { <span class="dim">"(no source topic)"</span> }.into_any(),
            };
            view! {
                <tr>
                    <th scope="row">{label}</th>
                    <td>{count_link(r.live, link(&[]))}</td>
                    <td>{count_link(r.new_last_hour, link(&[("from", hour.as_str())]))}</td>
                    <td>{count_link(r.new_last_24h, link(&[("from", day.as_str())]))}</td>
                    <td class="nowrap">{oldest.unwrap_or_else(|| view! { <span class="dim">"—"</span> }.into_any())}</td>
                    <td>{count_link(r.new, link(&[("status", "new")]))}</td>
                    <td>{count_link(r.replay_failed, link(&[("status", "replay_failed")]))}</td>
                    <td>{count_link(r.replayed, link(&[("status", "replayed")]))}</td>
                    <td>{count_link(r.re_failed, link(&[("status", "re_failed")]))}</td>
                    <td>{count_link(r.deleted, link(&[("status", "deleted")]))}</td>
                    <td class="num">{r.new_groups_24h.to_string()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="overview">
            <caption>{caption}</caption>
            <thead>
                <tr>
                    <th scope="col">"Topic"</th>
                    <th scope="col">"Live"</th>
                    <th scope="col">"New, 1 h"</th>
                    <th scope="col">"New, 24 h"</th>
                    <th scope="col">"Oldest"</th>
                    <th scope="col">"Untouched"</th>
                    <th scope="col">"Replay failed"</th>
                    <th scope="col">"Replayed"</th>
                    <th scope="col" title="Replayed, then the record came back as a new dead letter">"Came back"</th>
                    <th scope="col">"Deleted"</th>
                    <th scope="col">"New groups"</th>
                </tr>
            </thead>
            <tbody>{body}</tbody>
        </table>
        {(more > 0)
            .then(|| {
                view! {
                    <p class="dim more">
                        {format!(
                            "{more} more topics are not shown (the {OVERVIEW_TOPIC_CAP} largest are); use the list's filter for them."
                        )}
                    </p>
                }
            })}
    }
}

#[component]
fn OverviewBody(o: Overview) -> impl IntoView {
    let hour = o.hour_since_ms.to_string();
    let day = o.day_since_ms.to_string();
    let t = o.totals.clone();
    let range = o.range;
    let bucket_ms = range.bucket_ms();
    let chart_topic = o.chart_topic.clone();
    let bar_topic = chart_topic.clone();
    let bar_href = Callback::new(move |(from, to): (i64, i64)| {
        let (f, t) = (from.to_string(), to.to_string());
        let mut pairs = vec![("from", f.as_str()), ("to", t.as_str())];
        if let Some(d) = &bar_topic {
            pairs.push(("dlq_topic", d.as_str()));
        }
        href("/", pairs)
    });
    let range_link = |r: ChartRange, text: &'static str| {
        let mut pairs = vec![("range", r.as_str())];
        if let Some(d) = &chart_topic {
            pairs.push(("dlq_topic", d.as_str()));
        }
        let current = r == range;
        view! {
            <a href=href("/overview", pairs) aria-current=current.then_some("true")>
                {text}
            </a>
        }
    };
    let chart_label = match &o.chart_topic {
        Some(d) => format!("Dead letters arriving in {}", visible::name(d, NAME_BYTES)),
        None => "Dead letters arriving".to_string(),
    };
    let new_groups = o
        .new_groups
        .iter()
        .map(|g| {
            let h = href("/", [("fingerprint", g.fingerprint.as_str())]);
            view! {
                <li>
                    <span class="badge new" title="error group first seen in the last 24 h">"new group"</span>
                    " "
                    <a href=h class="mono">
                        {g.error_class.clone().unwrap_or_else(|| "(no error class)".into())}
                    </a>
                    <span class="dim">
                        {format!(
                            " · {} stored · first {} UTC · in {}",
                            g.stored,
                            format_time(g.first_seen_ms),
                            g.dlq_topic,
                        )}
                    </span>
                </li>
            }
        })
        .collect_view();
    view! {
        <section class="tiles" aria-label="Totals">
            <div class="tile">
                <span class="label">"Live dead letters"</span>
                {count_link(t.live, Some("/".into()))}
            </div>
            <div class="tile">
                <span class="label">"New in the last hour"</span>
                {count_link(t.new_last_hour, Some(href("/", [("from", hour.as_str())])))}
            </div>
            <div class="tile">
                <span class="label">"New in 24 h"</span>
                {count_link(t.new_last_24h, Some(href("/", [("from", day.as_str())])))}
            </div>
            <div class="tile">
                <span class="label">"Oldest live"</span>
                <span class="num">
                    {t.oldest_live_ms.map(|ms| age_text(o.at_ms - ms)).unwrap_or_else(|| "—".into())}
                </span>
            </div>
            <div class="tile">
                <span class="label">"Replay failed"</span>
                {count_link(t.replay_failed, Some(href("/", [("status", "replay_failed")])))}
            </div>
            <div class="tile">
                <span class="label">"Replayed"</span>
                {count_link(t.replayed, Some(href("/", [("status", "replayed")])))}
            </div>
            <div class="tile">
                <span class="label">"Replayed, came back"</span>
                {count_link(t.re_failed, Some(href("/", [("status", "re_failed")])))}
            </div>
            <div class="tile">
                <span class="label">"Deleted"</span>
                {count_link(t.deleted, Some(href("/", [("status", "deleted")])))}
            </div>
            <div class="tile">
                <span class="label">"Replay jobs in progress"</span>
                {count_link(o.jobs_in_progress, Some("/jobs".into()))}
            </div>
            <div class="tile">
                <span class="label">"New error groups, 24 h"</span>
                {count_link(o.new_groups_total, Some("/groups".into()))}
            </div>
        </section>
        <section aria-label="Dead-letter rate">
            <h2>"Dead-letter rate"</h2>
            <p class="range">
                {range_link(ChartRange::SixHours, "per minute, 6 h")}
                " · "
                {range_link(ChartRange::SevenDays, "per hour, 7 days")}
                {o.chart_topic.clone().map(|_| view! { " · " <a href=href("/overview", [("range", range.as_str())])>"all topics"</a> })}
            </p>
            <RateChart series=o.chart.clone() bucket_ms=bucket_ms label=chart_label href=bar_href />
        </section>
        <section aria-label="By DLQ topic">
            <TopicTable
                caption="By DLQ topic"
                kind=Kind::Dlq
                rows=o.dlq_topics.clone()
                more=o.dlq_topics_more
                hour_since_ms=o.hour_since_ms
                day_since_ms=o.day_since_ms
                at_ms=o.at_ms
            />
            <p class="dim">
                "Chart one DLQ topic: "
                {o
                    .dlq_topics
                    .iter()
                    .filter_map(|r| Some((r.filter_value.clone()?, r.name.clone()?)))
                    .map(|(exact, shown)| {
                        let h = href("/overview", [("range", range.as_str()), ("dlq_topic", exact.as_str())]);
                        view! { <a class="mono" href=h>{shown}</a> " " }
                    })
                    .collect_view()}
            </p>
        </section>
        <section aria-label="By source topic">
            <TopicTable
                caption="By source topic"
                kind=Kind::Source
                rows=o.source_topics.clone()
                more=o.source_topics_more
                hour_since_ms=o.hour_since_ms
                day_since_ms=o.day_since_ms
                at_ms=o.at_ms
            />
        </section>
        <section aria-label="New error groups">
            <h2>"Error groups first seen in the last 24 h"</h2>
            {if o.new_groups.is_empty() {
                view! { <p class="dim">"None: every error group was seen before."</p> }.into_any()
            } else {
                view! {
                    <ul class="new-groups">{new_groups}</ul>
                    {(o.new_groups_total > o.new_groups.len() as i64)
                        .then(|| view! {
                            <p class="dim more">
                                {format!("{} more new groups; see ", o.new_groups_total - o.new_groups.len() as i64)}
                                <a href="/groups">"Error groups"</a>
                            </p>
                        })}
                }
                    .into_any()
            }}
            <p class="dim">{format!("{} error groups in all.", o.error_groups_total)}</p>
        </section>
        {o.truncated.then(|| view! {
            <p class="dim">"The store holds more topic combinations than the overview reads at once; the smallest are left out."</p>
        })}
        <p class="dim">{format!("As of {} UTC.", format_time(o.at_ms))}</p>
    }
}

/// `/overview` (see the module docs).
#[component]
pub fn OverviewPage() -> impl IntoView {
    let search = use_location().search;
    let data = wire::resource(move || search.get(), get_overview);
    let status = HttpStatus::current();
    view! {
        <Title text="Overview · redrive" />
        <h1>"Overview"</h1>
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let status = status.clone();
                Suspend::new(async move {
                    match data.await {
                        Ok(Listing::Found(o)) => view! { <OverviewBody o=o /> }.into_any(),
                        Ok(Listing::BadQuery(message)) => {
                            status.set(400);
                            view! { <BadQuery message=message reset="/overview" /> }.into_any()
                        }
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
