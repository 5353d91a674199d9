//! Replay outcome linking in the store (issue 9 item 1), on SQLite and PostgreSQL: a dead
//! letter that arrives after a replay is linked to its earlier self by each kind of evidence
//! (idempotency key, dead-letter id header, published position, source position, message id),
//! bad or foreign evidence links nothing and fails nothing, the earlier one becomes
//! `re_failed` (stats move with it), the job counts each publish that came back once, the
//! chain is bounded and walks both ways, and a redelivered record changes nothing.
//!
//! The publish itself is written with plain SQL (as the relay's mark would): the relay
//! against a real broker is covered by `replay_outcome`.

use redrive_core::actions::{Actor, ReplayJob, ReplayRequest, Selection};
use redrive_core::model::{
    Convention, Header, LinkVia, NewDeadLetter, Normalized, RawRecord, Status,
};
use redrive_core::replay::{HEADER_DEAD_LETTER_ID, HEADER_IDEMPOTENCY_KEY, HEADER_REPLAY_ID};
use redrive_core::store::Store;
use redrive_core::{Filter, ListQuery};
use redrive_testkit::{fresh_database, Backend};

/// A dead letter at `dlq` offset `offset`, naming source `orders`/0/`source_offset` and a
/// message id, with `headers`.
fn arrival(
    offset: i64,
    source_offset: Option<i64>,
    message_id: Option<&str>,
    headers: Vec<Header>,
) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: "orders.DLT".into(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(1_000 + offset),
            key: Some(b"k".to_vec()),
            value: Some(format!("v{offset}").into_bytes()),
            headers,
        },
        convention: Convention::Seed,
        normalized: Normalized {
            source_topic: source_offset.map(|_| "orders".to_string()),
            source_partition: source_offset.map(|_| 0),
            source_offset,
            message_id: message_id.map(str::to_string),
            ..Normalized::default()
        },
        fingerprint: "00000000000000aa".into(),
        dead_lettered_at_ms: 1_000 + offset,
        ingested_at_ms: 1_000 + offset,
    }
}

fn h(name: &str, value: &str) -> Header {
    Header {
        name: name.into(),
        value: Some(value.as_bytes().to_vec()),
    }
}

struct Db {
    backend: Backend,
    url: String,
    store: Store,
    _dir: redrive_testkit::TestDatabase,
}

impl Db {
    async fn new(backend: Backend) -> Db {
        let (url, dir) = fresh_database(backend).await.expect("a database");
        let store = Store::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        Db {
            backend,
            url,
            store,
            _dir: dir,
        }
    }

    async fn exec(&self, sql: &str) {
        match self.backend {
            Backend::Sqlite => {
                let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
                sqlx::query(sql).execute(&pool).await.expect(sql);
                pool.close().await;
            }
            Backend::Postgres => {
                let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
                sqlx::query(sql).execute(&pool).await.expect(sql);
                pool.close().await;
            }
        }
    }

    async fn text(&self, sql: &str) -> String {
        match self.backend {
            Backend::Sqlite => {
                let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
                let v: String = sqlx::query_scalar(sql).fetch_one(&pool).await.expect(sql);
                pool.close().await;
                v
            }
            Backend::Postgres => {
                let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
                let v: String = sqlx::query_scalar(sql).fetch_one(&pool).await.expect(sql);
                pool.close().await;
                v
            }
        }
    }

    /// Stores `d`, returning its id.
    async fn ingest(&self, d: NewDeadLetter) -> i64 {
        let at = (d.record.dlq_partition, d.record.dlq_offset);
        self.store.insert_batch(&[d]).await.expect("insert");
        let page = self
            .store
            .list(&ListQuery {
                filter: Filter {
                    status: None,
                    ..Filter::default()
                },
                limit: 500,
                cursor: None,
            })
            .await
            .unwrap();
        let deleted = self
            .store
            .list(&ListQuery {
                filter: Filter {
                    status: Some(Status::Deleted),
                    ..Filter::default()
                },
                limit: 500,
                cursor: None,
            })
            .await
            .unwrap();
        page.items
            .iter()
            .chain(&deleted.items)
            .find(|s| (s.dlq_partition, s.dlq_offset) == at)
            .map(|s| s.id)
            .expect("stored")
    }

