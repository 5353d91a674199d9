//! The store against real databases: every test runs on SQLite and on PostgreSQL
//! (`Backend::ALL`), through the public `Store` API only, except where a test needs a state
//! no public method sets yet (statuses): that is written with plain SQL.

use std::collections::{BTreeSet, HashMap};

use crate::support::sql::exec as exec_sql;
use redrive_core::model::{Convention, Header, NewDeadLetter, Normalized, RawRecord, Status};
use redrive_core::store::{Store, StoreError};
use redrive_core::{Cursor, Filter, ListQuery};
use redrive_testkit::{fresh_database, Backend};

/// A fresh migrated store plus its URL (for the few direct SQL writes) and its temp dir.
async fn store_with_url(backend: Backend) -> (Store, String, redrive_testkit::TestDatabase) {
    let (url, dir) = fresh_database(backend).await.expect("a fresh database");
    let store = Store::connect(&url).await.expect("connect");
    store.migrate().await.expect("migrate");
    // Migrating twice is a no-op.
    store.migrate().await.expect("migrate again");
    (store, url, dir)
}

/// A plain dead letter at a DLQ position and time.
fn dl(topic: &str, partition: i32, offset: i64, at_ms: i64) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: topic.to_string(),
            dlq_partition: partition,
            dlq_offset: offset,
            timestamp_ms: Some(at_ms),
            key: Some(format!("k{offset}").into_bytes()),
            value: Some(format!("v{offset}").into_bytes()),
            headers: vec![],
        },
        convention: Convention::Unknown,
        normalized: Normalized::default(),
        fingerprint: "0000000000000000".to_string(),
        dead_lettered_at_ms: at_ms,
        ingested_at_ms: at_ms + 5,
    }
}

/// Every page of `filter`, walked with `limit`; checks each page's size and cursor.
async fn walk(store: &Store, filter: &Filter, limit: u32) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut cursor: Option<Cursor> = None;
    for _ in 0..10_000 {
        let page = store
            .list(&ListQuery {
                filter: filter.clone(),
                limit,
                cursor,
            })
            .await
            .expect("list");
        assert!(page.items.len() <= limit as usize);
        out.extend(page.items.iter().map(|s| (s.dead_lettered_at_ms, s.id)));
        match page.next_cursor {
            Some(c) => {
                assert_eq!(page.items.len(), limit as usize, "a short page has no next");
                cursor = Some(Cursor::decode(&c).expect("our own cursor"));
            }
            None => return out,
        }
    }
    panic!("pagination does not end");
}

fn assert_newest_first(rows: &[(i64, i64)]) {
    for w in rows.windows(2) {
        assert!(w[0] > w[1], "not strictly (at, id) descending: {w:?}");
    }
}

