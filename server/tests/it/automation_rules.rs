//! Editing the automation rules (`docs/automation.md`, "Editing rules", "Dry run", "API"),
//! through the real binary on both databases: a save is a new version with its audit row,
//! a bad rule set is refused with its message and writes nothing, `manage_rules` is needed to
//! save, dry-run and pause, `[automation]` of `redrive.toml` is installed once per change,
//! and a dry run counts the dead letters ingest stored from the real broker.

use std::time::Duration;

use redrive_testkit::{create_topic, kafka_brokers, produce, unique, Backend, TestRecord};
use serde_json::{json, Value};

use crate::support::{eventually, location, Auth, Csrf, TestApp};

const DEADLINE: Duration = Duration::from_secs(60);

const V1: &str = r#"default_tier = "manual"

[[rule]]
name = "timeouts"
tier = "transient"
match.error_classes = ["*SocketTimeoutException"]
schedule = { every = "5m", max_attempts = 3 }
"#;

const V2: &str = r#"default_tier = "manual"

[[rule]]
name = "timeouts"
tier = "transient"
match.error_classes = ["*SocketTimeoutException"]
schedule = { every = "5m", max_attempts = 3 }

[[rule]]
name = "invalid"
tier = "manual"
match.error_messages = ["invalid"]
move_after = { after = "10d", to = "archive" }
"#;

/// A rule set the checks refuse: a schedule on a manual rule.
const BAD: &str = "[[rule]]\nname = \"m\"\ntier = \"manual\"\nschedule = { every = \"1m\" }\n";

async fn json_of(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let body = res.json().await.unwrap_or(Value::Null);
    (status, body)
}

