//! The actions on dead letters against real databases (SQLite and PostgreSQL): dry runs agree
//! with what the actions touch, delete/restore, cancel, one audit row per action, each dead
//! letter's history, and an audit log the database itself keeps append-only. The history
//! through `published` runs the relay against the real broker.

use std::sync::Arc;
use std::time::Duration;

use redrive_core::actions::{
    Actor, AuditQuery, JobStatus, NewAuditEntry, ReplayRequest, Selection,
};
use redrive_core::model::{Convention, NewDeadLetter, Normalized, RawRecord, Status};
use redrive_core::replay::{self, RelayConfig, RelayStatus};
use redrive_core::store::{Store, StoreError};
use redrive_core::{Filter, ListQuery};
use redrive_testkit::{create_topic, fresh_database, kafka_brokers, unique, wait_for, Backend};
use tokio_util::sync::CancellationToken;

/// A fresh migrated store plus its URL (for the direct SQL the tests need) and its temp dir.
async fn store_with_url(backend: Backend) -> (Store, String, redrive_testkit::TestDatabase) {
    let (url, dir) = fresh_database(backend).await.expect("a fresh database");
    let store = Store::connect(&url).await.expect("connect");
    store.migrate().await.expect("migrate");
    (store, url, dir)
}

/// Runs one statement on the database behind `url`, outside the store.
async fn exec_sql(backend: Backend, url: &str, sql: &str) -> Result<u64, sqlx::Error> {
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await?;
            let r = sqlx::query(sql)
                .execute(&pool)
                .await
                .map(|r| r.rows_affected());
            pool.close().await;
            r
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await?;
            let r = sqlx::query(sql)
                .execute(&pool)
                .await
                .map(|r| r.rows_affected());
            pool.close().await;
            r
        }
    }
}

/// A dead letter from `source` (None = no source topic) with error class `class`.
fn dl(offset: i64, source: Option<&str>, class: &str) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: "orders.DLT".to_string(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(1_764_568_800_000 + offset),
            key: Some(format!("k{offset}").into_bytes()),
            value: Some(format!("v{offset}").into_bytes()),
            headers: vec![],
        },
        convention: Convention::Unknown,
        normalized: Normalized {
            source_topic: source.map(str::to_string),
            error_class: Some(class.to_string()),
            ..Normalized::default()
        },
        fingerprint: format!("{:016x}", class.len()),
        dead_lettered_at_ms: 1_764_568_800_000 + offset,
        ingested_at_ms: 1_764_568_800_500 + offset,
    }
}

fn operator(name: &str) -> Actor {
    Actor::operator(name).with_client("203.0.113.7", "Mozilla/5.0 (test)")
}

fn class_filter(class: &str) -> Filter {
    Filter {
        error_class: Some(class.to_string()),
        ..Filter::default()
    }
}

/// Ids of every dead letter matching `filter`, newest first.
async fn ids(store: &Store, filter: Filter) -> Vec<i64> {
    let page = store
        .list(&ListQuery {
            filter,
            limit: 500,
            cursor: None,
        })
        .await
        .expect("list");
    page.items.iter().map(|s| s.id).collect()
}

async fn status_of(store: &Store, id: i64) -> Status {
    store
        .get(id)
        .await
        .expect("get")
        .expect("exists")
        .summary
        .status
}

async fn audit_rows(store: &Store, action: &str) -> Vec<redrive_core::actions::AuditEntry> {
    store
        .audit(&AuditQuery {
            action: Some(action.to_string()),
            limit: 1000,
            ..AuditQuery::default()
        })
        .await
        .expect("audit")
        .items
}

/// 6 × A (2 without a source topic), 4 × B.
async fn seeded(backend: Backend) -> (Store, String, redrive_testkit::TestDatabase) {
    let (store, url, dir) = store_with_url(backend).await;
    let mut batch = Vec::new();
    for i in 0..6 {
        let source = match i {
            0 | 1 => None,
            2 | 3 => Some("orders"),
            _ => Some("payments"),
        };
        batch.push(dl(i, source, "A"));
    }
    for i in 6..10 {
        batch.push(dl(i, Some("orders"), "B"));
    }
    assert_eq!(store.insert_batch(&batch).await.expect("insert"), 10);
    (store, url, dir)
}

