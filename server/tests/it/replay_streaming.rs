//! A replay over a filter published while its chunks are still queued (`docs/replay.md`,
//! "Publishing while queueing"), on the real broker, on SQLite and PostgreSQL: with the relay
//! running while the request queues three chunks, every dead letter reaches the target topic
//! exactly once with its own idempotency key, the job finishes with the right counts, and the
//! audit trail holds the `replay_started` row of the first chunk and the `replay` row with the
//! final count. Whether the relay got to a chunk before the next one is timing; the states
//! between chunks are tested step by step in `store::bulk::job_tests`.

use std::collections::HashSet;
use std::time::Duration;

use redrive_core::actions::{JobStatus, ReplayOptions, ReplayRequest, Selection};
use redrive_core::replay::{HEADER_DEAD_LETTER_ID, HEADER_IDEMPOTENCY_KEY};
use redrive_core::store::CHUNK_ROWS;
use redrive_core::Filter;
use redrive_testkit::{consume, create_topic, unique, Backend};

use crate::support::replay::{
    ann, audit_rows, fast_relay, header_text, headers_of, keyed_dead_letters, record_count,
    wait_job, RunningRelay,
};

#[tokio::test]
async fn an_unordered_replay_is_published_once_while_its_chunks_are_queued() {
    for backend in Backend::ALL {
        let (store, _dir) = redrive_testkit::fresh_store(backend)
            .await
            .expect("fresh store");
        let target = unique("streamed");
        create_topic(&target, 3, &[]).await.expect("topic");
        let n = 2 * CHUNK_ROWS + 37;
        store
            .insert_batch(&keyed_dead_letters(n))
            .await
            .expect("insert");
        // The relay runs before the request, as in `serve`: it may claim each chunk's rows
        // as soon as that chunk commits.
        let relay = RunningRelay::start(&store, fast_relay());
        let job = store
            .request_replay(
                &ann(),
                &ReplayRequest {
                    selection: Selection::Filter(Filter::default()),
                    target_topic: Some(target.clone()),
                    rate_per_sec: None,
                    reason: Some("INC-9 consumer fixed".into()),
                    options: ReplayOptions {
                        unordered: true,
                        ..ReplayOptions::default()
                    },
                },
            )
            .await
            .expect("replay");
        assert_eq!(job.total, n as i64, "{backend:?}");
        let done = wait_job(
            &store,
            &job.id,
            Duration::from_secs(120),
            JobStatus::Finished,
        )
        .await;
        relay.stop().await;
        assert_eq!(
            (done.total, done.published, done.failed, done.cancelled),
            (n as i64, n as i64, 0, 0),
            "{backend:?}"
        );

        assert_eq!(record_count(&target, 3), n as i64, "{backend:?}: once each");
        let messages = consume(&target, n).await.expect("the replayed records");
        let keys: HashSet<String> = messages
            .iter()
            .map(|m| header_text(&headers_of(m), HEADER_IDEMPOTENCY_KEY))
            .collect();
        let ids: HashSet<String> = messages
            .iter()
            .map(|m| header_text(&headers_of(m), HEADER_DEAD_LETTER_ID))
            .collect();
        assert_eq!((keys.len(), ids.len()), (n, n), "{backend:?}");

        let started = audit_rows(&store, "replay_started").await;
        let finished = audit_rows(&store, "replay").await;
        assert_eq!((started.len(), finished.len()), (1, 1), "{backend:?}");
        for row in [&started[0], &finished[0]] {
            assert_eq!(row.actor, "ann");
            assert_eq!(row.job_id.as_deref(), Some(job.id.as_str()));
            assert_eq!(row.reason.as_deref(), Some("INC-9 consumer fixed"));
        }
        assert_eq!(started[0].count, CHUNK_ROWS as i64, "{backend:?}");
        assert!(started[0].at_ms <= finished[0].at_ms);
        assert_eq!(finished[0].count, n as i64, "{backend:?}");
        assert!(
            finished[0]
                .outcome
                .contains("in 3 chunks, published while queueing"),
            "{backend:?}: {}",
            finished[0].outcome
        );
    }
}
