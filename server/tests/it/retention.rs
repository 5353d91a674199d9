//! Retention, backpressure and the archive (`docs/retention.md`), through the real binary on
//! SQLite and PostgreSQL, with the real broker and a real S3-compatible server (moto, from
//! PyPI, installed by `scripts/setup-moto`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use redrive_core::model::{NewDeadLetter, Status};
use redrive_core::store::Store;
use redrive_core::Filter;
use redrive_testkit::fixtures::stored_dead_letter;
use redrive_testkit::ingest::{
    assert_stored_exactly, committed_offsets, dead_letters_in, end_offsets, ingest_config,
    start_ingest,
};
use redrive_testkit::{
    create_topic, fresh_database, kafka_brokers, produce, repo_root, unique, Backend, TestRecord,
};
use serde_json::{json, Value};

use redrive_core::actions::{AuditEntry, AuditQuery};
use redrive_core::retention::{Backpressure, RetentionConfig, RetentionStatus};

use crate::support::{eventually, run_redrive, Auth, Csrf, TestApp};

pub(crate) async fn audit_of(store: &Store, action: &str) -> Vec<AuditEntry> {
    let q = AuditQuery {
        action: Some(action.to_string()),
        limit: 100,
        ..AuditQuery::default()
    };
    store.audit(&q).await.expect("audit").items
}

pub(crate) const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn write_config(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("redrive.toml");
    std::fs::write(&path, body).expect("write config");
    path
}

/// `n` dead letters of `topic` (offsets from `first`), dead-lettered `age_ms` ago, one ms apart.
pub(crate) fn aged(topic: &str, first: i64, n: i64, age_ms: i64) -> Vec<NewDeadLetter> {
    let t0 = now_ms() - age_ms;
    (first..first + n)
        .map(|o| {
            let mut d = stored_dead_letter(topic, o, Default::default());
            d.dead_lettered_at_ms = t0 + o;
            d.ingested_at_ms = t0 + o;
            d
        })
        .collect()
}

async fn count(store: &Store, topic: &str, status: Option<Status>) -> i64 {
    store
        .count(&Filter {
            dlq_topic: Some(topic.to_string()),
            status,
            ..Filter::default()
        })
        .await
        .expect("count")
}

/// Every status (the list's default hides `deleted`).
pub(crate) async fn total(store: &Store, topic: &str) -> i64 {
    count(store, topic, None).await + count(store, topic, Some(Status::Deleted)).await
}

/// The overview's maintained aggregates (migration 0006) agree with a count of the rows, per
/// DLQ topic and status, after purges.
async fn assert_stats_exact(store: &Store, topics: &[&str]) {
    let snap = store.stats(now_ms()).await.expect("stats");
    for topic in topics {
        for status in Status::ALL {
            let agg: i64 = snap
                .pairs
                .iter()
                .filter(|p| p.dlq_topic.as_deref() == Some(*topic))
                .map(|p| p.counts.get(status))
                .sum();
            assert_eq!(
                agg,
                count(store, topic, Some(status)).await,
                "{topic} {status:?}"
            );
        }
    }
}

