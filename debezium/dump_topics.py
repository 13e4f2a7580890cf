#!/usr/bin/env python3
"""Print every record of the given Kafka topics as one JSON object per line (needs confluent-kafka).

usage: dump_topics.py --bootstrap HOST:PORT [--timeout SECONDS] [--expect N] TOPIC...

Reads from the beginning of every partition until --expect records were seen or nothing arrived for
--timeout seconds. Bytes are shown as UTF-8 text (null when absent) and as hex, so that comparisons can
be exact. Headers are listed in wire order.
"""
import argparse
import json
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, TopicPartition


def text(b):
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--expect", type=int, default=0)
    ap.add_argument("topics", nargs="+")
    args = ap.parse_args()

    c = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": "dump-" + uuid.uuid4().hex,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    # Wait (up to --timeout) for the topics to exist: the producer side may still be creating them.
    deadline = time.time() + args.timeout
    while True:
        md = c.list_topics(timeout=10)
        missing = [t for t in args.topics if t not in md.topics or md.topics[t].error is not None]
        if not missing or time.time() > deadline:
            break
        time.sleep(0.2)
    tps = []
    for t in args.topics:
        if t in missing:
            print(f"topic {t} not found", file=sys.stderr)
            continue
        for p in sorted(md.topics[t].partitions):
            tps.append(TopicPartition(t, p, 0))
    c.assign(tps)
    seen = 0
    last = time.time()
    while time.time() - last < args.timeout and (args.expect == 0 or seen < args.expect):
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                print(f"error: {m.error()}", file=sys.stderr)
            continue
        last = time.time()
        seen += 1
        ts_type, ts = m.timestamp()
        print(json.dumps({
            "topic": m.topic(),
            "partition": m.partition(),
            "offset": m.offset(),
            "timestamp": ts,
            "timestamp_type": ts_type,
            "key": text(m.key()),
            "key_hex": None if m.key() is None else m.key().hex(),
            "value": text(m.value()),
            "value_hex": None if m.value() is None else m.value().hex(),
            "headers": [[k, text(v)] for k, v in (m.headers() or [])],
        }, ensure_ascii=False), flush=True)
    c.close()


if __name__ == "__main__":
    main()
