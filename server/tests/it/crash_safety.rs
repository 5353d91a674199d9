//! The reliability contract under SIGKILL: 20,000 dead letters, the real `redrive serve`
//! binary killed mid-ingest, restarted; the store ends with exactly 20,000 rows, one per
//! (partition, offset), and at the moment of the kill every committed offset was covered by
//! stored rows (offsets never run ahead of the store).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use redrive_core::store::Store;
use redrive_testkit::ingest::{
    committed_offsets, count_in, end_offsets, produce_many, summaries_in,
};
use redrive_testkit::{create_topic, kafka_brokers, unique, wait_for, TestRecord};

use crate::support::redrive_std_command;

const RECORDS: usize = 20_000;
const PARTITIONS: i32 = 4;
/// Rows stored when the first run is killed (it is mid-stream then: batches are 500 rows).
const KILL_AT: i64 = 2_000;

struct Redrive {
    child: Child,
    log: std::path::PathBuf,
}

impl Redrive {
    /// Starts `redrive serve` with ingest on `topic` as `group`, storing into `db_url`.
    fn start(dir: &Path, run: &str, db_url: &str, topic: &str, group: &str) -> Redrive {
        let log = dir.join(format!("{run}.log"));
        let out = File::create(&log).unwrap();
        let child = redrive_std_command()
            .arg("serve")
            .current_dir(dir)
            .env("REDRIVE_DATABASE_URL", db_url)
            .env("REDRIVE_KAFKA_BROKERS", kafka_brokers())
            .env("REDRIVE_DLQ_TOPICS", topic)
            .env("REDRIVE_GROUP_ID", group)
            .env("REDRIVE_LISTEN", "127.0.0.1:0")
            .env("REDRIVE_LOG", "info")
            // The killed member stays in the group until its session times out, and the
            // restarted one is assigned partitions only then: 6 s (the broker's minimum)
            // instead of librdkafka's 45 s keeps the test short without changing what it proves.
            .env("REDRIVE_KAFKA__SESSION_TIMEOUT_MS", "6000")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("starting the redrive binary");
        Redrive { child, log }
    }

    /// SIGKILL (that is what `Child::kill` sends on unix), then reap.
    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Fails the test with the binary's log if it has exited.
    fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "redrive exited early ({status}); log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }
}

impl Drop for Redrive {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (partition -> stored offsets) of `topic`.
async fn stored_offsets(store: &Store, topic: &str) -> BTreeMap<i32, BTreeSet<i64>> {
    let mut out: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    for s in summaries_in(store, topic).await.unwrap() {
        assert!(
            out.entry(s.dlq_partition).or_default().insert(s.dlq_offset),
            "duplicate row for {}@{}",
            s.dlq_partition,
            s.dlq_offset
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_ingest_loses_nothing_and_duplicates_nothing() {
    let t0 = Instant::now();
    let topic = unique("dlq_crash");
    create_topic(&topic, PARTITIONS, &[]).await.unwrap();
    produce_many(&topic, RECORDS, |i| TestRecord {
        key: Some(format!("order-{i}").into_bytes()),
        value: Some(format!("{{\"order_id\":{i},\"amount\":\"12.50\"}}").into_bytes()),
        headers: vec![
            ("original_topic".into(), Some(b"orders".to_vec())),
            ("retry_count".into(), Some(b"3".to_vec())),
            (
                "error".into(),
                Some(format!("timeout talking to shard {}", i % 7).into_bytes()),
            ),
        ],
        partition: Some(i as i32 % PARTITIONS),
        timestamp_ms: None,
    })
    .await
    .unwrap();
    let end = end_offsets(&topic).await.unwrap();
    assert_eq!(end.values().sum::<i64>(), RECORDS as i64);
    eprintln!("produced {RECORDS} records in {:?}", t0.elapsed());

    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite:{}", dir.path().join("redrive.db").display());
    let store = Store::connect(&db_url).await.unwrap();
    store.migrate().await.unwrap();
    let group = unique("crash");

    // First run: kill it once a few batches are stored (but far from all), while it is busy.
    let t1 = Instant::now();
    let mut first = Redrive::start(dir.path(), "first", &db_url, &topic, &group);
    let deadline = Instant::now() + Duration::from_secs(120);
    let at_kill = loop {
        first.assert_running();
        let n = count_in(&store, &topic).await.unwrap_or(0);
        if n >= KILL_AT {
            first.kill();
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "{KILL_AT} rows not stored within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let stored_at_kill = count_in(&store, &topic).await.unwrap();
    eprintln!(
        "killed after {:?} with {at_kill} rows seen ({stored_at_kill} stored)",
        t1.elapsed()
    );
    assert!(
        (stored_at_kill as usize) < RECORDS,
        "everything was stored before the kill; the test proved nothing"
    );

    // The invariant at the moment of death: each committed offset is covered by stored rows.
    let committed = committed_offsets(&group, &topic).await.unwrap();
    let stored = stored_offsets(&store, &topic).await;
    for (partition, next) in &committed {
        let have = stored.get(partition).cloned().unwrap_or_default();
        for offset in 0..*next {
            assert!(
                have.contains(&offset),
                "offset {offset} of partition {partition} was committed ({next}) but not stored"
            );
        }
    }
    eprintln!("committed at kill: {committed:?}");

    // Second run: same group, same store; it resumes from the committed offsets.
    let t2 = Instant::now();
    let mut second = Redrive::start(dir.path(), "second", &db_url, &topic, &group);
    wait_for(
        "all 20,000 rows after the restart",
        Duration::from_secs(300),
        || {
            let store = store.clone();
            let topic = topic.clone();
            let alive = second
                .child
                .try_wait()
                .map(|s| s.is_none())
                .unwrap_or(false);
            async move {
                if !alive {
                    return Some(Err(()));
                }
                let n = count_in(&store, &topic).await.ok()?;
                (n >= RECORDS as i64).then_some(Ok(()))
            }
        },
    )
    .await
    .unwrap()
    .unwrap_or_else(|()| {
        panic!(
            "redrive exited; log:\n{}",
            std::fs::read_to_string(&second.log).unwrap_or_default()
        )
    });
    wait_for(
        "offsets committed to the end",
        Duration::from_secs(60),
        || {
            let (group, topic, end) = (group.clone(), topic.clone(), end.clone());
            async move { (committed_offsets(&group, &topic).await.ok()? == end).then_some(()) }
        },
    )
    .await
    .unwrap();
    eprintln!("restart stored the rest in {:?}", t2.elapsed());
    second.kill();

    assert_eq!(count_in(&store, &topic).await.unwrap(), RECORDS as i64);
    let stored = stored_offsets(&store, &topic).await;
    let distinct: usize = stored.values().map(BTreeSet::len).sum();
    assert_eq!(distinct, RECORDS, "distinct (partition, offset) rows");
    for (partition, high) in &end {
        let expected: BTreeSet<i64> = (0..*high).collect();
        assert_eq!(
            stored.get(partition),
            Some(&expected),
            "partition {partition}"
        );
    }
    eprintln!(
        "crash test: {RECORDS} rows, {distinct} distinct offsets, total {:?}",
        t0.elapsed()
    );
}