/// Live limits by age and by count, deleted ones by their own age; every purge in chunks of
/// `chunk_rows` (counted), one run and one audit row per run, `new` kept unless the topic's
/// policy says `purge_new`, and the purge counted in `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purges_by_age_count_and_deleted_age_in_chunks() {
    for backend in Backend::ALL {
        let mut records = aged("keep.DLT", 0, 5, 10 * DAY_MS);
        records.extend(aged("age.DLT", 0, 250, 10 * DAY_MS));
        records.extend(aged("age.DLT", 250, 5, 0));
        records.extend(aged("count.DLT", 0, 50, 0));
        let cfg_dir = tempfile::tempdir().unwrap();
        let cfg = write_config(
            cfg_dir.path(),
            r#"
[retention]
interval_ms = 300
chunk_rows = 100
[retention.default]
max_age_ms = 86400000
[retention.topics."age.DLT"]
purge_new = true
[retention.topics."count.DLT"]
max_count = 20
purge_new = true
max_age_ms = 0
deleted_max_age_ms = 1
"#,
        );
        let app = TestApp::with_records(
            backend,
            &records,
            &[("REDRIVE_CONFIG", cfg.to_str().unwrap())],
        )
        .await;
        let store = app.store.clone();
        // The run is over when its record says so (its audit row is written then).
        eventually("the first purge run", Duration::from_secs(30), || async {
            let runs = store.retention_runs(10).await.unwrap();
            runs.first().is_some_and(|r| r.status == "done")
        })
        .await;
        assert_eq!(count(&store, "age.DLT", None).await, 5, "{backend:?}");
        assert_eq!(count(&store, "count.DLT", None).await, 20, "{backend:?}");
        assert_eq!(
            count(&store, "keep.DLT", None).await,
            5,
            "{backend:?}: `new` is kept"
        );
        // The newest 20 of count.DLT remain.
        let page = store
            .list(&redrive_core::ListQuery {
                filter: Filter {
                    dlq_topic: Some("count.DLT".into()),
                    ..Filter::default()
                },
                cursor: None,
                limit: 100,
            })
            .await
            .unwrap();
        let min_offset = page.items.iter().map(|s| s.dlq_offset).min().unwrap();
        assert_eq!(min_offset, 30, "{backend:?}: oldest first");

        assert_stats_exact(&store, &["keep.DLT", "age.DLT", "count.DLT"]).await;
        let runs = store.retention_runs(10).await.unwrap();
        assert_eq!(runs.len(), 1, "{backend:?}: one run: {runs:?}");
        let run = &runs[0];
        assert_eq!((run.status.as_str(), run.purged), ("done", 280));
        // 250 by age in chunks of 100 (3), 30 by count (1): never one transaction for all.
        assert_eq!(run.chunks, 4, "{backend:?}: {run:?}");
        let audit = app.audit_of("retention_purge").await;
        assert_eq!(audit.len(), 1, "{backend:?}");
        assert_eq!(audit[0].count, 280);
        assert_eq!(audit[0].actor, "(retention)");
        assert!(
            audit[0].outcome.contains("in 4 chunks"),
            "{}",
            audit[0].outcome
        );
        let detail: Value = serde_json::from_str(audit[0].filter.as_deref().unwrap()).unwrap();
        assert!(detail
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["reason"] == "max_age"
                && g["purged"] == 250
                && g["dlq_topic"] == "age.DLT"));

        // Deleted ones go after their own age (1 ms), with their history.
        let token = app.admin_token().await;
        let res = app
            .post_json(
                "/api/v1/dead-letters/delete",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"ids": [page.items[0].id, page.items[1].id]}),
            )
            .await;
        assert!(res.status().is_success(), "{}", res.text().await.unwrap());
        let gone = page.items[0].id;
        eventually(
            "the deleted ones purged",
            Duration::from_secs(30),
            || async {
                let runs = store.retention_runs(10).await.unwrap();
                runs.len() == 2 && runs[0].status == "done"
            },
        )
        .await;
        assert_eq!(total(&store, "count.DLT").await, 18, "{backend:?}");
        assert!(store.history(gone).await.is_err(), "history gone with it");
        assert_stats_exact(&store, &["keep.DLT", "age.DLT", "count.DLT"]).await;
        assert_eq!(app.audit_of("retention_purge").await.len(), 2);

        let metrics = app
            .get("/metrics", Auth::Bearer(&token))
            .await
            .text()
            .await
            .unwrap();
        for line in [
            r#"redrive_retention_purged_total{dlq_topic="age.DLT",reason="max_age"} 250"#,
            r#"redrive_retention_purged_total{dlq_topic="count.DLT",reason="max_count"} 30"#,
            r#"redrive_retention_purged_total{dlq_topic="count.DLT",reason="deleted_max_age"} 2"#,
        ] {
            assert!(
                metrics.contains(line),
                "{backend:?}: no `{line}` in\n{metrics}"
            );
        }
    }
}

