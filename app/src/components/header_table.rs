use leptos::prelude::*;

use super::CutNotice;
use crate::display::{HeaderRow, HeaderRows, HeaderValue};

/// A record's headers in record order (duplicates kept): name, decoded value, how it was
/// decoded, and the raw bytes. A null header shows a "null" marker, distinct from empty.
/// Shows what [`HeaderRows`] kept (the first `HEADERS_SHOWN`, each part cut at its cap) and
/// says what was cut, linking to `raw_href`, every header byte-exact.
#[component]
pub fn HeaderTable(headers: HeaderRows, raw_href: String) -> impl IntoView {
    if headers.total == 0 {
        return view! { <p class="empty-state">"This record has no headers."</p> }.into_any();
    }
    let any_cut = headers.rows.iter().any(row_is_cut);
    let notice = if headers.is_cut() {
        Some(format!(
            "Showing the first {} of {} headers.",
            headers.rows.len(),
            headers.total
        ))
    } else if any_cut {
        Some("Long header names and values are cut (marked …).".to_string())
    } else {
        None
    };
    let rows = headers
        .rows
        .into_iter()
        .enumerate()
        .map(|(i, h)| view! { <Row i=i h=h /> })
        .collect_view();
    view! {
        {notice.map(|text| view! { <CutNotice text=text raw_href=raw_href.clone() what="all headers" /> })}
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

fn row_is_cut(h: &HeaderRow) -> bool {
    h.name.cut
        || matches!(&h.value, HeaderValue::Decoded(s) if s.cut)
        || h.raw_hex.len() < (h.len * 3).saturating_sub(1)
}

#[component]
fn Row(i: usize, h: HeaderRow) -> impl IntoView {
    let decoded = match h.value {
        HeaderValue::Null => view! { <span class="null">"null"</span> }.into_any(),
        HeaderValue::Empty => view! { <span class="empty">"(empty)"</span> }.into_any(),
        HeaderValue::Decoded(s) => view! {
            <span class="decoded">{s.text}</span>
            {s.cut.then(|| view! { <span class="cut" title="cut: download the headers for all of it">"…"</span> })}
        }
        .into_any(),
        HeaderValue::Binary => view! { <span class="dim">"(binary)"</span> }.into_any(),
    };
    let raw = if h.encoding == "null" {
        view! { <span class="null">"null"</span> }.into_any()
    } else {
        let more = (h.raw_hex.len() < (h.len * 3).saturating_sub(1))
            .then(|| format!(" … ({} bytes)", h.len));
        view! { <span class="hex">{h.raw_hex}</span> <span class="dim">{more}</span> }.into_any()
    };
    let name_cut = h.name.cut.then(|| view! { <span class="cut">"…"</span> });
    view! {
        <tr>
            <td class="num dim">{i + 1}</td>
            <td class="mono name">{h.name.text}{name_cut}</td>
            <td class="value">{decoded}</td>
            <td class="mono dim nowrap">{h.encoding}</td>
            <td class="mono raw">{raw}</td>
        </tr>
    }
}
