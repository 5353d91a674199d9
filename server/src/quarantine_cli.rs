//! `redrive quarantine list` and `redrive quarantine retry`: the records the store refused even
//! in reduced form (see `docs/limits.md`), and storing them again after an upgrade.
//!
//! Like `user` and `token`, these run on the server host with the store's credentials; a
//! retry is audited with the actor `(cli)`.

use anyhow::{bail, Context as _};
use clap::Subcommand;
use redrive_core::actions::NewAuditEntry;
use redrive_core::quarantine::{RetryReport, MAX_LIST_LIMIT};
use redrive_core::store::Store;

use crate::api::rfc3339;
use crate::config::Config;

/// `redrive quarantine ...`
#[derive(Debug, Subcommand)]
pub enum QuarantineCommand {
    /// List quarantined records, newest first: id, DLQ coordinates, size, attempts, error.
    List {
        /// At most this many (1-500).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Store quarantined records again (decoded by this version); each one stored is removed
    /// from quarantine, each one still refused stays with the new error.
    Retry {
        /// Quarantine ids (see `quarantine list`).
        #[arg(
            value_name = "ID",
            required_unless_present = "all",
            conflicts_with = "all"
        )]
        ids: Vec<i64>,
        /// Every quarantined record.
        #[arg(long)]
        all: bool,
    },
}

/// Runs a `quarantine` command to completion.
/// `create`: make the SQLite store if its file is missing (`--create`; `store_open.rs`).
pub fn run(cmd: QuarantineCommand, config: &Config, create: bool) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let store = crate::store_open::open_existing(config, create).await?;
        let out = match cmd {
            QuarantineCommand::List { limit } => list(&store, limit).await,
            QuarantineCommand::Retry { ids, all } => retry(&store, (!all).then_some(ids)).await,
        };
        store.close().await;
        out
    })
}

async fn list(store: &Store, limit: u32) -> anyhow::Result<()> {
    if limit == 0 || limit > MAX_LIST_LIMIT {
        bail!("--limit must be between 1 and {MAX_LIST_LIMIT}");
    }
    let total = store.quarantine_count().await?;
    println!(
        "{:<8} {:<40} {:>10} {:>8} {:<24} error",
        "id", "topic/partition@offset", "bytes", "attempts", "quarantined at"
    );
    for q in store.list_quarantine(limit, None).await? {
        println!(
            "{:<8} {:<40} {:>10} {:>8} {:<24} {}{}",
            q.id,
            format!("{}/{}@{}", q.dlq_topic, q.dlq_partition, q.dlq_offset),
            q.record_bytes,
            q.attempts,
            rfc3339(q.quarantined_at_ms).unwrap_or_default(),
            if q.payload_kept {
                ""
            } else {
                "[record not kept: read it from Kafka] "
            },
            q.error
        );
    }
    eprintln!("{total} record(s) in quarantine");
    Ok(())
}

async fn retry(store: &Store, ids: Option<Vec<i64>>) -> anyhow::Result<()> {
    let report: RetryReport = redrive_core::ingest::retry_quarantined(store, ids.as_deref())
        .await
        .context("retrying quarantined records")?;
    let summary = format!(
        "tried {}: stored {}, stored in reduced form {}, already stored {}, still refused {}, \
         without a kept record {}",
        report.tried,
        report.stored,
        report.stored_reduced,
        report.already_stored,
        report.still_quarantined,
        report.without_payload
    );
    store
        .record_audit(&NewAuditEntry {
            actor: "(cli)".into(),
            action: "quarantine_retry".into(),
            outcome: format!("ok: {summary}"),
            count: i64::try_from(report.tried).unwrap_or(i64::MAX),
            ids: ids.map(|ids| serde_json::to_string(&ids).unwrap_or_default()),
            user_agent: Some(format!("redrive-cli/{}", env!("CARGO_PKG_VERSION"))),
            ..NewAuditEntry::default()
        })
        .await?;
    println!("{summary}");
    if report.still_quarantined > 0 {
        eprintln!("records still refused keep their quarantine row; see `redrive quarantine list`");
    }
    Ok(())
}
