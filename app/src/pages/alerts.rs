use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::LoadError;
use crate::alerts_api::{get_alerts, AlertsOverview, NotifierView, RuleView, SendTestNotification};
use crate::auth_context::{may, use_session, CsrfField, Permission};
use crate::components::ActionError;
use crate::display::format_time;
use crate::http_status::HttpStatus;
use crate::{query, wire};
use redrive_core::alerts::{AlertState, Delivery, DeliveryStatus};

fn when(ms: Option<i64>) -> String {
    ms.map_or_else(|| "never".to_string(), format_time)
}

fn seconds(ms: u64) -> String {
    format!("{} s", ms / 1000)
}

/// `/alerts`: every configured rule with its state (ok / pending / firing), its scopes, last
/// fired and resolved, recent history, and each notifier's deliveries with a "Send a test
/// notification" button (operators). Server-rendered; works without JavaScript.
#[component]
pub fn AlertsPage() -> impl IntoView {
    let overview = wire::resource(|| (), |_| get_alerts());
    let session = use_session();
    let test = ServerAction::<SendTestNotification>::new();
    let status = HttpStatus::current();
    let search = use_location().search;
    Effect::new(move |_| {
        if let Some(Ok(_)) = test.value().get() {
            overview.refetch();
        }
    });
    let notice = move || {
        let pairs = query::parse(&search.get());
        let n = query::value(&pairs, "test").to_string();
        (!n.is_empty()).then(|| {
            format!(
                "A test notification to {n} was recorded; its delivery appears below within seconds \
                 (reload to see it)."
            )
        })
    };
    let error = move || test.value().get().and_then(Result::err);
    view! {
        <Title text="Alerts · redrive" />
        <h1>"Alerts"</h1>
        {move || notice().map(|n| view! { <p class="done-box" role="status">{n}</p> })}
        {move || error().map(|e| view! { <ActionError error=e /> })}
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let status = status.clone();
                Suspend::new(async move {
                    let can_act = may(&session.0.await, Permission::ManageRules);
                    match overview.await {
                        Ok(o) => view! { <Overview o=o can_act=can_act test=test /> }.into_any(),
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
fn Overview(
    o: AlertsOverview,
    can_act: bool,
    test: ServerAction<SendTestNotification>,
) -> impl IntoView {
    let AlertsOverview {
        rules,
        notifiers,
        interval_ms,
        as_of_ms,
    } = o;
    let no_rules = rules.is_empty();
    let summary = rules
        .iter()
        .map(|r| {
            let name = r.name.clone();
            let state = r.state;
            view! {
                <tr data-rule=name.clone() data-state=state.as_str()>
                    <td class="mono"><a href=format!("#rule-{name}")>{name.clone()}</a></td>
                    <td class="mono">{r.kind.clone()}</td>
                    <td>{r.condition.clone()}</td>
                    <td><StateBadge state=state /></td>
                    <td class="num">{r.firing}</td>
                    <td class="num">{r.pending}</td>
                    <td class="mono nowrap">{when(r.last_fired_ms)}</td>
                    <td class="mono nowrap">{when(r.last_resolved_ms)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <p class="dim">
            {format!(
                "Evaluated every {} by the leader instance; as of {} UTC. Rules come from redrive.toml ([[alerts.rules]], see docs/alerts.md).",
                seconds(interval_ms),
                format_time(as_of_ms)
            )}
        </p>
        {if no_rules {
            view! {
                <p class="empty-state">
                    "No alert rule is configured. Add [[alerts.rules]] tables to redrive.toml (docs/alerts.md)."
                </p>
            }
            .into_any()
        } else {
            view! {
                <table class="data alerts">
                    <thead>
                        <tr>
                            <th>"Rule"</th>
                            <th>"Kind"</th>
                            <th>"Condition"</th>
                            <th>"State"</th>
                            <th class="num">"Firing"</th>
                            <th class="num">"Pending"</th>
                            <th class="col-time">"Last fired (UTC)"</th>
                            <th class="col-time">"Last resolved (UTC)"</th>
                        </tr>
                    </thead>
                    <tbody>{summary}</tbody>
                </table>
            }
            .into_any()
        }}
        <h2>"Notifiers"</h2>
        <Notifiers notifiers=notifiers can_act=can_act test=test />
        {rules.into_iter().map(|r| view! { <RuleDetail r=r /> }).collect_view()}
    }
}

#[component]
fn StateBadge(state: AlertState) -> impl IntoView {
    view! { <span class=format!("badge alert-{}", state.as_str())>{state.as_str()}</span> }
}

#[component]
fn DeliveryBadge(status: DeliveryStatus) -> impl IntoView {
    view! { <span class=format!("badge delivery-{}", status.as_str())>{status.as_str()}</span> }
}

#[component]
fn RuleDetail(r: RuleView) -> impl IntoView {
    let more = r.scopes_total.saturating_sub(r.scopes.len());
    let scopes = r
        .scopes
        .into_iter()
        .map(|s| {
            view! {
                <tr data-scope=s.scope.clone() data-state=s.state.as_str()>
                    <td class="mono">{s.scope.clone()}</td>
                    <td><StateBadge state=s.state /></td>
                    <td class="num mono">{s.value}</td>
                    <td class="mono nowrap">{format_time(s.since_ms)}</td>
                    <td class="mono nowrap">{when(s.fired_at_ms)}</td>
                    <td class="mono nowrap">{when(s.resolved_at_ms)}</td>
                </tr>
            }
        })
        .collect_view();
    let history = r
        .history
        .into_iter()
        .map(|e| {
            view! {
                <li data-event=e.kind.as_str()>
                    <span class="mono">{format_time(e.at_ms)}</span>
                    " "
                    <strong>{e.kind.as_str()}</strong>
                    " "
                    {e.summary}
                </li>
            }
        })
        .collect_view();
    view! {
        <section class="alert-rule" id=format!("rule-{}", r.name)>
            <h2>
                <span class="mono">{r.name.clone()}</span>
                " "
                <StateBadge state=r.state />
            </h2>
            <p class="dim">
                {format!(
                    "{} · severity {} · for {} · cooldown {} · notifies {}",
                    r.condition,
                    r.severity,
                    seconds(r.for_ms),
                    seconds(r.cooldown_ms),
                    if r.notify.is_empty() { "nobody".to_string() } else { r.notify.join(", ") }
                )}
            </p>
            {if r.scopes_total == 0 {
                view! { <p class="dim">"No scope has met the condition yet."</p> }.into_any()
            } else {
                view! {
                    <table class="data alert-scopes">
                        <thead>
                            <tr>
                                <th>"Scope"</th>
                                <th>"State"</th>
                                <th class="num">"Value"</th>
                                <th class="col-time">"Since (UTC)"</th>
                                <th class="col-time">"Fired (UTC)"</th>
                                <th class="col-time">"Resolved (UTC)"</th>
                            </tr>
                        </thead>
                        <tbody>{scopes}</tbody>
                    </table>
                    {(more > 0).then(|| view! { <p class="dim">{format!("and {more} more scope(s)")}</p> })}
                }
                .into_any()
            }}
            <h3>"Recent history"</h3>
            <ul class="alert-history">{history}</ul>
        </section>
    }
}

fn delivery_line(d: &Delivery) -> String {
    let mut s = format!(
        "{} {} of {} {} · {} attempt(s)",
        format_time(d.created_at_ms),
        d.event_kind.as_str(),
        d.rule,
        d.scope,
        d.attempts
    );
    if let Some(e) = &d.last_error {
        s.push_str(" · last error: ");
        s.push_str(e);
    }
    s
}

#[component]
fn Notifiers(
    notifiers: Vec<NotifierView>,
    can_act: bool,
    test: ServerAction<SendTestNotification>,
) -> impl IntoView {
    if notifiers.is_empty() {
        return view! {
            <p class="empty-state">"No notifier is configured ([alerts.notifiers.NAME], docs/alerts.md)."</p>
        }
        .into_any();
    }
    let rows = notifiers
        .into_iter()
        .map(|n| {
            let last = n.deliveries.first().map(|d| d.status);
            let list = n
                .deliveries
                .iter()
                .map(|d| {
                    view! {
                        <li data-delivery=d.status.as_str()>
                            <DeliveryBadge status=d.status />
                            " "
                            {delivery_line(d)}
                        </li>
                    }
                })
                .collect_view();
            let name = n.name.clone();
            view! {
                <tr data-notifier=n.name.clone()>
                    <td class="mono">{n.name.clone()}</td>
                    <td class="mono">{n.kind.clone()}</td>
                    <td class="mono">{n.target.clone()}</td>
                    <td>
                        {match last {
                            Some(s) => view! { <DeliveryBadge status=s /> }.into_any(),
                            None => view! { <span class="dim">"nothing sent yet"</span> }.into_any(),
                        }}
                        <ul class="deliveries">{list}</ul>
                    </td>
                    <td>
                        {can_act.then(|| view! {
                            <ActionForm action=test attr:class="alert-test">
                                <CsrfField />
                                <input type="hidden" name="notifier" value=name.clone() />
                                <button type="submit">"Send a test notification"</button>
                            </ActionForm>
                        })}
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data notifiers">
            <thead>
                <tr>
                    <th>"Notifier"</th>
                    <th>"Kind"</th>
                    <th>"Target"</th>
                    <th>"Deliveries (newest first)"</th>
                    <th></th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}
