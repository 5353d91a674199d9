use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_location, use_params_map};
use redrive_core::automation::version_diff::LineChange;
use redrive_core::automation::view::{VersionInfo, VersionText};

use super::{LoadError, NotFound};
use crate::automation_api::{get_rule_version, get_rule_versions, AutomationNotice};
use crate::display::format_time;
use crate::http_status::HttpStatus;
use crate::{query, wire};

/// `/automation/versions`: every saved version of the rule set, newest first (version,
/// origin, by, when, reason); the newest is active. Server-rendered; works without
/// JavaScript.
#[component]
pub fn RuleVersionsPage() -> impl IntoView {
    let data = wire::resource(|| (), |_| get_rule_versions());
    let status = HttpStatus::current();
    view! {
        <Title text="Rule set versions · redrive" />
        <p class="crumbs"><a href="/automation">"← Automation"</a></p>
        <h1>"Rule set versions"</h1>
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let status = status.clone();
                Suspend::new(async move {
                    match data.await {
                        Ok(v) => view! { <VersionList versions=v /> }.into_any(),
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
fn VersionList(versions: Vec<VersionInfo>) -> impl IntoView {
    if versions.is_empty() {
        return view! {
            <p class="empty-state">"No version yet: the rule set has never been saved."</p>
        }
        .into_any();
    }
    let newest = versions.first().map(|v| v.version);
    let rows = versions
        .into_iter()
        .map(|v| {
            let href = format!("/automation/versions/{}", v.version);
            let active = Some(v.version) == newest;
            view! {
                <tr data-version=v.version>
                    <td class="num"><a href=href>{v.version}</a> {active.then_some(" (active)")}</td>
                    <td>{v.origin.clone()}</td>
                    <td class="mono">{v.created_by.clone()}</td>
                    <td class="mono nowrap">{format_time(v.created_at_ms)}</td>
                    <td>{v.reason.clone().unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data versions">
            <thead>
                <tr>
                    <th class="num">"Version"</th>
                    <th>"Origin"</th>
                    <th>"By"</th>
                    <th class="col-time">"When (UTC)"</th>
                    <th>"Reason"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

/// `/automation/versions/:n`: one version's text and its line diff against version n-1.
#[component]
pub fn RuleVersionPage() -> impl IntoView {
    let params = use_params_map();
    let search = use_location().search;
    let n = move || params.with(|p| p.get_str("n").and_then(|s| s.trim().parse::<i64>().ok()));
    let data = wire::resource(n, |n| async move {
        match n {
            Some(n) => get_rule_version(n).await,
            None => Ok(None),
        }
    });
    let status = HttpStatus::current();
    let notice = move || {
        let pairs = query::parse(&search.get());
        AutomationNotice::parse(query::value(&pairs, "done")).map(AutomationNotice::sentence)
    };
    view! {
        <p class="crumbs"><a href="/automation/versions">"← Versions"</a></p>
        {move || notice().map(|n| view! { <p class="done-box" role="status">{n}</p> })}
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let status = status.clone();
                let label = params.with(|p| p.get("n").unwrap_or_default());
                Suspend::new(async move {
                    match data.await {
                        Ok(Some(v)) => view! { <Version v=v /> }.into_any(),
                        Ok(None) => {
                            status.set(404);
                            view! { <NotFound what=format!("rule set version {label}") /> }.into_any()
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

#[component]
fn Version(v: VersionText) -> impl IntoView {
    let VersionText { info, source, diff } = v;
    let title = format!("Rule set version {} · redrive", info.version);
    let n = info.version;
    let diff_view = match diff {
        None => view! {
            <p class="dim">{if n == 1 { "The first version: nothing to compare with." } else { "The version before it is not stored." }}</p>
        }
        .into_any(),
        Some(d) => {
            let summary = format!(
                "{} lines added, {} removed, against version {}{}.",
                d.added,
                d.removed,
                n - 1,
                if d.more > 0 { format!(" ({} more lines not shown)", d.more) } else { String::new() }
            );
            let lines = d
                .lines
                .into_iter()
                .map(|l| {
                    let (class, mark) = match l.change {
                        LineChange::Same => ("diff-same", "  "),
                        LineChange::Added => ("diff-added", "+ "),
                        LineChange::Removed => ("diff-removed", "- "),
                    };
                    view! { <div class=class>{format!("{mark}{}", l.text)}</div> }
                })
                .collect_view();
            view! {
                <p class="dim">{summary}</p>
                <pre class="mono diff" data-diff="">{lines}</pre>
            }
            .into_any()
        }
    };
    view! {
        <Title text=title />
        <h1>{format!("Rule set version {n}")}</h1>
        <p class="dim">
            {format!(
                "Saved by {} ({}) at {} UTC{}.",
                info.created_by,
                info.origin,
                format_time(info.created_at_ms),
                info.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
            )}
        </p>
        <h2>"Changes"</h2>
        {diff_view}
        <h2>"Text"</h2>
        <pre class="mono rule-source">{source}</pre>
    }
}