#[tokio::test]
async fn dry_run_counts_match_what_the_actions_touch() {
    for backend in Backend::ALL {
        let (store, _url, _dir) = seeded(backend).await;
        let sel_a = Selection::Filter(class_filter("A"));

        let dry = store.dry_run(&sel_a, None).await.expect("dry run");
        assert_eq!(dry.total, 6, "{backend:?}");
        assert_eq!(
            dry.per_target,
            vec![("orders".to_string(), 2), ("payments".to_string(), 2)]
        );
        assert_eq!(dry.without_target, 2);
        assert_eq!(dry.skipped, 0);
        assert_eq!(dry.queued(), 4);

        // With an override every record has a target.
        let dry_over = store
            .dry_run(&sel_a, Some("replays"))
            .await
            .expect("dry run");
        assert_eq!(dry_over.per_target, vec![("replays".to_string(), 6)]);
        assert_eq!(dry_over.without_target, 0);
        assert!(matches!(
            store.dry_run(&sel_a, Some("bad topic!")).await,
            Err(StoreError::Invalid(_))
        ));

        // Delete one of A first: the next dry run (by ids, which include deleted ones) skips it.
        let a_ids = ids(&store, class_filter("A")).await;
        let deleted = a_ids[0];
        let sel_one = Selection::Ids(vec![deleted]);
        assert_eq!(store.delete_dry_run(&sel_one).await.expect("dry"), 1);
        assert_eq!(
            store
                .delete(&operator("ann"), &sel_one, Some("noise"))
                .await
                .expect("delete"),
            1
        );
        assert_eq!(store.delete_dry_run(&sel_one).await.expect("dry"), 0);

        let sel_ids = Selection::Ids(a_ids.clone());
        let dry = store.dry_run(&sel_ids, None).await.expect("dry run");
        assert_eq!(dry.total, 6);
        assert_eq!(dry.skipped, 1);
        let job = store
            .request_replay(
                &operator("ann"),
                &ReplayRequest {
                    selection: sel_ids.clone(),
                    target_topic: None,
                    rate_per_sec: Some(50),
                    reason: Some("incident 42 fixed".to_string()),
                    options: Default::default(),
                },
            )
            .await
            .expect("replay");
        assert_eq!(job.total, dry.queued(), "{backend:?}: dry run = queued");
        assert_eq!(job.skipped, dry.skipped + dry.without_target);
        assert_eq!(job.skipped_without_target, dry.without_target);
        assert_eq!(job.status, JobStatus::Running);
        assert_eq!(job.rate_per_sec, Some(50));
        assert_eq!(job.created_by, "ann");
        assert_eq!(store.job(&job.id).await.expect("job"), Some(job.clone()));

        // Queued ones are replay_pending; the rest kept their status.
        let mut pending = 0;
        for id in &a_ids {
            match status_of(&store, *id).await {
                Status::ReplayPending => pending += 1,
                Status::New | Status::Deleted => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(pending, job.total);

        // A second replay of the same selection skips the pending ones and queues nothing.
        let dry2 = store.dry_run(&sel_ids, None).await.expect("dry run");
        assert_eq!(dry2.queued(), 0);
        let job2 = store
            .request_replay(
                &operator("ann"),
                &ReplayRequest {
                    selection: sel_ids,
                    target_topic: None,
                    rate_per_sec: None,
                    reason: None,
                    options: Default::default(),
                },
            )
            .await
            .expect("replay");
        assert_eq!(job2.total, 0);
        assert_eq!(job2.status, JobStatus::Finished, "nothing to do: finished");

        // Delete by filter: the dry run is exactly what gets deleted (pending ones are not).
        let sel_all = Selection::Filter(Filter::default());
        let would = store.delete_dry_run(&sel_all).await.expect("dry");
        assert_eq!(would, 10 - 1 - job.total);
        let n = store
            .delete(&operator("bob"), &sel_all, None)
            .await
            .expect("delete");
        assert_eq!(n as i64, would);

        // Bad requests are refused before anything changes.
        for bad in [
            ReplayRequest {
                selection: Selection::Ids(vec![1]),
                target_topic: Some("a/b".into()),
                rate_per_sec: None,
                reason: None,
                options: Default::default(),
            },
            ReplayRequest {
                selection: Selection::Ids(vec![1]),
                target_topic: None,
                rate_per_sec: Some(0),
                reason: None,
                options: Default::default(),
            },
        ] {
            assert!(matches!(
                store.request_replay(&operator("ann"), &bad).await,
                Err(StoreError::Invalid(_))
            ));
        }
        assert_eq!(audit_rows(&store, "replay").await.len(), 2);
    }
}

#[tokio::test]
async fn delete_hides_and_restore_brings_back_the_previous_status() {
    for backend in Backend::ALL {
        let (store, url, _dir) = seeded(backend).await;
        let b_ids = ids(&store, class_filter("B")).await;
        assert_eq!(b_ids.len(), 4);
        // One of them had failed a replay before: restore must bring that back, not `new`.
        exec_sql(
            backend,
            &url,
            &format!(
                "UPDATE dead_letters SET status = 'replay_failed' WHERE id = {}",
                b_ids[0]
            ),
        )
        .await
        .expect("set status");

        let sel = Selection::Filter(class_filter("B"));
        let n = store
            .delete(&operator("cat"), &sel, Some("known bad batch"))
            .await
            .expect("delete");
        assert_eq!(n, 4, "{backend:?}");
        assert!(ids(&store, class_filter("B")).await.is_empty(), "hidden");
        let deleted_filter = Filter {
            status: Some(Status::Deleted),
            ..class_filter("B")
        };
        let mut shown = ids(&store, deleted_filter.clone()).await;
        shown.sort_unstable();
        let mut want = b_ids.clone();
        want.sort_unstable();
        assert_eq!(shown, want, "visible under status=deleted");
        assert_eq!(store.count(&Filter::default()).await.expect("count"), 6);

        // Deleting again changes nothing (and says so).
        assert_eq!(
            store
                .delete(&operator("cat"), &sel, None)
                .await
                .expect("delete"),
            0
        );

        // Restore by the deleted filter.
        let sel_deleted = Selection::Filter(deleted_filter);
        assert_eq!(store.restore_dry_run(&sel_deleted).await.expect("dry"), 4);
        let n = store
            .restore(&operator("cat"), &sel_deleted, Some("false alarm"))
            .await
            .expect("restore");
        assert_eq!(n, 4);
        assert_eq!(status_of(&store, b_ids[0]).await, Status::ReplayFailed);
        for id in &b_ids[1..] {
            assert_eq!(status_of(&store, *id).await, Status::New);
        }
        assert_eq!(ids(&store, class_filter("B")).await.len(), 4);

        let h = store.history(b_ids[0]).await.expect("history");
        let kinds: Vec<&str> = h.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["ingested", "tier_assigned", "deleted", "restored"]);
        assert_eq!(h[2].actor.as_deref(), Some("cat"));
        assert_eq!(
            h[2].detail.as_deref(),
            Some("was replay_failed; reason: known bad batch")
        );
        assert_eq!(
            h[3].detail.as_deref(),
            Some("back to replay_failed; reason: false alarm")
        );
        assert!(matches!(
            store.history(i64::MAX).await,
            Err(StoreError::NotFound(_))
        ));
    }
}

#[tokio::test]
async fn every_action_writes_exactly_one_audit_row() {
    for backend in Backend::ALL {
        let (store, _url, _dir) = seeded(backend).await;
        let actor = operator("dan");
        let b_ids = ids(&store, class_filter("B")).await;

        let sel_ids = Selection::Ids(b_ids[..2].to_vec());
        store
            .delete(&actor, &sel_ids, Some("dupes"))
            .await
            .expect("delete");
        store
            .restore(&actor, &sel_ids, None)
            .await
            .expect("restore");
        let job = store
            .request_replay(
                &actor,
                &ReplayRequest {
                    selection: Selection::Filter(class_filter("A")),
                    target_topic: None,
                    rate_per_sec: None,
                    reason: Some("fixed in v2.3".into()),
                    options: Default::default(),
                },
            )
            .await
            .expect("replay");
        store.cancel_job(&actor, &job.id).await.expect("cancel");
        let token_actor = Actor {
            via_token: Some(7),
            ..actor.clone()
        };
        store
            .record_audit(&NewAuditEntry::by(&token_actor, "token_create", "ok"))
            .await
            .expect("record");
        store
            .record_audit(&NewAuditEntry {
                actor: String::new(),
                action: "sign_in_failed".into(),
                outcome: "denied".into(),
                client_ip: Some("198.51.100.1".into()),
                ..NewAuditEntry::default()
            })
            .await
            .expect("record");

        let all = store
            .audit(&AuditQuery::default())
            .await
            .expect("audit")
            .items;
        let actions: Vec<&str> = all.iter().map(|e| e.action.as_str()).collect();
        assert_eq!(
            actions,
            [
                "sign_in_failed",
                "token_create",
                "cancel_job",
                "replay",
                "restore",
                "delete"
            ],
            "{backend:?}: one row per action, newest first"
        );
        for e in &all[1..] {
            assert_eq!(e.actor, "dan");
            assert_eq!(e.client_ip.as_deref(), Some("203.0.113.7"));
            assert_eq!(e.user_agent.as_deref(), Some("Mozilla/5.0 (test)"));
            assert!(e.outcome.starts_with("ok"), "{e:?}");
        }
        let [failed, token, cancel, replay, restore, delete] = &all[..] else {
            panic!("six rows");
        };
        assert_eq!(failed.actor, "-");
        assert_eq!(failed.outcome, "denied");
        assert_eq!(token.via_token, Some(7));

        let want_ids = format!("[{},{}]", b_ids[0], b_ids[1]);
        assert_eq!(delete.count, 2);
        assert_eq!(delete.ids.as_deref(), Some(want_ids.as_str()));
        assert_eq!(delete.filter, None);
        assert_eq!(delete.reason.as_deref(), Some("dupes"));
        assert_eq!(restore.count, 2);
        assert_eq!(restore.reason, None);

        assert_eq!(replay.count, 4);
        assert_eq!(replay.ids, None);
        assert_eq!(replay.filter.as_deref(), Some(r#"{"error_class":"A"}"#));
        assert_eq!(replay.reason.as_deref(), Some("fixed in v2.3"));
        assert_eq!(replay.job_id.as_deref(), Some(job.id.as_str()));
        assert_eq!(
            replay.outcome,
            "ok: 4 queued, 2 skipped (2 without a target topic)"
        );
        assert_eq!(cancel.count, 4);
        assert_eq!(cancel.job_id.as_deref(), Some(job.id.as_str()));

        // Filters and keyset pages.
        let page = store
            .audit(&AuditQuery {
                actor: Some("dan".into()),
                limit: 2,
                ..AuditQuery::default()
            })
            .await
            .expect("audit");
        assert_eq!(page.items.len(), 2);
        let before: i64 = page
            .next_cursor
            .as_deref()
            .expect("more")
            .parse()
            .expect("decimal cursor");
        let rest = store
            .audit(&AuditQuery {
                actor: Some("dan".into()),
                before_id: Some(before),
                limit: 10,
                ..AuditQuery::default()
            })
            .await
            .expect("audit");
        assert_eq!(rest.items.len(), 3);
        assert_eq!(rest.next_cursor, None);
        let window = store
            .audit(&AuditQuery {
                from_ms: Some(delete.at_ms),
                to_ms: Some(delete.at_ms + 1),
                action: Some("delete".into()),
                ..AuditQuery::default()
            })
            .await
            .expect("audit");
        assert_eq!(window.items.len(), 1);
    }
}

#[tokio::test]
async fn cancel_releases_pending_rows() {
    for backend in Backend::ALL {
        let (store, url, _dir) = seeded(backend).await;
        let actor = operator("eve");
        let b_ids = ids(&store, class_filter("B")).await;
        // One was replayed before: a cancel must bring that status back.
        exec_sql(
            backend,
            &url,
            &format!(
                "UPDATE dead_letters SET status = 'replayed', replay_count = 1 WHERE id = {}",
                b_ids[0]
            ),
        )
        .await
        .expect("set status");
        let job = store
            .request_replay(
                &actor,
                &ReplayRequest {
                    selection: Selection::Filter(class_filter("B")),
                    target_topic: Some("elsewhere".into()),
                    rate_per_sec: None,
                    reason: None,
                    options: Default::default(),
                },
            )
            .await
            .expect("replay");
        assert_eq!(job.total, 4);
        assert_eq!(job.target_topic.as_deref(), Some("elsewhere"));

        let cancelled = store.cancel_job(&actor, &job.id).await.expect("cancel");
        assert_eq!(cancelled.status, JobStatus::Cancelled, "{backend:?}");
        assert_eq!(cancelled.cancelled, 4);
        assert!(cancelled.finished_at_ms.is_some());
        assert_eq!(status_of(&store, b_ids[0]).await, Status::Replayed);
        for id in &b_ids[1..] {
            assert_eq!(status_of(&store, *id).await, Status::New);
        }
        let h = store.history(b_ids[0]).await.expect("history");
        let kinds: Vec<&str> = h.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "ingested",
                "tier_assigned",
                "replay_requested",
                "replay_cancelled"
            ]
        );
        assert_eq!(h[2].detail.as_deref(), Some("to elsewhere"));
        assert_eq!(h[2].job_id.as_deref(), Some(job.id.as_str()));
        assert_eq!(h[3].detail.as_deref(), Some("back to replayed"));

        assert!(matches!(
            store.cancel_job(&actor, &job.id).await,
            Err(StoreError::Conflict(_))
        ));
        assert!(matches!(
            store.cancel_job(&actor, "no-such-job").await,
            Err(StoreError::NotFound(_))
        ));
        assert_eq!(audit_rows(&store, "cancel_job").await.len(), 1);
        let jobs = store.jobs(10).await.expect("jobs");
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].id, job.id);
        // The released dead letters can be replayed again.
        let again = store
            .request_replay(
                &actor,
                &ReplayRequest {
                    selection: Selection::Filter(class_filter("B")),
                    target_topic: None,
                    rate_per_sec: None,
                    reason: None,
                    options: Default::default(),
                },
            )
            .await
            .expect("replay");
        assert_eq!(again.total, 4);
    }
}

