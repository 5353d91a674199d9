use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;
use redrive_core::actions::{audit_action_label, AuditEntry, AUDIT_ACTIONS};
use redrive_core::filter::{format_time_input, parse_time};

use super::{BadQuery, LoadError};
use crate::actions_api::list_audit;
use crate::api::Listing;
use crate::display::{format_time, shorten};
use crate::http_status::HttpStatus;
use crate::query;
use crate::wire;

/// The audit page's filter names (what `GET /api/v1/audit` and the CSV export take too).
const AUDIT_FILTERS: [&str; 4] = ["actor", "action", "from", "to"];

/// Most ids linked one by one in a row; the rest are counted.
const IDS_SHOWN: usize = 12;

/// `/audit`: the append-only audit trail, newest first, filtered by actor, action and time
/// (kept in the URL), paged with "Older", exportable as CSV with the same filters.
#[component]
pub fn AuditPage() -> impl IntoView {
    let search = use_location().search;
    let page = wire::resource(move || search.get(), list_audit);
    let status = HttpStatus::current();
    view! {
        <Title text="Audit trail · redrive" />
        <h1>"Audit trail"</h1>
        <Suspense fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let pairs = query::parse(&search.get());
                let status = status.clone();
                Suspend::new(async move {
                    let body = match page.await {
                        Ok(Listing::Found(p)) => view! {
                            <AuditTable items=p.items />
                            <AuditPager pairs=pairs.clone() next_cursor=p.next_cursor />
                        }
                        .into_any(),
                        Ok(Listing::BadQuery(message)) => {
                            status.set(400);
                            view! { <BadQuery message=message reset="/audit" /> }.into_any()
                        }
                        Err(error) => {
                            status.set(503);
                            view! { <LoadError error=error /> }.into_any()
                        }
                    };
                    view! {
                        <AuditFilter pairs=pairs />
                        {body}
                    }
                })
            }}
        </Suspense>
    }
}

/// The filters of `pairs` (position dropped), for links that keep them.
fn filters(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs
        .iter()
        .filter(|(k, _)| AUDIT_FILTERS.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// A plain GET form: the filter lives in the URL.
#[component]
fn AuditFilter(pairs: Vec<(String, String)>) -> impl IntoView {
    let v = |name: &str| query::value(&pairs, name).to_string();
    let time = |name: &str| {
        let raw = v(name);
        parse_time(name, &raw).map(format_time_input).unwrap_or(raw)
    };
    let action = v("action");
    // Every action the audit trail holds (any other value typed into the URL still works).
    let mut names: Vec<String> = AUDIT_ACTIONS.iter().map(|s| s.to_string()).collect();
    if !action.is_empty() && !names.contains(&action) {
        names.push(action.clone());
    }
    let options = names
        .into_iter()
        .map(|a| {
            let selected = a == action;
            view! {
                <option value=a.clone() selected=selected>
                    {audit_action_label(&a)}
                </option>
            }
        })
        .collect_view();
    let csv = query::href("/api/v1/audit.csv", filters(&pairs));
    view! {
        <form class="filter-bar" method="get" action="/audit" role="search">
            <label>
                <span>"Who"</span>
                <input type="text" name="actor" value=v("actor") placeholder="user name" />
            </label>
            <label>
                <span>"Action"</span>
                <select name="action">
                    <option value="" selected=action.is_empty()>
                        "any"
                    </option>
                    {options}
                </select>
            </label>
            <label class="time">
                <span>"From (UTC)"</span>
                <input type="datetime-local" name="from" value=time("from") />
            </label>
            <label class="time">
                <span>"To (UTC)"</span>
                <input type="datetime-local" name="to" value=time("to") />
            </label>
            <div class="filter-actions">
                <button type="submit">"Apply"</button>
                <a class="button secondary" href="/audit">
                    "Reset"
                </a>
                <a class="button secondary" href=csv download="redrive-audit.csv">
                    "CSV"
                </a>
            </div>
        </form>
    }
}

/// The ids of an audit row (JSON array text), or `None` if it is not one.
fn parse_ids(text: &str) -> Option<Vec<i64>> {
    serde_json::from_str(text).ok()
}

/// The filter of an audit row (JSON object text) as `name = value` pairs, or `None`.
fn parse_filter(text: &str) -> Option<Vec<(String, String)>> {
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text).ok()?;
    Some(
        map.into_iter()
            .map(|(k, v)| {
                let v = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, v)
            })
            .collect(),
    )
}

