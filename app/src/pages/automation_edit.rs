use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;
use redrive_core::automation::dry_run::DryRun;

use super::LoadError;
use crate::auth_context::CsrfField;
use crate::automation_api::{get_rule_editor, EditorData, SubmitRuleSet};
use crate::components::ActionError;
use crate::http_status::HttpStatus;
use crate::{query, wire};

/// `/automation/edit` (the `manage_rules` permission): the active rule set's TOML text in a
/// textarea, a reason, and two buttons — "Dry run" (what the edited text would do to the
/// stored dead letters: counts per rule and tier, and the moves from their current tier) and
/// "Save" (a new, audited version). A refused text comes back with its message above the
/// editor and the text kept (`automation_api`'s drafts; query `draft=ID`). A plain form:
/// works without JavaScript.
#[component]
pub fn RuleEditorPage() -> impl IntoView {
    let search = use_location().search;
    let draft = move || {
        let pairs = query::parse(&search.get());
        query::value(&pairs, "draft").to_string()
    };
    let data = wire::resource(draft, get_rule_editor);
    let submit = ServerAction::<SubmitRuleSet>::new();
    let status = HttpStatus::current();
    view! {
        <Title text="Edit the rules · redrive" />
        <p class="crumbs"><a href="/automation">"← Automation"</a></p>
        <h1>"Edit the rules"</h1>
        {move || submit.value().get().and_then(Result::err).map(|e| view! { <ActionError error=e /> })}
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let status = status.clone();
                Suspend::new(async move {
                    match data.await {
                        Ok(d) => view! { <Editor d=d submit=submit /> }.into_any(),
                        Err(error) => {
                            let forbidden = matches!(
                                &error,
                                ServerFnError::ServerError(m) if m.starts_with("Not allowed")
                            );
                            status.set(if forbidden { 403 } else { 503 });
                            view! { <LoadError error=error /> }.into_any()
                        }
                    }
                })
            }}
        </Transition>
    }
}

/// A textarea's content as the server renders it: a browser's HTML parser drops one line
/// break right after `<textarea>`, so one is put there for it to drop. (A textarea made in
/// the browser after a navigation keeps that line break in its text: there the `value`
/// property, set too, is what counts.)
fn textarea_text(text: &str) -> String {
    format!("\n{text}")
}

#[component]
fn Editor(d: EditorData, submit: ServerAction<SubmitRuleSet>) -> impl IntoView {
    let EditorData {
        active_version,
        source,
        reason,
        reason_required,
        reason_pattern,
        error,
        dry_run,
        draft_base,
        draft_missing,
    } = d;
    let next = active_version.unwrap_or(0) + 1;
    let reason_label = match (reason_required, &reason_pattern) {
        (true, Some(p)) => format!("Reason (required, matching {p}; audited)"),
        (true, None) => "Reason (required, audited)".to_string(),
        (false, Some(p)) => format!("Reason (optional, matching {p} if given; audited)"),
        (false, None) => "Reason (optional, audited)".to_string(),
    };
    let from = match active_version {
        Some(v) => format!(
            "You are editing version {v}. Saving stores version {next} and makes it active."
        ),
        None => {
            "There is no rule set yet. Saving stores version 1 and makes it active.".to_string()
        }
    };
    view! {
        <p>{from} " " <a href="/automation/versions">"Versions"</a> " · rules are described in docs/automation.md."</p>
        {draft_missing.then(|| view! {
            <p class="notice">"Your draft is no longer kept (drafts last 15 minutes); this is the active text."</p>
        })}
        {draft_base.map(|b| view! {
            <p class="notice">{format!(
                "Version {} was saved since you started from version {b}: saving replaces it with this text.",
                active_version.unwrap_or(0)
            )}</p>
        })}
        {error.map(|e| view! { <p class="error-box" role="alert" data-rule-error="">{e}</p> })}
        <ActionForm action=submit attr:class="rules-form">
            <CsrfField />
            <label class="wide">
                <span>"Rule set (TOML)"</span>
                <textarea name="source" rows="28" class="mono edit-text" spellcheck="false" aria-label="Rule set (TOML)" prop:value=source.clone()>{textarea_text(&source)}</textarea>
            </label>
            <label class="wide">
                <span>{reason_label}</span>
                <input type="text" name="reason" maxlength="2000" value=reason placeholder="e.g. INC-1234 retry LLM timeouts" />
            </label>
            <p class="record-actions">
                <button type="submit" name="op" value="dry_run">"Dry run"</button>
                " "
                <button type="submit" name="op" value="save">{format!("Save as version {next}")}</button>
            </p>
        </ActionForm>
        {dry_run.map(|r| view! { <DryRunReport r=r /> })}
    }
}

