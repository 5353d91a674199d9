use std::path::{Path, PathBuf};

use redrive_core::replay::RelayConfig;

use super::env::{TEXT_FIELDS, TYPED_FIELDS};
use super::load::ConfigError;
use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn load(file: Option<&Path>, vars: &[(&str, &str)], o: &Overrides) -> Config {
    Config::load(file, env(vars), o).unwrap().config
}

/// Every field name of `Config`, from its serialised form.
fn field_names() -> Vec<String> {
    match toml::Value::try_from(Config::default()) {
        Ok(toml::Value::Table(t)) => t.keys().cloned().collect(),
        other => panic!("Config does not serialise to a table: {other:?}"),
    }
}

#[test]
fn defaults_are_the_documented_ones() {
    let c = load(None, &[], &Overrides::default());
    assert_eq!(c, Config::default());
    assert_eq!(c.database_url, "sqlite:redrive.db");
    assert_eq!(c.kafka_brokers, "127.0.0.1:9092");
    assert_eq!(c.group_id, "redrive");
    assert_eq!(c.listen, "127.0.0.1:3000");
    assert_eq!(c.ingest_batch_size, 500);
    assert_eq!(c.ingest_linger_ms, 50);
    assert!(c.ingest_enabled);
}

#[test]
fn roles_come_from_the_file_and_bad_ones_stop_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redrive.toml");
    std::fs::write(
        &path,
        r#"
[roles.payments-oncall]
permissions = ["replay", "annotate"]
dlq_topics = ["payments.*", "^orders-.*-dlt$"]

[roles.operator]
dlq_topics = ["orders.DLT"]
"#,
    )
    .unwrap();
    let c = load(Some(&path), &[], &Overrides::default());
    let roles = c.roles().unwrap();
    let oncall = roles.get("payments-oncall").unwrap();
    assert!(oncall.grants(redrive_core::permission::Permission::Replay));
    assert!(!oncall.grants(redrive_core::permission::Permission::Delete));
    assert_eq!(
        roles
            .get("operator")
            .unwrap()
            .dlq_topics()
            .map(<[String]>::len),
        Some(1)
    );
    for (toml, expected) in [
        (
            "[roles.x]\npermissions = [\"replay\", \"nuke\"]\n",
            "[roles]: role `x`: `permissions`: `nuke` is not a permission",
        ),
        (
            "[roles.x]\ndlq_topics = [\"^(\"]\n",
            "[roles]: role `x`: `dlq_topics`: `^(` is not a valid regular expression",
        ),
        (
            "[roles.x]\ndlq_topics = [\"orders DLT\"]\n",
            "is not a DLQ-topic pattern",
        ),
        (
            "[roles.admin]\npermissions = [\"replay\"]\n",
            "the permissions of a built-in role are fixed",
        ),
        ("[roles.x]\ncolour = \"red\"\n", "colour"),
    ] {
        std::fs::write(&path, toml).unwrap();
        let err = Config::load(Some(&path), env(&[]), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{toml}: {err}");
    }
}

#[test]
fn file_then_env_then_flags() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redrive.toml");
    std::fs::write(
        &path,
        r#"
group_id = "from-file"
listen = "127.0.0.1:4000"
kafka_brokers = "file:9092"
dlq_topics = ["orders.DLT", "^.*-dlt$"]
ingest_batch_size = 100

[kafka]
security.protocol = "SASL_SSL"
"sasl.mechanism" = "PLAIN"
"socket.timeout.ms" = 5000
"#,
    )
    .unwrap();
    let c = load(
        Some(&path),
        &[
            ("REDRIVE_GROUP_ID", "42"),
            ("REDRIVE_LISTEN", "127.0.0.1:5000"),
            ("REDRIVE_INGEST_LINGER_MS", "7"),
            ("REDRIVE_KAFKA__SASL_USERNAME", "me"),
            ("REDRIVE_KAFKA__SASL_PASSWORD", "\"quoted,secret\""),
            ("OTHER", "x"),
        ],
        &Overrides {
            listen: Some("127.0.0.1:0".into()),
            ..Overrides::default()
        },
    );
    assert_eq!(c.group_id, "42");
    assert_eq!(c.listen, "127.0.0.1:0");
    assert_eq!(c.kafka_brokers, "file:9092");
    assert_eq!(c.dlq_topics, vec!["orders.DLT", "^.*-dlt$"]);
    assert_eq!(c.ingest_batch_size, 100);
    assert_eq!(c.ingest_linger_ms, 7);
    assert_eq!(c.kafka["security.protocol"], "SASL_SSL");
    assert_eq!(c.kafka["sasl.mechanism"], "PLAIN");
    assert_eq!(c.kafka["socket.timeout.ms"], "5000");
    assert_eq!(c.kafka["sasl.username"], "me");
    assert_eq!(c.kafka["sasl.password"], "\"quoted,secret\"");
}