#[tokio::test]
async fn audit_rows_cannot_be_updated_or_deleted() {
    for backend in Backend::ALL {
        let (store, url, _dir) = seeded(backend).await;
        store
            .record_audit(&NewAuditEntry::by(&operator("fay"), "sign_in", "ok"))
            .await
            .expect("record");
        for sql in [
            "UPDATE audit_log SET actor = 'mallory'",
            "DELETE FROM audit_log",
        ] {
            let err = exec_sql(backend, &url, sql)
                .await
                .expect_err("the trigger refuses");
            assert!(
                err.to_string().contains("append-only"),
                "{backend:?}: {sql}: {err}"
            );
        }
        if backend == Backend::Postgres {
            assert!(exec_sql(backend, &url, "TRUNCATE audit_log").await.is_err());
        }
        let rows = store
            .audit(&AuditQuery::default())
            .await
            .expect("audit")
            .items;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].actor, "fay");
    }
}

#[tokio::test]
async fn history_lists_ingested_sorted_replay_requested_then_published() {
    for backend in Backend::ALL {
        let (store, _url, _dir) = store_with_url(backend).await;
        let topic = unique("history_target");
        create_topic(&topic, 1, &[]).await.expect("topic");
        store
            .insert_batch(&[dl(1, Some(&topic), "A")])
            .await
            .expect("insert");
        let id = ids(&store, Filter::default()).await[0];
        let job = store
            .request_replay(
                &operator("gus"),
                &ReplayRequest {
                    selection: Selection::Ids(vec![id]),
                    target_topic: None,
                    rate_per_sec: None,
                    reason: Some("retry after fix".into()),
                    options: Default::default(),
                },
            )
            .await
            .expect("replay");

        let shutdown = CancellationToken::new();
        let status = Arc::new(RelayStatus::default());
        let relay = tokio::spawn(replay::run(
            RelayConfig {
                brokers: kafka_brokers(),
                poll_interval_ms: 50,
                ..RelayConfig::default()
            },
            store.clone(),
            status.clone(),
            shutdown.clone(),
        ));
        let done = wait_for("the job to finish", Duration::from_secs(60), || async {
            let j = store.job(&job.id).await.ok().flatten()?;
            (j.status == JobStatus::Finished).then_some(j)
        })
        .await
        .expect("finished");
        shutdown.cancel();
        relay.await.expect("join").expect("relay");
        assert_eq!((done.published, done.failed), (1, 0));
        assert_eq!(status.snapshot().published_total, 1);

        let h = store.history(id).await.expect("history");
        let kinds: Vec<&str> = h.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["ingested", "tier_assigned", "replay_requested", "published"],
            "{backend:?}"
        );
        assert_eq!(
            h[0].detail.as_deref(),
            Some("from orders.DLT partition 0 offset 1")
        );
        // Sorted as ingest stored it, with the built-in rule set (no version stored).
        assert_eq!(
            h[1].detail.as_deref(),
            Some("manual: no rule matched: the default tier")
        );
        assert_eq!(h[1].actor.as_deref(), Some("(rules)"));
        assert_eq!(
            h[2].detail.as_deref(),
            Some(format!("to {topic}; reason: retry after fix").as_str())
        );
        assert_eq!(h[2].actor.as_deref(), Some("gus"));
        assert_eq!(
            h[3].detail.as_deref(),
            Some(format!("to {topic} partition 0 offset 0").as_str())
        );
        assert_eq!(h[3].job_id.as_deref(), Some(job.id.as_str()));
        assert!(h.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
        let d = store.get(id).await.expect("get").expect("exists");
        assert_eq!(d.summary.status, Status::Replayed);
        assert_eq!(d.replay_count, 1);
    }
}
