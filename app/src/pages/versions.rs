//! The detail page's "Edited versions" section: each saved version of the dead letter, newest
//! first, with who, when, why, and its diff summary (bounded when it was stored:
//! `redrive_core::edit::diff`; shown with hidden characters marked).

use leptos::prelude::*;
use redrive_core::edit::diff::PartDiff;
use redrive_core::edit::VersionInfo;

use crate::display::format_time;
use crate::display::visible::{shown, Lines};

/// A diff text as shown: hidden characters marked, within the summary's own cap.
fn diff_text(s: &str) -> String {
    shown(s, 64 * 1024, Lines::Keep).text
}

fn part(what: &'static str, p: &PartDiff) -> Option<impl IntoView> {
    if !p.changed {
        return None;
    }
    let side = |null: bool, bytes: u64| {
        if null {
            "null".to_string()
        } else {
            format!("{bytes} bytes")
        }
    };
    let head = format!(
        "{what}: {} → {}",
        side(p.before.null, p.before.bytes),
        side(p.after.null, p.after.bytes)
    );
    let diff = p.diff.as_deref().map(diff_text);
    let cut = p
        .cut
        .then(|| view! { <p class="dim small" data-cut="">"The diff is cut; the versions are whole (API)."</p> });
    Some(view! {
        <div class="version-part">
            <h4>{head}</h4>
            {diff.map(|d| view! { <pre class="diff mono">{d}</pre> })}
            {cut}
        </div>
    })
}

/// The saved versions (none: nothing is shown).
#[component]
pub fn Versions(id: i64, versions: Vec<VersionInfo>) -> AnyView {
    // Type-erased: the detail page's view type is deep enough already (the wasm build's
    // query depth).
    let latest = versions.first().map(|v| v.version);
    let view = latest.map(|latest| {
        let items = versions
            .into_iter()
            .map(|v| {
                let json = format!("/api/v1/dead-letters/{id}/versions/{}", v.version);
                let sha = v
                    .value_sha256
                    .as_deref()
                    .map(|s| format!(" · SHA-256 {}", &s[..s.len().min(16)]))
                    .unwrap_or_default();
                let headers = v.diff.headers.changed.then(|| {
                    let more = (v.diff.headers.more > 0)
                        .then(|| view! { <li class="dim">{format!("… and {} more", v.diff.headers.more)}</li> });
                    view! {
                        <div class="version-part">
                            <h4>{format!("Headers: {} → {}", v.diff.headers.before_count, v.diff.headers.after_count)}</h4>
                            <ul class="mono">
                                {v.diff.headers.changes.iter().map(|c| view! { <li>{diff_text(c)}</li> }).collect_view()}
                                {more}
                            </ul>
                        </div>
                    }
                });
                view! {
                    <li class="version" data-version=v.version>
                        <h3>
                            {format!("Version {}", v.version)}
                            {(v.version == latest).then(|| view! { " " <span class="badge">"published by a replay"</span> })}
                        </h3>
                        <p class="dim small">
                            {format!(
                                "{} UTC by {} · value {} bytes{sha}",
                                format_time(v.created_at_ms),
                                v.created_by,
                                v.value_bytes
                            )}
                            " · " <a href=json>"record (JSON)"</a>
                        </p>
                        {v.reason.clone().map(|r| view! { <p>{format!("Reason: {}", diff_text(&r))}</p> })}
                        {part("Value", &v.diff.value)}
                        {part("Key", &v.diff.key)}
                        {headers}
                    </li>
                }
            })
            .collect_view();
        view! {
            <section id="versions" class="versions">
                <h2>"Edited versions"</h2>
                <p>
                    {format!(
                        "A replay of this dead letter publishes version {latest} in place of the \
                         original record, which is kept as it was received (shown below)."
                    )}
                </p>
                <ol class="version-list" reversed="">{items}</ol>
            </section>
        }
        .into_any()
    });
    view.into_any()
}
