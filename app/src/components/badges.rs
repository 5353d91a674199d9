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

#[cfg(test)]
mod tests {
    use redrive_core::actions::JobStatus;
    use redrive_core::alerts::{AlertState, DeliveryStatus};

    use super::*;

    const CSS: &str = include_str!("../../../style/main.css");

    /// Every class a coloured badge is given (dead letter status, tier, job status, alert state,
    /// delivery status) has exactly one colour rule in `style/main.css`.
    #[test]
    fn every_badge_class_has_a_colour_rule() {
        let jobs = [
            "preparing",
            "running",
            "waiting",
            "paused",
            "finished",
            "cancelled",
        ];
        let deliveries = ["pending", "delivered", "failed"];
        let classes = Status::ALL
            .into_iter()
            .map(|s| format!("status-{}", s.as_str()))
            .chain(
                Tier::ALL
                    .into_iter()
                    .map(|t| format!("tier-{}", t.as_str())),
            )
            .chain(["tier-unsorted".to_string()])
            .chain(jobs.into_iter().map(|j| {
                let j = JobStatus::parse(j).expect("a job status").as_str();
                format!("job-{j}")
            }))
            .chain(
                AlertState::ALL
                    .into_iter()
                    .map(|a| format!("alert-{}", a.as_str())),
            )
            .chain(deliveries.into_iter().map(|d| {
                let d = DeliveryStatus::parse(d)
                    .expect("a delivery status")
                    .as_str();
                format!("delivery-{d}")
            }))
            .chain(["came-back".to_string()]);
        for class in classes {
            // Once: a second rule for the same class (the tiers had two sets of colours, the
            // later one winning) leaves one of them dead and misleading.
            let rules = CSS.matches(&format!(".{class} {{")).count();
            assert_eq!(rules, 1, "style/main.css has {rules} rules for .{class}");
        }
    }
}
