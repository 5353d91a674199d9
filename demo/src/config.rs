//! The demo's settings: [`DemoArgs`] is the command line (`redrive demo --help`), flattened
//! into the server's CLI; [`DemoConfig`] is what [`crate::run`] takes. Each field's doc is its
//! user documentation; defaults are the small named functions below.

use std::net::SocketAddr;

use crate::DemoError;

fn default_brokers() -> String {
    "127.0.0.1:9092".into()
}
fn default_source_topic() -> String {
    "user_requests".into()
}
fn default_dlq_topic() -> String {
    "dlq_requests".into()
}
fn default_group_id() -> String {
    "demo-agent".into()
}
fn default_partitions() -> i32 {
    3
}
fn default_interval_ms() -> u64 {
    2000
}
fn default_poison_ratio() -> f64 {
    0.2
}
fn default_failure_ratio() -> f64 {
    0.3
}
fn default_llm_latency_ms() -> u64 {
    400
}
fn default_llm_timeout_ms() -> u64 {
    2000
}
fn default_outage_up_ms() -> u64 {
    // Long enough to see requests processed (some after retries) before the first outage,
    // short enough that transient dead letters show up within a minute of start-up.
    30_000
}
fn default_outage_down_ms() -> u64 {
    15_000
}
fn default_max_retries() -> u32 {
    3
}
fn default_backoff_base_ms() -> u64 {
    1000
}
fn default_backoff_max_ms() -> u64 {
    30_000
}
fn default_jitter() -> f64 {
    0.2
}
fn default_max_in_flight() -> usize {
    8
}
fn default_breaker_failures() -> u32 {
    5
}
fn default_breaker_cooldown_ms() -> u64 {
    // Shorter than the 1 + 2 + 4 s of retries, so a request caught by an open breaker still
    // sees a probe before it is dead-lettered.
    5_000
}
fn default_database_url() -> String {
    "sqlite:.redrive/demo-agent.db".into()
}
fn default_control_listen() -> Option<SocketAddr> {
    Some(SocketAddr::from(([127, 0, 0, 1], 3001)))
}

/// The control endpoint's address on the command line: `HOST:PORT`, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlListen(pub Option<SocketAddr>);

impl std::str::FromStr for ControlListen {
    type Err = String;

    fn from_str(s: &str) -> Result<ControlListen, String> {
        match s.trim() {
            "" | "off" | "none" => Ok(ControlListen(None)),
            a => a.parse().map(|a| ControlListen(Some(a))).map_err(|e| {
                format!("`{a}` is not an address like 127.0.0.1:3001, nor `off`: {e}")
            }),
        }
    }
}

