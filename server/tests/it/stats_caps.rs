//! The store-derived figures stay exact beyond their caps (`docs/metrics.md`): more
//! (DLQ topic, source topic, status) rows than `STATS_ROW_CAP` (any producer can name any
//! source topic in a header) and a real DLQ topic literally named `other`. Truth is plain SQL
//! over `dead_letters`, not the aggregates.

use redrive_core::store::{OTHER_SOURCES, STATS_ROW_CAP};
use redrive_core::Normalized;
use redrive_testkit::fixtures::stored_dead_letter;
use redrive_testkit::Backend;

use crate::support::TestApp;

/// The value of the sample `name{labels}` in a scrape, summed over every series whose label
/// text contains all of `labels`.
fn sample_sum(scrape: &str, name: &str, labels: &[&str]) -> i64 {
    scrape
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as i64)
        .sum()
}

async fn exact_beyond_the_caps(backend: Backend) {
    let sources = STATS_ROW_CAP as usize + 100;
    let mut rows: Vec<_> = (0..sources)
        .map(|i| {
            stored_dead_letter(
                "many.DLT",
                i as i64,
                Normalized {
                    source_topic: Some(format!("s{i:05}")),
                    ..Normalized::default()
                },
            )
        })
        .collect();
    // A DLQ topic really named `other`, which a capped label must not be confused with.
    rows.extend((0..7).map(|i| stored_dead_letter("other", i, Normalized::default())));
    let app = TestApp::with_records(backend, &rows, &[("REDRIVE_METRICS_PUBLIC", "true")]).await;

    let stats = app
        .store
        .stats(chrono::Utc::now().timestamp_millis())
        .await
        .expect("stats");
    assert!(
        stats.truncated,
        "{backend:?}: the test must go past the cap"
    );
    let by_topic = stats.by_dlq_topic();
    let many = by_topic
        .iter()
        .find(|t| t.dlq_topic.as_deref() == Some("many.DLT"))
        .expect("many.DLT");
    assert_eq!(many.counts.new, sources as i64, "{backend:?}");
    assert_eq!(stats.totals().counts.new, sources as i64 + 7, "{backend:?}");
    assert!(
        stats
            .pairs
            .iter()
            .any(|p| p.source_topic.as_deref() == Some(OTHER_SOURCES)),
        "{backend:?}: the remainder is reported under {OTHER_SOURCES}"
    );

    let scrape = reqwest::get(app.url("/metrics"))
        .await
        .expect("scrape")
        .text()
        .await
        .expect("body");
    let new = |topic: &str| {
        sample_sum(
            &scrape,
            "redrive_dead_letters_by_topic",
            &[&format!("dlq_topic=\"{topic}\""), "status=\"new\""],
        )
    };
    assert_eq!(new("many.DLT"), sources as i64, "{backend:?}\n{scrape}");
    assert_eq!(
        new("other"),
        7,
        "{backend:?}: one series for the topic named other"
    );
    assert_eq!(
        sample_sum(&scrape, "redrive_dead_letters", &["status=\"new\""]),
        sources as i64 + 7,
        "{backend:?}"
    );
    // Every arrival is counted once, in its own pair's series or in (other)/(other).
    assert_eq!(
        sample_sum(&scrape, "redrive_dead_letters_ingested_by_topic_total", &[]),
        sources as i64 + 7,
        "{backend:?}"
    );
    let mut seen = std::collections::BTreeSet::new();
    for line in scrape.lines().filter(|l| !l.starts_with('#')) {
        let series = line.rsplit_once(' ').map(|(s, _)| s).unwrap_or(line);
        assert!(
            seen.insert(series.to_string()),
            "{backend:?}: duplicate series {series}"
        );
    }
}

#[tokio::test]
async fn figures_stay_exact_beyond_the_caps_on_sqlite() {
    exact_beyond_the_caps(Backend::Sqlite).await;
}

#[tokio::test]
async fn figures_stay_exact_beyond_the_caps_on_postgres() {
    exact_beyond_the_caps(Backend::Postgres).await;
}
