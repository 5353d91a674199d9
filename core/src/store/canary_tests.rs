//! The canary's state machine in the store (`canary.rs`), on SQLite: claims capped at the
//! canary's size, the watch, both verdicts, the pause with its audit row, resume without a
//! second canary, per-key order inside a canary, and the refusals of bad options.

use super::*;
use crate::actions::{
    Actor, AuditQuery, JobStatus, ReplayJob, ReplayOptions, ReplayRequest, Selection,
};
use crate::canary::Percent;
use crate::model::{Convention, Header, NewDeadLetter, Normalized, RawRecord};
use crate::store::{Claim, MarkBatch, Published};

const WAIT: u64 = 1_000;

fn dead_letter(offset: i64, key: &str, headers: Vec<Header>) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: "orders.DLT".into(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(1_000),
            key: Some(key.as_bytes().to_vec()),
            value: Some(b"v".to_vec()),
            headers,
        },
        convention: Convention::Unknown,
        fingerprint: "f".into(),
        normalized: Normalized {
            source_topic: Some("orders".into()),
            source_offset: Some(offset),
            ..Normalized::default()
        },
        dead_lettered_at_ms: 1_000,
        ingested_at_ms: 1_000,
    }
}

fn canary(records: u64, max_refailed: u64) -> ReplayOptions {
    ReplayOptions {
        canary: Some(CanaryOptions {
            records: Some(records),
            wait_ms: Some(WAIT),
            max_refailed,
            ..CanaryOptions::default()
        }),
        ..ReplayOptions::default()
    }
}

/// A store with `n` dead letters (keys from `key(i)`) and a replay of all of them.
async fn job_of(n: i64, key: impl Fn(i64) -> String, options: ReplayOptions) -> (Store, ReplayJob) {
    let store = Store::connect("sqlite::memory:").await.unwrap();
    store.migrate().await.unwrap();
    let batch: Vec<NewDeadLetter> = (0..n).map(|i| dead_letter(i, &key(i), vec![])).collect();
    store.insert_batch(&batch).await.unwrap();
    let job = store
        .request_replay(
            &Actor::operator("eve"),
            &ReplayRequest {
                selection: Selection::Filter(crate::Filter::default()),
                target_topic: None,
                rate_per_sec: None,
                reason: None,
                options,
            },
        )
        .await
        .unwrap();
    (store, job)
}

/// Claims up to 100 due rows of `job` (a relay's claim, expired leases first).
pub(in crate::store) async fn claim(store: &Store, job: &ReplayJob) -> Claim {
    store.claim(&job.id, 100, 60_000, None, true).await.unwrap()
}

/// Marks every row of `claim` published (`last`: the job's last batch, as a short claim).
pub(in crate::store) async fn publish(store: &Store, job: &ReplayJob, claim: &Claim) {
    store
        .mark(&MarkBatch {
            job_id: job.id.clone(),
            claim_token: claim.token.clone(),
            actor: "eve".into(),
            published: claim
                .rows
                .iter()
                .enumerate()
                .map(|(i, r)| Published {
                    outbox_id: r.outbox_id,
                    partition: 0,
                    offset: 100 + i as i64,
                })
                .collect(),
            last: true,
            ..MarkBatch::default()
        })
        .await
        .unwrap();
}

async fn step(store: &Store, job: &ReplayJob, now: i64) -> Step {
    let opts = job.options.canary.clone().unwrap();
    store.canary_step(&job.id, &opts, now).await.unwrap()
}

async fn canary_of(store: &Store, job: &ReplayJob) -> CanaryStatus {
    store.job(&job.id).await.unwrap().unwrap().canary.unwrap()
}