/// Backpressure: at `max_count` ingest of the topic pauses with the rest waiting in Kafka
/// (not committed), `/readyz` and `/metrics` say so; each delete frees space, ingest resumes,
/// and in the end every record is stored and committed — nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backpressure_pauses_ingest_and_loses_nothing() {
    for backend in Backend::ALL {
        let topic = unique("bp.DLT");
        let group = unique("bp-group");
        create_topic(&topic, 2, &[]).await.unwrap();
        let records: Vec<TestRecord> = (0..100)
            .map(|i| TestRecord {
                key: Some(format!("k{i}").into_bytes()),
                value: Some(format!("v{i}").into_bytes()),
                partition: Some(i % 2),
                ..TestRecord::default()
            })
            .collect();
        produce(&topic, &records).await.unwrap();
        let cfg_dir = tempfile::tempdir().unwrap();
        let cfg = write_config(
            cfg_dir.path(),
            &format!(
                "[retention]\ninterval_ms = 200\n[retention.topics.\"{topic}\"]\nmax_count = 30\naction = \"backpressure\"\n"
            ),
        );
        let brokers = kafka_brokers();
        let app = TestApp::start_on(
            backend,
            &[
                ("REDRIVE_CONFIG", cfg.to_str().unwrap()),
                ("REDRIVE_INGEST_ENABLED", "true"),
                ("REDRIVE_KAFKA_BROKERS", &brokers),
                ("REDRIVE_DLQ_TOPICS", &topic),
                ("REDRIVE_GROUP_ID", &group),
                ("REDRIVE_INGEST_BATCH_SIZE", "10"),
            ],
        )
        .await;
        let token = app.admin_token().await;
        let store = app.store.clone();
        let paused = |app: &TestApp| {
            let token = token.clone();
            let url = app.url("/readyz");
            async move {
                let body: Value = reqwest::Client::new()
                    .get(url)
                    .bearer_auth(&token)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                body["retention"]["paused_topics"]
                    .as_array()
                    .map(|a| !a.is_empty())
                    .unwrap_or(false)
            }
        };
        eventually(
            "the topic paused at its limit",
            Duration::from_secs(60),
            || async { paused(&app).await },
        )
        .await;
        let live = count(&store, &topic, None).await;
        assert!(
            (30..=40).contains(&live),
            "{backend:?}: {live} live: at most one batch over"
        );
        let committed: i64 = committed_offsets(&group, &topic)
            .await
            .unwrap()
            .values()
            .sum();
        assert!(
            committed < 100,
            "{backend:?}: records wait in Kafka ({committed} committed)"
        );
        let metrics = app
            .get("/metrics", Auth::Bearer(&token))
            .await
            .text()
            .await
            .unwrap();
        assert!(
            metrics.contains(&format!(
                "redrive_ingest_backpressure_paused{{dlq_topic=\"{topic}\",reason=\"max_count\"}} 1"
            )),
            "{metrics}"
        );

        // Free space until everything is in: each delete lets ingest resume.
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while total(&store, &topic).await < 100 {
            assert!(
                std::time::Instant::now() < deadline,
                "{backend:?}: stuck at {}",
                total(&store, &topic).await
            );
            let res = app
                .post_json(
                    "/api/v1/dead-letters/delete",
                    Auth::Bearer(&token),
                    Csrf::Right,
                    &json!({"filter": {"dlq_topic": topic}}),
                )
                .await;
            assert!(res.status().is_success(), "{}", res.text().await.unwrap());
            eventually(
                "ingest resumed and paused again, or done",
                Duration::from_secs(60),
                || async {
                    total(&store, &topic).await == 100
                        || (count(&store, &topic, None).await >= 30 && paused(&app).await)
                },
            )
            .await;
        }
        assert_eq!(total(&store, &topic).await, 100, "{backend:?}");
        let end = end_offsets(&topic).await.unwrap();
        eventually(
            "every offset committed",
            Duration::from_secs(30),
            || async { committed_offsets(&group, &topic).await.unwrap() == end },
        )
        .await;
    }
}

