//! The bench's stored dead letters: [`synthetic`] row `i` (50 error groups, 20 source topics,
//! 30 days of timestamps), and stores filled with them by the database itself ([`fill`]).

use anyhow::Result;
use redrive_core::model::{Convention, Header, NewDeadLetter, Normalized, RawRecord};
use redrive_core::store::Store;
use redrive_testkit::{self as kit, Backend};

use crate::{bulk_load, DAY_MS, GROUPS, SOURCE_TOPICS};

pub(crate) fn synthetic(i: usize, now: i64) -> NewDeadLetter {
    let group = i % GROUPS;
    let class = format!("com.example.errors.Failure{group}Exception");
    let message = if group == 7 {
        format!("Connection reset while calling payments for order {i}")
    } else {
        format!(
            "Failure {group} while processing order {i} after {} ms",
            i % 1000
        )
    };
    let source_topic = format!("service{}.events", i % SOURCE_TOPICS);
    let fingerprint = redrive_core::fingerprint::fingerprint(Some(&class), Some(&message));
    let at = now - (i as i64 * 30 * DAY_MS / 1_000_000) % (30 * DAY_MS);
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: format!("{source_topic}.DLT"),
            dlq_partition: (i % 4) as i32,
            dlq_offset: i as i64,
            timestamp_ms: Some(at),
            key: Some(format!("order-{i}").into_bytes()),
            value: Some(vec![b'v'; 256]),
            headers: vec![Header {
                name: "kafka_dlt-original-topic".into(),
                value: Some(source_topic.clone().into_bytes()),
            }],
        },
        convention: Convention::SpringDlt,
        normalized: Normalized {
            source_topic: Some(source_topic),
            source_partition: Some((i % 4) as i32),
            source_offset: Some(i as i64),
            consumer_group: Some(format!("group{}", i % 5)),
            error_class: Some(class),
            error_message: Some(message),
            retry_count: Some(3),
            ..Normalized::default()
        },
        fingerprint,
        dead_lettered_at_ms: at,
        ingested_at_ms: now,
    }
}

/// A fresh, migrated store of `backend` holding `rows` [`synthetic`] dead letters ([`fill`]).
pub(crate) async fn filled_store(
    backend: Backend,
    rows: usize,
    now: i64,
) -> Result<(Store, kit::TestDatabase)> {
    let (store, dir, _url) = filled_store_at(backend, rows, now).await?;
    Ok((store, dir))
}

/// [`filled_store`], with the store's URL (`sqlite:...` or `postgres://...`).
pub(crate) async fn filled_store_at(
    backend: Backend,
    rows: usize,
    now: i64,
) -> Result<(Store, kit::TestDatabase, String)> {
    let (url, dir) = kit::fresh_database(backend).await?;
    let store = Store::connect(&url).await?;
    store.migrate().await?;
    fill(&url, rows, now).await?;
    Ok((store, dir, url))
}

/// Fills the migrated, empty store at `url` with `rows` [`synthetic`] dead letters, generated
/// by the database itself ([`bulk_load`]): 10M rows in minutes instead of an hour.
pub(crate) async fn fill(url: &str, rows: usize, now: i64) -> Result<()> {
    let took = bulk_load::bulk_load(url, rows, now, bulk_load::Tiers::Unsorted).await?;
    eprintln!(
        "filled {rows} rows in {:.1} s ({:.0} rows/s)",
        took.as_secs_f64(),
        rows as f64 / took.as_secs_f64().max(1e-9)
    );
    Ok(())
}