    /// Replays `ids` to `orders` and records every outbox row published at partition 0,
    /// offset 5000 + dead letter id, as the relay's mark would.
    async fn replay_published(&self, ids: &[i64]) -> ReplayJob {
        let job = self
            .store
            .request_replay(
                &Actor::operator("olga"),
                &ReplayRequest {
                    selection: Selection::Ids(ids.to_vec()),
                    target_topic: Some("orders".into()),
                    rate_per_sec: None,
                    reason: None,
                    options: Default::default(),
                },
            )
            .await
            .expect("replay");
        self.exec(&format!(
            "UPDATE outbox SET status = 'published', published_partition = 0, \
             published_offset = 5000 + dead_letter_id, published_at_ms = 2000 \
             WHERE job_id = '{}'",
            job.id
        ))
        .await;
        self.exec(&format!(
            "UPDATE dead_letters SET status = 'replayed', replay_count = replay_count + 1 \
             WHERE id IN (SELECT dead_letter_id FROM outbox WHERE job_id = '{}')",
            job.id
        ))
        .await;
        job
    }

    async fn key_of(&self, job: &str, dead_letter: i64) -> String {
        self.text(&format!(
            "SELECT idempotency_key FROM outbox WHERE job_id = '{job}' \
             AND dead_letter_id = {dead_letter}"
        ))
        .await
    }

    /// Stores a dead letter at DLQ offset `offset` that came back from `job`'s publish of
    /// `dead_letter` (it carries that outbox row's idempotency key), returning its id.
    async fn come_back(&self, offset: i64, job: &str, dead_letter: i64) -> i64 {
        let key = self.key_of(job, dead_letter).await;
        self.ingest(arrival(
            offset,
            None,
            None,
            vec![h(HEADER_IDEMPOTENCY_KEY, &key)],
        ))
        .await
    }

    async fn status(&self, id: i64) -> Status {
        self.store
            .get(id)
            .await
            .unwrap()
            .expect("stored")
            .summary
            .status
    }

    async fn link(&self, id: i64) -> Option<(i64, LinkVia, i32)> {
        let d = self.store.get(id).await.unwrap().expect("stored");
        d.link
            .map(|l| (l.earlier_id, l.via, d.summary.repeat_failures))
    }
}