#[tokio::test]
async fn round_trip_is_byte_exact() {
    for backend in Backend::ALL {
        let (store, _url, _dir) = store_with_url(backend).await;
        assert_eq!(
            store.backend(),
            match backend {
                Backend::Sqlite => "sqlite",
                Backend::Postgres => "postgres",
            }
        );
        store.ping().await.expect("ping");

        let mut awkward = dl("orders.DLT", 2, 41, 1_764_568_800_123);
        awkward.record.key = None;
        awkward.record.value = None; // tombstone
        awkward.record.timestamp_ms = None;
        awkward.record.headers = vec![
            Header {
                name: "null-valued".into(),
                value: None,
            },
            Header {
                name: "empty".into(),
                value: Some(vec![]),
            },
            Header {
                name: "kafka_dlt-original-topic".into(),
                value: Some(b"orders".to_vec()),
            },
            Header {
                name: "kafka_dlt-original-topic".into(),
                value: Some(b"orders-retry-0".to_vec()),
            },
            Header {
                name: "not-utf8".into(),
                value: Some(vec![0xc3, 0x28]),
            },
            Header {
                name: "kafka_dlt-original-topic".into(),
                value: Some(b"orders".to_vec()),
            },
        ];
        awkward.convention = Convention::SpringDlt;
        awkward.fingerprint = "0123456789abcdef".into();
        awkward.normalized = Normalized {
            source_topic: Some("orders".into()),
            source_partition: Some(3),
            source_offset: Some(9_000_000_000),
            source_timestamp_ms: Some(1_764_568_700_000),
            consumer_group: Some("billing".into()),
            error_class: Some("java.lang.IllegalStateException".into()),
            error_message: Some("Ünïcode <script>alert(1)</script> 'quoted'".into()),
            stack_trace: Some("\tat com.acme.X(X.java:1)\n".repeat(2_600)), // ~60 KiB
            retry_count: Some(3),
            message_id: Some("m-1".into()),
            failed_at_ms: Some(1_764_568_800_123),
            decode_warnings: vec!["kafka_dlt-original-offset: 3 bytes, expected 8".into()],
        };
        assert!(awkward.normalized.stack_trace.as_ref().unwrap().len() >= 60 * 1024);

        let mut big = dl("orders.DLT", 2, 42, 1_764_568_800_124);
        big.record.key = Some(vec![]);
        big.record.value = Some((0..1024 * 1024).map(|i| (i % 251) as u8).collect()); // 1 MiB

        let batch = vec![awkward.clone(), big.clone()];
        assert_eq!(store.insert_batch(&batch).await.expect("insert"), 2);

        let page = store.list(&ListQuery::default()).await.expect("list");
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.next_cursor, None);
        let by_offset: HashMap<i64, i64> =
            page.items.iter().map(|s| (s.dlq_offset, s.id)).collect();

        for original in &batch {
            let id = by_offset[&original.record.dlq_offset];
            let got = store.get(id).await.expect("get").expect("stored");
            assert_eq!(got.record, original.record, "{backend:?}: raw record");
            assert_eq!(
                got.normalized, original.normalized,
                "{backend:?}: normalized"
            );
            assert_eq!(got.summary.id, id);
            assert_eq!(got.summary.status, Status::New);
            assert_eq!(got.summary.convention, original.convention);
            assert_eq!(got.summary.fingerprint, original.fingerprint);
            assert_eq!(
                got.summary.dead_lettered_at_ms,
                original.dead_lettered_at_ms
            );
            assert_eq!(
                got.summary.malformed,
                !original.normalized.decode_warnings.is_empty()
            );
            assert_eq!(got.ingested_at_ms, original.ingested_at_ms);
            assert_eq!(got.replay_count, 0);
            let listed = page.items.iter().find(|s| s.id == id).unwrap();
            assert_eq!(listed, &got.summary, "list row = get's summary");
        }
        assert!(store.get(i64::MAX).await.expect("get").is_none());
    }
}

#[tokio::test]
async fn nul_in_text_fields_does_not_stall_ingest() {
    for backend in Backend::ALL {
        let (store, _url, _dir) = store_with_url(backend).await;
        let mut d = dl("t", 0, 1, 1000);
        d.normalized.error_message = Some("bad\0byte".into());
        d.record.headers = vec![Header {
            name: "error\0name".into(),
            value: Some(vec![0, 0, 0]),
        }];
        assert_eq!(store.insert_batch(&[d.clone()]).await.expect("insert"), 1);
        let id = store.list(&ListQuery::default()).await.unwrap().items[0].id;
        let got = store.get(id).await.unwrap().unwrap();
        // The raw headers keep every byte; the derived text shows U+FFFD.
        assert_eq!(got.record.headers, d.record.headers);
        assert_eq!(
            got.normalized.error_message.as_deref(),
            Some("bad\u{FFFD}byte")
        );
    }
}