#[tokio::test]
async fn a_canary_publishes_its_size_alone_watches_then_lets_the_job_go_on() {
    let (store, job) = job_of(5, |i| format!("k{i}"), canary(2, 0)).await;
    assert_eq!(job.canary.as_ref().unwrap().state, CanaryState::Starting);
    // Nothing is claimed before the canary has its size (the claim's own check).
    assert!(claim(&store, &job).await.rows.is_empty());

    let now = now_ms();
    assert_eq!(step(&store, &job, now).await, Step::Claim);
    let c = canary_of(&store, &job).await;
    assert_eq!((c.state, c.size), (CanaryState::Publishing, Some(2)));
    let first = claim(&store, &job).await;
    assert_eq!(
        first.rows.len(),
        2,
        "the canary's size, not the claim's limit"
    );
    assert!(
        claim(&store, &job).await.rows.is_empty(),
        "the canary is full"
    );
    // Not final yet: still publishing.
    assert_eq!(step(&store, &job, now).await, Step::Claim);
    publish(&store, &job, &first).await;

    let now = now_ms();
    assert_eq!(step(&store, &job, now).await, Step::Wait);
    let c = canary_of(&store, &job).await;
    assert_eq!(c.state, CanaryState::Watching);
    assert_eq!((c.published, c.refailed), (2, 0));
    let until = c.watch_until_ms.unwrap();
    assert!(until >= now + WAIT as i64, "{until} {now}");
    assert!(claim(&store, &job).await.rows.is_empty(), "watching");
    assert_eq!(step(&store, &job, until - 1).await, Step::Wait);

    assert_eq!(step(&store, &job, until).await, Step::Claim);
    let c = canary_of(&store, &job).await;
    assert_eq!(c.state, CanaryState::Passed);
    let reason = c.reason.unwrap();
    assert!(
        reason.contains("0 of 2 published records came back"),
        "{reason}"
    );
    let rest = claim(&store, &job).await;
    assert_eq!(rest.rows.len(), 3, "the rest at the normal rate");
    publish(&store, &job, &rest).await;
    let done = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!((done.status, done.published), (JobStatus::Finished, 5));
}

#[tokio::test]
async fn too_many_came_back_pauses_the_job_with_an_audit_row_and_resume_goes_on() {
    let (store, job) = job_of(4, |i| format!("k{i}"), canary(2, 0)).await;
    step(&store, &job, now_ms()).await;
    let first = claim(&store, &job).await;
    publish(&store, &job, &first).await;
    // The consumer dead-letters one of them again, with redrive's headers copied.
    let back = dead_letter(
        99,
        "k0",
        vec![Header {
            name: crate::replay::HEADER_IDEMPOTENCY_KEY.into(),
            value: Some(first.rows[0].idempotency_key.as_bytes().to_vec()),
        }],
    );
    store.insert_batch(&[back]).await.unwrap();

    // Over the threshold during the watch: the verdict comes at once, not after the wait.
    let Step::Failed(reason) = step(&store, &job, now_ms()).await else {
        panic!("the canary fails");
    };
    assert!(
        reason.contains("1 of 2 published records came back") && reason.contains("0 allowed"),
        "{reason}"
    );
    let paused = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(paused.status, JobStatus::Paused);
    let c = paused.canary.unwrap();
    assert_eq!(
        (c.state, c.refailed, c.published),
        (CanaryState::Failed, 1, 2)
    );
    assert_eq!(c.reason.as_deref(), Some(reason.as_str()));
    assert!(claim(&store, &job).await.rows.is_empty(), "paused");
    let audit = store
        .audit(&AuditQuery {
            action: Some("pause_job".into()),
            ..AuditQuery::default()
        })
        .await
        .unwrap()
        .items;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].actor, CANARY_ACTOR);
    assert_eq!(audit[0].reason.as_deref(), Some(reason.as_str()));
    assert_eq!(audit[0].job_id.as_deref(), Some(job.id.as_str()));
    // Stepping again changes nothing (decided), and another pause row is never written.
    assert_eq!(step(&store, &job, now_ms()).await, Step::Claim);

    store
        .resume_job(&Actor::operator("eve"), &job.id, None)
        .await
        .unwrap();
    assert_eq!(step(&store, &job, now_ms()).await, Step::Claim);
    let rest = claim(&store, &job).await;
    assert_eq!(rest.rows.len(), 2, "resumed: the rest, no second canary");
    publish(&store, &job, &rest).await;
    let done = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(done.status, JobStatus::Finished);
    assert_eq!(done.canary.unwrap().state, CanaryState::Failed);
}

