//! A replay over a filter interrupted while its chunks queue it (the state a process that
//! died between two chunks leaves: its bulk action `running` with the cursor of its last
//! commit, the job part-queued), on the real broker, on SQLite and PostgreSQL, keeping
//! per-key order (the job `preparing`) and published while queueing (`running`):
//!
//! - the job page and `GET /api/v1/replays/{id}` say it is still queueing (the list of jobs
//!   too), how far it has come, when publishing starts, and — once no chunk has come for a
//!   minute — that it was interrupted;
//! - the next `redrive serve` finishes the queueing at start-up and its relay publishes the
//!   rest: every dead letter reaches the target once, with its own idempotency key, and the
//!   `replay` audit row has the final count and says it was resumed.

use std::collections::HashSet;
use std::time::Duration;

use redrive_core::actions::{JobStatus, ReplayOptions, ReplayRequest, Selection};
use redrive_core::replay::HEADER_IDEMPOTENCY_KEY;
use redrive_core::store::{Store, CHUNK_ROWS};
use redrive_core::Filter;
use redrive_testkit::{consume, create_topic, fresh_database, kafka_brokers, unique, Backend};

use crate::support::replay::{
    ann, audit_rows, header_text, headers_of, keyed_dead_letters, record_count, wait_job,
};
use crate::support::sql::exec;
use crate::support::{Auth, InProcessSite, TestApp};

#[tokio::test]
async fn an_interrupted_replay_shows_it_is_queueing_and_the_next_start_finishes_it() {
    for backend in Backend::ALL {
        for unordered in [false, true] {
            let what = format!("{backend:?}, unordered {unordered}");
            let (url, dir) = fresh_database(backend).await.expect("db");
            let store = Store::connect(&url).await.expect("connect");
            store.migrate().await.expect("migrate");
            let target = unique("resumed");
            create_topic(&target, 3, &[]).await.expect("topic");
            let n = 2 * CHUNK_ROWS + 37;
            store
                .insert_batch(&keyed_dead_letters(n))
                .await
                .expect("insert");
            let req = ReplayRequest {
                selection: Selection::Filter(Filter::default()),
                target_topic: Some(target.clone()),
                rate_per_sec: None,
                reason: Some("INC-12 consumer fixed".into()),
                options: ReplayOptions {
                    unordered,
                    ..ReplayOptions::default()
                },
            };
            let job = store
                .request_replay_chunks(&ann(), &req, 1)
                .await
                .expect("the first chunk");

            // Between two chunks: queueing, and how far it has come.
            let half = store.job(&job.id).await.expect("job").expect("exists");
            let want_status = if unordered {
                JobStatus::Running
            } else {
                JobStatus::Preparing
            };
            assert_eq!(
                (half.status, half.total),
                (want_status, CHUNK_ROWS as i64),
                "{what}"
            );
            let q = half.queueing.expect("still queueing");
            assert_eq!((q.chunks, q.max_id), (1, n as i64), "{what}: {q:?}");
            let site = InProcessSite::over(store.clone());
            let (status, page) = site.get(&format!("/jobs/{}", job.id)).await;
            assert_eq!(status, 200, "{what}");
            assert!(page.contains("Still queueing."), "{what}: {page}");
            assert!(
                page.contains(&format!(
                    "{CHUNK_ROWS} queued so far in 1 chunks; dead letters up to #{} of #{n} swept.",
                    q.cursor_id
                )),
                "{what}: {page}"
            );
            let when = if unordered {
                "Rows are published as they are queued"
            } else {
                "Publishing starts when every row is queued: per-key order needs the whole outbox."
            };
            assert!(page.contains(when), "{what}: {page}");
            assert!(!page.contains("was interrupted"), "{what}: {page}");
            // The list of jobs says it too, for this job only.
            let listed = store.jobs(0).await.expect("jobs");
            assert_eq!(listed.len(), 1, "{what}");
            assert_eq!(listed[0].queueing, Some(q), "{what}");
            let (status, page) = site.get("/jobs").await;
            assert_eq!(status, 200, "{what}");
            assert!(page.contains("still queueing"), "{what}: {page}");
            assert!(page.contains(" so far"), "{what}: {page}");

            // The process that ran it died two minutes ago.
            exec(
                backend,
                &url,
                "UPDATE bulk_actions SET updated_at_ms = updated_at_ms - 120000 \
                 WHERE status = 'running'",
            )
            .await;
            let (_, page) = site.get(&format!("/jobs/{}", job.id)).await;
            assert!(
                page.contains("the queueing was interrupted, and the server resumes it"),
                "{what}: {page}"
            );

            // The next start finishes the queueing; its relay publishes the rest.
            let brokers = kafka_brokers();
            let app = TestApp::serve(
                url.clone(),
                store.clone(),
                redrive_testkit::TestDatabase::from(tempfile::tempdir().expect("dir")),
                &[("REDRIVE_KAFKA_BROKERS", brokers.as_str())],
            )
            .await;
            let done = wait_job(
                &store,
                &job.id,
                Duration::from_secs(120),
                JobStatus::Finished,
            )
            .await;
            assert_eq!(
                (done.total, done.published, done.failed, done.cancelled),
                (n as i64, n as i64, 0, 0),
                "{what}"
            );
            assert_eq!(done.queueing, None, "{what}");
            assert_eq!(
                store.jobs(0).await.expect("jobs")[0].queueing,
                None,
                "{what}"
            );
            let token = app.admin_token().await;
            let api: serde_json::Value = app
                .get(&format!("/api/v1/replays/{}", job.id), Auth::Bearer(&token))
                .await
                .json()
                .await
                .expect("json");
            assert_eq!(api["status"], "finished", "{what}: {api}");
            assert!(api["queueing"].is_null(), "{what}: {api}");
            drop(app);

            assert_eq!(record_count(&target, 3), n as i64, "{what}: once each");
            let messages = consume(&target, n).await.expect("the replayed records");
            let keys: HashSet<String> = messages
                .iter()
                .map(|m| header_text(&headers_of(m), HEADER_IDEMPOTENCY_KEY))
                .collect();
            assert_eq!(keys.len(), n, "{what}");

            let finished = audit_rows(&store, "replay").await;
            assert_eq!(finished.len(), 1, "{what}");
            assert_eq!(
                (finished[0].count, finished[0].job_id.as_deref()),
                (n as i64, Some(job.id.as_str())),
                "{what}"
            );
            assert!(
                finished[0]
                    .outcome
                    .contains("resumed after an interruption"),
                "{what}: {}",
                finished[0].outcome
            );
            let started = audit_rows(&store, "replay_started").await.len();
            assert_eq!(started, usize::from(unordered), "{what}");
            drop(dir);
        }
    }
}