#[tokio::test]
async fn insert_is_idempotent() {
    for backend in Backend::ALL {
        let (store, _url, _dir) = store_with_url(backend).await;
        let batch: Vec<NewDeadLetter> = (0..10).map(|i| dl("orders.DLT", 0, i, 1000 + i)).collect();
        assert_eq!(store.insert_batch(&batch).await.unwrap(), 10);
        assert_eq!(store.insert_batch(&batch).await.unwrap(), 0);
        assert_eq!(store.count(&Filter::default()).await.unwrap(), 10);
        assert_eq!(store.insert_batch(&[]).await.unwrap(), 0);

        // Overlap with the stored rows and a duplicate inside the batch itself: only the
        // positions never seen count. Same offset on another partition or topic is new.
        let mut mixed = vec![dl("orders.DLT", 0, 9, 1), dl("orders.DLT", 0, 10, 1)];
        mixed.push(dl("orders.DLT", 0, 10, 2));
        mixed.push(dl("orders.DLT", 1, 9, 1));
        mixed.push(dl("payments.DLT", 0, 9, 1));
        assert_eq!(store.insert_batch(&mixed).await.unwrap(), 3);
        assert_eq!(store.count(&Filter::default()).await.unwrap(), 13);

        // More rows than one statement may bind (SQLite: 32766 / 23 columns): chunked, in one
        // transaction, counted right.
        let large: Vec<NewDeadLetter> = (0..3_000)
            .map(|i| dl("big.DLT", (i % 3) as i32, i, 5_000 + i))
            .collect();
        assert_eq!(store.insert_batch(&large).await.unwrap(), 3_000);
        assert_eq!(store.insert_batch(&large).await.unwrap(), 0);
        assert_eq!(store.count(&Filter::default()).await.unwrap(), 3_013);
    }
}

#[tokio::test]
async fn keyset_pagination_visits_every_row_once() {
    for backend in Backend::ALL {
        let (store, _url, _dir) = store_with_url(backend).await;
        // Ties: four rows share each millisecond, and are inserted in an order unrelated to it.
        let batch: Vec<NewDeadLetter> = (0..23)
            .map(|i| dl("t", 0, i, 10_000 + ((i * 7) % 23) / 4))
            .collect();
        assert_eq!(store.insert_batch(&batch).await.unwrap(), 23);
        let all = walk(&store, &Filter::default(), 50).await;
        assert_eq!(all.len(), 23);
        assert_newest_first(&all);
        for limit in [1, 4, 5, 23, 24] {
            let rows = walk(&store, &Filter::default(), limit).await;
            assert_eq!(rows, all, "{backend:?} limit {limit}");
        }
        // Exactly a multiple of the page size: the last full page has no next cursor.
        let rows = walk(&store, &Filter::default(), 23).await;
        assert_eq!(rows.len(), 23);

        // Rows arriving while someone pages: newer ones do not shift the pages being read.
        let first = store
            .list(&ListQuery {
                filter: Filter::default(),
                limit: 10,
                cursor: None,
            })
            .await
            .unwrap();
        store
            .insert_batch(&[dl("t", 0, 100, 99_999)])
            .await
            .unwrap();
        let second = store
            .list(&ListQuery {
                filter: Filter::default(),
                limit: 10,
                cursor: Some(Cursor::decode(first.next_cursor.as_deref().unwrap()).unwrap()),
            })
            .await
            .unwrap();
        let got: Vec<(i64, i64)> = second
            .items
            .iter()
            .map(|s| (s.dead_lettered_at_ms, s.id))
            .collect();
        assert_eq!(got, all[10..20].to_vec());
    }
}

/// The filter dataset: 60 dead letters whose fields cycle at different periods, so that every
/// filter and combination picks a different, non-trivial subset. Offsets are 0..60.
fn filter_dataset() -> Vec<NewDeadLetter> {
    let messages = [
        Some("Connection RESET by peer"),
        Some("disk 100% full"),
        Some("disk 1000 full"),
        Some("field user_id missing"),
        Some("field userXid missing"),
        Some("back\\slash! done"),
        None,
    ];
    (0..60i64)
        .map(|i| {
            let mut d = dl(
                ["orders.DLT", "payments.DLT"][(i % 2) as usize],
                (i % 3) as i32,
                i,
                1_000_000 + (i / 3) * 1_000,
            );
            d.fingerprint = format!("{:016x}", i % 4);
            d.normalized.source_topic =
                (i % 7 != 0).then(|| ["orders", "payments", "users"][(i % 3) as usize].into());
            d.normalized.consumer_group =
                (i % 5 != 0).then(|| ["g1", "g2"][(i % 2) as usize].into());
            d.normalized.error_class = [
                Some("java.lang.IllegalStateException"),
                Some("com.acme.Timeout"),
                None,
            ][(i % 3) as usize]
                .map(String::from);
            d.normalized.error_message = messages[(i % 7) as usize].map(String::from);
            d
        })
        .collect()
}

