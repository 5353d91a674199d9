//! Edit and replay (`docs/replay.md`, "Edit and replay"), through the real binary on the real
//! broker, on SQLite and PostgreSQL: an edited dead letter's replay publishes exactly ONE
//! record, the edited one (key, value, headers as edited, redrive's headers added), read back
//! from the target topic with a real consumer; later replays (by id, by filter) publish the
//! latest version, never the original; the original bytes stay unchanged in the store; the
//! audit row carries a bounded diff (a 10 MB value gives a summary of a few KiB); bad edits
//! are clear 4xx refusals that change nothing; and the plain-form (no JavaScript) path of the
//! editor page saves and replays.

use std::time::Duration;

use redrive_core::actions::Role;
use redrive_core::edit::diff::MAX_SUMMARY_BYTES;
use redrive_core::model::Header;
use redrive_core::replay::{
    HEADER_DEAD_LETTER_ID, HEADER_EDIT_VERSION, HEADER_IDEMPOTENCY_KEY, HEADER_REPLAYED_BY,
    HEADER_REPLAY_COUNT, HEADER_REPLAY_ID,
};
use redrive_core::Status;
use redrive_testkit::{consume, create_topic, kafka_brokers, unique, wait_for, Backend};
use serde_json::{json, Value};

use crate::support::replay::{dead_letter, header_text, headers_of, record_count};
use crate::support::{location, Auth, Csrf, TestApp};
use crate::ui_actions::Browser;

fn h(name: &str, value: Option<&[u8]>) -> Header {
    Header {
        name: name.to_string(),
        value: value.map(<[u8]>::to_vec),
    }
}