async fn every_kind_of_evidence_links(backend: Backend) {
    let db = Db::new(backend).await;
    // Five dead letters, each to come back with one kind of evidence, and one never replayed.
    let a = db.ingest(arrival(1, Some(10), Some("m-a"), vec![])).await;
    let b = db.ingest(arrival(2, Some(11), Some("m-b"), vec![])).await;
    let c = db.ingest(arrival(3, Some(12), Some("m-c"), vec![])).await;
    let d = db.ingest(arrival(4, Some(13), Some("m-d"), vec![])).await;
    let e = db.ingest(arrival(5, None, Some("m-e"), vec![])).await;
    let lonely = db.ingest(arrival(6, Some(15), Some("m-f"), vec![])).await;
    let job = db.replay_published(&[a, b, c, d, e]).await;
    let key_a = db.key_of(&job.id, a).await;

    // Bad and foreign evidence first: nothing links, nothing fails.
    let junk = [
        db.ingest(arrival(
            20,
            None,
            None,
            vec![h(HEADER_DEAD_LETTER_ID, "not a number")],
        ))
        .await,
        db.ingest(arrival(
            21,
            None,
            None,
            vec![h(HEADER_DEAD_LETTER_ID, "99999999")],
        ))
        .await,
        // Names `b`, but a job that never replayed it (another redrive's store).
        db.ingest(arrival(
            22,
            None,
            None,
            vec![
                h(HEADER_DEAD_LETTER_ID, &b.to_string()),
                h(HEADER_REPLAY_ID, "5d1f8d2c-0000-4000-8000-000000000000"),
            ],
        ))
        .await,
        db.ingest(arrival(
            23,
            None,
            None,
            vec![h(HEADER_IDEMPOTENCY_KEY, "no-such-key")],
        ))
        .await,
        // The same message id and source record as a dead letter never replayed.
        db.ingest(arrival(24, Some(15), Some("m-f"), vec![])).await,
    ];
    for id in junk {
        assert_eq!(
            db.link(id).await,
            None,
            "dead letter {id} must not be linked"
        );
    }
    assert_eq!(db.status(b).await, Status::Replayed);
    assert_eq!(db.status(lonely).await, Status::New);

    // Now each kind, one batch: headers copied back, then the weaker fallbacks.
    let back = [
        arrival(30, None, None, vec![h(HEADER_IDEMPOTENCY_KEY, &key_a)]),
        arrival(
            31,
            None,
            None,
            vec![
                h(HEADER_DEAD_LETTER_ID, &b.to_string()),
                h(HEADER_REPLAY_ID, &job.id),
            ],
        ),
        // The consumer names where the relay published `c`.
        arrival(32, Some(5000 + c), None, vec![]),
        // The framework kept `d`'s original coordinates.
        arrival(33, Some(13), None, vec![]),
        arrival(34, None, Some("m-e"), vec![]),
    ];
    db.store
        .insert_batch(&back)
        .await
        .expect("insert the returns");
    let expect = [
        (30, a, LinkVia::IdempotencyKey),
        (31, b, LinkVia::DeadLetterId),
        (32, c, LinkVia::PublishedPosition),
        (33, d, LinkVia::SourcePosition),
        (34, e, LinkVia::MessageId),
    ];
    let mut new_ids = Vec::new();
    for (offset, earlier, via) in expect {
        let id = db.ingest(arrival(offset, None, None, vec![])).await;
        assert_eq!(
            db.link(id).await,
            Some((earlier, via, 1)),
            "offset {offset}"
        );
        assert_eq!(db.status(earlier).await, Status::ReFailed);
        let chain = db.store.replay_chain(earlier).await.unwrap();
        assert_eq!(chain.later.iter().map(|l| l.id).collect::<Vec<_>>(), [id]);
        assert_eq!(chain.last_published_at_ms, Some(2000));
        new_ids.push(id);
    }
    let job_now = db.store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(job_now.refailed, 5, "{job_now:?}");

    // The list filter and the status filter select exactly these.
    let came_back = db
        .store
        .list(&ListQuery {
            filter: Filter {
                came_back: true,
                ..Filter::default()
            },
            limit: 50,
            cursor: None,
        })
        .await
        .unwrap();
    let mut got: Vec<i64> = came_back.items.iter().map(|s| s.id).collect();
    got.sort_unstable();
    assert_eq!(got, new_ids);
    assert!(came_back.items.iter().all(|s| s.repeat_failures == 1));
    let refailed = db
        .store
        .count(&Filter {
            status: Some(Status::ReFailed),
            ..Filter::default()
        })
        .await
        .unwrap();
    assert_eq!(refailed, 5);
    // The maintained per-status counts moved with the status change.
    let stats = db.store.stats(10_000).await.unwrap();
    let totals = stats.totals();
    assert_eq!(totals.counts.re_failed, 5);
    assert_eq!(totals.counts.replayed, 0);
    assert_eq!(
        totals.counts.total(),
        db.store
            .count(&Filter {
                status: None,
                ..Filter::default()
            })
            .await
            .unwrap()
    );

    // The same publish coming back a second time (a consumer that dead-letters twice) is
    // linked, but the job counts the publish once; a redelivered DLQ record changes nothing.
    let twice = arrival(40, None, None, vec![h(HEADER_IDEMPOTENCY_KEY, &key_a)]);
    db.store
        .insert_batch(std::slice::from_ref(&twice))
        .await
        .unwrap();
    db.store
        .insert_batch(&[twice, back[0].clone()])
        .await
        .unwrap();
    let twice_id = db.ingest(arrival(40, None, None, vec![])).await;
    assert_eq!(
        db.link(twice_id).await,
        Some((a, LinkVia::IdempotencyKey, 1))
    );
    assert_eq!(db.store.job(&job.id).await.unwrap().unwrap().refailed, 5);
    assert_eq!(
        db.link(new_ids[0]).await,
        Some((a, LinkVia::IdempotencyKey, 1))
    );

    // A chain: the one that came back from `a` is replayed and comes back again.
    let a1 = new_ids[0];
    let job2 = db.replay_published(&[a1]).await;
    let key_a1 = db.key_of(&job2.id, a1).await;
    let a2 = db
        .ingest(arrival(
            50,
            None,
            None,
            vec![h(HEADER_IDEMPOTENCY_KEY, &key_a1)],
        ))
        .await;
    assert_eq!(db.link(a2).await, Some((a1, LinkVia::IdempotencyKey, 2)));
    let chain = db.store.replay_chain(a2).await.unwrap();
    assert_eq!(
        chain.earlier.iter().map(|l| l.id).collect::<Vec<_>>(),
        [a1, a]
    );
    assert!(!chain.earlier_more && chain.earlier_purged.is_none());
    assert_eq!(chain.earlier[0].repeat_failures, 1);
    assert_eq!(chain.earlier[0].via, Some(LinkVia::IdempotencyKey));
    let chain_a = db.store.replay_chain(a).await.unwrap();
    assert_eq!(
        chain_a.later.iter().map(|l| l.id).collect::<Vec<_>>(),
        [a1, twice_id]
    );
    assert_eq!(db.store.job(&job2.id).await.unwrap().unwrap().refailed, 1);
}

#[tokio::test]
async fn every_kind_of_evidence_links_sqlite() {
    every_kind_of_evidence_links(Backend::Sqlite).await;
}

#[tokio::test]
async fn every_kind_of_evidence_links_postgres() {
    every_kind_of_evidence_links(Backend::Postgres).await;
}

