//! Error groups and "N match this filter" without a scan (issue 12 item 3, migrations 0027
//! and 0035):
//! the maintained aggregate `dl_stats_groups` against the truth counted with plain SQL over
//! `dead_letters`, on SQLite and PostgreSQL, across every kind of write — ingest (with a
//! redelivered duplicate), deletes and restores by ids and by filter, a replay request and
//! its cancel, relay outcomes, tier changes (the sorter, tier moves), retention's purge and
//! compaction; `Store::error_groups_counted` equal to the groups of the truth for every
//! filter the aggregate answers (consumer group and error class included); the bounded answer, labelled as such, for one it cannot;
//! and on PostgreSQL two concurrent writers over the same keys without an error.

use std::collections::BTreeMap;

use crate::support::sql::{exec, rows};
use redrive_core::actions::{Actor, ReplayRequest, Selection};
use redrive_core::filter::TierFilter;
use redrive_core::model::{NewDeadLetter, Normalized, Status};
use redrive_core::store::{GroupsCounted, MatchCount, Store, DEPENDENT_TABLES};
use redrive_core::Filter;
use redrive_testkit::fixtures::stored_dead_letter;
use redrive_testkit::{fresh_database, Backend};

fn operator() -> Actor {
    Actor::operator("ops")
}

/// One stored dead letter as the groups see it.
#[derive(Debug, Clone, sqlx::FromRow)]
struct Row {
    id: i64,
    fingerprint: String,
    dlq_topic: String,
    source_topic: String,
    consumer_group: String,
    status: String,
    tier: String,
    at: i64,
    error_class: Option<String>,
    error_message: Option<String>,
}

impl Row {
    /// Its key in the aggregates.
    fn key(&self) -> Key {
        (
            self.fingerprint.clone(),
            self.dlq_topic.clone(),
            self.source_topic.clone(),
            self.consumer_group.clone(),
            self.error_class.clone().unwrap_or_default(),
            self.status.clone(),
            self.tier.clone(),
        )
    }
}

const ROWS_SQL: &str = "SELECT id, fingerprint, dlq_topic, COALESCE(source_topic, '') AS \
     source_topic, COALESCE(consumer_group, '') AS consumer_group, status, COALESCE(tier, '') \
     AS tier, dead_lettered_at_ms AS at, error_class, error_message FROM dead_letters";

/// (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier) -> n.
type Key = (String, String, String, String, String, String, String);
type Keys = BTreeMap<Key, i64>;

/// One `dl_stats_groups` row: the key, then `n`.
type AggRow = (String, String, String, String, String, String, String, i64);

const AGG_SQL: &str = "SELECT fingerprint, dlq_topic, source_topic, consumer_group, \
     error_class, status, tier, CAST(n AS BIGINT) FROM dl_stats_groups WHERE n <> 0";

/// (hour_ms, [`Key`]) -> n: `dl_stats_group_hours` (migration 0036).
type HourKeys = BTreeMap<(i64, Key), i64>;

type HourRow = (
    i64,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
);

const HOURS_SQL: &str = "SELECT CAST(hour_ms AS BIGINT), fingerprint, dlq_topic, \
     source_topic, consumer_group, error_class, status, tier, CAST(n AS BIGINT) \
     FROM dl_stats_group_hours WHERE n <> 0";

async fn read_hours(backend: Backend, url: &str) -> HourKeys {
    rows::<HourRow>(backend, url, HOURS_SQL)
        .await
        .into_iter()
        .map(|(h, f, d, s, g, c, st, t, n)| ((h, (f, d, s, g, c, st, t)), n))
        .collect()
}

const HOUR_MS: i64 = 3_600_000;

