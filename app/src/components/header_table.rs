use leptos::prelude::*;
use redrive_core::Header;

use crate::display::{describe_header, hex_bytes, MAX_HEADER_HEX_BYTES};

/// A record's headers in record order (duplicates kept): name, decoded value, how it was
/// decoded, and the raw bytes. A null header shows a "null" marker, distinct from empty.
#[component]
pub fn HeaderTable(headers: Vec<Header>) -> impl IntoView {
    if headers.is_empty() {
        return view! { <p class="empty-state">"This record has no headers."</p> }.into_any();
    }
    let rows = headers
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            let described = describe_header(&h.name, h.value.as_deref());
            let decoded = match (&h.value, described.decoded) {
                (None, _) => view! { <span class="null">"null"</span> }.into_any(),
                (Some(v), _) if v.is_empty() => view! { <span class="empty">"(empty)"</span> }.into_any(),
                (Some(_), Some(text)) => view! { <span class="decoded">{text}</span> }.into_any(),
                (Some(_), None) => view! { <span class="dim">"(binary)"</span> }.into_any(),
            };
            let raw = match &h.value {
                None => view! { <span class="null">"null"</span> }.into_any(),
                Some(v) => {
                    let shown = &v[..v.len().min(MAX_HEADER_HEX_BYTES)];
                    let more = (shown.len() < v.len())
                        .then(|| format!(" … ({} bytes)", v.len()));
                    view! { <span class="hex">{hex_bytes(shown)}</span> <span class="dim">{more}</span> }.into_any()
                }
            };
            view! {
                <tr>
                    <td class="num dim">{i + 1}</td>
                    <td class="mono name">{h.name}</td>
                    <td class="value">{decoded}</td>
                    <td class="mono dim nowrap">{described.encoding}</td>
                    <td class="mono raw">{raw}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data headers">
            <thead>
                <tr>
                    <th class="num">"#"</th>
                    <th>"Name"</th>
                    <th>"Decoded"</th>
                    <th>"Encoding"</th>
                    <th>"Raw (hex)"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}
