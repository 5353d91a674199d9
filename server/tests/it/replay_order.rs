//! Replay order and placement (issue 9, item 7) on the real broker, on SQLite and PostgreSQL:
//! per-key source order survives a SIGKILL of the real binary mid-job (checked on the target
//! topic with a real consumer), records go back to their original partition, and a record
//! whose partition the target lacks fails with a message naming it — the later records of its
//! key fail with it rather than overtake it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rdkafka::message::Message;
use redrive_core::actions::{JobStatus, ReplayOptions, ReplayRequest, Selection};
use redrive_core::model::{NewDeadLetter, Normalized, Status};
use redrive_core::Filter;
use redrive_testkit::fixtures::stored_dead_letter;
use redrive_testkit::{consume, create_topic, kafka_brokers, unique, wait_for, Backend};

use crate::support::replay::{ann, fast_relay, record_count, wait_job, RunningRelay};
use crate::support::TestApp;

/// A dead letter of `key` whose record sat at `source_offset` of `source_partition` of
/// `source`; its value says which (`key:offset`). `dlq_offset` is its place in the DLQ
/// (and so in ingest order).
fn keyed(
    dlq_offset: i64,
    source: &str,
    key: &str,
    source_partition: i32,
    source_offset: i64,
) -> NewDeadLetter {
    let mut d = stored_dead_letter(
        "orders.DLT",
        dlq_offset,
        Normalized {
            source_topic: Some(source.to_string()),
            source_partition: Some(source_partition),
            source_offset: Some(source_offset),
            ..Normalized::default()
        },
    );
    d.record.key = Some(key.as_bytes().to_vec());
    d.record.value = Some(format!("{key}:{source_offset}").into_bytes());
    d
}

/// `(key, source offset)` of a replayed record, from its value.
fn key_and_offset(m: &rdkafka::message::OwnedMessage) -> (String, i64) {
    let v = std::str::from_utf8(m.payload().expect("a value")).expect("UTF-8");
    let (k, o) = v.rsplit_once(':').expect("key:offset");
    (k.to_string(), o.parse().expect("offset"))
}

const KEYS: i64 = 12;
const PER_KEY: i64 = 50;

/// `KEYS` keys x `PER_KEY` records, ingested in an order unrelated to their source order
/// (each key's offsets come in a scrambled order), so that publishing in ingest order would
/// break per-key order.
fn scrambled(source: &str) -> Vec<NewDeadLetter> {
    let mut pairs: Vec<(i64, i64)> = (0..KEYS)
        .flat_map(|k| (0..PER_KEY).map(move |o| (k, o)))
        .collect();
    // A fixed permutation: by a multiplicative hash of the pair.
    pairs.sort_by_key(|(k, o)| ((k * PER_KEY + o) * 7_919) % 10_007);
    pairs
        .into_iter()
        .enumerate()
        .map(|(i, (k, o))| keyed(i as i64, source, &format!("key-{k}"), 0, 1_000 + o))
        .collect()
}

