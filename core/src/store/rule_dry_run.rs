//! The store's half of a rule set's dry run (`crate::automation::dry_run`,
//! `docs/automation.md`, "Dry run"): reads the live dead letters (every status but
//! `deleted`) with the sorter's own reader ([`Store::tier_candidates`]), newest id first, in
//! pages of [`DRY_RUN_CHUNK`], at most [`MAX_DRY_RUN_ROWS`], and counts where the rule set
//! would put each. Read-only: nothing is written, and each page is its own short read (no
//! long transaction holds the database).

use sqlx::QueryBuilder;

use super::dialect::store_error;
use super::tier_candidates::CandidateScan;
use super::{Pool, Store, StoreError};
use crate::automation::dry_run::{DryRun, DryRunTally, MAX_DRY_RUN_ROWS};
use crate::automation::RuleSet;

/// Dead letters read per page.
pub const DRY_RUN_CHUNK: u32 = 2_000;

impl Store {
    /// What `set` would do to the newest live dead letters (at most `max_rows`, capped at
    /// [`MAX_DRY_RUN_ROWS`]), ages measured at `now_ms` (epoch ms). Labels (a record's own and
    /// its error group's) are read only when a rule matches on labels. A record whose stored
    /// headers cannot be decoded is matched without headers.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn dry_run_rule_set(
        &self,
        set: &RuleSet,
        now_ms: i64,
        max_rows: u64,
    ) -> Result<DryRun, StoreError> {
        let max_rows = max_rows.min(MAX_DRY_RUN_ROWS);
        let total: i64 = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT CAST(COUNT(*) AS BIGINT) FROM dead_letters WHERE status <> 'deleted'",
            );
            qb.build_query_scalar::<i64>()
                .fetch_one(pool)
                .await
                .map_err(store_error)
        })?;
        let mut tally = DryRunTally::new(set);
        let mut scan = CandidateScan {
            unsorted_only: false,
            live_only: true,
            newest_first: true,
            from_id: None,
            limit: DRY_RUN_CHUNK,
            with_labels: set.spec.rules.iter().any(|r| !r.matches.labels.is_empty()),
        };
        let mut read: u64 = 0;
        while read < max_rows {
            scan.limit = DRY_RUN_CHUNK.min((max_rows - read) as u32);
            let page = self.tier_candidates(&scan).await?;
            let Some(last) = page.last() else { break };
            scan.from_id = Some(last.id);
            read += page.len() as u64;
            for c in &page {
                tally.add(&set.assign(&c.input(now_ms)), c.tier);
            }
            if (page.len() as u32) < scan.limit {
                break;
            }
        }
        Ok(tally.finish(total.max(0) as u64))
    }
}