/// Status given to dataset row `i` (by offset) with plain SQL in the test.
fn dataset_status(i: i64) -> Status {
    match i % 6 {
        0 => Status::Deleted,
        1 => Status::Replayed,
        2 => Status::ReplayFailed,
        _ => Status::New,
    }
}

/// The reference meaning of a filter, written independently of the SQL.
fn reference_match(f: &Filter, d: &NewDeadLetter, status: Status) -> bool {
    let eq = |want: &Option<String>, have: &Option<String>| want.is_none() || want == have;
    let n = &d.normalized;
    (match f.status {
        None => status != Status::Deleted,
        Some(s) => s == status,
    }) && (f.fingerprint.is_none() || f.fingerprint.as_deref() == Some(d.fingerprint.as_str()))
        && eq(&f.error_class, &n.error_class)
        && eq(&f.source_topic, &n.source_topic)
        && (f.dlq_topic.is_none() || f.dlq_topic.as_deref() == Some(d.record.dlq_topic.as_str()))
        && eq(&f.consumer_group, &n.consumer_group)
        && f.q.as_ref().is_none_or(|q| {
            n.error_message
                .as_ref()
                .is_some_and(|m| m.to_lowercase().contains(&q.to_lowercase()))
        })
        && f.from_ms.is_none_or(|t| d.dead_lettered_at_ms >= t)
        && f.to_ms.is_none_or(|t| d.dead_lettered_at_ms < t)
}

#[tokio::test]
async fn every_filter_field_matches_its_definition() {
    for backend in Backend::ALL {
        let (store, url, _dir) = store_with_url(backend).await;
        let data = filter_dataset();
        assert_eq!(store.insert_batch(&data).await.unwrap(), 60);
        for s in [Status::Deleted, Status::Replayed, Status::ReplayFailed] {
            let offsets: Vec<String> = (0..60)
                .filter(|i| dataset_status(*i) == s)
                .map(|i| i.to_string())
                .collect();
            exec_sql(
                backend,
                &url,
                &format!(
                    "UPDATE dead_letters SET status = '{}' WHERE dlq_offset IN ({})",
                    s.as_str(),
                    offsets.join(",")
                ),
            )
            .await;
        }
        // offset -> id, over every status.
        let mut id_of = HashMap::new();
        for s in Status::ALL {
            let f = Filter {
                status: Some(s),
                ..Filter::default()
            };
            let page = store
                .list(&ListQuery {
                    filter: f,
                    limit: 500,
                    cursor: None,
                })
                .await
                .unwrap();
            for item in page.items {
                assert_eq!(item.status, s);
                id_of.insert(item.dlq_offset, item.id);
            }
        }
        assert_eq!(id_of.len(), 60);

        let s = |v: &str| Some(v.to_string());
        let base = Filter::default();
        let filters = vec![
            base.clone(),
            Filter {
                fingerprint: s("0000000000000002"),
                ..base.clone()
            },
            Filter {
                error_class: s("com.acme.Timeout"),
                ..base.clone()
            },
            Filter {
                source_topic: s("users"),
                ..base.clone()
            },
            Filter {
                dlq_topic: s("payments.DLT"),
                ..base.clone()
            },
            Filter {
                consumer_group: s("g1"),
                ..base.clone()
            },
            Filter {
                status: Some(Status::Deleted),
                ..base.clone()
            },
            Filter {
                status: Some(Status::New),
                ..base.clone()
            },
            Filter {
                status: Some(Status::Replayed),
                ..base.clone()
            },
            Filter {
                status: Some(Status::ReplayPending),
                ..base.clone()
            },
            Filter {
                from_ms: Some(1_005_000),
                ..base.clone()
            },
            Filter {
                to_ms: Some(1_005_000),
                ..base.clone()
            },
            Filter {
                from_ms: Some(1_003_000),
                to_ms: Some(1_010_000),
                ..base.clone()
            },
            // q: case-insensitive, and `%`, `_`, `!`, `\` are literal characters, not wildcards.
            Filter {
                q: s("connection reset"),
                ..base.clone()
            },
            Filter {
                q: s("100%"),
                ..base.clone()
            },
            Filter {
                q: s("%"),
                ..base.clone()
            },
            Filter {
                q: s("user_id"),
                ..base.clone()
            },
            Filter {
                q: s("_"),
                ..base.clone()
            },
            Filter {
                q: s("k\\s"),
                ..base.clone()
            },
            Filter {
                q: s("h! d"),
                ..base.clone()
            },
            Filter {
                q: s("!"),
                ..base.clone()
            },
            Filter {
                q: s("nothing like this"),
                ..base.clone()
            },
            // Combinations.
            Filter {
                source_topic: s("orders"),
                from_ms: Some(1_002_000),
                to_ms: Some(1_015_000),
                ..base.clone()
            },
            Filter {
                fingerprint: s("0000000000000001"),
                consumer_group: s("g2"),
                status: Some(Status::ReplayFailed),
                ..base.clone()
            },
            Filter {
                dlq_topic: s("orders.DLT"),
                error_class: s("java.lang.IllegalStateException"),
                q: s("DISK"),
                ..base.clone()
            },
        ];
        for f in filters {
            let mut expected: Vec<(i64, i64)> = data
                .iter()
                .filter(|d| reference_match(&f, d, dataset_status(d.record.dlq_offset)))
                .map(|d| (d.dead_lettered_at_ms, id_of[&d.record.dlq_offset]))
                .collect();
            expected.sort_by(|a, b| b.cmp(a));
            let got = walk(&store, &f, 4).await;
            assert_eq!(got, expected, "{backend:?} {f:?}");
            assert_eq!(
                store.count(&f).await.unwrap(),
                expected.len() as i64,
                "{backend:?} count {f:?}"
            );
        }
        // The `%` filter must not degenerate into "everything with a message".
        let percent = Filter {
            q: s("100%"),
            ..base.clone()
        };
        assert!(store.count(&percent).await.unwrap() > 0);
        assert!(
            store.count(&percent).await.unwrap()
                < store
                    .count(&Filter {
                        q: s("disk"),
                        ..base.clone()
                    })
                    .await
                    .unwrap()
        );
    }
}

