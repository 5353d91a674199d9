//! The maintained aggregates (migration 0006, `Store::stats` and friends) against the truth
//! counted with plain SQL over `dead_letters`, on SQLite and PostgreSQL, across every kind of
//! write: ingest inserts (with a redelivered duplicate), deletes and restores by ids and by
//! filter (bulk, chunked), replay requests and cancels, relay outcomes (status updates), and
//! hard deletes (as retention's purge will do).

use std::collections::BTreeMap;

use crate::support::sql::exec;
use redrive_core::actions::{Actor, ReplayRequest, Selection};
use redrive_core::model::{NewDeadLetter, Normalized, Status};
use redrive_core::store::{ArrivalScope, MatchCount, Resolution, Store, MINUTE_MS};
use redrive_core::Filter;
use redrive_testkit::fixtures::stored_dead_letter;
use redrive_testkit::{fresh_database, Backend};

/// (dlq_topic, source_topic or '', status) -> (count, key + value bytes), counted from
/// `dead_letters` itself.
pub(crate) type Truth = BTreeMap<(String, String, String), (i64, i64)>;

pub(crate) async fn truth_counts(backend: Backend, url: &str) -> Truth {
    let len = match backend {
        Backend::Sqlite => "length",
        Backend::Postgres => "octet_length",
    };
    let sql = format!(
        "SELECT dlq_topic, COALESCE(source_topic, ''), status, CAST(COUNT(*) AS BIGINT), \
         CAST(SUM(COALESCE({len}(key), 0) + COALESCE({len}(value), 0)) AS BIGINT) \
         FROM dead_letters GROUP BY 1, 2, 3"
    );
    let rows: Vec<(String, String, String, i64, i64)> = match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.expect("sqlite");
            let r = sqlx::query_as(&sql).fetch_all(&pool).await.expect("truth");
            pool.close().await;
            r
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.expect("postgres");
            let r = sqlx::query_as(&sql).fetch_all(&pool).await.expect("truth");
            pool.close().await;
            r
        }
    };
    rows.into_iter()
        .map(|(d, s, st, n, b)| ((d, s, st), (n, b)))
        .collect()
}

/// The same shape from `Store::stats`.
async fn aggregate_counts(store: &Store, now_ms: i64) -> Truth {
    let snap = store.stats(now_ms).await.expect("stats");
    let mut out = Truth::new();
    for p in &snap.pairs {
        for s in Status::ALL {
            let n = p.counts.get(s);
            if n > 0 {
                out.insert(
                    (
                        p.dlq_topic.clone().unwrap_or_default(),
                        p.source_topic.clone().unwrap_or_default(),
                        s.as_str().to_string(),
                    ),
                    (n, p.bytes.get(s)),
                );
            }
        }
    }
    out
}

async fn assert_exact(backend: Backend, url: &str, store: &Store, now_ms: i64, step: &str) {
    let truth = truth_counts(backend, url).await;
    let agg = aggregate_counts(store, now_ms).await;
    assert_eq!(agg, truth, "{backend:?}: counts after {step}");
    // "New in the last hour / 24 h" equal the list `from = window start` (live ones only),
    // in all and per DLQ topic: deletes, restores and purges move them (issue #11).
    let snap = store.stats(now_ms).await.expect("stats");
    let mut rows = vec![(None, snap.totals())];
    rows.extend(
        snap.by_dlq_topic()
            .into_iter()
            .map(|t| (t.dlq_topic.clone(), t)),
    );
    for (dlq, t) in rows {
        for (since, got, what) in [
            (snap.hour_since_ms, t.new_last_hour, "new in 1 h"),
            (snap.day_since_ms, t.new_last_24h, "new in 24 h"),
        ] {
            let f = Filter {
                dlq_topic: dlq.clone(),
                from_ms: Some(since),
                ..Filter::default()
            };
            let listed = store.count(&f).await.expect("count");
            assert_eq!(got, listed, "{backend:?}: {what} of {dlq:?} after {step}");
        }
    }
    // The list's default filter (every status but deleted) per DLQ topic.
    for dlq in ["stats.a.DLT", "stats.b.DLT"] {
        let f = Filter {
            dlq_topic: Some(dlq.into()),
            ..Filter::default()
        };
        let listed = store.count(&f).await.expect("count");
        assert_eq!(
            store
                .count_matching(&f, 1_000)
                .await
                .expect("count_matching"),
            MatchCount::Exact(listed),
            "{backend:?}: count_matching after {step}"
        );
    }
}

