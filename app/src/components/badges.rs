use leptos::prelude::*;
use redrive_core::Status;

/// A dead letter's lifecycle state as a coloured badge.
#[component]
pub fn StatusBadge(status: Status) -> impl IntoView {
    let label = status.as_str().replace('_', " ");
    view! { <span class=format!("badge status-{}", status.as_str())>{label}</span> }
}

/// Marks a dead letter whose headers could not be fully decoded (see its decode warnings).
#[component]
pub fn MalformedBadge() -> impl IntoView {
    view! {
        <span class="badge malformed" title="Some headers could not be decoded; see the decode warnings">
            "malformed"
        </span>
    }
}
