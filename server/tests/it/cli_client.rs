//! The command-line client (issue 11 item 2, docs/cli.md) against the real binary serving a
//! real store (SQLite and PostgreSQL) with its relay on the real broker: `dead-letters
//! list|show|export` print what the API answers (JSON parsed and compared); a replay by filter
//! with `--yes` follows its job to the end (exit 0, every record on the topic once); a dry run
//! publishes nothing; delete and restore by id; the exit codes of a bad token (3), a bad
//! filter (2, the server's own message), an unknown id (4), an unreachable server (5), an
//! action needing approval (6), a filter without `--yes` and no terminal (2). Ctrl-C runs the
//! binary in a pseudo-terminal (rexpect): it asks "Cancel job ...?", `n` goes on following,
//! `y` cancels the job through the API and exits 130; without a terminal SIGINT cancels only
//! with `--cancel-on-interrupt`. And the store commands refuse a SQLite file that does not
//! exist instead of creating an empty store.

use std::time::Duration;

use redrive_core::model::{Header, NewDeadLetter};
use redrive_testkit::{create_topic, kafka_brokers, unique, wait_for, Backend};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::replay::{dead_letter, record_count};
use crate::support::{redrive_std_command, run_redrive, Auth, TestApp};

const TIMEOUT_CLASS: &str = "com.acme.TimeoutException";
const POISON_CLASS: &str = "com.acme.PoisonException";

/// `n` dead letters from offset `from` in `dlq_topic`, from source topic `source`, failed
/// with `class`.
fn records(dlq_topic: &str, source: &str, class: &str, from: i64, n: i64) -> Vec<NewDeadLetter> {
    (from..from + n)
        .map(|o| {
            let mut d = dead_letter(
                o,
                Some(format!("key-{o}").into_bytes()),
                Some(format!("{{\"order\": {o}}}").into_bytes()),
                vec![
                    Header {
                        name: "kafka_dlt-original-topic".into(),
                        value: Some(source.as_bytes().to_vec()),
                    },
                    Header {
                        name: "kafka_dlt-exception-fqcn".into(),
                        value: Some(class.as_bytes().to_vec()),
                    },
                    Header {
                        name: "kafka_dlt-exception-message".into(),
                        value: Some(format!("{class} on order {o}").into_bytes()),
                    },
                ],
            );
            d.record.dlq_topic = dlq_topic.to_string();
            d
        })
        .collect()
}

/// A served store on `backend` with 6 timeouts and 3 poison messages from a fresh source
/// topic (created on the broker, where the relay publishes); an admin token.
struct Served {
    app: TestApp,
    token: String,
    source: String,
}

async fn served(backend: Backend, timeouts: i64, env: &[(&str, &str)]) -> Served {
    let source = unique("cli-orders");
    create_topic(&source, 1, &[]).await.expect("topic");
    let dlq = unique("cli-orders.DLT");
    let mut recs = records(&dlq, &source, TIMEOUT_CLASS, 0, timeouts);
    recs.extend(records(&dlq, &source, POISON_CLASS, timeouts, 3));
    let brokers = kafka_brokers();
    let mut all_env = vec![("REDRIVE_KAFKA_BROKERS", brokers.as_str())];
    all_env.extend_from_slice(env);
    let app = TestApp::with_records(backend, &recs, &all_env).await;
    let token = app.admin_token().await;
    Served { app, token, source }
}

impl Served {
    /// `redrive ARGS` as a script runs it: server and token from the environment, no
    /// terminal; (exit code, stdout, stderr).
    async fn cli(&self, args: &[&str]) -> (Option<i32>, String, String) {
        run_redrive(
            args,
            &[
                ("REDRIVE_SERVER", self.app.base.as_str()),
                ("REDRIVE_TOKEN", self.token.as_str()),
            ],
            None,
        )
        .await
    }

