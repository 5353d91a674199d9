//! Free-text search (issue 12 item 2, migration 0024; `docs/triage.md`, "Search"): records
//! ingested from the real broker are found by a substring of their stack trace, a JSON payload
//! or a text payload (not of a binary payload, nor past the indexed 8 KiB), through the API
//! and the list page (the match highlighted and escaped), combined with other filters; a soft
//! delete hides a match, a restore shows it again, and a hard delete (what the retention purge
//! does) removes it from the index. And the store's bounded steps: a rare term beyond the scan
//! is found through the index, and a term too common for the index under a filter it rarely
//! meets pages through the list in bounded steps without losing a row. Every store-level
//! search is asked twice: with the texts still in the backlog, as ingest writes them, and after
//! the search indexer moved them into the index (migration 0028), with the same answers.

use std::time::Duration;

use redrive_core::model::{
    Convention, DeadLetterSummary, NewDeadLetter, Normalized, Page, RawRecord,
};
use redrive_core::store::{
    MatchCount, Store, DEPENDENT_TABLES, SEARCH_BACKLOG_SCAN_ROWS, SEARCH_INDEX_ROWS,
    SEARCH_PROBE_ROWS, SEARCH_SCAN_ROWS, SEARCH_WORD_CANDIDATES,
};
use redrive_core::{Cursor, Filter, ListQuery};
use redrive_testkit::{
    create_topic, fresh_database, kafka_brokers, produce, unique, Backend, TestRecord,
};
use serde_json::{json, Value};

use crate::support::{eventually, Auth, Csrf, TestApp};

fn spring(source: &str, message: &str, stack: &str, value: Vec<u8>) -> TestRecord {
    TestRecord {
        key: None,
        value: Some(value),
        headers: vec![
            (
                "kafka_dlt-original-topic".into(),
                Some(source.as_bytes().to_vec()),
            ),
            (
                "kafka_dlt-exception-fqcn".into(),
                Some(b"java.lang.IllegalStateException".to_vec()),
            ),
            (
                "kafka_dlt-exception-message".into(),
                Some(message.as_bytes().to_vec()),
            ),
            (
                "kafka_dlt-exception-stacktrace".into(),
                Some(stack.as_bytes().to_vec()),
            ),
        ],
        partition: Some(0),
        timestamp_ms: None,
    }
}

/// `GET /api/v1/dead-letters?<query>`: the items.
async fn search(app: &TestApp, token: &str, query: &str) -> Vec<Value> {
    let res = app
        .get(
            &format!("/api/v1/dead-letters?{query}"),
            Auth::Bearer(token),
        )
        .await;
    assert_eq!(res.status(), 200, "{query}");
    let body: Value = res.json().await.expect("json");
    body["items"].as_array().expect("items").clone()
}

