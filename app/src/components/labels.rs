use leptos::prelude::*;
use redrive_core::labels::{Annotations, MAX_LABEL_CHARS, MAX_NOTE_CHARS};

use crate::auth_context::CsrfField;
use crate::display::format_time;
use crate::display::visible::{shown, Lines};

/// Most of a note a page shows: the whole of the longest note (4000 characters of up to
/// 4 bytes), with room for the markers of hidden characters.
pub const NOTE_SHOWN_BYTES: usize = 32 * 1024;
use crate::labels_api::{ChangeLabel, SetNote};
use crate::query;

/// Label chips; each links to the list filtered by that label (`/?label=...`). `group` marks
/// them as the error group's labels (styled apart, titled so).
#[component]
pub fn LabelChips(labels: Vec<String>, #[prop(optional)] group: bool) -> impl IntoView {
    let title = if group {
        "A label of its error group: show every dead letter with this label"
    } else {
        "Show every dead letter with this label"
    };
    labels
        .into_iter()
        .map(|l| {
            let href = query::href("/", [("label", l.as_str())]);
            view! {
                <a class="label-chip" class:group=group href=href title=title>{l}</a>
            }
        })
        .collect_view()
}

/// The labels and the note of one dead letter (`kind` = `dead_letter`, `target` its id) or
/// one error group (`group`, its fingerprint). A viewer reads them; an operator also removes
/// a label (× on its chip), adds one, and edits the note in place — plain forms, each back
/// to `back`. The note is shown as text (line breaks kept), never as HTML.
#[component]
pub fn TriageEditor(
    kind: &'static str,
    target: String,
    annotations: Annotations,
    can_edit: bool,
    back: String,
    label_act: ServerAction<ChangeLabel>,
    note_act: ServerAction<SetNote>,
) -> impl IntoView {
    let Annotations { labels, note } = annotations;
    let chips = if labels.is_empty() {
        view! { <span class="dim">"no labels"</span> }.into_any()
    } else {
        labels
            .into_iter()
            .map(|l| {
                let href = query::href("/", [("label", l.label.as_str())]);
                let title = format!("added by {} at {} UTC", l.added_by, format_time(l.added_at_ms));
                let (t, b, name) = (target.clone(), back.clone(), l.label.clone());
                let remove = can_edit.then(move || {
                    let aria = format!("Remove the label {name}");
                    view! {
                        <ActionForm action=label_act attr:class="chip-remove">
                            <CsrfField />
                            <input type="hidden" name="kind" value=kind />
                            <input type="hidden" name="target" value=t />
                            <input type="hidden" name="op" value="remove" />
                            <input type="hidden" name="label" value=name />
                            <input type="hidden" name="back" value=b />
                            <button type="submit" class="chip-x" aria-label=aria.clone() title=aria>"×"</button>
                        </ActionForm>
                    }
                });
                view! {
                    <span class="label-item">
                        <a class="label-chip" href=href title=title>{l.label.clone()}</a>
                        {remove}
                    </span>
                }
            })
            .collect_view()
            .into_any()
    };
    let (t, b) = (target.clone(), back.clone());
    let add = can_edit.then(move || {
        view! {
            <ActionForm action=label_act attr:class="label-add">
                <CsrfField />
                <input type="hidden" name="kind" value=kind />
                <input type="hidden" name="target" value=t />
                <input type="hidden" name="op" value="add" />
                <input type="hidden" name="back" value=b />
                <input
                    type="text"
                    name="label"
                    required
                    maxlength=MAX_LABEL_CHARS
                    placeholder="e.g. needs-fix, known: INC-1234"
                    aria-label="New label"
                />
                <button type="submit">"Add label"</button>
            </ActionForm>
        }
    });
    let by = note.as_ref().map(|n| {
        format!(
            "edited by {} at {} UTC",
            n.updated_by,
            format_time(n.updated_at_ms)
        )
    });
    let text = note.map(|n| n.text).unwrap_or_default();
    let note_view = if can_edit {
        view! {
            <ActionForm action=note_act attr:class="note-form">
                <CsrfField />
                <input type="hidden" name="kind" value=kind />
                <input type="hidden" name="target" value=target />
                <input type="hidden" name="back" value=back />
                <label class="wide">
                    <span>"Note (audited; empty clears it)"</span>
                    <textarea name="note" rows="3" maxlength=MAX_NOTE_CHARS>{text}</textarea>
                </label>
                <button type="submit">"Save note"</button>
                {by.map(|b| view! { <span class="dim small">{b}</span> })}
            </ActionForm>
        }
        .into_any()
    } else if text.is_empty() {
        view! { <p class="dim">"No note."</p> }.into_any()
    } else {
        // Shown as text with hidden characters marked, like every stored text on a page.
        let text = shown(&text, NOTE_SHOWN_BYTES, Lines::Keep).text;
        view! {
            <p class="note">{text}</p>
            {by.map(|b| view! { <p class="dim small">{b}</p> })}
        }
        .into_any()
    };
    view! {
        <div class="triage" data-kind=kind>
            <div class="labels">{chips}</div>
            {add}
            {note_view}
        </div>
    }
}
