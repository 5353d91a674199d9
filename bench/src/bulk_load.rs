//! A big bench store, fast: the database generates the rows itself.
//!
//! `make bench` needs 1M–10M stored dead letters before it can measure a page. Sending them
//! through `Store::insert_batch` costs one bound row per record from Rust; here one
//! `INSERT ... SELECT` per chunk of [`CHUNK_ROWS`] has the database produce the rows from a
//! sequence (SQLite: a recursive CTE; PostgreSQL: `generate_series`), joined to two small
//! tables computed in Rust — the error groups (class, fingerprint) and the source topics
//! (topic, stored headers JSON). Every row equals [`crate::synthetic`]`(i, now)` as
//! `insert_batch` would store it (the test below compares them field by field), triggers and
//! indexes included, so the figures measured over a bulk-loaded store are those of an ingested
//! one. One transaction per chunk keeps each commit bounded.
//!
//! The secondary indexes of `dead_letters` (all but those behind its primary key and unique
//! constraint) are dropped before the load and created again from their own stored
//! definitions after it: building an index once over sorted data is several times faster than
//! growing it row by row (on PostgreSQL those of `dead_letter_text` too: its trigram index).
//! Triggers stay, so anything they maintain is exact after the load (on SQLite the search
//! index, `dead_letter_fts`, is kept by the triggers on `dead_letter_text`).
//!
//! Each chunk also writes the chunk's searched text (`dead_letter_text`, migration 0024) as
//! ingest would ([`SEARCH_TEXT_SQLITE`]); the test below compares it with ingest's.
//!
//! With [`Tiers::Sorted`] each chunk is also left as ingest (which sorts what it stores) and
//! the server's tier sorter (`Store::sort_unsorted`) leave it (`docs/automation.md`
//! "Sorting"): `dead_letters.tier` set, one `dead_letter_tiers` row and one `tier_assigned`
//! history event per row. A store that has been running looks like that; a server over an
//! unsorted 10M-row store (one stored before migration 0022) would spend its first hour
//! sorting (`docs/bench.md`). The sorter's
//! decision for a synthetic row depends only on what repeats every [`PERIOD`] rows (error
//! group, source topic, consumer group, headers) under the rule set a server without a stored
//! one runs (`RuleSetSpec::default()`, no rules), so it is taken once per `i % PERIOD` with
//! the real `decide`, and the test below compares the result with what ingest writes.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use redrive_core::automation::{RuleSet, RuleSetSpec};
use redrive_core::model::{Convention, Header};
use redrive_core::store::{decide, TierCandidate, SORTER_ACTOR};
use sqlx::Connection;

use crate::{synthetic, DAY_MS, GROUPS, SOURCE_TOPICS};

/// Rows written per transaction.
pub const CHUNK_ROWS: usize = 250_000;

/// Rows after which everything the default rule set reads of a [`synthetic`] row repeats:
/// the least common multiple of [`GROUPS`], [`SOURCE_TOPICS`] and the 5 consumer groups.
const PERIOD: usize = 100;

/// Whether [`bulk_load`] also sorts the rows into tiers (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tiers {
    /// Every row unsorted (`tier` NULL), as ingest stores it.
    Unsorted,
    /// Every row as the sorter leaves it under the default rule set, sorted at `now`.
    Sorted,
}