fn offsets(items: &[Value]) -> Vec<i64> {
    let mut o: Vec<i64> = items
        .iter()
        .map(|i| i["dlq_offset"].as_i64().expect("offset"))
        .collect();
    o.sort();
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finds_stack_trace_json_and_text_payloads_but_not_binary() {
    for backend in Backend::ALL {
        let topic = unique("search.DLT");
        create_topic(&topic, 1, &[]).await.unwrap();
        let frames = "\tat com.example.Frame.call(Frame.java:1)\n".repeat(10);
        let far = format!(
            "{}\tat com.example.FarBeyondTheCap.call(X.java:9)\n",
            "\tat com.example.Filler.call(Filler.java:1)\n".repeat(300)
        );
        let records = vec![
            // 0: the needle in the stack trace, a JSON payload with another.
            spring(
                "orders",
                "plain failure",
                &format!("java.lang.IllegalStateException: boom\n{frames}\tat com.example.NeedleInStack42.run(N.java:7)\n{frames}"),
                br#"{"orderId": "json-needle-77", "amount": 12}"#.to_vec(),
            ),
            // 1: a text payload.
            spring(
                "payments",
                "other failure",
                "short trace",
                b"text payload with txtneedle99 inside".to_vec(),
            ),
            // 2: a binary payload that holds the bytes of a needle.
            spring(
                "orders",
                "third failure",
                "short trace",
                [b"binneedle".as_slice(), &[0x00, 0xff, 0xfe, 0x01]].concat(),
            ),
            // 3: markup in the message.
            spring(
                "payments",
                "<script>alert(1)</script> htmlneedle & more",
                "short trace",
                b"{}".to_vec(),
            ),
            // 4: a needle past the indexed 8 KiB of the stack trace.
            spring("orders", "fourth failure", &far, b"{}".to_vec()),
        ];
        produce(&topic, &records).await.unwrap();
        let brokers = kafka_brokers();
        let app = TestApp::start_on(
            backend,
            &[
                ("REDRIVE_INGEST_ENABLED", "true"),
                ("REDRIVE_KAFKA_BROKERS", &brokers),
                ("REDRIVE_DLQ_TOPICS", &topic),
                ("REDRIVE_GROUP_ID", &unique("search-group")),
            ],
        )
        .await;
        let token = app.admin_token().await;
        let store = app.store.clone();
        eventually("every record ingested", Duration::from_secs(60), || async {
            store.count(&Filter::default()).await.unwrap() == 5
        })
        .await;
        // The server's search indexer moves the texts into the index.
        eventually(
            "the search index caught up",
            Duration::from_secs(60),
            || async { store.search_backlog_is_empty().await.unwrap() },
        )
        .await;

        // Stack trace, case-insensitive; the API says where and gives the match as stored.
        let items = search(&app, &token, "q=needleinstack42").await;
        assert_eq!(offsets(&items), [0], "{backend:?}");
        let m = &items[0]["matched"];
        assert_eq!(m["field"], "stack_trace", "{backend:?}: {m}");
        assert_eq!(m["match"], "NeedleInStack42", "{backend:?}");
        assert!(
            m["before"].as_str().unwrap().ends_with("com.example."),
            "{m}"
        );
        // JSON payload, text payload.
        let items = search(&app, &token, "q=json-needle-77").await;
        assert_eq!(offsets(&items), [0], "{backend:?}");
        assert_eq!(items[0]["matched"]["field"], "payload");
        let items = search(&app, &token, "q=TXTNEEDLE99").await;
        assert_eq!(offsets(&items), [1], "{backend:?}");
        assert_eq!(items[0]["matched"]["field"], "payload");
        assert_eq!(items[0]["matched"]["match"], "txtneedle99");
        // Binary payloads and text past the cap are not searched.
        assert!(
            search(&app, &token, "q=binneedle").await.is_empty(),
            "{backend:?}"
        );
        assert!(
            search(&app, &token, "q=FarBeyondTheCap").await.is_empty(),
            "{backend:?}"
        );
        // The message; a term shorter than 3 characters (the scan only).
        let items = search(&app, &token, "q=htmlneedle").await;
        assert_eq!(offsets(&items), [3], "{backend:?}");
        assert_eq!(items[0]["matched"]["field"], "message");
        let items = search(&app, &token, "q=42").await;
        assert_eq!(offsets(&items), [0], "{backend:?}: two characters");
        // LIKE's wildcards are literal.
        assert!(search(&app, &token, "q=needle%25inside").await.is_empty());
        // Combined with other filters.
        let items = search(&app, &token, "q=needle").await;
        assert_eq!(offsets(&items), [0, 1, 3], "{backend:?}");
        let items = search(&app, &token, "q=needle&source_topic=orders").await;
        assert_eq!(offsets(&items), [0], "{backend:?}");
        let items = search(&app, &token, "q=needle&source_topic=payments&limit=1").await;
        assert_eq!(items.len(), 1, "{backend:?}");
        // A term that is too long is refused with a message.
        let res = app
            .get(
                &format!("/api/v1/dead-letters?q={}", "x".repeat(300)),
                Auth::Bearer(&token),
            )
            .await;
        assert_eq!(res.status(), 400, "{backend:?}");
        assert!(res.text().await.unwrap().contains("at most 256 characters"));
        // The page's count runs the same search.
        assert_eq!(
            store
                .count_matching(
                    &Filter {
                        q: Some("needle".into()),
                        ..Filter::default()
                    },
                    1000
                )
                .await
                .unwrap(),
            MatchCount::Exact(3),
            "{backend:?}"
        );

        // The list page: the match marked, the markup of the record escaped.
        app.add_user("searcher", "viewer", "searcher-password-1")
            .await;
        let session = app.sign_in("searcher", "searcher-password-1").await;
        let html = app
            .get("/?q=htmlneedle", Auth::Session(&session))
            .await
            .text()
            .await
            .unwrap();
        assert!(
            html.contains("<mark>htmlneedle</mark>"),
            "{backend:?}: {html}"
        );
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(
            !html.contains("<script>alert(1)"),
            "{backend:?}: not escaped"
        );
        assert!(html.contains(r#"data-match-field="message""#), "{html}");
        let html = app
            .get("/?q=needleinstack42", Auth::Session(&session))
            .await
            .text()
            .await
            .unwrap();
        assert!(html.contains("<mark>NeedleInStack42</mark>"), "{backend:?}");
        assert!(html.contains("in the stack trace"), "{backend:?}");

        // Soft delete hides the match, restore brings it back.
        let id = items_id(&search(&app, &token, "q=needleinstack42").await);
        let res = app
            .post_json(
                "/api/v1/dead-letters/delete",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"ids": [id], "reason": "search test"}),
            )
            .await;
        assert_eq!(res.status(), 200, "{backend:?}");
        assert!(search(&app, &token, "q=needleinstack42").await.is_empty());
        assert_eq!(
            offsets(&search(&app, &token, "q=needleinstack42&status=deleted").await),
            [0]
        );
        let res = app
            .post_json(
                "/api/v1/dead-letters/restore",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"ids": [id], "reason": "search test"}),
            )
            .await;
        assert_eq!(res.status(), 200, "{backend:?}");
        assert_eq!(
            offsets(&search(&app, &token, "q=needleinstack42").await),
            [0]
        );

        // A hard delete (the retention purge's statement) takes the text and index entry.
        delete_row(backend, &app.db_url, id).await;
        assert!(search(&app, &token, "q=needleinstack42&status=deleted")
            .await
            .is_empty());
        assert_eq!(text_rows(backend, &app.db_url, id).await, 0, "{backend:?}");
    }
}

