//! Replay outcome against the real broker and the demo pipeline (issue 9 item 1), on SQLite
//! and PostgreSQL: the demo agent dead-letters poison requests; redrive ingests them, replays
//! them to the source topic with the real relay, the agent fails on them again and writes
//! new dead letters carrying redrive's replay headers back (as it copies the record's
//! headers), and ingest — running all along — links each to its earlier self: the earlier one
//! `re_failed`, the new one with repeat-failure count 1 and `linked_via = idempotency_key`,
//! the job's `refailed` equal to the records replayed, the list's `came_back` filter showing
//! exactly the new ones, and both chains naming each other.

use std::sync::Arc;
use std::time::Duration;

use redrive_core::actions::{Actor, JobStatus, ReplayJob, ReplayOptions, ReplayRequest, Selection};
use redrive_core::model::{LinkVia, Status};
use redrive_core::replay::{RelayConfig, RelayStatus};
use redrive_core::store::Store;
use redrive_core::{Filter, ListQuery};
use redrive_demo::{Control, DemoConfig, DemoError, OutageMode};
use redrive_testkit::ingest::{ingest_config, start_ingest, wait_for_count, RunningIngest};
use redrive_testkit::{fresh_store, kafka_brokers, unique, wait_for, Backend};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The demo pipeline on fresh topics, in-process.
pub(crate) struct Demo {
    pub(crate) config: DemoConfig,
    #[allow(dead_code)] // used by the canary tests
    pub(crate) control: Control,
    stop: CancellationToken,
    task: JoinHandle<Result<(), DemoError>>,
    _dir: tempfile::TempDir,
}

impl Demo {
    /// `count` requests, `poison_ratio` of them poison (dead-lettered at once); the LLM
    /// outage `outage` on or off (while on, every valid request fails its attempts and is
    /// dead-lettered after `max_retries` fast retries).
    pub(crate) fn start(count: u64, poison_ratio: f64, outage: bool) -> Demo {
        Demo::start_with(count, poison_ratio, outage, |_| {})
    }

    /// [`Demo::start`] with `tweak` applied to the configuration first.
    pub(crate) fn start_with(
        count: u64,
        poison_ratio: f64,
        outage: bool,
        tweak: impl FnOnce(&mut DemoConfig),
    ) -> Demo {
        let dir = tempfile::tempdir().expect("a temp dir");
        let source = unique("outcome_requests");
        let config = DemoConfig {
            brokers: kafka_brokers(),
            retry_topic_prefix: format!("{source}.retry"),
            source_topic: source,
            dlq_topic: unique("outcome_dlq"),
            create_topics: true,
            partitions: 1,
            group_id: unique("outcome_agent"),
            interval_ms: 20,
            poison_ratio,
            count: Some(count),
            failure_ratio: 0.0,
            llm_latency_ms: 5,
            llm_timeout_ms: 50,
            outage,
            outage_down_ms: 0,
            max_retries: 1,
            backoff_base_ms: 50,
            backoff_max_ms: 200,
            jitter: 0.0,
            max_in_flight: 8,
            breaker_failures: 1_000,
            breaker_cooldown_ms: 50,
            database_url: format!("sqlite:{}", dir.path().join("agent.db").display()),
            control_listen: None,
            seed: Some(9),
            ..DemoConfig::default()
        };
        let mut config = config;
        tweak(&mut config);
        let control = Control::new(&config);
        let stop = CancellationToken::new();
        let task = tokio::spawn(redrive_demo::run_with(
            config.clone(),
            control.clone(),
            stop.clone(),
        ));
        Demo {
            config,
            control,
            stop,
            task,
            _dir: dir,
        }
    }

    #[allow(dead_code)] // used by the canary tests
    pub(crate) fn set_outage(&self, on: bool) {
        self.control
            .set_outage(if on { OutageMode::On } else { OutageMode::Off });
    }

    pub(crate) async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("the demo stops within 20 s")
            .expect("the demo task does not panic")
            .expect("the demo stops without error");
    }
}

/// redrive's side: a fresh store, ingest on the demo's DLQ (running until `stop`), and the
/// relay in-process.
pub(crate) struct Redrive {
    pub(crate) store: Store,
    ingest: Option<RunningIngest>,
    relay_stop: CancellationToken,
    relay: JoinHandle<Result<(), redrive_core::replay::RelayError>>,
    _dir: redrive_testkit::TestDatabase,
}

