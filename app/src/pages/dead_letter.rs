use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_location, use_params_map};
use redrive_core::actions::HistoryEvent;
use redrive_core::Status;

use super::{LoadError, NotFound};
use crate::actions_api::{get_history, ActOnSelected, Notice};
use crate::api::{get_dead_letter, DeadLetterDetail};
use crate::auth_context::{may, use_session, CsrfField, Permission};
use crate::components::{
    ActionError, ActionNotice, CutNotice, HeaderTable, History, LabelChips, MalformedBadge,
    PayloadView, SchemaDecoded, StatusBadge, TierBadge, TriageEditor,
};
use crate::display::{format_time, title_text};
use crate::http_status::HttpStatus;
use crate::labels_api::{get_triage, ChangeLabel, SetNote};
use crate::query;
use crate::wire;
use redrive_core::labels::Triage;

/// `/dead-letters/:id`: everything about one dead letter, its own history, and (for an
/// operator) Replay / Delete / Restore for it alone.
#[component]
pub fn DeadLetterPage() -> impl IntoView {
    let params = use_params_map();
    let search = use_location().search;
    // A non-numeric id is simply a dead letter that does not exist.
    let id = move || params.with(|p| p.get_str("id").and_then(|s| s.parse::<i64>().ok()));
    let found = wire::resource(id, |id| async move {
        match id {
            Some(id) => get_dead_letter(id).await,
            None => Ok(None),
        }
    });
    let history = wire::resource(id, |id| async move {
        match id {
            Some(id) => get_history(id).await,
            None => Ok(Vec::new()),
        }
    });
    let triage = wire::resource(id, |id| async move {
        match id {
            Some(id) => get_triage(id).await,
            None => Ok(None),
        }
    });
    let versions = wire::resource(id, |id| async move {
        match id {
            Some(id) => crate::edit_api::get_versions(id).await,
            None => Ok(Vec::new()),
        }
    });
    let session = use_session();
    let act = ServerAction::<ActOnSelected>::new();
    let label_act = ServerAction::<ChangeLabel>::new();
    let note_act = ServerAction::<SetNote>::new();
    let status = HttpStatus::current();
    // Hydrated: after a delete or restore, show the new status and history without a reload.
    Effect::new(move |_| {
        if let Some(Ok(_)) = act.value().get() {
            found.refetch();
            history.refetch();
        }
    });
    // ... and after a label or note change, the triage and its history line.
    Effect::new(move |_| {
        let label_done = matches!(label_act.value().get(), Some(Ok(_)));
        let note_done = matches!(note_act.value().get(), Some(Ok(_)));
        if label_done || note_done {
            triage.refetch();
            history.refetch();
        }
    });
    let notice = move || {
        let pairs = query::parse(&search.get());
        Notice::parse(query::value(&pairs, "done"))
    };
    let error = move || {
        act.value()
            .get()
            .and_then(Result::err)
            .or_else(|| label_act.value().get().and_then(Result::err))
            .or_else(|| note_act.value().get().and_then(Result::err))
    };
    view! {
        {move || view! { <ActionNotice notice=notice() /> }}
        {move || error().map(|e| view! { <ActionError error=e /> })}
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let label = params.with(|p| p.get("id").unwrap_or_default());
                let status = status.clone();
                Suspend::new(async move {
                    let s = session.0.await;
                    let can = RecordPowers {
                        replay: may(&s, Permission::Replay),
                        delete: may(&s, Permission::Delete),
                        edit: may(&s, Permission::Edit),
                    };
                    let can_annotate = may(&s, Permission::Annotate);
                    // The history is a supplement: without it the page still shows the record.
                    let events = history.await.unwrap_or_default();
                    // The triage too: without it the record is still shown.
                    let triage = triage.await.ok().flatten();
                    // And the edited versions.
                    let versions = versions.await.unwrap_or_default();
                    match found.await {
                        Ok(Some(d)) => {
                            let id = d.summary.id;
                            view! {
                                <Detail d=d history=events can=can act=act versions=versions />
                                {triage.map(|t| view! {
                                    <TriageSection id=id t=t can_edit=can_annotate label_act=label_act note_act=note_act />
                                })}
                            }
                        }
                        .into_any(),
                        Ok(None) => {
                            // `abc` names no dead letter either, but say why.
                            let what = if label.parse::<i64>().is_ok() {
                                format!("dead letter {label}")
                            } else {
                                format!("dead letter `{label}`: ids are whole numbers, as in /dead-letters/42")
                            };
                            view! { <NotFound what=what /> }.into_any()
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

/// An optional value, or a dash.
fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "—".to_string())
}

/// Which of the detail page's actions the signed-in role permits (the server checks again).
#[derive(Debug, Clone, Copy, Default)]
struct RecordPowers {
    replay: bool,
    delete: bool,
    edit: bool,
}

/// Replay / Delete / Restore for this one dead letter: the list's action form with a single
/// id, back to this page. The buttons offered follow the status (a pending one is in a job's
/// outbox: cancel the job to act on it).
#[component]
fn RecordActions(
    id: i64,
    status: Status,
    can: RecordPowers,
    act: ServerAction<ActOnSelected>,
) -> impl IntoView {
    let back = format!("/dead-letters/{id}");
    let live = !matches!(status, Status::Deleted | Status::ReplayPending);
    let pending = status == Status::ReplayPending;
    view! {
        <ActionForm action=act attr:class="record-actions">
            <CsrfField />
            <input type="hidden" name="ids[]" value=id />
            <input type="hidden" name="back" value=back />
            <button type="submit" name="op" value="" class="visually-hidden" tabindex="-1" aria-hidden="true">
                "Submit"
            </button>
            <label class="wide">
                <span>"Reason (optional, audited)"</span>
                <input type="text" name="reason" maxlength="2000" placeholder="e.g. INC-1234 fixed" />
            </label>
            {(live && can.replay).then(|| view! {
                <button type="submit" name="op" value="replay">"Replay"</button>
            })}
            {(live && can.delete).then(|| view! {
                <button type="submit" name="op" value="delete" class="danger">"Delete"</button>
            })}
            {(status == Status::Deleted && can.delete).then(|| view! {
                <button type="submit" name="op" value="restore">"Restore"</button>
            })}
            {pending.then(|| view! {
                <span class="dim small">"Waiting in a replay job; cancel the job to act on it here."</span>
            })}
        </ActionForm>
    }
}

/// The dead letter's own labels and note (editable by an operator) and its error group's
/// (shown here, edited on the group's page).
#[component]
fn TriageSection(
    id: i64,
    t: Triage,
    can_edit: bool,
    label_act: ServerAction<ChangeLabel>,
    note_act: ServerAction<SetNote>,
) -> impl IntoView {
    let Triage {
        fingerprint,
        record,
        group,
    } = t;
    let group_href = format!("/groups/{}", query::encode(&fingerprint));
    let labels: Vec<String> = group.labels.iter().map(|l| l.label.clone()).collect();
    let note = group.note.map(|n| {
        crate::display::visible::shown(
            &n.text,
            crate::components::NOTE_SHOWN_BYTES,
            crate::display::visible::Lines::Keep,
        )
        .text
    });
    view! {
        <section class="triage-section" id="triage">
            <h2>"Labels and note"</h2>
            <TriageEditor
                kind="dead_letter"
                target=id.to_string()
                annotations=record
                can_edit=can_edit
                back=format!("/dead-letters/{id}")
                label_act=label_act
                note_act=note_act
            />
            <h3>"Its error group"</h3>
            <div class="group-triage">
                {if labels.is_empty() {
                    view! { <span class="dim">"no group labels"</span> }.into_any()
                } else {
                    view! { <LabelChips labels=labels group=true /> }.into_any()
                }}
                {note.map(|n| view! { <p class="note">{n}</p> })}
                <p>
                    <a href=group_href>"Labels and note of the error group →"</a>
                </p>
            </div>
        </section>
    }
}

#[component]
fn Detail(
    d: DeadLetterDetail,
    history: Vec<HistoryEvent>,
    can: RecordPowers,
    act: ServerAction<ActOnSelected>,
    versions: Vec<redrive_core::edit::VersionInfo>,
) -> impl IntoView {
    let s = d.summary;
    let n = d.normalized;
    let id = s.id;
    let title = format!(
        "{} · dead letter {id} · redrive",
        title_text(s.error_class.as_deref().unwrap_or("dead letter"))
    );
    let group_href = query::href("/", [("fingerprint", s.fingerprint.as_str())]);
    let source = match &n.source_topic {
        Some(t) => format!(
            "{t} · partition {} · offset {}",
            or_dash(n.source_partition),
            or_dash(n.source_offset)
        ),
        None => "—".to_string(),
    };
    // The exact stored topics, percent-encoded: the list they open holds this dead letter.
    let dlq_list_href = query::href("/", [("dlq_topic", d.dlq_topic_value.as_str())]);
    let source_list_href = d
        .source_topic_value
        .as_deref()
        .filter(|t| !t.trim_matches(' ').is_empty())
        .map(|t| query::href("/", [("source_topic", t)]));
    let warnings = n.decode_warnings.clone();
    let warnings_more = (d.warnings_total > warnings.len())
        .then(|| format!("… and {} more", d.warnings_total - warnings.len()));
    // The whole record, byte-exact (the stack trace and message included), for what is cut.
    let record_href = format!("/api/v1/dead-letters/{id}");
    let message = d.error_message.map(|m| {
        let cut = m.cut.then(|| {
            view! {
                <CutNotice
                    text="The error message is cut.".to_string()
                    raw_href=record_href.clone()
                    what="the whole record"
                />
            }
        });
        view! { <pre class="error-message">{m.text}</pre> {cut} }
    });
    let stack = d.stack_trace.map(|t| {
        let cut = t.cut.then(|| {
            view! {
                <CutNotice
                    text="Only the beginning of the stack trace is shown.".to_string()
                    raw_href=record_href.clone()
                    what="the whole record"
                />
            }
        });
        view! {
            <section>
                <h2>"Stack trace"</h2>
                {cut}
                <pre class="stack">{t.text}</pre>
            </section>
        }
    });
    view! {
        <Title text=title />
        <p class="crumbs">
            <a href="/">"← Dead letters"</a>
        </p>
        <h1 class="detail-title">
            <span class="mono">{s.error_class.clone().unwrap_or_else(|| "(no error class)".into())}</span>
            " " <StatusBadge status=s.status />
            " " <TierBadge tier=s.tier />
            {s.malformed.then(|| view! { " " <MalformedBadge /> })}
        </h1>
        {message}
        {(can.replay || can.delete).then(|| view! { <RecordActions id=id status=s.status can=can act=act /> })}
        {can.edit.then(|| view! {
            <p class="edit-link">
                <a href=format!("/dead-letters/{id}/edit")>"Edit and replay…"</a>
                <span class="dim small">" change the value, key or headers; the original is kept"</span>
            </p>
        }
        .into_any())}
        <dl class="facts">
            <dt>"Dead letter"</dt>
            <dd class="mono">{id}</dd>
            <dt>"DLQ record"</dt>
            <dd class="mono">
                {format!("{} · partition {} · offset {}", s.dlq_topic, s.dlq_partition, s.dlq_offset)}
                " · "
                <a class="topic-list" href=dlq_list_href>"this DLQ topic's dead letters"</a>
            </dd>
            <dt>"Source record"</dt>
            <dd class="mono">
                {source}
                {source_list_href.map(|h| view! {
                    " · "
                    <a class="topic-list" href=h>"this source topic's dead letters"</a>
                })}
            </dd>
            <dt>"Source timestamp"</dt>
            <dd class="mono">{n.source_timestamp_ms.map(format_time).unwrap_or_else(|| "—".into())}</dd>
            <dt>"Consumer group"</dt>
            <dd class="mono">{or_dash(n.consumer_group.clone())}</dd>
            <dt>"Convention"</dt>
            <dd class="mono">{s.convention.as_str()}</dd>
            <dt>"Error class"</dt>
            <dd class="mono">{or_dash(s.error_class.clone())}</dd>
            <dt>"Retry count"</dt>
            <dd class="mono">{or_dash(s.retry_count)}</dd>
            <dt>"Error group"</dt>
            <dd class="mono">
                <a href=group_href title="All dead letters with this fingerprint">{s.fingerprint.clone()}</a>
            </dd>
            <dt>"Dead-lettered at"</dt>
            <dd class="mono">{format_time(s.dead_lettered_at_ms)} " UTC"</dd>
            <dt>"DLQ record timestamp"</dt>
            <dd class="mono">{d.timestamp_ms.map(format_time).unwrap_or_else(|| "—".into())}</dd>
            <dt>"Ingested at"</dt>
            <dd class="mono">{format_time(d.ingested_at_ms)} " UTC"</dd>
            <dt>"Replayed"</dt>
            <dd class="mono">{format!("{} time(s)", d.replay_count)}</dd>
            <dt>"Message id"</dt>
            <dd class="mono">{or_dash(n.message_id.clone())}</dd>
            <dt>"Decode warnings"</dt>
            <dd>
                {if warnings.is_empty() {
                    view! { <span class="dim">"none"</span> }.into_any()
                } else {
                    view! {
                        <ul class="warnings">
                            {warnings.into_iter().map(|w| view! { <li>{w}</li> }).collect_view()}
                            {warnings_more.map(|m| view! { <li class="dim">{m}</li> })}
                        </ul>
                    }
                    .into_any()
                }}
            </dd>
        </dl>
        <Tiering tiering=d.tiering.clone() />
        <super::versions::Versions id=id versions=versions />
        <ReplayOutcome
            repeat_failures=s.repeat_failures
            link=d.link.clone()
            chain=d.chain.clone()
            verdict=d.verdict
        />
        <section>
            <h2>"History"</h2>
            <History events=history />
        </section>
        {stack}
        {d.value_schema.map(|shown| view! { <SchemaDecoded shown=shown /> })}
        <PayloadView title="Value" payload=d.value raw_href=format!("/dead-letters/{id}/raw/value") />
        <PayloadView title="Key" payload=d.key raw_href=format!("/dead-letters/{id}/raw/key") />
        <section>
            <h2>"Headers"</h2>
            <HeaderTable headers=d.headers raw_href=format!("/dead-letters/{id}/raw/headers") />
        </section>
    }
}

/// "Tier": which tier the sorter gave it (its badge in the heading, "unsorted" until then),
/// from which rule and rule-set version, why, when, and its automation state
/// (`docs/automation.md`, "Tiers in the UI and API").
#[component]
fn Tiering(tiering: Option<redrive_core::automation::TierInfo>) -> impl IntoView {
    let tier = tiering.as_ref().map(|t| t.tier);
    let body = match tiering {
        None => view! {
            <p class="dim">
                "Not sorted yet: the leader's sorter gives it a tier from the active rules within a few seconds."
            </p>
        }
        .into_any(),
        Some(t) => {
            let attempts = match t.max_attempts {
                Some(m) => format!("{} of {m}", t.auto_attempts),
                None => t.auto_attempts.to_string(),
            };
            let next = t
                .next_attempt_at_ms
                .map(|ms| format!("{} UTC", format_time(ms)))
                .unwrap_or_else(|| "none due".to_string());
            let rule = match (&t.rule, t.rule_version) {
                (Some(r), Some(v)) => format!("{r} (rule set version {v})"),
                (Some(r), None) => r.clone(),
                (None, Some(v)) => format!("none (rule set version {v})"),
                (None, None) => "none (no rule set stored)".to_string(),
            };
            view! {
                {t.loop_guarded.then(|| view! {
                    <p class="loop-guarded">
                        "Loop-guarded: it came back after replays too often. No automatic replay; replaying it by hand needs the approve permission and a reason."
                    </p>
                })}
                {t.escalated.then(|| view! {
                    <p class="escalated">"Escalated to manual: it came back after its automatic attempts were used up."</p>
                })}
                <dl class="facts tiering">
                    <dt>"Rule"</dt>
                    <dd class="mono">{rule}</dd>
                    <dt>"Why"</dt>
                    <dd class="tier-reason">{t.reason.clone()}</dd>
                    <dt>"In this tier since"</dt>
                    <dd class="mono">{format_time(t.tier_at_ms)} " UTC"</dd>
                    <dt>"Automatic attempts"</dt>
                    <dd class="mono">{attempts}</dd>
                    <dt>"Next automatic attempt"</dt>
                    <dd class="mono">{next}</dd>
                </dl>
            }
            .into_any()
        }
    };
    view! {
        <section class="tiering-section" id="tier">
            <h2>"Tier " <TierBadge tier=tier /></h2>
            {body}
        </section>
    }
}

/// One dead letter of a replay chain, as a list item: link, status, time, how it was linked.
fn chain_item(l: &redrive_core::outcome::ChainLink) -> impl IntoView {
    let href = format!("/dead-letters/{}", l.id);
    let via = l.via.map(|v| format!(" · linked by {}", v.describe()));
    let repeat = (l.repeat_failures > 0).then(|| format!(" · came back ×{}", l.repeat_failures));
    view! {
        <li>
            <a href=href class="mono">{format!("#{}", l.id)}</a>
            " "
            <StatusBadge status=l.status />
            " "
            <span class="mono small">{format_time(l.dead_lettered_at_ms)} " UTC"</span>
            <span class="dim small">{repeat}{via}</span>
        </li>
    }
}

/// "Replay outcome": where this dead letter came back from, what came back from its
/// replays (each side bounded by `CHAIN_LINKS_SHOWN`), and the verdict on its last replay
/// (`docs/replay.md`, "Outcome"). Nothing when it was never replayed and did not come back.
#[component]
fn ReplayOutcome(
    repeat_failures: i32,
    link: Option<redrive_core::ReplayLink>,
    chain: redrive_core::outcome::ReplayChain,
    verdict: Option<redrive_core::outcome::Verdict>,
) -> impl IntoView {
    use redrive_core::outcome::Verdict;
    let empty =
        link.is_none() && chain.earlier.is_empty() && chain.later.is_empty() && verdict.is_none();
    (!empty).then(|| {
        let came_back = link.map(|l| {
            let job = l.job_id.clone().map(|j| {
                view! { " of replay job " <a class="mono" href=format!("/jobs/{j}")>{j.chars().take(8).collect::<String>()}</a> }
            });
            view! {
                <p class="came-back">
                    {format!("This record came back after a replay (repeat failure {repeat_failures}), linked by {}", l.via.describe())}
                    {job}
                    "."
                </p>
            }
        });
        let verdict = verdict.map(|v| match v {
            Verdict::CameBack => view! { <p class="verdict">"Its replay failed again: see the later dead letters below."</p> }.into_any(),
            Verdict::NoRefailureSeen => view! { <p class="verdict no-refailure">"No re-failure seen within the watch window after its last replay."</p> }.into_any(),
            Verdict::Watching { until_ms } => view! { <p class="verdict watching">"Replayed; watching for a re-failure until " {format_time(until_ms)} " UTC."</p> }.into_any(),
        });
        let earlier = (!chain.earlier.is_empty() || chain.earlier_purged.is_some()).then(|| {
            let more = chain.earlier_more.then(|| view! { <li class="dim">"… and earlier ones"</li> });
            let gone = chain.earlier_purged.map(|id| view! { <li class="dim">{format!("#{id} (no longer stored: purged by retention)")}</li> });
            view! {
                <h3>"Came back from (nearest first)"</h3>
                <ol class="chain earlier">
                    {chain.earlier.iter().map(chain_item).collect_view()}
                    {gone}
                    {more}
                </ol>
            }
        });
        let later = (!chain.later.is_empty()).then(|| {
            let more = chain.later_more.then(|| view! { <li class="dim">"… and more"</li> });
            view! {
                <h3>"Came back as (oldest first)"</h3>
                <ol class="chain later">
                    {chain.later.iter().map(chain_item).collect_view()}
                    {more}
                </ol>
            }
        });
        view! {
            <section class="replay-outcome">
                <h2>"Replay outcome"</h2>
                {came_back}
                {verdict}
                {earlier}
                {later}
            </section>
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use redrive_core::automation::{Tier, TierInfo};

    /// The Tier section names the tier once (its heading, with the badge) and gives the
    /// reason under "Why"; unsorted, the heading's badge says so.
    #[test]
    fn the_tier_section_names_the_tier_once() {
        let info = TierInfo {
            tier: Tier::Poison,
            rule: None,
            rule_version: Some(1),
            reason: "header retryable=false".into(),
            tier_at_ms: 1_000,
            auto_attempts: 0,
            max_attempts: None,
            next_attempt_at_ms: None,
            loop_guarded: false,
            escalated: false,
        };
        let html = view! { <Tiering tiering=Some(info) /> }.to_html();
        assert_eq!(html.matches(">Tier").count(), 1, "{html}");
        assert!(html.contains("tier-poison"), "{html}");
        assert!(html.contains(">Why</dt>"), "{html}");
        assert!(html.contains("header retryable=false"), "{html}");
        let html = view! { <Tiering tiering=None /> }.to_html();
        assert_eq!(html.matches(">Tier").count(), 1, "{html}");
        assert!(html.contains("tier-unsorted"), "{html}");
    }
}