/// The result of a dry run.
#[component]
fn DryRunReport(r: DryRun) -> impl IntoView {
    let scope = if r.capped {
        format!(
            "Counted over the first {} of {} live dead letters (the newest); nothing was changed.",
            r.scanned, r.total
        )
    } else {
        format!(
            "Counted over all {} live dead letters (deleted ones excluded); nothing was changed.",
            r.scanned
        )
    };
    let rules = r
        .rules
        .iter()
        .map(|c| {
            view! {
                <tr data-rule=c.name.clone()>
                    <td class="num">{c.position}</td>
                    <td class="mono">{c.name.clone()} {c.disabled.then_some(" (disabled)")}</td>
                    <td>{c.tier.as_str()}</td>
                    <td class="num" data-matched="">{c.matched}</td>
                </tr>
            }
        })
        .collect_view();
    let tiers = r
        .tiers
        .iter()
        .map(|t| {
            view! {
                <tr data-tier=t.tier.as_str()>
                    <td>{t.tier.as_str()}</td>
                    <td class="num">{t.count}</td>
                </tr>
            }
        })
        .collect_view();
    let moves = r
        .moves
        .iter()
        .map(|m| {
            let from = m.from.map_or("unsorted", |t| t.as_str());
            view! {
                <tr data-from=from data-to=m.to.as_str()>
                    <td>{from}</td>
                    <td>{m.to.as_str()}</td>
                    <td class="num">{m.count}</td>
                </tr>
            }
        })
        .collect_view();
    let no_moves = r.moves.is_empty();
    view! {
        <section id="dry-run" class="dry-run">
            <h2>"Dry run"</h2>
            <p class="dim" data-scanned=r.scanned data-total=r.total>{scope}</p>
            <table class="data">
                <thead><tr><th class="num">"#"</th><th>"Rule"</th><th>"Tier"</th><th class="num">"Would match"</th></tr></thead>
                <tbody>
                    {rules}
                    <tr data-rule="(poison)">
                        <td></td><td>"no rule, poison signal"</td><td>"poison"</td>
                        <td class="num" data-matched="">{r.poison_count}</td>
                    </tr>
                    <tr data-rule="(default)">
                        <td></td><td>"no rule (default tier)"</td><td>{r.default_tier.as_str()}</td>
                        <td class="num" data-matched="">{r.default_count}</td>
                    </tr>
                </tbody>
            </table>
            <h3>"Where they would go"</h3>
            <table class="data tiers">
                <thead><tr><th>"Tier"</th><th class="num">"Dead letters"</th></tr></thead>
                <tbody>{tiers}</tbody>
            </table>
            <h3>"Moves from their current tier"</h3>
            <p class="dim">{format!("{} would stay in the tier they are in.", r.unchanged)}</p>
            {if no_moves {
                view! { <p class="empty-state">"No dead letter would change tier."</p> }.into_any()
            } else {
                view! {
                    <table class="data moves">
                        <thead><tr><th>"From"</th><th>"To"</th><th class="num">"Dead letters"</th></tr></thead>
                        <tbody>{moves}</tbody>
                    </table>
                }
                .into_any()
            }}
        </section>
    }
}
