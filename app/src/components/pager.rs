use leptos::prelude::*;

use crate::query;

/// Keyset paging for the list: "Newest" back to the first page, "Older →" to the page after
/// the last row shown (the store's `next_cursor`). Both keep the filter and page size.
#[component]
pub fn Pager(
    /// The current query, decoded.
    pairs: Vec<(String, String)>,
    /// Cursor of the next (older) page; `None` on the last page.
    next_cursor: Option<String>,
) -> impl IntoView {
    let mut base = query::filter_only(&pairs);
    let limit = query::value(&pairs, "limit");
    if !limit.is_empty() {
        base.push(("limit", limit));
    }
    let paged = !query::value(&pairs, "cursor").is_empty();
    let newest = query::href("/", base.iter().copied());
    let older = next_cursor.map(|c| {
        let mut with_cursor = base.clone();
        with_cursor.push(("cursor", c.as_str()));
        query::href("/", with_cursor)
    });
    view! {
        <nav class="pager" aria-label="Pages">
            {paged.then(|| view! { <a class="button secondary" href=newest>"← Newest"</a> })}
            {match older {
                Some(href) => view! { <a class="button secondary" rel="next" href=href>"Older →"</a> }.into_any(),
                None => view! { <span class="dim">"No older dead letters."</span> }.into_any(),
            }}
        </nav>
    }
}