fn items_id(items: &[Value]) -> i64 {
    assert_eq!(items.len(), 1, "{items:?}");
    items[0]["id"].as_i64().unwrap()
}

async fn delete_row(backend: Backend, url: &str, id: i64) {
    // As the retention purge does (`Store::purge_chunk`): ONE transaction that locks the row
    // first, so that a concurrent writer of dependent rows (the tier sorter's
    // `tier_assigned` event after a restore) either commits before it or finds the row gone;
    // then the dependent rows in its order, then the row.
    let mut statements: Vec<String> = DEPENDENT_TABLES
        .iter()
        .map(|(table, column)| format!("DELETE FROM {table} WHERE {column} = {id}"))
        .collect();
    statements.push(format!("DELETE FROM dead_letters WHERE id = {id}"));
    match backend {
        Backend::Sqlite => {
            // SQLite: the first DELETE takes the database's write lock until the commit.
            let pool = sqlx::SqlitePool::connect(url).await.unwrap();
            let mut tx = pool.begin().await.unwrap();
            for sql in &statements {
                sqlx::query(sql).execute(&mut *tx).await.expect(sql);
            }
            tx.commit().await.unwrap();
            pool.close().await;
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.unwrap();
            let mut tx = pool.begin().await.unwrap();
            sqlx::query(&format!(
                "SELECT id FROM dead_letters WHERE id = {id} FOR UPDATE"
            ))
            .fetch_all(&mut *tx)
            .await
            .unwrap();
            for sql in &statements {
                sqlx::query(sql).execute(&mut *tx).await.expect(sql);
            }
            tx.commit().await.unwrap();
            pool.close().await;
        }
    }
}

/// Rows left for dead letter `id` in `dead_letter_text` and `search_backlog` (and, on
/// SQLite, FTS5 index entries for its needle).
async fn text_rows(backend: Backend, url: &str, id: i64) -> i64 {
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.unwrap();
            let text: i64 = sqlx::query_scalar(
                "SELECT (SELECT COUNT(*) FROM dead_letter_text WHERE id = ?1) \
                 + (SELECT COUNT(*) FROM search_backlog WHERE id = ?1)",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
            let fts: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM dead_letter_fts WHERE dead_letter_fts MATCH '\"NeedleInStack42\"'",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            pool.close().await;
            text + fts
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.unwrap();
            let text: i64 = sqlx::query_scalar(
                "SELECT (SELECT COUNT(*) FROM dead_letter_text WHERE id = $1) \
                 + (SELECT COUNT(*) FROM search_backlog WHERE id = $1)",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
            pool.close().await;
            text
        }
    }
}

fn dl(topic: &str, offset: i64, at_ms: i64, message: &str) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: topic.to_string(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(at_ms),
            key: None,
            value: Some(b"{}".to_vec()),
            headers: vec![],
        },
        convention: Convention::Unknown,
        normalized: Normalized {
            error_message: Some(message.to_string()),
            ..Normalized::default()
        },
        fingerprint: "0000000000000000".to_string(),
        dead_lettered_at_ms: at_ms,
        ingested_at_ms: at_ms,
    }
}

/// Rows of topic C in [`bounded_steps_find_every_match_in_order`].
// With A and B, at most `SEARCH_BACKLOG_SCAN_ROWS` rows in all: before the indexer has run,
// the index step reads the whole backlog.
const C_ROWS: i64 = 2_600;

