use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_location, use_params_map};
use redrive_core::edit::Encoding;
use redrive_core::Status;

use super::{LoadError, NotFound};
use crate::auth_context::{may, use_session, CsrfField, Permission};
use crate::components::ActionError;
use crate::edit_api::{
    get_edit_form, EditForm, FieldForm, SaveEdit, BLANK_HEADER_ROWS, EDITOR_HEADERS,
};
use crate::http_status::HttpStatus;
use crate::query;
use crate::wire;

/// `/dead-letters/:id/edit`: edit the latest version of one dead letter's key, value and
/// headers, then save it as a new version or save and replay it (`docs/replay.md`, "Edit and
/// replay"). A plain HTML form: without JavaScript it posts and follows the redirect. Query:
/// `value_as`, `key_as` (show that part as `text`, `json`, `base64` or `hex`), `add` (blank
/// header rows, at most 50).
#[component]
pub fn EditPage() -> impl IntoView {
    let params = use_params_map();
    let search = use_location().search;
    let id = move || params.with(|p| p.get_str("id").and_then(|s| s.parse::<i64>().ok()));
    let asked = move || {
        let pairs = query::parse(&search.get());
        (
            id(),
            query::value(&pairs, "value_as").to_string(),
            query::value(&pairs, "key_as").to_string(),
            query::value(&pairs, "add")
                .parse::<usize>()
                .unwrap_or(BLANK_HEADER_ROWS)
                .min(50),
        )
    };
    let found = wire::resource(asked, |(id, value_as, key_as, _)| async move {
        match id {
            Some(id) => get_edit_form(id, value_as, key_as).await,
            None => Ok(None),
        }
    });
    let session = use_session();
    let save = ServerAction::<SaveEdit>::new();
    let status = HttpStatus::current();
    view! {
        {move || save.value().get().and_then(Result::err).map(|e| view! { <ActionError error=e /> })}
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let label = params.with(|p| p.get("id").unwrap_or_default());
                let status = status.clone();
                let blank = asked().3;
                Suspend::new(async move {
                    let can_edit = may(&session.0.await, Permission::Edit);
                    match found.await {
                        Ok(Some(f)) if can_edit => view! { <Editor f=f save=save blank=blank /> }.into_any(),
                        Ok(Some(f)) => {
                            status.set(403);
                            view! {
                                <p class="error-box" role="alert">
                                    {format!("Editing dead letter {} needs the operator role.", f.id)}
                                </p>
                            }
                            .into_any()
                        }
                        Ok(None) => view! { <NotFound what=format!("dead letter {label}") /> }.into_any(),
                        Err(error) => {
                            status.set(503);
                            view! { <LoadError error=error /> }.into_any()
                        }
                    }
                })
            }}
        </Transition>
    }
}

/// The encodings as `<option>`s, `chosen` selected; `remove` adds a "remove" choice (headers).
fn options(offered: &[Encoding], chosen: Encoding, remove: bool) -> impl IntoView {
    let label = |e: Encoding| match e {
        Encoding::Text => "text",
        Encoding::Json => "JSON",
        Encoding::Base64 => "base64",
        Encoding::Hex => "hex",
        Encoding::Null => "null",
    };
    view! {
        {offered
            .iter()
            .map(|&e| view! { <option value=e.as_str() selected={e == chosen}>{label(e)}</option> })
            .collect_view()}
        {remove.then(|| view! { <option value="remove">"remove"</option> })}
    }
}

/// "Show as: text · JSON · base64 · hex" links for one part (they reload the editor).
fn show_as(id: i64, param: &'static str, f: &FieldForm) -> impl IntoView {
    let links = f
        .offered
        .iter()
        .filter(|e| **e != Encoding::Null && **e != f.encoding)
        .map(|e| {
            let href = format!("/dead-letters/{id}/edit?{param}={}", e.as_str());
            view! { " " <a href=href>{e.as_str()}</a> }
        })
        .collect_view();
    (!f.is_null).then(|| view! { <span class="dim small">"Show as:" {links}</span> })
}

/// A textarea's content: a browser drops one line break right after `<textarea>`, so one is
/// put there for it to drop (a value that starts with a line break keeps it).
fn textarea_text(text: &str) -> String {
    format!("\n{text}")
}

/// One of value and key: an encoding choice and a textarea, or the "too large" notice.
#[component]
fn PartEditor(id: i64, what: &'static str, name: &'static str, f: FieldForm) -> impl IntoView {
    let as_name = format!("{name}_as");
    let newlines_name = format!("{name}_newlines");
    let size = if f.is_null {
        "null".to_string()
    } else {
        format!("{} bytes", f.bytes)
    };
    let links = show_as(
        id,
        if name == "value" {
            "value_as"
        } else {
            "key_as"
        },
        &f,
    );
    let rows = if name == "value" { "16" } else { "2" };
    match f.text.clone() {
        Some(text) => view! {
            <fieldset class="edit-part">
                <legend>{what} " (" {size} ")"</legend>
                <label>
                    <span>"Written as"</span>
                    <select name=as_name>{options(&f.offered, f.encoding, false)}</select>
                </label>
                " " {links}
                <input type="hidden" name=newlines_name value=f.newlines.as_str() />
                <textarea name=name rows=rows class="mono edit-text" spellcheck="false">{textarea_text(&text)}</textarea>
                <p class="dim small">
                    "JSON is checked before it is saved; choose null for a "
                    {if name == "value" { "tombstone" } else { "null key" }} "."
                </p>
            </fieldset>
        }
        .into_any(),
        None => view! {
            <fieldset class="edit-part">
                <legend>{what} " (" {size.clone()} ")"</legend>
                <input type="hidden" name=as_name value="keep" />
                <p class="notice" data-cut="">
                    {format!(
                        "The {} is too large to edit in the browser ({size}; at most {} KiB as text). \
                         It is kept as it is. To change it, use the API: ",
                        what.to_lowercase(),
                        if name == "value" { crate::edit_api::EDITOR_VALUE_BYTES } else { crate::edit_api::EDITOR_KEY_BYTES } / 1024,
                    )}
                    <code>{format!("POST /api/v1/dead-letters/{id}/versions")}</code>
                    " (docs/replay.md)."
                </p>
            </fieldset>
        }
        .into_any(),
    }
}

