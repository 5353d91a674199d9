//! Test harness shared by every integration test: a real Kafka broker (KRaft) and a real
//! PostgreSQL, both on loopback, plus fresh topics and databases per test.
//!
//! - Kafka: `REDRIVE_TEST_KAFKA_BROKERS` if set (as `make test` does), else `scripts/kafka start`
//!   on port 19092 with state under `target/test-kafka` (kept running for the next run).
//! - PostgreSQL: `REDRIVE_TEST_POSTGRES_URL` (an admin URL) if set, else `scripts/postgres start`
//!   on port 55433. Each test gets its own database.
//!
//! Nothing here mocks anything; tests poll with deadlines instead of sleeping.

pub mod fixtures;
pub mod ingest;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use sqlx::Connection;

/// The repository root (where `scripts/` lives).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run_script(script: &str, envs: &[(&str, String)]) -> Result<String> {
    let out = Command::new(repo_root().join("scripts").join(script))
        .arg("start")
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .with_context(|| format!("running scripts/{script} start"))?;
    if !out.status.success() {
        bail!(
            "scripts/{script} start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Bootstrap servers of the test broker, starting it if needed. Panics (failing the test with
/// the reason) if no broker can be had: these tests mean a real broker.
pub fn kafka_brokers() -> String {
    static BROKERS: OnceLock<String> = OnceLock::new();
    BROKERS
        .get_or_init(|| {
            if let Ok(b) = std::env::var("REDRIVE_TEST_KAFKA_BROKERS") {
                return b;
            }
            let state = repo_root().join("target").join("test-kafka");
            let out = run_script(
                "kafka",
                &[
                    ("KAFKA_PORT", "19092".to_string()),
                    ("KAFKA_STATE_DIR", state.display().to_string()),
                ],
            )
            .expect("a real Kafka broker for the tests");
            out.rsplit(' ')
                .next()
                .unwrap_or("127.0.0.1:19092")
                .to_string()
        })
        .clone()
}

/// Admin URL of the test PostgreSQL server, starting it if needed.
pub fn postgres_admin_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(u) = std::env::var("REDRIVE_TEST_POSTGRES_URL") {
            return u;
        }
        run_script("postgres", &[("PG_PORT", "55433".to_string())])
            .expect("a real PostgreSQL server for the tests")
    })
    .clone()
}

/// A unique name with a readable prefix, for topics, groups and databases.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// Creates a fresh, empty PostgreSQL database and returns its URL. Private: a caller gets it
/// through [`fresh_database`], whose [`TestDatabase`] drops it when done.
async fn fresh_postgres_url() -> Result<String> {
    let admin = postgres_admin_url();
    let name = unique("redrive_test");
    let mut conn = sqlx::PgConnection::connect(&admin).await?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await?;
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    Ok(format!("{base}/{name}"))
}

/// Drops the PostgreSQL database at `url` (one of `fresh_database`'s), closing its
/// other sessions first; nothing for a SQLite URL (its file goes with its directory).
///
/// Errors: the server's.
pub async fn drop_database(url: &str) -> Result<()> {
    let Some((_, name)) = url.rsplit_once('/').filter(|_| url.starts_with("postgres")) else {
        return Ok(());
    };
    let mut conn = sqlx::PgConnection::connect(&postgres_admin_url()).await?;
    sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .execute(&mut conn)
        .await?;
    Ok(())
}

/// A test's database, removed when this value is dropped: a SQLite file with its temporary
/// directory, a PostgreSQL database (one of `fresh_database`'s) with `DROP DATABASE
/// ... WITH (FORCE)`, which closes the sessions still open on it (a server the test
/// started). Without it every run left its databases in the test cluster: about 150 of
/// about 10 MB each per `make test`, and a bench's 10M-row store takes about 20 GB.
///
/// A test that panics keeps its PostgreSQL database to be inspected, and says which on
/// stderr (`scripts/postgres reset` removes them all). Keep the value alive as long as the
/// database is used: as a local, declare it before what connects to the database, so that
/// it is dropped after.
#[derive(Debug)]
pub struct TestDatabase {
    dir: tempfile::TempDir,
    /// The PostgreSQL database's URL, if it is one.
    postgres: Option<String>,
}