#[tokio::test]
async fn error_groups_are_counted_largest_first() {
    for backend in Backend::ALL {
        let (store, url, _dir) = store_with_url(backend).await;
        let mut batch = Vec::new();
        // Group a: 5 rows, group b: 3 rows (+1 deleted), group c: 1 row.
        for (i, (fp, class, msg, at)) in [
            ("aaaaaaaaaaaaaaaa", "A", "a first", 100),
            ("aaaaaaaaaaaaaaaa", "A", "a", 300),
            ("aaaaaaaaaaaaaaaa", "A", "a", 200),
            ("aaaaaaaaaaaaaaaa", "A", "a", 500),
            ("aaaaaaaaaaaaaaaa", "A", "a newest", 400),
            ("bbbbbbbbbbbbbbbb", "B", "b", 50),
            ("bbbbbbbbbbbbbbbb", "B", "b", 60),
            ("bbbbbbbbbbbbbbbb", "B", "b last", 70),
            ("bbbbbbbbbbbbbbbb", "B", "b deleted", 10),
            ("cccccccccccccccc", "C", "c", 1000),
        ]
        .into_iter()
        .enumerate()
        {
            let mut d = dl("t", 0, i as i64, at);
            d.fingerprint = fp.into();
            d.normalized.error_class = Some(class.into());
            d.normalized.error_message = Some(msg.into());
            d.normalized.source_topic =
                Some(if fp.starts_with('c') { "other" } else { "src" }.into());
            batch.push(d);
        }
        store.insert_batch(&batch).await.unwrap();
        exec_sql(
            backend,
            &url,
            "UPDATE dead_letters SET status = 'deleted' WHERE dlq_offset = 8",
        )
        .await;

        let groups = store.error_groups(&Filter::default(), 10).await.unwrap();
        let summary: Vec<(&str, i64, i64, i64)> = groups
            .iter()
            .map(|g| {
                (
                    g.fingerprint.as_str(),
                    g.count,
                    g.first_seen_ms,
                    g.last_seen_ms,
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("aaaaaaaaaaaaaaaa", 5, 100, 500),
                ("bbbbbbbbbbbbbbbb", 3, 50, 70),
                ("cccccccccccccccc", 1, 1000, 1000),
            ],
            "{backend:?}"
        );
        // The example is one real row of the group: its class and message belong together.
        assert_eq!(groups[0].error_class.as_deref(), Some("A"));
        assert!(groups[0]
            .example_message
            .as_deref()
            .unwrap()
            .starts_with('a'));
        assert_eq!(groups[1].example_message.as_deref(), Some("b last"));

        assert_eq!(
            store
                .error_groups(&Filter::default(), 1)
                .await
                .unwrap()
                .len(),
            1
        );
        let other = Filter {
            source_topic: Some("other".into()),
            ..Filter::default()
        };
        let only_c = store.error_groups(&other, 10).await.unwrap();
        assert_eq!(only_c.len(), 1);
        assert_eq!(only_c[0].fingerprint, "cccccccccccccccc");
        let deleted = Filter {
            status: Some(Status::Deleted),
            ..Filter::default()
        };
        let del = store.error_groups(&deleted, 10).await.unwrap();
        assert_eq!(del.len(), 1);
        assert_eq!(del[0].example_message.as_deref(), Some("b deleted"));
        assert!(store
            .error_groups(
                &Filter {
                    q: Some("zzz".into()),
                    ..Filter::default()
                },
                10
            )
            .await
            .unwrap()
            .is_empty());
    }
}

#[tokio::test]
async fn facets_list_distinct_values_sorted() {
    for backend in Backend::ALL {
        let (store, _url, _dir) = store_with_url(backend).await;
        assert_eq!(
            store.facets().await.unwrap(),
            redrive_core::store::Facets::default()
        );
        let data = filter_dataset();
        store.insert_batch(&data).await.unwrap();
        let facets = store.facets().await.unwrap();
        let distinct = |f: &dyn Fn(&NewDeadLetter) -> Option<String>| -> Vec<String> {
            data.iter()
                .filter_map(f)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        assert_eq!(
            facets.source_topics,
            distinct(&|d| d.normalized.source_topic.clone())
        );
        assert_eq!(
            facets.dlq_topics,
            distinct(&|d| Some(d.record.dlq_topic.clone()))
        );
        assert_eq!(
            facets.consumer_groups,
            distinct(&|d| d.normalized.consumer_group.clone())
        );
        assert_eq!(facets.dlq_topics, vec!["orders.DLT", "payments.DLT"]);

        // Capped: many distinct values come back as the first FACET_CAP, in order.
        let many: Vec<NewDeadLetter> = (0..600)
            .map(|i| dl(&format!("topic-{i:04}"), 0, i, 1))
            .collect();
        store.insert_batch(&many).await.unwrap();
        let facets = store.facets().await.unwrap();
        let cap = redrive_core::store::FACET_CAP as usize;
        assert_eq!(facets.dlq_topics.len(), cap);
        assert_eq!(facets.dlq_topics[0], "orders.DLT");
        assert!(facets.dlq_topics.windows(2).all(|w| w[0] < w[1]));
    }
}

#[tokio::test]
async fn unreachable_database_is_unavailable() {
    // Nothing listens on port 1: a retryable outage, not a configuration error.
    match Store::connect("postgres://postgres@127.0.0.1:1/none").await {
        Err(StoreError::Unavailable(_)) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
    match Store::connect("mysql://localhost/x").await {
        Err(StoreError::BadUrl(_)) => {}
        other => panic!("expected BadUrl, got {other:?}"),
    }
}

/// The filters the list page uses most, each on its own.
fn single_field_filters() -> Vec<(&'static str, Filter)> {
    let s = |v: &str| Some(v.to_string());
    let base = Filter::default();
    vec![
        ("default", base.clone()),
        (
            "fingerprint",
            Filter {
                fingerprint: s("00000000000000aa"),
                ..base.clone()
            },
        ),
        (
            "error_class",
            Filter {
                error_class: s("com.example.E7"),
                ..base.clone()
            },
        ),
        (
            "source_topic",
            Filter {
                source_topic: s("service3.events"),
                ..base.clone()
            },
        ),
        (
            "dlq_topic",
            Filter {
                dlq_topic: s("service3.events.DLT"),
                ..base.clone()
            },
        ),
        (
            "consumer_group",
            Filter {
                consumer_group: s("group1"),
                ..base.clone()
            },
        ),
        (
            "status",
            Filter {
                status: Some(Status::ReplayFailed),
                ..base.clone()
            },
        ),
        (
            "source_topic+range",
            Filter {
                source_topic: s("service3.events"),
                from_ms: Some(1_000_000),
                to_ms: Some(2_000_000),
                ..base.clone()
            },
        ),
        (
            "range",
            Filter {
                from_ms: Some(1_000_000),
                to_ms: Some(2_000_000),
                ..base.clone()
            },
        ),
        // Migration 0022 (`docs/automation.md`): a tier, and the unsorted ones.
        (
            "tier",
            Filter {
                tier: Some(redrive_core::filter::TierFilter::Poison),
                ..base.clone()
            },
        ),
        (
            "tier unsorted",
            Filter {
                tier: Some(redrive_core::filter::TierFilter::Unsorted),
                ..base.clone()
            },
        ),
    ]
}

/// SQLite decides without statistics, so its plans can be checked on a tiny table: every
/// indexed filter walks an index in list order (no "USE TEMP B-TREE FOR ORDER BY", no full
/// scan), with and without a cursor.
#[tokio::test]
async fn sqlite_list_plans_use_an_index_in_list_order() {
    let (store, _url, _dir) = store_with_url(Backend::Sqlite).await;
    store.insert_batch(&filter_dataset()).await.unwrap();
    for (name, filter) in single_field_filters() {
        for cursor in [
            None,
            Some(Cursor {
                dead_lettered_at_ms: 1_500_000,
                id: 10,
            }),
        ] {
            let plan = store
                .explain_list(&ListQuery {
                    filter: filter.clone(),
                    limit: 50,
                    cursor,
                })
                .await
                .unwrap()
                .join(" | ");
            assert!(!plan.contains("TEMP B-TREE"), "{name}: sorts: {plan}");
            assert!(plan.contains("USING INDEX"), "{name}: no index: {plan}");
        }
    }
}

/// A dead letter shaped like the bench's: 50 error groups, 20 source topics, 5 groups,
/// spread over 30 days.
fn synthetic(i: i64, now: i64) -> NewDeadLetter {
    let group = i % 50;
    let topic = format!("service{}.events", i % 20);
    let at = now - (i * 30 * 86_400_000 / 1_000_000) % (30 * 86_400_000);
    let mut d = dl(&format!("{topic}.DLT"), (i % 4) as i32, i, at);
    d.record.value = Some(vec![b'v'; 256]);
    d.fingerprint = format!("{group:016x}");
    d.normalized = Normalized {
        source_topic: Some(topic),
        consumer_group: Some(format!("group{}", i % 5)),
        error_class: Some(format!("com.example.E{group}")),
        error_message: Some(if group == 7 {
            format!("Connection reset while calling payments for order {i}")
        } else {
            format!("Failure {group} while processing order {i}")
        }),
        retry_count: Some(3),
        ..Normalized::default()
    };
    d
}

/// `STORE_PERF_ROWS=1000000 cargo test -p redrive --test store -- --ignored --nocapture`:
/// fills both databases and prints list latencies (p50/p99 ms) and plans per filter. A probe
/// for tuning, not a pass/fail benchmark (that is `make bench`).
#[tokio::test]
#[ignore]
async fn list_latency_probe() {
    let rows: i64 = std::env::var("STORE_PERF_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let now = 1_796_104_800_000i64;
    for backend in Backend::ALL {
        let (store, url, _dir) = store_with_url(backend).await;
        let t = std::time::Instant::now();
        let mut i = 0;
        while i < rows {
            let end = (i + 5_000).min(rows);
            let batch: Vec<NewDeadLetter> = (i..end).map(|j| synthetic(j, now)).collect();
            store.insert_batch(&batch).await.unwrap();
            i = end;
        }
        println!(
            "{backend:?}: filled {rows} rows in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        exec_sql(
            backend,
            &url,
            "UPDATE dead_letters SET status = 'replay_failed' WHERE id % 1000 = 0",
        )
        .await;
        if backend == Backend::Postgres {
            // Steady state: autovacuum has set the visibility map (index-only counts) and statistics.
            exec_sql(backend, &url, "VACUUM ANALYZE dead_letters").await;
        }
        let s = |v: &str| Some(v.to_string());
        let mut filters = single_field_filters();
        for (_, f) in filters.iter_mut() {
            if f.fingerprint.is_some() {
                f.fingerprint = s(&format!("{:016x}", 7));
            }
            if f.from_ms.is_some() {
                f.from_ms = Some(now - 7 * 86_400_000);
                f.to_ms = Some(now - 6 * 86_400_000);
            }
        }
        filters.push((
            "q common",
            Filter {
                q: s("connection reset"),
                ..Filter::default()
            },
        ));
        filters.push((
            "q rare",
            Filter {
                q: s("order 123456 "),
                ..Filter::default()
            },
        ));
        filters.push((
            "q none",
            Filter {
                q: s("no such text"),
                ..Filter::default()
            },
        ));
        for (name, filter) in filters {
            let first = ListQuery {
                filter: filter.clone(),
                limit: 50,
                cursor: None,
            };
            let page = store.list(&first).await.unwrap();
            let second = ListQuery {
                cursor: page
                    .next_cursor
                    .as_deref()
                    .map(|c| Cursor::decode(c).unwrap()),
                ..first.clone()
            };
            let mut times = Vec::new();
            for k in 0..60 {
                let q = if k % 2 == 0 { &first } else { &second };
                let t = std::time::Instant::now();
                store.list(q).await.unwrap();
                times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            times.sort_by(|a, b| a.total_cmp(b));
            let t = std::time::Instant::now();
            let n = store.count(&filter).await.unwrap();
            let count_ms = t.elapsed().as_secs_f64() * 1000.0;
            println!(
                "{backend:?} {name}: p50 {:.2} ms, p99 {:.2} ms ({} rows on page 1; count {n} in {count_ms:.1} ms)",
                times[times.len() / 2],
                times[times.len() * 99 / 100],
                page.items.len()
            );
            for line in store.explain_list(&second).await.unwrap() {
                println!("      {line}");
            }
        }
        let t = std::time::Instant::now();
        let groups = store.error_groups(&Filter::default(), 50).await.unwrap();
        println!(
            "{backend:?} error_groups: {} groups in {:.1} ms",
            groups.len(),
            t.elapsed().as_secs_f64() * 1000.0
        );
        let t = std::time::Instant::now();
        let f = store.facets().await.unwrap();
        println!(
            "{backend:?} facets: {}/{}/{} in {:.1} ms",
            f.source_topics.len(),
            f.dlq_topics.len(),
            f.consumer_groups.len(),
            t.elapsed().as_secs_f64() * 1000.0
        );
    }
}

#[tokio::test]
async fn sqlite_creates_its_file_and_directory_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not").join("yet").join("redrive.db");
    let store = Store::connect(&format!("sqlite:{}", file.display()))
        .await
        .expect("connect creates the directory and the file");
    store.migrate().await.unwrap();
    store.insert_batch(&[dl("t", 0, 0, 1)]).await.unwrap();
    assert!(file.exists());
    // WAL journal: committed writes sit in the -wal file beside the database.
    assert!(file.with_extension("db-wal").exists());
    store.close().await;

    // `sqlite::memory:` keeps its one connection, so the data outlives a query.
    let mem = Store::connect("sqlite::memory:").await.unwrap();
    mem.migrate().await.unwrap();
    mem.insert_batch(&[dl("t", 0, 0, 1)]).await.unwrap();
    assert_eq!(mem.count(&Filter::default()).await.unwrap(), 1);
}
