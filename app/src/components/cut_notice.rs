use leptos::prelude::*;

/// The notice above anything a display cap cut: what was cut, and a link to the raw bytes.
/// Carries `data-cut` so tests (and a curious operator) can find every cut on a page.
#[component]
pub fn CutNotice(
    /// What is shown, as a sentence: "Showing the first 200 of 10000 headers."
    text: String,
    /// The raw download of the whole thing.
    raw_href: String,
    /// What the link downloads: "the raw bytes", "all headers", ...
    what: &'static str,
) -> impl IntoView {
    view! {
        <p class="notice cut-notice" data-cut="">
            {text} " " <a href=raw_href download="">{format!("Download {what} (raw)")}</a>
            " for everything."
        </p>
    }
}