    /// `GET path` with the token: (status, JSON body).
    async fn api(&self, path: &str) -> (u16, Value) {
        let res = self.app.get(path, Auth::Bearer(&self.token)).await;
        let status = res.status().as_u16();
        let text = res.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn ids_of(v: &Value) -> Vec<i64> {
    v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|d| d["id"].as_i64().expect("id"))
        .collect()
}

#[tokio::test]
async fn list_show_and_export_print_what_the_api_answers() {
    for backend in Backend::ALL {
        let s = served(backend, 6, &[]).await;
        let what = format!("{backend:?}");

        // list --output json is the API's page for the same filter.
        let (code, out, err) = s
            .cli(&[
                "dead-letters",
                "list",
                "--error-class",
                POISON_CLASS,
                "--output",
                "json",
            ])
            .await;
        assert_eq!(code, Some(0), "{what}: {err}");
        let (status, api) = s
            .api(&format!("/api/v1/dead-letters?error_class={POISON_CLASS}"))
            .await;
        assert_eq!(status, 200);
        assert_eq!(json(&out), api, "{what}");
        assert_eq!(ids_of(&api).len(), 3, "{what}");

        // --limit pages like the API; --all --output jsonl streams every one.
        let (code, out, _) = s
            .cli(&["dead-letters", "list", "--limit", "4", "--output", "json"])
            .await;
        assert_eq!(code, Some(0));
        let (_, api4) = s.api("/api/v1/dead-letters?limit=4").await;
        assert_eq!(json(&out), api4, "{what}");
        let cursor = api4["next_cursor"].as_str().expect("a next page");
        let (code, out, _) = s
            .cli(&[
                "dead-letters",
                "list",
                "--cursor",
                cursor,
                "--limit",
                "2",
                "--output",
                "json",
            ])
            .await;
        assert_eq!(code, Some(0));
        let (_, api2) = s
            .api(&format!("/api/v1/dead-letters?limit=2&cursor={cursor}"))
            .await;
        assert_eq!(json(&out), api2, "{what}");
        let (code, out, _) = s
            .cli(&["dead-letters", "list", "--all", "--output", "jsonl"])
            .await;
        assert_eq!(code, Some(0));
        let (_, all) = s.api("/api/v1/dead-letters?limit=500").await;
        let lines: Vec<Value> = out.lines().map(json).collect();
        assert_eq!(lines, all["items"].as_array().unwrap().clone(), "{what}");
        assert_eq!(lines.len(), 9);

        // The table names each dead letter with its class; the count goes to stderr.
        let (code, out, err) = s.cli(&["dead-letters", "list", "-q", "poison"]).await;
        assert_eq!(code, Some(0), "{err}");
        assert!(out.starts_with("ID"), "{out}");
        assert_eq!(out.lines().count(), 4, "{out}");
        assert!(out.contains(POISON_CLASS), "{out}");
        assert!(err.contains("3 dead letter(s)"), "{err}");

        // show: the API's record as JSON; as text, with the value readable.
        let id = ids_of(&api)[0];
        let (code, out, _) = s
            .cli(&["dead-letters", "show", &id.to_string(), "--output", "json"])
            .await;
        assert_eq!(code, Some(0));
        let (_, record) = s.api(&format!("/api/v1/dead-letters/{id}")).await;
        assert_eq!(json(&out), record, "{what}");
        let (code, out, _) = s.cli(&["dead-letters", "show", &id.to_string()]).await;
        assert_eq!(code, Some(0));
        assert!(out.contains(POISON_CLASS), "{out}");
        assert!(out.contains("{\"order\": "), "{out}");
        assert!(out.contains(&s.source), "{out}");

        // export: the API's JSON Lines, to a file and to stdout.
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("poison.jsonl");
        let (code, _, err) = s
            .cli(&[
                "dead-letters",
                "export",
                "--error-class",
                POISON_CLASS,
                "--out",
                file.to_str().unwrap(),
            ])
            .await;
        assert_eq!(code, Some(0), "{err}");
        assert!(err.contains("exported 3 dead letter(s)"), "{err}");
        let res = s
            .app
            .get(
                &format!("/api/v1/dead-letters/export?error_class={POISON_CLASS}"),
                Auth::Bearer(&s.token),
            )
            .await;
        let api_lines: Vec<Value> = res.text().await.unwrap().lines().map(json).collect();
        let file_lines: Vec<Value> = std::fs::read_to_string(&file)
            .expect("the export file")
            .lines()
            .map(json)
            .collect();
        assert_eq!(file_lines.len(), 3, "{what}");
        assert_eq!(file_lines, api_lines, "{what}");
        assert!(!dir.path().join("poison.jsonl.partial").exists());
        let (code, out, _) = s.cli(&["dead-letters", "export"]).await;
        assert_eq!(code, Some(0));
        assert_eq!(out.lines().count(), 9, "{what}");
    }
}

#[tokio::test]
async fn exit_codes_say_what_went_wrong_with_the_servers_message() {
    let s = served(Backend::Sqlite, 6, &[]).await;

    // A bad filter value: 2, with the message the API gives for it.
    let (code, _, err) = s.cli(&["dead-letters", "list", "--status", "gone"]).await;
    let (status, api) = s.api("/api/v1/dead-letters?status=gone").await;
    assert_eq!(status, 400);
    let message = api["error"].as_str().expect("an error message");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(message), "{err} / {message}");
    let (code, _, err) = s.cli(&["replay", "--from", "yesterday", "--dry-run"]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`from` is not a time"), "{err}");

    // Not found: 4, the server's message.
    let (code, _, err) = s.cli(&["dead-letters", "show", "987654"]).await;
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("no dead letter with id 987654"), "{err}");
    let (code, _, err) = s.cli(&["jobs", "show", "no-such-job"]).await;
    assert_eq!(code, Some(4), "{err}");

