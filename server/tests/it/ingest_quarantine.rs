//! No record stops ingest (issue 7, item 2), on SQLite and PostgreSQL alike:
//!
//! - the reported case: a header long enough to overflow PostgreSQL's btree limit (2,704
//!   bytes) no longer stops every partition; the field is cut to its cap with a warning and
//!   the raw header kept whole;
//! - the real index error (SQLSTATE 54000) is classified as "about the data";
//! - a batch the database refuses is split: the other records are stored, the offender in
//!   reduced form, or in quarantine with its coordinates and error (with or without its raw
//!   record), the offsets move on, and `retry_quarantined` stores them after the fix.
//!
//! The refusals are the databases' own: a real index, and real triggers that raise.

use std::time::Duration;

use redrive_core::model::{Convention, Header, NewDeadLetter, Normalized, RawRecord};
use redrive_core::store::{Store, StoreError};
use redrive_testkit::ingest::{
    assert_stored_exactly, committed_offsets, dead_letters_in, end_offsets, ingest_config,
    start_ingest,
};
use redrive_testkit::{
    create_topic, fresh_database, fresh_store, produce, unique, wait_for, Backend, TestRecord,
};

fn h(name: &str, value: &[u8]) -> (String, Option<Vec<u8>>) {
    (name.to_string(), Some(value.to_vec()))
}

/// `n` bytes of hex that no compressor shrinks much (so PostgreSQL cannot squeeze an index
/// entry under its limit).
fn incompressible(n: usize) -> String {
    let mut out = String::with_capacity(n);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push_str(&format!("{x:016x}"));
    }
    out.truncate(n);
    out
}

fn sentinel(partition: i32) -> TestRecord {
    TestRecord {
        key: Some(format!("sentinel-{partition}").into_bytes()),
        value: Some(b"sentinel".to_vec()),
        headers: vec![h("kafka_dlt-exception-fqcn", b"com.example.Sentinel")],
        partition: Some(partition),
        timestamp_ms: None,
    }
}