#[tokio::test]
async fn a_canary_covering_the_whole_job_gets_its_verdict_before_the_job_finishes() {
    let (store, job) = job_of(2, |i| format!("k{i}"), canary(5, 1)).await;
    step(&store, &job, now_ms()).await;
    assert_eq!(
        canary_of(&store, &job).await.size,
        Some(2),
        "at most the job"
    );
    let all = claim(&store, &job).await;
    publish(&store, &job, &all).await;
    assert!(!store.finish_job_if_done(&job.id).await.unwrap());
    assert_eq!(step(&store, &job, now_ms()).await, Step::Wait);
    let until = canary_of(&store, &job).await.watch_until_ms.unwrap();
    assert_eq!(step(&store, &job, until).await, Step::Claim);
    assert!(store.finish_job_if_done(&job.id).await.unwrap());
    let done = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(done.canary.unwrap().state, CanaryState::Passed);
}

/// Per-key order inside a canary: only a key's head is claimable, so a canary of 2 over one
/// key takes the head, then (once it is published) the next record of the key.
#[tokio::test]
async fn held_rows_join_the_canary_as_their_key_releases_them() {
    let (store, job) = job_of(4, |_| "same".to_string(), canary(2, 0)).await;
    step(&store, &job, now_ms()).await;
    let head = claim(&store, &job).await;
    assert_eq!(head.rows.len(), 1, "one in flight per key");
    publish(&store, &job, &head).await;
    assert_eq!(step(&store, &job, now_ms()).await, Step::Claim);
    let second = claim(&store, &job).await;
    assert_eq!(second.rows.len(), 1);
    assert!(second.rows[0].outbox_id > head.rows[0].outbox_id);
    publish(&store, &job, &second).await;
    assert!(
        claim(&store, &job).await.rows.is_empty(),
        "the canary is full"
    );
    assert_eq!(step(&store, &job, now_ms()).await, Step::Wait);
    assert_eq!(canary_of(&store, &job).await.state, CanaryState::Watching);
}

#[tokio::test]
async fn a_percent_canary_is_sized_from_the_queued_total() {
    let options = ReplayOptions {
        canary: Some(CanaryOptions {
            percent: Some(Percent(10.0)),
            wait_ms: Some(WAIT),
            ..CanaryOptions::default()
        }),
        ..ReplayOptions::default()
    };
    let (store, job) = job_of(25, |i| format!("k{i}"), options).await;
    step(&store, &job, now_ms()).await;
    assert_eq!(
        canary_of(&store, &job).await.size,
        Some(3),
        "ceil(10 % of 25)"
    );
    assert_eq!(claim(&store, &job).await.rows.len(), 3);
}

#[tokio::test]
async fn bad_canary_options_are_refused_and_queue_nothing() {
    let store = Store::connect("sqlite::memory:").await.unwrap();
    store.migrate().await.unwrap();
    store
        .insert_batch(&[dead_letter(0, "k", vec![])])
        .await
        .unwrap();
    let bad = [
        (CanaryOptions::default(), "`records` (a count) or `percent`"),
        (
            CanaryOptions {
                records: Some(2),
                percent: Some(Percent(5.0)),
                ..CanaryOptions::default()
            },
            "not both",
        ),
        (
            CanaryOptions {
                percent: Some(Percent(150.0)),
                ..CanaryOptions::default()
            },
            "at most 100",
        ),
        (
            CanaryOptions {
                records: Some(3),
                wait_ms: Some(0),
                ..CanaryOptions::default()
            },
            "`wait_ms` must be from 1000",
        ),
        (
            CanaryOptions {
                records: Some(3),
                max_refailed: 3,
                ..CanaryOptions::default()
            },
            "must be below its `records`",
        ),
    ];
    for (c, want) in bad {
        let e = store
            .request_replay(
                &Actor::operator("eve"),
                &ReplayRequest {
                    selection: Selection::Ids(vec![1]),
                    target_topic: None,
                    rate_per_sec: None,
                    reason: None,
                    options: ReplayOptions {
                        canary: Some(c),
                        ..ReplayOptions::default()
                    },
                },
            )
            .await
            .unwrap_err();
        match e {
            StoreError::Invalid(m) => assert!(m.contains(want), "{m} / {want}"),
            other => panic!("{other:?}"),
        }
    }
    assert!(store.jobs(10).await.unwrap().is_empty(), "nothing queued");
}
