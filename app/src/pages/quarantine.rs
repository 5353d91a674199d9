use leptos::prelude::*;
use leptos_meta::Title;

use super::LoadError;
use crate::display::format_time;
use crate::http_status::HttpStatus;
use crate::quarantine_api::{list_quarantine, PAGE_LIMIT};
use crate::wire;

/// `/quarantine`: records the store refused even in reduced form, newest first, with their
/// DLQ coordinates and the error, and how to store them again.
#[component]
pub fn QuarantinePage() -> impl IntoView {
    let listing = wire::resource(|| (), |_| list_quarantine());
    let status = HttpStatus::current();
    view! {
        <Title text="Quarantine · redrive" />
        <h1>"Quarantine"</h1>
        <p class="dim">
            "Records the database refused even in reduced form. Ingest moved past them only \
             after putting them here, so none is lost. Once the cause is fixed (often by an \
             upgrade), store them again with "
            <code>"redrive quarantine retry --all"</code>
            " or "
            <code>"POST /api/v1/quarantine/retry"</code>
            "."
        </p>
        <Suspense fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let status = status.clone();
                Suspend::new(async move {
                    match listing.await {
                        Ok(l) if l.items.is_empty() => view! {
                            <p class="empty-state">"Nothing is in quarantine: every record was stored."</p>
                        }
                        .into_any(),
                        Ok(l) => {
                            let shown = l.items.len();
                            let rows = l
                                .items
                                .into_iter()
                                .map(|q| {
                                    view! {
                                        <tr>
                                            <td class="num mono">{q.id}</td>
                                            <td class="mono">
                                                {format!("{}/{}@{}", q.dlq_topic, q.dlq_partition, q.dlq_offset)}
                                            </td>
                                            <td class="mono nowrap">{format_time(q.quarantined_at_ms)}</td>
                                            <td class="num mono">{q.record_bytes}</td>
                                            <td class="num mono">{q.attempts}</td>
                                            <td>
                                                {if q.payload_kept {
                                                    view! { <span>"kept"</span> }.into_any()
                                                } else {
                                                    view! { <span class="warn">"not kept: read it from Kafka"</span> }.into_any()
                                                }}
                                            </td>
                                            <td class="mono">{q.error}</td>
                                        </tr>
                                    }
                                })
                                .collect_view();
                            view! {
                                <p>
                                    {format!("{} record(s) in quarantine", l.total)}
                                    {(l.total > shown as i64).then(|| format!(
                                        "; the newest {PAGE_LIMIT} are shown (all: GET /api/v1/quarantine)"
                                    ))}
                                </p>
                                <table class="data quarantine">
                                    <thead>
                                        <tr>
                                            <th class="num">"Id"</th>
                                            <th>"Topic/partition@offset"</th>
                                            <th class="col-time">"Quarantined (UTC)"</th>
                                            <th class="num">"Bytes"</th>
                                            <th class="num">"Attempts"</th>
                                            <th>"Record"</th>
                                            <th>"Error"</th>
                                        </tr>
                                    </thead>
                                    <tbody>{rows}</tbody>
                                </table>
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