/// Writes `rows` synthetic dead letters (offsets `0..rows`) into the migrated, empty store at
/// `url` (`sqlite:...` or `postgres://...`), `now` (epoch ms) as in [`synthetic`], sorted into
/// tiers or not (`tiers`). Returns the time it took.
///
/// Errors: the database's, e.g. a row that is already there (the store was not empty).
pub async fn bulk_load(url: &str, rows: usize, now: i64, tiers: Tiers) -> Result<Duration> {
    let t = Instant::now();
    let postgres = url.starts_with("postgres");
    let sorted = (tiers == Tiers::Sorted)
        .then(|| sorted_lookup(now))
        .transpose()?;
    let sql = insert_sql(postgres, now, sorted.as_deref());
    let tier_sql = sorted
        .as_deref()
        .map(|lookup| tier_rows_sql(postgres, now, lookup));
    if postgres {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        let indexes: Vec<(String, String)> = sqlx::query_as(
            "SELECT indexname, indexdef FROM pg_indexes i \
             WHERE tablename IN ('dead_letters', 'dead_letter_text') \
             AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)",
        )
        .fetch_all(&mut conn)
        .await?;
        for (name, _) in &indexes {
            sqlx::query(&format!("DROP INDEX \"{name}\""))
                .execute(&mut conn)
                .await?;
        }
        for (from, to) in chunks(rows) {
            let mut tx = conn.begin().await?;
            let before: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM dead_letters")
                .fetch_one(&mut *tx)
                .await?;
            sqlx::query(&sql)
                .bind(from as i64)
                .bind(to as i64 - 1)
                .execute(&mut *tx)
                .await
                .with_context(|| format!("bulk load of rows {from}..{to}"))?;
            sqlx::query(SEARCH_TEXT_POSTGRES)
                .bind(before)
                .execute(&mut *tx)
                .await?;
            for sql in tier_sql.iter().flatten() {
                sqlx::query(sql).bind(before).execute(&mut *tx).await?;
            }
            tx.commit().await?;
        }
        for (_, def) in &indexes {
            sqlx::query(def).execute(&mut conn).await?;
        }
        sqlx::query("ANALYZE dead_letters")
            .execute(&mut conn)
            .await?;
    } else {
        let mut conn = sqlx::SqliteConnection::connect(url).await?;
        let indexes: Vec<(String, String)> = sqlx::query_as(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' \
             AND tbl_name = 'dead_letters' AND sql IS NOT NULL",
        )
        .fetch_all(&mut conn)
        .await?;
        for (name, _) in &indexes {
            sqlx::query(&format!("DROP INDEX \"{name}\""))
                .execute(&mut conn)
                .await?;
        }
        for (from, to) in chunks(rows) {
            let mut tx = conn.begin().await?;
            let before: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM dead_letters")
                .fetch_one(&mut *tx)
                .await?;
            sqlx::query(&sql)
                .bind(from as i64)
                .bind(to as i64 - 1)
                .execute(&mut *tx)
                .await
                .with_context(|| format!("bulk load of rows {from}..{to}"))?;
            sqlx::query(SEARCH_TEXT_SQLITE)
                .bind(before)
                .execute(&mut *tx)
                .await?;
            for sql in tier_sql.iter().flatten() {
                sqlx::query(sql).bind(before).execute(&mut *tx).await?;
            }
            tx.commit().await?;
        }
        for (_, def) in &indexes {
            sqlx::query(def).execute(&mut conn).await?;
        }
        sqlx::query("ANALYZE").execute(&mut conn).await?;
    }
    Ok(t.elapsed())
}

/// The searched text of the rows after id `$1` (migration 0024, `redrive_core::search`), as
/// ingest writes it: the message, no stack trace (the synthetic rows have none) and the value,
/// which is text (256 × `v`, under the 8 KiB cap).
const SEARCH_TEXT_SQLITE: &str =
    "INSERT INTO dead_letter_text (id, message, stack_trace, payload) \
     SELECT id, error_message, NULL, CAST(value AS TEXT) FROM dead_letters WHERE id > ?1";
/// On PostgreSQL lowercased, as the indexer writes it (migration 0031).
const SEARCH_TEXT_POSTGRES: &str =
    "INSERT INTO dead_letter_text (id, message, stack_trace, payload, lowered) \
     SELECT id, lower(error_message), NULL, lower(convert_from(value, 'UTF8')), true \
     FROM dead_letters WHERE id > $1";

fn chunks(rows: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..rows)
        .step_by(CHUNK_ROWS)
        .map(move |from| (from, (from + CHUNK_ROWS).min(rows)))
}

/// SQL text quoting for the generated lookup tables (the values are ours, but still quoted).
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The per-group and per-source-topic lookup rows, taken from [`synthetic`] itself so the
/// two cannot drift apart: group `g` is row `g`'s, topic `t` is row `t`'s.
fn lookups(now: i64) -> (String, String) {
    let groups: Vec<String> = (0..GROUPS)
        .map(|g| {
            let d = synthetic(g, now);
            format!(
                "({g}, {}, {})",
                lit(d.normalized.error_class.as_deref().unwrap_or_default()),
                lit(&d.fingerprint)
            )
        })
        .collect();
    let topics: Vec<String> = (0..SOURCE_TOPICS)
        .map(|t| {
            let d = synthetic(t, now);
            format!(
                "({t}, {}, {})",
                lit(d.normalized.source_topic.as_deref().unwrap_or_default()),
                lit(&stored_headers(&d.record.headers))
            )
        })
        .collect();
    (groups.join(", "), topics.join(", "))
}

