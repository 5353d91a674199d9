//! Scheduled reprocessing (issue 13; `docs/automation.md`, "Scheduled reprocessing", "Health
//! gates", "Rule self-pause", "One scheduler") through the real binary — ingest, the
//! sorter, the scheduler and the relay of `redrive serve` — with the demo pipeline as the
//! system under test, on the real broker, SQLite and PostgreSQL:
//!
//! - **gate**: while the demo's LLM outage is on, its dead letters arrive and the rule's
//!   health gate (the demo's `GET /health`, 503) holds rounds back: `rule_states` says
//!   `gate_closed` with the answer, and no job exists. When the outage ends, rounds replay the
//!   transient dead letters and the demo agent processes each exactly once (its ledger); the
//!   poison ones (`retryable=false`) are never replayed automatically.
//! - **escalation**: with the outage kept on and no gate, a record is replayed `max_attempts`
//!   times, and its next return is escalated to `manual` (the sorter's `decide`, end to end).
//! - **self-pause**: a rule that re-fails what it replays pauses itself, with an audit row and
//!   a firing `rule_paused` alert; it runs no round after that.
//! - **failover** (PostgreSQL): two instances, the leader SIGKILLed while its round's job is
//!   publishing; the other takes over, and every dead letter is queued once, with one
//!   idempotency key, and processed once by the demo.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use redrive_core::actions::{Actor, ReplayJob};
use redrive_core::alerts::AlertState;
use redrive_core::automation::Tier;
use redrive_core::model::Status;
use redrive_core::store::{RoundState, RuleSetOrigin, Store};
use redrive_demo::Ledger;
use redrive_testkit::ingest::wait_for_count;
use redrive_testkit::{fresh_database, kafka_brokers, unique, Backend};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::alerts::write_config;
use crate::replay_outcome::Demo;
use crate::support::{eventually, TestApp};

const RULE: &str = "llm";
const DEADLINE: Duration = Duration::from_secs(120);

/// The demo (outage on), its `GET /health` on a port of its own, and `redrive serve` with
/// ingest on the demo's DLQ topic and the rule set `rules(dlq_topic, health_url)` installed
/// before the first dead letter is sorted.
struct Pipeline {
    demo: Demo,
    app: TestApp,
    ledger: Ledger,
    health_stop: CancellationToken,
    /// The `REDRIVE_*` settings of the instance (for a second one).
    env: Vec<(String, String)>,
    _config_dir: tempfile::TempDir,
}

/// The `[alerts]` of the tests: a `rule_paused` rule evaluated every 200 ms.
const ALERTS: &str = r#"
[alerts]
interval_ms = 200

[[alerts.rules]]
name = "paused"
kind = "rule_paused"
"#;

impl Pipeline {
    async fn start(
        backend: Backend,
        requests: u64,
        poison_ratio: f64,
        rules: impl Fn(&str, &str) -> String,
    ) -> Pipeline {
        let (db_url, dir) = fresh_database(backend).await.expect("a fresh database");
        let store = Store::connect(&db_url).await.expect("connect");
        store.migrate().await.expect("migrate");
        // A generous LLM timeout: on a busy machine a 50 ms one times out now and then, and
        // a replayed request that fails again is (rightly) replayed again, which these tests
        // count. An outage refuses at once, whatever the timeout.
        let demo = Demo::start_with(requests, poison_ratio, true, |c| c.llm_timeout_ms = 5_000);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let health = format!("http://{}/health", listener.local_addr().unwrap());
        let health_stop = CancellationToken::new();
        tokio::spawn(redrive_demo::control::serve(
            listener,
            demo.control.clone(),
            health_stop.clone(),
        ));
        store
            .save_rule_set(
                &Actor::admin("ops"),
                RuleSetOrigin::Api,
                &rules(&demo.config.dlq_topic, &health),
                Some("automation rounds test"),
            )
            .await
            .expect("the rule set");
        let config_dir = tempfile::tempdir().unwrap();
        let config = write_config(&config_dir, ALERTS);
        let brokers = kafka_brokers();
        let group = unique("rounds_ingest");
        let env = [
            ("REDRIVE_CONFIG", config.as_str()),
            ("REDRIVE_INGEST_ENABLED", "true"),
            ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
            ("REDRIVE_DLQ_TOPICS", demo.config.dlq_topic.as_str()),
            ("REDRIVE_GROUP_ID", group.as_str()),
            ("REDRIVE_METRICS_PUBLIC", "true"),
        ];
        let app = TestApp::serve(db_url, store, dir, &env).await;
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let ledger = Ledger::open(&demo.config.database_url)
            .await
            .expect("the demo's ledger");
        Pipeline {
            demo,
            app,
            ledger,
            health_stop,
            env,
            _config_dir: config_dir,
        }
    }