/// The bounded steps: a term past the scan is found through the index, exactly; a term too
/// common for the index step, under a filter whose newest rows never match, gives a partial
/// page with a cursor, and walking the pages finds every match, in list order; the same term
/// under a filter where 1 row in 45 holds it fills its page by scanning on past the first
/// rows (`scan_more`), where the index step would have given up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_steps_find_every_match_in_order() {
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.unwrap();
        let store = Store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        let hot = SEARCH_INDEX_ROWS as i64 + 100;
        assert!(hot + 2 + SEARCH_SCAN_ROWS + 100 + C_ROWS <= SEARCH_BACKLOG_SCAN_ROWS);
        let cold = SEARCH_SCAN_ROWS + 100;
        let mut rows = Vec::new();
        // The oldest: topic A, all "hot".
        for i in 0..hot {
            rows.push(dl("a.DLT", i, 1_000_000 + i, &format!("hot row {i}")));
        }
        // Topic B: its two oldest are "hot" (one of them "rare"), the rest are not.
        rows.push(dl("b.DLT", 0, 2_000_000, "hot and rare row"));
        rows.push(dl("b.DLT", 1, 2_000_001, "hot row b"));
        for i in 0..cold {
            rows.push(dl("b.DLT", 2 + i, 3_000_000 + i, &format!("cold row {i}")));
        }
        // Topic C, the newest: 1 row in 45 is "hot".
        for i in 0..C_ROWS {
            let text = if i % 45 == 0 {
                "hot row c"
            } else {
                "cool row c"
            };
            rows.push(dl("c.DLT", i, 4_000_000 + i, &format!("{text} {i}")));
        }
        for chunk in rows.chunks(1000) {
            store.insert_batch(chunk).await.unwrap();
        }
        check_bounded_steps(&store, backend, hot).await;
        index_all(&store).await;
        check_bounded_steps(&store, backend, hot).await;
    }
}

/// The assertions of [`bounded_steps_find_every_match_in_order`] on its store.
async fn check_bounded_steps(store: &Store, backend: Backend, hot: i64) {
    let q = |text: &str, topic: Option<&str>| Filter {
        q: Some(text.into()),
        dlq_topic: topic.map(str::to_string),
        ..Filter::default()
    };
    // Rare, older than the scan reads: the index step, exact and complete.
    let page = store
        .list(&ListQuery {
            filter: q("RARE", None),
            limit: 50,
            cursor: None,
        })
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1, "{backend:?}");
    assert_eq!(page.items[0].dlq_topic, "b.DLT");
    assert_eq!(page.next_cursor, None, "{backend:?}");
    // The same under a filter: none of the newest 2,000 dead letters holds it (the sample
    // that says whether a term is too common for the index), so the index step answers.
    let page = store
        .list(&ListQuery {
            filter: q("RARE", Some("b.DLT")),
            limit: 50,
            cursor: None,
        })
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1, "{backend:?}");
    assert_eq!(page.next_cursor, None, "{backend:?}");
    assert_eq!(
        store
            .count_matching(&q("RARE", Some("b.DLT")), 1000)
            .await
            .unwrap(),
        MatchCount::Exact(1),
        "{backend:?}"
    );
    // Common: a full page from the scan, newest first.
    let page = store
        .list(&ListQuery {
            filter: q("hot row", Some("a.DLT")),
            limit: 50,
            cursor: None,
        })
        .await
        .unwrap();
    assert_eq!(page.items.len(), 50);
    assert_eq!(page.items[0].dlq_offset, hot - 1, "{backend:?}");
    // Too common for the index, too rare in B's newest rows: bounded pages.
    let filter = q("hot", Some("b.DLT"));
    let first = store
        .list(&ListQuery {
            filter: filter.clone(),
            limit: 50,
            cursor: None,
        })
        .await
        .unwrap();
    assert!(first.items.is_empty(), "{backend:?}: the scan found none");
    assert!(
        first.next_cursor.is_some(),
        "{backend:?}: and says where it stopped"
    );
    assert_eq!(
        store.count_matching(&filter, 1000).await.unwrap(),
        MatchCount::AtLeast(0),
        "{backend:?}"
    );
    let mut found = Vec::new();
    let mut cursor = first.next_cursor;
    for _ in 0..10 {
        let Some(c) = cursor else { break };
        let page = store
            .list(&ListQuery {
                filter: filter.clone(),
                limit: 50,
                cursor: Some(Cursor::decode(&c).unwrap()),
            })
            .await
            .unwrap();
        found.extend(page.items.iter().map(|s| s.dlq_offset));
        cursor = page.next_cursor;
    }
    assert_eq!(cursor, None, "{backend:?}: the walk ends");
    assert_eq!(found, [1, 0], "{backend:?}: both, newest first");

    // 1 in 45 of C's rows: 44 of its newest 2,000; the scan goes on and fills the page.
    let filter = q("hot", Some("c.DLT"));
    let every: Vec<i64> = (0..C_ROWS).rev().filter(|i| i % 45 == 0).collect();
    let mut found = Vec::new();
    let mut cursor = None;
    let mut sizes = Vec::new();
    for _ in 0..10 {
        let page = store
            .list(&ListQuery {
                filter: filter.clone(),
                limit: 50,
                cursor: cursor.as_deref().map(|c| Cursor::decode(c).unwrap()),
            })
            .await
            .unwrap();
        sizes.push(page.items.len());
        found.extend(page.items.iter().map(|s| s.dlq_offset));
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(
        sizes,
        [50, every.len() - 50],
        "{backend:?}: a full first page"
    );
    assert_eq!(found, every, "{backend:?}: every match, newest first");
    // 44 of the newest 2,000 match (1 % or more): the count says so without the index.
    assert_eq!(
        store.count_matching(&filter, 1000).await.unwrap(),
        MatchCount::AtLeast(44),
        "{backend:?}"
    );
}