/// The headers column as the store writes it: `[{"name":..,"value":base64|null}]`.
fn stored_headers(headers: &[Header]) -> String {
    use base64::Engine as _;
    let list: Vec<serde_json::Value> = headers
        .iter()
        .map(|h| {
            serde_json::json!({
                "name": h.name,
                "value": h.value.as_ref().map(|v| base64::engine::general_purpose::STANDARD.encode(v)),
            })
        })
        .collect();
    serde_json::Value::Array(list).to_string()
}

/// The sorter's decision for each `i % PERIOD` as SQL `VALUES` rows `(n, tier, rule,
/// reason, next_at, detail)`: what `Store::sort_unsorted` writes for [`synthetic`] row `n`
/// under the default rule set (jitter 0.5; no default rule schedules anything).
///
/// Errors: the default rule set does not compile (a bug).
fn sorted_lookup(now: i64) -> Result<String> {
    let rules = RuleSet::compile(RuleSetSpec::default()).map_err(|e| anyhow::anyhow!(e.0))?;
    let rows: Vec<String> = (0..PERIOD)
        .map(|n| {
            let d = decide(&rules, &candidate(n, now), now, 0.5);
            let a = &d.assignment;
            format!(
                "({n}, {}, {}, {}, {}, {})",
                lit(a.tier.as_str()),
                a.rule.as_deref().map_or("NULL".into(), lit),
                lit(&a.reason),
                d.next_attempt_at_ms
                    .map_or("NULL".into(), |t| t.to_string()),
                lit(&format!("{}: {}", a.tier, a.reason)),
            )
        })
        .collect();
    Ok(rows.join(", "))
}

/// Synthetic row `i` as the sorter reads it before its first sort (no labels, not a
/// returning dead letter).
fn candidate(i: usize, now: i64) -> TierCandidate {
    let d = synthetic(i, now);
    TierCandidate {
        id: i as i64,
        dlq_topic: d.record.dlq_topic,
        source_topic: d.normalized.source_topic,
        consumer_group: d.normalized.consumer_group,
        error_class: d.normalized.error_class,
        error_message: d.normalized.error_message,
        fingerprint: d.fingerprint,
        convention: Convention::SpringDlt,
        headers: d.record.headers,
        labels: Vec::new(),
        dead_lettered_at_ms: d.dead_lettered_at_ms,
        tier: None,
        repeat_failures: 0,
        earlier_auto_attempts: 0,
        earlier_loop_guarded: false,
    }
}

/// The `dead_letter_tiers` rows and `tier_assigned` events of the rows after id `$1`, as
/// `Store::sort_unsorted` writes them (rule version NULL: no rule set stored; sorted at
/// `now`). `lookup`: [`sorted_lookup`]'s rows.
fn tier_rows_sql(postgres: bool, now: i64, lookup: &str) -> [String; 2] {
    let after = if postgres { "$1" } else { "?1" };
    let from =
        format!("FROM dead_letters d JOIN s ON s.n = d.dlq_offset % {PERIOD} WHERE d.id > {after}");
    let with = format!("WITH s(n, tier, rule, reason, next_at, detail) AS (VALUES {lookup}) ");
    [
        format!(
            "{with}INSERT INTO dead_letter_tiers (dead_letter_id, tier, rule_name, rule_version, \
             reason, tier_at_ms, auto_attempts, next_attempt_at_ms, loop_guarded, escalated) \
             SELECT d.id, s.tier, s.rule, NULL, s.reason, {now}, 0, CAST(s.next_at AS BIGINT), \
             0, 0 {from}"
        ),
        format!(
            "{with}INSERT INTO dead_letter_events (dead_letter_id, at_ms, kind, actor, detail) \
             SELECT d.id, {now}, 'tier_assigned', {}, s.detail {from}",
            lit(SORTER_ACTOR)
        ),
    ]
}