impl Redrive {
    pub(crate) async fn start(backend: Backend, dlq_topic: &str) -> Redrive {
        let (store, dir) = fresh_store(backend).await.expect("a store");
        let ingest = start_ingest(
            &store,
            ingest_config(&[dlq_topic], &unique("outcome_ingest")),
        );
        let (relay_stop, relay) = Redrive::spawn_relay(&store);
        Redrive {
            store,
            ingest: Some(ingest),
            relay_stop,
            relay,
            _dir: dir,
        }
    }

    fn spawn_relay(
        store: &Store,
    ) -> (
        CancellationToken,
        JoinHandle<Result<(), redrive_core::replay::RelayError>>,
    ) {
        let relay_stop = CancellationToken::new();
        let relay = tokio::spawn(redrive_core::replay::run(
            RelayConfig {
                brokers: kafka_brokers(),
                poll_interval_ms: 50,
                backoff_base_ms: 50,
                backoff_max_ms: 1_000,
                ..RelayConfig::default()
            },
            store.clone(),
            Arc::new(RelayStatus::default()),
            relay_stop.clone(),
        ));
        (relay_stop, relay)
    }

    /// Stops the relay and starts a fresh one on the same store (a relay restart: nothing
    /// of the old one's memory survives).
    #[allow(dead_code)] // used by the canary tests
    pub(crate) async fn restart_relay(&mut self) {
        self.relay_stop.cancel();
        let (stop, relay) = Redrive::spawn_relay(&self.store);
        let old = std::mem::replace(&mut self.relay, relay);
        self.relay_stop = stop;
        tokio::time::timeout(Duration::from_secs(20), old)
            .await
            .expect("the relay stops within 20 s")
            .expect("the relay task does not panic")
            .expect("the relay stops without error");
    }

    pub(crate) async fn stop(mut self) {
        if let Some(i) = self.ingest.take() {
            i.stop().await.expect("ingest stops");
        }
        self.relay_stop.cancel();
        tokio::time::timeout(Duration::from_secs(20), self.relay)
            .await
            .expect("the relay stops within 20 s")
            .expect("the relay task does not panic")
            .expect("the relay stops without error");
    }

    /// Replays `ids` to their source topic with `options`.
    pub(crate) async fn replay(&self, ids: Vec<i64>, options: ReplayOptions) -> ReplayJob {
        self.store
            .request_replay(
                &Actor::operator("oncall"),
                &ReplayRequest {
                    selection: Selection::Ids(ids),
                    target_topic: None,
                    rate_per_sec: None,
                    reason: Some("outcome test".into()),
                    options,
                },
            )
            .await
            .expect("replay")
    }

    /// Ids of the stored dead letters of `filter` (one page of up to 500).
    pub(crate) async fn ids(&self, filter: Filter) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .store
            .list(&ListQuery {
                filter,
                limit: 500,
                cursor: None,
            })
            .await
            .expect("list")
            .items
            .iter()
            .map(|s| s.id)
            .collect();
        ids.sort_unstable();
        ids
    }
}

const POISON: u64 = 6;

