use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::{BadQuery, LoadError};
use crate::actions_api::{without_page_params, ActOnSelected, Notice};
use crate::api::{get_filter_choices, list_dead_letters, Listing};
use crate::auth_context::{may, use_session, CsrfField, Permission};
use crate::components::{
    ActionError, ActionNotice, BulkActions, DeadLetterTable, FilterBar, ListTools, Pager, Picked,
};
use crate::http_status::HttpStatus;
use crate::overview_api::count_dead_letters;
use crate::query;
use crate::wire;

/// `/`: dead letters, newest first, narrowed by the filter in the URL. For an operator the
/// table sits inside one action form (a checkbox per row, Replay / Delete / Restore selected,
/// and links to "… all matching" via the confirmation page).
#[component]
pub fn DeadLettersPage() -> impl IntoView {
    let search = use_location().search;
    // The notice and a plain form's error travel in the URL too; the filter is the rest.
    let list_search = Memo::new(move |_| without_page_params(&search.get()));
    let listing = wire::resource(move || list_search.get(), list_dead_letters);
    let matching = wire::resource(move || list_search.get(), count_dead_letters);
    let choices = wire::resource(|| (), |_| get_filter_choices());
    let session = use_session();
    let act = ServerAction::<ActOnSelected>::new();
    let picked = Picked::new();
    let status = HttpStatus::current();
    // Hydrated: after an action, show the new statuses without a reload.
    Effect::new(move |_| {
        if let Some(Ok(_)) = act.value().get() {
            picked.clear();
            listing.refetch();
        }
    });
    let notice = move || {
        let pairs = query::parse(&search.get());
        Notice::parse(query::value(&pairs, "done"))
    };
    let error = move || act.value().get().and_then(Result::err);
    view! {
        <Title text="Dead letters · redrive" />
        <h1>"Dead letters"</h1>
        {move || view! { <ActionNotice notice=notice() /> }}
        {move || error().map(|e| view! { <ActionError error=e /> })}
        // Transition, not Suspense: a refetch after an action keeps the rows until the answer.
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let pairs = query::parse(&list_search.get());
                let back = query::href("/", pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                let status = status.clone();
                Suspend::new(async move {
                    // Suggestions are a convenience: without them the fields are plain text.
                    let choices = choices.await.unwrap_or_default();
                    let can_act = {
                        let s = session.0.await;
                        [Permission::Replay, Permission::Delete, Permission::Annotate]
                            .into_iter()
                            .any(|p| may(&s, p))
                    };
                    let body = match listing.await {
                        // An empty page has nothing to act on: no action bar.
                        Ok(Listing::Found(page)) if can_act && !page.items.is_empty() => {
                            let in_form = pairs.clone();
                            let note = search_note(&pairs, page.items.len(), page.next_cursor.as_deref());
                            view! {
                                {note}
                                <ActionForm action=act attr:class="bulk-form">
                                    <CsrfField />
                                    <input type="hidden" name="back" value=back />
                                    <BulkActions pairs=in_form picked=picked />
                                    <DeadLetterTable items=page.items picked=picked />
                                </ActionForm>
                                <Pager pairs=pairs.clone() next_cursor=page.next_cursor />
                                <ListTools pairs=pairs.clone() can_act=true />
                            }
                            .into_any()
                        }
                        Ok(Listing::Found(page)) => {
                            let any = !page.items.is_empty();
                            let note = search_note(&pairs, page.items.len(), page.next_cursor.as_deref());
                            view! {
                                {note}
                                <DeadLetterTable items=page.items />
                                <Pager pairs=pairs.clone() next_cursor=page.next_cursor />
                                {any.then(|| view! { <ListTools pairs=pairs.clone() can_act=false /> })}
                            }
                            .into_any()
                        }
                        Ok(Listing::BadQuery(message)) => {
                            status.set(400);
                            view! { <BadQuery message=message reset="/" /> }.into_any()
                        }
                        Err(error) => {
                            status.set(503);
                            view! { <LoadError error=error /> }.into_any()
                        }
                    };
                    // A count that failed is left out; the list still shows.
                    let count = matching.await.ok().flatten();
                    view! {
                        <FilterBar action="/" pairs=pairs choices=choices />
                        {count.map(|c| view! { <p class="match-count dim">{c.text()}</p> })}
                        {body}
                    }
                })
            }}
        </Transition>
    }
}

/// Under a search whose page stopped early (`docs/triage.md`, "Search": a term too common for
/// the index and too rare among the newest dead letters), what the page holds and that "Next"
/// searches older ones; nothing otherwise.
fn search_note(
    pairs: &[(String, String)],
    items: usize,
    next_cursor: Option<&str>,
) -> Option<impl IntoView> {
    let searching = pairs.iter().any(|(k, v)| k == "q" && !v.trim().is_empty());
    let limit = query::value(pairs, "limit")
        .parse::<usize>()
        .unwrap_or(redrive_core::filter::DEFAULT_LIMIT as usize);
    let cursor = redrive_core::Cursor::decode(next_cursor?).ok()?;
    (searching && items < limit).then(|| {
        view! {
            <p class="notice search-partial">
                "This search read the newest dead letters down to "
                {crate::display::format_time(cursor.dead_lettered_at_ms)}
                " and stopped there to stay fast: older ones may match too. "
                "Next page searches further back."
            </p>
        }
    })
}
