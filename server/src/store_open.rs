//! Opening the store for the commands that work on it directly (`redrive user ...`,
//! `token ...`, `quarantine ...`, `archive ...`): connect and migrate, but never create an
//! empty SQLite store by accident.
//!
//! Connecting to a `sqlite:` URL whose file does not exist creates it (sqlx's
//! `create_if_missing`, which `serve` relies on). For these commands a missing file almost
//! always means a wrong URL or working directory — `redrive token create` run from the wrong
//! directory used to make a fresh `redrive.db` there and print a token the server had never
//! heard of. So they refuse, naming the path, unless `--create` is given; `serve`, `migrate`
//! and `demo` still create the store (docs/cli.md, "The store commands").

use anyhow::{bail, Context as _};
use redrive_core::store::Store;

use crate::config::{redact_url, Config};

/// Connects to the configured store and applies the migrations. With `create` false, a
/// `sqlite:` URL naming a file that does not exist is refused (nothing is created); a
/// PostgreSQL database is never created by redrive, so it needs no check.
///
/// Errors: the refusal above; the database unreachable or refusing the migrations.
pub async fn open_existing(config: &Config, create: bool) -> anyhow::Result<Store> {
    if !create {
        check_exists(&config.database_url)?;
    }
    let url = redact_url(&config.database_url);
    let store = Store::connect(&config.database_url)
        .await
        .with_context(|| format!("opening the database at {url} (check database_url)"))?;
    store
        .migrate()
        .await
        .with_context(|| format!("migrating the database at {url}"))?;
    Ok(store)
}

/// `Err` when `url` names a SQLite file that does not exist.
fn check_exists(url: &str) -> anyhow::Result<()> {
    if let Some(file) = redrive_core::store::sqlite_file(url) {
        if !file.exists() {
            bail!(
                "no redrive store at {}: `redrive serve` creates one, or pass --create to \
                 create an empty store here (check --database-url / REDRIVE_DATABASE_URL and \
                 the working directory)",
                file.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_sqlite_file_is_refused_and_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redrive.db");
        let url = format!("sqlite:{}", path.display());
        let err = check_exists(&url).unwrap_err().to_string();
        assert!(err.contains("no redrive store at"), "{err}");
        assert!(err.contains("redrive.db"), "{err}");
        assert!(!path.exists());
        std::fs::write(&path, b"").unwrap();
        assert!(check_exists(&url).is_ok());
        assert!(check_exists("sqlite::memory:").is_ok());
        assert!(check_exists("postgres://redrive@db/redrive").is_ok());
    }
}