/// PostgreSQL's index step asks the trigram index for the rarest word of a term first (the
/// one with a digit): exact when that word's rows decide, and when they are more than it
/// checks (`SEARCH_WORD_CANDIDATES`), the whole term is asked for and nothing is missed. The
/// only match is stored last (checked last by the word step) but dead-lettered first (past
/// the scan). Both databases answer the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_whose_rarest_word_is_common_is_still_found_exactly() {
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.unwrap();
        let store = Store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        let common = SEARCH_WORD_CANDIDATES + 10;
        let mut rows: Vec<NewDeadLetter> = (0..common)
            .map(|i| dl("w.DLT", i, 5_000_000 + i, &format!("txn 7654321 step {i}")))
            .collect();
        rows.push(dl("w.DLT", common, 1_000_000, "txn 7654321 needle step"));
        rows.push(dl(
            "w.DLT",
            common + 1,
            1_000_001,
            "order 8675309 after 12 ms",
        ));
        for chunk in rows.chunks(2000) {
            store.insert_batch(chunk).await.unwrap();
        }
        check_rarest_word(&store, backend, common).await;
        index_all(&store).await;
        check_rarest_word(&store, backend, common).await;
        // Many searches of one new term at once (pages and counts): one index step runs at a
        // time (`common_terms.rs`), the others take its outcome, and every answer is exact.
        let searches = (0..8).map(|i| {
            let store = store.clone();
            async move {
                let filter = Filter {
                    q: Some("needle step".into()),
                    dlq_topic: (i % 2 == 1).then(|| "w.DLT".to_string()),
                    ..Filter::default()
                };
                let page = first_page(&store, &filter).await;
                let count = store.count_matching(&filter, 1000).await.unwrap();
                (
                    page.items.iter().map(|s| s.dlq_offset).collect::<Vec<_>>(),
                    count,
                )
            }
        });
        for (got, count) in futures::future::join_all(searches).await {
            assert_eq!(got, [common], "{backend:?}");
            assert_eq!(count, MatchCount::Exact(1), "{backend:?}");
        }
    }
}

/// The assertions of [`a_term_whose_rarest_word_is_common_is_still_found_exactly`].
async fn check_rarest_word(store: &Store, backend: Backend, common: i64) {
    let only = |text: &str| Filter {
        q: Some(text.into()),
        ..Filter::default()
    };
    for (term, offset) in [
        // "7654321" is in every row: the word step cannot decide.
        ("7654321 needle", common),
        // "8675309" is in one row: the word step decides.
        ("order 8675309 after", common + 1),
    ] {
        let page = store
            .list(&ListQuery {
                filter: only(term),
                limit: 50,
                cursor: None,
            })
            .await
            .unwrap();
        let got: Vec<i64> = page.items.iter().map(|s| s.dlq_offset).collect();
        assert_eq!(got, [offset], "{backend:?}: {term}");
        assert_eq!(page.next_cursor, None, "{backend:?}: {term}");
        assert_eq!(
            store.count_matching(&only(term), 1000).await.unwrap(),
            MatchCount::Exact(1),
            "{backend:?}: {term}"
        );
    }
}

