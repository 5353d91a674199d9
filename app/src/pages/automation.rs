use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;
use redrive_core::automation::view::{
    describe_gate, describe_match, describe_schedule, round_outcome_label, AutomationOverview,
    RuleState, RuleView, TierTotal,
};
use redrive_core::automation::Tier;

use super::LoadError;
use crate::auth_context::CsrfField;
use crate::automation_api::{get_automation, AutomationNotice, AutomationPageData, PauseRule};
use crate::components::ActionError;
use crate::display::format_time;
use crate::http_status::HttpStatus;
use crate::{query, wire};

/// `/automation`: the active rule set of automatic reprocessing (`docs/automation.md`) —
/// each rule in order with its tier, conditions, schedule, gate, age move and state (paused,
/// last round, totals), the live dead letters per tier, and who saved the version when. Users
/// with `manage_rules` get the editor link and Pause / Resume per transient rule.
/// Server-rendered; works without JavaScript.
#[component]
pub fn AutomationPage() -> impl IntoView {
    let data = wire::resource(|| (), |_| get_automation());
    let pause = ServerAction::<PauseRule>::new();
    let status = HttpStatus::current();
    let search = use_location().search;
    Effect::new(move |_| {
        if let Some(Ok(_)) = pause.value().get() {
            data.refetch();
        }
    });
    let notice = move || {
        let pairs = query::parse(&search.get());
        AutomationNotice::parse(query::value(&pairs, "done")).map(AutomationNotice::sentence)
    };
    let error = move || pause.value().get().and_then(Result::err);
    view! {
        <Title text="Automation · redrive" />
        <h1>"Automatic reprocessing"</h1>
        {move || notice().map(|n| view! { <p class="done-box" role="status">{n}</p> })}
        {move || error().map(|e| view! { <ActionError error=e /> })}
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let status = status.clone();
                Suspend::new(async move {
                    match data.await {
                        Ok(d) => view! { <Overview d=d pause=pause /> }.into_any(),
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

fn tier_label(t: Option<Tier>) -> &'static str {
    t.map_or("unsorted", Tier::as_str)
}

#[component]
fn Overview(d: AutomationPageData, pause: ServerAction<PauseRule>) -> impl IntoView {
    let AutomationPageData {
        overview,
        can_manage,
    } = d;
    let AutomationOverview {
        active,
        source: _,
        compile_error,
        default_tier,
        poison_by_convention,
        loop_guard_returns,
        rules,
        tiers,
    } = overview;
    let version_line = match &active {
        Some(v) => view! {
            <p class="dim" data-active-version=v.version>
                {format!(
                    "Rule set version {} ({}), saved by {} at {} UTC{}. ",
                    v.version,
                    v.origin,
                    v.created_by,
                    format_time(v.created_at_ms),
                    v.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
                )}
                <a href="/automation/versions">"All versions"</a>
            </p>
        }
        .into_any(),
        None => view! {
            <p class="empty-state">
                "No rule set yet: every dead letter goes to the manual tier. Write one in the \
                 editor, or as [automation] in redrive.toml (docs/automation.md)."
            </p>
        }
        .into_any(),
    };
    let edit = can_manage.then(|| {
        view! {
            <p>
                <a class="button" href="/automation/edit">"Edit the rules"</a>
            </p>
        }
    });
    let settings = format!(
        "No rule matched: {default_tier}. Poison by convention: {}. Loop guard: {}.",
        if poison_by_convention { "on" } else { "off" },
        if loop_guard_returns == 0 {
            "off".to_string()
        } else {
            format!("out of automation after {loop_guard_returns} returns")
        }
    );
    let no_rules = rules.is_empty();
    let rows = rules
        .into_iter()
        .map(|r| view! { <RuleRow r=r can_manage=can_manage pause=pause /> })
        .collect_view();
    view! {
        {version_line}
        {compile_error.map(|e| view! {
            <p class="error-box" role="alert">
                {format!("The active version no longer compiles, so it is shown without rules: {e}")}
            </p>
        })}
        {edit}
        <section id="tiers">
            <h2>"Dead letters per tier"</h2>
            <TierTable tiers=tiers />
        </section>
        <section id="rules">
            <h2>"Rules, in order"</h2>
            <p class="dim">{settings}</p>
            {if no_rules {
                view! { <p class="empty-state">"No rules: every dead letter gets the default tier."</p> }.into_any()
            } else {
                view! {
                    <table class="data rules">
                        <thead>
                            <tr>
                                <th class="num">"#"</th>
                                <th>"Rule"</th>
                                <th>"Tier"</th>
                                <th>"Matches"</th>
                                <th>"Schedule and gate"</th>
                                <th>"State"</th>
                            </tr>
                        </thead>
                        <tbody>{rows}</tbody>
                    </table>
                }
                .into_any()
            }}
        </section>
    }
}

#[component]
fn TierTable(tiers: Vec<TierTotal>) -> impl IntoView {
    let count = |t: Option<Tier>| {
        tiers
            .iter()
            .filter(|x| x.tier == t)
            .map(|x| x.count)
            .sum::<i64>()
    };
    let mut all: Vec<Option<Tier>> = Tier::ALL.into_iter().map(Some).collect();
    all.push(None);
    let rows = all
        .into_iter()
        .map(|t| {
            let n = count(t);
            let label = tier_label(t);
            view! {
                <tr data-tier=label>
                    <td>{label}</td>
                    <td class="num">{n}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data tiers">
            <thead>
                <tr>
                    <th>"Tier"</th>
                    <th class="num">"Live dead letters"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

#[component]
fn RuleRow(r: RuleView, can_manage: bool, pause: ServerAction<PauseRule>) -> impl IntoView {
    let conditions = describe_match(&r.matches)
        .into_iter()
        .map(|c| view! { <li>{c}</li> })
        .collect_view();
    let transient = r.tier == Tier::Transient;
    let schedule = r.schedule.as_ref().map(describe_schedule);
    let gate = transient.then(|| describe_gate(r.gate.as_ref()));
    let move_after = r
        .move_after
        .as_ref()
        .map(|m| format!("moves to {} after {} in its tier", m.to, m.after));
    let id = format!("rule-{}", r.name);
    let paused = r.state.as_ref().is_some_and(|s| s.paused);
    let name = r.name.clone();
    let controls = (can_manage && transient && !r.disabled).then(|| {
        let (op, label) = if paused {
            ("resume", "Resume")
        } else {
            ("pause", "Pause")
        };
        let reason_label = format!("Reason to {op} {name}");
        view! {
            <ActionForm action=pause attr:class="rule-pause">
                <CsrfField />
                <input type="hidden" name="rule" value=name.clone() />
                <input type="hidden" name="op" value=op />
                <input type="text" name="reason" maxlength="2000" placeholder="reason (optional)" aria-label=reason_label />
                <button type="submit">{label}</button>
            </ActionForm>
        }
    });
    view! {
        <tr id=id data-rule=r.name.clone() data-paused=paused.to_string()>
            <td class="num">{r.position}</td>
            <td>
                <span class="mono">{r.name.clone()}</span>
                {r.disabled.then(|| view! { " " <span class="badge neutral">"disabled"</span> })}
                {r.description.clone().map(|d| view! { <br /> <span class="dim small">{d}</span> })}
            </td>
            <td><span class=format!("badge tier-{}", r.tier)>{r.tier.as_str()}</span></td>
            <td><ul class="plain">{conditions}</ul></td>
            <td>
                {schedule.map(|s| view! { <div>{s}</div> })}
                {gate.map(|g| view! { <div class="dim small">{format!("Gate: {g}")}</div> })}
                {move_after.map(|m| view! { <div class="dim small">{m}</div> })}
            </td>
            <td>
                <StateCell state=r.state.clone() transient=transient />
                {controls}
            </td>
        </tr>
    }
}

#[component]
fn StateCell(state: Option<RuleState>, transient: bool) -> impl IntoView {
    if !transient {
        return view! { <span class="dim">"no rounds (not transient)"</span> }.into_any();
    }
    let Some(s) = state else {
        return view! { <span class="dim" data-state="none">"no round yet"</span> }.into_any();
    };
    let paused = s.paused.then(|| {
        let by = s.paused_by.clone().unwrap_or_else(|| "-".into());
        let at = s
            .paused_at_ms
            .map(|t| format!(" at {} UTC", format_time(t)))
            .unwrap_or_default();
        let why = s
            .paused_reason
            .clone()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        view! {
            <div><span class="badge malformed">"paused"</span> {format!(" by {by}{at}{why}")}</div>
        }
    });
    let last = match s.last_round_at_ms {
        Some(t) => format!(
            "Last round {} UTC: {}{}",
            format_time(t),
            s.last_round_outcome
                .as_deref()
                .map(round_outcome_label)
                .unwrap_or("-"),
            s.last_round_message
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ),
        None => "No round yet.".to_string(),
    };
    let job = s.last_job_id.clone().map(|j| {
        let href = format!("/jobs/{}", crate::query::encode(&j));
        view! { <div class="small"><a href=href>"Last job"</a></div> }
    });
    view! {
        <div data-state=if s.paused { "paused" } else { "running" }>
            {paused}
            <div class="small">{last}</div>
            {job}
            <div class="dim small">
                {format!(
                    "{} {} run, {} skipped; {} replayed, {} came back",
                    s.rounds_run,
                    if s.rounds_run == 1 { "round" } else { "rounds" },
                    s.rounds_skipped,
                    s.replayed_total,
                    s.refailed_total
                )}
            </div>
        </div>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(outcome: &str, rounds_run: i64) -> RuleState {
        RuleState {
            rule_name: "r".into(),
            paused: false,
            paused_reason: None,
            paused_by: None,
            paused_at_ms: None,
            last_round_at_ms: Some(1_000),
            last_round_outcome: Some(outcome.into()),
            last_round_message: Some("lag 9 > 5".into()),
            last_job_id: None,
            rounds_run,
            rounds_skipped: 2,
            replayed_total: 4,
            refailed_total: 1,
        }
    }

    /// The last round's outcome is in words, and the round count agrees with its number.
    #[test]
    fn the_state_cell_says_the_outcome_in_words() {
        let html =
            view! { <StateCell state=Some(state("gate_closed", 1)) transient=true /> }.to_html();
        assert!(html.contains(": gate closed (lag 9 &gt; 5)"), "{html}");
        assert!(!html.contains("gate_closed"), "{html}");
        assert!(
            html.contains("1 round run, 2 skipped; 4 replayed, 1 came back"),
            "{html}"
        );
        let html =
            view! { <StateCell state=Some(state("nothing_due", 2)) transient=true /> }.to_html();
        assert!(html.contains(": nothing due"), "{html}");
        assert!(html.contains("2 rounds run,"), "{html}");
        let html =
            view! { <StateCell state=Some(state("new_kind", 0)) transient=true /> }.to_html();
        assert!(html.contains(": new_kind"), "{html}");
        assert!(html.contains("0 rounds run,"), "{html}");
    }
}
