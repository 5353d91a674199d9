//! Server functions for triage labels and notes: read a dead letter's or a group's, add or
//! remove one label, set the note. The changing ones are POST server functions driven by
//! `ActionForm`s (plain forms without JavaScript), with a `csrf` argument the middleware
//! checks, an operator role (a refusal is audited `denied`), and a redirect back to `back`
//! (a path on this site) on success. Bulk label changes go through the list's action form
//! (`actions_api`, ops `label_add` / `label_remove`).

use leptos::prelude::*;
use redrive_core::labels::{Annotations, Triage};
use redrive_core::ErrorGroup;
use serde::{Deserialize, Serialize};

/// An error group and its triage, for `/groups/{fingerprint}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupTriage {
    /// The group over every live dead letter (count, first/last seen, example).
    pub group: ErrorGroup,
    pub annotations: Annotations,
}

#[cfg(feature = "ssr")]
mod seam {
    use crate::refusal::{refused, INVALID};
    use leptos::prelude::*;
    use redrive_core::labels::Target;

    /// The target a form names: `kind` `dead_letter` (an id) or `group` (a fingerprint).
    pub fn target(kind: &str, target: &str) -> Result<Target, ServerFnError> {
        match kind {
            "dead_letter" => target
                .trim()
                .parse::<i64>()
                .map(Target::DeadLetter)
                .map_err(|_| refused(INVALID, "That is not a dead-letter id.")),
            "group" => Ok(Target::Group(target.trim().to_string())),
            _ => Err(refused(
                INVALID,
                "Unknown target: label a dead letter or an error group.",
            )),
        }
    }
}

/// A dead letter's labels and note and its group's, or `None` if there is no such dead letter.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_triage(id: i64) -> Result<Option<Triage>, ServerFnError> {
    let store = crate::actions_api::store_for_labels()?;
    // Outside the actor's DLQ-topic scope a record is absent.
    let actor = crate::auth_context::signed_in()?;
    match store.check_ids_in_scope(&actor, &[id]).await {
        Ok(()) => {}
        Err(redrive_core::store::StoreError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(crate::actions_api::failed_for_labels("read the labels", e)),
    }
    store
        .triage(id)
        .await
        .map_err(|e| crate::actions_api::failed_for_labels("read the labels", e))
}

/// The error group `fingerprint` (over its live dead letters) and its triage, or `None` when
/// no live dead letter has that fingerprint.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_group_triage(fingerprint: String) -> Result<Option<GroupTriage>, ServerFnError> {
    use redrive_core::labels::Target;
    let store = crate::actions_api::store_for_labels()?;
    let mut filter = redrive_core::Filter {
        fingerprint: Some(fingerprint.clone()),
        ..redrive_core::Filter::default()
    };
    let fail = |e| crate::actions_api::failed_for_labels("read the error group", e);
    crate::auth_context::limit_to_scope(&store, &mut filter)
        .await
        .map_err(fail)?;
    let Some(group) = store.error_groups(&filter, 1).await.map_err(fail)?.pop() else {
        return Ok(None);
    };
    let annotations = store
        .annotations(&Target::Group(fingerprint))
        .await
        .map_err(fail)?;
    Ok(Some(GroupTriage {
        group: crate::display::record::group_row(&group),
        annotations,
    }))
}

/// Adds (`op` = `add`) or removes (`remove`) `label` on a dead letter (`kind` =
/// `dead_letter`, `target` its id) or an error group (`group`, its fingerprint); audited.
/// Back to `back` afterwards. Returns whether anything changed.
#[server(endpoint = "ui/label")]
pub async fn change_label(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    kind: String,
    target: String,
    op: String,
    #[server(default)] label: String,
    #[server(default)] back: String,
) -> Result<bool, ServerFnError> {
    use redrive_core::labels::LabelOp;
    let _ = csrf;
    let op = match op.as_str() {
        "add" => LabelOp::Add,
        "remove" => LabelOp::Remove,
        _ => {
            return Err(crate::refusal::refused(
                crate::refusal::INVALID,
                "Unknown action: add or remove a label.",
            ))
        }
    };
    let target = seam::target(&kind, &target)?;
    let store = crate::actions_api::store_for_labels()?;
    let actor = crate::actions_api::permitted_for_labels(
        redrive_core::permission::Permission::Annotate,
        op.audit_action(),
    )
    .await?;
    let changed = store
        .change_label(&actor, &target, &label, op)
        .await
        .map_err(|e| crate::actions_api::failed_for_labels("change the label", e))?;
    leptos_axum::redirect(&crate::actions_api::safe_back(&back));
    Ok(changed)
}

/// Sets the note of a dead letter or an error group (see [`change_label`] for `kind` and
/// `target`) to `note`, edited in place; an empty note clears it. Audited with the text
/// before and after. Back to `back` afterwards.
#[server(endpoint = "ui/note")]
pub async fn set_note(
    /// The session's CSRF token; checked by the middleware before this runs.
    csrf: String,
    kind: String,
    target: String,
    #[server(default)] note: String,
    #[server(default)] back: String,
) -> Result<(), ServerFnError> {
    let _ = csrf;
    let target = seam::target(&kind, &target)?;
    let store = crate::actions_api::store_for_labels()?;
    let actor = crate::actions_api::permitted_for_labels(
        redrive_core::permission::Permission::Annotate,
        "note_set",
    )
    .await?;
    store
        .set_note(&actor, &target, &note)
        .await
        .map_err(|e| crate::actions_api::failed_for_labels("save the note", e))?;
    leptos_axum::redirect(&crate::actions_api::safe_back(&back));
    Ok(())
}
