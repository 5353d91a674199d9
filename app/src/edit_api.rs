//! Server functions of edit and replay (`docs/replay.md`, "Edit and replay"): the editor's
//! form data for one dead letter (its latest version, each part written in an encoding the
//! browser can edit, within the display caps), the saved versions with their diffs for the
//! detail page, and the form post that saves an edit (and replays it).
//!
//! `save_edit` is a POST server function driven by an `ActionForm`, so the editor works as a
//! plain HTML form without JavaScript: `csrf` is checked by the middleware, an operator role
//! is needed (a refusal is audited `denied`), a refused edit comes back to the editor with its
//! message (`__err`), a saved one goes to the dead letter's page (or the replay job's).

// Without `ssr` the `#[server]` macro (server_fn_macro 0.8.12) drops a function's own lint
// attributes from the client-side function it generates, so `save_edit`'s `#[allow]` is given
// here too (as in `actions_api/forms.rs`).
#![allow(clippy::too_many_arguments)]

use leptos::prelude::*;
use redrive_core::edit::{Encoding, Newlines, VersionInfo};
use redrive_core::Status;
use serde::{Deserialize, Serialize};

/// Most bytes of text a value may take in the editor's textarea (the display cap of a value
/// shown as text, 256 KiB): beyond, the page says the value is too large to edit in the
/// browser and names the API route.
pub const EDITOR_VALUE_BYTES: usize = crate::display::caps::VALUE_TEXT_BYTES;
/// Most bytes of text a key may take in the editor (16 KiB, the key's display cap).
pub const EDITOR_KEY_BYTES: usize = crate::display::caps::KEY_TEXT_BYTES;
/// Most headers the editor shows as rows (the header table's cap); with more, the headers
/// are kept as they are and edited through the API.
pub const EDITOR_HEADERS: usize = crate::display::caps::HEADERS_SHOWN;
/// Most bytes of text one header value may take in the editor (4 KiB).
pub const EDITOR_HEADER_VALUE_BYTES: usize = 4 * 1024;
/// Blank header rows offered for new headers (more with `?add=N`, at most 50).
pub const BLANK_HEADER_ROWS: usize = 3;

/// One of key and value, as the editor shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldForm {
    /// How `text` is written (and how the form reads it back unless the person changes it).
    pub encoding: Encoding,
    /// The encodings this part can be shown in (links that reload the editor).
    pub offered: Vec<Encoding>,
    /// The part in `encoding`; `None` when it is too large for the browser (then the form
    /// keeps it as it is).
    pub text: Option<String>,
    /// Its length, bytes (0 when null).
    pub bytes: u64,
    pub is_null: bool,
    /// The line ends of the text (a browser sends CRLF; the server puts these back).
    pub newlines: Newlines,
}

/// One header row of the editor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderForm {
    pub name: String,
    pub encoding: Encoding,
    pub text: String,
}

/// What the editor page shows for one dead letter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditForm {
    pub id: i64,
    /// The latest version (0 = the original): what the edit is made from.
    pub version: i32,
    pub status: Status,
    pub source_topic: Option<String>,
    pub value: FieldForm,
    pub key: FieldForm,
    /// The header rows; `None` when there are too many or one is too large for the browser
    /// (`headers_note` says which), and the edit keeps the headers as they are.
    pub headers: Option<Vec<HeaderForm>>,
    pub headers_note: Option<String>,
}

#[cfg(feature = "ssr")]
mod seam {
    use redrive_core::edit::{
        default_encoding, editable_as_text, encode, encoded_len, Encoding, Newlines,
    };

    use super::{FieldForm, HeaderForm};
    use crate::display::visible::{has_hidden, Lines};

    /// The encodings `bytes` can be written in without changing them. Text and JSON need
    /// text that comes back byte for byte and holds no hidden character (a textarea would
    /// show a bidi control as itself: such a value is edited as base64 or hex).
    pub fn offered(bytes: Option<&[u8]>) -> Vec<Encoding> {
        let Some(b) = bytes else {
            return Encoding::ALL.to_vec();
        };
        let text_ok = editable_as_text(b)
            && std::str::from_utf8(b).is_ok_and(|t| !has_hidden(t, Lines::Keep));
        Encoding::ALL
            .into_iter()
            .filter(|e| match e {
                Encoding::Text => text_ok,
                Encoding::Json => text_ok && encode(Some(b), Encoding::Json).is_some(),
                _ => true,
            })
            .collect()
    }

    /// The editor's form of one part, in `asked` if it can be, else its default encoding;
    /// its text only if it fits in `cap` bytes (checked before anything is encoded).
    pub fn field(bytes: Option<&[u8]>, asked: Option<Encoding>, cap: usize) -> FieldForm {
        let offered = offered(bytes);
        let default = match default_encoding(bytes) {
            e if offered.contains(&e) => e,
            _ => Encoding::Base64,
        };
        let encoding = asked
            .filter(|e| offered.contains(e) && (*e != Encoding::Null || bytes.is_none()))
            .unwrap_or(default);
        let len = bytes.map_or(0, <[u8]>::len);
        let text = (encoded_len(len, encoding) <= cap)
            .then(|| encode(bytes, encoding))
            .flatten();
        let newlines = bytes
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(Newlines::of)
            .unwrap_or(Newlines::Lf);
        FieldForm {
            encoding,
            offered,
            text,
            bytes: len as u64,
            is_null: bytes.is_none(),
            newlines,
        }
    }