/// A record that comes back before its delivery report was recorded (the dead letter still
/// `replay_pending`, the outbox row `claimed`) is linked and counted; the relay's mark then
/// settles the dead letter as `re_failed` (`came_back_before_mark`, `settle_re_failed`, covered by `replay_outcome`).
async fn a_return_before_the_mark_is_linked_and_counted(backend: Backend) {
    let db = Db::new(backend).await;
    let a = db.ingest(arrival(1, Some(10), None, vec![])).await;
    let job = db
        .store
        .request_replay(
            &Actor::operator("olga"),
            &ReplayRequest {
                selection: Selection::Ids(vec![a]),
                target_topic: Some("orders".into()),
                rate_per_sec: None,
                reason: None,
                options: Default::default(),
            },
        )
        .await
        .unwrap();
    db.exec("UPDATE outbox SET status = 'claimed'").await;
    let back = db.come_back(2, &job.id, a).await;
    assert_eq!(db.link(back).await, Some((a, LinkVia::IdempotencyKey, 1)));
    assert_eq!(db.status(a).await, Status::ReplayPending);
    assert_eq!(db.store.job(&job.id).await.unwrap().unwrap().refailed, 1);
}

#[tokio::test]
async fn a_return_before_the_mark_is_linked_and_counted_sqlite() {
    a_return_before_the_mark_is_linked_and_counted(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_return_before_the_mark_is_linked_and_counted_postgres() {
    a_return_before_the_mark_is_linked_and_counted(Backend::Postgres).await;
}

/// `GET /api/v1/dead-letters/{id}` (the real binary over the same database) carries the
/// outcome: the new one names what it came back from and its repeat-failure count, the
/// earlier one lists it as later in its chain with the verdict `came_back`, and a replayed
/// one that never came back, published long before the watch window, says
/// `no_refailure_seen`.
async fn the_json_api_carries_the_link_and_the_chain(backend: Backend) {
    let db = Db::new(backend).await;
    let a = db.ingest(arrival(1, Some(10), None, vec![])).await;
    let quiet = db.ingest(arrival(2, Some(11), None, vec![])).await;
    let job = db.replay_published(&[a, quiet]).await;
    let back = db.come_back(3, &job.id, a).await;
    let app = crate::support::TestApp::serve(
        db.url.clone(),
        db.store.clone(),
        redrive_testkit::TestDatabase::from(tempfile::tempdir().expect("tempdir")),
        &[],
    )
    .await;
    let token = app.admin_token().await;
    let get = |id: i64| {
        let app = &app;
        let token = &token;
        async move {
            let res = app
                .get(
                    &format!("/api/v1/dead-letters/{id}"),
                    crate::support::Auth::Bearer(token),
                )
                .await;
            assert_eq!(res.status(), 200, "{id}");
            res.json::<serde_json::Value>().await.expect("json")
        }
    };

    let new = get(back).await["replay_outcome"].clone();
    assert_eq!(new["came_back_from"]["id"], a, "{new}");
    assert_eq!(new["came_back_from"]["linked_via"], "idempotency_key");
    assert_eq!(new["came_back_from"]["job_id"], job.id.as_str());
    assert_eq!(new["came_back_from"]["repeat_failures"], 1);
    assert_eq!(new["earlier"][0]["id"], a);
    assert_eq!(new["earlier"][0]["status"], "re_failed");
    assert!(new["verdict"].is_null(), "never replayed itself: {new}");

    let earlier = get(a).await["replay_outcome"].clone();
    assert!(earlier["came_back_from"].is_null(), "{earlier}");
    assert_eq!(earlier["verdict"], "came_back");
    assert_eq!(earlier["later"][0]["id"], back);
    assert_eq!(earlier["later"][0]["linked_via"], "idempotency_key");
    assert_eq!(earlier["later"][0]["repeat_failures"], 1);
    assert_eq!(earlier["last_published_job"], job.id.as_str());
    assert_eq!(earlier["last_published_at"], "1970-01-01T00:00:02.000Z");

    let quiet = get(quiet).await["replay_outcome"].clone();
    assert_eq!(quiet["verdict"], "no_refailure_seen", "{quiet}");
    assert!(quiet["watching_until"].is_null());
    assert_eq!(quiet["later"], serde_json::json!([]));
}

#[tokio::test]
async fn the_json_api_carries_the_link_and_the_chain_sqlite() {
    the_json_api_carries_the_link_and_the_chain(Backend::Sqlite).await;
}

#[tokio::test]
async fn the_json_api_carries_the_link_and_the_chain_postgres() {
    the_json_api_carries_the_link_and_the_chain(Backend::Postgres).await;
}