    // A token the server does not know: 3, and the token is never printed.
    let bad = "rdv_not_a_token_the_server_knows";
    let (code, out, err) = run_redrive(
        &["dead-letters", "list"],
        &[
            ("REDRIVE_SERVER", s.app.base.as_str()),
            ("REDRIVE_TOKEN", bad),
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(3), "{err}");
    assert!(!out.contains(bad) && !err.contains(bad), "{out}{err}");
    let res = s.app.get("/api/v1/dead-letters", Auth::Bearer(bad)).await;
    assert_eq!(res.status().as_u16(), 401);
    let api: Value = res.json().await.expect("json");
    assert!(
        err.contains(api["error"].as_str().unwrap()),
        "{err} / {api}"
    );
    // No token at all: 3 without a request.
    let (code, _, err) = run_redrive(
        &["dead-letters", "list", "--server", s.app.base.as_str()],
        &[],
        None,
    )
    .await;
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("REDRIVE_TOKEN"), "{err}");
    // A viewer may not replay: 403 is 3 too.
    s.app.add_user("vera", "viewer", "vera password").await;
    let vera = s.app.create_token("vera").await;
    let (code, _, err) = run_redrive(
        &["replay", "--id", "1"],
        &[
            ("REDRIVE_SERVER", s.app.base.as_str()),
            ("REDRIVE_TOKEN", vera.as_str()),
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(3), "{err}");

    // Nothing listens: 5.
    let nowhere = format!("http://127.0.0.1:{}", crate::support::free_port());
    let (code, _, err) = run_redrive(
        &["dead-letters", "list", "--server", &nowhere],
        &[("REDRIVE_TOKEN", "rdv_x")],
        None,
    )
    .await;
    assert_eq!(code, Some(5), "{err}");
    assert!(err.contains("cannot be reached"), "{err}");
    // Something answers, but not as the API (here the UI's 404 page under a wrong base
    // path; a fresh user met it pointing the CLI at the demo's control port): 5, not 4.
    let wrong = format!("{}/not-redrive", s.app.base);
    let (code, _, err) = s
        .cli(&["dead-letters", "show", "1", "--server", &wrong])
        .await;
    assert_eq!(code, Some(5), "{err}");
    assert!(err.contains("--server"), "{err}");

    // An empty filter value is refused, never dropped (`--label ""` selected the whole
    // store in a dry run): 2, with the server's message.
    let (code, _, err) = s.cli(&["delete", "--label", "", "--dry-run"]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`label` is empty"), "{err}");
    // A restore by filter without --status deleted would restore nothing: 2, said why.
    let (code, _, err) = s.cli(&["restore", "--tier", "poison", "--yes"]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--status deleted"), "{err}");
    let res = s
        .app
        .post_json(
            "/api/v1/dead-letters/restore",
            Auth::Bearer(&s.token),
            crate::support::Csrf::Missing,
            &serde_json::json!({"filter": {"tier": "poison"}}),
        )
        .await;
    assert_eq!(res.status().as_u16(), 422);
    let api: Value = res.json().await.expect("json");
    assert!(
        api["error"]
            .as_str()
            .unwrap()
            .contains("\"status\": \"deleted\""),
        "{api}"
    );

    // An action over a filter without --yes and without a terminal: 2, nothing done.
    let (code, _, err) = s.cli(&["delete", "--error-class", POISON_CLASS]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("without --yes"), "{err}");
    let (_, api) = s
        .api(&format!("/api/v1/dead-letters?error_class={POISON_CLASS}"))
        .await;
    assert_eq!(ids_of(&api).len(), 3, "nothing deleted");
    // No selection at all, or two: 2.
    let (code, _, err) = s.cli(&["replay", "--yes"]).await;
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = s.cli(&["replay", "--id", "1", "--status", "new"]).await;
    assert_eq!(code, Some(2), "{err}");
}

#[tokio::test]
async fn a_replay_by_filter_follows_its_job_to_the_end() {
    for backend in Backend::ALL {
        let s = served(backend, 6, &[]).await;
        let what = format!("{backend:?}");

        // Dry run: the counts, nothing published.
        let (code, out, err) = s
            .cli(&[
                "replay",
                "--error-class",
                TIMEOUT_CLASS,
                "--dry-run",
                "--output",
                "json",
            ])
            .await;
        assert_eq!(code, Some(0), "{what}: {err}");
        let d = json(&out);
        assert_eq!(d["queued"], 6, "{what}: {d}");
        assert_eq!(d["per_target"][0]["topic"], s.source.as_str(), "{d}");
        let (code, out, _) = s
            .cli(&["replay", "--error-class", TIMEOUT_CLASS, "--dry-run"])
            .await;
        assert_eq!(code, Some(0));
        assert!(out.contains("6 would be replayed"), "{out}");
        assert!(out.contains("nothing was published"), "{out}");
        assert_eq!(
            record_count(&s.source, 1),
            0,
            "{what}: a dry run publishes nothing"
        );
        let (_, jobs) = s.api("/api/v1/replays").await;
        assert_eq!(jobs["items"].as_array().unwrap().len(), 0, "{what}: no job");

        // The replay, followed to the end: exit 0, the final counts on stdout, the states on
        // stderr (no terminal, so no bar).
        let (code, out, err) = s
            .cli(&[
                "replay",
                "--error-class",
                TIMEOUT_CLASS,
                "--yes",
                "--reason",
                "INC-11 timeouts fixed",
            ])
            .await;
        assert_eq!(code, Some(0), "{what}: {out}\n{err}\n{}", s.app.log());
        assert!(
            out.contains("finished: 6 of 6 published, 0 failed, 0 cancelled"),
            "{what}: {out}"
        );
        assert!(err.contains("6 queued"), "{err}");
        assert!(err.contains("finished"), "{err}");
        assert_eq!(record_count(&s.source, 1), 6, "{what}: each record once");
        let (_, jobs) = s.api("/api/v1/replays").await;
        let job = &jobs["items"][0];
        assert_eq!(job["status"], "finished");
        assert_eq!(
            (job["published"].as_i64(), job["failed"].as_i64()),
            (Some(6), Some(0))
        );
        assert_eq!(job["reason"], "INC-11 timeouts fixed");
        let job_id = job["id"].as_str().unwrap().to_string();
        let (code, out, _) = s.cli(&["jobs", "show", &job_id, "--output", "json"]).await;
        assert_eq!(code, Some(0));
        assert_eq!(json(&out)["published"], 6);

        // --no-follow returns the job at once; `jobs watch` follows it.
        let (_, poison) = s
            .api(&format!("/api/v1/dead-letters?error_class={POISON_CLASS}"))
            .await;
        let ids: Vec<String> = ids_of(&poison).iter().map(i64::to_string).collect();
        let (code, out, err) = s
            .cli(&[
                "replay",
                "--id",
                &ids.join(","),
                "--no-follow",
                "--output",
                "json",
            ])
            .await;
        assert_eq!(code, Some(0), "{err}");
        let accepted = json(&out);
        assert_eq!(accepted["total"], 3, "{accepted}");
        let job = accepted["job_id"].as_str().unwrap();
        let (code, out, err) = s.cli(&["jobs", "watch", job]).await;
        assert_eq!(code, Some(0), "{err}");
        assert!(out.contains("finished: 3 of 3 published"), "{out}");
        assert_eq!(record_count(&s.source, 1), 9);

        // Delete and restore by id; a delete's dry run counts a filter.
        let (code, out, _) = s
            .cli(&["delete", "--error-class", POISON_CLASS, "--dry-run"])
            .await;
        assert_eq!(code, Some(0));
        assert!(out.contains("3 dead letter(s) selected"), "{out}");
        let (code, out, err) = s
            .cli(&["delete", "--id", &ids[0], "--output", "json"])
            .await;
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(json(&out)["affected"], 1);
        let (code, out, err) = s.cli(&["restore", "--id", &ids[0]]).await;
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(out.trim(), "restored 1 dead letter(s)");
        let (code, out, err) = s
            .cli(&[
                "delete",
                "--error-class",
                POISON_CLASS,
                "--yes",
                "--reason",
                "INC-12",
            ])
            .await;
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(out.trim(), "deleted 3 dead letter(s)");
        let rows = s.app.audit_of("delete").await;
        assert_eq!(rows.len(), 2, "{what}");
        assert_eq!(rows[0].actor, "api-test");
    }
}

#[tokio::test]
async fn an_action_that_needs_approval_exits_6() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("redrive.toml");
    std::fs::write(&config, "[approval]\nmin_records = 3\n").expect("config");
    let config = config.display().to_string();
    let s = served(Backend::Sqlite, 3, &[("REDRIVE_CONFIG", config.as_str())]).await;
    let (code, out, err) = s
        .cli(&[
            "replay",
            "--error-class",
            TIMEOUT_CLASS,
            "--yes",
            "--output",
            "json",
        ])
        .await;
    assert_eq!(code, Some(6), "{out}\n{err}");
    assert!(err.contains("needs approval"), "{err}");
    let pending = json(&out);
    assert_eq!(pending["status"], "pending_approval");
    let (status, request) = s
        .api(&format!("/api/v1/requests/{}", pending["request_id"]))
        .await;
    assert_eq!(status, 200, "{request}");
    assert_eq!(record_count(&s.source, 1), 0, "nothing published");
}

/// The job of the replay the CLI started, from the API.
async fn job(s: &Served, id: &str) -> Value {
    s.api(&format!("/api/v1/replays/{id}")).await.1
}

/// Waits until job `id` has published at least `n`.
async fn published_at_least(s: &Served, id: &str, n: i64) {
    wait_for(
        &format!("job {id} published {n}"),
        Duration::from_secs(60),
        || async { (job(s, id).await["published"].as_i64() >= Some(n)).then_some(()) },
    )
    .await
    .expect("the job publishes");
}

#[tokio::test]
async fn ctrl_c_on_a_terminal_asks_then_cancels_the_job() {
    // 30 records at 1 msg/s: half a minute of job, cancelled after a few.
    let s = served(Backend::Sqlite, 30, &[]).await;
    let mut cmd = redrive_std_command();
    cmd.args([
        "replay",
        "--error-class",
        TIMEOUT_CLASS,
        "--rate",
        "1",
        "--reason",
        "INC-13",
    ])
    .env("REDRIVE_SERVER", &s.app.base)
    .env("REDRIVE_TOKEN", &s.token)
    .env("TERM", "xterm");
    let mut p = rexpect::session::spawn_command(cmd, Some(60_000)).expect("spawn in a pty");

    // A filter on a terminal: the question first.
    p.exp_string("Replay 30 of dead letters matching error_class=")
        .expect("the replay question");
    p.exp_string("[y/N]").expect("y/N");
    p.send_line("y").expect("answer");
    let (_, line) = p
        .exp_regex(r"replay job [0-9a-f-]{36}")
        .expect("the job's id");
    let id = line.trim_start_matches("replay job ").to_string();
    published_at_least(&s, &id, 2).await;
    // The bar: "job ID [===>   ] 2/30 running: ..."
    p.exp_regex(r"/30 running").expect("the progress bar");

    // Ctrl-C, "n": it goes on.
    p.send_control('c').expect("^C");
    p.exp_string(&format!("Cancel job {id}? [y/N]"))
        .expect("the cancel question");
    p.send_line("n").expect("no");
    p.exp_string("following job").expect("following again");
    let before = job(&s, &id).await["published"].as_i64().unwrap();
    published_at_least(&s, &id, before + 1).await;
    assert_eq!(job(&s, &id).await["status"], "running");

    // Ctrl-C, "y": cancelled through the API, exit 130.
    p.send_control('c').expect("^C");
    p.exp_string(&format!("Cancel job {id}? [y/N]"))
        .expect("the cancel question");
    p.send_line("y").expect("yes");
    p.exp_string(&format!("cancelled job {id}"))
        .expect("cancelled");
    let status = p.process().wait().expect("exit");
    assert!(
        matches!(status, rexpect::process::WaitStatus::Exited(_, 130)),
        "{status:?}"
    );
    let j = job(&s, &id).await;
    assert_eq!(j["status"], "cancelled", "{j}");
    let published = j["published"].as_i64().unwrap();
    assert!(published < 30, "{j}");
    assert_eq!(j["cancelled"].as_i64().unwrap(), 30 - published, "{j}");
    let rows = s.app.audit_of("cancel_job").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].job_id.as_deref(), Some(id.as_str()));
}

