//! Ingest rates (`make bench` rows 1): a consumer that only counts, beside redrive's ingest
//! into a fresh store set up as [`Variant`] says, both reading the same backlog topic.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use redrive_core::ingest::{self, IngestConfig, IngestStatus};
use redrive_core::store::Store;
use redrive_core::Filter;
use redrive_testkit::{self as kit, Backend};
use tokio_util::sync::CancellationToken;

use crate::env_usize;

/// msgs/s of a consumer that only counts, from subscribe to the n-th record.
pub(crate) fn raw_consume_rate(topic: &str, n: usize) -> Result<f64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kit::kafka_brokers())
        .set("group.id", kit::unique("bench_raw"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()?;
    consumer.subscribe(&[topic])?;
    let t = Instant::now();
    let mut count = 0usize;
    let deadline = Instant::now() + Duration::from_secs(600);
    while count < n {
        if Instant::now() > deadline {
            bail!("raw consumer saw only {count} of {n} records");
        }
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            m?;
            count += 1;
        }
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

/// How [`ingest_rate`] sets up its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    /// As `redrive serve` does.
    Default,
    /// SQLite with `synchronous=NORMAL`.
    SqliteNormal,
    /// Without the aggregate triggers of migrations 0006, 0027 and 0036 (dropped after migrating): what the
    /// maintained aggregates cost ingest.
    NoAggregates,
    /// Without migration 0036's triggers only (the error groups per hour): what that one
    /// aggregate costs ingest.
    NoGroupHours,
    /// A trigger refuses the hostile records (keys `hostile-*`) in `dead_letters`, so ingest
    /// splits each out, tries its reduced form (refused too) and quarantines it.
    RefuseHostile,
    /// Without free-text search (migrations 0024, 0028): `search_backlog`, where ingest notes
    /// the searched text, replaced by a view whose `INSTEAD OF INSERT` trigger discards the
    /// rows: what search costs ingest (the index itself is written later, by the indexer).
    NoSearch,
}

/// [`Variant::NoSearch`]'s statements, per database.
const SQLITE_NO_SEARCH: [&str; 4] = [
    "DROP VIEW search_backlog_text",
    "DROP TABLE search_backlog",
    "CREATE VIEW search_backlog AS SELECT 0 AS id, 0 AS stack_bytes, 0 AS payload_bytes WHERE 0",
    "CREATE TRIGGER search_backlog_discard INSTEAD OF INSERT ON search_backlog \
     BEGIN SELECT 1; END",
];

const POSTGRES_NO_SEARCH: [&str; 5] = [
    "DROP VIEW search_backlog_text",
    "DROP TABLE search_backlog",
    "CREATE VIEW search_backlog AS SELECT 0::bigint AS id, 0 AS stack_bytes, \
     0 AS payload_bytes WHERE false",
    "CREATE FUNCTION search_backlog_discard() RETURNS trigger LANGUAGE plpgsql AS \
     $$ BEGIN RETURN NULL; END $$",
    "CREATE TRIGGER search_backlog_discard INSTEAD OF INSERT ON search_backlog \
     FOR EACH ROW EXECUTE FUNCTION search_backlog_discard()",
];

const SQLITE_REFUSE: &str = "CREATE TRIGGER bench_refuse BEFORE INSERT ON dead_letters \
     WHEN substr(NEW.key, 1, 8) = CAST('hostile-' AS BLOB) \
     BEGIN SELECT RAISE(ABORT, 'refused by the bench trigger'); END";

const POSTGRES_REFUSE: [&str; 2] = [
    "CREATE FUNCTION bench_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
     IF substr(NEW.key, 1, 8) = 'hostile-'::bytea THEN \
     RAISE EXCEPTION 'refused by the bench trigger' USING ERRCODE = 'check_violation'; \
     END IF; RETURN NEW; END $$",
    "CREATE TRIGGER bench_refuse BEFORE INSERT ON dead_letters FOR EACH ROW \
     EXECUTE FUNCTION bench_refuse()",
];

pub(crate) async fn ingest_rate(
    topic: &str,
    n: usize,
    backend: Backend,
    variant: Variant,
) -> Result<f64> {
    use sqlx::Connection as _;
    let (url, _dir) = kit::fresh_database(backend).await?;
    let durability = match variant {
        Variant::SqliteNormal => redrive_core::store::SqliteDurability::Normal,
        _ => redrive_core::store::SqliteDurability::Full,
    };
    let store = Store::connect_with(&url, durability).await?;
    store.migrate().await?;
    let hours = [
        "DROP TRIGGER dl_stats_group_hours_insert",
        "DROP TRIGGER dl_stats_group_hours_update",
        "DROP TRIGGER dl_stats_group_hours_delete",
    ];
    let drops: Vec<&str> = match variant {
        Variant::NoAggregates => [
            "DROP TRIGGER dl_stats_insert",
            "DROP TRIGGER dl_stats_update",
            "DROP TRIGGER dl_stats_delete",
            "DROP TRIGGER dl_stats_groups_insert",
            "DROP TRIGGER dl_stats_groups_update",
            "DROP TRIGGER dl_stats_groups_delete",
        ]
        .into_iter()
        .chain(hours)
        .collect(),
        Variant::NoGroupHours => hours.to_vec(),
        _ => Vec::new(),
    };
    if !drops.is_empty() {
        match backend {
            Backend::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&url).await?;
                for q in drops {
                    sqlx::query(q).execute(&mut c).await?;
                }
            }
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&url).await?;
                for q in drops {
                    sqlx::query(&format!("{q} ON dead_letters"))
                        .execute(&mut c)
                        .await?;
                }
            }
        }
    }
    if variant == Variant::NoSearch {
        match backend {
            Backend::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&url).await?;
                sqlx::query("DROP TRIGGER dead_letters_text_delete")
                    .execute(&mut c)
                    .await?;
                for q in SQLITE_NO_SEARCH {
                    sqlx::query(q).execute(&mut c).await?;
                }
            }
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&url).await?;
                for q in POSTGRES_NO_SEARCH {
                    sqlx::query(q).execute(&mut c).await?;
                }
            }
        }
    }
    if variant == Variant::RefuseHostile {
        match backend {
            Backend::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&url).await?;
                sqlx::query(SQLITE_REFUSE).execute(&mut c).await?;
            }
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&url).await?;
                for q in POSTGRES_REFUSE {
                    sqlx::query(q).execute(&mut c).await?;
                }
            }
        }
    }
    let refused = if variant == Variant::RefuseHostile {
        n / 1000
    } else {
        0
    };
    let rate = ingest_into(&store, topic, n, variant != Variant::NoAggregates).await?;
    let quarantined = store.quarantine_count().await? as usize;
    if quarantined != refused {
        bail!("{quarantined} records quarantined, expected {refused}");
    }
    eprintln!("ingest into {backend:?} ({variant:?}): {rate:.0} msgs/s");
    Ok(rate)
}