/// Time ranges `[from, to)` around `now` (the batch's last dead letter): whole hours, partial
/// hours at both ends, open at either end, within one hour, and after every dead letter.
fn ranges(now: i64) -> Vec<(&'static str, Option<i64>, Option<i64>)> {
    let hour = (now / HOUR_MS) * HOUR_MS;
    vec![
        (
            "whole hours",
            Some(hour - 4 * HOUR_MS),
            Some(hour - HOUR_MS),
        ),
        (
            "partial ends",
            Some(now - 5 * HOUR_MS - 17 * 60_000),
            Some(now - HOUR_MS + 3 * 60_000),
        ),
        ("since", Some(now - 150 * 60_000), None),
        ("until", None, Some(now - 200 * 60_000)),
        (
            "within an hour",
            Some(hour - 2 * HOUR_MS + 60_000),
            Some(hour - 2 * HOUR_MS + 1_800_000),
        ),
        (
            // 55 minutes: counted as the hour less the 5 minutes around them.
            "most of an hour",
            Some(hour - 2 * HOUR_MS + 2 * 60_000),
            Some(hour - HOUR_MS - 3 * 60_000),
        ),
        (
            "across one boundary",
            Some(hour - 2 * HOUR_MS - 600_000),
            Some(hour - 2 * HOUR_MS + 600_000),
        ),
        ("after them all", Some(now + 1), None),
    ]
}

async fn read(backend: Backend, url: &str) -> (Vec<Row>, Keys) {
    let stored: Vec<Row> = rows(backend, url, ROWS_SQL).await;
    let agg = rows::<AggRow>(backend, url, AGG_SQL)
        .await
        .into_iter()
        .map(|(f, d, s, g, c, st, t, n)| ((f, d, s, g, c, st, t), n))
        .collect();
    (stored, agg)
}

/// Does `f` (only the dimensions the aggregate keeps) select `r`?
fn matches(f: &Filter, r: &Row) -> bool {
    let status_ok = match f.status {
        Some(s) => r.status == s.as_str(),
        None => r.status != "deleted",
    };
    let tier_ok = match f.tier.map(|t| t.tier()) {
        Some(Some(t)) => r.tier == t.as_str(),
        Some(None) => r.tier.is_empty(),
        None => r.tier != "archive",
    };
    status_ok
        && tier_ok
        && f.fingerprint.as_ref().is_none_or(|v| *v == r.fingerprint)
        && f.dlq_topic.as_ref().is_none_or(|v| *v == r.dlq_topic)
        && f.source_topic.as_ref().is_none_or(|v| *v == r.source_topic)
        && f.consumer_group
            .as_ref()
            .is_none_or(|v| *v == r.consumer_group)
        && f.error_class
            .as_ref()
            .is_none_or(|v| Some(v) == r.error_class.as_ref())
        && f.dlq_topic_in
            .as_ref()
            .is_none_or(|ts| ts.contains(&r.dlq_topic))
}

/// (fingerprint, count, first seen, last seen, example class, example message), in the
/// groups' order, computed from the rows.
type Shown = Vec<(String, i64, i64, i64, Option<String>, Option<String>)>;

fn truth_groups<'a>(rows: impl Iterator<Item = &'a Row>) -> Shown {
    let mut by: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        by.entry(r.fingerprint.as_str()).or_default().push(r);
    }
    let mut out: Shown = by
        .into_iter()
        .map(|(fp, rs)| {
            let newest = rs.iter().max_by_key(|r| (r.at, r.id)).expect("a row");
            (
                fp.to_string(),
                rs.len() as i64,
                rs.iter().map(|r| r.at).min().expect("a row"),
                newest.at,
                newest.error_class.clone(),
                newest.error_message.clone(),
            )
        })
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(b.3.cmp(&a.3)).then(a.0.cmp(&b.0)));
    out
}

fn filters() -> Vec<(&'static str, Filter)> {
    let fp = redrive_core::fingerprint::fingerprint(Some("com.example.Error1"), Some("boom"));
    vec![
        ("default", Filter::default()),
        (
            "dlq topic",
            Filter {
                dlq_topic: Some("groups.a.DLT".into()),
                ..Filter::default()
            },
        ),
        (
            "source topic",
            Filter {
                source_topic: Some("payments".into()),
                ..Filter::default()
            },
        ),
        (
            "deleted",
            Filter {
                status: Some(Status::Deleted),
                ..Filter::default()
            },
        ),
        (
            "replayed in b",
            Filter {
                status: Some(Status::Replayed),
                dlq_topic: Some("groups.b.DLT".into()),
                ..Filter::default()
            },
        ),
        (
            "archive tier",
            Filter {
                tier: Some(TierFilter::Archive),
                ..Filter::default()
            },
        ),
        (
            "unsorted",
            Filter {
                tier: Some(TierFilter::Unsorted),
                ..Filter::default()
            },
        ),
        (
            "one group",
            Filter {
                fingerprint: Some(fp),
                ..Filter::default()
            },
        ),
        (
            "scope",
            Filter {
                dlq_topic_in: Some(vec!["groups.b.DLT".into()]),
                ..Filter::default()
            },
        ),
        (
            "empty scope",
            Filter {
                dlq_topic_in: Some(vec![]),
                ..Filter::default()
            },
        ),
        (
            "consumer group",
            Filter {
                consumer_group: Some("billing".into()),
                ..Filter::default()
            },
        ),
        (
            "error class",
            Filter {
                error_class: Some("com.example.Error0".into()),
                ..Filter::default()
            },
        ),
        (
            "class and group in a topic",
            Filter {
                error_class: Some("com.example.Error1".into()),
                consumer_group: Some("ledger".into()),
                dlq_topic: Some("groups.a.DLT".into()),
                ..Filter::default()
            },
        ),
        (
            "a group no dead letter has",
            Filter {
                consumer_group: Some("nobody".into()),
                ..Filter::default()
            },
        ),
    ]
}

