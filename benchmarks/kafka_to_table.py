"""Kafka-to-table benchmark: events/s end to end, AcidSink vs the engine floor.

Starts the embedded broker, produces N JSON events (the sample events of the main job) to a
3-partition topic, then runs the same streaming query twice with ``availableNow`` on local
Spark, each from a fresh checkpoint:
  * floor: ``foreachBatch`` writing the micro-batch as plain ORC (``batch_df.write.orc``);
  * acid:  ``foreachBatch(AcidSink(...))`` into a partitioned Hive ACID table, exactly once.
Target: acid >= 0.8x the floor. Prints events/s of both and the ratio.

Usage: python benchmarks/kafka_to_table.py [--events 1000000] [--partitions 3] [--txns-per-batch 1]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from acidstream.jobs.broker import EmbeddedBroker
from acidstream.jobs.config import KafkaJobConfig
from acidstream.jobs.kafka_job import run_kafka_job, spark_session
from acidstream.jobs.sample_events import produce_sample_events

COLUMNS = "id bigint, user_name string, amount decimal(10,2), event_time timestamp"


def floor_run(spark: Any, bootstrap: str, topic: str, root: Path) -> float:
    from acidstream.sources.kafka import KafkaSource

    spark.dataSource.register(KafkaSource)
    out = str(root / "floor_orc")

    def write(df: Any, batch_id: int) -> None:
        df.write.mode("append").orc(out)

    q = (
        spark.readStream.format("acidkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endOffsetsFrom", "fetch")
        .load()
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", str(root / "floor_ckpt"))
        .trigger(availableNow=True)
    )
    t0 = time.perf_counter()
    q.start().awaitTermination()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument(
        "--txns-per-batch", type=int, default=1, help="txns in each micro-batch's transaction batch"
    )
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="acid_kafka_bench_"))
    try:
        with EmbeddedBroker() as broker:
            topic = "bench"
            broker.create_topic(topic, args.partitions)
            from kafka import KafkaProducer

            t = time.perf_counter()
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
            produce_sample_events(producer, topic, args.events)
            producer.close()
            print(f"[produce] {args.events:,} events in {time.perf_counter() - t:.1f}s", flush=True)
            cfg = KafkaJobConfig.load(
                None,
                overrides={
                    "kafka.topic": topic,
                    "kafka.bootstrap_servers": broker.bootstrap,
                    "kafka.end_offsets_from": "fetch",
                    "table.name": "default.bench",
                    "table.columns": COLUMNS,
                    "table.partitioned_by": "ds string",
                    "warehouse": str(root / "wh"),
                    "checkpoint": str(root / "acid_ckpt"),
                    "sink.sink_id": "bench",
                    "sink.txns_per_batch": args.txns_per_batch,
                },
                env={},
            )
            spark = spark_session(cfg)
            print("[floor] batch_df.write.orc ...", flush=True)
            floor = floor_run(spark, broker.bootstrap, topic, root)
            print(f"[floor] {args.events / floor:,.0f} events/s ({floor:.1f}s)", flush=True)
            print("[acid] AcidSink ...", flush=True)
            res = run_kafka_job(cfg, bootstrap=broker.bootstrap, spark=spark)
            if res.rows != args.events:
                raise SystemExit(f"acid sink wrote {res.rows} rows, expected {args.events}")
            print(
                f"[acid] {args.events / res.seconds:,.0f} events/s ({res.seconds:.1f}s)", flush=True
            )
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratio = floor / res.seconds
    print()
    print(f"txns per micro-batch: {args.txns_per_batch}")
    print(f"{'writer':<36} {'events/s':>12} {'seconds':>8}")
    print(f"{'floor: batch_df.write.orc':<36} {args.events / floor:>12,.0f} {floor:>8.1f}")
    print(
        f"{'acid: AcidSink (exactly once)':<36} {args.events / res.seconds:>12,.0f} {res.seconds:>8.1f}"
    )
    print(
        f"\nratio acid / floor: {ratio:.2f} (target >= 0.8): {'met' if ratio >= 0.8 else 'MISSED'}"
    )
    print(f"python {sys.version.split()[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