/// Dead letters around `now`: two DLQ topics, sources `orders`, `payments` and none, three
/// error classes, one every 20 s over the last ~3 h plus a few two days old.
fn batch(now_ms: i64) -> Vec<NewDeadLetter> {
    let mut out = Vec::new();
    for i in 0..600i64 {
        let dlq = if i % 3 == 0 {
            "stats.b.DLT"
        } else {
            "stats.a.DLT"
        };
        let source = match i % 5 {
            0 => None,
            1 | 2 => Some("payments".to_string()),
            _ => Some("orders".to_string()),
        };
        let class = format!("com.example.Error{}", i % 3);
        let mut d = stored_dead_letter(
            dlq,
            i,
            Normalized {
                source_topic: source,
                error_class: Some(class.clone()),
                error_message: Some("boom".into()),
                ..Normalized::default()
            },
        );
        let at = if i < 10 {
            now_ms - 48 * 3_600_000 - i * 1000
        } else {
            now_ms - (600 - i) * 20_000
        };
        d.dead_lettered_at_ms = at;
        d.record.timestamp_ms = Some(at);
        if i % 7 == 0 {
            d.record.value = None; // tombstones count 0 bytes
        }
        out.push(d);
    }
    out
}

#[tokio::test]
async fn aggregates_stay_exact_across_every_write() {
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.expect("db");
        let store = Store::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis() as i64;
        let rows = batch(now);

        // Ingest in two batches, the second redelivering part of the first.
        assert_eq!(store.insert_batch(&rows[..400]).await.expect("insert"), 400);
        assert_eq!(store.insert_batch(&rows[300..]).await.expect("insert"), 200);
        assert_exact(backend, &url, &store, now, "ingest").await;

        // Arrivals per minute, per hour, and the windows.
        let scope = ArrivalScope::default();
        let series = store
            .arrival_series(
                Resolution::Minute,
                now - 6 * 3_600_000,
                Resolution::Minute.floor(now) + MINUTE_MS,
                &scope,
            )
            .await
            .expect("series");
        let in_window: i64 = rows
            .iter()
            .filter(|d| d.dead_lettered_at_ms >= Resolution::Minute.floor(now - 6 * 3_600_000))
            .count() as i64;
        assert_eq!(series.iter().map(|(_, n)| n).sum::<i64>(), in_window);
        assert_eq!(
            series.len(),
            361,
            "{backend:?}: 6 h of minutes plus the current one"
        );
        let hours = store
            .arrival_series(Resolution::Hour, now - 7 * 24 * 3_600_000, now + 1, &scope)
            .await
            .expect("hours");
        assert_eq!(hours.iter().map(|(_, n)| n).sum::<i64>(), 600);
        let snap = store.stats(now).await.expect("stats");
        let t = snap.totals();
        let since_hour = snap.hour_since_ms;
        let truth_hour = rows
            .iter()
            .filter(|d| d.dead_lettered_at_ms >= since_hour)
            .count() as i64;
        assert_eq!(
            t.new_last_hour, truth_hour,
            "{backend:?}: new in the last hour"
        );
        assert_eq!(t.new_last_24h, 590, "{backend:?}: new in 24 h");
        let f_hour = Filter {
            from_ms: Some(since_hour),
            ..Filter::default()
        };
        assert_eq!(store.count(&f_hour).await.expect("count"), truth_hour);
        assert_eq!(snap.error_groups_total, 3);
        // Every group's first dead letter is two days old.
        assert_eq!(snap.error_groups_new_24h, 0);
        let oldest = snap.by_dlq_topic();
        let a = oldest
            .iter()
            .find(|x| x.dlq_topic.as_deref() == Some("stats.a.DLT"))
            .expect("topic a");
        let truth_oldest = rows
            .iter()
            .filter(|d| d.record.dlq_topic == "stats.a.DLT")
            .map(|d| d.dead_lettered_at_ms)
            .min();
        assert_eq!(a.oldest_ms.oldest_live(), truth_oldest);

        // Deletes and restores, by ids and by filter (bulk).
        let ids: Vec<i64> = store
            .list(&redrive_core::ListQuery {
                filter: Filter::default(),
                limit: 25,
                cursor: None,
            })
            .await
            .expect("list")
            .items
            .iter()
            .map(|s| s.id)
            .collect();
        store
            .delete(&Actor::operator("ops"), &Selection::Ids(ids.clone()), None)
            .await
            .expect("delete ids");
        assert_exact(backend, &url, &store, now, "delete by ids").await;
        let payments = Filter {
            source_topic: Some("payments".into()),
            ..Filter::default()
        };
        store
            .delete(
                &Actor::operator("ops"),
                &Selection::Filter(payments.clone()),
                None,
            )
            .await
            .expect("delete filter");
        assert_exact(backend, &url, &store, now, "delete by filter").await;
        let deleted = Filter {
            status: Some(Status::Deleted),
            dlq_topic: Some("stats.a.DLT".into()),
            ..Filter::default()
        };
        store
            .restore(&Actor::operator("ops"), &Selection::Filter(deleted), None)
            .await
            .expect("restore");
        assert_exact(backend, &url, &store, now, "restore by filter").await;

        // A replay request (replay_pending), a cancel (back), another request, then relay
        // outcomes as the relay writes them.
        let job = store
            .request_replay(
                &Actor::operator("ops"),
                &ReplayRequest {
                    selection: Selection::Filter(Filter {
                        dlq_topic: Some("stats.b.DLT".into()),
                        ..Filter::default()
                    }),
                    target_topic: Some("stats.replayed".into()),
                    rate_per_sec: None,
                    reason: None,
                    options: Default::default(),
                },
            )
            .await
            .expect("replay");
        assert_exact(backend, &url, &store, now, "replay request").await;
        store
            .cancel_job(&Actor::operator("ops"), &job.id)
            .await
            .expect("cancel");
        assert_exact(backend, &url, &store, now, "cancel").await;
        exec(
            backend,
            &url,
            "UPDATE dead_letters SET status = 'replayed' WHERE dlq_topic = 'stats.b.DLT' \
             AND source_topic = 'orders'",
        )
        .await;
        exec(
            backend,
            &url,
            "UPDATE dead_letters SET status = 'replay_failed' WHERE dlq_topic = 'stats.b.DLT' \
             AND source_topic IS NULL",
        )
        .await;
        // An update that changes no status changes nothing.
        exec(
            backend,
            &url,
            "UPDATE dead_letters SET replay_count = replay_count + 1",
        )
        .await;
        assert_exact(backend, &url, &store, now, "relay outcomes").await;

        // Hard deletes (retention's purge).
        for sql in [
            "DELETE FROM outbox WHERE dead_letter_id IN \
             (SELECT id FROM dead_letters WHERE dlq_offset % 4 = 0)",
            "DELETE FROM dead_letter_events WHERE dead_letter_id IN \
             (SELECT id FROM dead_letters WHERE dlq_offset % 4 = 0)",
            "DELETE FROM dead_letters WHERE dlq_offset % 4 = 0",
        ] {
            exec(backend, &url, sql).await;
        }
        assert_exact(backend, &url, &store, now, "hard delete").await;
        let groups = store
            .error_group_stats(&[rows[0].fingerprint.clone()])
            .await
            .expect("groups");
        let truth_group = rows
            .iter()
            .enumerate()
            .filter(|(i, d)| d.fingerprint == rows[0].fingerprint && i % 4 != 0)
            .count() as i64;
        assert_eq!(groups.len(), 1);
        assert_eq!(
            groups[0].stored, truth_group,
            "{backend:?}: group count after purge"
        );
        // Arrivals are a history: a purge does not take them back.
        let hours = store
            .arrival_series(Resolution::Hour, now - 7 * 24 * 3_600_000, now + 1, &scope)
            .await
            .expect("hours");
        assert_eq!(hours.iter().map(|(_, n)| n).sum::<i64>(), 600);

        // An error class is in the group aggregate (migration 0035): exact above the cap.
        let class_only = Filter {
            error_class: Some("com.example.Error1".into()),
            ..Filter::default()
        };
        let exact = store.count(&class_only).await.expect("count");
        assert!(exact > 10, "{backend:?}: enough rows to pass the cap");
        assert_eq!(
            store.count_matching(&class_only, 10).await.expect("count"),
            MatchCount::Exact(exact)
        );
        // Over a time range too, from the aggregate's hours (migration 0036), above the cap.
        let since_1970 = Filter {
            from_ms: Some(0),
            ..class_only.clone()
        };
        assert_eq!(
            store.count_matching(&since_1970, 10).await.expect("count"),
            MatchCount::Exact(exact)
        );
        // A bounded count for a filter the aggregates cannot answer (no label, in a range).
        let by_class = Filter {
            unlabelled: true,
            ..since_1970
        };
        assert_eq!(
            store
                .count_matching(&by_class, 10_000)
                .await
                .expect("bounded"),
            MatchCount::Exact(exact)
        );
        assert_eq!(
            store.count_matching(&by_class, 10).await.expect("bounded"),
            MatchCount::MoreThan(10)
        );

        // Compaction drops only buckets beyond their windows.
        store.compact_stats(now).await.expect("compact");
        assert_exact(backend, &url, &store, now, "compaction").await;
        let series_after = store
            .arrival_series(
                Resolution::Minute,
                now - 6 * 3_600_000,
                Resolution::Minute.floor(now) + MINUTE_MS,
                &scope,
            )
            .await
            .expect("series");
        assert_eq!(
            series_after, series,
            "{backend:?}: recent minutes survive compaction"
        );
        store.close().await;
    }
}
