//! The confirmation page's transform field and the replay's sample (`docs/replay.md`,
//! "Transform on replay" and "Dry run with samples"): the first records per target topic as
//! they would be sent — with a transform, before and after the script side by side, or why
//! it skipped or failed on each. Plain HTML: the script is a textarea of the page's GET form
//! ("Preview"), so it works without JavaScript.

use leptos::prelude::*;
use redrive_core::replay_sample::{ReplaySample, SampleAfter, ShownBytes, ShownRecord};

use crate::display::visible::{name, shown, Lines};

/// The transform script field, with the compile error if any.
#[component]
pub fn TransformField(script: Option<String>, error: Option<String>) -> impl IntoView {
    view! {
        <div class="transform-field">
            <label class="wide">
                <span>"Transform script (optional, Rhai; see docs/replay.md)"</span>
                <textarea
                    name="transform"
                    class="mono"
                    rows="6"
                    maxlength="8192"
                    placeholder="record.json.version = 2;\nrecord"
                >
                    {script.unwrap_or_default()}
                </textarea>
            </label>
            <span class="dim small">
                "The script gets "
                <code>"record"</code>
                " (key, value, json, headers) and ends with the record to publish or "
                <code>"skip()"</code>
                ". \u{201c}Preview\u{201d} runs it on the sample below; nothing is sent."
            </span>
            {error.map(|e| view! { <p class="notice danger transform-error" role="alert">{e}</p> })}
        </div>
    }
}

fn bytes_view(b: Option<&ShownBytes>, none: &'static str) -> AnyView {
    match b {
        None => view! { <span class="dim">{none}</span> }.into_any(),
        Some(b) if b.utf8 => {
            let text = shown(&b.text, b.text.len() * 2 + 64, Lines::Keep).text;
            let cut = b.cut.then(|| {
                view! { <span class="notice small" data-cut="">{format!("cut: {} bytes in all", b.bytes)}</span> }
            });
            view! { <pre class="mono sample-value">{text}</pre> {cut} }.into_any()
        }
        Some(b) => {
            let what = format!(
                "{} bytes, not UTF-8: {}{}",
                b.bytes,
                b.text,
                if b.cut { "…" } else { "" }
            );
            view! { <pre class="mono sample-value">{what}</pre> }.into_any()
        }
    }
}

fn record_view(r: &ShownRecord) -> AnyView {
    let headers = r
        .headers
        .iter()
        .map(|(n, v)| {
            let value = match v {
                None => "(null)".to_string(),
                Some(v) if v.utf8 => name(&v.text, 256),
                Some(v) => format!("0x{}", v.text),
            };
            view! { <li><span class="mono">{name(n, 256)}</span> ": " <span class="mono">{value}</span></li> }
        })
        .collect_view();
    let more = (r.headers_left_out > 0).then(|| {
        view! { <li class="dim" data-cut="">{format!("… and {} more", r.headers_left_out)}</li> }
    });
    view! {
        <div class="sample-record">
            <div class="dim small">"key"</div>
            {bytes_view(r.key.as_ref(), "no key")}
            <div class="dim small">"value"</div>
            {bytes_view(r.value.as_ref(), "tombstone (no value)")}
            {(!r.headers.is_empty()).then(|| view! { <ul class="sample-headers small">{headers}{more}</ul> })}
        </div>
    }
    .into_any()
}

/// The sample, one table per target topic.
#[component]
pub fn SampleView(sample: ReplaySample) -> impl IntoView {
    let with_transform = sample.transform_sha256.is_some();
    let sha = sample.transform_sha256.clone();
    let tables = sample
        .targets
        .into_iter()
        .map(|t| {
            let rows = t
                .records
                .into_iter()
                .map(|r| {
                    let href = format!("/dead-letters/{}", r.dead_letter_id);
                    let (class, after) = match &r.after {
                        SampleAfter::AsIs => ("sample-as-is", None),
                        SampleAfter::Publish { record } => ("sample-publish", Some(record_view(record))),
                        SampleAfter::Skip { reason } => (
                            "sample-skip",
                            Some(view! {
                                <p class="notice">
                                    "Skipped by the script"
                                    {reason.clone().map(|r| format!(": {r}"))}
                                    " \u{2014} not published."
                                </p>
                            }.into_any()),
                        ),
                        SampleAfter::Error { error } => (
                            "sample-error",
                            Some(view! {
                                <p class="notice danger">
                                    {error.clone()}
                                    " \u{2014} nothing is published for this record."
                                </p>
                            }.into_any()),
                        ),
                    };
                    view! {
                        <tr class=class>
                            <td class="mono"><a href=href>{format!("#{}", r.dead_letter_id)}</a></td>
                            <td>{record_view(&r.before)}</td>
                            {with_transform.then(|| view! { <td>{after}</td> })}
                        </tr>
                    }
                })
                .collect_view();
            view! {
                <h3 class="mono">{name(&t.topic, 256)}</h3>
                <table class="data replay-sample">
                    <thead>
                        <tr>
                            <th>"Dead letter"</th>
                            <th>{if with_transform { "Before" } else { "Record as it will be sent" }}</th>
                            {with_transform.then(|| view! { <th>"After the transform"</th> })}
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            }
        })
        .collect_view();
    view! {
        <section class="sample">
            <h2>"Sample of what will be sent"</h2>
            <p class="dim small">
                "The first records per target topic (at most 3 of the first 10 topics), each key and value cut at 4 KiB; redrive's own headers are added when published."
                {sha.map(|s| format!(" Transform script SHA-256: {s}."))}
            </p>
            {tables}
        </section>
    }
}