/// One chunk's `INSERT ... SELECT` over rows `$1..=$2`; the expressions mirror [`synthetic`].
/// `sorted`: [`sorted_lookup`]'s rows, which set each row's tier (`None`: unsorted).
fn insert_sql(postgres: bool, now: i64, sorted: Option<&str>) -> String {
    let (groups, topics) = lookups(now);
    let (seq, concat_num, blob, value) = if postgres {
        (
            "generate_series($1::bigint, $2::bigint) AS s(i)".to_string(),
            "::text",
            "convert_to",
            "convert_to(repeat('v', 256), 'UTF8')".to_string(),
        )
    } else {
        (
            "seq".to_string(),
            "",
            "CAST",
            "CAST(replace(hex(zeroblob(256)), '00', 'v') AS BLOB)".to_string(),
        )
    };
    let key = if blob == "CAST" {
        "CAST('order-' || i AS BLOB)".to_string()
    } else {
        "convert_to('order-' || i::text, 'UTF8')".to_string()
    };
    // Column lists on CTEs, not on VALUES aliases: SQLite has only the former.
    let with = if postgres {
        format!(
            "WITH g(n, class, fp) AS (VALUES {groups}), t(n, topic, headers) AS (VALUES {topics}) "
        )
    } else {
        format!(
            "WITH RECURSIVE seq(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?2), \
             g(n, class, fp) AS (VALUES {groups}), t(n, topic, headers) AS (VALUES {topics}) "
        )
    };
    let (with, tier, join_tier) = match sorted {
        Some(lookup) => (
            format!("{with}, srt(n, tier, rule, reason, next_at, detail) AS (VALUES {lookup}) "),
            "srt.tier",
            format!(" JOIN srt ON srt.n = i % {PERIOD}"),
        ),
        None => (with, "NULL", String::new()),
    };
    let day30 = 30 * DAY_MS;
    format!(
        "INSERT INTO dead_letters (dlq_topic, dlq_partition, dlq_offset, dead_lettered_at_ms, \
         status, fingerprint, convention, source_topic, source_partition, source_offset, \
         consumer_group, error_class, error_message, retry_count, decode_warnings, \
         record_timestamp_ms, ingested_at_ms, replay_count, headers, key, value, tier) \
         {with}\
         SELECT t.topic || '.DLT', i % 4, i, {now} - (i * 2592) % {day30}, \
         'new', g.fp, 'spring_dlt', t.topic, i % 4, i, \
         'group' || (i % 5){concat_num}, g.class, \
         CASE WHEN i % {GROUPS} = 7 \
              THEN 'Connection reset while calling payments for order ' || i{concat_num} \
              ELSE 'Failure ' || (i % {GROUPS}){concat_num} || ' while processing order ' \
                   || i{concat_num} || ' after ' || (i % 1000){concat_num} || ' ms' END, \
         3, '[]', {now} - (i * 2592) % {day30}, {now}, 0, t.headers, {key}, {value}, {tier} \
         FROM {seq} \
         JOIN g ON g.n = i % {GROUPS} \
         JOIN t ON t.n = i % {SOURCE_TOPICS}{join_tier}"
    )
}

#[cfg(test)]
mod tests {
    use redrive_core::filter::{Cursor, ListQuery};
    use redrive_core::store::Store;
    use redrive_core::Filter;
    use redrive_testkit::{fresh_database, Backend};

    use super::*;