/// A term with a word of 4 or more characters with a digit (SQLite asks FTS5 for that word
/// before any scan: step 0 of `core/src/store/search.rs`): matches older than the scan's
/// window are found exactly, in list order over two pages, under another filter, and counted
/// exactly; a one-word term (an order number alone) too; a word in more rows than step 0
/// checks (`SEARCH_PROBE_ROWS`) still finds its one match through the steps. The same
/// answers before the indexer ran (every text in the backlog) and after, on both databases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rare_word_is_found_exactly_before_and_after_indexing() {
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.unwrap();
        let store = Store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        // Oldest: 60 lines of one invoice (topic a) and a word in more rows than step 0
        // checks (topic b); newest: more filler than the scan reads.
        let mut rows: Vec<NewDeadLetter> = (0..60)
            .map(|i| {
                dl(
                    "a.DLT",
                    i,
                    1_000_000 + i,
                    &format!("invoice 4242424 line {i}"),
                )
            })
            .collect();
        let many = SEARCH_PROBE_ROWS + 5;
        rows.extend((0..many).map(|i| {
            dl(
                "b.DLT",
                i,
                2_000_000 + i,
                &format!("batch 9090909 part {i}"),
            )
        }));
        rows.push(dl("b.DLT", many, 1_500_000, "batch 9090909 needle"));
        rows.extend(
            (0..SEARCH_SCAN_ROWS + 500)
                .map(|i| dl("c.DLT", i, 5_000_000 + i, &format!("filler {i} after"))),
        );
        for chunk in rows.chunks(2000) {
            store.insert_batch(chunk).await.unwrap();
        }
        check_rare_word(&store, backend, many).await;
        index_all(&store).await;
        check_rare_word(&store, backend, many).await;
    }
}

/// The assertions of [`a_rare_word_is_found_exactly_before_and_after_indexing`].
async fn check_rare_word(store: &Store, backend: Backend, many: i64) {
    let search = |q: &str, dlq_topic: Option<&str>| Filter {
        q: Some(q.into()),
        dlq_topic: dlq_topic.map(str::to_string),
        ..Filter::default()
    };
    // Two pages, newest first.
    let all = search("4242424", None);
    let first = first_page(store, &all).await;
    let got: Vec<i64> = first.items.iter().map(|s| s.dlq_offset).collect();
    assert_eq!(got, (10..60).rev().collect::<Vec<_>>(), "{backend:?}");
    let cursor = Cursor::decode(first.next_cursor.as_deref().expect("a second page")).unwrap();
    let second = store
        .list(&ListQuery {
            filter: all.clone(),
            limit: 50,
            cursor: Some(cursor),
        })
        .await
        .unwrap();
    let got: Vec<i64> = second.items.iter().map(|s| s.dlq_offset).collect();
    assert_eq!(got, (0..10).rev().collect::<Vec<_>>(), "{backend:?}");
    assert_eq!(second.next_cursor, None, "{backend:?}");
    assert_eq!(
        store.count_matching(&all, 1000).await.unwrap(),
        MatchCount::Exact(60),
        "{backend:?}"
    );
    for (q, topic, want) in [
        // The whole term, its word first.
        ("invoice 4242424 line 17", None, vec![17]),
        ("INVOICE 4242424 LINE 17", Some("a.DLT"), vec![17]),
        // Under a filter no match meets.
        ("4242424", Some("b.DLT"), vec![]),
        // The word holds no match of the whole term.
        ("4242424 part", None, vec![]),
        // A word in more rows than step 0 checks: the steps find the one match.
        ("9090909 needle", None, vec![many]),
    ] {
        let filter = search(q, topic);
        let page = first_page(store, &filter).await;
        let got: Vec<i64> = page.items.iter().map(|s| s.dlq_offset).collect();
        assert_eq!(got, want, "{backend:?}: {q} in {topic:?}");
        assert_eq!(page.next_cursor, None, "{backend:?}: {q} in {topic:?}");
        assert_eq!(
            store.count_matching(&filter, 1000).await.unwrap(),
            MatchCount::Exact(want.len() as i64),
            "{backend:?}: count of {q} in {topic:?}"
        );
    }
}

/// The first list page (50 rows) of `filter`.
async fn first_page(store: &Store, filter: &Filter) -> Page<DeadLetterSummary> {
    store
        .list(&ListQuery {
            filter: filter.clone(),
            limit: 50,
            cursor: None,
        })
        .await
        .unwrap()
}

/// Runs the search indexer's rounds until the backlog is empty.
async fn index_all(store: &Store) {
    while store.index_search_backlog(1_000).await.unwrap() > 0 {}
    assert!(store.search_backlog_is_empty().await.unwrap());
}