#[tokio::test]
async fn per_key_order_survives_a_relay_killed_mid_job() {
    for backend in Backend::ALL {
        let target = unique("ordered");
        create_topic(&target, 3, &[]).await.expect("topic");
        let records = scrambled(&target);
        let n = records.len() as i64;
        let brokers = kafka_brokers();
        let env = [
            ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
            // A killed relay's claims are taken over after the lease: 4 s, not the default.
            ("REDRIVE_RELAY_LEASE_MS", "4000"),
            ("REDRIVE_RELAY_DELIVERY_TIMEOUT_MS", "3000"),
            ("REDRIVE_RELAY_POLL_INTERVAL_MS", "50"),
        ];
        let mut app = TestApp::with_records(backend, &records, &env).await;
        let job = app
            .store
            .request_replay(
                &ann(),
                &ReplayRequest {
                    selection: Selection::Filter(Filter::default()),
                    target_topic: None,
                    // Slow enough to kill it half-way.
                    rate_per_sec: Some(150),
                    reason: Some("order test".into()),
                    options: ReplayOptions::default(),
                },
            )
            .await
            .expect("replay");
        assert_eq!(job.total, n);
        let at_kill = wait_for(
            "a third of the job published",
            Duration::from_secs(120),
            || async {
                let j = app.store.job(&job.id).await.ok().flatten()?;
                (j.published >= n / 3).then_some(j.published)
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{backend:?}: {e}\n{}", app.log()));
        app.kill().await;
        assert!(at_kill < n, "{backend:?}: done before the kill");

        let second = app.another_instance(&env).await;
        let done = wait_job(
            &second.store,
            &job.id,
            Duration::from_secs(180),
            JobStatus::Finished,
        )
        .await;
        assert_eq!((done.published, done.failed), (n, 0), "{backend:?}");

        // On the topic: every record at least once, and each key's records in source order
        // (a record published but not marked before the kill comes again right after
        // itself: its successor was held until it was marked).
        let on_topic = record_count(&target, 3);
        assert!(on_topic >= n, "{backend:?}: {on_topic} of {n}");
        let messages = consume(&target, on_topic as usize)
            .await
            .expect("the replayed records");
        let mut seen: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for m in &messages {
            let (k, o) = key_and_offset(m);
            assert_eq!(m.key(), Some(k.as_bytes()), "{backend:?}");
            seen.entry(k).or_default().push(o);
        }
        assert_eq!(seen.len(), KEYS as usize, "{backend:?}");
        for (k, offsets) in &seen {
            assert!(
                offsets.windows(2).all(|w| w[0] <= w[1]),
                "{backend:?}: {k} out of source order: {offsets:?}"
            );
            let distinct: BTreeSet<i64> = offsets.iter().copied().collect();
            assert_eq!(
                distinct,
                (1_000..1_000 + PER_KEY).collect::<BTreeSet<i64>>(),
                "{backend:?}: {k}"
            );
        }
        eprintln!(
            "{backend:?}: killed at {at_kill} of {n}; {on_topic} records on the topic, \
             {} republished",
            on_topic - n
        );
        drop(second);
    }
}

/// Ordering off: the same scrambled job goes out in ingest order (which is what makes the
/// test above prove something).
#[tokio::test]
async fn with_ordering_off_records_go_in_ingest_order() {
    for backend in Backend::ALL {
        let (store, _dir) = redrive_testkit::fresh_store(backend).await.expect("store");
        let target = unique("unordered");
        create_topic(&target, 1, &[]).await.expect("topic");
        let records = scrambled(&target);
        let n = records.len();
        store.insert_batch(&records).await.expect("insert");
        let job = store
            .request_replay(
                &ann(),
                &ReplayRequest {
                    selection: Selection::Filter(Filter::default()),
                    target_topic: None,
                    rate_per_sec: None,
                    reason: None,
                    options: ReplayOptions {
                        unordered: true,
                        ..ReplayOptions::default()
                    },
                },
            )
            .await
            .expect("replay");
        assert_eq!(job.options.to_json(), r#"{"unordered":true}"#);
        let relay = RunningRelay::start(&store, fast_relay());
        wait_job(
            &store,
            &job.id,
            Duration::from_secs(60),
            JobStatus::Finished,
        )
        .await;
        relay.stop().await;
        let messages = consume(&target, n).await.expect("the replayed records");
        let out_of_order = messages
            .iter()
            .map(key_and_offset)
            .fold(
                (BTreeMap::<String, i64>::new(), 0),
                |(mut last, bad), (k, o)| {
                    let prev = last.insert(k, o).unwrap_or(i64::MIN);
                    (last, bad + usize::from(o < prev))
                },
            )
            .1;
        assert!(out_of_order > 0, "{backend:?}: the scramble did nothing");
    }
}

#[tokio::test]
async fn original_partitions_are_kept_and_a_missing_one_fails_by_name() {
    for backend in Backend::ALL {
        let (store, _dir) = redrive_testkit::fresh_store(backend).await.expect("store");
        let wide = unique("wide");
        create_topic(&wide, 4, &[]).await.expect("topic");
        let narrow = unique("narrow");
        create_topic(&narrow, 2, &[]).await.expect("topic");
        // Eight keys on the four partitions of `wide`; then two records of one key that came
        // from partition 3 and one from partition 1, for the 2-partition `narrow`.
        let mut records: Vec<NewDeadLetter> = (0..8)
            .map(|i| keyed(i, &wide, &format!("w{i}"), (i % 4) as i32, 10 + i))
            .collect();
        records.push(keyed(100, &narrow, "n3", 3, 7));
        records.push(keyed(101, &narrow, "n3", 3, 8));
        records.push(keyed(102, &narrow, "n1", 1, 9));
        store.insert_batch(&records).await.expect("insert");
        let job = store
            .request_replay(
                &ann(),
                &ReplayRequest {
                    selection: Selection::Filter(Filter::default()),
                    target_topic: None,
                    rate_per_sec: None,
                    reason: None,
                    options: ReplayOptions {
                        original_partition: true,
                        ..ReplayOptions::default()
                    },
                },
            )
            .await
            .expect("replay");
        let relay = RunningRelay::start(&store, fast_relay());
        let done = wait_job(
            &store,
            &job.id,
            Duration::from_secs(60),
            JobStatus::Finished,
        )
        .await;
        relay.stop().await;
        assert_eq!(
            (done.total, done.published, done.failed),
            (11, 9, 2),
            "{backend:?}: {done:?}"
        );

        for m in consume(&wide, 8).await.expect("the replayed records") {
            let (k, _) = key_and_offset(&m);
            let i: i32 = k[1..].parse().expect("w<i>");
            assert_eq!(m.partition(), i % 4, "{backend:?}: {k}");
        }
        let narrow_msgs = consume(&narrow, 1).await.expect("the replayed records");
        assert_eq!(key_and_offset(&narrow_msgs[0]).0, "n1");
        assert_eq!(narrow_msgs[0].partition(), 1, "{backend:?}");
        assert_eq!(record_count(&narrow, 2), 1, "{backend:?}: nothing remapped");

        // The first n3 record fails naming partition and count; the second is held back
        // behind it, and says so.
        let failed = store
            .list(&redrive_core::ListQuery {
                filter: Filter {
                    status: Some(Status::ReplayFailed),
                    ..Filter::default()
                },
                limit: 10,
                cursor: None,
            })
            .await
            .expect("list")
            .items;
        assert_eq!(failed.len(), 2, "{backend:?}");
        let mut details: BTreeMap<i64, String> = BTreeMap::new();
        for s in &failed {
            let d = store.get(s.id).await.expect("get").expect("exists");
            let last = store.history(s.id).await.expect("history");
            let last = last.last().expect("an event").clone();
            assert_eq!(last.kind, "replay_failed");
            details.insert(
                d.summary.source_offset.expect("offset"),
                last.detail.unwrap_or_default(),
            );
        }
        let first = &details[&7];
        assert!(
            first.contains("original partition 3 does not exist")
                && first.contains("which has 2 partitions")
                && first.contains("not remapped"),
            "{backend:?}: {first}"
        );
        let held = &details[&8];
        let first_id = failed
            .iter()
            .find(|s| s.source_offset == Some(7))
            .expect("the first")
            .id;
        assert!(
            held.contains(&format!("dead letter #{first_id}")) && held.contains("per-key order"),
            "{backend:?}: {held}"
        );
    }
}

/// The replay confirmation page's two checkboxes, "Publish without per-key order" and
/// "Publish to each record's original partition", as a browser without JavaScript sends them:
/// shown unticked, ticked they become the job's `ReplayOptions` exactly as the API's
/// `"options": {"unordered": true, "original_partition": true}` does (the records land on
/// their original partitions of the real topic, the job page says both), a value that is not
/// a checkbox's is refused on the page with nothing queued, and unticked the job keeps the
/// defaults.
#[tokio::test]
async fn the_confirmation_form_sets_order_and_placement() {
    use crate::support::location;
    use crate::ui_actions::{job_id, Browser, ACT_ON_FILTER, OPERATOR};
    for backend in Backend::ALL {
        let wide = unique("wide-ui");
        create_topic(&wide, 4, &[]).await.expect("topic");
        let records: Vec<NewDeadLetter> = (0..8)
            .map(|i| keyed(i, &wide, &format!("w{i}"), (i % 4) as i32, 10 + i))
            .collect();
        let brokers = kafka_brokers();
        let app = TestApp::with_records(
            backend,
            &records,
            &[("REDRIVE_KAFKA_BROKERS", brokers.as_str())],
        )
        .await;
        app.add_user(OPERATOR.0, "operator", OPERATOR.1).await;
        let b = Browser::sign_in(&app, OPERATOR).await;
        let filter = format!("source_topic={wide}");
        let confirm = format!("/confirm?op=replay&{filter}");

        let (status, html) = b.page(&confirm).await;
        assert_eq!(status, 200, "{backend:?}: {html}");
        for name in ["unordered", "original_partition"] {
            assert!(
                html.contains(&format!(
                    "<input type=\"checkbox\" name=\"{name}\" value=\"true\">"
                )),
                "{backend:?}: an unticked {name} checkbox: {html}"
            );
        }
        assert!(html.contains("Publish without per-key order"), "{html}");
        assert!(html.contains("original partition"), "{html}");

        // Not a checkbox's value: refused on the page, nothing queued.
        let res = b
            .submit(
                &confirm,
                ACT_ON_FILTER,
                &[("op", "replay"), ("filter", &filter), ("unordered", "yes")],
                None,
            )
            .await;
        assert_eq!(res.status(), 302, "{backend:?}: {}", app.log());
        let back = location(&res);
        let path = back.strip_prefix(&app.base).unwrap_or(&back).to_string();
        let (_, html) = b.page(&path).await;
        assert!(
            html.contains("error-box") && html.contains("unordered is a checkbox"),
            "{backend:?}: {html}"
        );
        assert!(app.store.jobs(10).await.expect("jobs").is_empty());

        // Both ticked.
        let res = b
            .submit(
                &confirm,
                ACT_ON_FILTER,
                &[
                    ("op", "replay"),
                    ("filter", &filter),
                    ("unordered", "true"),
                    ("original_partition", "true"),
                ],
                None,
            )
            .await;
        assert_eq!(res.status(), 302, "{backend:?}: {}", app.log());
        let job = job_id(&location(&res));
        let done = wait_job(
            &app.store,
            &job,
            Duration::from_secs(60),
            JobStatus::Finished,
        )
        .await;
        assert_eq!(
            done.options,
            ReplayOptions {
                unordered: true,
                original_partition: true,
                ..ReplayOptions::default()
            },
            "{backend:?}"
        );
        assert_eq!(
            (done.total, done.published),
            (8, 8),
            "{backend:?}: {done:?}"
        );
        for m in consume(&wide, 8).await.expect("the replayed records") {
            let (k, _) = key_and_offset(&m);
            let i: i32 = k[1..].parse().expect("w<i>");
            assert_eq!(m.partition(), i % 4, "{backend:?}: {k}");
        }
        let (_, html) = b.page(&format!("/jobs/{job}")).await;
        assert!(
            html.contains("none: every record independent (per-key order off)"),
            "{backend:?}: {html}"
        );
        assert!(
            html.contains("each record\u{2019}s original partition (never remapped)"),
            "{backend:?}: {html}"
        );

        // Unticked: the defaults (per-key order, the producer's partition), as the page says.
        let res = b
            .submit(
                &confirm,
                ACT_ON_FILTER,
                &[("op", "replay"), ("filter", &filter)],
                None,
            )
            .await;
        assert_eq!(res.status(), 302, "{backend:?}: {}", app.log());
        let plain = job_id(&location(&res));
        let plain = app.store.job(&plain).await.expect("job").expect("a job");
        assert_eq!(plain.options, ReplayOptions::default(), "{backend:?}");
        let (_, html) = b.page(&format!("/jobs/{}", plain.id)).await;
        assert!(
            html.contains("per key: a key\u{2019}s records one at a time"),
            "{html}"
        );
        assert!(html.contains("picked by the producer (key hash)"), "{html}");
    }
}
