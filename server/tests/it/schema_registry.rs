//! Schema-aware payloads (`docs/payloads.md`), through the real binary on SQLite and
//! PostgreSQL, against a real Schema Registry server: Apicurio Registry (Maven Central, built
//! and run by `scripts/registry`; its Confluent Schema Registry API). Record values serialized by
//! Confluent's own serializers (PyPI confluent-kafka: AvroSerializer, ProtobufSerializer,
//! JSONSerializer; `scripts/schema-serdes.py`), which register their schemas in that registry
//! (the Protobuf one with a reference to an imported file), are produced to the real broker,
//! ingested, and shown on the detail page and by `GET /api/v1/dead-letters/{id}` decoded with
//! the schemas redrive fetched from the registry over HTTP (no local schema files). A value
//! whose schema id the registry does not have is shown as hex with its schema id and why; with
//! a registry that accepts the connection and never answers, the same, and the registry is not
//! asked again while the failure is remembered. The stored bytes are unchanged.

use std::time::Duration;

use base64::Engine as _;
use redrive_testkit::ingest::{ingest_config, start_ingest};
use redrive_testkit::{
    create_topic, fresh_database, produce, repo_root, unique, Backend, TestRecord,
};
use serde_json::Value;

use crate::support::receiver::Hanging;
use crate::support::{Auth, TestApp};

