use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use super::{LoadError, NotFound};
use crate::auth_context::{may, use_session, Permission};
use crate::components::{ActionError, TriageEditor};
use crate::display::{format_time, title_text};
use crate::http_status::HttpStatus;
use crate::labels_api::{get_group_triage, ChangeLabel, SetNote};
use crate::query;
use crate::wire;

/// `/groups/:fingerprint`: one error group — its count, first and last seen, an example — and
/// its triage labels and note (an operator edits them here; every dead letter of the group
/// shows them).
#[component]
pub fn ErrorGroupPage() -> impl IntoView {
    let params = use_params_map();
    let fingerprint = move || params.with(|p| p.get("fingerprint").unwrap_or_default());
    let found = wire::resource(fingerprint, get_group_triage);
    let session = use_session();
    let label_act = ServerAction::<ChangeLabel>::new();
    let note_act = ServerAction::<SetNote>::new();
    let status = HttpStatus::current();
    Effect::new(move |_| {
        let label_done = matches!(label_act.value().get(), Some(Ok(_)));
        let note_done = matches!(note_act.value().get(), Some(Ok(_)));
        if label_done || note_done {
            found.refetch();
        }
    });
    let error = move || {
        label_act
            .value()
            .get()
            .and_then(Result::err)
            .or_else(|| note_act.value().get().and_then(Result::err))
    };
    view! {
        {move || error().map(|e| view! { <ActionError error=e /> })}
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let fp = fingerprint();
                let status = status.clone();
                Suspend::new(async move {
                    let can_edit = may(&session.0.await, Permission::Annotate);
                    match found.await {
                        Ok(Some(g)) => {
                            let group = g.group;
                            let list_href = query::href("/", [("fingerprint", fp.as_str())]);
                            let class = group
                                .error_class
                                .clone()
                                .unwrap_or_else(|| "(no error class)".into());
                            let title = format!("{} · error group · redrive", title_text(&class));
                            let back = format!("/groups/{}", query::encode(&fp));
                            view! {
                                <Title text=title />
                                <p class="crumbs"><a href="/groups">"← Error groups"</a></p>
                                <h1 class="detail-title"><span class="mono">{class}</span></h1>
                                <pre class="error-message">{group.example_message.clone().unwrap_or_default()}</pre>
                                <dl class="facts">
                                    <dt>"Fingerprint"</dt>
                                    <dd class="mono">{fp.clone()}</dd>
                                    <dt>"Live dead letters"</dt>
                                    <dd class="mono"><a href=list_href>{group.count}</a></dd>
                                    <dt>"First seen"</dt>
                                    <dd class="mono">{format_time(group.first_seen_ms)} " UTC"</dd>
                                    <dt>"Last seen"</dt>
                                    <dd class="mono">{format_time(group.last_seen_ms)} " UTC"</dd>
                                </dl>
                                <section class="triage-section" id="triage">
                                    <h2>"Labels and note of this error group"</h2>
                                    <TriageEditor
                                        kind="group"
                                        target=fp.clone()
                                        annotations=g.annotations
                                        can_edit=can_edit
                                        back=back
                                        label_act=label_act
                                        note_act=note_act
                                    />
                                </section>
                            }
                            .into_any()
                        }
                        Ok(None) => {
                            let shown: String = fp.chars().take(64).collect();
                            view! { <NotFound what=format!("error group {shown}") /> }.into_any()
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
