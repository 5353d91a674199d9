use leptos::prelude::*;
use redrive_core::automation::Tier;
use redrive_core::Status;

/// A dead letter's lifecycle state as a coloured badge.
#[component]
pub fn StatusBadge(status: Status) -> impl IntoView {
    view! { <span class=format!("badge status-{}", status.as_str())>{status.label()}</span> }
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

/// A dead letter's automation tier (`docs/automation.md`), or "unsorted" while the sorter
/// has not reached it.
#[component]
pub fn TierBadge(tier: Option<Tier>) -> impl IntoView {
    let (name, title) = match tier {
        Some(Tier::Transient) => ("transient", "Replayed automatically on its rule's schedule"),
        Some(Tier::Manual) => ("manual", "A person decides: never replayed automatically"),
        Some(Tier::Poison) => (
            "poison",
            "Can never succeed as it is: never replayed automatically",
        ),
        Some(Tier::Archive) => ("archive", "Kept for audit: out of the default views"),
        None => ("unsorted", "Not sorted into a tier yet"),
    };
    view! { <span class=format!("badge tier tier-{name}") title=title>{name}</span> }
}
