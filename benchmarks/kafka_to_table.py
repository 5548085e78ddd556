"""Kafka-to-table benchmark: events/s end to end, AcidSink vs the engine floor, with each
Kafka client of the ``acidkafka`` source (``kafka.client``), in one run.

Starts the embedded broker, produces N JSON events (the sample events of the main job) to a
3-partition topic, then, for each client (``--clients``, default kafka-python then
confluent), runs the same streaming query twice with ``availableNow`` on local Spark, each
from a fresh checkpoint:
  * floor: ``foreachBatch`` writing the micro-batch as plain ORC (``batch_df.write.orc``);
  * acid:  the Kafka job (``run_kafka_job``: ``foreachBatch(AcidSink(...))``) into a
    partitioned Hive ACID table, exactly once.
Not timed, first: one floor query per client over a small warm-up topic (the first query
of a session starts Spark's Python workers; the first read, each client's imports).
``--repeat R`` (default 2) runs R rounds, the clients' order reversed every other round,
and keeps each client's best floor and best job: in one-round runs the client measured
second had the faster job whichever it was (docs/benchmarks.md, fifth session).
Floor and job read with the same source options, ``minPartitions`` included
(``--min-partitions``, default partitions x cores, so that every core has as many ranges
to read: 3 topic-partitions on 2 cores left one core idle for the last third of the batch).
Targets: acid >= 0.8x its floor with either client; the job with confluent-kafka >= 1.6x
the job's events/s with kafka-python. Exit 1 when one is missed.

Usage: python benchmarks/kafka_to_table.py [--events 1000000] [--partitions 3]
           [--txns-per-batch 1] [--clients kafka-python,confluent] [--repeat 2]
           [--min-partitions N]
"""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from acidstream.jobs.broker import EmbeddedBroker
from acidstream.jobs.config import KafkaJobConfig
from acidstream.jobs.kafka_job import run_kafka_job, spark_session
from acidstream.jobs.sample_events import produce_sample_events

COLUMNS = "id bigint, user_name string, amount decimal(10,2), event_time timestamp"


CLIENTS = ("kafka-python", "confluent")
SPEEDUP_TARGET = 1.6  # confluent's job events/s over kafka-python's
FLOOR_TARGET = 0.8  # the job's events/s over its floor's, with either client


def floor_run(
    spark: Any,
    bootstrap: str,
    topic: str,
    root: Path,
    client: str,
    attempt: int = 0,
    min_partitions: int = 0,
) -> float:
    """Seconds of the floor query: the source with ``client`` (and the job's
    ``minPartitions``) and ``batch_df.write.orc``."""
    from acidstream.sources.kafka import KafkaSource

    spark.dataSource.register(KafkaSource)
    name = f"{topic}_{client}_{attempt}"
    out = str(root / f"floor_orc_{name}")

    def write(df: Any, batch_id: int) -> None:
        df.write.mode("append").orc(out)

    reader = (
        spark.readStream.format("acidkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endOffsetsFrom", "fetch")
        .option("kafka.client", client)
    )
    if min_partitions:
        reader = reader.option("minPartitions", str(min_partitions))
    q = (
        reader.load()
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", str(root / f"floor_ckpt_{name}"))
        .trigger(availableNow=True)
    )
    t0 = time.perf_counter()
    q.start().awaitTermination()
    return time.perf_counter() - t0


T = TypeVar("T")
CONNECT_BACK = "Python worker failed to connect back"
# What a Spark query dies of when its Python workers cannot start or connect in time (a
# fixed 10 s in PythonWorkerFactory; at load average 27 importing pyspark took 7.6 s).
SPARK_OVERLOAD = (CONNECT_BACK, "CANNOT_OPEN_SOCKET")


def retried(what: str, fn: Callable[[int], T], attempts: int = 8) -> T:
    """``fn(attempt)``, again from scratch (the attempt number names fresh checkpoints and
    tables) when Spark could not start a Python worker in time: on a loaded machine a
    query's planner or source runner worker sometimes fails to connect back within
    Spark's fixed timeout, before the query reads anything. Other errors propagate."""
    for attempt in range(attempts):
        try:
            return fn(attempt)
        except Exception as e:
            if not any(m in str(e) for m in SPARK_OVERLOAD) or attempt == attempts - 1:
                raise
            print(f"[{what}] attempt {attempt + 1}: {str(e)[:160]}; again", flush=True)
    raise AssertionError("unreachable")