#[component]
fn Editor(f: EditForm, save: ServerAction<SaveEdit>, blank: usize) -> impl IntoView {
    let id = f.id;
    let next = f.version + 1;
    let title = format!("Edit dead letter {id} · redrive");
    let editable = !matches!(f.status, Status::Deleted | Status::ReplayPending);
    let from = if f.version == 0 {
        "the original record".to_string()
    } else {
        format!("version {}", f.version)
    };
    let target_hint = f
        .source_topic
        .clone()
        .map(|t| format!("empty = the source topic, {t}"))
        .unwrap_or_else(|| "this dead letter has no source topic: name one".to_string());
    let all = Encoding::ALL.to_vec();
    let headers = match f.headers.clone() {
        Some(rows) => {
            let room = EDITOR_HEADERS.saturating_sub(rows.len()).min(blank);
            let existing = rows
                .into_iter()
                .map(|h| {
                    let all = all.clone();
                    view! {
                        <tr>
                            <td><input type="text" name="header_name[]" value=h.name class="mono" /></td>
                            <td><select name="header_as[]">{options(&all, h.encoding, true)}</select></td>
                            <td><input type="text" name="header_value[]" value=h.text class="mono wide" /></td>
                        </tr>
                    }
                })
                .collect_view();
            let blanks = (0..room)
                .map(|_| {
                    let all = all.clone();
                    view! {
                        <tr class="blank">
                            <td><input type="text" name="header_name[]" value="" class="mono" placeholder="new header" /></td>
                            <td><select name="header_as[]">{options(&all, Encoding::Text, false)}</select></td>
                            <td><input type="text" name="header_value[]" value="" class="mono wide" /></td>
                        </tr>
                    }
                })
                .collect_view();
            let more = format!("/dead-letters/{id}/edit?add={}", (blank + 5).min(50));
            view! {
                <table class="edit-headers">
                    <thead><tr><th>"Name"</th><th>"Written as"</th><th>"Value"</th></tr></thead>
                    <tbody>{existing}{blanks}</tbody>
                </table>
                <p class="dim small">
                    "Rows are kept in this order. Choose remove to drop a header; a row with no name and \
                     no value is left out; null is a header without a value. "
                    <a href=more>"More empty rows"</a>
                    ". Headers named redrive-* and the error headers of the record's convention are \
                     replaced or dropped at replay, as for any replay."
                </p>
            }
            .into_any()
        }
        None => view! {
            <input type="hidden" name="headers_keep" value="true" />
            <p class="notice" data-cut="">{f.headers_note.clone().unwrap_or_default()}</p>
        }
        .into_any(),
    };
    view! {
        <Title text=title />
        <p class="crumbs">
            <a href=format!("/dead-letters/{id}")>{format!("← Dead letter {id}")}</a>
        </p>
        <h1>{format!("Edit dead letter {id}")}</h1>
        <p>
            {format!(
                "You are editing {from}. Saving stores version {next}; the original stays as it was \
                 received. A replay publishes the latest version instead of the original, exactly once."
            )}
        </p>
        {(!editable).then(|| view! {
            <p class="error-box" role="alert">
                {if f.status == Status::Deleted {
                    "This dead letter is deleted: restore it before editing it."
                } else {
                    "This dead letter is waiting in a replay job: cancel the job (or let it finish) before editing it."
                }}
            </p>
        })}
        <ActionForm action=save attr:class="edit-form">
            <CsrfField />
            <input type="hidden" name="id" value=id />
            <input type="hidden" name="base_version" value=f.version />
            <PartEditor id=id what="Value" name="value" f=f.value.clone() />
            <PartEditor id=id what="Key" name="key" f=f.key.clone() />
            <fieldset class="edit-part">
                <legend>"Headers"</legend>
                {headers}
            </fieldset>
            <label class="wide">
                <span>"Reason (optional, audited)"</span>
                <input type="text" name="reason" maxlength="2000" placeholder="e.g. INC-1234 amount as a number" />
            </label>
            <label class="wide">
                <span>{format!("Replay to topic ({target_hint})")}</span>
                <input type="text" name="target_topic" maxlength="249" />
            </label>
            <p class="record-actions">
                <button type="submit" name="op" value="save">{format!("Save as version {next}")}</button>
                " "
                <button type="submit" name="op" value="replay">"Save and replay"</button>
            </p>
        </ActionForm>
    }
}