#[test]
fn oidc_from_the_file_and_its_secret_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redrive.toml");
    std::fs::write(
        &path,
        r#"
trusted_proxies = ["10.0.0.5"]

[oidc]
issuer_url = "https://idp.example.com/realms/ops"
client_id = "redrive"
redirect_url = "https://redrive.example.com/auth/oidc/callback"
role_mapping = { "redrive-admins" = "admin", "oncall" = "operator" }

[proxy_auth]
user_header = "X-Forwarded-User"
groups_header = "X-Forwarded-Groups"
"#,
    )
    .unwrap();
    let c = load(
        Some(&path),
        &[("REDRIVE_OIDC__CLIENT_SECRET", "s3cr=t,\"x\"")],
        &Overrides::default(),
    );
    assert_eq!(c.oidc.client_id, "redrive");
    assert_eq!(c.oidc.client_secret, "s3cr=t,\"x\"");
    assert_eq!(c.oidc.scopes, ["openid", "profile", "email", "groups"]);
    assert_eq!(c.oidc.role_mapping["oncall"], "operator");
    assert_eq!(c.proxy_auth.user_header, "X-Forwarded-User");
    let shown = c.to_redacted_toml().unwrap();
    assert!(!shown.contains("s3cr=t"), "{shown}");
    // A role that does not exist stops start-up.
    std::fs::write(&path, "[oidc]\nrole_mapping = { \"ops\" = \"root\" }\n").unwrap();
    let e = Config::load(Some(&path), Vec::new(), &Overrides::default()).unwrap_err();
    assert!(e.to_string().contains("root"), "{e}");
    // Proxy headers without a trusted proxy stop start-up.
    std::fs::write(&path, "[proxy_auth]\nuser_header = \"X-User\"\n").unwrap();
    let e = Config::load(Some(&path), Vec::new(), &Overrides::default()).unwrap_err();
    assert!(e.to_string().contains("trusted_proxies"), "{e}");
}

#[test]
fn topics_from_env_are_a_comma_list() {
    let c = load(
        None,
        &[("REDRIVE_DLQ_TOPICS", " dlq_requests, ^.*\\.DLT$ ,,")],
        &Overrides::default(),
    );
    assert_eq!(c.dlq_topics, vec!["dlq_requests", "^.*\\.DLT$"]);
}

