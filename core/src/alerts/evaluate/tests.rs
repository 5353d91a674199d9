//! Tests of the evaluator: the live backlog read from the aggregates.

use super::aggregates::live_from_pairs;
use super::*;
use crate::store::PerStatus;
use crate::store::TopicStats;

fn pair(dlq: &str, src: Option<&str>, new: i64, failed: i64, replayed: i64) -> TopicStats {
    TopicStats {
        dlq_topic: Some(dlq.into()),
        source_topic: src.map(str::to_string),
        counts: PerStatus {
            new,
            replay_failed: failed,
            replayed,
            ..PerStatus::default()
        },
        oldest_ms: PerStatus {
            new: (new > 0).then_some(100),
            replay_failed: (failed > 0).then_some(50),
            replayed: (replayed > 0).then_some(1),
            ..PerStatus::default()
        },
        ..TopicStats::default()
    }
}

#[test]
fn live_from_the_aggregates_counts_what_is_not_dealt_with() {
    let pairs = [
        pair("a.DLT", Some("a"), 2, 1, 7),
        pair("a.DLT", None, 1, 0, 0),
        pair("b.DLT", Some("b"), 0, 0, 9),
    ];
    let by_dlq = live_from_pairs(&pairs, GroupBy::DlqTopic, &AlertFilter::default());
    assert_eq!(by_dlq.len(), 1, "replayed ones are not live backlog");
    assert_eq!((by_dlq[0].count, by_dlq[0].at_ms), (4, Some(50)));
    let f = AlertFilter {
        source_topic: Some("a".into()),
        ..AlertFilter::default()
    };
    let by_src = live_from_pairs(&pairs, GroupBy::SourceTopic, &f);
    assert_eq!(by_src.len(), 1);
    assert_eq!(
        (by_src[0].value.as_deref(), by_src[0].count),
        (Some("a"), 3)
    );
}