#[tokio::test]
async fn sigint_without_a_terminal_cancels_only_when_told_to() {
    let s = served(Backend::Sqlite, 20, &[]).await;
    for cancel in [false, true] {
        let mut cmd = tokio::process::Command::from(redrive_std_command());
        cmd.args([
            "replay",
            "--error-class",
            TIMEOUT_CLASS,
            "--rate",
            "1",
            "--yes",
        ])
        .env("REDRIVE_SERVER", &s.app.base)
        .env("REDRIVE_TOKEN", &s.token)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
        if cancel {
            cmd.arg("--cancel-on-interrupt");
        }
        let mut child = cmd.spawn().expect("spawn");
        let pid = child.id().expect("pid").to_string();
        // The CLI's first state line ("job J running: ...") is written once it follows the
        // job, its SIGINT handler in place; then wait until the job publishes.
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut err = String::new();
        let id = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(line)) = lines.next_line().await {
                err.push_str(&line);
                err.push('\n');
                if let Some(rest) = line.strip_prefix("job ") {
                    return rest.split(' ').next().map(str::to_string);
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no state line from the CLI: {err}"));
        published_at_least(&s, &id, 1).await;
        let ok = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("kill")
            .success();
        assert!(ok);
        let status = tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(line)) = lines.next_line().await {
                err.push_str(&line);
                err.push('\n');
            }
            child.wait().await
        })
        .await
        .expect("the CLI stops")
        .expect("exit status");
        assert_eq!(status.code(), Some(130), "{err}");
        let j = job(&s, &id).await;
        if cancel {
            assert!(err.contains(&format!("cancelled job {id}")), "{err}");
            assert_eq!(j["status"], "cancelled", "{j}");
        } else {
            assert!(err.contains("keeps running"), "{err}");
            assert_eq!(j["status"], "running", "{j}");
            let (code, out, err) = s.cli(&["jobs", "cancel", &id]).await;
            assert_eq!(code, Some(0), "{err}");
            assert!(out.contains("cancelled"), "{out}");
        }
    }
}

