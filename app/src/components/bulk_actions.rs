use std::collections::BTreeSet;

use leptos::prelude::*;
use redrive_core::Status;

use crate::actions_api::{Notice, Op};
use crate::query;

/// The dead letters ticked on the list page (hydrated pages only: without JavaScript the
/// checkboxes themselves are the state, and the form sends them as they are).
#[derive(Clone, Copy)]
pub struct Picked(RwSignal<BTreeSet<i64>>);

impl Picked {
    /// Nothing picked.
    pub fn new() -> Picked {
        Picked(RwSignal::new(BTreeSet::new()))
    }

    /// True if `id` is picked (tracked).
    pub fn has(self, id: i64) -> bool {
        self.0.with(|s| s.contains(&id))
    }

    /// Picks or unpicks `id`.
    pub fn set(self, id: i64, on: bool) {
        self.0.update(|s| {
            if on {
                s.insert(id);
            } else {
                s.remove(&id);
            }
        });
    }

    /// Picks or unpicks all of `ids`.
    pub fn set_all(self, ids: &[i64], on: bool) {
        self.0.update(|s| {
            for id in ids {
                if on {
                    s.insert(*id);
                } else {
                    s.remove(id);
                }
            }
        });
    }

    /// True if every one of `ids` is picked (and there is at least one; tracked).
    pub fn has_all(self, ids: &[i64]) -> bool {
        !ids.is_empty() && self.0.with(|s| ids.iter().all(|id| s.contains(id)))
    }

    /// How many are picked (tracked).
    pub fn count(self) -> usize {
        self.0.with(BTreeSet::len)
    }

    /// Unpicks everything.
    pub fn clear(self) {
        self.0.update(BTreeSet::clear);
    }
}

impl Default for Picked {
    fn default() -> Self {
        Picked::new()
    }
}

/// The action bar above the list, inside the list's one action form: the buttons for the
/// ticked rows (their `name="op"` says which), the optional reason, the replay's target topic
/// and rate limit, and the "… all matching" links to the confirmation page. Only rendered for
/// a role that may act.
#[component]
pub fn BulkActions(
    /// The current query, decoded (its filter goes into the "… all matching" links).
    pairs: Vec<(String, String)>,
    /// The ticked rows (live count with JavaScript).
    picked: Picked,
) -> impl IntoView {
    let filter = query::filter_only(&pairs);
    let status = query::value(&pairs, "status");
    let deleted_view = status == Status::Deleted.as_str();
    let confirm = |op: Op| {
        let mut p = vec![("op", op.as_str())];
        p.extend(filter.iter().copied());
        query::href("/confirm", p)
    };
    let replay_all = confirm(Op::Replay);
    let delete_all = confirm(Op::Delete);
    let restore_all = confirm(Op::Restore);
    // Without JavaScript the buttons are always enabled (the server says when nothing is
    // ticked); hydrated, they wait for a tick.
    let none = move || picked.count() == 0;
    let count_text = move || match picked.count() {
        1 => "1 selected".to_string(),
        n => format!("{n} selected"),
    };
    view! {
        <div class="bulk-actions" role="group" aria-label="Act on the selected dead letters">
            // Pressing Enter in a text field submits the form with its first button: let that
            // be this one (which the server answers with "choose an action"), not "Replay".
            <button type="submit" name="op" value="" class="visually-hidden" tabindex="-1" aria-hidden="true">
                "Submit"
            </button>
            <div class="bulk-row">
                <span class="selected-count js-only" aria-live="polite">{count_text}</span>
                {(!deleted_view).then(|| view! {
                    <button type="submit" name="op" value="replay" prop:disabled=none>
                        "Replay selected"
                    </button>
                    <button type="submit" name="op" value="delete" class="danger" prop:disabled=none>
                        "Delete selected"
                    </button>
                })}
                {deleted_view.then(|| view! {
                    <button type="submit" name="op" value="restore" prop:disabled=none>
                        "Restore selected"
                    </button>
                })}
                <span class="spacer"></span>
                {if deleted_view {
                    view! {
                        <a class="button secondary" href=restore_all>"Restore all matching…"</a>
                    }
                    .into_any()
                } else {
                    view! {
                        <a class="button secondary" href=replay_all>"Replay all matching this filter…"</a>
                        <a class="button secondary danger" href=delete_all>"Delete all matching…"</a>
                    }
                    .into_any()
                }}
            </div>
            <div class="bulk-row labels-row">
                <label>
                    <span>"Label"</span>
                    <input
                        type="text"
                        name="label"
                        maxlength=redrive_core::labels::MAX_LABEL_CHARS
                        placeholder="e.g. needs-fix"
                    />
                </label>
                <button type="submit" name="op" value="label_add" prop:disabled=none>
                    "Add label to selected"
                </button>
                <button type="submit" name="op" value="label_remove" prop:disabled=none>
                    "Remove label from selected"
                </button>
            </div>
            <div class="bulk-row options">
                <label class="wide">
                    <span>"Reason (optional, audited)"</span>
                    <input type="text" name="reason" maxlength="2000" placeholder="e.g. INC-1234 fixed" />
                </label>
                {(!deleted_view).then(|| view! {
                    <label>
                        <span>"Replay to topic"</span>
                        <input
                            type="text"
                            name="target_topic"
                            class="mono"
                            placeholder="each record's source topic"
                            pattern="[a-zA-Z0-9._\\-]{1,249}"
                            title="A Kafka topic name: letters, digits, . _ -"
                        />
                    </label>
                    <label class="narrow">
                        <span>"Rate limit (msgs/s)"</span>
                        <input type="number" name="rate_per_sec" min="1" step="1" placeholder="no limit" />
                    </label>
                })}
            </div>
        </div>
    }
}

/// An action's error: the server's sentence (escaped text).
#[component]
pub fn ActionError(error: ServerFnError) -> impl IntoView {
    let text = match error {
        ServerFnError::ServerError(msg) => msg,
        other => format!("The action did not go through: {other}. Reload and try again."),
    };
    view! { <p class="error-box" role="alert">{text}</p> }
}

/// The notice of a finished delete or restore (from the URL's `done=`), if any.
#[component]
pub fn ActionNotice(notice: Option<Notice>) -> impl IntoView {
    notice.map(|n| view! { <p class="done-box" role="status">{n.sentence()}</p> })
}
