//! The server side the action server functions share (`ssr` only): the store, failures and
//! permission checks as the user reads them, the "type N to confirm" check, running an action
//! (with its approval gate) and the audit page's query. The other modules' server functions
//! use the first three through `actions_api`'s re-exports (`store_for_labels` and the like).

use leptos::prelude::*;
use redrive_core::actions::{Actor, AuditQuery, Selection};
use redrive_core::permission::Permission;
use redrive_core::store::{Store, StoreError};

use super::{ActionDone, Notice, Op};
use crate::auth_context;
use crate::http_status::HttpStatus;
use crate::refusal::{refused, INVALID};

mod fields;

pub use fields::{ids, lag_gate, op, rate, reason, replay_options, target_topic, text};

/// The store the site router provides.
pub fn store() -> Result<Store, ServerFnError> {
    use_context::<Store>()
        .ok_or_else(|| ServerFnError::new("redrive is misconfigured: no store in context"))
}

/// A store failure as the user should read it: what to change for a refused request,
/// else a hint (the detail goes to the log). Answered with the failure's status (422,
/// 409, 404, 503, else 500; `crate::refusal`) when a script called.
pub fn failed(what: &str, e: StoreError) -> ServerFnError {
    crate::refusal::set_status(crate::refusal::store_status(&e));
    match e {
        StoreError::Invalid(m) | StoreError::Conflict(m) => {
            ServerFnError::new(format!("Could not {what}: {m}."))
        }
        // "There is no dead letter 7.", "There are no dead letters 7, 9 (2 of the 40 asked)."
        StoreError::NotFound(m) => {
            ServerFnError::new(fields::sentence(&redrive_core::store::there_is_no(&m)))
        }
        other => {
            tracing::error!(error = %other, "{what} failed");
            let hint = match other {
                StoreError::Unavailable(_) => "the database is unavailable; try again in a moment",
                _ => "see the server log for the cause",
            };
            ServerFnError::new(format!("Could not {what}: {hint}."))
        }
    }
}

