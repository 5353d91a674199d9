//! Alert configuration through the real binary's CLI (`docs/alerts.md`): what `redrive config`
//! prints hides every notifier secret (URL paths, credentials, tokens, routing keys), and a
//! configuration that cannot work stops start-up with a message naming the rule or notifier —
//! a URL that is only a prefix, a type error in the N-th rule, a `dlq_topic` scope ingest never
//! reads.

use crate::alerts::write_config;
use crate::support::run_redrive;

/// `redrive config` with `text` as its `redrive.toml` and `env`: (exit code, stdout, stderr).
async fn config_with(text: &str, env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(&dir, text);
    let mut all = vec![("REDRIVE_CONFIG", path.as_str())];
    all.extend_from_slice(env);
    run_redrive(&["config"], &all, None).await
}

#[tokio::test]
async fn redrive_config_redacts_notifier_urls() {
    let text = r#"
[alerts.notifiers.team]
kind = "slack"
url = "https://hooks.slack.com/services/T0SECRET/B0SECRET/XXSECRETXX"

[alerts.notifiers.hook]
kind = "webhook"
url = "https://ops:Hunter2pw@hooks.example:8443/in/redrive?token=QUERYTOKEN"
secret = "HMACSECRET"

[alerts.notifiers.pager]
kind = "pagerduty"
routing_key = "R0UT1NGKEY0123456789abcdefABCDEF"

[alerts.notifiers.pager-proxy]
kind = "pagerduty"
routing_key = "ANOTHERROUTINGKEY"
events_url = "https://pd-proxy.example/v2/enqueue?auth=PROXYTOKEN"
"#;
    let (code, out, err) = config_with(text, &[]).await;
    assert_eq!(code, Some(0), "{err}");
    for secret in [
        "T0SECRET",
        "B0SECRET",
        "XXSECRETXX",
        "Hunter2pw",
        "ops:",
        "QUERYTOKEN",
        "/in/redrive",
        "HMACSECRET",
        "R0UT1NGKEY",
        "ANOTHERROUTINGKEY",
        "PROXYTOKEN",
    ] {
        assert!(!out.contains(secret), "`{secret}` printed:\n{out}");
    }
    for shown in [
        "https://hooks.slack.com/<redacted>",
        "https://hooks.example:8443/<redacted>",
        "https://pd-proxy.example/<redacted>",
        // PagerDuty's public default endpoint is no secret.
        "https://events.pagerduty.com/v2/enqueue",
    ] {
        assert!(out.contains(shown), "`{shown}` missing:\n{out}");
    }
}

#[tokio::test]
async fn a_notifier_url_that_is_only_a_prefix_stops_start_up() {
    for (url, says) in [
        ("http://", "host"),
        ("https://", "host"),
        ("hooks.example/redrive", "not a URL"),
        ("ftp://hooks.example/x", "scheme is `ftp`"),
    ] {
        let text = format!(
            "[alerts.notifiers.oncall]\nkind = \"webhook\"\nurl = \"{url}\"\nsecret = \"s\"\n"
        );
        let (code, _, err) = config_with(&text, &[]).await;
        assert_ne!(code, Some(0), "{url} accepted");
        assert!(
            err.contains("alert notifier `oncall`") && err.contains("`url`") && err.contains(says),
            "{url}: {err}"
        );
    }
    // `serve` refuses it the same way, before it listens.
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        &dir,
        "[alerts.notifiers.team]\nkind = \"slack\"\nurl = \"http://\"\n",
    );
    let db = format!("sqlite:{}", dir.path().join("r.db").display());
    let (code, out, err) = run_redrive(
        &["serve"],
        &[
            ("REDRIVE_CONFIG", path.as_str()),
            ("REDRIVE_DATABASE_URL", db.as_str()),
            ("REDRIVE_LISTEN", "127.0.0.1:0"),
            ("REDRIVE_INGEST_ENABLED", "false"),
        ],
        None,
    )
    .await;
    assert_ne!(code, Some(0));
    assert!(!out.contains("listening on"), "{out}");
    assert!(err.contains("alert notifier `team`"), "{err}");
}

#[tokio::test]
async fn a_type_error_names_the_rule_not_its_position() {
    let text = r#"
[[alerts.rules]]
name = "first"
kind = "quarantined"

[[alerts.rules]]
name = "second"
kind = "quarantined"

[[alerts.rules]]
name = "orders-depth"
kind = "dlq_size"
threshold = "ten"
"#;
    let (code, _, err) = config_with(text, &[]).await;
    assert_ne!(code, Some(0));
    assert!(
        err.contains("alert rule `orders-depth` (rule 3 of [[alerts.rules]])")
            && err.contains("`threshold`")
            && err.contains("\"ten\""),
        "{err}"
    );
    assert!(!err.contains("rules.2"), "a position, not the rule: {err}");
    // An unknown key in a rule: the rule and the key.
    let text =
        "[[alerts.rules]]\nname = \"depth\"\nkind = \"dlq_size\"\nthreshold = 1\nthreshhold = 2\n";
    let (code, _, err) = config_with(text, &[]).await;
    assert_ne!(code, Some(0));
    assert!(
        err.contains("alert rule `depth`") && err.contains("threshhold"),
        "{err}"
    );
}

#[tokio::test]
async fn a_dlq_topic_scope_ingest_never_reads_stops_start_up() {
    let text = r#"
[[alerts.rules]]
name = "payments-depth"
kind = "dlq_size"
threshold = 10
dlq_topic = "payments.DLT"
"#;
    let (code, _, err) = config_with(
        text,
        &[("REDRIVE_DLQ_TOPICS", "orders.DLT,^billing-.*-dlt$")],
    )
    .await;
    assert_ne!(code, Some(0));
    assert!(
        err.contains("alert rule `payments-depth`")
            && err.contains("payments.DLT")
            && err.contains("`orders.DLT`, `^billing-.*-dlt$`"),
        "{err}"
    );
    // Covered by an exact entry or by a pattern: accepted (ingest disabled or not).
    for topics in ["orders.DLT,payments.DLT", r"^.*\.DLT$"] {
        for ingest in ["true", "false"] {
            let (code, _, err) = config_with(
                text,
                &[
                    ("REDRIVE_DLQ_TOPICS", topics),
                    ("REDRIVE_INGEST_ENABLED", ingest),
                ],
            )
            .await;
            assert_eq!(code, Some(0), "{topics} ingest={ingest}: {err}");
        }
    }
}
