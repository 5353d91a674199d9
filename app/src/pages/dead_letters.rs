use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::{BadQuery, LoadError};
use crate::api::{get_filter_choices, list_dead_letters, Listing};
use crate::components::{DeadLetterTable, FilterBar, Pager};
use crate::http_status::HttpStatus;
use crate::query;
use crate::wire;

/// `/`: dead letters, newest first, narrowed by the filter in the URL.
#[component]
pub fn DeadLettersPage() -> impl IntoView {
    let search = use_location().search;
    let listing = wire::resource(move || search.get(), list_dead_letters);
    let choices = wire::resource(|| (), |_| get_filter_choices());
    let status = HttpStatus::current();
    view! {
        <Title text="Dead letters · redrive" />
        <h1>"Dead letters"</h1>
        <Suspense fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let pairs = query::parse(&search.get());
                let status = status.clone();
                Suspend::new(async move {
                    // Suggestions are a convenience: without them the fields are plain text.
                    let choices = choices.await.unwrap_or_default();
                    let body = match listing.await {
                        Ok(Listing::Found(page)) => view! {
                            <DeadLetterTable items=page.items />
                            <Pager pairs=pairs.clone() next_cursor=page.next_cursor />
                        }
                        .into_any(),
                        Ok(Listing::BadQuery(message)) => {
                            status.set(400);
                            view! { <BadQuery message=message reset="/" /> }.into_any()
                        }
                        Err(error) => {
                            status.set(503);
                            view! { <LoadError error=error /> }.into_any()
                        }
                    };
                    view! {
                        <FilterBar action="/" pairs=pairs choices=choices />
                        {body}
                    }
                })
            }}
        </Suspense>
    }
}