#[tokio::test]
async fn store_commands_refuse_a_missing_sqlite_file() {
    // The issue's case: `token create` in a directory without a store (the default URL is
    // `sqlite:redrive.db`, relative to the working directory).
    let dir = tempfile::tempdir().expect("tempdir");
    let out = tokio::process::Command::from(redrive_std_command())
        .args(["token", "create", "--user", "admin"])
        .current_dir(dir.path())
        .output()
        .await
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no redrive store at redrive.db"), "{err}");
    assert!(err.contains("--create"), "{err}");
    assert!(out.stdout.is_empty(), "no token printed");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file created"
    );

    // An explicit URL, in a directory that does not exist either: refused, nothing made.
    let missing = dir.path().join("data").join("redrive.db");
    let url = format!("sqlite:{}", missing.display());
    for args in [
        vec!["user", "list"],
        vec!["quarantine", "list"],
        vec!["token", "list"],
    ] {
        let (code, _, err) = run_redrive(&args, &[("REDRIVE_DATABASE_URL", &url)], None).await;
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains("no redrive store at"), "{args:?}: {err}");
    }
    assert!(!dir.path().join("data").exists());

    // --create makes it on purpose.
    let (code, _, err) = run_redrive(
        &[
            "user",
            "add",
            "ann",
            "--role",
            "admin",
            "--password-stdin",
            "--create",
        ],
        &[("REDRIVE_DATABASE_URL", &url)],
        Some("a long enough password\n"),
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(missing.exists());
    let (code, out, err) =
        run_redrive(&["user", "list"], &[("REDRIVE_DATABASE_URL", &url)], None).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("ann"), "{out}");
}
