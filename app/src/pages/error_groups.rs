use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::{BadQuery, LoadError};
use crate::api::{get_filter_choices, list_error_groups, Listing};
use crate::components::{ErrorGroupTable, FilterBar};
use crate::http_status::HttpStatus;
use crate::query;
use crate::wire;

/// `/groups`: dead letters grouped by error fingerprint, largest group first, under the same
/// filter as the list.
#[component]
pub fn ErrorGroupsPage() -> impl IntoView {
    let search = use_location().search;
    let groups = wire::resource(move || search.get(), list_error_groups);
    let choices = wire::resource(|| (), |_| get_filter_choices());
    let status = HttpStatus::current();
    view! {
        <Title text="Error groups · redrive" />
        <h1>"Error groups"</h1>
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let pairs = query::parse(&search.get());
                let status = status.clone();
                Suspend::new(async move {
                    let choices = choices.await.unwrap_or_default();
                    let body = match groups.await {
                        Ok(Listing::Found(view)) => {
                            let bounded = view.counted_among_newest.map(|n| {
                                view! {
                                    <p class="dim counted-among-newest">
                                        {bounded_note(n)}
                                    </p>
                                }
                            });
                            view! {
                                {bounded}
                                <ErrorGroupTable
                                    groups=view.groups
                                    trends=view.trends
                                    window=view.trend_window
                                    new=view.new
                                    filter=pairs.clone()
                                />
                            }
                                .into_any()
                        }
                        Ok(Listing::BadQuery(message)) => {
                            status.set(400);
                            view! { <BadQuery message=message reset="/groups" /> }.into_any()
                        }
                        Err(error) => {
                            status.set(503);
                            view! { <LoadError error=error /> }.into_any()
                        }
                    };
                    view! {
                        <FilterBar action="/groups" pairs=pairs choices=choices />
                        {body}
                    }
                })
            }}
        </Transition>
    }
}

/// The note above groups counted among the newest `n` matching dead letters only
/// (`GroupsView::counted_among_newest`).
fn bounded_note(n: i64) -> String {
    let digits = n.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!(
        // 20,000: `redrive_core::store::EDGE_SCAN_ROWS`.
        "Counted among the newest {grouped} matching dead letters only: this filter (free \
         text, labels, came back, a replay job, or a time range cut inside an hour with \
         more than 20,000 matches on both sides of the cut) is not kept in the maintained \
         counts, and more dead letters match it. Counts are at least these; groups whose \
         dead letters are all older are not shown."
    )
}