/// Everything [`crate::run`] needs. `Default` gives the documented defaults (those of
/// `redrive demo` without flags).
#[derive(Debug, Clone, PartialEq)]
pub struct DemoConfig {
    /// Kafka bootstrap servers.
    pub brokers: String,
    /// Extra librdkafka properties for every client (SASL/SSL on a real cluster), applied last.
    pub kafka_properties: Vec<(String, String)>,
    /// Where user requests are produced and first consumed.
    pub source_topic: String,
    /// Where dead letters go.
    pub dlq_topic: String,
    /// Retry topics are `<prefix>.1` ..= `<prefix>.<max_retries>`; default `<source>.retry`.
    pub retry_topic_prefix: String,
    /// Create missing topics at start-up (with `partitions` partitions, replication 1).
    pub create_topics: bool,
    /// Partitions of the topics the demo creates.
    pub partitions: i32,
    /// The agent's consumer group; retry stage `n` uses `<group>.retry.<n>` so a stage that is
    /// waiting out a backoff never stalls another's rebalance. Dead letters name this group.
    pub group_id: String,
    /// Time between produced requests, ms (default 2000: one request per 2 s).
    pub interval_ms: u64,
    /// Fraction of produced requests that are malformed (poison), 0.0–1.0.
    pub poison_ratio: f64,
    /// Stop producing after this many requests; `None` = never. `Some(0)` runs the agent only.
    pub count: Option<u64>,
    /// Fraction of LLM calls that fail outside an outage (timeouts, invalid responses, rate
    /// limits, in equal parts), 0.0–1.0.
    pub failure_ratio: f64,
    /// Typical LLM latency, ms; each call takes 0.5×–1.5× this.
    pub llm_latency_ms: u64,
    /// LLM client timeout, ms.
    pub llm_timeout_ms: u64,
    /// Start with the LLM outage switched on (until `POST /outage/off` or `/outage/auto`).
    pub outage: bool,
    /// Scheduled outages: the LLM is up for this long, ms, then down for `outage_down_ms`, and
    /// so on from start-up.
    pub outage_up_ms: u64,
    /// Length of each scheduled outage, ms; 0 = no scheduled outages.
    pub outage_down_ms: u64,
    /// Retries after the first attempt before a request is dead-lettered (so at most
    /// `1 + max_retries` attempts).
    pub max_retries: u32,
    /// Backoff before the first retry, ms; doubles each retry.
    pub backoff_base_ms: u64,
    /// Cap on one backoff, ms.
    pub backoff_max_ms: u64,
    /// Relative backoff jitter, 0.0–1.0 (below 1/3 keeps delays strictly growing).
    pub jitter: f64,
    /// Most records one stage works on at once (bounded in-flight work).
    pub max_in_flight: usize,
    /// Consecutive LLM failures that open the circuit breaker.
    pub breaker_failures: u32,
    /// How long the open breaker waits before letting one probe call through, ms.
    pub breaker_cooldown_ms: u64,
    /// The demo agent's own SQLite file (processed message ids), `sqlite:PATH`.
    pub database_url: String,
    /// Control endpoint address (`POST /outage/on|off|auto`, `GET /status`); `None` = off.
    pub control_listen: Option<SocketAddr>,
    /// Seed for the random choices (poison kinds, failures, jitter); `None` = fresh entropy.
    pub seed: Option<u64>,
}

impl Default for DemoConfig {
    fn default() -> DemoConfig {
        let source_topic = default_source_topic();
        DemoConfig {
            brokers: default_brokers(),
            kafka_properties: Vec::new(),
            retry_topic_prefix: format!("{source_topic}.retry"),
            source_topic,
            dlq_topic: default_dlq_topic(),
            create_topics: true,
            partitions: default_partitions(),
            group_id: default_group_id(),
            interval_ms: default_interval_ms(),
            poison_ratio: default_poison_ratio(),
            count: None,
            failure_ratio: default_failure_ratio(),
            llm_latency_ms: default_llm_latency_ms(),
            llm_timeout_ms: default_llm_timeout_ms(),
            outage: false,
            outage_up_ms: default_outage_up_ms(),
            outage_down_ms: default_outage_down_ms(),
            max_retries: default_max_retries(),
            backoff_base_ms: default_backoff_base_ms(),
            backoff_max_ms: default_backoff_max_ms(),
            jitter: default_jitter(),
            max_in_flight: default_max_in_flight(),
            breaker_failures: default_breaker_failures(),
            breaker_cooldown_ms: default_breaker_cooldown_ms(),
            database_url: default_database_url(),
            control_listen: default_control_listen(),
            seed: None,
        }
    }
}

impl DemoConfig {
    /// Retry topic for retry `n` (1-based).
    pub fn retry_topic(&self, n: u32) -> String {
        format!("{}.{n}", self.retry_topic_prefix)
    }

    /// Every topic the demo reads or writes: source, retry topics, DLQ.
    pub fn topics(&self) -> Vec<String> {
        let mut t = vec![self.source_topic.clone()];
        t.extend((1..=self.max_retries).map(|n| self.retry_topic(n)));
        t.push(self.dlq_topic.clone());
        t
    }