    /// A header row, or `None` if its name or value is too large for the editor.
    pub fn header(h: &redrive_core::model::Header) -> Option<HeaderForm> {
        if h.name.len() > super::EDITOR_HEADER_VALUE_BYTES {
            return None;
        }
        let v = h.value.as_deref();
        // A header value is one line: text only without line breaks.
        let encoding = match v {
            None => Encoding::Null,
            Some(b)
                if offered(Some(b)).contains(&Encoding::Text)
                    && !b.contains(&b'\n')
                    && !b.contains(&b'\r') =>
            {
                Encoding::Text
            }
            Some(_) => Encoding::Hex,
        };
        let len = v.map_or(0, <[u8]>::len);
        if encoded_len(len, encoding) > super::EDITOR_HEADER_VALUE_BYTES {
            return None;
        }
        Some(HeaderForm {
            name: h.name.clone(),
            encoding,
            text: encode(v, encoding).unwrap_or_default(),
        })
    }

    /// One part as the form sent it: `keep` (not editable in the browser) gives `None`.
    pub fn part(
        what: &str,
        encoding: &str,
        text: &str,
        newlines: &str,
    ) -> Result<Option<Option<Vec<u8>>>, String> {
        if encoding == "keep" {
            return Ok(None);
        }
        let e = Encoding::parse(encoding).ok_or_else(|| {
            format!("Choose how the {what} is written (text, JSON, base64, hex or null).")
        })?;
        let text = match e {
            Encoding::Text | Encoding::Json => Newlines::parse(newlines).apply(text),
            _ => text.to_string(),
        };
        e.decode(&format!("The {what}"), &text)
            .map(Some)
            .map_err(|err| err.0)
    }
}

/// The editor's form for dead letter `id` (its latest version), each part in the encoding
/// asked for (`value_as`, `key_as`: `text`, `json`, `base64`, `hex`; empty = the default),
/// `None` if there is no such dead letter.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_edit_form(
    id: i64,
    #[server(default)] value_as: String,
    #[server(default)] key_as: String,
) -> Result<Option<EditForm>, ServerFnError> {
    let store = crate::actions_api::store_for_labels()?;
    let failed = |e| crate::actions_api::failed_for_labels("read the dead letter", e);
    // Outside the actor's DLQ-topic scope a record is absent.
    let Some(dl) = store
        .get(id)
        .await
        .map_err(failed)?
        .filter(|d| crate::auth_context::sees_topic(&d.summary.dlq_topic))
    else {
        return Ok(None);
    };
    let version = store.latest_version(id).await.map_err(failed)?.unwrap_or(0);
    let record = if version == 0 {
        redrive_core::edit::Record {
            key: dl.record.key.clone(),
            value: dl.record.value.clone(),
            headers: dl.record.headers.clone(),
        }
    } else {
        store
            .version_record(id, version)
            .await
            .map_err(failed)?
            .unwrap_or_default()
    };
    let (headers, headers_note) = if record.headers.len() > EDITOR_HEADERS {
        (
            None,
            Some(format!(
                "This record has {} headers, more than the editor shows ({EDITOR_HEADERS}); they \
                 are kept as they are. Edit them with the API.",
                record.headers.len()
            )),
        )
    } else {
        let rows: Option<Vec<HeaderForm>> = record.headers.iter().map(seam::header).collect();
        match rows {
            Some(r) => (Some(r), None),
            None => (
                None,
                Some(format!(
                    "A header name or value is larger than the editor shows ({} bytes as text); \
                     the headers are kept as they are. Edit them with the API.",
                    EDITOR_HEADER_VALUE_BYTES
                )),
            ),
        }
    };
    Ok(Some(EditForm {
        id,
        version,
        status: dl.summary.status,
        source_topic: dl
            .normalized
            .source_topic
            .as_deref()
            .map(|t| crate::display::visible::name(t, crate::display::caps::NAME_BYTES)),
        value: seam::field(
            record.value.as_deref(),
            Encoding::parse(&value_as),
            EDITOR_VALUE_BYTES,
        ),
        key: seam::field(
            record.key.as_deref(),
            Encoding::parse(&key_as),
            EDITOR_KEY_BYTES,
        ),
        headers,
        headers_note,
    }))
}

/// The saved versions of dead letter `id`, newest first (at most 50), each with its diff
/// summary (bounded: `redrive_core::edit::diff`).
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_versions(id: i64) -> Result<Vec<VersionInfo>, ServerFnError> {
    let store = crate::actions_api::store_for_labels()?;
    // Outside the actor's DLQ-topic scope a record is absent.
    let actor = crate::auth_context::signed_in()?;
    match store.check_ids_in_scope(&actor, &[id]).await {
        Ok(()) => {}
        Err(redrive_core::store::StoreError::NotFound(_)) => return Ok(Vec::new()),
        Err(e) => {
            return Err(crate::actions_api::failed_for_labels(
                "read the versions",
                e,
            ))
        }
    }
    store
        .versions(id)
        .await
        .map_err(|e| crate::actions_api::failed_for_labels("read the versions", e))
}

