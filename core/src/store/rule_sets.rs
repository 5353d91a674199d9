//! The versioned rule set of automatic reprocessing (migration 0022, `docs/automation.md`,
//! "Rule set versions"). Every save is a new row of `rule_set_versions` with its audit row
//! in the same transaction; the highest version is the active one. Nothing is ever updated
//! or deleted here: the history of the rules is the table.

use sqlx::QueryBuilder;

use super::actions::{clean_text, now_ms};
use super::audit::insert_audit;
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, NewAuditEntry};
use crate::automation::RuleSet;

/// Where a rule set version came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleSetOrigin {
    /// `[automation]` of `redrive.toml`, installed at start-up because it was new to the
    /// store or changed.
    Config,
    /// Saved in the UI.
    Ui,
    /// Saved through `PUT /api/v1/automation/rules`.
    Api,
}

impl RuleSetOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleSetOrigin::Config => "config",
            RuleSetOrigin::Ui => "ui",
            RuleSetOrigin::Api => "api",
        }
    }
    fn parse(s: &str) -> RuleSetOrigin {
        match s {
            "ui" => RuleSetOrigin::Ui,
            "api" => RuleSetOrigin::Api,
            _ => RuleSetOrigin::Config,
        }
    }
}

/// One stored version of the rule set.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RuleSetVersion {
    /// 1, 2, ...; the highest is active.
    pub version: i64,
    /// The TOML text as saved (comments kept).
    pub source: String,
    /// SHA-256 of `source`, lowercase hex.
    pub sha256: String,
    pub origin: RuleSetOrigin,
    /// User name, or `(config)` for a version installed from `redrive.toml`.
    pub created_by: String,
    /// Epoch ms.
    pub created_at_ms: i64,
    pub reason: Option<String>,
}

impl RuleSetVersion {
    /// Compiles the stored text. Errors: a stored version no longer compiles (a later
    /// redrive tightened a check) — the message says why.
    pub fn compile(&self) -> Result<RuleSet, crate::automation::RuleSetError> {
        RuleSet::parse_toml(&self.source)
    }
}

/// Actor name of versions installed from `redrive.toml`.
pub const CONFIG_ACTOR: &str = "(config)";

#[derive(Debug, sqlx::FromRow)]
struct VersionRow {
    version: i64,
    source: String,
    sha256: String,
    origin: String,
    created_by: String,
    created_at_ms: i64,
    reason: Option<String>,
}

impl From<VersionRow> for RuleSetVersion {
    fn from(r: VersionRow) -> Self {
        RuleSetVersion {
            version: r.version,
            source: r.source,
            sha256: r.sha256,
            origin: RuleSetOrigin::parse(&r.origin),
            created_by: r.created_by,
            created_at_ms: r.created_at_ms,
            reason: r.reason,
        }
    }
}

const VERSION_COLUMNS: &str =
    "CAST(version AS BIGINT) AS version, source, sha256, origin, created_by, created_at_ms, reason";

/// The reason of a version installed from `redrive.toml`: "changed" only when an earlier
/// version came from the file (`installed_before`); the first one on a store says so.
fn config_install_reason(installed_before: bool) -> &'static str {
    if installed_before {
        "[automation] in redrive.toml changed"
    } else {
        "[automation] in redrive.toml, installed for the first time"
    }
}

fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Store {
    /// Saves `source` as the next version of the rule set, in ONE transaction with its audit
    /// row (`rule_set_save`, detail `{"version", "previous_version", "origin"}`), and returns
    /// it. The text is compiled first; nothing is written when it does not compile.
    ///
    /// Errors: `Invalid` (the rule set's own message: what to change), `Unavailable`,
    /// `Database`.
    pub async fn save_rule_set(
        &self,
        actor: &Actor,
        origin: RuleSetOrigin,
        source: &str,
        reason: Option<&str>,
    ) -> Result<RuleSetVersion, StoreError> {
        RuleSet::parse_toml(source).map_err(|e| StoreError::Invalid(e.0))?;
        let source = clean_text(source);
        let sha = sha256_hex(&source);
        let now = now_ms();
        let reason = reason.map(clean_text).filter(|r| !r.trim().is_empty());
        let by = clean_text(&actor.user);
        let version = on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let previous: Option<i64> =
                sqlx::query_scalar("SELECT CAST(MAX(version) AS BIGINT) FROM rule_set_versions")
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(store_error)?;
            let version = previous.unwrap_or(0) + 1;
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "INSERT INTO rule_set_versions \
                 (version, source, sha256, origin, created_by, created_at_ms, reason) VALUES (",
            );
            let values = [
                Val::I64(Some(version)),
                Val::Text(Some(source.as_str())),
                Val::Text(Some(sha.as_str())),
                Val::Text(Some(origin.as_str())),
                Val::Text(Some(by.as_str())),
                Val::I64(Some(now)),
                Val::Text(reason.as_deref()),
            ];
            for (i, v) in values.into_iter().enumerate() {
                if i > 0 {
                    qb.push(", ");
                }
                DB::bind(&mut qb, v);
            }
            qb.push(")");
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            let mut audit = NewAuditEntry::by(actor, "rule_set_save", "ok");
            audit.reason = reason.clone();
            audit.detail = Some(
                serde_json::json!({
                    "version": version,
                    "previous_version": previous,
                    "origin": origin.as_str(),
                })
                .to_string(),
            );
            insert_audit::<DB>(&audit, now)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<i64, StoreError>(version)
        })?;
        Ok(RuleSetVersion {
            version,
            source,
            sha256: sha,
            origin,
            created_by: by,
            created_at_ms: now,
            reason,
        })
    }

    /// Installs `redrive.toml`'s `[automation]` text at start-up when it differs from the
    /// text of the newest version that came from the config (so a restart with the same file
    /// keeps the rules users edited since, and a changed file wins). Returns the new version,
    /// or `None` when nothing changed. Its reason says "changed" only when an earlier version
    /// came from the file; the first one says it is the first.
    ///
    /// Errors: as [`Store::save_rule_set`].
    pub async fn install_config_rule_set(
        &self,
        source: &str,
    ) -> Result<Option<RuleSetVersion>, StoreError> {
        let sha = sha256_hex(&clean_text(source));
        let last_config: Option<String> = on_pool!(self, |pool, DB| {
            let q: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT sha256 FROM rule_set_versions WHERE origin = 'config' \
                 ORDER BY version DESC LIMIT 1",
            );
            let mut q = q;
            q.build_query_scalar::<String>()
                .fetch_optional(pool)
                .await
                .map_err(store_error)
        })?;
        if last_config.as_deref() == Some(sha.as_str()) {
            return Ok(None);
        }
        let actor = Actor::admin(CONFIG_ACTOR);
        let reason = config_install_reason(last_config.is_some());
        self.save_rule_set(&actor, RuleSetOrigin::Config, source, Some(reason))
            .await
            .map(Some)
    }

    /// The active (newest) version; `None` before any was saved (then every dead letter
    /// goes to the default tier of an empty [`crate::automation::RuleSetSpec`]).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn active_rule_set(&self) -> Result<Option<RuleSetVersion>, StoreError> {
        self.rule_set_version_where("ORDER BY version DESC LIMIT 1", None)
            .await
    }

    /// Version `version`, if stored.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn rule_set_version(
        &self,
        version: i64,
    ) -> Result<Option<RuleSetVersion>, StoreError> {
        self.rule_set_version_where("WHERE version = ", Some(version))
            .await
    }

    async fn rule_set_version_where(
        &self,
        tail: &str,
        version: Option<i64>,
    ) -> Result<Option<RuleSetVersion>, StoreError> {
        let row: Option<VersionRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {VERSION_COLUMNS} FROM rule_set_versions {tail}"
            ));
            if let Some(v) = version {
                DB::bind(&mut qb, Val::I64(Some(v)));
            }
            qb.build_query_as::<VersionRow>()
                .fetch_optional(pool)
                .await
                .map_err(store_error)
        })?;
        Ok(row.map(RuleSetVersion::from))
    }

    /// The newest `limit` versions (at most 500), newest first.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn rule_set_versions(&self, limit: u32) -> Result<Vec<RuleSetVersion>, StoreError> {
        let limit = i64::from(limit.clamp(1, 500));
        let rows: Vec<VersionRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {VERSION_COLUMNS} FROM rule_set_versions ORDER BY version DESC LIMIT "
            ));
            DB::bind(&mut qb, Val::I64(Some(limit)));
            qb.build_query_as::<VersionRow>()
                .fetch_all(pool)
                .await
                .map_err(store_error)
        })?;
        Ok(rows.into_iter().map(RuleSetVersion::from).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "default_tier = \"manual\"\n";
    const V2: &str = "default_tier = \"archive\"\n";

    /// The first `[automation]` a store sees is not "changed"; the same text again installs
    /// nothing; a different one is "changed", also after a user's edit in between.
    #[tokio::test]
    async fn the_config_rule_set_says_changed_only_when_it_did() {
        let store = Store::connect("sqlite::memory:").await.unwrap();
        store.migrate().await.unwrap();
        let first = store.install_config_rule_set(V1).await.unwrap().unwrap();
        assert_eq!((first.version, first.origin), (1, RuleSetOrigin::Config));
        assert_eq!(
            first.reason.as_deref(),
            Some("[automation] in redrive.toml, installed for the first time")
        );
        assert_eq!(store.install_config_rule_set(V1).await.unwrap(), None);

        store
            .save_rule_set(&Actor::operator("ana"), RuleSetOrigin::Ui, V2, None)
            .await
            .unwrap();
        assert_eq!(store.install_config_rule_set(V1).await.unwrap(), None);
        let changed = store.install_config_rule_set(V2).await.unwrap().unwrap();
        assert_eq!(changed.version, 3);
        assert_eq!(
            changed.reason.as_deref(),
            Some("[automation] in redrive.toml changed")
        );
        let active = store.active_rule_set().await.unwrap().unwrap();
        assert_eq!(active.reason, changed.reason);

        // A store whose rules were only ever edited: the file's first version is not a change.
        let store = Store::connect("sqlite::memory:").await.unwrap();
        store.migrate().await.unwrap();
        store
            .save_rule_set(&Actor::operator("ana"), RuleSetOrigin::Ui, V2, None)
            .await
            .unwrap();
        let first = store.install_config_rule_set(V1).await.unwrap().unwrap();
        assert_eq!(
            first.reason.as_deref(),
            Some("[automation] in redrive.toml, installed for the first time")
        );
    }
}
