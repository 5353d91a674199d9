//! The process around the API: health, readiness, metrics, gzip, SIGTERM, ingest from a
//! real Kafka topic through the binary, the other subcommands and start-up failures.

use super::*;

// ---------------------------------------------------------------------------------------------
// Health, metrics, HTTP behaviour

#[tokio::test]
async fn health_readiness_and_metrics() {
    let app = Api::with(&fixtures()).await;
    let res = app.get("/healthz").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.expect("body"), "ok");

    let (status, ready) = app.get_json("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["store"]["ok"], true);
    assert_eq!(ready["store"]["backend"], "sqlite");
    assert_eq!(ready["ingest"]["enabled"], false);
    // The replay relay's state (docs/replay.md, "Relay status").
    assert_eq!(ready["relay"]["published_total"], 0, "{ready}");
    assert_eq!(ready["relay"]["rejected_total"], 0, "{ready}");
    assert!(ready["relay"]["running"].is_boolean(), "{ready}");
    assert!(ready["relay"].get("stopped").is_none(), "{ready}");

    let res = app.get("/metrics").await;
    assert_eq!(res.status(), 200);
    assert!(content_type(&res).starts_with("text/plain"));
    let text = res.text().await.expect("body");
    for name in [
        "redrive_dead_letters_ingested_total",
        "redrive_ingest_batches_total",
        "redrive_store_errors_total",
        "redrive_ingest_ready",
        "redrive_dead_letters",
        "redrive_relay_published_total",
        "redrive_relay_failed_total",
        "redrive_relay_rejected_total",
        "redrive_relay_retried_total",
        "redrive_relay_released_total",
        "redrive_relay_running",
        "redrive_relay_active_jobs",
        "redrive_relay_kafka_reachable",
    ] {
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "/metrics lacks {name}:\n{text}"
        );
    }
    assert!(
        text.contains("redrive_dead_letters{status=\"new\"} 12"),
        "{text}"
    );
    assert!(text.contains("redrive_ingest_ready 0"), "{text}");
}

#[tokio::test]
async fn responses_are_gzipped_when_asked() {
    let app = Api::with(&fixtures()).await;
    let res = reqwest::Client::new()
        .get(app.url("/api/v1/dead-letters"))
        .bearer_auth(&app.token)
        .header(reqwest::header::ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .expect("GET");
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()
            .get(reqwest::header::CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok()),
        Some("gzip")
    );
}

