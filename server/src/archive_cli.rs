//! `redrive archive create` and `redrive archive restore` (`docs/retention.md`, "Archive").
//! Like `quarantine`, these run on the server host with the store's credentials and are
//! audited with the actor `(cli)`.

use anyhow::{bail, Context as _};
use clap::Subcommand;
use redrive_core::actions::NewAuditEntry;
use redrive_core::archive::{ArchiveLocation, ArchiveTarget};
use redrive_core::retention::ArchiveConfig;
use redrive_core::store::Store;
use redrive_core::ListQuery;

use crate::config::Config;

/// The actor of CLI archive actions in the audit trail.
const CLI_ACTOR: &str = "(cli)";

/// `redrive archive ...`
#[derive(Debug, Subcommand)]
pub enum ArchiveCommand {
    /// Archive every dead letter matching a filter (nothing is deleted); prints the manifest.
    Create {
        /// The list's filter as a query string, e.g. `dlq_topic=orders.DLT&status=deleted`
        /// (empty: every dead letter that is not deleted).
        #[arg(long, default_value = "")]
        filter: String,
        /// Where to write (default: `[retention.archive] location`).
        #[arg(long)]
        location: Option<String>,
    },
    /// Store an archived run again: LOCATION is its directory or its `manifest.json`
    /// (`s3://BUCKET/PREFIX/RUN/` or a path). Checksums are verified first; dead letters
    /// already in the store (same DLQ topic, partition and offset) are left as they are.
    Restore {
        #[arg(value_name = "LOCATION")]
        location: String,
    },
}

/// Runs an `archive` command to completion.
/// `create_store`: make the SQLite store if its file is missing (`--create`; `store_open.rs`).
pub fn run(cmd: ArchiveCommand, config: &Config, create_store: bool) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let store = crate::store_open::open_existing(config, create_store).await?;
        let archive = config.retention.archive.clone();
        let out = match cmd {
            ArchiveCommand::Create { filter, location } => {
                create(&store, archive, &filter, location).await
            }
            ArchiveCommand::Restore { location } => restore(&store, archive, &location).await,
        };
        store.close().await;
        out
    })
}

/// The S3 settings of `[retention.archive]` (or none) for `location`.
fn settings(archive: Option<ArchiveConfig>, location: &str) -> ArchiveConfig {
    ArchiveConfig {
        location: location.to_string(),
        ..archive.unwrap_or(ArchiveConfig {
            location: String::new(),
            before_purge: true,
            s3_endpoint: None,
            s3_region: None,
            s3_access_key_id: None,
            s3_secret_access_key: None,
            s3_allow_http: false,
        })
    }
}

async fn create(
    store: &Store,
    archive: Option<ArchiveConfig>,
    filter: &str,
    location: Option<String>,
) -> anyhow::Result<()> {
    let Some(location) = location.or_else(|| archive.as_ref().map(|a| a.location.clone())) else {
        bail!("no archive location: pass --location or set [retention.archive] location");
    };
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(filter).context("--filter is not a query string")?;
    let query = ListQuery::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|e| anyhow::anyhow!("--filter: {e}"))?;
    let cfg = settings(archive, &location);
    let target = ArchiveTarget::open(&ArchiveLocation::parse(&location)?, &cfg)?;
    let audit = NewAuditEntry {
        actor: CLI_ACTOR.to_string(),
        ..NewAuditEntry::default()
    };
    let report =
        redrive_core::archive::export::archive_filter(store, &target, &query.filter, audit).await?;
    println!("archived {} dead letters", report.records);
    println!("{}", report.manifest);
    Ok(())
}

async fn restore(
    store: &Store,
    archive: Option<ArchiveConfig>,
    location: &str,
) -> anyhow::Result<()> {
    let cfg = settings(archive, location);
    let result = redrive_core::archive::restore::restore(store, location, &cfg, CLI_ACTOR).await;
    let entry = match &result {
        Ok(r) => NewAuditEntry {
            actor: CLI_ACTOR.to_string(),
            action: "archive_restore".to_string(),
            count: r.restored as i64,
            reason: Some(format!("from {}", r.manifest)),
            outcome: format!(
                "ok: {} in the archive, {} restored, {} already present",
                r.records, r.restored, r.already_present
            ),
            ..NewAuditEntry::default()
        },
        Err(e) => NewAuditEntry {
            actor: CLI_ACTOR.to_string(),
            action: "archive_restore".to_string(),
            reason: Some(format!("from {location}")),
            outcome: format!("failed: {e}"),
            ..NewAuditEntry::default()
        },
    };
    store
        .record_audit(&entry)
        .await
        .context("writing the audit row")?;
    let r = result?;
    println!(
        "{} dead letters in the archive: {} restored, {} already present",
        r.records, r.restored, r.already_present
    );
    Ok(())
}
