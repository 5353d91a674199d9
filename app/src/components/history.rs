use leptos::prelude::*;
use redrive_core::actions::HistoryEvent;

use crate::display::format_time;
use crate::query;

/// What a history event's `kind` means, in words; `None` for a kind this UI does not know
/// (shown as stored). The store's kinds, with the detail each carries, are listed in the tests.
fn describe(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "ingested" => "ingested",
        "replay_requested" => "replay requested",
        "published" => "published",
        "replay_failed" => "replay failed",
        "re_failed" => "came back after the replay (failed again)",
        "replay_cancelled" => "replay cancelled",
        "replay_skipped" => "replay skipped (transform)",
        "edited" => "edited",
        "deleted" => "deleted",
        "restored" => "restored",
        "archive_restored" => "restored (archive)",
        "tier_assigned" => "tier assigned",
        "tier_moved" => "moved to another tier",
        "label_added" => "label added",
        "label_removed" => "label removed",
        "note_set" => "note set",
        "note_cleared" => "note cleared",
        "group_label_added" => "group label added",
        "group_label_removed" => "group label removed",
        "group_note_set" => "group note set",
        "group_note_cleared" => "group note cleared",
        _ => return None,
    })
}

/// One dead letter's own history, oldest first: ingested, replay requested by whom, published
/// at which partition and offset, edited, deleted, restored, sorted into (or moved between)
/// automation tiers, its labels and note and its group's. Every field is stored text, rendered
/// as text.
#[component]
pub fn History(events: Vec<HistoryEvent>) -> impl IntoView {
    if events.is_empty() {
        return view! { <p class="dim">"No history recorded."</p> }.into_any();
    }
    let rows = events
        .into_iter()
        .map(|e| {
            // An unknown kind is shown as stored, so nothing is hidden.
            let kind = describe(&e.kind).map_or_else(|| e.kind.clone(), str::to_string);
            let job = e.job_id.clone().map(|j| {
                let href = format!("/jobs/{}", query::encode(&j));
                view! { <a class="mono" href=href>"job"</a> }
            });
            view! {
                <tr class=format!("event-{}", e.kind)>
                    <td class="mono nowrap">{format_time(e.at_ms)}</td>
                    <td class="nowrap">
                        <span class="event-kind">{kind}</span>
                    </td>
                    <td class="nowrap">{e.actor.clone().unwrap_or_default()}</td>
                    <td class="event-detail">{e.detail.clone().unwrap_or_default()}</td>
                    <td>{job}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data history">
            <thead>
                <tr>
                    <th class="col-time">"When (UTC)"</th>
                    <th>"What"</th>
                    <th>"Who"</th>
                    <th>"Detail"</th>
                    <th>"Job"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;
    use redrive_core::labels::LabelOp;

    /// Every kind the store writes to `dead_letter_events`, with the detail it stores. Core has
    /// no list of them (each is a string literal at its `INSERT`), so they are listed here:
    /// a new kind in `core/src/store` belongs here and in [`describe`].
    const STORE_KINDS: &[(&str, &str)] = &[
        (
            "replay_requested",
            "actions.rs, bulk/chunk.rs, replay_request.rs, versions.rs: to {topic}",
        ),
        (
            "published",
            "outbox_mark.rs: to {topic} partition {p} offset {o}",
        ),
        ("replay_failed", "outbox_mark.rs: the error"),
        (
            "re_failed",
            "outcome.rs: came back as dead letter #{id} (linked by …)",
        ),
        ("replay_cancelled", "job_control.rs: back to {status}"),
        (
            "replay_skipped",
            "transform_marks.rs: the transform's reason",
        ),
        ("edited", "versions.rs: version {n}: {diff}"),
        ("deleted", "actions.rs, bulk/chunk.rs: was {status}"),
        ("restored", "actions.rs, bulk/chunk.rs: back to {status}"),
        (
            "archive_restored",
            "archive.rs: from the archive {location}",
        ),
        (
            "tier_assigned",
            "tiers.rs (sorter and ingest): {tier}: {reason}",
        ),
        ("tier_moved", "tier_moves.rs: {from} → {to}: {reason}"),
        ("note_set", "labels.rs: the note's start"),
        ("note_cleared", "labels.rs: none"),
    ];

    fn event(kind: &str, detail: &str) -> HistoryEvent {
        HistoryEvent {
            at_ms: 1_000,
            kind: kind.to_string(),
            actor: Some("(rules)".to_string()),
            detail: Some(detail.to_string()),
            job_id: None,
        }
    }

    /// Every kind the store writes (its own, `ingested` that `Store::history` adds, and its
    /// group's triage events prefixed `group_`) reads as words, not as the stored name.
    #[test]
    fn every_kind_the_store_writes_has_a_wording() {
        let labels = [LabelOp::Add, LabelOp::Remove].map(LabelOp::event_kind);
        let triage = labels.into_iter().chain(["note_set", "note_cleared"]);
        let kinds: Vec<String> = STORE_KINDS
            .iter()
            .map(|(k, _)| k.to_string())
            .chain(labels.map(str::to_string))
            .chain(["ingested".to_string()])
            .chain(triage.map(|k| format!("group_{k}")))
            .collect();
        for kind in &kinds {
            let words = describe(kind).unwrap_or_else(|| panic!("no wording for {kind}"));
            assert!(!words.contains('_'), "{kind} reads {words:?}");
        }
    }

    /// The tier events read as words before their detail; an unknown kind is shown as stored.
    #[test]
    fn tier_events_read_as_words_and_unknown_kinds_as_stored() {
        let events = vec![
            event("tier_assigned", "poison: header retryable=false"),
            event("tier_moved", "manual → archive: moved by rule `old` (#1)"),
            event("something_new", "x"),
        ];
        let html = view! { <History events=events /> }.to_html();
        assert!(html.contains(">tier assigned<"), "{html}");
        assert!(html.contains(">moved to another tier<"), "{html}");
        assert!(!html.contains(">tier_assigned<"), "{html}");
        assert!(!html.contains(">tier_moved<"), "{html}");
        assert!(html.contains("poison: header retryable=false"), "{html}");
        assert!(html.contains(">something_new<"), "{html}");
    }
}
