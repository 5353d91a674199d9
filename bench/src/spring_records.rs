//! The Kafka records the ingest figures consume: dead letters as Spring Kafka's
//! `DeadLetterPublishingRecoverer` publishes them (its `kafka_dlt-*` headers, docs/conventions.md),
//! about 1 KiB each with a 20-frame stack trace, and the hostile ones mixed in among them.

use std::time::Instant;

use anyhow::Result;
use redrive_testkit::{self as kit, TestRecord};

/// A fresh 4-partition topic named after `prefix`, holding `records` 1 KiB Spring records
/// before anything consumes it (a backlog); returns its name.
pub(crate) async fn spring_backlog(prefix: &str, records: usize) -> Result<String> {
    let topic = kit::unique(prefix);
    kit::create_topic(&topic, 4, &[]).await?;
    let t = Instant::now();
    produce_spring_records(&topic, records).await?;
    eprintln!(
        "produced {records} records in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(topic)
}

pub(crate) fn spring_headers(i: usize) -> Vec<(String, Option<Vec<u8>>)> {
    let stack = format!(
        "org.springframework.kafka.listener.ListenerExecutionFailedException: Listener failed\n{}Caused by: java.util.concurrent.TimeoutException: Timeout after {} ms for order {i}\n\t... 12 more\n",
        "\tat com.example.orders.OrderListener.handle(OrderListener.java:42)\n".repeat(20),
        1000 + i % 7
    );
    vec![
        ("kafka_dlt-original-topic".into(), Some(b"orders".to_vec())),
        (
            "kafka_dlt-original-partition".into(),
            Some(((i % 4) as i32).to_be_bytes().to_vec()),
        ),
        (
            "kafka_dlt-original-offset".into(),
            Some((i as i64).to_be_bytes().to_vec()),
        ),
        (
            "kafka_dlt-original-timestamp".into(),
            Some(1_796_104_800_000i64.to_be_bytes().to_vec()),
        ),
        (
            "kafka_dlt-original-timestamp-type".into(),
            Some(b"CreateTime".to_vec()),
        ),
        (
            "kafka_dlt-original-consumer-group".into(),
            Some(b"orders-service".to_vec()),
        ),
        (
            "kafka_dlt-exception-fqcn".into(),
            Some(b"org.springframework.kafka.listener.ListenerExecutionFailedException".to_vec()),
        ),
        (
            "kafka_dlt-exception-cause-fqcn".into(),
            Some(b"java.util.concurrent.TimeoutException".to_vec()),
        ),
        (
            "kafka_dlt-exception-message".into(),
            Some(
                format!(
                    "Listener failed; Timeout after {} ms for order {i}",
                    1000 + i % 7
                )
                .into_bytes(),
            ),
        ),
        (
            "kafka_dlt-exception-stacktrace".into(),
            Some(stack.into_bytes()),
        ),
    ]
}

pub(crate) async fn produce_spring_records(topic: &str, n: usize) -> Result<()> {
    produce_spring_records_with(topic, n, false).await
}

/// Every 1,000th record (i % 1000 == 999) made hostile when `hostile`: key `hostile-{i}`,
/// a 10 KiB error class and message (over their caps), 1,000 extra headers, NULs and markup.
fn make_hostile(i: usize, r: &mut TestRecord) {
    let noise: String = (0..10_240 / 16)
        .map(|j| {
            format!(
                "{:016x}",
                (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ j
            )
        })
        .collect();
    r.key = Some(format!("hostile-{i}").into_bytes());
    for (name, value) in r.headers.iter_mut() {
        if name == "kafka_dlt-exception-fqcn" || name == "kafka_dlt-exception-message" {
            *value = Some(format!("<script>alert(1)</script>\0{noise}").into_bytes());
        }
    }
    r.headers
        .extend((0..1000).map(|j| (format!("x-h{j}"), Some(b"v\0<b>".to_vec()))));
}

pub(crate) async fn produce_spring_records_with(
    topic: &str,
    n: usize,
    hostile: bool,
) -> Result<()> {
    let producer = backlog_producer()?;
    let value = vec![b'x'; 1024];
    let chunk = 10_000;
    let mut i = 0;
    while i < n {
        let end = (i + chunk).min(n);
        let batch: Vec<TestRecord> = (i..end)
            .map(|j| {
                let mut r = TestRecord {
                    key: Some(format!("order-{j}").into_bytes()),
                    value: Some(value.clone()),
                    headers: spring_headers(j),
                    partition: Some((j % 4) as i32),
                    timestamp_ms: None,
                };
                if hostile && j % 1000 == 999 {
                    make_hostile(j, &mut r);
                }
                r
            })
            .collect();
        kit::produce_with(&producer, topic, &batch).await?;
        i = end;
    }
    Ok(())
}

/// A producer for filling a backlog fast: large lz4 batches, a deep local queue.
pub(crate) fn backlog_producer() -> Result<rdkafka::producer::FutureProducer> {
    kit::producer(&[
        ("linger.ms", "20"),
        ("batch.size", "1000000"),
        ("queue.buffering.max.messages", "500000"),
        ("compression.type", "lz4"),
    ])
}