impl TestDatabase {
    /// The temporary directory (a SQLite database's file is inside it); also a place for
    /// the test's other files.
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// A directory that holds no PostgreSQL database (a server restarted over a database another
/// value owns, a SQLite file in it).
impl From<tempfile::TempDir> for TestDatabase {
    fn from(dir: tempfile::TempDir) -> Self {
        TestDatabase {
            dir,
            postgres: None,
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some(url) = self.postgres.take() else {
            return;
        };
        if std::thread::panicking() {
            eprintln!("kept the failed test's database for inspection: {url}");
            return;
        }
        // `drop` cannot await, and may run inside a runtime that cannot block: the drop
        // runs on a thread of its own with its own runtime, and this one waits for it.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(drop_database(&url))
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("dropping a test database: {e:#}"),
            Err(_) => eprintln!("dropping a test database panicked"),
        }
    }
}

/// A fresh SQLite database file inside `dir`, as a URL.
pub fn fresh_sqlite_url(dir: &tempfile::TempDir) -> String {
    format!(
        "sqlite:{}",
        dir.path()
            .join(format!("{}.db", unique("redrive")))
            .display()
    )
}

/// Which database a parametrised test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub const ALL: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];
}

/// A fresh, empty database of the given kind: its URL, and the [`TestDatabase`] that removes
/// it when dropped (keep it alive as long as the database is used).
pub async fn fresh_database(backend: Backend) -> Result<(String, TestDatabase)> {
    let dir = tempfile::tempdir()?;
    let (url, postgres) = match backend {
        Backend::Sqlite => (fresh_sqlite_url(&dir), None),
        Backend::Postgres => {
            let url = fresh_postgres_url().await?;
            (url.clone(), Some(url))
        }
    };
    Ok((url, TestDatabase { dir, postgres }))
}

/// A fresh, migrated store of the given kind.
pub async fn fresh_store(backend: Backend) -> Result<(redrive_core::store::Store, TestDatabase)> {
    let (url, dir) = fresh_database(backend).await?;
    let store = redrive_core::store::Store::connect(&url).await?;
    store.migrate().await?;
    Ok((store, dir))
}

/// Activates a rule set that matches on labels (one rule: label `x` → tier `archive`), as
/// `actor`. Ingest sorts what it stores unless the active rule set matches on labels
/// (`docs/automation.md`, "Sorting"), so the dead letters `store` takes in afterwards stay
/// unsorted, as before migration 0022: a backlog for the sorter to work through.
///
/// Errors: the store's (the rule set is refused, or the store is unreachable).
pub async fn leave_ingest_unsorted(
    store: &redrive_core::store::Store,
    actor: &redrive_core::actions::Actor,
) -> Result<()> {
    store
        .save_rule_set(
            actor,
            redrive_core::store::RuleSetOrigin::Api,
            "[[rule]]\nname = \"l\"\ntier = \"archive\"\nmatch.labels = [\"x\"]\n",
            None,
        )
        .await?;
    Ok(())
}

/// Creates `name` with `partitions` partitions and topic configs such as
/// `("max.message.bytes", "2097152")`, and waits until it is usable.
pub async fn create_topic(name: &str, partitions: i32, configs: &[(&str, &str)]) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", kafka_brokers())
        .create()?;
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        topic = topic.set(k, v);
    }
    let res = admin
        .create_topics(
            [&topic],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await?;
    for r in res {
        if let Err((t, e)) = r {
            bail!("creating topic {t}: {e}");
        }
    }
    Ok(())
}

/// A producer to the test broker. `extra` adds or overrides properties
/// (e.g. `("compression.type", "zstd")`, `("transactional.id", ...)`).
pub fn producer(extra: &[(&str, &str)]) -> Result<FutureProducer> {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", kafka_brokers())
        .set("message.max.bytes", "4000000")
        .set("linger.ms", "5");
    for (k, v) in extra {
        cfg.set(*k, *v);
    }
    Ok(cfg.create()?)
}

/// One record to produce: key, value and headers exactly as given (`None` = null).
#[derive(Debug, Clone, Default)]
pub struct TestRecord {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub partition: Option<i32>,
    pub timestamp_ms: Option<i64>,
}