/// Migration 0028: texts in the backlog are searched (the scan checks each row wherever its
/// text is; the index step reads a short backlog whole, and a backlog longer than
/// `SEARCH_BACKLOG_SCAN_ROWS` leaves a rare old term to the scan's continued pages, which still
/// find it); a hard delete takes a backlog row; two stores indexing at once split the backlog
/// (PostgreSQL: `SKIP LOCKED`; SQLite: the write gate) and every text lands in the index once;
/// after that the rare term is found exactly, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backlog_is_searched_until_the_indexers_move_it() {
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.unwrap();
        let store = Store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        let filler = SEARCH_BACKLOG_SCAN_ROWS + 100;
        let mut rows = vec![dl("k.DLT", 0, 1_000_000, "needle rare and old")];
        for i in 0..filler {
            rows.push(dl("k.DLT", 1 + i, 2_000_000 + i, &format!("filler {i}")));
        }
        rows.push(dl(
            "k.DLT",
            filler + 1,
            3_000_000,
            "fresh needle, gone soon",
        ));
        rows.push(dl("k.DLT", filler + 2, 3_000_001, "a fresh needle"));
        for chunk in rows.chunks(2000) {
            store.insert_batch(chunk).await.unwrap();
        }
        let total = rows.len() as i64;
        let list = |text: &str, cursor: Option<Cursor>| {
            let store = store.clone();
            let filter = Filter {
                q: Some(text.into()),
                ..Filter::default()
            };
            async move {
                store
                    .list(&ListQuery {
                        filter,
                        limit: 50,
                        cursor,
                    })
                    .await
                    .unwrap()
            }
        };
        // A hard delete takes the backlog row with the dead letter.
        let gone = list("gone soon", None).await;
        assert_eq!(gone.items.len(), 1, "{backend:?}");
        delete_row(backend, &url, gone.items[0].id).await;
        assert_eq!(
            text_rows(backend, &url, gone.items[0].id).await,
            0,
            "{backend:?}"
        );

        // Backlog: a new row is found by the scan, its match located in the backlog's text.
        let page = list("FRESH NEEDLE", None).await;
        assert_eq!(page.items.len(), 1, "{backend:?}");
        let m = page.items[0].search_match.as_ref().expect("located");
        assert_eq!(m.matched, "fresh needle", "{backend:?}");
        // The old rare row is beyond the scan, and the backlog is too long for the index
        // step: the page is the scan's, and walking on finds it.
        let first = list("needle rare", None).await;
        assert!(first.items.is_empty(), "{backend:?}");
        let mut found = Vec::new();
        let mut cursor = first.next_cursor.clone();
        for _ in 0..20 {
            let Some(c) = cursor else { break };
            let page = list("needle rare", Some(Cursor::decode(&c).unwrap())).await;
            found.extend(page.items.iter().map(|s| s.dlq_offset));
            cursor = page.next_cursor;
        }
        assert_eq!(found, [0], "{backend:?}: found by walking the scan");
        let rare = Filter {
            q: Some("needle rare".into()),
            ..Filter::default()
        };
        assert_eq!(
            store.count_matching(&rare, 1000).await.unwrap(),
            MatchCount::AtLeast(0),
            "{backend:?}"
        );
        // Counts by id (bulk actions, exports) read the backlog whole.
        assert_eq!(store.count(&rare).await.unwrap(), 1, "{backend:?}");

        // Two indexers at once.
        let other = Store::connect(&url).await.unwrap();
        let run = |s: Store| async move {
            let mut moved = 0;
            loop {
                let n = s.index_search_backlog(500).await.unwrap();
                if n == 0 {
                    return moved;
                }
                moved += n;
            }
        };
        let (a, b) = tokio::join!(run(store.clone()), run(other.clone()));
        assert_eq!(
            a + b,
            (total - 1) as u64,
            "{backend:?}: each row moved once"
        );
        assert!(store.search_backlog_is_empty().await.unwrap());
        assert_eq!(indexed_rows(backend, &url).await, total - 1, "{backend:?}");

        // Indexed: the rare term exactly, at once.
        let page = list("needle rare", None).await;
        let got: Vec<i64> = page.items.iter().map(|s| s.dlq_offset).collect();
        assert_eq!(got, [0], "{backend:?}");
        assert_eq!(page.next_cursor, None, "{backend:?}");
        assert_eq!(
            store.count_matching(&rare, 1000).await.unwrap(),
            MatchCount::Exact(1),
            "{backend:?}"
        );
        assert_eq!(list("fresh needle", None).await.items.len(), 1);
        assert_eq!(store.count(&rare).await.unwrap(), 1, "{backend:?}");
    }
}

/// Rows of `dead_letter_text` (the indexed texts).
async fn indexed_rows(backend: Backend, url: &str) -> i64 {
    let sql = "SELECT COUNT(*) FROM dead_letter_text";
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.unwrap();
            let n = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
            pool.close().await;
            n
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.unwrap();
            let n = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
            pool.close().await;
            n
        }
    }
}

