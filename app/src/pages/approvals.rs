use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;
use redrive_core::actions::Selection;
use redrive_core::approval::{ApprovalRequest, RequestStatus};
use redrive_core::permission::Permission;

use super::LoadError;
use crate::approvals_api::{
    list_approvals, ApproveRequest, CancelRequest, DeclineRequest, RequestView,
};
use crate::auth_context::{use_session, CsrfField};
use crate::components::ActionError;
use crate::display::format_time;
use crate::http_status::HttpStatus;
use crate::query;
use crate::wire;

/// Most ids shown of a request by ids (the API has them all).
const IDS_SHOWN: usize = 20;

/// `/approvals`: four-eyes approval. The pending requests, each with what it would do (the
/// count when asked and now, per DLQ topic), and Approve / Decline forms for a user with the
/// `approve` permission who did not ask for it, Cancel for its requester; then the newest
/// decided ones. Plain POST forms with the CSRF token: works without JavaScript.
#[component]
pub fn ApprovalsPage() -> impl IntoView {
    let listing = wire::resource(|| (), |_| list_approvals());
    let session = use_session();
    let approve = ServerAction::<ApproveRequest>::new();
    let decline = ServerAction::<DeclineRequest>::new();
    let cancel = ServerAction::<CancelRequest>::new();
    let search = use_location().search;
    let status = HttpStatus::current();
    Effect::new(move |_| {
        let done = matches!(approve.value().get(), Some(Ok(_)))
            || matches!(decline.value().get(), Some(Ok(_)))
            || matches!(cancel.value().get(), Some(Ok(_)));
        if done {
            listing.refetch();
        }
    });
    let notice = move || {
        let pairs = query::parse(&search.get());
        let id = |name| query::value(&pairs, name).parse::<i64>().ok();
        if let Some(id) = id("requested") {
            Some(format!(
                "Nothing was done yet: this action needs approval. Request #{id} waits for \
                 another user with the approve permission (below)."
            ))
        } else {
            id("decided").map(|id| format!("Request #{id} was decided (below)."))
        }
    };
    let error = move || {
        approve
            .value()
            .get()
            .and_then(Result::err)
            .or_else(|| decline.value().get().and_then(Result::err))
            .or_else(|| cancel.value().get().and_then(Result::err))
    };
    view! {
        <Title text="Approvals · redrive" />
        <h1>"Approvals"</h1>
        {move || notice().map(|n| view! {
            <p class="done-box" role="status">
                {n} " " <a href="#pending">"Pending requests"</a>
            </p>
        })}
        {move || error().map(|e| view! { <ActionError error=e /> })}
        <p class="dim">
            "Four-eyes approval: a replay, delete or restore over many dead letters, or on \
             chosen DLQ topics (`[approval]` in redrive.toml), waits here until another user \
             with the approve permission approves it (then it runs as asked) or declines it. \
             Nothing is written before."
        </p>
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let status = status.clone();
                Suspend::new(async move {
                    let me = session.0.await.ok().flatten().map(|s| s.actor);
                    match listing.await {
                        Ok(l) => {
                            let user = me.as_ref().map(|a| a.user.clone()).unwrap_or_default();
                            let can_approve = me.as_ref().is_some_and(|a| a.can(Permission::Approve));
                            let as_of = l.as_of_ms;
                            let pending = if l.pending.is_empty() {
                                view! { <p class="empty-state">"No request waits for approval."</p> }
                                    .into_any()
                            } else {
                                l.pending
                                    .into_iter()
                                    .map(|v| view! {
                                        <RequestCard
                                            item=v
                                            user=user.clone()
                                            can_approve=can_approve
                                            as_of_ms=as_of
                                            approve=approve
                                            decline=decline
                                            cancel=cancel
                                        />
                                    })
                                    .collect_view()
                                    .into_any()
                            };
                            let decided = l
                                .decided
                                .into_iter()
                                .map(|v| view! {
                                    <RequestCard
                                        item=v
                                        user=user.clone()
                                        can_approve=false
                                        as_of_ms=as_of
                                        approve=approve
                                        decline=decline
                                        cancel=cancel
                                    />
                                })
                                .collect_view();
                            view! {
                                <h2 id="pending">"Pending"</h2>
                                {pending}
                                <h2>"Decided"</h2>
                                {decided}
                                <p>
                                    <a href="/audit?action=approval_request">"Audit trail"</a>
                                </p>
                            }
                            .into_any()
                        }
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

/// What a request selects, in words.
fn selection_text(r: &ApprovalRequest) -> String {
    match &r.request.selection {
        Selection::Ids(ids) => {
            let shown: Vec<String> = ids.iter().take(IDS_SHOWN).map(i64::to_string).collect();
            let more = ids.len().saturating_sub(IDS_SHOWN);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!("dead letters {}{more}", shown.join(", "))
        }
        Selection::Filter(f) => {
            let pairs: Vec<String> = f
                .to_pairs()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let bound = r
                .max_id
                .map(|m| format!(" (ids up to {m}: none that arrived after the request)"))
                .unwrap_or_default();
            if pairs.is_empty() {
                format!("all dead letters that are not deleted{bound}")
            } else {
                format!("the filter {}{bound}", pairs.join(" "))
            }
        }
    }
}

#[component]
fn RequestCard(
    item: RequestView,
    user: String,
    can_approve: bool,
    as_of_ms: i64,
    approve: ServerAction<ApproveRequest>,
    decline: ServerAction<DeclineRequest>,
    cancel: ServerAction<CancelRequest>,
) -> impl IntoView {
    let count_now = item.count_now;
    let r = item.request;
    let id = r.id;
    let pending = r.status == RequestStatus::Pending;
    let mine = r.requested_by.user == user;
    let per_topic = r
        .per_topic
        .iter()
        .map(|(t, n)| format!("{t}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let target = match (&r.kind, &r.request.target_topic) {
        (redrive_core::approval::ActionKind::Replay, Some(t)) => format!(" to topic {t}"),
        (redrive_core::approval::ActionKind::Replay, None) => {
            " to each record's source topic".into()
        }
        _ => String::new(),
    };
    let expires = if pending {
        let left_s = (r.expires_at_ms - as_of_ms).max(0) / 1000;
        format!(
            "expires {} UTC (in {} min)",
            format_time(r.expires_at_ms),
            left_s / 60
        )
    } else {
        String::new()
    };
    let decided = r.decided_by.as_ref().map(|by| {
        format!(
            "{} by {by} at {} UTC{}",
            r.status.as_str(),
            r.decided_at_ms.map(format_time).unwrap_or_default(),
            r.decision_reason
                .as_ref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        )
    });
    let decided = decided.or_else(|| {
        (r.status == RequestStatus::Expired).then(|| {
            format!(
                "expired at {} UTC without a decision",
                format_time(r.expires_at_ms)
            )
        })
    });
    let job = r.job_id.clone();
    view! {
        <section class="approval-request" id=format!("request-{id}")>
            <h3>
                {format!("#{id} · {} · {}", r.kind.as_str(), r.status.as_str())}
            </h3>
            <p>
                {format!(
                    "{} asked at {} UTC to {} {}{target}.",
                    r.requested_by.user,
                    format_time(r.created_at_ms),
                    r.kind.as_str(),
                    selection_text(&r)
                )}
            </p>
            <p>
                <strong>"Reason: "</strong>
                {r.request.reason.clone().unwrap_or_else(|| "(none given)".into())}
            </p>
            <p>
                <strong>"Why approval: "</strong>
                {r.why.clone()}
            </p>
            <p>
                {format!("{} dead letter(s) when asked", r.count)}
                {count_now.map(|n| format!("; {n} now"))}
                {(!per_topic.is_empty()).then(|| format!(" (per DLQ topic when asked: {per_topic})"))}
            </p>
            {pending.then(|| view! { <p class="dim">{expires.clone()}</p> })}
            {decided.map(|d| view! { <p>{d}</p> })}
            {job.map(|j| {
                let href = format!("/jobs/{}", query::encode(&j));
                view! { <p><a href=href>"The replay job"</a></p> }
            })}
            {(pending && can_approve && !mine).then(|| view! {
                <ActionForm action=approve attr:class="approve-request">
                    <CsrfField />
                    <input type="hidden" name="id" value=id.to_string() />
                    <label>
                        <span>"Note (optional, audited)"</span>
                        <input type="text" name="reason" maxlength="2000" />
                    </label>
                    <button type="submit">"Approve and run"</button>
                </ActionForm>
                <ActionForm action=decline attr:class="decline-request">
                    <CsrfField />
                    <input type="hidden" name="id" value=id.to_string() />
                    <label>
                        <span>"Why decline (required, audited)"</span>
                        <input type="text" name="reason" maxlength="2000" required />
                    </label>
                    <button type="submit" class="danger">"Decline"</button>
                </ActionForm>
            })}
            {(pending && mine).then(|| view! {
                <p class="dim">"You asked for it: another user must approve or decline it."</p>
                <ActionForm action=cancel attr:class="cancel-request">
                    <CsrfField />
                    <input type="hidden" name="id" value=id.to_string() />
                    <input type="hidden" name="reason" value="" />
                    <button type="submit" class="secondary-button">"Cancel my request"</button>
                </ActionForm>
            })}
        </section>
    }
}