    /// Refuses settings that cannot work, with a message saying which and why.
    pub fn validate(&self) -> Result<(), DemoError> {
        let bad = |m: String| Err(DemoError::Config(m));
        for (name, v) in [
            ("poison ratio", self.poison_ratio),
            ("failure ratio", self.failure_ratio),
            ("jitter", self.jitter),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(format!("the {name} must be between 0.0 and 1.0 (got {v})"));
            }
        }
        if self.jitter >= 1.0 {
            return bad("the jitter must be below 1.0".into());
        }
        for t in self.topics() {
            if t.is_empty() || t.len() > 249 {
                return bad(format!("`{t}` is not a valid topic name"));
            }
        }
        if self.source_topic == self.dlq_topic {
            return bad("the source and DLQ topics must differ".into());
        }
        if self.max_in_flight == 0 {
            return bad("max in-flight must be at least 1".into());
        }
        if self.group_id.is_empty() {
            return bad("the consumer group must not be empty".into());
        }
        if self.partitions < 1 {
            return bad("topics need at least 1 partition".into());
        }
        Ok(())
    }
}

/// `redrive demo`: the seed design's agent pipeline on Kafka — a producer of user requests
/// (some malformed), a flaky "LLM" agent with retries through retry topics, exponential backoff
/// and a circuit breaker, and a DLQ that redrive ingests.
///
/// Kafka connection settings are not here: the demo uses redrive's own (`--kafka-brokers`,
/// `REDRIVE_KAFKA_BROKERS`, `REDRIVE_KAFKA__*`), passed to [`DemoArgs::into_config`].
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Topic of user requests.
    #[arg(long, default_value_t = default_source_topic())]
    pub source_topic: String,
    /// Dead-letter topic.
    #[arg(long, default_value_t = default_dlq_topic())]
    pub dlq_topic: String,
    /// Prefix of the retry topics (`<prefix>.1`, `<prefix>.2`, ...) (default: `<source-topic>.retry`).
    #[arg(long)]
    pub retry_topic_prefix: Option<String>,
    /// Do not create missing topics at start-up.
    #[arg(long)]
    pub no_create_topics: bool,
    /// Partitions of the topics the demo creates.
    #[arg(long, default_value_t = default_partitions())]
    pub partitions: i32,
    /// The agent's consumer group (retry stages use `<group>.retry.<n>`).
    #[arg(long, default_value_t = default_group_id())]
    pub agent_group: String,
    /// Time between produced requests, ms.
    #[arg(long, default_value_t = default_interval_ms())]
    pub interval_ms: u64,
    /// Fraction of requests that are malformed (poison), 0.0–1.0.
    #[arg(long, default_value_t = default_poison_ratio())]
    pub poison_ratio: f64,
    /// Stop producing after N requests (0 = run the agent only) [default: never stop].
    #[arg(long)]
    pub count: Option<u64>,
    /// Fraction of LLM calls that fail outside an outage (timeouts, invalid responses, rate limits), 0.0–1.0.
    #[arg(long, default_value_t = default_failure_ratio())]
    pub failure_ratio: f64,
    /// Typical LLM latency, ms (each call takes 0.5×–1.5× this).
    #[arg(long, default_value_t = default_llm_latency_ms())]
    pub llm_latency_ms: u64,
    /// LLM client timeout, ms.
    #[arg(long, default_value_t = default_llm_timeout_ms())]
    pub llm_timeout_ms: u64,
    /// Start with the LLM outage on (switch it with `POST /outage/off` on the control endpoint).
    #[arg(long)]
    pub outage: bool,
    /// Scheduled outages: the LLM is up for this long, ms, then down for --outage-down-ms, repeating.
    #[arg(long, default_value_t = default_outage_up_ms())]
    pub outage_up_ms: u64,
    /// Length of each scheduled outage, ms (0 = none).
    #[arg(long, default_value_t = default_outage_down_ms())]
    pub outage_down_ms: u64,
    /// Retries before a request is dead-lettered (at most 1 + N attempts).
    #[arg(long, default_value_t = default_max_retries())]
    pub max_retries: u32,
    /// Backoff before the first retry, ms (doubles each retry).
    #[arg(long, default_value_t = default_backoff_base_ms())]
    pub backoff_base_ms: u64,
    /// Cap on one backoff, ms.
    #[arg(long, default_value_t = default_backoff_max_ms())]
    pub backoff_max_ms: u64,
    /// Relative backoff jitter, 0.0–1.0.
    #[arg(long, default_value_t = default_jitter())]
    pub jitter: f64,
    /// Most records one stage works on at once.
    #[arg(long, default_value_t = default_max_in_flight())]
    pub max_in_flight: usize,
    /// Consecutive LLM failures that open the circuit breaker.
    #[arg(long, default_value_t = default_breaker_failures())]
    pub breaker_failures: u32,
    /// Open-breaker cool-down before a probe call, ms.
    #[arg(long, default_value_t = default_breaker_cooldown_ms())]
    pub breaker_cooldown_ms: u64,
    /// The demo agent's own SQLite file (processed message ids; not redrive's database).
    #[arg(long, value_name = "URL", default_value_t = default_database_url())]
    pub agent_database_url: String,
    /// Control endpoint: `POST /outage/on|off|auto`, `GET /status`; `off` disables it.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:3001")]
    pub control_listen: ControlListen,
    /// Seed for the random choices (repeatable runs).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl DemoArgs {
    /// The demo's configuration, connecting with redrive's Kafka settings: bootstrap
    /// `brokers` and extra librdkafka `kafka_properties` (SASL/SSL).
    pub fn into_config(
        self,
        brokers: String,
        kafka_properties: Vec<(String, String)>,
    ) -> DemoConfig {
        DemoConfig {
            retry_topic_prefix: self
                .retry_topic_prefix
                .unwrap_or_else(|| format!("{}.retry", self.source_topic)),
            brokers,
            kafka_properties,
            source_topic: self.source_topic,
            dlq_topic: self.dlq_topic,
            create_topics: !self.no_create_topics,
            partitions: self.partitions,
            group_id: self.agent_group,
            interval_ms: self.interval_ms,
            poison_ratio: self.poison_ratio,
            count: self.count,
            failure_ratio: self.failure_ratio,
            llm_latency_ms: self.llm_latency_ms,
            llm_timeout_ms: self.llm_timeout_ms,
            outage: self.outage,
            outage_up_ms: self.outage_up_ms,
            outage_down_ms: self.outage_down_ms,
            max_retries: self.max_retries,
            backoff_base_ms: self.backoff_base_ms,
            backoff_max_ms: self.backoff_max_ms,
            jitter: self.jitter,
            max_in_flight: self.max_in_flight,
            breaker_failures: self.breaker_failures,
            breaker_cooldown_ms: self.breaker_cooldown_ms,
            database_url: self.agent_database_url,
            control_listen: self.control_listen.0,
            seed: self.seed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        demo: DemoArgs,
    }

    #[test]
    fn no_flags_gives_the_documented_defaults() {
        let cfg = Cli::parse_from(["x"])
            .demo
            .into_config(default_brokers(), Vec::new());
        assert_eq!(cfg, DemoConfig::default());
        assert_eq!(
            cfg.topics(),
            [
                "user_requests",
                "user_requests.retry.1",
                "user_requests.retry.2",
                "user_requests.retry.3",
                "dlq_requests"
            ]
        );
        cfg.validate().unwrap();
    }

    #[test]
    fn flags_override() {
        let cfg: DemoConfig = Cli::parse_from([
            "x",
            "--source-topic",
            "s",
            "--interval-ms",
            "50",
            "--poison-ratio",
            "0.5",
            "--failure-ratio",
            "1",
            "--outage",
            "--control-listen",
            "off",
            "--max-retries",
            "2",
            "--agent-group",
            "g",
        ])
        .demo
        .into_config(
            "k:9092".into(),
            vec![("security.protocol".into(), "SSL".into())],
        );
        assert_eq!(cfg.retry_topic(2), "s.retry.2");
        assert_eq!(cfg.group_id, "g");
        assert_eq!(cfg.brokers, "k:9092");
        assert_eq!(cfg.topics().len(), 4);
        assert_eq!(cfg.interval_ms, 50);
        assert!(cfg.outage);
        assert_eq!(cfg.control_listen, None);
        assert_eq!(
            cfg.kafka_properties,
            [("security.protocol".to_string(), "SSL".to_string())]
        );
        let bad = DemoConfig {
            poison_ratio: 1.5,
            ..cfg
        };
        assert!(bad.validate().is_err());
    }
}