async fn demo_agent_dead_letters_a_replay_again_and_it_is_linked(backend: Backend) {
    let demo = Demo::start(POISON, 1.0, false);
    let redrive = Redrive::start(backend, &demo.config.dlq_topic).await;
    let dlq = demo.config.dlq_topic.clone();
    wait_for_count(&redrive.store, &dlq, POISON as i64, Duration::from_secs(60))
        .await
        .expect("the poison dead letters");
    let first = redrive.ids(Filter::default()).await;
    assert_eq!(first.len() as u64, POISON);

    let job = redrive
        .replay(first.clone(), ReplayOptions::default())
        .await;
    // The agent fails on each replayed record again; ingest links every one.
    let job = wait_for(
        "every replayed record to come back",
        Duration::from_secs(60),
        || async {
            let j = redrive.store.job(&job.id).await.ok().flatten()?;
            (j.status == JobStatus::Finished && j.refailed == POISON as i64).then_some(j)
        },
    )
    .await
    .expect("the job counts its re-failures");
    assert_eq!(job.published, POISON as i64, "{job:?}");

    let came_back = redrive
        .ids(Filter {
            came_back: true,
            ..Filter::default()
        })
        .await;
    assert_eq!(came_back.len() as u64, POISON);
    assert!(came_back.iter().all(|id| !first.contains(id)));
    let mut earlier_seen = Vec::new();
    for id in &came_back {
        let d = redrive.store.get(*id).await.unwrap().expect("stored");
        let link = d.link.expect("linked");
        assert_eq!(link.via, LinkVia::IdempotencyKey, "{id}");
        assert_eq!(link.job_id.as_deref(), Some(job.id.as_str()));
        assert_eq!(d.summary.repeat_failures, 1);
        assert_eq!(d.summary.status, Status::New);
        let earlier = redrive
            .store
            .get(link.earlier_id)
            .await
            .unwrap()
            .expect("earlier");
        assert_eq!(earlier.summary.status, Status::ReFailed);
        let chain = redrive.store.replay_chain(link.earlier_id).await.unwrap();
        assert_eq!(chain.later.iter().map(|l| l.id).collect::<Vec<_>>(), [*id]);
        let chain = redrive.store.replay_chain(*id).await.unwrap();
        assert_eq!(chain.earlier[0].id, link.earlier_id);
        earlier_seen.push(link.earlier_id);
    }
    earlier_seen.sort_unstable();
    assert_eq!(
        earlier_seen, first,
        "each replayed dead letter came back once"
    );
    let refailed = redrive
        .ids(Filter {
            status: Some(Status::ReFailed),
            ..Filter::default()
        })
        .await;
    assert_eq!(refailed, first);
    // The job's own filters: what it took, what came back from what it published.
    let job_filter = |took: Option<&str>, back: Option<&str>| Filter {
        replay_job: took.map(String::from),
        came_back_from_job: back.map(String::from),
        ..Filter::default()
    };
    assert_eq!(redrive.ids(job_filter(Some(&job.id), None)).await, first);
    assert_eq!(
        redrive.ids(job_filter(None, Some(&job.id))).await,
        came_back
    );
    assert!(redrive
        .ids(job_filter(Some("no-such-job"), None))
        .await
        .is_empty());
    assert!(redrive
        .ids(job_filter(None, Some("no-such-job")))
        .await
        .is_empty());
    let totals = redrive.store.stats(i64::MAX / 2).await.unwrap().totals();
    assert_eq!(totals.counts.re_failed, POISON as i64);
    assert_eq!(totals.counts.new, POISON as i64);

    // The pages, as a browser without JavaScript gets them.
    let site = crate::support::InProcessSite::over(redrive.store.clone());
    let (status, job_page) = site.get(&format!("/jobs/{}", job.id)).await;
    assert_eq!(status, 200);
    assert!(
        job_page.contains(&format!("Came back: {POISON} of {POISON} published"))
            && job_page.contains("every published record came back")
            && !job_page.contains("watching the other 0"),
        "{job_page}"
    );
    let (_, list) = site.get("/?came_back=true").await;
    assert_eq!(
        list.matches("came back ×1").count() as u64,
        POISON,
        "{list}"
    );
    // The job page links to its own come-backs, which the list shows with the field set.
    let own = format!("/?came_back_from_job={}", job.id);
    assert!(job_page.contains(&format!("href=\"{own}\"")), "{job_page}");
    let (status, list) = site.get(&own).await;
    assert_eq!(status, 200);
    assert_eq!(
        list.matches("came back ×1").count() as u64,
        POISON,
        "{list}"
    );
    assert!(
        list.contains("name=\"came_back_from_job\"") && list.contains(&job.id),
        "the filter bar shows the job"
    );
    let (new_id, earlier_id) = (came_back[0], earlier_seen[0]);
    let new_link = redrive
        .store
        .get(new_id)
        .await
        .unwrap()
        .unwrap()
        .link
        .unwrap();
    let (_, new_page) = site.get(&format!("/dead-letters/{new_id}")).await;
    assert!(new_page.contains("Replay outcome"), "{new_page}");
    assert!(new_page.contains("This record came back after a replay (repeat failure 1)"));
    assert!(new_page.contains(&format!("href=\"/dead-letters/{}\"", new_link.earlier_id)));
    let (_, earlier_page) = site.get(&format!("/dead-letters/{earlier_id}")).await;
    assert!(
        earlier_page.contains("Came back as (oldest first)"),
        "{earlier_page}"
    );
    assert!(earlier_page.contains("Its replay failed again"));
    assert!(earlier_page.contains(">re-failed<"), "the status in words");
    // The list of jobs counts them too, as the job page does.
    let (_, jobs_page) = site.get("/jobs").await;
    assert!(jobs_page.contains(">Came back<"), "{jobs_page}");

    redrive.stop().await;
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_agent_dead_letters_a_replay_again_and_it_is_linked_sqlite() {
    demo_agent_dead_letters_a_replay_again_and_it_is_linked(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_agent_dead_letters_a_replay_again_and_it_is_linked_postgres() {
    demo_agent_dead_letters_a_replay_again_and_it_is_linked(Backend::Postgres).await;
}