async fn assert_exact(backend: Backend, url: &str, store: &Store, step: &str) {
    let (rows, agg) = read(backend, url).await;
    let mut truth = Keys::new();
    let mut hours_truth = HourKeys::new();
    for r in &rows {
        *truth.entry(r.key()).or_default() += 1;
        *hours_truth
            .entry(((r.at / HOUR_MS) * HOUR_MS, r.key()))
            .or_default() += 1;
    }
    assert_eq!(agg, truth, "{backend:?}: dl_stats_groups after {step}");
    assert_eq!(
        read_hours(backend, url).await,
        hours_truth,
        "{backend:?}: dl_stats_group_hours after {step}"
    );
    let now = rows.iter().map(|r| r.at).max().unwrap_or(0);
    let mut cases: Vec<(String, Filter)> = filters()
        .into_iter()
        .map(|(n, f)| (n.to_string(), f))
        .collect();
    for (name, f) in filters() {
        for (range, from_ms, to_ms) in ranges(now) {
            cases.push((
                format!("{name}, {range}"),
                Filter {
                    from_ms,
                    to_ms,
                    ..f.clone()
                },
            ));
        }
    }
    for (name, f) in cases {
        let in_range =
            |r: &&Row| f.from_ms.is_none_or(|t| r.at >= t) && f.to_ms.is_none_or(|t| r.at < t);
        // A bound of 61 for the scan: a range's partial end (under an hour, one dead letter
        // a minute) is under it, so the hours answer every range here; the scan would say
        // "among the newest 61" for a range matching more.
        let listing = store
            .error_groups_scanning(&f, 100, 61)
            .await
            .expect("error groups");
        assert_eq!(listing.counted, GroupsCounted::Exact, "{backend:?}: {name}");
        let got: Shown = listing
            .groups
            .iter()
            .map(|g| {
                (
                    g.fingerprint.clone(),
                    g.count,
                    g.first_seen_ms,
                    g.last_seen_ms,
                    g.error_class.clone(),
                    g.example_message.clone(),
                )
            })
            .collect();
        let want = truth_groups(rows.iter().filter(|r| matches(&f, r)).filter(in_range));
        assert_eq!(got, want, "{backend:?}: groups `{name}` after {step}");
        // The cut at `limit` keeps the largest.
        let top = store.error_groups(&f, 2).await.expect("top 2");
        assert_eq!(
            top.iter().map(|g| g.count).collect::<Vec<_>>(),
            want.iter().take(2).map(|g| g.1).collect::<Vec<_>>(),
            "{backend:?}: top 2 of `{name}` after {step}"
        );
        let n = want.iter().map(|g| g.1).sum::<i64>();
        assert_eq!(
            store.count_matching(&f, 5).await.expect("count"),
            MatchCount::Exact(n),
            "{backend:?}: count of `{name}` after {step} (exact even above the cap)"
        );
        // The plain count agrees (the store's own definition of the filter).
        assert_eq!(store.count(&f).await.expect("count"), n, "{name}");
    }
    assert_eq!(
        store.all_count().await.expect("all"),
        rows.iter()
            .filter(|r| matches(&Filter::default(), r))
            .count() as i64,
        "{backend:?}: all_count after {step}"
    );
}