/// Runs redrive's ingest of `topic` into `store` (a fresh consumer group) until `n` records
/// are stored or quarantined; msgs/s from the start to the n-th record counted.
///
/// The stored records are counted every 100 ms from the maintained aggregate
/// ([`Store::all_count`], what the pages read) when `aggregates` is true; an exact
/// `COUNT(*)` (a scan of `dead_letters`, which on PostgreSQL took a fifth of the database's CPU
/// while it ingested, at 10 polls a second) only for a store whose aggregate triggers were
/// dropped.
pub(crate) async fn ingest_into(
    store: &Store,
    topic: &str,
    n: usize,
    aggregates: bool,
) -> Result<f64> {
    let config = IngestConfig {
        brokers: kit::kafka_brokers(),
        topics: vec![topic.to_string()],
        group_id: kit::unique("bench_ingest"),
        batch_size: env_usize("BENCH_BATCH", 500),
        linger_ms: 50,
        // `BENCH_KAFKA_PROPS=name=value,name=value`: librdkafka properties applied last, as
        // a user's `kafka_properties` are (for comparing fetch sizes in process).
        kafka_properties: std::env::var("BENCH_KAFKA_PROPS")
            .unwrap_or_default()
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect(),
        backpressure: None,
    };
    let shutdown = CancellationToken::new();
    // A pool of its own, as `serve` gives ingest (`INGEST_POOL` connections).
    let ingest_store = store.with_ingest_pool(2).await?;
    let _checkpointer = crate::start_checkpointer(store).await?;
    let t = Instant::now();
    let task = tokio::spawn(ingest::run(
        config,
        ingest_store.clone(),
        Arc::new(IngestStatus::default()),
        shutdown.clone(),
    ));
    let all = Filter::default();
    kit::wait_for("ingest of every record", Duration::from_secs(900), || {
        let store = store.clone();
        let all = all.clone();
        async move {
            let stored = if aggregates {
                store.all_count().await.ok()?
            } else {
                store.count(&all).await.ok()?
            } as usize;
            let quarantined = store.quarantine_count().await.ok()? as usize;
            (stored + quarantined >= n).then_some(())
        }
    })
    .await?;
    let rate = n as f64 / t.elapsed().as_secs_f64();
    shutdown.cancel();
    task.await??;
    Ok(rate)
}
