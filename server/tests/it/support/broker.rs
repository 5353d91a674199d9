//! A Kafka broker of the test's own, which the test may stop and start again (the shared test
//! broker must stay up for everyone else): `scripts/kafka` on a free loopback port with its
//! state in a temporary directory. Stopped when dropped.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::producer::{FutureProducer, FutureRecord};

/// One single-node KRaft broker (`scripts/kafka`), owned by one test.
pub struct OwnBroker {
    /// `127.0.0.1:PORT`, for `bootstrap.servers`.
    pub brokers: String,
    port: u16,
    state: tempfile::TempDir,
}

fn script() -> PathBuf {
    redrive_testkit::repo_root().join("scripts").join("kafka")
}

impl OwnBroker {
    /// Starts a broker on a port that was free a moment ago, below the ephemeral range
    /// ([`super::free_port`]: nothing else takes it while the broker is stopped;
    /// `scripts/kafka` picks its controller port the same way). `scripts/kafka start` returns
    /// once the port accepts connections; the first start formats its storage.
    pub async fn start() -> OwnBroker {
        let port = super::free_port();
        let broker = OwnBroker {
            brokers: format!("127.0.0.1:{port}"),
            port,
            state: tempfile::tempdir().expect("tempdir"),
        };
        broker.run("start").await;
        broker.wait_serving().await;
        broker
    }

    async fn run(&self, what: &'static str) {
        let (port, state) = (self.port.to_string(), self.state.path().to_path_buf());
        let out = tokio::task::spawn_blocking(move || {
            Command::new(script())
                .arg(what)
                .env("KAFKA_PORT", port)
                .env("KAFKA_STATE_DIR", state)
                .output()
        })
        .await
        .expect("join")
        .expect("run scripts/kafka");
        assert!(
            out.status.success(),
            "scripts/kafka {what} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stops the broker (SIGTERM, SIGKILL after 30 s) and waits until it is gone.
    pub async fn stop(&self) {
        self.run("stop").await;
    }

    /// Starts it again on the same port with the same data, and returns once it answers a
    /// metadata request (the port opens before a restarted KRaft node serves; on a busy
    /// machine the gap is long, and a test must not count it against redrive).
    pub async fn restart(&self) {
        self.run("start").await;
        self.wait_serving().await;
    }

    /// Waits (2 min at most) until the broker answers a metadata request.
    pub async fn wait_serving(&self) {
        let brokers = self.brokers.clone();
        let served = tokio::task::spawn_blocking(move || {
            let client: rdkafka::consumer::BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &brokers)
                .create()
                .expect("client");
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_secs(120) {
                if client.fetch_metadata(None, Duration::from_secs(5)).is_ok() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            false
        })
        .await
        .expect("join");
        assert!(
            served,
            "the broker at {} did not serve within 2 min",
            self.brokers
        );
    }

    /// Creates `topic` with `partitions` partitions.
    pub async fn create_topic(&self, topic: &str, partitions: i32) {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .create()
            .expect("admin client");
        let res = admin
            .create_topics(
                [&NewTopic::new(
                    topic,
                    partitions,
                    TopicReplication::Fixed(1),
                )],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
            )
            .await
            .expect("create_topics");
        for r in res {
            r.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
        }
    }

    /// Produces `values` to `topic` and waits for every delivery report.
    pub async fn produce(&self, topic: &str, values: &[&str]) {
        let p: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .create()
            .expect("producer");
        for v in values {
            p.send(
                FutureRecord::<(), str>::to(topic).payload(*v),
                Duration::from_secs(30),
            )
            .await
            .unwrap_or_else(|(e, _)| panic!("produce to {topic}: {e}"));
        }
    }
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .env("KAFKA_PORT", self.port.to_string())
            .env("KAFKA_STATE_DIR", self.state.path())
            .output();
    }
}