/// The Confluent Schema Registry API of the real registry: `REDRIVE_TEST_SCHEMA_REGISTRY_URL`
/// (`scripts/test` starts one), else the development one `scripts/registry start` builds and
/// starts (idempotent; left running, like the development broker).
fn registry_url() -> String {
    if let Ok(url) = std::env::var("REDRIVE_TEST_SCHEMA_REGISTRY_URL") {
        return url;
    }
    let out = std::process::Command::new(repo_root().join("scripts/registry"))
        .arg("start")
        .output()
        .expect("scripts/registry start");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Held while the serializers register schemas. The registry (Apicurio, in-memory H2) fails
/// registrations made at the same time: its log shows "Concurrent update in table
/// SEQUENCES", and the client, which tries again, is then answered 409 "already exists" for
/// its own new subject. The sqlite and postgres tests run at once, so they take turns here.
static REGISTERING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs the real serializers against the registry at `url` (subjects `<prefix>payments-value`,
/// ...): the serialized values and what each must decode to.
fn serialized(url: &str, prefix: &str) -> Value {
    let _turn = REGISTERING.lock().unwrap_or_else(|e| e.into_inner());
    let setup = std::process::Command::new(repo_root().join("scripts/setup-schema-serdes"))
        .output()
        .expect("scripts/setup-schema-serdes");
    assert!(
        setup.status.success(),
        "{}",
        String::from_utf8_lossy(&setup.stderr)
    );
    let python = String::from_utf8(setup.stdout).unwrap().trim().to_string();
    let out = std::process::Command::new(python)
        .arg(repo_root().join("scripts/schema-serdes.py"))
        .arg(url)
        .arg(prefix)
        .output()
        .expect("scripts/schema-serdes.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the serializers' JSON")
}

fn b64(s: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s.as_str().expect("base64 text"))
        .expect("base64")
}

async fn decoded_through_the_binary(backend: Backend) {
    let registry_url = registry_url();
    let truth = serialized(&registry_url, &unique("sr"));
    // A value in the wire format whose schema id the registry does not have.
    let mut unknown = vec![0u8, 0, 0, 0x30, 0x39]; // schema id 12345
    unknown.extend_from_slice(&[0x02, 0xde, 0xad, 0xbe, 0xef]);
    let values: Vec<Vec<u8>> = vec![
        b64(&truth["avro"]["value"]),
        b64(&truth["protobuf"]["value"]),
        b64(&truth["json"]["value"]),
        unknown.clone(),
    ];

    let topic = unique("payments.DLT");
    create_topic(&topic, 1, &[]).await.expect("topic");
    let records: Vec<TestRecord> = values
        .iter()
        .map(|v| TestRecord {
            key: Some(b"k".to_vec()),
            value: Some(v.clone()),
            partition: Some(0),
            ..TestRecord::default()
        })
        .collect();
    produce(&topic, &records).await.expect("produce");
    let (db_url, dir) = fresh_database(backend).await.expect("database");
    let store = redrive_core::store::Store::connect(&db_url)
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    let ingest = start_ingest(&store, ingest_config(&[&topic], &unique("group")));
    ingest
        .wait_for_count(&store, &topic, values.len() as i64, Duration::from_secs(60))
        .await
        .expect("ingested");
    ingest.stop().await.expect("ingest stops");

    // redrive reads schemas from the real registry only (no schema_dirs). The timeout is
    // generous: the registry's first answers come from a JVM that is still warming up.
    let configs = tempfile::tempdir().expect("tempdir");
    let config = configs.path().join("real.toml");
    std::fs::write(
        &config,
        format!("[schema_registry]\nurl = {registry_url:?}\ntimeout_ms = 15000\n"),
    )
    .expect("config");
    let config_path = config.to_str().unwrap().to_string();
    let app = TestApp::serve(db_url, store, dir, &[("REDRIVE_CONFIG", &config_path)]).await;
    let token = app.admin_token().await;
    let q = redrive_core::ListQuery::from_pairs([("dlq_topic", topic.as_str())]).expect("query");
    let mut items = app.store.list(&q).await.expect("list").items;
    items.sort_by_key(|s| s.dlq_offset);
    let ids: Vec<i64> = items.iter().map(|s| s.id).collect();
    assert_eq!(ids.len(), 4);

    let api = |id: i64| {
        let app = &app;
        let token = token.clone();
        async move {
            let res = app
                .get(&format!("/api/v1/dead-letters/{id}"), Auth::Bearer(&token))
                .await;
            assert_eq!(res.status(), 200, "{}", app.log());
            res.json::<Value>().await.expect("JSON")
        }
    };

    // Avro and Protobuf (a nested message: indexes [1, 0]; an imported file: a reference the
    // registry resolves by subject and version) and JSON Schema, each decoded as the
    // serializer's input; the stored value is the serializer's bytes, exactly.
    for (i, kind, t) in [
        (0, "avro", "AVRO"),
        (1, "protobuf", "PROTOBUF"),
        (2, "json", "JSON"),
    ] {
        let got = api(ids[i]).await;
        let vs = &got["value_schema"];
        assert_eq!(vs["schema_id"], truth[kind]["schema_id"], "{kind}: {got}");
        assert_eq!(vs["schema_type"], t, "{kind}: {got}");
        assert_eq!(vs["error"], Value::Null, "{kind}: {got}");
        assert_eq!(vs["decoded"], truth[kind]["expected"], "{kind}: {got}");
        assert_eq!(
            b64(&got["value"]),
            values[i],
            "{kind}: stored bytes unchanged"
        );
    }
    let proto = api(ids[1]).await;
    assert_eq!(
        proto["value_schema"]["message"],
        truth["protobuf"]["message"]
    );

    // The unknown schema id: its id and why (the registry's 404), no decoded value.
    let got = api(ids[3]).await;
    let vs = &got["value_schema"];
    assert_eq!(vs["schema_id"], 12345, "{got}");
    assert_eq!(vs["schema_type"], Value::Null, "{got}");
    assert_eq!(vs["decoded"], Value::Null, "{got}");
    assert_eq!(
        vs["error"], "could not fetch (the schema registry has no schemas/ids/12345)",
        "{got}"
    );
    assert_eq!(b64(&got["value"]), unknown);

    // The detail pages, as a signed-in viewer sees them.
    app.add_user("reader", "viewer", "viewer-password-1").await;
    let session = app.sign_in("reader", "viewer-password-1").await;
    let page = |id: i64| {
        let app = &app;
        let session = session.clone();
        async move {
            let res = app
                .get(&format!("/dead-letters/{id}"), Auth::Session(&session))
                .await;
            assert_eq!(res.status(), 200, "{}", app.log());
            res.text().await.expect("page")
        }
    };
    let avro = page(ids[0]).await;
    let avro_id = truth["avro"]["schema_id"].as_u64().unwrap();
    assert!(
        avro.contains(&format!("decoded with schema id {avro_id} (AVRO)")),
        "{avro}"
    );
    for part in ["pay-7781", "1234567890123", "PAID", "4242", "expiry_month"] {
        assert!(avro.contains(part), "Avro page lacks {part}");
    }
    // The raw view stays: the stored bytes as a hex dump, and the download link.
    assert!(avro.contains("class=\"hexdump\""), "raw hex view kept");
    assert!(avro.contains(&format!("/dead-letters/{}/raw/value", ids[0])));
    let proto = page(ids[1]).await;
    let proto_id = truth["protobuf"]["schema_id"].as_u64().unwrap();
    assert!(
        proto.contains(&format!("decoded with schema id {proto_id} (PROTOBUF)")),
        "{proto}"
    );
    for part in [
        "message shop.orders.Order.Line",
        "SKU-1",
        "9000000001",
        "DIGITAL",
        "2026-12-01T06:00:00Z",
        "unitPrice",
        "EUR",
    ] {
        assert!(proto.contains(part), "Protobuf page lacks {part}");
    }
    let unknown_page = page(ids[3]).await;
    assert!(
        unknown_page.contains(
            "schema id 12345: could not fetch (the schema registry has no schemas/ids/12345)"
        ),
        "{unknown_page}"
    );
    assert!(unknown_page.contains("class=\"hexdump\""));
    assert!(
        unknown_page.contains("00 00 00 30 39 02 de ad be ef"),
        "the hex dump of the stored bytes"
    );

    // The raw download is the stored bytes.
    let raw = app
        .get(
            &format!("/dead-letters/{}/raw/value", ids[1]),
            Auth::Session(&session),
        )
        .await;
    assert_eq!(raw.status(), 200);
    assert_eq!(raw.bytes().await.expect("bytes").as_ref(), &values[1][..]);

    // A registry that accepts connections and never answers: the same app restarted with it.
    let hanging = Hanging::start().await;
    let config = configs.path().join("hanging.toml");
    std::fs::write(
        &config,
        format!(
            "[schema_registry]\nurl = {:?}\ntimeout_ms = 500\n",
            hanging.url
        ),
    )
    .expect("config");
    let config_path = config.to_str().unwrap().to_string();
    let app = app.restart(&[("REDRIVE_CONFIG", &config_path)]).await;
    let got = app
        .get(
            &format!("/api/v1/dead-letters/{}", ids[3]),
            Auth::Bearer(&token),
        )
        .await;
    assert_eq!(got.status(), 200, "{}", app.log());
    let got: Value = got.json().await.expect("JSON");
    let vs = &got["value_schema"];
    assert_eq!(vs["schema_id"], 12345, "{got}");
    assert_eq!(vs["decoded"], Value::Null, "{got}");
    let why = vs["error"].as_str().expect("a reason");
    assert!(
        why.starts_with("could not fetch (") && why.contains("did not answer in time"),
        "{why}"
    );
    assert_eq!(b64(&got["value"]), unknown);
    assert_eq!(hanging.accepted(), 1, "one request to the hanging registry");
    let session = app.sign_in("reader", "viewer-password-1").await;
    let res = app
        .get(
            &format!("/dead-letters/{}", ids[3]),
            Auth::Session(&session),
        )
        .await;
    assert_eq!(res.status(), 200, "{}", app.log());
    let hanging_page = res.text().await.expect("page");
    assert!(
        hanging_page.contains(
            "schema id 12345: could not fetch (the schema registry did not answer in time)"
        ),
        "{hanging_page}"
    );
    assert!(hanging_page.contains("00 00 00 30 39 02 de ad be ef"));
    assert_eq!(
        hanging.accepted(),
        1,
        "the failure is remembered: the page did not ask the registry again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_format_values_are_decoded_on_sqlite() {
    decoded_through_the_binary(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_format_values_are_decoded_on_postgres() {
    decoded_through_the_binary(Backend::Postgres).await;
}