    fn store(&self) -> &Store {
        &self.app.store
    }

    async fn round_state(&self) -> RoundState {
        self.store().round_state(RULE).await.expect("round state")
    }

    /// The rule's replay jobs (`created_by = rule:llm`).
    async fn rule_jobs(&self) -> Vec<ReplayJob> {
        self.store()
            .jobs(1_000)
            .await
            .expect("jobs")
            .into_iter()
            .filter(|j| j.created_by == format!("rule:{RULE}"))
            .collect()
    }

    /// Every dead letter: id → (tier, status).
    async fn dead_letters(&self) -> BTreeMap<i64, (Option<Tier>, Status)> {
        let mut out = BTreeMap::new();
        for c in self
            .store()
            .tier_candidates(&redrive_core::store::CandidateScan {
                unsorted_only: false,
                live_only: false,
                newest_first: false,
                from_id: None,
                limit: 5_000,
                with_labels: true,
            })
            .await
            .expect("candidates")
        {
            let d = self
                .store()
                .get(c.id)
                .await
                .expect("get")
                .expect("a dead letter");
            out.insert(c.id, (c.tier, d.summary.status));
        }
        out
    }

    async fn wait_sorted(&self, n: usize) -> BTreeMap<i64, (Option<Tier>, Status)> {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let d = self.dead_letters().await;
            if d.len() >= n && d.values().all(|(t, _)| t.is_some()) {
                return d;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{n} dead letters sorted: {d:?}\n{}",
                self.app.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Message ids the demo produced, valid (transient under an outage) and poison.
    async fn produced(&self) -> (BTreeSet<String>, BTreeSet<String>) {
        let rows: Vec<(String, String)> = sqlx::query_as("SELECT message_id, kind FROM produced")
            .fetch_all(self.ledger.pool())
            .await
            .unwrap();
        let valid = rows
            .iter()
            .filter(|r| r.1 == "valid")
            .map(|r| r.0.clone())
            .collect();
        let poison = rows
            .iter()
            .filter(|r| r.1 != "valid")
            .map(|r| r.0.clone())
            .collect();
        (valid, poison)
    }

    async fn stop(self) {
        self.health_stop.cancel();
        let _ = self.app.terminate(Duration::from_secs(30)).await;
        self.demo.stop().await;
    }
}

fn gated_rule(dlq: &str, health: &str) -> String {
    gated_rule_at(100)(dlq, health)
}

/// A rule over the demo's DLQ behind its `/health`, replaying at `rate` msgs/s.
fn gated_rule_at(rate: u32) -> impl Fn(&str, &str) -> String {
    move |dlq, health| {
        format!(
            r#"
[[rule]]
name = "{RULE}"
tier = "transient"
match.dlq_topics = ["{dlq}"]
schedule = {{ every = "1s", backoff = "0s", jitter = 0.0, max_attempts = 3, pause_min_replayed = 1000, rate_per_sec = {rate} }}
gate.http = {{ url = "{health}", timeout = "2s" }}
"#
        )
    }
}

async fn gate_holds_rounds_until_the_outage_ends(backend: Backend) {
    let p = Pipeline::start(backend, 10, 0.3, gated_rule).await;
    let (valid, poison) = p.produced_after(10).await;
    wait_for_count(p.store(), &p.demo.config.dlq_topic, 10, DEADLINE)
        .await
        .expect("every request dead-lettered during the outage");
    let sorted = p.wait_sorted(10).await;
    let tiers: BTreeMap<Option<Tier>, usize> = sorted.values().fold(BTreeMap::new(), |mut m, v| {
        *m.entry(v.0).or_default() += 1;
        m
    });
    assert_eq!(
        tiers.get(&Some(Tier::Transient)).copied().unwrap_or(0),
        valid.len(),
        "{tiers:?}"
    );
    assert_eq!(
        tiers.get(&Some(Tier::Poison)).copied().unwrap_or(0),
        poison.len(),
        "{tiers:?}"
    );

    // The outage is on: the gate answers 503 and holds every round back.
    eventually("a round skipped at the closed gate", DEADLINE, || async {
        p.round_state().await.last_round_outcome.as_deref() == Some("gate_closed")
    })
    .await;
    let state = p.round_state().await;
    let message = state.last_round_message.unwrap_or_default();
    assert!(
        message.starts_with("http: GET") && message.contains("503"),
        "the skip names the check and its answer: {message}"
    );
    assert!(
        p.rule_jobs().await.is_empty(),
        "no job while the gate is closed"
    );

    // The outage ends: the next round replays the transient dead letters, once.
    p.demo.set_outage(false);
    eventually(
        "every transient request processed after the rounds' replay",
        DEADLINE,
        || async {
            let done: Vec<(String,)> = sqlx::query_as("SELECT message_id FROM processed")
                .fetch_all(p.ledger.pool())
                .await
                .unwrap();
            let done: BTreeSet<String> = done.into_iter().map(|r| r.0).collect();
            valid.is_subset(&done)
        },
    )
    .await;
    eventually("every round's job finished", DEADLINE, || async {
        let jobs = p.rule_jobs().await;
        !jobs.is_empty()
            && jobs
                .iter()
                .all(|j| j.published + j.failed + j.cancelled == j.total)
    })
    .await;
    let jobs = p.rule_jobs().await;
    let queued: i64 = jobs.iter().map(|j| j.total).sum();
    assert_eq!(
        queued as usize,
        valid.len(),
        "each transient dead letter queued once: {jobs:?}"
    );
    assert!(jobs.iter().all(|j| j.failed == 0), "{jobs:?}");
    assert!(
        jobs.iter().all(|j| j
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with("scheduled round of rule llm"))),
        "{jobs:?}"
    );
    // Processed exactly once each, as a replay, and no duplicate deliveries.
    let processed: Vec<(String, Option<String>, Option<String>)> =
        sqlx::query_as("SELECT message_id, replay_id, idempotency_key FROM processed")
            .fetch_all(p.ledger.pool())
            .await
            .unwrap();
    assert_eq!(processed.len(), valid.len(), "{processed:?}");
    let job_ids: BTreeSet<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    assert!(
        processed
            .iter()
            .all(|r| r.1.as_deref().is_some_and(|j| job_ids.contains(j)) && r.2.is_some()),
        "each processed as a round's replay: {processed:?}"
    );
    let dups: Vec<(i64,)> = sqlx::query_as("SELECT id FROM duplicates")
        .fetch_all(p.ledger.pool())
        .await
        .unwrap();
    assert!(dups.is_empty(), "{dups:?}");
    // The poison ones stay where they are: never replayed automatically.
    for (id, (tier, status)) in p.dead_letters().await {
        if tier == Some(Tier::Poison) {
            assert_eq!(status, Status::New, "poison dead letter {id}");
        }
    }
    let audit = p.app.audit_of("replay").await;
    assert_eq!(audit.len(), jobs.len(), "one audit row per round");
    assert!(audit.iter().all(|a| a.actor == "rule:llm"), "{audit:?}");
    p.stop().await;
}

impl Pipeline {
    /// The produced message ids once the demo has produced all `n` requests.
    async fn produced_after(&self, n: usize) -> (BTreeSet<String>, BTreeSet<String>) {
        eventually("the demo to produce its requests", DEADLINE, || async {
            let (v, p) = self.produced().await;
            v.len() + p.len() >= n
        })
        .await;
        self.produced().await
    }
}

#[tokio::test]
async fn sqlite_gate_holds_rounds_until_the_outage_ends() {
    gate_holds_rounds_until_the_outage_ends(Backend::Sqlite).await;
}

#[tokio::test]
async fn postgres_gate_holds_rounds_until_the_outage_ends() {
    gate_holds_rounds_until_the_outage_ends(Backend::Postgres).await;
}

fn ungated_rule(max_attempts: u32, pause_min: u32) -> impl Fn(&str, &str) -> String {
    move |dlq, _health| {
        format!(
            r#"
[[rule]]
name = "{RULE}"
tier = "transient"
match.dlq_topics = ["{dlq}"]
schedule = {{ every = "1s", backoff = "0s", jitter = 0.0, max_attempts = {max_attempts}, pause_min_replayed = {pause_min}, pause_when_refailed_over = 0.5 }}
"#
        )
    }
}

async fn a_record_that_keeps_failing_is_escalated(backend: Backend) {
    const N: usize = 4;
    const MAX: usize = 2;
    let p = Pipeline::start(backend, N as u64, 0.0, ungated_rule(MAX as u32, 1_000)).await;
    // Each request: the original, then one return per automatic attempt.
    let total = N * (MAX + 1);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let sorted = loop {
        let d = p.dead_letters().await;
        let manual = d.values().filter(|v| v.0 == Some(Tier::Manual)).count();
        if d.len() >= total && manual >= N && d.values().all(|v| v.0.is_some()) {
            break d;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "escalation after {MAX} attempts: {d:?}\n{}",
            p.app.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(sorted.len(), total, "{sorted:?}");
    let by_tier: BTreeMap<Option<Tier>, usize> =
        sorted.values().fold(BTreeMap::new(), |mut m, v| {
            *m.entry(v.0).or_default() += 1;
            m
        });
    assert_eq!(by_tier.get(&Some(Tier::Manual)), Some(&N), "{by_tier:?}");
    assert_eq!(
        by_tier.get(&Some(Tier::Transient)),
        Some(&(N * MAX)),
        "{by_tier:?}"
    );
    // The transient ones were each replayed once and came back; the escalated ones wait.
    for (id, (tier, status)) in &sorted {
        match tier {
            Some(Tier::Transient) => assert_eq!(*status, Status::ReFailed, "{id}"),
            Some(Tier::Manual) => assert_eq!(*status, Status::New, "{id}"),
            other => panic!("dead letter {id} in {other:?}"),
        }
    }
    let jobs = p.rule_jobs().await;
    let queued: i64 = jobs.iter().map(|j| j.total).sum();
    assert_eq!(
        queued as usize,
        N * MAX,
        "max_attempts replays per record: {jobs:?}"
    );
    // `/automation`'s "N replayed, M came back" for a rule that never paused: every replay
    // came back (the count is refreshed before each round).
    eventually("the rule's came-back count", DEADLINE, || async {
        let states = p.store().rule_states().await.expect("rule states");
        states
            .iter()
            .find(|s| s.rule_name == RULE)
            .is_some_and(|s| s.replayed_total == queued && s.refailed_total == queued)
    })
    .await;
    p.stop().await;
}

#[tokio::test]
async fn sqlite_a_record_that_keeps_failing_is_escalated() {
    a_record_that_keeps_failing_is_escalated(Backend::Sqlite).await;
}

#[tokio::test]
async fn postgres_a_record_that_keeps_failing_is_escalated() {
    a_record_that_keeps_failing_is_escalated(Backend::Postgres).await;
}

async fn a_rule_that_refails_pauses_itself(backend: Backend) {
    const N: u64 = 4;
    let p = Pipeline::start(backend, N, 0.0, ungated_rule(10, N as u32)).await;
    eventually("the rule to pause itself", DEADLINE, || async {
        p.round_state().await.paused
    })
    .await;
    let state = p.round_state().await;
    let reason = state.paused_reason.clone().unwrap_or_default();
    assert!(
        reason.contains("came back") && reason.contains("paused itself"),
        "{reason}"
    );
    let audit = p.app.audit_of("rule_pause").await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].actor, "rule:llm");
    eventually("the rule_paused alert to fire", DEADLINE, || async {
        p.store()
            .alert_states()
            .await
            .unwrap()
            .iter()
            .any(|s| s.rule == "paused" && s.scope == "rule=llm" && s.state == AlertState::Firing)
    })
    .await;
    // Paused: the next due round is recorded as such, and no job is created after it.
    eventually("a round recorded as paused", DEADLINE, || async {
        p.round_state().await.last_round_outcome.as_deref() == Some("paused")
    })
    .await;
    let jobs = p.rule_jobs().await.len();
    eventually("another look at the paused rule", DEADLINE, || async {
        // A dead letter that came back meanwhile is sorted (and due) but not replayed.
        let d = p.dead_letters().await;
        d.values().all(|v| v.0.is_some())
    })
    .await;
    assert_eq!(p.rule_jobs().await.len(), jobs, "no round while paused");
    p.stop().await;
}

#[tokio::test]
async fn sqlite_a_rule_that_refails_pauses_itself() {
    a_rule_that_refails_pauses_itself(Backend::Sqlite).await;
}

#[tokio::test]
async fn postgres_a_rule_that_refails_pauses_itself() {
    a_rule_that_refails_pauses_itself(Backend::Postgres).await;
}

/// `redrive_leader` from `/metrics` (public in these tests).
async fn is_leader(app: &TestApp) -> Option<bool> {
    let text = reqwest::get(app.url("/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("redrive_leader "))
        .map(|v| v.trim() == "1")
}

/// Two instances on one PostgreSQL; the leader is SIGKILLed while its round's job publishes
/// (1 msg/s, so it takes several seconds). The other takes over; every dead letter was queued once (one outbox row, one
/// idempotency key), and the demo processes each request exactly once — a record the dead
/// relay had claimed is published again by the survivor's relay with the same key, and the
/// demo drops it as a duplicate of that key.
#[tokio::test]
async fn postgres_leader_killed_mid_round_replays_nothing_twice() {
    const N: usize = 12;
    let mut p = Pipeline::start(Backend::Postgres, N as u64, 0.0, gated_rule_at(1)).await;
    let env: Vec<(&str, &str)> = p
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut second = p.app.another_instance(&env).await;
    eventually("one of the two to lead", DEADLINE, || async {
        is_leader(&p.app).await == Some(true) || is_leader(&second).await == Some(true)
    })
    .await;
    let (valid, _) = p.produced_after(N).await;
    assert_eq!(valid.len(), N);
    p.wait_sorted(N).await;
    eventually("a round skipped at the closed gate", DEADLINE, || async {
        p.round_state().await.last_round_outcome.as_deref() == Some("gate_closed")
    })
    .await;

    let first_is_leader = is_leader(&p.app).await == Some(true);
    p.demo.set_outage(false);
    eventually("the round's job to start publishing", DEADLINE, || async {
        p.rule_jobs().await.iter().any(|j| j.published > 0)
    })
    .await;
    let survivor_leads = if first_is_leader {
        p.app.kill().await;
        &second
    } else {
        second.kill().await;
        &p.app
    };
    let jobs_at_kill = p.rule_jobs().await;
    assert!(
        jobs_at_kill.iter().any(|j| j.published < j.total),
        "killed mid-publish: {jobs_at_kill:?}"
    );
    eventually("the survivor to take over", DEADLINE, || async {
        is_leader(survivor_leads).await == Some(true)
    })
    .await;
    eventually("every request processed", DEADLINE, || async {
        let done: Vec<(String,)> = sqlx::query_as("SELECT message_id FROM processed")
            .fetch_all(p.ledger.pool())
            .await
            .unwrap();
        valid.is_subset(&done.into_iter().map(|r| r.0).collect())
    })
    .await;
    eventually("every round's job published", DEADLINE, || async {
        p.rule_jobs()
            .await
            .iter()
            .all(|j| j.published + j.failed + j.cancelled == j.total)
    })
    .await;
    // Each dead letter in at most one round's job, and every original one in one.
    let jobs = p.rule_jobs().await;
    let mut queued: Vec<i64> = Vec::new();
    for j in &jobs {
        let sel: serde_json::Value = serde_json::from_str(&j.selection).unwrap();
        queued.extend(
            sel["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap()),
        );
    }
    let distinct: BTreeSet<i64> = queued.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        queued.len(),
        "a dead letter queued twice: {jobs:?}"
    );
    assert!((1..=N as i64).all(|id| distinct.contains(&id)), "{jobs:?}");
    let processed: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT message_id, idempotency_key FROM processed")
            .fetch_all(p.ledger.pool())
            .await
            .unwrap();
    assert_eq!(processed.len(), N, "each processed once: {processed:?}");
    let key_of: BTreeMap<String, Option<String>> = processed.into_iter().collect();
    let dups: Vec<(Option<String>, Option<String>)> =
        sqlx::query_as("SELECT message_id, idempotency_key FROM duplicates")
            .fetch_all(p.ledger.pool())
            .await
            .unwrap();
    for (message, key) in &dups {
        let m = message.clone().unwrap_or_default();
        assert_eq!(
            key_of.get(&m),
            Some(key),
            "a record published again carries the key it was processed under: {dups:?}"
        );
    }
    if first_is_leader {
        let Pipeline {
            demo, health_stop, ..
        } = p;
        health_stop.cancel();
        let _ = second.terminate(Duration::from_secs(30)).await;
        demo.stop().await;
    } else {
        drop(second);
        p.stop().await;
    }
}