/// 400 dead letters: two DLQ topics, sources `orders`, `payments` and none, consumer groups
/// `billing`, `ledger` and none, four error groups of different sizes (the smallest without
/// an error class), one a minute (6 h 40 min: whole hours and partial ones).
fn batch(now_ms: i64) -> Vec<NewDeadLetter> {
    (0..400i64)
        .map(|i| {
            let dlq = if i % 3 == 0 {
                "groups.b.DLT"
            } else {
                "groups.a.DLT"
            };
            let source = match i % 5 {
                0 => None,
                1 | 2 => Some("payments".to_string()),
                _ => Some("orders".to_string()),
            };
            // Sizes 40 %, 30 %, 20 %, 10 %.
            let g = match i % 10 {
                0..=3 => 0,
                4..=6 => 1,
                7 | 8 => 2,
                _ => 3,
            };
            let consumer_group = match i % 7 {
                0 => None,
                1..=3 => Some("billing".to_string()),
                _ => Some("ledger".to_string()),
            };
            let mut d = stored_dead_letter(
                dlq,
                i,
                Normalized {
                    source_topic: source,
                    consumer_group,
                    error_class: (g != 3).then(|| format!("com.example.Error{g}")),
                    error_message: Some(if g == 3 {
                        format!("boom {i}")
                    } else {
                        "boom".into()
                    }),
                    ..Normalized::default()
                },
            );
            // Same fingerprint for group 3 whatever the number (it is normalised away).
            let at = now_ms - (400 - i) * 60_000;
            d.dead_lettered_at_ms = at;
            d.record.timestamp_ms = Some(at);
            d
        })
        .collect()
}