#[test]
fn mistakes_are_reported_with_their_source() {
    let err = Config::load(
        None,
        env(&[("REDRIVE_INGEST_BATCH_SIZE", "lots")]),
        &Overrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("ingest_batch_size"), "{err}");
    assert!(err.contains("REDRIVE_"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.toml");
    std::fs::write(&path, "databse_url = \"x\"\n").unwrap();
    let err = Config::load(Some(&path), env(&[]), &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("databse_url"), "{err}");

    let missing = dir.path().join("nope.toml");
    assert!(matches!(
        Config::load(Some(&missing), env(&[]), &Overrides::default()),
        Err(ConfigError::MissingFile(_))
    ));
    assert!(Config::load(
        None,
        env(&[("REDRIVE_INGEST_BATCH_SIZE", "0")]),
        &Overrides::default()
    )
    .is_err());
}

#[test]
fn unknown_variables_are_reported_not_fatal() {
    let l = Config::load(
        None,
        env(&[
            ("REDRIVE_DATABSE_URL", "x"),
            ("REDRIVE_TEST_KAFKA_BROKERS", "y"),
            ("REDRIVE_CONFIG", "z"),
        ]),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(l.ignored_env, vec!["REDRIVE_DATABSE_URL"]);
}

#[test]
fn the_schema_registry_table_is_read_and_its_password_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("redrive.toml");
    std::fs::write(
        &file,
        "[schema_registry]\nurl = \"http://registry:8081\"\nusername = \"u\"\n\
             password = \"hunter2\"\nschema_dirs = [\"/etc/schemas\"]\ntimeout_ms = 750\n",
    )
    .unwrap();
    let c = load(Some(&file), &[], &Overrides::default());
    let r = &c.schema_registry;
    assert_eq!(r.url.as_deref(), Some("http://registry:8081"));
    assert_eq!(r.schema_dirs, vec![PathBuf::from("/etc/schemas")]);
    assert_eq!(r.timeout_ms, Some(750));
    assert!(r.is_enabled());
    let shown = c.to_redacted_toml().unwrap();
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(!load(None, &[], &Overrides::default())
        .schema_registry
        .is_enabled());
}

#[test]
fn secrets_are_redacted() {
    let mut c = Config {
        database_url: "postgres://redrive:s3cret@db:5432/redrive?sslmode=require&password=p".into(),
        ..Config::default()
    };
    c.kafka.insert("sasl.password".into(), "hunter2".into());
    c.kafka.insert("sasl.mechanism".into(), "PLAIN".into());
    let text = c.to_redacted_toml().unwrap();
    assert!(
        !text.contains("s3cret") && !text.contains("hunter2"),
        "{text}"
    );
    assert!(
        text.contains("postgres://redrive:REDACTED@db:5432/redrive"),
        "{text}"
    );
    assert!(text.contains("password=REDACTED"), "{text}");
    assert!(text.contains("PLAIN"), "{text}");
    // What `redrive config` prints is itself a valid configuration file.
    let back: Config = toml::from_str(&text).unwrap();
    assert_eq!(back.kafka["sasl.mechanism"], "PLAIN");
    assert_eq!(redact_url("sqlite:redrive.db"), "sqlite:redrive.db");
}

#[test]
fn relay_settings_reach_the_relay_and_are_checked() {
    let c = load(
        None,
        &[
            ("REDRIVE_RELAY_OUTAGE_MAX_MS", "120000"),
            ("REDRIVE_RELAY_MAX_ATTEMPTS", "3"),
            ("REDRIVE_RELAY_FORWARD_DIAGNOSTIC_HEADERS", "true"),
        ],
        &Overrides::default(),
    );
    let r = c.relay_config();
    assert_eq!(r.outage_max_ms, 120_000);
    assert_eq!(r.max_attempts, 3);
    assert!(r.forward_diagnostic_headers);
    assert_eq!(r.lease_ms, replay::default_lease_ms());
    assert_eq!(r.brokers, c.kafka_brokers);
    assert_eq!(
        Config::default().relay_config(),
        RelayConfig::default(),
        "the same defaults on both sides"
    );
    for bad in [
        ("REDRIVE_RELAY_LEASE_MS", "100"),
        ("REDRIVE_RELAY_MAX_ATTEMPTS", "0"),
        ("REDRIVE_RELAY_BACKOFF_BASE_MS", "120000"),
    ] {
        let err = Config::load(None, env(&[bad]), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("relay"), "{bad:?}: {err}");
    }
}

#[test]
fn approval_and_reasons_tables_are_checked_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redrive.toml");
    let refused = |text: &str| {
        std::fs::write(&path, text).unwrap();
        Config::load(Some(&path), env(&[]), &Overrides::default())
            .unwrap_err()
            .to_string()
    };
    // The role-scope syntax: a glob is a pattern; a name with a space is neither.
    let e = refused("[approval]\nmin_records = 10\ndlq_topics = [\"pay ments.*\"]\n");
    assert!(
        e.contains("[approval] dlq_topics") && e.contains("pay ments.*"),
        "{e}"
    );
    let e = refused("[approval]\nmin_records = 10\nexpire_after_ms = 0\n");
    assert!(e.contains("expire_after_ms"), "{e}");
    let e = refused("[approval]\nmin_record = 10\n");
    assert!(e.contains("min_record"), "{e}");
    let e = refused("[approval]\nmin_records = 10\nactions = [\"purge\"]\n");
    assert!(e.contains("purge"), "{e}");
    let e = refused("[reasons]\nrequired = true\npattern = '^[A-Z+-\\d+'\n");
    assert!(e.contains("[reasons] pattern"), "{e}");

    std::fs::write(
        &path,
        "[approval]\nmin_records = 10\ndlq_topics = ['^payments\\..*$', 'orders.DLT']\n\
             expire_after_ms = 60000\n\n[reasons]\nrequired = true\npattern = '^[A-Z]+-\\d+'\n",
    )
    .unwrap();
    let c = load(Some(&path), &[], &Overrides::default());
    assert_eq!(c.approval.min_records, 10);
    assert_eq!(c.approval.expire_after_ms, 60_000);
    let policy = c.approval_policy().unwrap();
    assert!(policy.approval_on());
    assert_eq!(policy.reason_pattern(), Some(r"^[A-Z]+-\d+"));
    let printed = c.to_redacted_toml().unwrap();
    assert!(
        printed.contains("[approval]") && printed.contains("[reasons]"),
        "{printed}"
    );
    assert!(!load(None, &[], &Overrides::default())
        .approval_policy()
        .unwrap()
        .approval_on());
}

#[test]
fn the_automation_table_is_checked_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redrive.toml");
    std::fs::write(
        &path,
        "[automation]\ndefault_tier = \"manual\"\n\n[[automation.rule]]\nname = \"t\"\n\
             tier = \"transient\"\nmatch.error_classes = [\"*Timeout*\"]\n\
             schedule = { every = \"5m\" }\n",
    )
    .unwrap();
    let c = load(Some(&path), &[], &Overrides::default());
    let (text, set) = c.automation.rule_set().unwrap().expect("a rule set");
    assert_eq!(set.rules[0].name, "t");
    // The text is the UI's (no `automation.` prefix) and reads back to the same spec.
    assert!(text.contains("[[rule]]"), "{text}");
    let again = redrive_core::automation::RuleSet::parse_toml(&text).unwrap();
    assert_eq!(again.spec, set.spec);
    assert!(c
        .to_redacted_toml()
        .unwrap()
        .contains("[[automation.rule]]"));

    std::fs::write(
        &path,
        "[[automation.rule]]\nname = \"m\"\ntier = \"manual\"\nschedule = {}\n",
    )
    .unwrap();
    let e = Config::load(Some(&path), env(&[]), &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[automation]") && e.contains("only a transient rule"),
        "{e}"
    );
    assert!(load(None, &[], &Overrides::default())
        .automation
        .rule_set()
        .unwrap()
        .is_none());
}