fn detail(a: &redrive_core::actions::AuditEntry) -> Value {
    serde_json::from_str(a.detail.as_deref().unwrap_or("null")).unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_save_is_a_new_version_with_its_audit_row() {
    for backend in Backend::ALL {
        let app = TestApp::start_on(backend, &[]).await;
        let token = app.admin_token().await;
        let (status, v1) = json_of(
            app.put_json("/api/v1/automation/rules", &token, &json!({"source": V1}))
                .await,
        )
        .await;
        assert_eq!(status, 201, "{v1}\n{}", app.log());
        assert_eq!(v1["version"], 1);
        let (status, v2) = json_of(
            app.put_json(
                "/api/v1/automation/rules",
                &token,
                &json!({"source": V2, "reason": "INC-7 business errors to manual"}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 201, "{v2}");
        assert_eq!(v2["version"], 2);
        assert_eq!(v2["origin"], "api");
        assert_eq!(v2["created_by"], "api-test");

        // Audited, in the same transaction: actor, reason, detail.
        let saves = app.audit_of("rule_set_save").await;
        assert_eq!(saves.len(), 2, "{saves:?}");
        let last = &saves[1];
        assert_eq!(last.actor, "api-test");
        assert_eq!(last.outcome, "ok");
        assert_eq!(
            last.reason.as_deref(),
            Some("INC-7 business errors to manual")
        );
        assert_eq!(
            detail(last),
            json!({"version": 2, "previous_version": 1, "origin": "api"})
        );

        // The active version, its rules in order, and the versions with the diff.
        let (status, rules) = json_of(
            app.get("/api/v1/automation/rules", Auth::Bearer(&token))
                .await,
        )
        .await;
        assert_eq!(status, 200, "{rules}");
        assert_eq!(rules["version"]["version"], 2);
        assert_eq!(rules["version"]["source"], V2);
        let names: Vec<&str> = rules["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["timeouts", "invalid"]);
        assert_eq!(rules["rules"][0]["state"], Value::Null);
        let (_, list) = json_of(
            app.get("/api/v1/automation/versions", Auth::Bearer(&token))
                .await,
        )
        .await;
        let versions: Vec<i64> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["version"].as_i64().unwrap())
            .collect();
        assert_eq!(versions, [2, 1]);
        let (status, two) = json_of(
            app.get("/api/v1/automation/versions/2", Auth::Bearer(&token))
                .await,
        )
        .await;
        assert_eq!(status, 200, "{two}");
        assert_eq!(two["diff"]["removed"], 0);
        assert_eq!(two["diff"]["added"], 6, "{}", two["diff"]);
        let (status, _) = json_of(
            app.get("/api/v1/automation/versions/9", Auth::Bearer(&token))
                .await,
        )
        .await;
        assert_eq!(status, 404);

        // Pause and resume a transient rule: audited, shown in the state.
        let (status, state) = json_of(
            app.post_json(
                "/api/v1/automation/rules/timeouts/pause",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"reason": "the LLM is down"}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 200, "{state}");
        assert_eq!(state["paused"], true);
        assert_eq!(state["paused_by"], "api-test");
        let (_, rules) = json_of(
            app.get("/api/v1/automation/rules", Auth::Bearer(&token))
                .await,
        )
        .await;
        assert_eq!(rules["rules"][0]["state"]["paused"], true);
        assert_eq!(
            rules["rules"][0]["state"]["paused_reason"],
            "the LLM is down"
        );
        let (status, _) = json_of(
            app.post_json(
                "/api/v1/automation/rules/invalid/pause",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 422, "a manual rule runs no rounds");
        let (status, _) = json_of(
            app.post_json(
                "/api/v1/automation/rules/nope/pause",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 404);
        let (status, state) = json_of(
            app.post_json(
                "/api/v1/automation/rules/timeouts/resume",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 200, "{state}");
        assert_eq!(state["paused"], false);
        let pauses = app.audit_of("rule_pause").await;
        assert_eq!(pauses.len(), 1);
        assert_eq!(pauses[0].reason.as_deref(), Some("the LLM is down"));
        assert_eq!(detail(&pauses[0])["rule"], "timeouts");
        assert_eq!(app.audit_of("rule_resume").await.len(), 1);

        // The UI's form saves a version too (a plain form: it redirects to the version).
        app.add_user("ada", "admin", "ada-password-1").await;
        let s = app.sign_in("ada", "ada-password-1").await;
        let res = app
            .post_form(
                "/api/ui/automation/rules",
                Auth::Session(&s),
                Csrf::Right,
                &[
                    ("source", V1),
                    ("reason", "back to one rule"),
                    ("op", "save"),
                ],
            )
            .await;
        assert!(res.status().is_redirection(), "{}", res.status());
        assert_eq!(location(&res), "/automation/versions/3?done=saved");
        let page = app
            .get("/automation/versions/3", Auth::Session(&s))
            .await
            .text()
            .await
            .unwrap();
        assert!(page.contains("Rule set version 3"), "{page}");
        assert!(page.contains("back to one rule"));
        assert!(page.contains("diff-removed"), "the diff against version 2");
        let saves = app.audit_of("rule_set_save").await;
        assert_eq!(saves.len(), 3);
        assert_eq!(saves[2].actor, "ada");
        assert_eq!(detail(&saves[2])["origin"], "ui");
        let overview = app
            .get("/automation", Auth::Session(&s))
            .await
            .text()
            .await
            .unwrap();
        assert!(overview.contains("data-active-version=\"3\""), "{overview}");
        assert!(overview.contains("timeouts"));
    }
}

#[tokio::test]
async fn a_bad_rule_set_is_refused_with_its_message_and_writes_nothing() {
    for backend in Backend::ALL {
        let app = TestApp::start_on(backend, &[]).await;
        let token = app.admin_token().await;
        let res = app
            .put_json("/api/v1/automation/rules", &token, &json!({"source": V1}))
            .await;
        assert_eq!(res.status(), 201);
        let (status, body) = json_of(
            app.put_json("/api/v1/automation/rules", &token, &json!({"source": BAD}))
                .await,
        )
        .await;
        assert_eq!(status, 422, "{body}");
        let msg = body["error"].as_str().unwrap_or_default();
        assert!(
            msg.contains("rule `m`") && msg.contains("only a transient rule"),
            "{msg}"
        );
        let (status, body) = json_of(
            app.put_json(
                "/api/v1/automation/rules",
                &token,
                &json!({"source": "[[rule]\nname = "}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 422, "{body}");
        assert!(body["error"]
            .as_str()
            .unwrap()
            .contains("not a valid rule set"));
        let (status, _) = json_of(
            app.post_json(
                "/api/v1/automation/dry-run",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"source": BAD}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 422);
        // Nothing written: still one version, one save in the audit trail.
        assert_eq!(app.store.rule_set_versions(10).await.unwrap().len(), 1);
        assert_eq!(app.audit_of("rule_set_save").await.len(), 1);

        // The editor keeps the text and shows the message above it (no JavaScript).
        app.add_user("ada", "admin", "ada-password-1").await;
        let s = app.sign_in("ada", "ada-password-1").await;
        let res = app
            .post_form(
                "/api/ui/automation/rules",
                Auth::Session(&s),
                Csrf::Right,
                &[("source", BAD), ("reason", ""), ("op", "save")],
            )
            .await;
        assert!(res.status().is_redirection(), "{}", res.status());
        let to = location(&res);
        assert!(to.starts_with("/automation/edit?draft="), "{to}");
        let page = app.get(&to, Auth::Session(&s)).await;
        assert_eq!(page.status(), 200);
        let page = page.text().await.unwrap();
        assert!(page.contains("Not saved: rule `m`"), "{page}");
        assert!(
            page.contains("schedule = { every = &quot;1m&quot; }")
                || page.contains("schedule = { every = \"1m\" }"),
            "the text is kept: {page}"
        );
        assert_eq!(app.store.rule_set_versions(10).await.unwrap().len(), 1);
        // Someone else does not get the draft.
        app.add_user("bob", "admin", "bob-password-1").await;
        let b = app.sign_in("bob", "bob-password-1").await;
        let page = app.get(&to, Auth::Session(&b)).await.text().await.unwrap();
        assert!(!page.contains("Not saved"), "{page}");
        assert!(page.contains("no longer kept"), "{page}");
    }
}

#[tokio::test]
async fn without_manage_rules_saving_dry_running_and_pausing_are_refused() {
    for backend in Backend::ALL {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("redrive.toml");
        std::fs::write(
            &config,
            "[roles.triager]\npermissions = [\"replay\", \"annotate\"]\n",
        )
        .unwrap();
        let config = config.to_string_lossy().to_string();
        let app = TestApp::start_on(backend, &[("REDRIVE_CONFIG", config.as_str())]).await;
        let admin = app.admin_token().await;
        let res = app
            .put_json("/api/v1/automation/rules", &admin, &json!({"source": V1}))
            .await;
        assert_eq!(res.status(), 201);
        app.add_user("vera", "viewer", "vera-password-1").await;
        app.add_user_in_store("tim", "triager", "tim-password-1")
            .await;
        for user in ["vera", "tim"] {
            let token = app.create_token(user).await;
            let (status, body) = json_of(
                app.put_json("/api/v1/automation/rules", &token, &json!({"source": V2}))
                    .await,
            )
            .await;
            assert_eq!(status, 403, "{user}: {body}");
            assert!(
                body["error"].as_str().unwrap().contains("manage_rules"),
                "{body}"
            );
            for path in [
                "/api/v1/automation/rules/timeouts/pause",
                "/api/v1/automation/dry-run",
            ] {
                let res = app
                    .post_json(
                        path,
                        Auth::Bearer(&token),
                        Csrf::Right,
                        &json!({"source": V2}),
                    )
                    .await;
                assert_eq!(res.status(), 403, "{user} {path}");
            }
            // Reading is open to every signed-in user.
            let res = app
                .get("/api/v1/automation/rules", Auth::Bearer(&token))
                .await;
            assert_eq!(res.status(), 200);
        }
        // The editor page is refused too.
        let s = app.sign_in("vera", "vera-password-1").await;
        let res = app.get("/automation/edit", Auth::Session(&s)).await;
        assert_eq!(res.status(), 403);
        let res = app.get("/automation", Auth::Session(&s)).await;
        assert_eq!(res.status(), 200);
        let page = res.text().await.unwrap();
        assert!(
            !page.contains("Edit the rules"),
            "no editor link for a viewer"
        );
        // Nothing changed, and every refusal is audited.
        assert_eq!(app.store.rule_set_versions(10).await.unwrap().len(), 1);
        // The leader's scheduler may have recorded its first check of the rule (a state
        // row), but nobody paused it.
        assert!(
            app.store
                .rule_states()
                .await
                .unwrap()
                .iter()
                .all(|s| !s.paused && s.paused_by.is_none()),
            "a refused pause paused nothing"
        );
        let denied: Vec<_> = app
            .audit()
            .await
            .into_iter()
            .filter(|a| a.outcome == "denied")
            .map(|a| (a.actor, a.action))
            .collect();
        for user in ["vera", "tim"] {
            for action in ["rule_set_save", "rule_pause", "rule_set_dry_run"] {
                assert!(
                    denied.contains(&(user.to_string(), action.to_string())),
                    "{user} {action}: {denied:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn the_automation_table_of_redrive_toml_is_installed_once_per_change() {
    for backend in Backend::ALL {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redrive.toml");
        let file = |rules: &str| {
            let table = rules.replace("[[rule]]", "[[automation.rule]]").replacen(
                "default_tier",
                "[automation]\ndefault_tier",
                1,
            );
            std::fs::write(&path, table).unwrap();
        };
        file(V1);
        let config = path.to_string_lossy().to_string();
        let env = [("REDRIVE_CONFIG", config.as_str())];
        let app = TestApp::start_on(backend, &env).await;
        let versions = app.store.rule_set_versions(10).await.unwrap();
        assert_eq!(versions.len(), 1, "{}", app.log());
        assert_eq!(versions[0].created_by, "(config)");
        assert_eq!(versions[0].origin.as_str(), "config");
        assert_eq!(
            versions[0].reason.as_deref(),
            Some("[automation] in redrive.toml, installed for the first time"),
            "nothing changed on a new store"
        );
        let installed = versions[0].compile().unwrap();
        assert_eq!(installed.rules[0].name, "timeouts");
        assert_eq!(app.audit_of("rule_set_save").await[0].actor, "(config)");

        // The same file again: nothing installed.
        let app = app.restart(&env).await;
        assert_eq!(app.store.rule_set_versions(10).await.unwrap().len(), 1);

        // A user's edit survives a restart with the same file.
        let token = app.admin_token().await;
        let res = app
            .put_json("/api/v1/automation/rules", &token, &json!({"source": V2}))
            .await;
        assert_eq!(res.status(), 201);
        let app = app.restart(&env).await;
        let versions = app.store.rule_set_versions(10).await.unwrap();
        assert_eq!(versions.len(), 2);
        assert_eq!(versions[0].created_by, "api-test");

        // A changed file wins: a new version by (config).
        file(&V1.replace("\"5m\"", "\"10m\""));
        let app = app.restart(&env).await;
        let versions = app.store.rule_set_versions(10).await.unwrap();
        assert_eq!(versions.len(), 3);
        assert_eq!(versions[0].version, 3);
        assert_eq!(versions[0].created_by, "(config)");
        assert!(versions[0].source.contains("10m"), "{}", versions[0].source);
        assert_eq!(
            versions[0].reason.as_deref(),
            Some("[automation] in redrive.toml changed")
        );

        // A bad table stops start-up with the rule set's own message.
        file(&BAD.replace("[[rule]]", "[automation]\n[[automation.rule]]"));
        let (code, _out, err) =
            crate::support::run_redrive(&["config"], &[("REDRIVE_CONFIG", config.as_str())], None)
                .await;
        assert_ne!(code, Some(0));
        assert!(
            err.contains("[automation]") && err.contains("only a transient rule"),
            "{err}"
        );
    }
}

/// A Spring Kafka dead letter with an error class and message.
fn spring(class: &str, message: &str) -> TestRecord {
    TestRecord::new(
        "{\"n\":1}",
        &[
            ("kafka_dlt-original-topic", b"orders"),
            ("kafka_dlt-exception-fqcn", class.as_bytes()),
            ("kafka_dlt-exception-message", message.as_bytes()),
        ],
    )
}

#[tokio::test]
async fn a_dry_run_counts_the_stored_dead_letters() {
    for backend in Backend::ALL {
        let topic = unique("rules-orders.DLT");
        create_topic(&topic, 1, &[]).await.expect("topic");
        let mut records = Vec::new();
        for _ in 0..3 {
            records.push(spring("java.net.SocketTimeoutException", "read timed out"));
        }
        records.push(spring("java.lang.IllegalStateException", "invalid amount"));
        records.push(spring(
            "java.lang.IllegalArgumentException",
            "Invalid currency",
        ));
        records.push(spring(
            "org.springframework.kafka.support.serializer.DeserializationException",
            "failed to deserialize",
        ));
        records.push(spring("java.lang.NullPointerException", "boom"));
        produce(&topic, &records).await.expect("produce");
        let group = unique("rules_group");
        let brokers = kafka_brokers();
        let app = TestApp::start_on(
            backend,
            &[
                ("REDRIVE_INGEST_ENABLED", "true"),
                ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
                ("REDRIVE_DLQ_TOPICS", topic.as_str()),
                ("REDRIVE_GROUP_ID", group.as_str()),
            ],
        )
        .await;
        eventually("7 dead letters stored", DEADLINE, || async {
            app.store.alert_max_dead_letter_id().await.unwrap_or(0) >= 7
        })
        .await;
        let token = app.admin_token().await;
        let source = format!(
            "default_tier = \"archive\"\n\n{}",
            V2.trim_start_matches("default_tier = \"manual\"\n\n")
        );
        let (status, run) = json_of(
            app.post_json(
                "/api/v1/automation/dry-run",
                Auth::Bearer(&token),
                Csrf::Right,
                &json!({"source": source}),
            )
            .await,
        )
        .await;
        assert_eq!(status, 200, "{run}\n{}", app.log());
        assert_eq!(
            (run["scanned"].as_u64(), run["total"].as_u64()),
            (Some(7), Some(7))
        );
        assert_eq!(run["capped"], false);
        let matched: Vec<(String, u64)> = run["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r["matched"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            matched,
            [("timeouts".to_string(), 3), ("invalid".to_string(), 2)]
        );
        assert_eq!(run["poison_count"], 1, "the deserialization failure");
        assert_eq!(run["default_count"], 1);
        assert_eq!(run["default_tier"], "archive");
        let tiers: Vec<(String, u64)> = run["tiers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["tier"].as_str().unwrap().to_string(),
                    t["count"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            tiers,
            [
                ("transient".to_string(), 3),
                ("manual".to_string(), 2),
                ("poison".to_string(), 1),
                ("archive".to_string(), 1)
            ]
        );
        // Every scanned dead letter either stays or moves (from unsorted, or from the tier a
        // sorter gave it).
        let moved: u64 = run["moves"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["count"].as_u64().unwrap())
            .sum();
        assert_eq!(moved + run["unchanged"].as_u64().unwrap(), 7);
        // A dry run writes nothing.
        assert!(app.store.rule_set_versions(10).await.unwrap().is_empty());

        // The editor shows it (no JavaScript): the text kept, the counts below.
        app.add_user("ada", "admin", "ada-password-1").await;
        let s = app.sign_in("ada", "ada-password-1").await;
        let res = app
            .post_form(
                "/api/ui/automation/rules",
                Auth::Session(&s),
                Csrf::Right,
                &[
                    ("source", source.as_str()),
                    ("reason", ""),
                    ("op", "dry_run"),
                ],
            )
            .await;
        let to = location(&res);
        assert!(to.starts_with("/automation/edit?draft="), "{to}");
        let page = app.get(&to, Auth::Session(&s)).await.text().await.unwrap();
        assert!(page.contains("id=\"dry-run\""), "{page}");
        assert!(
            page.contains("Counted over all 7 live dead letters"),
            "{page}"
        );
        assert!(
            page.contains("default_tier = &quot;archive&quot;")
                || page.contains("default_tier = \"archive\"")
        );

        // The automation page counts the live dead letters per tier.
        let page = app
            .get("/automation", Auth::Session(&s))
            .await
            .text()
            .await
            .unwrap();
        assert!(page.contains("data-tier=\"unsorted\""), "{page}");
    }
}
