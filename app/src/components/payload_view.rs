use leptos::prelude::*;

use super::CutNotice;
use crate::display::{hex_dump, Payload, PayloadBody};

/// A key or value: pretty JSON, text or a hex dump, with its size and a link to the raw bytes.
/// When the display cap cut it, a notice says how much is shown and links to the raw bytes.
#[component]
pub fn PayloadView(
    /// "Value" or "Key".
    title: &'static str,
    payload: Payload,
    /// Download link for the raw bytes; absent for null.
    raw_href: String,
) -> impl IntoView {
    let (kind, size) = match &payload.body {
        PayloadBody::Null => ("null", String::new()),
        PayloadBody::Empty => ("empty", "0 bytes".to_string()),
        PayloadBody::Json(_) => ("JSON", bytes_label(payload.len)),
        PayloadBody::Text(_) => ("text", bytes_label(payload.len)),
        PayloadBody::Hex(_) => ("binary", bytes_label(payload.len)),
    };
    let is_null = matches!(payload.body, PayloadBody::Null);
    let raw_href2 = raw_href.clone();
    let null_label = if title == "Value" {
        "null (tombstone)"
    } else {
        "null key"
    };
    let cut = payload.truncated.then(|| {
        let shown = match &payload.body {
            PayloadBody::Json(t) | PayloadBody::Text(t) => {
                format!("{} of text", bytes_label(t.len()))
            }
            PayloadBody::Hex(b) => bytes_label(b.len()),
            _ => String::new(),
        };
        format!(
            "Only the beginning is shown ({shown}) of {}.",
            bytes_label(payload.len)
        )
    });
    let body = match payload.body {
        PayloadBody::Null => view! { <p><span class="null">{null_label}</span></p> }.into_any(),
        PayloadBody::Empty => {
            view! { <p><span class="empty">"(empty: 0 bytes)"</span></p> }.into_any()
        }
        PayloadBody::Json(text) | PayloadBody::Text(text) => {
            view! { <pre class="payload">{text}</pre> }.into_any()
        }
        PayloadBody::Hex(bytes) => {
            let lines = hex_dump(&bytes)
                .into_iter()
                .map(|l| {
                    view! {
                        <tr>
                            <td class="offset">{l.offset}</td>
                            <td class="hex">{l.hex}</td>
                            <td class="ascii">{l.ascii}</td>
                        </tr>
                    }
                })
                .collect_view();
            view! {
                <table class="hexdump">
                    <thead>
                        <tr>
                            <th>"offset"</th>
                            <th>"hex"</th>
                            <th>"ascii"</th>
                        </tr>
                    </thead>
                    <tbody>{lines}</tbody>
                </table>
            }
            .into_any()
        }
    };
    view! {
        <section class="payload-view">
            <h2>
                {title} " " <span class="badge neutral">{kind}</span> " "
                <span class="dim small">{size}</span>
                {(!is_null).then(|| view! {
                    " " <a class="small" href=raw_href download="">"download raw"</a>
                })}
            </h2>
            {cut.map(|text| view! { <CutNotice text=text raw_href=raw_href2 what="the raw bytes" /> })}
            {body}
        </section>
    }
}

fn bytes_label(n: usize) -> String {
    match n {
        1 => "1 byte".to_string(),
        n if n < 10 * 1024 => format!("{n} bytes"),
        n if n < 10 * 1024 * 1024 => format!("{:.1} KiB ({n} bytes)", n as f64 / 1024.0),
        n => format!("{:.1} MiB ({n} bytes)", n as f64 / (1024.0 * 1024.0)),
    }
}

/// A value in the Schema Registry wire format, decoded with its schema: the JSON, marked
/// "decoded with schema id N (AVRO)"; or, when the schema could not be had or the value does
/// not decode with it, the schema id and why (the raw view below then shows the hex). The
/// stored bytes are unchanged either way (`docs/payloads.md`).
#[component]
pub fn SchemaDecoded(shown: crate::display::schema::SchemaShown) -> impl IntoView {
    let label = shown.label();
    let message = shown
        .message
        .map(|m| view! { " " <span class="dim small">{format!("message {m}")}</span> });
    match (shown.decoded, shown.problem) {
        (Some(text), _) => {
            let cut = text.cut.then(|| {
                view! {
                    <p class="notice small">
                        "Only the beginning of the decoded value is shown ("
                        {bytes_label(text.text.len())} " of text); the raw bytes are below."
                    </p>
                }
            });
            view! {
                <section class="payload-view schema-decoded">
                    <h2>
                        "Value " <span class="badge neutral">"decoded"</span> " "
                        <span class="small">{format!("decoded with {label}")}</span>
                        {message}
                    </h2>
                    {cut}
                    <pre class="payload">{text.text}</pre>
                </section>
            }
            .into_any()
        }
        (None, problem) => view! {
            <p class="notice schema-undecoded">
                {format!("{label}: {}", problem.unwrap_or_default())}
                ". The value is shown as stored."
            </p>
        }
        .into_any(),
    }
}