/// Saves the editor's form as the next version of dead letter `id` (`op` `save`), or saves
/// and replays it (`op` `replay`, to `target_topic` or the source topic). `value_as` /
/// `key_as`: `text`, `json`, `base64`, `hex`, `null`, or `keep` (too large for the browser:
/// unchanged). Header rows come as three parallel lists; a row whose `header_as` is `remove`,
/// or whose name and value are both empty, is left out; `headers_keep` keeps the headers as
/// they are.
#[server(endpoint = "ui/edit")]
pub async fn save_edit(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    id: i64,
    #[server(default)] base_version: String,
    #[server(default)] value_as: String,
    #[server(default)] value: String,
    #[server(default)] value_newlines: String,
    #[server(default)] key_as: String,
    #[server(default)] key: String,
    #[server(default)] key_newlines: String,
    #[server(default)] header_name: Vec<String>,
    #[server(default)] header_as: Vec<String>,
    #[server(default)] header_value: Vec<String>,
    #[server(default)] headers_keep: String,
    #[server(default)] reason: String,
    #[server(default)] target_topic: String,
    #[server(default)] op: String,
) -> Result<i32, ServerFnError> {
    use redrive_core::edit::{EditRequest, RecordEdit, ReplayEdited};
    use redrive_core::model::Header;
    use redrive_core::permission::Permission;
    let _ = csrf;
    let store = crate::actions_api::store_for_labels()?;
    let actor = crate::actions_api::permitted_for_labels(Permission::Edit, "edit").await?;
    let bad = |m: String| {
        crate::refusal::refused(crate::refusal::INVALID, format!("Nothing was saved: {m}"))
    };
    let replay = match op.as_str() {
        "save" | "" => false,
        "replay" => true,
        _ => return Err(bad("use the Save or Save and replay button.".into())),
    };
    if replay {
        // Publishing the edited version is a replay.
        crate::actions_api::permitted_for_labels(Permission::Replay, "edit").await?;
    }
    let value = seam::part("value", &value_as, &value, &value_newlines).map_err(bad)?;
    let key = seam::part("key", &key_as, &key, &key_newlines).map_err(bad)?;
    let headers = if headers_keep == "true" {
        None
    } else {
        if header_name.len() != header_as.len() || header_name.len() != header_value.len() {
            return Err(bad(
                "the header rows are incomplete; reload the editor.".into()
            ));
        }
        let mut out = Vec::with_capacity(header_name.len());
        for (i, ((name, as_), text)) in header_name
            .iter()
            .zip(&header_as)
            .zip(&header_value)
            .enumerate()
        {
            if as_ == "remove" || (name.is_empty() && text.is_empty() && as_ != "null") {
                continue;
            }
            let e = Encoding::parse(as_)
                .ok_or_else(|| bad(format!("choose how header {} is written.", i + 1)))?;
            if matches!(e, Encoding::Json | Encoding::Text) && text.contains(['\n', '\r']) {
                return Err(bad(format!(
                    "header {} holds a line break; write it as hex or base64.",
                    i + 1
                )));
            }
            let value = e
                .decode(&format!("Header {} (`{name}`)", i + 1), text)
                .map_err(|err| bad(err.0))?;
            out.push(Header {
                name: name.clone(),
                value,
            });
        }
        Some(out)
    };
    let base_version = match base_version.trim() {
        "" => None,
        v => Some(
            v.parse::<i32>()
                .map_err(|_| bad("reload the editor.".into()))?,
        ),
    };
    let req = EditRequest {
        edit: RecordEdit {
            key,
            value,
            headers,
        },
        base_version,
        reason: Some(reason).filter(|r| !r.trim().is_empty()),
        replay: replay.then(|| ReplayEdited {
            target_topic: Some(target_topic.trim().to_string()).filter(|t| !t.is_empty()),
        }),
    };
    let policy = crate::approvals_api::policy();
    if let Err(m) = policy.check_reason(req.reason.as_deref()) {
        return Err(bad(format!("{m}.")));
    }
    let (out, pending) = store
        .edit_dead_letter_gated(&policy, &actor, id, &req)
        .await
        .map_err(|e| crate::actions_api::failed_for_labels("save the edit", e))?;
    if let Some(r) = pending {
        leptos_axum::redirect(&format!("/approvals?requested={}#request-{}", r.id, r.id));
        return Ok(out.version.version);
    }
    match &out.job {
        Some(job) => {
            leptos_axum::redirect(&format!("/jobs/{}", crate::query::encode(&job.id)));
        }
        None => leptos_axum::redirect(&format!("/dead-letters/{id}#versions")),
    }
    Ok(out.version.version)
}