/// The actor, if its role grants `needed`; else 403 with the reason, and the refusal is
/// audited as `action`.
pub async fn permitted(needed: Permission, action: &str) -> Result<Actor, ServerFnError> {
    let status = HttpStatus::current();
    auth_context::authorize_permission(needed, action)
        .await
        .inspect_err(|_| status.set(403))
}
/// Refuses an "all" action (an empty filter) unless `typed` is the number of dead letters
/// the empty filter matches now; the message says the number to type.
pub async fn confirm_all(selection: &Selection, typed: &str) -> Result<(), ServerFnError> {
    use redrive_core::store::ConfirmAllError;
    if !selection.is_all() {
        return Ok(());
    }
    let given = match text(typed) {
        None => None,
        Some(t) => Some(t.replace([',', '_', ' '], "").parse::<i64>().map_err(|_| {
            refused(
                INVALID,
                format!(
                    "Nothing was changed: \u{201c}{t}\u{201d} is not a number. Type the count of \
                 dead letters shown to confirm acting on all of them."
                ),
            )
        })?),
    };
    match store()?.check_confirm_all(selection, given).await {
        Ok(_) => Ok(()),
        Err(ConfirmAllError::Missing { matched }) => Err(refused(
            INVALID,
            format!(
                "Nothing was changed: with no filter this acts on every dead letter that is not \
             deleted ({matched} now). Type {matched} to confirm, or narrow the filter."
            ),
        )),
        Err(ConfirmAllError::Wrong { matched, given }) => Err(refused(
            INVALID,
            format!(
                "Nothing was changed: you typed {given}, but there are {matched} dead letters \
             now. Type {matched} to act on all of them, or narrow the filter."
            ),
        )),
        Err(ConfirmAllError::Store(e)) => Err(failed("count the dead letters", e)),
    }
}
/// Runs `op` on `selection` and redirects: to the job after a replay, else to `back` with
/// the notice.
#[allow(clippy::too_many_arguments)]
pub async fn act(
    op: Op,
    selection: Selection,
    target_topic: &str,
    rate_per_sec: &str,
    reason: &str,
    label: &str,
    back: &str,
    options: redrive_core::actions::ReplayOptions,
) -> Result<ActionDone, ServerFnError> {
    let store = store()?;
    let actor = permitted(op.permission(), op.as_str()).await?;
    let reason = self::reason(reason)?;
    match op {
        Op::LabelAdd | Op::LabelRemove => {
            let label_op = if op == Op::LabelAdd {
                redrive_core::labels::LabelOp::Add
            } else {
                redrive_core::labels::LabelOp::Remove
            };
            if let (true, Some(m)) = (label.trim().is_empty(), op.missing_label()) {
                return Err(refused(INVALID, m));
            }
            let o = store
                .label_selection(&actor, &selection, label, label_op)
                .await
                .map_err(|e| failed("change the labels", e))?;
            let n = u64::try_from(o.changed).unwrap_or(0);
            leptos_axum::redirect(&super::with_notice(back, &Notice::code(op, n)));
            Ok(ActionDone {
                op,
                affected: o.changed,
                job_id: None,
                request_id: None,
            })
        }
        Op::Replay => {
            let req = redrive_core::actions::ReplayRequest {
                selection,
                target_topic: self::target_topic(target_topic)?,
                rate_per_sec: rate(rate_per_sec)?,
                reason,
                options,
            };
            if let Some(done) = pending(&store, &actor, op, &req).await? {
                return Ok(done);
            }
            let job = store
                .request_replay(&actor, &req)
                .await
                .map_err(|e| failed("start the replay", e))?;
            leptos_axum::redirect(&format!("/jobs/{}", crate::query::encode(&job.id)));
            Ok(ActionDone {
                op,
                affected: job.total,
                job_id: Some(job.id),
                request_id: None,
            })
        }
        Op::Delete | Op::Restore => {
            let req = redrive_core::actions::ReplayRequest {
                selection,
                target_topic: None,
                rate_per_sec: None,
                reason,
                options: Default::default(),
            };
            if let Some(done) = pending(&store, &actor, op, &req).await? {
                return Ok(done);
            }
            let (selection, reason) = (req.selection, req.reason);
            let n = if op == Op::Delete {
                store.delete(&actor, &selection, reason.as_deref()).await
            } else {
                store.restore(&actor, &selection, reason.as_deref()).await
            }
            .map_err(|e| failed(&format!("{} the dead letters", op.as_str()), e))?;
            leptos_axum::redirect(&super::with_notice(back, &Notice::code(op, n)));
            Ok(ActionDone {
                op,
                affected: i64::try_from(n).unwrap_or(i64::MAX),
                job_id: None,
                request_id: None,
            })
        }
    }
}

/// The approval gate (`approvals_api::gate`) of a replay, delete or restore: when it
/// needs approval, the request is stored and the browser goes to `/approvals`.
async fn pending(
    store: &Store,
    actor: &Actor,
    op: Op,
    req: &redrive_core::actions::ReplayRequest,
) -> Result<Option<ActionDone>, ServerFnError> {
    use redrive_core::approval::ActionKind;
    let kind = match op {
        Op::Replay => ActionKind::Replay,
        Op::Delete => ActionKind::Delete,
        Op::Restore => ActionKind::Restore,
        Op::LabelAdd | Op::LabelRemove => return Ok(None),
    };
    let Some(r) = crate::approvals_api::gate(store, actor, kind, req).await? else {
        return Ok(None);
    };
    leptos_axum::redirect(&format!("/approvals?requested={}#request-{}", r.id, r.id));
    Ok(Some(ActionDone {
        op,
        affected: r.count,
        job_id: None,
        request_id: Some(r.id),
    }))
}

/// Parses the audit page's query (the names of `GET /api/v1/audit`: `actor`, `action`,
/// `from`, `to`, `limit`, `cursor`); the message says what is wrong.
pub fn audit_query(pairs: &[(String, String)]) -> Result<AuditQuery, String> {
    AuditQuery::from_pairs(
        pairs
            .iter()
            .filter(|(k, _)| !super::PAGE_PARAMS.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v.as_str())),
    )
}