class _FastProducer:
    """confluent-kafka's producer behind kafka-python's ``send``, as ``produce_sample_events``
    calls it: the benchmark's input is produced in C (kafka-python's producer in Python
    took minutes for 1M events on a loaded machine). Not timed."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self._p: Any = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})

    def send(self, topic: str, value: bytes) -> None:
        while True:
            try:
                self._p.produce(topic, value=value)
                break
            except BufferError:  # the local queue is full: let it drain
                self._p.poll(0.05)
        self._p.poll(0)

    def flush(self) -> None:
        if self._p.flush(60):
            raise SystemExit("produce: records still unsent after 60 s")

    def close(self) -> None:
        self.flush()
        self._p = None  # destroyed now, not at exit after the broker has stopped


def job_config(
    bootstrap: str,
    topic: str,
    root: Path,
    client: str,
    txns: int,
    attempt: int = 0,
    min_partitions: int = 0,
) -> KafkaJobConfig:
    """The Kafka job reading ``topic`` with ``client`` into a table of its own."""
    table = f"bench_{client.replace('-', '_')}_{attempt}"
    return KafkaJobConfig.load(
        None,
        overrides={
            "kafka.topic": topic,
            "kafka.bootstrap_servers": bootstrap,
            "kafka.end_offsets_from": "fetch",
            "kafka.client": client,
            "table.name": f"default.{table}",
            "table.columns": COLUMNS,
            "table.partitioned_by": "ds string",
            "warehouse": str(root / "wh"),
            "checkpoint": str(root / f"ckpt_{table}"),
            "sink.sink_id": table,
            "sink.txns_per_batch": txns,
            "kafka.min_partitions": min_partitions or None,
        },
        env={},
    )


def _measure(
    spark: Any,
    bootstrap: str,
    topic: str,
    root: Path,
    client: str,
    args: Any,
    rnd: int,
    floor: dict[str, float],
    acid: dict[str, float],
) -> None:
    """One round's floor and job with ``client``; keeps the client's best of each (fresh
    checkpoints and tables per round: names carry ``100 * rnd + attempt``)."""
    print(f"[floor] {client} (round {rnd + 1}): batch_df.write.orc ...", flush=True)
    secs = retried(
        "floor",
        lambda attempt: floor_run(
            spark, bootstrap, topic, root, client, 100 * rnd + attempt, args.min_partitions
        ),
    )
    floor[client] = min(secs, floor.get(client, secs))
    print(f"[floor] {client}: {args.events / secs:,.0f} events/s", flush=True)
    print(f"[acid] {client} (round {rnd + 1}): the Kafka job (AcidSink) ...", flush=True)

    def job(attempt: int) -> Any:
        cfg = job_config(
            bootstrap, topic, root, client, args.txns_per_batch, 100 * rnd + attempt,
            args.min_partitions,
        )  # fmt: skip
        return run_kafka_job(cfg, bootstrap=bootstrap, spark=spark)

    res = retried("acid", job)
    if res.rows != args.events:
        raise SystemExit(f"acid sink wrote {res.rows} rows, expected {args.events}")
    acid[client] = min(res.seconds, acid.get(client, res.seconds))
    print(f"[acid] {client}: {args.events / res.seconds:,.0f} events/s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument(
        "--txns-per-batch", type=int, default=1, help="txns in each micro-batch's transaction batch"
    )
    ap.add_argument(
        "--clients",
        default=",".join(CLIENTS),
        help="kafka.client values to run, in this order (comma-separated)",
    )
    ap.add_argument(
        "--min-partitions",
        type=int,
        default=-1,
        help="the source's minPartitions, for the floor and the job alike (0: one task per "
        "topic-partition; default: partitions x the session's cores, each topic-partition "
        "read in one range per core)",
    )
    ap.add_argument(
        "--repeat", type=int, default=2, help="rounds, the clients' order reversed every other one"
    )
    args = ap.parse_args()
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    root = Path(tempfile.mkdtemp(prefix="acid_kafka_bench_"))
    floor: dict[str, float] = {}
    acid: dict[str, float] = {}
    try:
        with EmbeddedBroker() as broker:
            topic = "bench"
            broker.create_topic(topic, args.partitions)
            broker.create_topic("warmup", args.partitions)
            t = time.perf_counter()
            producer = _FastProducer(broker.bootstrap)
            produce_sample_events(producer, "warmup", 10_000)
            produce_sample_events(producer, topic, args.events)
            producer.close()
            print(f"[produce] {args.events:,} events in {time.perf_counter() - t:.1f}s", flush=True)
            spark = spark_session(job_config(broker.bootstrap, topic, root, clients[0], 1))
            if args.min_partitions < 0:
                args.min_partitions = args.partitions * spark.sparkContext.defaultParallelism
            for client in clients:
                took = retried(
                    "warm-up",
                    functools.partial(
                        floor_run,
                        spark,
                        broker.bootstrap,
                        "warmup",
                        root,
                        client,
                        min_partitions=args.min_partitions,
                    ),
                )
                print(f"[warm-up] {client}: {took:.1f}s (not timed)", flush=True)
            for rnd in range(max(1, args.repeat)):
                order = clients if rnd % 2 == 0 else clients[::-1]
                for client in order:
                    _measure(spark, broker.bootstrap, topic, root, client, args, rnd, floor, acid)
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    print(f"events: {args.events:,}, partitions: {args.partitions}, minPartitions: "
          f"{args.min_partitions}, txns per micro-batch: {args.txns_per_batch}, "
          f"best of {max(1, args.repeat)} rounds")  # fmt: skip
    print(f"{'client':<14} {'floor ev/s':>11} {'job ev/s':>10} {'job/floor':>9}")
    ok = True
    for client in clients:
        ratio = floor[client] / acid[client]
        met = ratio >= FLOOR_TARGET
        ok &= met
        print(
            f"{client:<14} {args.events / floor[client]:>11,.0f} "
            f"{args.events / acid[client]:>10,.0f} {ratio:>9.2f}  "
            f"(>= {FLOOR_TARGET}: {'met' if met else 'MISSED'})"
        )
    if {"confluent", "kafka-python"} <= set(clients):
        speedup = acid["kafka-python"] / acid["confluent"]
        floor_speedup = floor["kafka-python"] / floor["confluent"]
        met = speedup >= SPEEDUP_TARGET
        ok &= met
        print(
            f"\njob events/s, confluent / kafka-python: {speedup:.2f} (target >= "
            f"{SPEEDUP_TARGET}: {'met' if met else 'MISSED'}); floors: {floor_speedup:.2f}"
        )
    print(f"python {sys.version.split()[0]}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
