"""Captures librdkafka's statistics JSON from a consumer that a KRaft broker's controlled
shutdown left with no broker at all (librdkafka issue #5301), and from the same consumer
while it was connected: the ground truth of `core/src/kafka_brokers.rs`'s tests.

Run: python3 -m venv v && v/bin/pip install confluent-kafka==2.12.1 (its wheel bundles
librdkafka 2.12.1, the version rdkafka-sys 4.10.0 builds), then
`v/bin/python capture.py` from the repository root. It starts a broker of its own with
`scripts/kafka` (port 23456, state in a temporary directory), subscribes a consumer, and
stops and starts the broker while four threads ask that consumer for metadata, until a
statistics report lists no configured or learned broker (at most 30 rounds).
Writes connected.json and orphaned.json beside this file.
"""
import json, logging, os, subprocess, tempfile, threading, time
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
PORT = "23456"
STATE = tempfile.mkdtemp(prefix="rdkafka-stats-")
ENV = dict(os.environ, KAFKA_PORT=PORT, KAFKA_STATE_DIR=STATE)
BOOTSTRAP = f"127.0.0.1:{PORT}"
ROUNDS = 30


def kafka(cmd):
    subprocess.run(["scripts/kafka", cmd], env=ENV, check=True, capture_output=True)


def real_brokers(stats):
    return [b for b in stats["brokers"].values() if b["source"] in ("configured", "learned")]


reports = []
quiet = logging.getLogger("librdkafka")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False
kafka("start")
try:
    topic = f"stats{int(time.time())}"
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result()
    consumer = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": f"g{topic}",
        "enable.auto.commit": False,
        "statistics.interval.ms": 500,
        "stats_cb": lambda s: reports.append(json.loads(s)),
        # The debug log slows librdkafka's threads enough to meet the window far more often.
        "debug": "broker,metadata",
    }, logger=quiet)
    consumer.subscribe([topic])
    producer = Producer({"bootstrap.servers": BOOTSTRAP})
    producer.produce(topic, b"one")
    producer.flush(10)
    stop = [False]

    def poll():
        while not stop[0]:
            consumer.poll(0.2)

    poller = threading.Thread(target=poll)
    poller.start()
    connected = orphaned = None
    for round_ in range(ROUNDS):
        time.sleep(3)
        connected = connected or next((r for r in reversed(reports) if real_brokers(r)), None)
        asking = [True]

        def ask():
            while asking[0]:
                try:
                    consumer.list_topics(topic, timeout=1)
                except KafkaException:
                    pass

        askers = [threading.Thread(target=ask) for _ in range(4)]
        for a in askers:
            a.start()
        kafka("stop")
        asking[0] = False
        for a in askers:
            a.join()
        kafka("start")
        time.sleep(3)
        orphaned = next((r for r in reversed(reports) if not real_brokers(r)), None)
        print(f"round {round_ + 1}: orphaned={orphaned is not None}", flush=True)
        if orphaned:
            break
    stop[0] = True
    poller.join()
    consumer.close()
    if not (connected and orphaned):
        raise SystemExit(f"no orphaned report in {ROUNDS} rounds")
    for name, report in (("connected", connected), ("orphaned", orphaned)):
        with open(os.path.join(HERE, f"{name}.json"), "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
            f.write("\n")
finally:
    kafka("stop")