/// Waits until the group has committed the end offset of every partition of `topic`.
async fn wait_all_committed(group: &str, topic: &str) {
    let end = end_offsets(topic).await.unwrap();
    wait_for("every offset committed", Duration::from_secs(60), || {
        let (group, topic, end) = (group.to_string(), topic.to_string(), end.clone());
        async move { (committed_offsets(&group, &topic).await.ok()? == end).then_some(()) }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_header_no_longer_stops_ingest() {
    let long_class = incompressible(10_000);
    let long_group = incompressible(5_000);
    let long_topic = incompressible(3_000);
    let hostile = TestRecord {
        key: Some(b"long".to_vec()),
        value: Some(b"{}".to_vec()),
        headers: vec![
            h("kafka_dlt-original-topic", long_topic.as_bytes()),
            h("kafka_dlt-original-consumer-group", long_group.as_bytes()),
            h("kafka_dlt-exception-fqcn", long_class.as_bytes()),
            h("kafka_dlt-exception-message", b"boom"),
        ],
        partition: Some(0),
        timestamp_ms: None,
    };
    let topic = unique("dlq_long_header");
    create_topic(&topic, 2, &[]).await.unwrap();
    produce(&topic, &[hostile.clone(), sentinel(0), sentinel(1)])
        .await
        .unwrap();
    for backend in Backend::ALL {
        let (store, _dir) = fresh_store(backend).await.unwrap();
        let group = unique("group");
        let ingest = start_ingest(&store, ingest_config(&[&topic], &group));
        ingest
            .wait_for_count(&store, &topic, 3, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{backend:?}: {e:#}"));
        wait_all_committed(&group, &topic).await;
        let snap = ingest.status.snapshot();
        assert!(snap.ready, "{backend:?}: {snap:?}");
        assert_eq!(snap.store_failures, 0, "{backend:?}: {snap:?}");
        ingest.stop().await.unwrap();

        let stored = dead_letters_in(&store, &topic).await.unwrap();
        let d = stored
            .iter()
            .find(|d| d.record.key.as_deref() == Some(b"long"))
            .expect("the long record is stored");
        assert_stored_exactly(&hostile, &d.record);
        assert_eq!(d.summary.convention, Convention::SpringDlt);
        let class = d.normalized.error_class.as_deref().unwrap();
        assert_eq!(class.len(), redrive_core::limits::ERROR_CLASS_MAX_BYTES);
        assert!(long_class.starts_with(class));
        assert_eq!(
            d.normalized.source_topic.as_deref().map(str::len),
            Some(249)
        );
        assert_eq!(
            d.normalized.consumer_group.as_deref().map(str::len),
            Some(1024)
        );
        assert!(d.summary.malformed);
        assert!(
            d.normalized
                .decode_warnings
                .iter()
                .any(|w| w.starts_with("error_class is 10000 bytes")),
            "{:?}",
            d.normalized.decode_warnings
        );
        // The cut value is what the filter matches.
        let filter = redrive_core::Filter {
            error_class: Some(class.to_string()),
            ..Default::default()
        };
        assert_eq!(store.count(&filter).await.unwrap(), 1, "{backend:?}");
    }
}

fn new_dead_letter(offset: i64, stack: &str) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: "direct.DLT".into(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(1_796_104_800_000),
            key: Some(b"k".to_vec()),
            value: Some(b"v".to_vec()),
            headers: vec![Header {
                name: "x-stack".into(),
                value: Some(stack.as_bytes().to_vec()),
            }],
        },
        convention: Convention::Unknown,
        normalized: Normalized {
            error_class: Some("com.example.Boom".into()),
            error_message: Some("é boom \u{202e}".into()),
            stack_trace: Some(stack.to_string()),
            ..Normalized::default()
        },
        fingerprint: "0123456789abcdef".into(),
        dead_lettered_at_ms: 1_796_104_800_000,
        ingested_at_ms: 1_796_104_800_000,
    }
}

/// PostgreSQL's own "index row size exceeds btree maximum" (54000) is `Rejected`, not an
/// outage; the reduced form (no stack trace) is then accepted. Provoked with a real index
/// on a column redrive does not cap at 2,704 bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_btree_limit_is_classified_and_the_reduced_form_stored() {
    let (url, _dir) = fresh_database(Backend::Postgres).await.unwrap();
    let store = Store::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query("CREATE INDEX test_by_stack ON dead_letters (stack_trace)")
        .execute(&pool)
        .await
        .unwrap();
    let stack = incompressible(20_000);
    let d = new_dead_letter(1, &stack);
    let err = store
        .insert_batch(&[new_dead_letter(0, "short"), d.clone()])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Rejected(m) if m.contains("index row")),
        "{err:?}"
    );
    assert!(!err.is_transient());
    assert_eq!(store.insert_reduced(&d, &err.to_string()).await.unwrap(), 1);
    let all = store
        .list(&redrive_core::ListQuery::default())
        .await
        .unwrap();
    assert_eq!(all.items.len(), 1, "the refused batch stored nothing");
    let got = store.get(all.items[0].id).await.unwrap().unwrap();
    assert_eq!(got.record, d.record, "the raw record is whole");
    assert_eq!(got.normalized.stack_trace, None);
    assert_eq!(got.normalized.error_message.as_deref(), Some("? boom ?"));
    assert!(got.normalized.decode_warnings[0].contains("reduced form"));
    assert!(got.normalized.decode_warnings[0].contains("index row"));
    assert!(got.summary.malformed);
}

/// Real refusals: triggers that raise for marked records, on either database.
async fn install_refusals(backend: Backend, url: &str, quarantine_refused: (i32, i64)) {
    let (qp, qo) = quarantine_refused;
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.unwrap();
            for sql in [
                "CREATE TRIGGER refuse_marked BEFORE INSERT ON dead_letters \
                 WHEN NEW.stack_trace LIKE '%refuse-me%' OR substr(NEW.key, 1, 6) = CAST('poison' AS BLOB) \
                 BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END",
                &format!(
                    "CREATE TRIGGER refuse_quarantine BEFORE INSERT ON quarantine \
                     WHEN NEW.record IS NOT NULL AND NEW.dlq_partition = {qp} AND NEW.dlq_offset = {qo} \
                     BEGIN SELECT RAISE(ABORT, 'record refused by the test trigger'); END"
                ),
            ] {
                sqlx::query(sql).execute(&pool).await.unwrap();
            }
            pool.close().await;
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.unwrap();
            for sql in [
                "CREATE FUNCTION refuse_marked() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF NEW.stack_trace LIKE '%refuse-me%' OR substr(NEW.key, 1, 6) = 'poison'::bytea THEN \
                 RAISE EXCEPTION 'refused by the test trigger' USING ERRCODE = 'check_violation'; \
                 END IF; RETURN NEW; END $$",
                "CREATE TRIGGER refuse_marked BEFORE INSERT ON dead_letters FOR EACH ROW \
                 EXECUTE FUNCTION refuse_marked()",
                &format!(
                    "CREATE FUNCTION refuse_quarantine() RETURNS trigger LANGUAGE plpgsql AS $$ \
                     BEGIN IF NEW.record IS NOT NULL AND NEW.dlq_partition = {qp} AND NEW.dlq_offset = {qo} THEN \
                     RAISE EXCEPTION 'record refused by the test trigger' USING ERRCODE = 'check_violation'; \
                     END IF; RETURN NEW; END $$"
                ),
                "CREATE TRIGGER refuse_quarantine BEFORE INSERT ON quarantine FOR EACH ROW \
                 EXECUTE FUNCTION refuse_quarantine()",
            ] {
                sqlx::query(sql).execute(&pool).await.unwrap();
            }
            pool.close().await;
        }
    }
}