impl TestRecord {
    /// A record with a UTF-8 value and the given headers.
    pub fn new(value: &str, headers: &[(&str, &[u8])]) -> TestRecord {
        TestRecord {
            key: None,
            value: Some(value.as_bytes().to_vec()),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), Some(v.to_vec())))
                .collect(),
            ..TestRecord::default()
        }
    }
}

/// Produces `records` to `topic` and waits for every delivery report; returns (partition, offset)s.
pub async fn produce(topic: &str, records: &[TestRecord]) -> Result<Vec<(i32, i64)>> {
    let p = producer(&[])?;
    produce_with(&p, topic, records).await
}

/// As [`produce`], with a given producer.
pub async fn produce_with(
    p: &FutureProducer,
    topic: &str,
    records: &[TestRecord],
) -> Result<Vec<(i32, i64)>> {
    let mut futures = Vec::with_capacity(records.len());
    for r in records {
        let mut headers = OwnedHeaders::new();
        for (name, value) in &r.headers {
            headers = headers.insert(Header {
                key: name,
                value: value.as_deref(),
            });
        }
        let mut fr: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic).headers(headers);
        if let Some(k) = &r.key {
            fr = fr.key(k.as_slice());
        }
        if let Some(v) = &r.value {
            fr = fr.payload(v.as_slice());
        }
        if let Some(pt) = r.partition {
            fr = fr.partition(pt);
        }
        if let Some(ts) = r.timestamp_ms {
            fr = fr.timestamp(ts);
        }
        // `send_result` enqueues now and hands back the delivery future, so every record is
        // in flight before the first report is awaited (`send` is lazy: awaiting each in turn
        // would cost one `linger.ms` per record). A full queue is backpressure: wait a little.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match p.send_result(fr) {
                Ok(f) => {
                    futures.push(f);
                    break;
                }
                Err((
                    rdkafka::error::KafkaError::MessageProduction(
                        rdkafka::types::RDKafkaErrorCode::QueueFull,
                    ),
                    back,
                )) if Instant::now() < deadline => {
                    fr = back;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((e, _)) => bail!("producing to {topic}: {e}"),
            }
        }
    }
    let mut out = Vec::with_capacity(futures.len());
    for f in futures {
        let d = f
            .await
            .context("producer dropped before delivery")?
            .map_err(|(e, _)| anyhow::anyhow!("delivery failed: {e}"))?;
        out.push((d.partition, d.offset));
    }
    Ok(out)
}

/// How long [`consume`] waits, in total, for the records it expects: 60 s.
pub const CONSUME_TIMEOUT: Duration = Duration::from_secs(60);

/// The first `n` records of `topic` from its earliest offset, every partition, as owned
/// messages: the one way the tests and benches read back what a replay (or anything else)
/// published. Oldest first within a partition; partitions interleave as fetches return them.
///
/// It reads as a fresh consumer group (`unique("consume")`, `auto.offset.reset=earliest`) that
/// commits nothing, with `isolation.level=read_uncommitted`: redrive's relay producer is
/// idempotent but not transactional, so both isolation levels return the same records, and
/// read_uncommitted is the level that can hide nothing (a test counting the copies a
/// republish made sees every one). Pass the count a check expects, often the topic's
/// watermarks; records beyond the `n`-th are not read.
///
/// Errors: the consumer's (creating, subscribing, fetching), or fewer than `n` records after
/// [`CONSUME_TIMEOUT`] (the message says how many arrived).
pub async fn consume(topic: &str, n: usize) -> Result<Vec<OwnedMessage>> {
    let c: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka_brokers())
        .set("group.id", unique("consume"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_uncommitted")
        .create()?;
    c.subscribe(&[topic])?;
    let deadline = tokio::time::Instant::now() + CONSUME_TIMEOUT;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match tokio::time::timeout_at(deadline, c.recv()).await {
            Ok(m) => out.push(m.with_context(|| format!("consuming {topic}"))?.detach()),
            Err(_) => bail!(
                "only {} of {n} records on {topic} after {CONSUME_TIMEOUT:?}",
                out.len()
            ),
        }
    }
    Ok(out)
}

/// Polls `check` until it returns `Some`, or fails after `timeout` with `what` in the message.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
