//! An on-demand archive of every dead letter matching a filter (`POST /api/v1/archives`,
//! `redrive archive create`): written like a purge's archive, nothing deleted, one audit row.

use super::writer::ArchiveWriter;
use super::{run_dir_name, ArchiveError, ArchiveTarget};
use crate::actions::NewAuditEntry;
use crate::filter::Filter;
use crate::store::Store;

/// Dead letters read from the store per page.
pub const EXPORT_PAGE: usize = 500;

/// What an on-demand archive wrote.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ArchiveReport {
    pub run_id: i64,
    pub records: u64,
    /// The run's `manifest.json`: what `redrive archive restore` takes.
    pub manifest: String,
}

/// Archives every dead letter matching `filter` (as of now: ones ingested meanwhile are not
/// included) to `target`, as `actor`; `audit` carries the actor's IP and user agent.
///
/// Errors: `Store`, `Storage`, `Io`; the run is then recorded `failed` and audited.
pub async fn archive_filter(
    store: &Store,
    target: &ArchiveTarget,
    filter: &Filter,
    audit: NewAuditEntry,
) -> Result<ArchiveReport, ArchiveError> {
    let filter_json = serde_json::to_string(filter).unwrap_or_else(|_| "{}".to_string());
    let now = chrono::Utc::now().timestamp_millis();
    let run_id = store
        .start_retention_run("archive", &audit.actor, None)
        .await?;
    let dir = run_dir_name(now, "archive", run_id);
    let written = async {
        let mut w = ArchiveWriter::begin(
            target,
            &dir,
            "archive",
            run_id,
            &audit.actor,
            Some(filter_json.clone()),
            now,
        )
        .await?;
        let max_id = store.highest_dead_letter_id().await?;
        let mut after = 0;
        let result = async {
            loop {
                let ids = store
                    .filter_ids_after(filter, after, max_id, EXPORT_PAGE)
                    .await?;
                let Some(last) = ids.last().copied() else {
                    break;
                };
                after = last;
                let rows = store.archive_rows(&ids).await?;
                w.write(&rows).await?;
            }
            Ok::<(), ArchiveError>(())
        }
        .await;
        if let Err(e) = result {
            w.abort().await;
            return Err(e);
        }
        let location = w.manifest_location().to_string();
        let manifest = w.finish().await?;
        Ok::<_, ArchiveError>((manifest.records, location))
    }
    .await;
    match written {
        Ok((records, manifest)) => {
            store
                .update_retention_run(run_id, records as i64, Some(&manifest))
                .await?;
            let entry = NewAuditEntry {
                action: "archive".to_string(),
                count: records as i64,
                filter: Some(filter_json),
                outcome: format!("ok: {records} archived to {manifest}"),
                ..audit
            };
            store
                .finish_retention_run(run_id, "done", "[]", None, &entry)
                .await?;
            Ok(ArchiveReport {
                run_id,
                records,
                manifest,
            })
        }
        Err(e) => {
            let msg = e.to_string();
            let entry = NewAuditEntry {
                action: "archive".to_string(),
                filter: Some(filter_json),
                outcome: format!("failed: {msg}"),
                ..audit
            };
            store
                .finish_retention_run(run_id, "failed", "[]", Some(&msg), &entry)
                .await?;
            Err(e)
        }
    }
}
