use leptos::prelude::*;
use redrive_core::labels::MAX_LABEL_CHARS;

use crate::query;

/// Below the list: the export of everything matching the filter as JSON Lines (a download
/// link carrying the filter; `docs/export.md`), and — for a role that may act — "add / remove
/// a label on all matching", a GET form to the confirmation page (which counts first).
#[component]
pub fn ListTools(
    /// The current query, decoded.
    pairs: Vec<(String, String)>,
    can_act: bool,
) -> impl IntoView {
    let filter = query::filter_only(&pairs);
    let export_href = query::href("/dead-letters/export.jsonl", filter.iter().copied());
    let hidden = filter
        .iter()
        .map(|(k, v)| view! { <input type="hidden" name=k.to_string() value=v.to_string() /> })
        .collect_view();
    let label_all = can_act.then(|| {
        view! {
            <form class="inline-form label-all" method="get" action="/confirm">
                {hidden}
                <label>
                    <span>"Label all matching"</span>
                    <input
                        type="text"
                        name="op_label"
                        required
                        maxlength=MAX_LABEL_CHARS
                        placeholder="e.g. known: INC-1234"
                    />
                </label>
                <button type="submit" name="op" value="label_add" class="secondary-button">
                    "Add to all matching…"
                </button>
                <button type="submit" name="op" value="label_remove" class="secondary-button">
                    "Remove from all matching…"
                </button>
            </form>
        }
    });
    view! {
        <div class="list-tools">
            <a class="button secondary export-link" href=export_href download="redrive-dead-letters.jsonl">
                "Export the filtered dead letters (JSON Lines)"
            </a>
            {label_all}
        </div>
    }
}