/// Spring DLPR headers naming `source` as the original topic, with application headers.
fn original_headers(source: &str) -> Vec<Header> {
    vec![
        h(
            "traceparent",
            Some(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ),
        h("kafka_dlt-original-topic", Some(source.as_bytes())),
        h(
            "kafka_dlt-exception-fqcn",
            Some(b"com.fasterxml.jackson.databind.exc.InvalidFormatException"),
        ),
        h(
            "kafka_dlt-exception-message",
            Some(b"Cannot deserialize value of type `BigDecimal` from String \"12,50\""),
        ),
        h("x-tenant", Some(b"acme")),
        h("x-bin", Some(&[0x00, 0xff, 0xc3, 0x28])),
    ]
}

const ORIGINAL_VALUE: &[u8] =
    b"{\n  \"order\": 4711,\n  \"amount\": \"12,50\",\n  \"currency\": \"EUR\"\n}\n";
const EDITED_VALUE: &[u8] =
    b"{\n  \"order\": 4711,\n  \"amount\": 12.5,\n  \"currency\": \"EUR\"\n}\n";

/// A served store holding one dead letter whose source topic is a fresh topic, its relay on
/// the real broker (`kafka`) or on an address where nothing listens (a replay stays pending);
/// returns the app, an admin token, the dead letter's id and the topic.
async fn app_with_one(backend: Backend, kafka: bool) -> (TestApp, String, i64, String) {
    let source = unique("orders-edit");
    create_topic(&source, 1, &[]).await.expect("topic");
    let mut dl = dead_letter(
        1,
        Some(b"order-4711".to_vec()),
        Some(ORIGINAL_VALUE.to_vec()),
        original_headers(&source),
    );
    dl.record.dlq_topic = unique("orders-edit.DLT");
    let brokers = if kafka {
        kafka_brokers()
    } else {
        "127.0.0.1:9".to_string()
    };
    let app = TestApp::with_records(
        backend,
        &[dl],
        &[("REDRIVE_KAFKA_BROKERS", brokers.as_str())],
    )
    .await;
    let token = app.admin_token().await;
    let id = app
        .store
        .list(&Default::default())
        .await
        .expect("list")
        .items[0]
        .id;
    (app, token, id, source)
}

async fn json_of(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let text = res.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn wait_finished(app: &TestApp, token: &str, job: &str) -> Value {
    wait_for(
        &format!("job {job} finished"),
        Duration::from_secs(60),
        || async {
            let (_, j) = json_of(
                app.get(&format!("/api/v1/replays/{job}"), Auth::Bearer(token))
                    .await,
            )
            .await;
            (j["status"] == "finished").then_some(j)
        },
    )
    .await
    .expect("job finishes")
}

/// The application headers the edit asks for, in order.
fn edited_headers() -> Vec<Header> {
    vec![
        h("x-tenant", Some(b"beta")),
        h("x-bin", Some(&[0xde, 0xad, 0x00, 0xbe, 0xef])),
        h("x-null", None),
        h("x-empty", Some(b"")),
    ]
}

#[tokio::test]
async fn edit_and_replay_publishes_exactly_one_record_with_the_edited_bytes() {
    for backend in Backend::ALL {
        let (app, token, id, source) = app_with_one(backend, true).await;
        let before = app.store.get(id).await.expect("get").expect("dead letter");

        let body = json!({
            "key": {"text": "order-4711-fixed"},
            "value": {"json": String::from_utf8(EDITED_VALUE.to_vec()).unwrap()},
            "headers": [
                {"name": "x-tenant", "value": {"text": "beta"}},
                {"name": "x-bin", "value": {"hex": "dead00beef"}},
                {"name": "x-null", "value": null},
                {"name": "x-empty", "value": {"base64": ""}},
            ],
            "base_version": 0,
            "reason": "INC-42 amount as a number",
            "replay": true,
        });
        let (status, created) = json_of(
            app.post_json(
                &format!("/api/v1/dead-letters/{id}/versions"),
                Auth::Bearer(&token),
                Csrf::Right,
                &body,
            )
            .await,
        )
        .await;
        assert_eq!(status, 201, "{backend:?}: {created}\n{}", app.log());
        assert_eq!(created["version"], 1);
        assert_eq!(created["value_bytes"], EDITED_VALUE.len());
        let job = created["job_id"].as_str().expect("a job").to_string();
        let done = wait_finished(&app, &token, &job).await;
        assert_eq!(
            (done["total"].as_i64(), done["published"].as_i64()),
            (Some(1), Some(1)),
            "{done}"
        );

        // Exactly one record on the topic, and it is the edited one.
        let got = consume(&source, 1).await.expect("the replayed records");
        assert_eq!(
            record_count(&source, 1),
            1,
            "{backend:?}: one record, not two"
        );
        let m = &got[0];
        use rdkafka::Message;
        assert_eq!(m.key(), Some(&b"order-4711-fixed"[..]));
        assert_eq!(m.payload(), Some(EDITED_VALUE));
        let hs = headers_of(m);
        let app_headers: Vec<Header> = hs
            .iter()
            .filter(|x| !x.name.starts_with("redrive-"))
            .cloned()
            .collect();
        assert_eq!(
            app_headers,
            edited_headers(),
            "{backend:?}: the edited headers, in order"
        );
        assert_eq!(header_text(&hs, HEADER_REPLAY_ID), job);
        assert_eq!(header_text(&hs, HEADER_DEAD_LETTER_ID), id.to_string());
        assert_eq!(header_text(&hs, HEADER_REPLAY_COUNT), "1");
        assert_eq!(header_text(&hs, HEADER_REPLAYED_BY), "api-test");
        assert_eq!(header_text(&hs, HEADER_EDIT_VERSION), "1");
        assert_eq!(header_text(&hs, HEADER_IDEMPOTENCY_KEY).len(), 36);

        // The original is untouched in the store; the new version is its own row.
        let after = app.store.get(id).await.expect("get").expect("dead letter");
        assert_eq!(
            after.record, before.record,
            "{backend:?}: original bytes unchanged"
        );
        assert_eq!(after.summary.status, Status::Replayed);
        let (_, v0) = json_of(
            app.get(
                &format!("/api/v1/dead-letters/{id}/versions/0"),
                Auth::Bearer(&token),
            )
            .await,
        )
        .await;
        assert_eq!(
            v0["value"]["text"],
            String::from_utf8(ORIGINAL_VALUE.to_vec()).unwrap()
        );
        assert_eq!(v0["latest"], 1);
        let (_, v1) = json_of(
            app.get(
                &format!("/api/v1/dead-letters/{id}/versions/1"),
                Auth::Bearer(&token),
            )
            .await,
        )
        .await;
        assert_eq!(v1["key"]["text"], "order-4711-fixed");
        assert_eq!(v1["headers"][1]["value"]["base64"], "3q0Avu8=");
        assert_eq!(v1["headers"][2]["value"], Value::Null);

        // The audit row carries the diff; the history says what happened.
        let edits = app.audit_of("edit").await;
        assert_eq!(edits.len(), 1, "{backend:?}");
        assert_eq!(edits[0].actor, "api-test");
        assert_eq!(
            edits[0].reason.as_deref(),
            Some("INC-42 amount as a number")
        );
        let detail: Value =
            serde_json::from_str(edits[0].detail.as_deref().expect("detail")).unwrap();
        assert_eq!(detail["version"], 1);
        assert_eq!(detail["base_version"], 0);
        assert_eq!(
            detail["diff"]["value"]["diff"],
            "@@ line 3 @@\n-   \"amount\": \"12,50\",\n+   \"amount\": 12.5,\n"
        );
        assert_eq!(detail["diff"]["key"]["changed"], true);
        let changes: Vec<&str> = detail["diff"]["headers"]["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        assert!(changes.contains(&"removed traceparent"), "{changes:?}");
        assert!(
            changes.contains(&"changed x-tenant: \"acme\" → \"beta\""),
            "{changes:?}"
        );
        assert!(changes.contains(&"added x-null: null"), "{changes:?}");
        let replays = app.audit_of("replay").await;
        assert_eq!(replays.len(), 1);
        assert_eq!(replays[0].job_id.as_deref(), Some(job.as_str()));
        let kinds: Vec<String> = app
            .store
            .history(id)
            .await
            .unwrap()
            .iter()
            .map(|e| e.kind.clone())
            .collect();
        assert!(kinds.contains(&"edited".to_string()), "{kinds:?}");

        // A later replay by id, and one by filter that selects it too, publish the edited
        // version again: never the original.
        let (status, r) = json_of(
            app.post_json(
                "/api/v1/replays",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"ids": [id]}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 202, "{r}");
        wait_finished(&app, &token, r["job_id"].as_str().unwrap()).await;
        let filter =
            json!({"filter": {"dlq_topic": before.summary.dlq_topic, "status": "replayed"}});
        let (status, r) = json_of(
            app.post_json(
                "/api/v1/replays",
                Auth::Bearer(&token),
                Csrf::Right,
                &filter,
            )
            .await,
        )
        .await;
        assert_eq!(status, 202, "{r}");
        assert_eq!(r["total"], 1);
        wait_finished(&app, &token, r["job_id"].as_str().unwrap()).await;
        let got = consume(&source, 3).await.expect("the replayed records");
        assert_eq!(record_count(&source, 1), 3, "{backend:?}");
        for m in &got {
            assert_eq!(
                m.payload(),
                Some(EDITED_VALUE),
                "{backend:?}: every replay sends the edit"
            );
            assert_eq!(header_text(&headers_of(m), HEADER_EDIT_VERSION), "1");
        }
        let (_, list) = json_of(
            app.get(
                &format!("/api/v1/dead-letters/{id}/versions"),
                Auth::Bearer(&token),
            )
            .await,
        )
        .await;
        assert_eq!(list["latest"], 1);
        assert_eq!(list["items"].as_array().unwrap().len(), 1);
    }
}

#[tokio::test]
async fn bad_edits_are_clear_4xx_refusals_that_change_nothing() {
    for backend in Backend::ALL {
        let (app, token, id, _source) = app_with_one(backend, false).await;
        let path = format!("/api/v1/dead-letters/{id}/versions");
        let cases: Vec<(Value, u16, &str)> = vec![
            (
                json!({"value": {"json": "{\"amount\": 12,5}"}}),
                422,
                "not valid JSON",
            ),
            (
                json!({"headers": [{"name": "", "value": {"text": "x"}}]}),
                422,
                "empty name",
            ),
            (
                json!({"headers": [{"name": "   ", "value": null}]}),
                422,
                "empty name",
            ),
            (json!({"value": {"base64": "***"}}), 422, "not valid base64"),
            (json!({"key": {"hex": "abc"}}), 422, "hex"),
            (
                json!({"value": {"txt": "a"}}),
                422,
                "must be null or one of",
            ),
            (json!({"valeu": {"text": "a"}}), 422, "valeu"),
            (
                json!({"value": {"text": String::from_utf8(ORIGINAL_VALUE.to_vec()).unwrap()}}),
                422,
                "changes nothing",
            ),
            (
                json!({"value": {"text": "x"}, "base_version": 3}),
                409,
                "version 0 is the latest",
            ),
            (
                json!({"value": {"text": "x"}, "target_topic": "elsewhere"}),
                422,
                "replay",
            ),
            (
                json!({"value": {"text": "x"}, "replay": true, "target_topic": "no spaces allowed"}),
                422,
                "topic name",
            ),
        ];
        for (body, want, says) in &cases {
            let (status, e) = json_of(
                app.post_json(&path, Auth::Bearer(&token), Csrf::Right, body)
                    .await,
            )
            .await;
            assert_eq!(status, *want, "{backend:?} {body}: {e}");
            let msg = e["error"].as_str().unwrap_or_default();
            assert!(msg.contains(says), "{backend:?} {body}: {msg}");
        }
        // Too large: a value over 16 MiB, and a body over 64 MiB.
        let big =
            redrive_core::edit::to_base64(&vec![7u8; redrive_core::edit::MAX_VALUE_BYTES + 1]);
        let (status, e) = json_of(
            app.post_json(
                &path,
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"value": {"base64": big}}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 422, "{e}");
        assert!(e["error"].as_str().unwrap().contains("at most"), "{e}");
        // Not JSON, no such dead letter, a viewer.
        let res = reqwest::Client::new()
            .post(app.url(&path))
            .bearer_auth(&token)
            .header("Content-Type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 400);
        let (status, _) = json_of(
            app.post_json(
                "/api/v1/dead-letters/999999/versions",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"value": null}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 404);
        app.add_user("vera", Role::Viewer.as_str(), "viewer-password")
            .await;
        let viewer = app.create_token("vera").await;
        let (status, _) = json_of(
            app.post_json(
                &path,
                Auth::Bearer(&viewer),
                Csrf::Right,
                &json!({"value": null}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 403);

        // Nothing was saved.
        assert!(
            app.store.versions(id).await.unwrap().is_empty(),
            "{backend:?}"
        );
        assert_eq!(app.store.latest_version(id).await.unwrap(), Some(0));
        assert!(app
            .audit_of("edit")
            .await
            .iter()
            .all(|a| a.outcome == "denied"));

        // A dead letter waiting in a replay job (Kafka is unreachable here, so it stays
        // pending), or deleted, cannot be edited (409).
        let (status, r) = json_of(
            app.post_json(
                "/api/v1/replays",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"ids": [id]}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 202, "{r}\n{}", app.log());
        let job = r["job_id"].as_str().unwrap().to_string();
        assert_eq!(
            app.store.get(id).await.unwrap().unwrap().summary.status,
            Status::ReplayPending
        );
        let (status, e) = json_of(
            app.post_json(
                &path,
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"value": null}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 409, "{e}");
        assert!(
            e["error"].as_str().unwrap().contains("cancel the job"),
            "{e}"
        );
        let (status, _) = json_of(
            app.post_json(
                &format!("/api/v1/replays/{job}/cancel"),
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 200);
        let (status, _) = json_of(
            app.post_json(
                "/api/v1/dead-letters/delete",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"ids": [id]}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 200);
        let (status, e) = json_of(
            app.post_json(
                &path,
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"value": null}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 409, "{e}");
        assert!(e["error"].as_str().unwrap().contains("restore it"), "{e}");
    }
}

#[tokio::test]
async fn a_10_mb_value_edit_keeps_the_audit_row_small() {
    for backend in Backend::ALL {
        let (app, token, id, _source) = app_with_one(backend, false).await;
        let mut big = vec![b'a'; 10_000_000];
        let path = format!("/api/v1/dead-letters/{id}/versions");
        let (status, e) = json_of(
            app.post_json(
                &path,
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"value": {"text": String::from_utf8(big.clone()).unwrap()}}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 201, "{backend:?}: {e}");
        big[6_000_000] = b'b';
        let (status, e) = json_of(app.post_json(&path, Auth::Bearer(&token), Csrf::Right, &json!({"value": {"base64": redrive_core::edit::to_base64(&big)}, "base_version": 1})).await).await;
        assert_eq!(status, 201, "{backend:?}: {e}");
        assert_eq!(e["version"], 2);
        assert_eq!(e["diff"]["value"]["first_difference_at_byte"], 6_000_000);
        for a in app.audit_of("edit").await {
            let n = a.detail.as_deref().unwrap_or_default().len();
            assert!(
                n < MAX_SUMMARY_BYTES,
                "{backend:?}: an audit row of {n} bytes"
            );
        }
        let v = app.store.version_record(id, 2).await.unwrap().unwrap();
        assert_eq!(
            v.value.as_deref(),
            Some(&big[..]),
            "{backend:?}: the version is whole"
        );
        let original = app.store.get(id).await.unwrap().unwrap();
        assert_eq!(original.record.value.as_deref(), Some(ORIGINAL_VALUE));
    }
}

/// The editor page's plain HTML form (no JavaScript): the page offers the record as text, a
/// form post saves the edit and replays it; a bad edit comes back with its message.
#[tokio::test]
async fn the_no_js_form_saves_and_replays_the_edit() {
    for backend in Backend::ALL {
        let (app, token, id, source) = app_with_one(backend, true).await;
        app.add_user("olga", "operator", "operator-password").await;
        let b = Browser::sign_in(&app, ("olga", "operator-password")).await;
        let edit_page = format!("/dead-letters/{id}/edit");
        let (status, html) = b.page(&edit_page).await;
        assert_eq!(status, 200, "{html}");
        assert!(html.contains("name=\"value\""), "a textarea for the value");
        assert!(
            html.contains("&quot;amount&quot;: &quot;12,50&quot;")
                || html.contains("\"amount\": \"12,50\""),
            "the value is in it"
        );

        // A browser sends the textarea's line ends as CRLF; the form says they were LF.
        let value = String::from_utf8(EDITED_VALUE.to_vec())
            .unwrap()
            .replace('\n', "\r\n");
        let bad: Vec<(&str, String)> = vec![
            ("id", id.to_string()),
            ("base_version", "0".into()),
            ("value_as", "json".into()),
            ("value_newlines", "lf".into()),
            ("value", "{\"amount\": 12,5}".into()),
            ("key_as", "text".into()),
            ("key", "order-4711".into()),
            ("headers_keep", "true".into()),
            ("op", "save".into()),
        ];
        let fields: Vec<(&str, &str)> = bad.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let res = b.submit(&edit_page, "/api/ui/edit", &fields, None).await;
        assert!(res.status().is_redirection(), "{}", res.status());
        let back = location(&res);
        assert!(back.contains("__err"), "{back}");
        let back = back.trim_start_matches(&app.base).to_string();
        let (_, html) = b.page(&back).await;
        assert!(html.contains("not valid JSON"), "{html}");
        assert!(app.store.versions(id).await.unwrap().is_empty());

        let good: Vec<(&str, String)> = vec![
            ("id", id.to_string()),
            ("base_version", "0".into()),
            ("value_as", "json".into()),
            ("value_newlines", "lf".into()),
            ("value", value),
            ("key_as", "text".into()),
            ("key", "order-4711".into()),
            ("header_name[]", "x-tenant".into()),
            ("header_as[]", "text".into()),
            ("header_value[]", "beta".into()),
            ("header_name[]", "x-bin".into()),
            ("header_as[]", "hex".into()),
            ("header_value[]", "dead00beef".into()),
            ("header_name[]", "x-null".into()),
            ("header_as[]", "null".into()),
            ("header_value[]", "".into()),
            ("header_name[]", "x-empty".into()),
            ("header_as[]", "text".into()),
            ("header_value[]", "".into()),
            ("header_name[]", "".into()),
            ("header_as[]", "text".into()),
            ("header_value[]", "".into()),
            ("reason", "form edit".into()),
            ("op", "replay".into()),
        ];
        let fields: Vec<(&str, &str)> = good.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let res = b.submit(&edit_page, "/api/ui/edit", &fields, None).await;
        assert!(res.status().is_redirection(), "{}", res.status());
        let to = location(&res);
        assert!(to.starts_with("/jobs/"), "{to}");
        let job = to.trim_start_matches("/jobs/").to_string();
        wait_finished(&app, &token, &job).await;
        let got = consume(&source, 1).await.expect("the replayed records");
        use rdkafka::Message;
        assert_eq!(
            got[0].payload(),
            Some(EDITED_VALUE),
            "{backend:?}: LF line ends kept"
        );
        let app_headers: Vec<Header> = headers_of(&got[0])
            .into_iter()
            .filter(|x| !x.name.starts_with("redrive-"))
            .collect();
        assert_eq!(
            app_headers,
            edited_headers(),
            "{backend:?}: the blank row is not a header"
        );
        assert_eq!(record_count(&source, 1), 1);

        // The detail page shows the version and its diff.
        let (_, html) = b.page(&format!("/dead-letters/{id}")).await;
        assert!(html.contains("Version 1"), "the version is listed");
        assert!(
            html.contains("+   &quot;amount&quot;: 12.5,")
                || html.contains("+   \"amount\": 12.5,"),
            "the diff is shown"
        );
    }
}