/// Starts `moto_server` (installed by `scripts/setup-moto`) on a free port with `bucket`;
/// returns the child (killed on drop) and the endpoint.
async fn moto(bucket: &str) -> (tokio::process::Child, String) {
    let out = std::process::Command::new(repo_root().join("scripts/setup-moto"))
        .output()
        .expect("scripts/setup-moto");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bin = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let port = crate::support::free_port();
    let child = tokio::process::Command::new(bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("moto_server");
    let endpoint = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    eventually("moto_server up", Duration::from_secs(30), || async {
        client.get(&endpoint).send().await.is_ok()
    })
    .await;
    let res = client
        .put(format!("{endpoint}/{bucket}"))
        .send()
        .await
        .expect("create bucket");
    assert!(res.status().is_success(), "create bucket: {}", res.status());
    (child, endpoint)
}

fn awkward_records() -> Vec<TestRecord> {
    let h = |n: &str, v: &[u8]| (n.to_string(), Some(v.to_vec()));
    let mut out = vec![
        TestRecord {
            key: Some(b"user-17".to_vec()),
            value: None,
            headers: vec![h("original_topic", b"users")],
            ..TestRecord::default()
        },
        TestRecord {
            key: None,
            value: Some(vec![0xff, 0x00, 0xfe, b'\n', 0x80]),
            headers: vec![
                h("x-dup", b"first"),
                ("x-null".to_string(), None),
                h("x-dup", &[0xc3, 0x28]),
                h("x-empty", b""),
            ],
            ..TestRecord::default()
        },
        TestRecord {
            key: Some(vec![]),
            value: Some(vec![]),
            ..TestRecord::default()
        },
    ];
    for i in 0..40 {
        out.push(TestRecord::new(
            &format!("{{\"n\":{i}}}"),
            &[("error", b"boom")],
        ));
    }
    for r in &mut out {
        r.partition = Some(0);
    }
    out
}

/// Purge with the archive first, to a directory and to an S3-compatible server, then
/// `redrive archive restore` gives back the produced bytes exactly; restoring again adds
/// nothing; a damaged object is refused by its checksum; an on-demand archive of a filter
/// restores the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_archives_first_and_restore_is_byte_exact() {
    let (_moto, endpoint) = moto("dlq-archive").await;
    for backend in Backend::ALL {
        for s3 in [false, true] {
            let topic = unique("arch.DLT");
            create_topic(&topic, 1, &[]).await.unwrap();
            let sent = awkward_records();
            produce(&topic, &sent).await.unwrap();
            let (db_url, dir) = fresh_database(backend).await.unwrap();
            let store = Store::connect(&db_url).await.unwrap();
            store.migrate().await.unwrap();
            let ingest = start_ingest(&store, ingest_config(&[&topic], &unique("arch-group")));
            ingest
                .wait_for_count(&store, &topic, sent.len() as i64, Duration::from_secs(60))
                .await
                .unwrap();
            ingest.stop().await.unwrap();

            let archive_dir = tempfile::tempdir().unwrap();
            let archive = if s3 {
                format!(
                    "location = \"s3://dlq-archive/{topic}\"\ns3_endpoint = \"{endpoint}\"\n\
                     s3_region = \"us-east-1\"\ns3_access_key_id = \"test\"\n\
                     s3_secret_access_key = \"test\"\ns3_allow_http = true\n"
                )
            } else {
                format!("location = \"{}\"\n", archive_dir.path().display())
            };
            // One purge run, as the leader's retention task runs it (in process: a server
            // would purge the restored dead letters again).
            let toml_text = format!(
                "interval_ms = 300\nchunk_rows = 10\n[default]\nmax_age_ms = 1\n\
                 purge_new = true\n[archive]\n{archive}"
            );
            let config: RetentionConfig = toml::from_str(&toml_text).unwrap();
            let target = redrive_core::retention::purge::archive_target(&config).unwrap();
            let status = RetentionStatus::default();
            let bp = std::sync::Arc::new(Backpressure::new(&config));
            let what = format!("{backend:?} s3={s3}");
            let report = redrive_core::retention::purge::tick(
                &config,
                &store,
                &bp,
                &status,
                target.as_ref(),
                true,
            )
            .await
            .unwrap()
            .expect("a purge run");
            assert_eq!((report.archived, report.purged), (43, 43), "{what}");
            assert_eq!(report.chunks, 5, "{what}: chunks of 10");
            assert_eq!(total(&store, &topic).await, 0);
            let runs = store.retention_runs(10).await.unwrap();
            assert_eq!(runs.len(), 1, "{what}: {runs:?}");
            assert_eq!(
                (runs[0].archived, runs[0].purged, runs[0].chunks),
                (43, 43, 5)
            );
            let manifest = runs[0].archive_location.clone().expect("archive location");
            let audit = audit_of(&store, "retention_purge").await;
            assert!(
                audit[0].outcome.contains("archived first to"),
                "{}",
                audit[0].outcome
            );

            // The CLI reads the S3 settings from the file; retention off for the server below.
            let cfg_dir = tempfile::tempdir().unwrap();
            let cfg = write_config(
                cfg_dir.path(),
                &format!("[retention]\nenabled = false\n[retention.archive]\n{archive}"),
            );
            let cfg_s = cfg.to_str().unwrap().to_string();
            let env = [
                ("REDRIVE_DATABASE_URL", db_url.as_str()),
                ("REDRIVE_CONFIG", &cfg_s),
            ];
            let (code, out, err) =
                run_redrive(&["archive", "restore", &manifest], &env, None).await;
            assert_eq!(code, Some(0), "{what}: {out}\n{err}");
            assert!(out.contains("43 restored"), "{what}: {out}");
            let stored = dead_letters_in(&store, &topic).await.unwrap();
            assert_eq!(stored.len(), sent.len(), "{what}");
            let mut stored = stored;
            stored.sort_by_key(|d| d.record.dlq_offset);
            for (s, d) in sent.iter().zip(&stored) {
                assert_stored_exactly(s, &d.record);
            }
            // Again: idempotent on the DLQ coordinates.
            let (code, out, _) = run_redrive(&["archive", "restore", &manifest], &env, None).await;
            assert_eq!(code, Some(0));
            assert!(
                out.contains("0 restored, 43 already present"),
                "{what}: {out}"
            );
            assert_eq!(audit_of(&store, "archive_restore").await.len(), 2);
            let history = store.history(stored[0].summary.id).await.unwrap();
            assert!(
                history.iter().any(|e| e.kind == "archive_restored"),
                "{history:?}"
            );

            // On demand, for a filter (the API), restored the same way.
            let app = TestApp::serve(
                db_url.clone(),
                store.clone(),
                dir,
                &[("REDRIVE_CONFIG", &cfg_s)],
            )
            .await;
            let token = app.admin_token().await;
            let res = app
                .post_json(
                    "/api/v1/archives",
                    Auth::Bearer(&token),
                    Csrf::Right,
                    &json!({"filter": {"dlq_topic": topic}}),
                )
                .await;
            assert_eq!(res.status().as_u16(), 201, "{what}");
            let body: Value = res.json().await.unwrap();
            assert_eq!(body["records"], 43);
            let again = body["manifest"].as_str().unwrap().to_string();
            let (code, out, err) = run_redrive(&["archive", "restore", &again], &env, None).await;
            assert_eq!(code, Some(0), "{err}");
            assert!(out.contains("43 already present"), "{out}");

            if !s3 {
                // A damaged object is refused before anything is stored.
                let obj = Path::new(&manifest).with_file_name("dead-letters.jsonl.gz");
                let mut bytes = std::fs::read(&obj).unwrap();
                let last = bytes.len() - 1;
                bytes[last] ^= 0xff;
                std::fs::write(&obj, bytes).unwrap();
                let (code, _, err) =
                    run_redrive(&["archive", "restore", &manifest], &env, None).await;
                assert_ne!(code, Some(0));
                assert!(err.contains("checksum"), "{err}");
            }
        }
    }
}