#[test]
fn every_field_has_an_environment_kind() {
    for name in field_names() {
        // Tables read from the file (`kafka` also from REDRIVE_KAFKA__*, `oidc` from
        // REDRIVE_OIDC__*).
        if matches!(
            name.as_str(),
            "kafka"
                | "alerts"
                | "retention"
                | "roles"
                | "approval"
                | "reasons"
                | "oidc"
                | "proxy_auth"
                | "automation"
                | "schema_registry"
        ) {
            continue;
        }
        assert!(
            TEXT_FIELDS.contains(&name.as_str()) || TYPED_FIELDS.contains(&name.as_str()),
            "`{name}` is in neither TEXT_FIELDS nor TYPED_FIELDS"
        );
    }
}

#[test]
fn the_example_file_is_a_valid_configuration() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../redrive.toml.example");
    let c = load(Some(&path), &[], &Overrides::default());
    assert_eq!(c.dlq_topics, vec!["orders.DLT", "dlq_requests", "^.*-dlt$"]);
    assert_eq!(c.listen, default_listen());
}

#[test]
fn every_field_is_documented_in_docs_configuration_md() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
    let doc = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    for name in field_names() {
        assert!(
            doc.contains(&format!("| `{name}` |")),
            "docs/configuration.md has no table row for `{name}`"
        );
        if name != "kafka" {
            let var = format!("`REDRIVE_{}`", name.to_ascii_uppercase());
            assert!(
                doc.contains(&var),
                "docs/configuration.md does not mention {var}"
            );
        }
    }
}