/// Puts every indexed text of a PostgreSQL store back as the indexer wrote it before
/// migration 0031: the dead letter's message as it is, `lowered` false.
async fn unlower(url: &str) {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let n = sqlx::query(
        "UPDATE dead_letter_text t SET message = d.error_message, lowered = false \
         FROM dead_letters d WHERE d.id = t.id AND t.lowered",
    )
    .execute(&pool)
    .await
    .unwrap()
    .rows_affected();
    assert!(n > 0, "indexed rows were lowered");
    pool.close().await;
}

/// What the database's own `ILIKE` (PostgreSQL) or `LIKE` (SQLite) says of `q` over the
/// messages of dead letters stored with [`dl`]: the ground truth the row checks
/// (`push_row_match`: `strpos(lower(..), lower(q))` on PostgreSQL) must agree with. Offsets.
async fn database_matches(backend: Backend, url: &str, q: &str) -> Vec<i64> {
    let pattern = format!(
        "%{}%",
        q.replace('!', "!!").replace('%', "!%").replace('_', "!_")
    );
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.unwrap();
            let got = sqlx::query_scalar(
                "SELECT dlq_offset FROM dead_letters \
                 WHERE error_message LIKE ?1 ESCAPE '!' ORDER BY dlq_offset",
            )
            .bind(&pattern)
            .fetch_all(&pool)
            .await
            .unwrap();
            pool.close().await;
            got
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.unwrap();
            let got = sqlx::query_scalar(
                "SELECT dlq_offset FROM dead_letters \
                 WHERE error_message ILIKE $1 ESCAPE '!' ORDER BY dlq_offset",
            )
            .bind(&pattern)
            .fetch_all(&pool)
            .await
            .unwrap();
            pool.close().await;
            got
        }
    }
}

/// A row's text is checked without an index (the scan step, the backlog) in a cheaper way
/// than `ILIKE` on PostgreSQL; it finds exactly what the database's own `ILIKE` finds
/// (`LIKE` on SQLite), for letters outside ASCII whose lowercase changes their length, for
/// the `LIKE` wildcards and the escape character taken literally, and for a term that is
/// all punctuation: with the texts in the backlog and in the index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_row_check_finds_what_the_databases_own_match_finds() {
    let messages = [
        "ÄRGER im Lager",
        "ärger klein",
        "Straße gesperrt",
        "STRASSE offen",
        "ΣΊΣΥΦΟΣ rolls",
        "σίσυφος again",
        "İstanbul office",
        "istanbul depot",
        "100% done",
        "100 percent",
        "a_b c",
        "axb c",
        "wow! such",
        "Timeout after 1003 ms",
        "",
    ];
    let terms = [
        "ärger",
        "ÄRGER",
        "straße",
        "STRASSE",
        "σίσυφος",
        "ΣΊΣΥΦΟΣ",
        "İSTANBUL",
        "istanbul",
        "% done",
        "0%",
        "a_b",
        "_",
        "!",
        "wow!",
        "TIMEOUT after",
        "MS",
        "zzz",
    ];
    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.unwrap();
        let store = Store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        let rows: Vec<NewDeadLetter> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| dl("u.DLT", i as i64, 1_000_000 + i as i64, m))
            .collect();
        store.insert_batch(&rows).await.unwrap();
        // In the backlog; indexed (PostgreSQL: lowercased, migration 0031); and, on
        // PostgreSQL, indexed as before that migration (the text as it is, `lowered` false).
        for indexed in ["no", "yes", "before 0031"] {
            match indexed {
                "yes" => index_all(&store).await,
                "before 0031" if backend == Backend::Postgres => unlower(&url).await,
                "before 0031" => continue,
                _ => {}
            }
            for term in terms {
                let want = database_matches(backend, &url, term).await;
                let filter = Filter {
                    q: Some(term.into()),
                    ..Filter::default()
                };
                let page = first_page(&store, &filter).await;
                let mut got: Vec<i64> = page.items.iter().map(|s| s.dlq_offset).collect();
                got.sort_unstable();
                let what = format!("{backend:?}, indexed {indexed}: {term:?}");
                // The excerpt is the message's own text, in its own case.
                for item in &page.items {
                    let m = item.search_match.as_ref().expect("located");
                    let message = messages[item.dlq_offset as usize];
                    assert!(
                        message.contains(&format!("{}{}{}", m.before, m.matched, m.after)),
                        "{what}: {m:?} in {message:?}"
                    );
                }
                assert_eq!(got, want, "{what}");
                assert_eq!(page.next_cursor, None, "{what}");
                assert_eq!(
                    store.count_matching(&filter, 1000).await.unwrap(),
                    MatchCount::Exact(want.len() as i64),
                    "{what}"
                );
            }
        }
    }
}
