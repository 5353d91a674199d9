//! Produces the fixture dead letters (see `redrive_testkit::fixtures`) to a topic.
//! Usage: `produce-fixtures BROKERS TOPIC` — prints how many records it wrote.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(brokers), Some(topic)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: produce-fixtures BROKERS TOPIC");
    };
    std::env::set_var("REDRIVE_TEST_KAFKA_BROKERS", &brokers);
    let records = redrive_testkit::fixtures::sample_dead_letters();
    redrive_testkit::produce(&topic, &records).await?;
    println!("{}", records.len());
    Ok(())
}