    /// The bulk-loaded rows are exactly what `insert_batch` stores for [`synthetic`], on
    /// both databases: every field of every row, read back through the store; sorted,
    /// exactly what ingest writes as it sorts them (default rules, the sorter's `decide`);
    /// unsorted, what it stores when it leaves them to the sorter (a labels rule set).
    #[tokio::test]
    async fn bulk_load_equals_insert_batch() {
        let now = 1_750_000_000_000;
        let n = 600;
        let rules = RuleSet::compile(RuleSetSpec::default()).expect("rules");
        for backend in Backend::ALL {
            for tiers in [Tiers::Unsorted, Tiers::Sorted] {
                let (bulk_url, _d1) = fresh_database(backend).await.expect("db");
                let (ref_url, _d2) = fresh_database(backend).await.expect("db");
                let bulk = Store::connect(&bulk_url).await.expect("connect");
                bulk.migrate().await.expect("migrate");
                let reference = Store::connect(&ref_url).await.expect("connect");
                reference.migrate().await.expect("migrate");

                bulk_load(&bulk_url, n, now, tiers)
                    .await
                    .expect("bulk load");
                if tiers == Tiers::Unsorted {
                    // Ingest sorts what it stores, except under a rule set that matches on
                    // labels (`docs/automation.md`, "Sorting"): the reference stores its rows
                    // unsorted under one.
                    redrive_testkit::leave_ingest_unsorted(
                        &reference,
                        &redrive_core::actions::Actor::operator("bench"),
                    )
                    .await
                    .expect("labels rule set");
                }
                let rows: Vec<_> = (0..n).map(|i| synthetic(i, now)).collect();
                reference.insert_batch(&rows).await.expect("insert");
                // Ingest leaves the searched text to the search indexer (migration 0028):
                // index it, so that the comparison below checks what the indexer copies too.
                while reference.index_search_backlog(1000).await.expect("index") > 0 {}
                if tiers == Tiers::Sorted {
                    // Ingest sorted every one with the built-in rules: none left here.
                    let left = reference
                        .sort_unsorted(&rules, None, 250)
                        .await
                        .expect("sort");
                    assert_eq!(left.read, 0, "{backend:?}: ingest left none unsorted");
                }
                let what = format!("{backend:?} {tiers:?}");
                let (got, want) = (all(&bulk).await, all(&reference).await);
                assert_eq!(got.len(), n, "{what}");
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(
                        format!("{g:?}"),
                        format!("{w:?}"),
                        "{what}: offset {}",
                        w.record.dlq_offset
                    );
                }
                // The searched text (migration 0024) too: the bulk load's against the
                // indexer's.
                let (got, want) = (texts(&bulk_url).await, texts(&ref_url).await);
                assert_eq!(got.len(), n, "{what}");
                assert_eq!(got, want, "{what}: dead_letter_text");
                // And the sorter's rows: tiers and history (all but the times it wrote).
                let (got, want) = (sorting(&bulk_url).await, sorting(&ref_url).await);
                assert_eq!(got.len(), if tiers == Tiers::Sorted { 2 * n } else { 0 });
                assert_eq!(got, want, "{what}: dead_letter_tiers and events");
                bulk.close().await;
                reference.close().await;
            }
        }
    }

    /// Every stored dead letter with its details, by DLQ offset, ids and sort times zeroed.
    async fn all(s: &Store) -> Vec<redrive_core::model::DeadLetter> {
        let mut out = Vec::new();
        let mut cursor = None;
        loop {
            let page = s
                .list(&ListQuery {
                    filter: Filter::default(),
                    cursor,
                    limit: 500,
                })
                .await
                .expect("list");
            for summary in &page.items {
                let mut d = s.get(summary.id).await.expect("get").expect("row");
                d.summary.id = 0;
                // When it was sorted: the bulk load's `now`, the sorter's clock.
                if let Some(t) = d.tiering.as_mut() {
                    t.tier_at_ms = 0;
                }
                out.push(d);
            }
            match page.next_cursor {
                Some(c) => cursor = Some(Cursor::decode(&c).expect("cursor")),
                None => break,
            }
        }
        out.sort_by_key(|d| d.record.dlq_offset);
        out
    }

    /// The sorter's rows, by DLQ offset: each `dead_letter_tiers` row as text (without
    /// `tier_at_ms`), then each history event's kind, actor and detail (without `at_ms`).
    async fn sorting(url: &str) -> Vec<(i64, String)> {
        let sql = "SELECT d.dlq_offset, t.tier || '|' || COALESCE(t.rule_name, '-') || '|' \
             || COALESCE(CAST(t.rule_version AS TEXT), '-') || '|' || t.reason || '|' \
             || CAST(t.auto_attempts AS TEXT) || '|' \
             || COALESCE(CAST(t.next_attempt_at_ms AS TEXT), '-') || '|' \
             || CAST(t.loop_guarded AS TEXT) || '|' || CAST(t.escalated AS TEXT) \
             FROM dead_letter_tiers t JOIN dead_letters d ON d.id = t.dead_letter_id \
             UNION ALL \
             SELECT d.dlq_offset, e.kind || '|' || COALESCE(e.actor, '-') || '|' \
             || COALESCE(e.detail, '-') \
             FROM dead_letter_events e JOIN dead_letters d ON d.id = e.dead_letter_id \
             ORDER BY 1, 2";
        if url.starts_with("postgres") {
            let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
            sqlx::query_as(sql)
                .fetch_all(&mut c)
                .await
                .expect("sorting")
        } else {
            let mut c = sqlx::SqliteConnection::connect(url).await.expect("connect");
            sqlx::query_as(sql)
                .fetch_all(&mut c)
                .await
                .expect("sorting")
        }
    }

    type Text = (i64, Option<String>, Option<String>, Option<String>);

    /// `dead_letter_text` by DLQ offset.
    async fn texts(url: &str) -> Vec<Text> {
        let sql = "SELECT d.dlq_offset, t.message, t.stack_trace, t.payload \
             FROM dead_letter_text t JOIN dead_letters d ON d.id = t.id ORDER BY d.dlq_offset";
        if url.starts_with("postgres") {
            let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
            sqlx::query_as(sql).fetch_all(&mut c).await.expect("texts")
        } else {
            let mut c = sqlx::SqliteConnection::connect(url).await.expect("connect");
            sqlx::query_as(sql).fetch_all(&mut c).await.expect("texts")
        }
    }
}