async fn drop_refusals(backend: Backend, url: &str) {
    let sqls: &[&str] = match backend {
        Backend::Sqlite => &[
            "DROP TRIGGER refuse_marked",
            "DROP TRIGGER refuse_quarantine",
        ],
        Backend::Postgres => &[
            "DROP TRIGGER refuse_marked ON dead_letters",
            "DROP TRIGGER refuse_quarantine ON quarantine",
        ],
    };
    for sql in sqls {
        match backend {
            Backend::Sqlite => {
                let pool = sqlx::SqlitePool::connect(url).await.unwrap();
                sqlx::query(sql).execute(&pool).await.unwrap();
                pool.close().await;
            }
            Backend::Postgres => {
                let pool = sqlx::PgPool::connect(url).await.unwrap();
                sqlx::query(sql).execute(&pool).await.unwrap();
                pool.close().await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_records_are_split_out_reduced_or_quarantined_then_retried() {
    let topic = unique("dlq_refused");
    create_topic(&topic, 2, &[]).await.unwrap();
    let mut records: Vec<TestRecord> = (0..40)
        .map(|i| TestRecord {
            key: Some(format!("ok-{i}").into_bytes()),
            value: Some(format!("value {i}").into_bytes()),
            headers: vec![
                h("kafka_dlt-exception-fqcn", b"com.example.Fine"),
                h("kafka_dlt-exception-stacktrace", b"at Fine.java:1"),
            ],
            partition: Some(i % 2),
            timestamp_ms: None,
        })
        .collect();
    // Refused as decoded (its stack trace), accepted in reduced form (which has none).
    records[7].headers[1] = h("kafka_dlt-exception-stacktrace", b"at refuse-me.java:1");
    // Refused in both forms (its key): quarantined with its record.
    records[12].key = Some(b"poison-1".to_vec());
    // Refused in both forms, and quarantine refuses its record: kept without it.
    records[23].key = Some(b"poison-2".to_vec());
    let positions = produce(&topic, &records).await.unwrap();

    for backend in Backend::ALL {
        let (url, _dir) = fresh_database(backend).await.unwrap();
        let store = Store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        install_refusals(backend, &url, positions[23]).await;

        let group = unique("group");
        let ingest = start_ingest(&store, ingest_config(&[&topic], &group));
        ingest
            .wait_for_count(&store, &topic, 38, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{backend:?}: {e:#}"));
        wait_all_committed(&group, &topic).await;
        let snap = ingest.status.snapshot();
        assert!(snap.ready, "{backend:?}: {snap:?}");
        assert_eq!(snap.records_reduced, 1, "{backend:?}: {snap:?}");
        assert_eq!(snap.records_quarantined, 2, "{backend:?}: {snap:?}");
        assert!(snap.batches_split >= 1, "{backend:?}: {snap:?}");
        ingest.stop().await.unwrap();

        let stored = dead_letters_in(&store, &topic).await.unwrap();
        assert_eq!(stored.len(), 38, "{backend:?}");
        for (sent, (p, o)) in records.iter().zip(&positions) {
            let Some(d) = stored
                .iter()
                .find(|d| d.record.dlq_partition == *p && d.record.dlq_offset == *o)
            else {
                continue;
            };
            assert_stored_exactly(sent, &d.record);
        }
        let reduced = stored
            .iter()
            .find(|d| d.record.key == records[7].key)
            .expect("the reduced record");
        assert_eq!(reduced.normalized.stack_trace, None);
        assert_eq!(
            reduced.normalized.error_class.as_deref(),
            Some("com.example.Fine")
        );
        assert!(reduced.summary.malformed);
        assert!(reduced.normalized.decode_warnings[0].contains("refused by the test trigger"));

        // Quarantine: both records, with coordinates and errors; the second without payload.
        assert_eq!(store.quarantine_count().await.unwrap(), 2, "{backend:?}");
        let q = store.list_quarantine(10, None).await.unwrap();
        let q12 = q
            .iter()
            .find(|q| (q.dlq_partition, q.dlq_offset) == positions[12]);
        let q12 = q12.expect("record 12 quarantined");
        let q23 = q
            .iter()
            .find(|q| (q.dlq_partition, q.dlq_offset) == positions[23]);
        let q23 = q23.expect("record 23 quarantined");
        assert_eq!(q12.dlq_topic, topic);
        assert!(q12.payload_kept && !q23.payload_kept, "{q:?}");
        assert!(q12.error.contains("full form") && q12.error.contains("reduced form"));
        assert!(q23.error.contains("could not be kept"), "{}", q23.error);
        assert_eq!(q12.attempts, 1);
        let (_, raw) = store.quarantined(q12.id).await.unwrap().unwrap();
        let raw = raw.expect("record 12's raw record is kept");
        assert_stored_exactly(&records[12], &raw);

        // While the cause remains, a retry leaves them (one more attempt each).
        let report = redrive_core::ingest::retry_quarantined(&store, None)
            .await
            .unwrap();
        assert_eq!(
            (
                report.tried,
                report.still_quarantined,
                report.without_payload
            ),
            (2, 1, 1),
            "{backend:?}: {report:?}"
        );
        let again = store.quarantined(q12.id).await.unwrap().unwrap().0;
        assert_eq!(again.attempts, 2);

        // After the fix (the "upgrade"), a retry stores what was kept.
        drop_refusals(backend, &url).await;
        let report = redrive_core::ingest::retry_quarantined(&store, Some(&[q12.id, q23.id]))
            .await
            .unwrap();
        assert_eq!(
            (report.tried, report.stored, report.without_payload),
            (2, 1, 1),
            "{backend:?}: {report:?}"
        );
        assert_eq!(store.quarantine_count().await.unwrap(), 1);
        let back = dead_letters_in(&store, &topic).await.unwrap();
        let d12 = back
            .iter()
            .find(|d| (d.record.dlq_partition, d.record.dlq_offset) == positions[12])
            .expect("record 12 stored by the retry");
        assert_stored_exactly(&records[12], &d12.record);
        assert_eq!(d12.summary.convention, Convention::SpringDlt);
    }
}

/// What an on-call engineer sees of the quarantine: `/metrics`, the API, the page and the CLI,
/// and a retry from the API and from the CLI; through the real binary on both databases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quarantine_is_counted_listed_shown_and_retried() {
    use crate::support::{Auth, Csrf, TestApp};
    use base64::Engine as _;
    use serde_json::{json, Value};

    let markup = "<script>alert(1)</script>";
    let kept = RawRecord {
        dlq_topic: "orders.DLT".into(),
        dlq_partition: 2,
        dlq_offset: 77,
        timestamp_ms: Some(1_796_104_800_000),
        key: Some(markup.as_bytes().to_vec()),
        value: Some(vec![0, 0xff, 1]),
        headers: vec![Header {
            name: "kafka_dlt-exception-fqcn".into(),
            value: Some(b"com.example.Quarantined".to_vec()),
        }],
    };
    let lost = RawRecord {
        dlq_offset: 78,
        ..kept.clone()
    };
    for backend in Backend::ALL {
        let app = TestApp::start_on(backend, &[]).await;
        let token = app.admin_token().await;
        let now = 1_796_104_900_000;
        let why = format!("full form: refused {markup}; reduced form: refused");
        assert!(app
            .store
            .quarantine_record(&kept, &why, true, now)
            .await
            .unwrap());
        assert!(app
            .store
            .quarantine_record(&lost, &why, false, now)
            .await
            .unwrap());
        // A redelivery of the same coordinates does not add a row.
        assert!(!app
            .store
            .quarantine_record(&kept, &why, true, now)
            .await
            .unwrap());

        let text = app
            .get("/metrics", Auth::Bearer(&token))
            .await
            .text()
            .await
            .unwrap();
        for line in [
            "redrive_quarantined_records 2",
            "# TYPE redrive_ingest_records_quarantined_total counter",
            "# TYPE redrive_ingest_records_reduced_total counter",
        ] {
            assert!(
                text.contains(line),
                "{backend:?}: /metrics lacks {line:?}:\n{text}"
            );
        }

        let res = app
            .get("/api/v1/quarantine?limit=1", Auth::Bearer(&token))
            .await;
        assert_eq!(res.status(), 200);
        let page: Value = res.json().await.unwrap();
        assert_eq!(page["total"], 2, "{page}");
        assert_eq!(page["items"][0]["dlq_offset"], 78, "newest first: {page}");
        assert_eq!(page["items"][0]["payload_kept"], false);
        let before = page["next_before"].as_i64().expect("a next page");
        let res = app
            .get(
                &format!("/api/v1/quarantine?before={before}"),
                Auth::Bearer(&token),
            )
            .await;
        let page: Value = res.json().await.unwrap();
        assert_eq!(page["items"][0]["dlq_offset"], 77, "{page}");
        assert!(page["next_before"].is_null());
        let kept_id = page["items"][0]["id"].as_i64().unwrap();
        let res = app
            .get(
                &format!("/api/v1/quarantine/{kept_id}"),
                Auth::Bearer(&token),
            )
            .await;
        let one: Value = res.json().await.unwrap();
        let b64 = base64::engine::general_purpose::STANDARD;
        assert_eq!(one["record"]["key"], b64.encode(markup), "{one}");
        assert_eq!(one["record"]["value"], b64.encode([0u8, 0xff, 1]));
        assert_eq!(one["error"], why);
        assert_eq!(
            app.get("/api/v1/quarantine/999999", Auth::Bearer(&token))
                .await
                .status(),
            404
        );
        assert_eq!(
            app.get("/api/v1/quarantine?limit=0", Auth::Bearer(&token))
                .await
                .status(),
            400
        );
        assert_eq!(
            app.get("/api/v1/quarantine", Auth::None).await.status(),
            401
        );

        // The page, as a browser without JavaScript gets it.
        let res = app.get("/quarantine", Auth::Bearer(&token)).await;
        assert_eq!(res.status(), 200);
        let html = res.text().await.unwrap();
        assert!(html.contains("orders.DLT/2@77"), "{html}");
        assert!(html.contains("2 record(s) in quarantine"));
        assert!(html.contains("not kept: read it from Kafka"));
        assert!(!html.contains("<script>alert(1)"), "markup is inert");

        // A viewer may look but not retry.
        app.add_user("watcher", "viewer", "a long passphrase").await;
        let viewer = app.create_token("watcher").await;
        let res = app
            .post_json(
                "/api/v1/quarantine/retry",
                Auth::Bearer(&viewer),
                Csrf::Right,
                &json!({"all": true}),
            )
            .await;
        assert_eq!(res.status(), 403);
        let res = app
            .post_json(
                "/api/v1/quarantine/retry",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"ids": [], "all": true}),
            )
            .await;
        assert_eq!(res.status(), 422);

        // The CLI lists them, then a retry stores the one whose record was kept.
        let (code, out, err) = app.cli(&["quarantine", "list"], None).await;
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(
            out.contains("orders.DLT/2@77") && out.contains("orders.DLT/2@78"),
            "{out}"
        );
        assert!(err.contains("2 record(s) in quarantine"), "{err}");
        let (code, out, err) = app.cli(&["quarantine", "retry", "--all"], None).await;
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(
            out.contains("tried 2: stored 1,") && out.contains("without a kept record 1"),
            "{out}"
        );
        assert_eq!(app.store.quarantine_count().await.unwrap(), 1);
        let stored = app
            .store
            .list(&redrive_core::ListQuery::default())
            .await
            .unwrap();
        assert_eq!(stored.items.len(), 1);
        assert_eq!(stored.items[0].dlq_offset, 77);
        assert_eq!(
            stored.items[0].error_class.as_deref(),
            Some("com.example.Quarantined")
        );
        let ok_retries = |rows: Vec<redrive_core::actions::AuditEntry>| {
            rows.iter().filter(|a| a.outcome.starts_with("ok")).count()
        };
        assert_eq!(ok_retries(app.audit_of("quarantine_retry").await), 1);

        // The API retry of what is left: nothing to store, said so.
        let lost_id = app.store.list_quarantine(10, None).await.unwrap()[0].id;
        let res = app
            .post_json(
                "/api/v1/quarantine/retry",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"ids": [lost_id]}),
            )
            .await;
        assert_eq!(res.status(), 200);
        let report: Value = res.json().await.unwrap();
        assert_eq!(report["tried"], 1, "{report}");
        assert_eq!(report["without_payload"], 1, "{report}");
        assert_eq!(ok_retries(app.audit_of("quarantine_retry").await), 2);
        // The viewer's refused attempt is in the trail too.
        let denied = app.audit_of("quarantine_retry").await;
        assert!(denied
            .iter()
            .any(|a| a.outcome == "denied" && a.actor == "watcher"));
    }
}
