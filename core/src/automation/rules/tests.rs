//! Unit tests of the rule set: first-match assignment and its reason, poison routing, the
//! default tier, named mistakes, and the TOML round trip.

use super::*;
use crate::automation::tier::Tier;
use crate::model::{Convention, Header};

fn h(name: &str, v: &str) -> Header {
    Header {
        name: name.into(),
        value: Some(v.as_bytes().to_vec()),
    }
}

fn input<'a>(headers: &'a [Header], labels: &'a [String]) -> MatchInput<'a> {
    MatchInput {
        dlq_topic: "llm.requests.dlq",
        source_topic: Some("llm.requests"),
        consumer_group: Some("agent"),
        error_class: Some("TimeoutError"),
        error_message: Some("LLM call timed out after 30s"),
        fingerprint: "0123456789abcdef",
        convention: Convention::Seed,
        headers,
        labels,
        age_ms: 5_000,
    }
}

const SET: &str = r#"
default_tier = "manual"

[[rule]]
name = "llm-timeouts"
tier = "transient"
match.dlq_topics = ["llm.*"]
match.error_classes = ["*Timeout*"]
schedule = { every = "5m", max_attempts = 4, backoff = "30s", backoff_max = "10m" }
gate.http = { url = "http://127.0.0.1:3001/health" }

[[rule]]
name = "old-business"
tier = "manual"
match.error_messages = ["invalid"]
move_after = { after = "10d", to = "archive" }
"#;

#[test]
fn first_matching_rule_gives_the_tier_and_says_why() {
    let set = RuleSet::parse_toml(SET).unwrap();
    let a = set.assign(&input(&[], &[]));
    assert_eq!(a.tier, Tier::Transient);
    assert_eq!(a.rule.as_deref(), Some("llm-timeouts"));
    assert!(
        a.reason.contains("error class TimeoutError"),
        "{}",
        a.reason
    );
    let s = set.rule("llm-timeouts").unwrap().schedule.clone().unwrap();
    assert_eq!(
        (s.every_ms, s.max_attempts, s.batch_size),
        (300_000, 4, 500)
    );
    assert_eq!(s.delay_ms(1, 0.5), 30_000);
    assert_eq!(s.delay_ms(3, 0.5), 120_000);
    assert_eq!(s.delay_ms(20, 0.5), 600_000);
    assert_eq!(s.delay_ms(1, 0.0), 24_000);
}

#[test]
fn poison_signal_skips_transient_rules() {
    let set = RuleSet::parse_toml(SET).unwrap();
    let hs = [h("retryable", "false")];
    let a = set.assign(&input(&hs, &[]));
    assert_eq!(a.tier, Tier::Poison);
    assert_eq!(a.rule, None);
    assert!(a.poison_signal);
    // The signal alone: the history writes `{tier}: {reason}`, "poison: header ...".
    assert_eq!(a.reason, "header retryable=false");
}

#[test]
fn no_rule_gives_the_default_tier() {
    let set = RuleSet::parse_toml("default_tier = \"archive\"").unwrap();
    let a = set.assign(&input(&[], &[]));
    assert_eq!(a.tier, Tier::Archive);
    assert!(!a.poison_signal);
    assert_eq!(a.reason, "no rule matched: the default tier");
}

#[test]
fn mistakes_are_named() {
    for (text, want) in [
        ("[[rule]]\nname = \"a b\"\ntier = \"manual\"", "name `a b`"),
        (
            "[[rule]]\nname = \"a\"\ntier = \"manual\"\nschedule = {}",
            "only a transient",
        ),
        (
            "[[rule]]\nname = \"a\"\ntier = \"transient\"\nschedule = { every = \"soon\" }",
            "schedule.every",
        ),
        (
            "[[rule]]\nname = \"a\"\ntier = \"transient\"\nmatch.colour = [\"x\"]",
            "unknown field",
        ),
        (
            "[[rule]]\nname = \"a\"\ntier = \"manual\"\n[[rule]]\nname = \"a\"\ntier = \"manual\"",
            "used twice",
        ),
        (
            "[[rule]]\nname = \"a\"\ntier = \"manual\"\nmatch.conventions = [\"springy\"]",
            "not a convention",
        ),
    ] {
        let e = RuleSet::parse_toml(text).unwrap_err().0;
        assert!(e.contains(want), "{text}: {e}");
    }
}

#[test]
fn toml_round_trips() {
    let set = RuleSet::parse_toml(SET).unwrap();
    let again = RuleSet::parse_toml(&set.to_toml()).unwrap();
    assert_eq!(again.spec, set.spec);
}