/// What an audit row acted on: linked ids, the filter as given (with a link to the list it
/// names), or nothing.
#[component]
fn Target(ids: Option<String>, filter: Option<String>) -> impl IntoView {
    if let Some(text) = ids {
        return match parse_ids(&text) {
            Some(ids) => {
                let more = ids.len().saturating_sub(IDS_SHOWN);
                let links = ids
                    .into_iter()
                    .take(IDS_SHOWN)
                    .map(|id| {
                        view! { <a class="mono" href=format!("/dead-letters/{id}")>{id}</a> " " }
                    })
                    .collect_view();
                view! {
                    <span class="dim small">"ids "</span>
                    {links}
                    {(more > 0).then(|| view! { <span class="dim">{format!("and {more} more")}</span> })}
                }
                .into_any()
            }
            None => view! { <span class="mono small">{shorten(&text, 200)}</span> }.into_any(),
        };
    }
    if let Some(text) = filter {
        return match parse_filter(&text) {
            Some(pairs) if pairs.is_empty() => {
                view! { <span class="dim small">"filter: everything live"</span> }.into_any()
            }
            Some(pairs) => {
                let href = query::href("/", pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                let shown = pairs
                    .iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                view! {
                    <span class="dim small">"filter "</span>
                    <a class="mono small" href=href>{shorten(&shown, 200)}</a>
                }
                .into_any()
            }
            None => view! { <span class="mono small">{shorten(&text, 200)}</span> }.into_any(),
        };
    }
    view! { <span class="dim">"—"</span> }.into_any()
}

#[component]
fn AuditTable(items: Vec<AuditEntry>) -> impl IntoView {
    if items.is_empty() {
        return view! { <p class="empty-state">"No audit entries match this filter."</p> }
            .into_any();
    }
    let rows = items
        .into_iter()
        .map(|a| {
            let outcome_class = if a.outcome.starts_with("ok") {
                "outcome ok"
            } else if a.outcome == "denied" {
                "outcome denied"
            } else {
                "outcome failed"
            };
            let job = a.job_id.clone().map(|j| {
                let href = format!("/jobs/{}", query::encode(&j));
                let short: String = j.chars().take(8).collect();
                view! { <a class="mono" href=href>{short}</a> }
            });
            let agent = a.user_agent.clone().unwrap_or_default();
            let who = match a.via_token {
                Some(t) => format!("{} (token {t})", a.actor),
                None => a.actor.clone(),
            };
            view! {
                <tr class=format!("audit-{}", a.action)>
                    <td class="mono nowrap">{format_time(a.at_ms)}</td>
                    <td class="nowrap">{who}</td>
                    <td class="nowrap audit-action">{audit_action_label(&a.action)}</td>
                    <td class="num mono">{a.count}</td>
                    <td class="audit-target">
                        <Target ids=a.ids.clone() filter=a.filter.clone() />
                    </td>
                    <td class="audit-reason">
                        {a.reason.clone().unwrap_or_default()}
                        // What a label, note or export changed (JSON: before and after), cut.
                        {a.detail.clone().map(|d| {
                            let short = shorten(&d, 300);
                            view! { <div class="mono small audit-detail" title=d>{short}</div> }
                        })}
                    </td>
                    <td class="mono small">{a.client_ip.clone().unwrap_or_default()}</td>
                    <td class="small dim agent" title=agent.clone()>{shorten(&agent, 40)}</td>
                    <td class=outcome_class>{a.outcome.clone()}</td>
                    <td>{job}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data audit">
            <thead>
                <tr>
                    <th class="col-time">"When (UTC)"</th>
                    <th>"Who"</th>
                    <th>"Action"</th>
                    <th class="num">"Count"</th>
                    <th>"Dead letters"</th>
                    <th>"Reason / detail"</th>
                    <th>"IP"</th>
                    <th>"User agent"</th>
                    <th>"Outcome"</th>
                    <th>"Job"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

/// Keyset paging: "Newest" and "Older →", keeping the filters and page size.
#[component]
fn AuditPager(pairs: Vec<(String, String)>, next_cursor: Option<String>) -> impl IntoView {
    let mut base = filters(&pairs);
    let limit = query::value(&pairs, "limit");
    if !limit.is_empty() {
        base.push(("limit", limit));
    }
    let paged = !query::value(&pairs, "cursor").is_empty();
    let newest = query::href("/audit", base.iter().copied());
    let older = next_cursor.map(|c| {
        let mut with_cursor = base.clone();
        with_cursor.push(("cursor", c.as_str()));
        query::href("/audit", with_cursor)
    });
    view! {
        <nav class="pager" aria-label="Pages">
            {paged.then(|| view! { <a class="button secondary" href=newest>"← Newest"</a> })}
            {match older {
                Some(href) => view! { <a class="button secondary" rel="next" href=href>"Older →"</a> }.into_any(),
                None => view! { <span class="dim">"No older entries."</span> }.into_any(),
            }}
        </nav>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ids_and_filters_as_stored() {
        assert_eq!(parse_ids("[1,2,3]"), Some(vec![1, 2, 3]));
        assert_eq!(parse_ids("{\"q\":\"x\"}"), None);
        assert_eq!(
            parse_filter("{\"fingerprint\":\"ab\",\"status\":\"new\"}"),
            Some(vec![
                ("fingerprint".to_string(), "ab".to_string()),
                ("status".to_string(), "new".to_string())
            ])
        );
        assert_eq!(parse_filter("[1]"), None);
    }

    fn entry(action: &str) -> AuditEntry {
        AuditEntry {
            id: 1,
            at_ms: 1_000,
            actor: "ann".into(),
            action: action.into(),
            count: 0,
            ids: None,
            filter: None,
            reason: None,
            client_ip: None,
            user_agent: None,
            outcome: "ok".into(),
            job_id: None,
            via_token: None,
            detail: None,
        }
    }

    /// The Action column says the action in the filter's words.
    #[test]
    fn the_action_column_is_in_words() {
        let items = vec![entry("rule_set_save"), entry("sign_in")];
        let html = view! { <AuditTable items=items /> }.to_html();
        assert!(html.contains(">rule set save</td>"), "{html}");
        assert!(html.contains(">sign in</td>"), "{html}");
        assert!(!html.contains(">sign_in<"), "{html}");
    }

    /// The filter offers every audit action, in words, and keeps an unknown one from the URL.
    #[test]
    fn the_filter_offers_every_action() {
        let pairs = vec![("action".to_string(), "made_up".to_string())];
        let html = view! { <AuditFilter pairs=pairs /> }.to_html();
        for a in AUDIT_ACTIONS {
            assert!(html.contains(&format!("value=\"{a}\"")), "{a}: {html}");
            assert!(
                html.contains(&format!(">{}</option>", audit_action_label(a))),
                "{a}"
            );
        }
        assert!(html.contains(">made up</option>"), "{html}");
    }
}
