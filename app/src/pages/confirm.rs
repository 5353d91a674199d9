use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::confirm_sample::{SampleView, TransformField};
use super::{BadQuery, LoadError};
use crate::actions_api::{preview_action, without_page_params, ActOnFilter, Op, Preview};
use crate::api::Listing;
use crate::auth_context::{may, use_session, CsrfField};
use crate::components::{ActionError, CanaryFields};
use crate::http_status::HttpStatus;
use crate::query;
use crate::wire;

/// "1 dead letter", "3 dead letters".
fn dead_letters(n: i64) -> String {
    if n == 1 {
        "1 dead letter".to_string()
    } else {
        format!("{n} dead letters")
    }
}

/// `/confirm?op=replay|delete|restore|label_add|label_remove&<filter>[&target_topic=T]
/// [&op_label=L]`: what "… all matching"
/// would do — the exact count, and for a replay the breakdown per target topic and what it
/// would skip (a dry run) — and the "Confirm" form that acts. Nothing changes before Confirm.
#[component]
pub fn ConfirmPage() -> impl IntoView {
    let search = use_location().search;
    let preview = wire::resource(move || without_page_params(&search.get()), preview_action);
    let session = use_session();
    let act = ServerAction::<ActOnFilter>::new();
    let status = HttpStatus::current();
    view! {
        <Title text="Confirm · redrive" />
        <Suspense fallback=|| view! { <p class="dim">"Counting…"</p> }>
            {move || {
                let status = status.clone();
                Suspend::new(async move {
                    let s = session.0.await;
                    match preview.await {
                        Ok(Listing::Found(p)) => {
                            let can_act = may(&s, p.op.permission());
                            // A label change without a usable label: the page says what to
                            // type, as a refused form does (`crate::refusal::INVALID`).
                            if p.label_error.is_some() {
                                status.set(422);
                            }
                            view! {
                            <Confirm preview=p can_act=can_act act=act />
                            }
                            .into_any()
                        }
                        Ok(Listing::BadQuery(message)) => {
                            status.set(400);
                            view! {
                                <h1>"Confirm"</h1>
                                <BadQuery message=message reset="/" />
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
        </Suspense>
    }
}

/// A replay's selection by status: "By status now: 4 new · 2 replayed." and, given
/// `only_new` (the same confirmation with `status=new`; the filter names no status), how many
/// of them were replayed before and would be taken again, with that link.
#[component]
fn ByStatus(
    per_status: Vec<(redrive_core::Status, i64)>,
    only_new: Option<String>,
) -> impl IntoView {
    (!per_status.is_empty()).then(|| {
        let parts = per_status
            .iter()
            .map(|(s, n)| format!("{n} {}", s.label()))
            .collect::<Vec<_>>()
            .join(" · ");
        let again: i64 = per_status
            .iter()
            .filter(|(s, _)| s.was_replayed())
            .map(|(_, n)| n)
            .sum();
        let hint = only_new.filter(|_| again > 0).map(|href| {
            let sentence = if again == 1 {
                "1 of these was replayed before; the replay takes it again. ".to_string()
            } else {
                format!("{again} of these were replayed before; the replay takes them again. ")
            };
            view! {
                " "
                <span class="dim">{sentence}</span>
                <a href=href class="only-new">"Replay only the new ones…"</a>
            }
        });
        view! {
            <p class="per-status">
                "By status now: " <span class="mono">{parts}</span> "." {hint}
            </p>
        }
    })
}

#[component]
fn Confirm(preview: Preview, can_act: bool, act: ServerAction<ActOnFilter>) -> impl IntoView {
    let Preview {
        op,
        filter,
        target_topic,
        dry_run,
        count,
        label,
        confirm_all,
        transform,
        transform_error,
        sample,
        label_error,
    } = preview;
    let label = label.unwrap_or_default();
    let pairs: Vec<(&str, &str)> = filter
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let back = query::href("/", pairs.iter().copied());
    // The filter as the form sends it back: the list's names, URL-encoded.
    let filter_field = query::href("", pairs.iter().copied())
        .trim_start_matches('?')
        .to_string();
    let heading = match op {
        Op::Replay => "Replay all matching this filter?".to_string(),
        Op::Delete => "Delete all matching this filter?".to_string(),
        Op::Restore => "Restore all matching this filter?".to_string(),
        Op::LabelAdd if label_error.is_some() => "Add a label to all matching this filter".into(),
        Op::LabelRemove if label_error.is_some() => {
            "Remove a label from all matching this filter".into()
        }
        Op::LabelAdd => {
            format!("Add the label \u{201c}{label}\u{201d} to all matching this filter?")
        }
        Op::LabelRemove => {
            format!("Remove the label \u{201c}{label}\u{201d} from all matching this filter?")
        }
    };
    let filter_view = if filter.is_empty() {
        view! {
            <p class="filter-summary">
                "No filter: " <strong>"every dead letter that is not deleted"</strong> "."
            </p>
        }
        .into_any()
    } else {
        let items = filter
            .iter()
            .map(|(k, v)| {
                let shown = if k == "from" || k == "to" {
                    v.parse::<i64>()
                        .map(|ms| format!("{} UTC", crate::display::format_time(ms)))
                        .unwrap_or_else(|_| v.clone())
                } else {
                    v.clone()
                };
                view! {
                    <li>
                        <span class="dim">{k.clone()}</span>
                        " = "
                        <span class="mono">{shown}</span>
                    </li>
                }
            })
            .collect_view();
        view! {
            <div class="filter-summary">
                "Filter:" <ul>{items}</ul>
            </div>
        }
        .into_any()
    };
    // "Replay only the new ones": the same page with `status=new` added (the target topic
    // and the transform kept).
    let only_new = {
        let mut p: Vec<(&str, &str)> = vec![("op", "replay")];
        p.extend(pairs.iter().copied());
        p.push(("status", "new"));
        if let Some(t) = &target_topic {
            p.push(("target_topic", t.as_str()));
        }
        if let Some(t) = &transform {
            p.push(("transform", t.as_str()));
        }
        query::href("/confirm", p)
    };
    let filter_has_status = pairs.iter().any(|(k, _)| *k == "status");
    let summary = match (op, dry_run) {
        (Op::Replay, Some(d)) => {
            // Without a status in the filter, the link that leaves out what was replayed.
            let by_status = view! {
                <ByStatus
                    per_status=d.per_status.clone()
                    only_new=(!filter_has_status).then(|| only_new.clone())
                />
            };
            let topics = d
                .per_target
                .iter()
                .map(|(topic, n)| {
                    view! {
                        <tr>
                            <td class="mono">{topic.clone()}</td>
                            <td class="num mono">{*n}</td>
                        </tr>
                    }
                })
                .collect_view();
            let no_target = (d.without_target > 0).then(|| {
                let n = d.without_target;
                let (has, they, them) = if n == 1 {
                    ("has", "it cannot", "it")
                } else {
                    ("have", "they cannot", "them")
                };
                let sentence = format!(
                    " {has} no source topic, so {they} be replayed to \u{201c}source\u{201d}: \
                     the replay skips {them}. Give a target topic below to replay {them} there."
                );
                view! {
                    <p class="notice no-target">
                        <strong>{dead_letters(n)}</strong>
                        {sentence}
                    </p>
                }
            });
            let others = d.skipped.max(0);
            let skipped = (others > 0).then(|| {
                let (is, them) = if others == 1 { ("is", "it") } else { ("are", "them") };
                let sentence = format!(
                    " matching the filter {is} deleted or already waiting in a replay job; the \
                     replay skips {them}."
                );
                view! {
                    <p class="notice">
                        <strong>{dead_letters(others)}</strong>
                        {sentence}
                    </p>
                }
            });
            // The loop guard (`docs/automation.md`): said before the button, checked again
            // by the store when the replay is asked for.
            let guarded = (d.loop_guarded > 0).then(|| {
                let n = d.loop_guarded;
                let (is, them) = if n == 1 { ("is", "it") } else { ("are", "them") };
                let sentence = format!(
                    " matching the filter {is} loop-guarded (came back after replays too \
                     often): replaying {them} needs the approve permission and a reason."
                );
                view! {
                    <p class="notice loop-guarded">
                        <strong>{dead_letters(n)}</strong>
                        {sentence}
                    </p>
                }
            });
            view! {
                <p class="confirm-count">
                    <strong class="count">{d.queued()}</strong>
                    " of the "
                    <span class="matched">{dead_letters(d.total)}</span>
                    " matching will be replayed."
                </p>
                {(!d.per_target.is_empty()).then(|| view! {
                    <table class="data per-target">
                        <thead>
                            <tr>
                                <th>"Target topic"</th>
                                <th class="num">"Dead letters"</th>
                            </tr>
                        </thead>
                        <tbody>{topics}</tbody>
                    </table>
                })}
                {by_status}
                {no_target}
                {skipped}
                {guarded}
            }
            .into_any()
        }
        (Op::LabelAdd | Op::LabelRemove, _) => view! {
            <p class="confirm-count">
                <strong class="count">{count}</strong>
                {if count == 1 { " dead letter matches" } else { " dead letters match" }}
                {if op == Op::LabelAdd {
                    "; those without the label get it (a dead letter at the most labels allowed is skipped)."
                } else {
                    "; the label is removed from those that have it (their error group's labels stay)."
                }}
            </p>
        }
        .into_any(),
        (Op::Delete, _) => view! {
            <p class="confirm-count">
                <strong class="count">{count}</strong>
                {if count == 1 { " dead letter" } else { " dead letters" }}
                " will be deleted. They leave the list, stay under the status filter \u{201c}deleted\u{201d}, and can be restored."
            </p>
        }
        .into_any(),
        _ => view! {
            <p class="confirm-count">
                <strong class="count">{count}</strong>
                {if count == 1 { " deleted dead letter" } else { " deleted dead letters" }}
                " will be restored to the status they had before."
            </p>
        }
        .into_any(),
    };
    // Changing the target topic recounts (a GET of this page), before anything happens.
    let retarget = (op == Op::Replay).then(|| {
        let hidden = pairs
            .iter()
            .map(|(k, v)| view! { <input type="hidden" name=k.to_string() value=v.to_string() /> })
            .collect_view();
        view! {
            <form class="inline-form" method="get" action="/confirm">
                <input type="hidden" name="op" value="replay" />
                {hidden}
                <label>
                    <span>"Replay to topic"</span>
                    <input
                        type="text"
                        name="target_topic"
                        class="mono"
                        value=target_topic.clone().unwrap_or_default()
                        placeholder="each record's source topic"
                    />
                </label>
                <TransformField script=transform.clone() error=transform_error.clone() />
                <button type="submit" class="secondary-button">"Count again and preview"</button>
            </form>
        }
    });
    let sample_view = sample.map(|s| view! { <SampleView sample=s /> });
    let script_broken = transform_error.is_some();
    let error = move || act.value().get().and_then(Result::err);
    let confirm_label = format!(
        "Confirm: {} {}",
        op.verb().to_lowercase(),
        dead_letters(count)
    );
    let danger = op == Op::Delete;
    let form = if let Some(message) = label_error {
        // The label's refusal, and the field to type it again (a GET of this page: it
        // counts again before anything happens).
        let hidden = pairs
            .iter()
            .map(|(k, v)| view! { <input type="hidden" name=k.to_string() value=v.to_string() /> })
            .collect_view();
        view! {
            <div class="error-box label-refused" role="alert">
                <p>{message}</p>
            </div>
            <form class="inline-form" method="get" action="/confirm">
                <input type="hidden" name="op" value=op.as_str() />
                {hidden}
                <label>
                    <span>"Label"</span>
                    <input
                        type="text"
                        name="op_label"
                        required
                        maxlength=redrive_core::labels::MAX_LABEL_CHARS
                        placeholder="e.g. known: INC-1234"
                    />
                </label>
                <button type="submit" class="secondary-button">"Count again and preview"</button>
            </form>
        }
        .into_any()
    } else if !can_act {
        view! {
            <p class="notice">{format!(
                "Your role may not {} dead letters (it needs the `{}` permission); ask an admin.",
                op.verb().to_lowercase(),
                op.permission()
            )}</p>
        }
        .into_any()
    } else if op == Op::Replay && script_broken {
        view! {
            <p class="notice">"Fix the transform script above (or clear it) and preview again before confirming."</p>
        }
        .into_any()
    } else if count == 0 {
        view! {
            <p class="notice">"Nothing to do: no dead letter matching this filter can be changed this way."</p>
        }
        .into_any()
    } else {
        let cancel_href = back.clone();
        view! {
            <ActionForm action=act attr:class="confirm-form">
                <CsrfField />
                <input type="hidden" name="op" value=op.as_str() />
                <input type="hidden" name="filter" value=filter_field />
                {op.is_label().then(|| view! { <input type="hidden" name="label" value=label.clone() /> })}
                {(op == Op::Replay).then(|| view! {
                    <p class="target">
                        "Replaying to: "
                        <strong class="mono">
                            {target_topic.clone().unwrap_or_else(|| "each record's source topic".to_string())}
                        </strong>
                        <span class="dim">" (change it above with \u{201c}Count again and preview\u{201d})"</span>
                    </p>
                    <input type="hidden" name="target_topic" value=target_topic.clone().unwrap_or_default() />
                    <input type="hidden" name="transform" value=transform.clone().unwrap_or_default() />
                    {transform.as_ref().map(|_| view! {
                        <p class="target">"With the transform script previewed below (it runs on every record)."</p>
                    })}
                    <label>
                        <span>"Rate limit (msgs/s)"</span>
                        <input type="number" name="rate_per_sec" min="1" step="1" placeholder="no limit" />
                    </label>
                    <OrderFields />
                    <CanaryFields />
                    <fieldset class="lag-gate">
                        <legend>"Lag gate (optional)"</legend>
                        <label>
                            <span>"Consumer group of the target topic"</span>
                            <input type="text" name="lag_group" class="mono" maxlength="255" placeholder="e.g. orders-service" autocomplete="off" />
                        </label>
                        <label>
                            <span>"Pause while it is behind by (records)"</span>
                            <input type="number" name="lag_max" min="1" step="1" placeholder="no lag gate" />
                        </label>
                        <span class="dim small">
                            "The relay reads the group's lag and publishes nothing while it is at or over this, resuming below it."
                        </span>
                    </fieldset>
                })}
                {confirm_all.map(|n| view! { <ConfirmAllField op=op matched=n /> })}
                {(!op.is_label()).then(|| view! {
                    <label class="wide">
                        <span>"Reason (optional, audited)"</span>
                        <input type="text" name="reason" maxlength="2000" placeholder="e.g. INC-1234 fixed" />
                    </label>
                })}
                <div class="filter-actions">
                    <button type="submit" class:danger=danger>{confirm_label}</button>
                    <a class="button secondary" href=cancel_href>"Cancel"</a>
                </div>
                <p class="dim small counted-now">
                    "The counts are from when this page was shown; Confirm acts on what matches the filter when you press it, including dead letters that arrived since."
                </p>
            </ActionForm>
        }
        .into_any()
    };
    view! {
        <p class="crumbs">
            <a href=back>"← Back to the list"</a>
        </p>
        <h1>{heading}</h1>
        {move || error().map(|e| view! { <ActionError error=e /> })}
        {filter_view}
        <section class="confirm">{summary} {retarget}</section>
        {sample_view}
        {form}
    }
}

/// A replay's order and placement options (`docs/replay.md`, "Per-key order" and "Original
/// partition"): two checkboxes of the confirmation form, off by default, each with what it
/// changes. The form sends `unordered=true` / `original_partition=true` when ticked, which
/// become `ReplayOptions::unordered` / `original_partition` as in `POST /api/v1/replays`.
#[component]
fn OrderFields() -> impl IntoView {
    view! {
        <div class="replay-option">
            <label class="check">
                <input type="checkbox" name="unordered" value="true" />
                "Publish without per-key order"
            </label>
            <span class="dim small">
                "By default records with the same key are sent one at a time, in source-offset order; ticked, every record is independent (faster, but a key\u{2019}s records may overtake each other)."
            </span>
        </div>
        <div class="replay-option">
            <label class="check">
                <input type="checkbox" name="original_partition" value="true" />
                "Publish to each record\u{2019}s original partition"
            </label>
            <span class="dim small">
                "Instead of the partition the key\u{2019}s hash picks; a record whose partition the target topic lacks (or is unknown) fails with that reason and is never remapped."
            </span>
        </div>
    }
}

/// The "type N to confirm" field of an action over an empty filter (every dead letter that is
/// not deleted): a warning with the count and a text field the server checks
/// (`Store::check_confirm_all`); a wrong number comes back as the page's error, nothing done.
#[component]
fn ConfirmAllField(op: Op, matched: i64) -> impl IntoView {
    let what = match op {
        Op::Replay => "replays",
        Op::Delete => "deletes",
        Op::Restore => "restores",
        Op::LabelAdd | Op::LabelRemove => "changes the label of",
    };
    let warning = format!(
        " There is no filter: this {what} every dead letter that is not deleted \u{2014} {} now.",
        dead_letters(matched)
    );
    let prompt = format!("Type {matched} to confirm");
    view! {
        <div class="notice danger confirm-all" role="alert">
            <p>
                <strong>"This acts on everything."</strong>
                {warning}
                " Narrow the filter unless you mean all of them."
            </p>
            <label>
                <span>{prompt}</span>
                <input
                    type="text"
                    name="confirm_all"
                    class="mono"
                    inputmode="numeric"
                    autocomplete="off"
                    required
                />
            </label>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redrive_core::Status;

    /// The statuses in words; the dead letters a replay takes again (replayed, failed to
    /// replay, came back) are counted, with the link that leaves them out — unless the
    /// filter names a status already.
    #[test]
    fn the_breakdown_by_status_offers_to_leave_out_what_was_replayed() {
        let per_status = vec![
            (Status::New, 60),
            (Status::Replayed, 10),
            (Status::ReFailed, 2),
        ];
        let link = "/confirm?op=replay&dlq_topic=t&status=new".to_string();
        let html =
            view! { <ByStatus per_status=per_status.clone() only_new=Some(link) /> }.to_html();
        assert!(
            html.contains("60 new · 10 replayed · 2 re-failed"),
            "{html}"
        );
        assert!(
            html.contains("12 of these were replayed before; the replay takes them again."),
            "{html}"
        );
        assert!(
            html.contains("href=\"/confirm?op=replay&amp;dlq_topic=t&amp;status=new\""),
            "{html}"
        );
        let html = view! { <ByStatus per_status=per_status only_new=None /> }.to_html();
        assert!(!html.contains("only-new"), "{html}");
        let html = view! {
            <ByStatus per_status=vec![(Status::New, 3)] only_new=Some("/x".to_string()) />
        }
        .to_html();
        assert!(
            html.contains("3 new") && !html.contains("only-new"),
            "{html}"
        );
        let html = view! { <ByStatus per_status=vec![] only_new=None /> }.to_html();
        assert!(!html.contains("per-status"), "{html}");
    }
}
