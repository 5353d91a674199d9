//! The monitoring shipped in `deploy/` (docs/metrics.md): Prometheus's own `promtool` (Debian's
//! prometheus package, installed by `scripts/setup`) accepts the scrape config and the alert
//! rules and passes the rules' unit tests, and every `redrive_*` metric that the rules and the
//! Grafana dashboard name is exported by a running redrive (ingest on a real broker, a dead
//! letter stored), so a renamed metric cannot silently blank a panel or an alert.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use redrive_testkit::{create_topic, kafka_brokers, produce, unique, Backend, TestRecord};

use crate::support::{eventually, TestApp};

fn deploy() -> PathBuf {
    redrive_testkit::repo_root().join("deploy")
}

fn promtool(args: &[&str], dir: &Path) -> String {
    let out = std::process::Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool (Debian package prometheus; scripts/setup installs it)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

#[test]
fn promtool_accepts_the_config_and_the_rules_pass_their_unit_tests() {
    let dir = deploy().join("prometheus");
    let checked = promtool(&["check", "config", "prometheus.yml"], &dir);
    assert!(checked.contains("rules found"), "{checked}");
    promtool(&["test", "rules", "rules/redrive.rules.test.yml"], &dir);
}

/// Every `redrive_...` name in `text` (PromQL in YAML or JSON).
fn metric_names(text: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\bredrive_[a-z0-9_]+\b").expect("regex");
    re.find_iter(text)
        .map(|m| m.as_str().to_string())
        // `redrive_...` also names things that are not metrics: the dashboard's uid.
        .filter(|n| !n.starts_with("redrive_prometheus"))
        .collect()
}

/// The sample names a scrape can carry, from its `# TYPE` lines: a counter `x` is sampled as
/// `x_total`, a histogram or summary as `x_bucket`/`x_sum`/`x_count`.
fn exported(scrape: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in scrape.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        match kind {
            "counter" => {
                out.insert(format!("{}_total", name.trim_end_matches("_total")));
            }
            "histogram" | "summary" => {
                for s in ["_bucket", "_sum", "_count"] {
                    out.insert(format!("{name}{s}"));
                }
            }
            _ => {
                out.insert(name.to_string());
            }
        }
    }
    out
}

#[tokio::test]
async fn every_metric_the_rules_and_the_dashboard_name_is_exported() {
    let mut named = BTreeSet::new();
    for file in [
        deploy().join("prometheus/rules/redrive.rules.yml"),
        deploy().join("grafana/dashboards/redrive.json"),
    ] {
        let text = std::fs::read_to_string(&file).expect("read deploy file");
        let names = metric_names(&text);
        assert!(!names.is_empty(), "{} names no metric", file.display());
        named.extend(names);
    }

    let topic = unique("monitoring.DLT");
    create_topic(&topic, 2, &[]).await.expect("topic");
    let brokers = kafka_brokers();
    let app = TestApp::start_on(
        Backend::Sqlite,
        &[
            ("REDRIVE_METRICS_PUBLIC", "true"),
            ("REDRIVE_INGEST_ENABLED", "true"),
            ("REDRIVE_KAFKA_BROKERS", &brokers),
            ("REDRIVE_DLQ_TOPICS", &topic),
        ],
    )
    .await;
    produce(&topic, &[TestRecord::new("{\"order\":1}", &[])])
        .await
        .expect("produce");
    let scrape = || async {
        let res = reqwest::get(app.url("/metrics")).await.expect("scrape");
        res.text().await.expect("body")
    };
    // Once the dead letter is stored and the consumer's statistics are in, every family has
    // had a reason to appear.
    eventually(
        "the dead letter to be ingested",
        Duration::from_secs(60),
        || async {
            scrape()
                .await
                .lines()
                .any(|l| l.starts_with("redrive_dead_letters_ingested_total 1"))
        },
    )
    .await;
    eventually(
        "the consumer lag to be reported",
        Duration::from_secs(60),
        || async {
            scrape()
                .await
                .lines()
                .any(|l| l.starts_with("redrive_ingest_consumer_lag{"))
        },
    )
    .await;
    let have = exported(&scrape().await);
    let missing: Vec<_> = named.difference(&have).collect();
    assert!(
        missing.is_empty(),
        "named in deploy/ but not exported by redrive: {missing:?}\nexported: {have:?}"
    );
}