/// Retention's purge of the dead letters `condition` selects: their dependent rows, then
/// them.
async fn purge(backend: Backend, url: &str, condition: &str) {
    for (table, column) in DEPENDENT_TABLES {
        exec(
            backend,
            url,
            &format!(
                "DELETE FROM {table} WHERE {column} IN \
                 (SELECT id FROM dead_letters WHERE {condition})"
            ),
        )
        .await;
    }
    exec(
        backend,
        url,
        &format!("DELETE FROM dead_letters WHERE {condition}"),
    )
    .await;
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

#[tokio::test]
async fn group_aggregate_equals_the_group_by_truth_across_every_write() {
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.expect("db");
        let store = Store::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        let now = now_ms();
        let rows = batch(now);

        // Ingest in two batches, the second redelivering part of the first.
        assert_eq!(store.insert_batch(&rows[..250]).await.expect("insert"), 250);
        assert_eq!(store.insert_batch(&rows[200..]).await.expect("insert"), 150);
        assert_exact(backend, &url, &store, "ingest").await;

        // Deletes and restores, by ids and by filter (bulk).
        let ids: Vec<i64> = store
            .list(&redrive_core::ListQuery {
                filter: Filter::default(),
                limit: 30,
                cursor: None,
            })
            .await
            .expect("list")
            .items
            .iter()
            .map(|s| s.id)
            .collect();
        store
            .delete(&operator(), &Selection::Ids(ids), None)
            .await
            .expect("delete ids");
        assert_exact(backend, &url, &store, "delete by ids").await;
        let payments = Filter {
            source_topic: Some("payments".into()),
            ..Filter::default()
        };
        store
            .delete(&operator(), &Selection::Filter(payments), None)
            .await
            .expect("delete filter");
        assert_exact(backend, &url, &store, "delete by filter").await;
        store
            .restore(
                &operator(),
                &Selection::Filter(Filter {
                    status: Some(Status::Deleted),
                    dlq_topic: Some("groups.a.DLT".into()),
                    ..Filter::default()
                }),
                None,
            )
            .await
            .expect("restore");
        assert_exact(backend, &url, &store, "restore by filter").await;

        // A replay request (replay_pending), its cancel, then relay outcomes as the relay
        // writes them.
        let job = store
            .request_replay(
                &operator(),
                &ReplayRequest {
                    selection: Selection::Filter(Filter {
                        dlq_topic: Some("groups.b.DLT".into()),
                        ..Filter::default()
                    }),
                    target_topic: Some("groups.replayed".into()),
                    rate_per_sec: None,
                    reason: None,
                    options: Default::default(),
                },
            )
            .await
            .expect("replay");
        assert_exact(backend, &url, &store, "replay request").await;
        store
            .cancel_job(&operator(), &job.id)
            .await
            .expect("cancel");
        assert_exact(backend, &url, &store, "cancel").await;
        for sql in [
            "UPDATE dead_letters SET status = 'replayed' WHERE dlq_topic = 'groups.b.DLT' \
             AND source_topic = 'orders'",
            "UPDATE dead_letters SET status = 'replay_failed' WHERE dlq_topic = 'groups.b.DLT' \
             AND source_topic IS NULL",
            "UPDATE dead_letters SET status = 're_failed' WHERE status = 'replayed' \
             AND dlq_offset % 4 = 0",
            // A consumer group and an error class changed under a row (no write of redrive's
            // does; the triggers keep the aggregate exact anyway).
            "UPDATE dead_letters SET consumer_group = 'ledger' WHERE dlq_offset % 11 = 1",
            "UPDATE dead_letters SET error_class = NULL WHERE dlq_offset % 13 = 2",
            // An update that changes no dimension changes nothing.
            "UPDATE dead_letters SET replay_count = replay_count + 1",
        ] {
            exec(backend, &url, sql).await;
        }
        assert_exact(backend, &url, &store, "relay outcomes").await;

        // Tiers: the sorter sorts, a tier move archives (out of the default view).
        for sql in [
            "UPDATE dead_letters SET tier = 'transient' WHERE dlq_offset % 2 = 0",
            "UPDATE dead_letters SET tier = 'manual' WHERE dlq_offset % 2 = 1 \
             AND dlq_offset % 3 <> 0",
            "UPDATE dead_letters SET tier = 'archive' WHERE tier = 'transient' \
             AND dlq_offset % 5 = 0",
        ] {
            exec(backend, &url, sql).await;
        }
        assert_exact(backend, &url, &store, "tier changes").await;

        // Retention's purge: dependent rows, then the dead letters.
        purge(backend, &url, "dlq_offset % 7 = 0").await;
        assert_exact(backend, &url, &store, "purge").await;

        // Compaction drops keys at zero only (a whole key purged first).
        purge(
            backend,
            &url,
            "dlq_topic = 'groups.b.DLT' AND status = 'replayed'",
        )
        .await;
        store.compact_stats(now).await.expect("compact");
        assert_exact(backend, &url, &store, "compaction").await;

        // A time range whose partial end holds more rows than the bound on both sides of
        // its cut: left to the scan of the newest matches, and said so.
        let (all, _) = read(backend, &url).await;
        let since = now - 400 * 60_000;
        let fp0 = redrive_core::fingerprint::fingerprint(Some("com.example.Error0"), Some("boom"));
        let fp0_filter = Filter {
            fingerprint: Some(fp0.clone()),
            ..Filter::default()
        };
        // The group's rows in `[from, to)`.
        let fp0_in = |from: i64, to: i64| {
            all.iter()
                .filter(|r| matches(&fp0_filter, r) && r.at >= from && r.at < to)
                .count() as i64
        };
        let fp0_since = |from: i64| Filter {
            from_ms: Some(from),
            ..fp0_filter.clone()
        };
        let hour_ago = (now / HOUR_MS) * HOUR_MS - 3 * HOUR_MS;
        let next_hour = hour_ago + HOUR_MS;
        // 31 minutes past an hour: its end (29 minutes) and the rest of its hour (31) each
        // hold more of the group's rows than the bound.
        let cut = hour_ago + 31 * 60_000;
        let (inside, outside) = (fp0_in(cut, next_hour), fp0_in(hour_ago, cut));
        let bound = inside.min(outside) - 1;
        assert!(
            bound >= 1,
            "{backend:?}: rows on both sides ({inside}, {outside})"
        );
        let bounded = store
            .error_groups_scanning(&fp0_since(cut), 10, bound)
            .await
            .expect("bounded groups");
        assert_eq!(
            bounded.counted,
            GroupsCounted::AmongNewest(bound),
            "{backend:?}: an end over the bound on both sides is not answered from the hours"
        );
        // 2 minutes past an hour: its end (58 minutes) holds more than the bound, the rest of
        // its hour (2 minutes) fewer: counted as the hour less those.
        let cut = hour_ago + 2 * 60_000;
        let (inside, outside) = (fp0_in(cut, next_hour), fp0_in(hour_ago, cut));
        assert!(outside < inside - 1, "{backend:?}: ({inside}, {outside})");
        let n = fp0_in(cut, i64::MAX);
        let exact = store
            .error_groups_scanning(&fp0_since(cut), 10, inside - 1)
            .await
            .expect("groups");
        assert_eq!(
            exact.counted,
            GroupsCounted::Exact,
            "{backend:?}: the hour less its first 2 minutes"
        );
        assert_eq!(exact.groups.len(), 1);
        assert_eq!(exact.groups[0].count, n, "{backend:?}: exact");

        // A filter no aggregate keeps (unlabelled, in a time range): counted by a scan, exact
        // while it matches at most the bound, labelled "among the newest N" above it.
        let in_range = Filter {
            fingerprint: Some(fp0),
            from_ms: Some(since),
            unlabelled: true,
            ..Filter::default()
        };
        let matching: Vec<&Row> = all
            .iter()
            .filter(|r| matches(&in_range, r) && r.at >= since)
            .collect();
        assert!(matching.len() > 20, "{backend:?}: enough rows to bound");
        let whole = store
            .error_groups_counted(&in_range, 10)
            .await
            .expect("groups");
        assert_eq!(whole.counted, GroupsCounted::Exact);
        assert_eq!(whole.groups.len(), 1);
        assert_eq!(whole.groups[0].count, matching.len() as i64);
        let bounded = store
            .error_groups_scanning(&in_range, 10, 20)
            .await
            .expect("bounded groups");
        assert_eq!(
            bounded.counted,
            GroupsCounted::AmongNewest(20),
            "{backend:?}: the bounded answer says so"
        );
        assert_eq!(bounded.groups[0].count, 20, "{backend:?}: the newest 20");
        let mut newest: Vec<&Row> = matching.clone();
        newest.sort_by_key(|r| std::cmp::Reverse((r.at, r.id)));
        assert_eq!(bounded.groups[0].first_seen_ms, newest[19].at);
        assert_eq!(bounded.groups[0].last_seen_ms, newest[0].at);
        // Exactly the bound is still every match.
        let exactly = store
            .error_groups_scanning(&in_range, 10, matching.len() as i64)
            .await
            .expect("groups");
        assert_eq!(exactly.counted, GroupsCounted::Exact);
        // "N match this filter" for it is bounded too.
        assert_eq!(
            store.count_matching(&in_range, 5).await.expect("count"),
            MatchCount::MoreThan(5)
        );
        store.close().await;
    }
}