#[tokio::test]
async fn readyz_is_503_while_kafka_is_unreachable() {
    // Nothing listens on port 1: ingest starts, but can never reach the cluster.
    let app = Api::start(
        &[],
        Options {
            env: vec![
                ("REDRIVE_INGEST_ENABLED", "true".into()),
                ("REDRIVE_KAFKA_BROKERS", "127.0.0.1:1".into()),
                ("REDRIVE_DLQ_TOPICS", "orders.DLT".into()),
            ],
            ..Options::default()
        },
    )
    .await;
    let (status, body) = app.get_json("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["ready"], false);
    assert_eq!(body["store"]["ok"], true);
    assert!(!error_message(&body).is_empty());
    // The process itself is fine.
    assert_eq!(app.get("/healthz").await.status(), 200);
    // SIGTERM still stops it cleanly.
    let (code, log) = app.terminate(Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{log}");
}

#[tokio::test]
async fn sigterm_stops_cleanly() {
    let app = Api::with(&[]).await;
    assert_eq!(app.get("/healthz").await.status(), 200);
    let (code, log) = app.terminate(Duration::from_secs(30)).await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("stopped"), "{log}");
    // The harness read `listening on http://ADDR` from stdout: the log does not repeat it.
    assert!(!log.contains("listening on"), "{log}");
}

// ---------------------------------------------------------------------------------------------
// Kafka -> ingest -> API, through the binary

#[tokio::test]
async fn serve_ingests_a_dlq_topic_and_serves_it() {
    let topic = format!("{}.DLT", redrive_testkit::unique("api"));
    redrive_testkit::create_topic(&topic, 1, &[])
        .await
        .expect("topic");
    let mut record = TestRecord::new(
        "{\"order\":7}",
        &[
            ("kafka_dlt-original-topic", b"orders"),
            (
                "kafka_dlt-exception-fqcn",
                b"java.lang.IllegalStateException",
            ),
            ("kafka_dlt-exception-message", b"no stock for order 7"),
        ],
    );
    record.key = Some(b"order-7".to_vec());
    redrive_testkit::produce(&topic, &[record])
        .await
        .expect("produce");

    let group = redrive_testkit::unique("api_group");
    let app = Api::start(
        &[],
        Options {
            env: vec![
                ("REDRIVE_INGEST_ENABLED", "true".into()),
                ("REDRIVE_KAFKA_BROKERS", redrive_testkit::kafka_brokers()),
                ("REDRIVE_DLQ_TOPICS", topic.clone()),
                ("REDRIVE_GROUP_ID", group),
            ],
            ..Options::default()
        },
    )
    .await;

    let path = format!("/api/v1/dead-letters?dlq_topic={topic}");
    let item = redrive_testkit::wait_for(
        "the dead letter in the API",
        Duration::from_secs(60),
        || async {
            let (_, body) = app.get_json(&path).await;
            items(&body).first().cloned()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- redrive log ---\n{}", app.log()));
    assert_eq!(item["source_topic"], "orders");
    assert_eq!(item["error_class"], "java.lang.IllegalStateException");
    assert_eq!(item["error_message"], "no stock for order 7");
    assert_eq!(item["convention"], "spring_dlt");

    redrive_testkit::wait_for("/readyz 200", Duration::from_secs(60), || async {
        (app.get("/readyz").await.status() == 200).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- redrive log ---\n{}", app.log()));
    let metrics = app.get("/metrics").await.text().await.expect("metrics");
    assert!(
        metrics.contains("redrive_dead_letters_ingested_total 1"),
        "{metrics}"
    );
    assert!(metrics.contains("redrive_ingest_ready 1"), "{metrics}");

    let (code, log) = app.terminate(Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("ingest stopped cleanly"), "{log}");
}

// ---------------------------------------------------------------------------------------------
// The other subcommands and start-up failures

#[tokio::test]
async fn config_prints_the_effective_configuration_without_secrets() {
    let (code, out, err) = run_redrive(
        &["config", "--listen", "0.0.0.0:4000"],
        &[
            (
                "REDRIVE_DATABASE_URL",
                "postgres://redrive:s3cret@db:5432/redrive",
            ),
            ("REDRIVE_GROUP_ID", "ops"),
            ("REDRIVE_LISTEN", "127.0.0.1:9"),
            ("REDRIVE_KAFKA__SASL_PASSWORD", "hunter2"),
            ("REDRIVE_KAFKA__SASL_MECHANISM", "PLAIN"),
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("group_id = \"ops\""), "{out}");
    assert!(out.contains("listen = \"0.0.0.0:4000\""), "{out}");
    assert!(out.contains("\"sasl.mechanism\" = \"PLAIN\""), "{out}");
    assert!(!out.contains("s3cret") && !out.contains("hunter2"), "{out}");
    assert!(out.contains("REDACTED"), "{out}");
}

#[tokio::test]
async fn migrate_creates_the_schema_and_exits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = redrive_testkit::fresh_sqlite_url(&dir);
    let (code, _, err) = run_redrive(&["migrate"], &[("REDRIVE_DATABASE_URL", &url)], None).await;
    assert_eq!(code, Some(0), "{err}");
    let store = Store::connect(&url).await.expect("connect");
    let page = store
        .list(&redrive_core::ListQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .expect("the schema exists");
    assert!(page.items.is_empty());
}

#[tokio::test]
async fn bad_configuration_exits_2_with_the_reason() {
    let (code, _, err) =
        run_redrive(&["serve"], &[("REDRIVE_INGEST_BATCH_SIZE", "lots")], None).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("ingest_batch_size"), "{err}");
}

#[tokio::test]
async fn an_unreachable_database_is_retried_then_reported() {
    // A PostgreSQL server that refuses connections (nothing listens on port 1): "unavailable",
    // like a database server that is not up yet, but failing fast.
    let (code, _, err) = run_redrive(
        &["serve"],
        &[
            (
                "REDRIVE_DATABASE_URL",
                "postgres://redrive@127.0.0.1:1/redrive",
            ),
            ("REDRIVE_DATABASE_WAIT_MS", "6000"),
            ("REDRIVE_LISTEN", "127.0.0.1:0"),
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("retrying"), "{err}");
    assert!(err.contains("still unreachable"), "{err}");
}

#[tokio::test]
async fn a_bad_topic_pattern_stops_serve_with_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = redrive_testkit::fresh_sqlite_url(&dir);
    let (code, _, err) = run_redrive(
        &["serve"],
        &[
            ("REDRIVE_DATABASE_URL", &url),
            ("REDRIVE_LISTEN", "127.0.0.1:0"),
            ("REDRIVE_KAFKA_BROKERS", "127.0.0.1:1"),
            ("REDRIVE_DLQ_TOPICS", "^orders(\\.DLT"),
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("orders("), "{err}");
}