/// PostgreSQL: ingest and status changes from two writers at once over the same aggregate
/// keys (the statement triggers take them in sorted order) finish without an error, and the
/// aggregate is exact after.
#[tokio::test]
async fn postgres_concurrent_writers_keep_the_group_aggregate_exact() {
    let backend = Backend::Postgres;
    let (url, _dir) = fresh_database(backend).await.expect("db");
    let store = Store::connect(&url).await.expect("connect");
    store.migrate().await.expect("migrate");
    let now = now_ms();
    let rows = batch(now);
    // Two writers insert the same keys in opposite orders, in batches, while a third moves
    // statuses back and forth over all of them.
    let (a, b): (Vec<_>, Vec<_>) = rows.into_iter().partition(|d| d.record.dlq_offset % 2 == 0);
    let mut b = b;
    b.reverse();
    let ingest = |part: Vec<NewDeadLetter>| {
        let store = store.clone();
        tokio::spawn(async move {
            for chunk in part.chunks(10) {
                store
                    .insert_batch(chunk)
                    .await
                    .expect("insert under contention");
            }
        })
    };
    let mover = {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..20 {
                let f = Filter {
                    dlq_topic: Some(
                        if i % 2 == 0 {
                            "groups.a.DLT"
                        } else {
                            "groups.b.DLT"
                        }
                        .into(),
                    ),
                    ..Filter::default()
                };
                store
                    .delete(&operator(), &Selection::Filter(f.clone()), None)
                    .await
                    .expect("delete under contention");
                store
                    .restore(
                        &operator(),
                        &Selection::Filter(Filter {
                            status: Some(Status::Deleted),
                            ..f
                        }),
                        None,
                    )
                    .await
                    .expect("restore under contention");
            }
        })
    };
    let (x, y, z) = tokio::join!(ingest(a), ingest(b), mover);
    x.expect("writer a");
    y.expect("writer b");
    z.expect("mover");
    assert_exact(backend, &url, &store, "concurrent writers").await;
    store.close().await;
}
