"""Change data capture benchmark (issue 31): a Debezium stream applied to a 10M-row table,
acidstream's upsert job against the Delta Lake way (``foreachBatch`` + delta-rs ``merge``),
on the same Kafka topic in the same run, ``local[2]``.

The table: ``id bigint, v string, x double``, 8 buckets on ``id``, ``--rows`` rows (10M):
acidstream's built as ``benchmarks/mutations.py`` builds its base (one txn, then a major
compaction), deltalake's in one write of the same rows.

The events (not timed): ``--events`` Debezium change events (JSON, schemas disabled:
``before``, ``after``, ``op``, ``ts_ms``, ``source.{ts_ms, lsn}``) over a key space of
``--keys`` keys: 80% of them drawn from the table's ids, 20% new ids. Each event is an
update (70%) or a delete (10%) of a key that exists at that point of the stream, or an
insert (20%) of one that does not (the stream is a consistent history of a source table).
Kafka key = ``{"id": k}`` (so one key's events stay in order in one partition), value =
the envelope; ``source.lsn`` grows with every event, ``source.ts_ms`` is the wall clock
when the event was produced to the embedded broker's topic (``--partitions``).

Timed, ``--repeat`` runs of each side alternating which goes first, each run from the
built tables (restored from a copy, not timed) and a fresh checkpoint, reading the topic
with the project's ``acidkafka`` source (its ``kafka.client`` is ``--client`` on both sides;
``auto``: confluent-kafka when installed), ``maxOffsetsPerTrigger = --batch``,
``availableNow``, ``minPartitions = --min-partitions`` on both sides (default: partitions x
local[2]'s 2 cores, as kafka_to_table.py reads: 3 topic-partitions on 2 cores left a core idle
for a third of each batch's read; ``0``: one task per topic-partition, the setting of the runs
before the ninth session) (``--our-batch`` sets our job's ``maxOffsetsPerTrigger`` alone, a
setting of our side; the Delta way always reads ``--batch``) (before them, not timed,
one query over a small warm-up topic through both sides' code starts Spark's Python
workers and loads both merge engines):

  * ours: ``run_kafka_job`` with ``sink.mode: upsert``, ``sink.format: debezium``,
    ``sink.key: [id]``, ``sink.ordering: source.lsn``, ``compaction: off`` (the Delta way
    runs no OPTIMIZE either) (``--ours job``, the default); or ``--ours engine``: the same ``foreachBatch`` as the Delta way
    below, with ``acidstream.mutation.changes.apply_changes`` in place of delta-rs (the
    merge engines alone, parsing and collapse the same);
  * delta: ``foreachBatch``: Spark parses the Debezium JSON (``from_json``), the batch comes
    to the driver as Arrow, is collapsed per key (last by ``source.lsn``) and merged with
    delta-rs: ``when_matched_delete`` (op ``d``), ``when_matched_update_all``,
    ``when_not_matched_insert_all`` (not ``d``).

Figures: events/s end to end (query start to end, every event read, parsed and committed),
and where each run's time went: the Spark job of each batch (Kafka read, parse, to the
driver), the merge (ours: the sink's ``apply_seconds``), the rest of the batch function, and
outside it (Spark's micro-batch planning, offsets, checkpoint; our job's progress line);
freshness p50/p99: each event's ``source.ts_ms`` to the commit of its batch. The events were
produced before the runs, so each run's clock is shifted to start when the last event was
produced (as if the job had been restarted at that moment after a pause): freshness =
backlog age at the start + the run's time to its commit, the first part the same for both.

After each run: both tables equal (row count + order-independent checksum, DuckDB), else
exit 1. After the last: a full read of our table against a full read of the same rows written to a
fresh table in one txn (no delete deltas), alternately, best of ``--read-repeat``.

Targets: ours >= 2x Delta's events/s (best run of each side); the read >= 0.5x. Exit 1
when one is missed. ``--profile N``: cProfile of our batch N in the last run (driver side).

Usage: python benchmarks/cdc.py [--rows 10000000] [--keys 1000000] [--events 1000000]
           [--batch 100000] [--our-batch N] [--partitions 3] [--min-partitions N]
           [--repeat 2] [--read-repeat 5]
           [--ours job|engine] [--client auto|confluent|kafka-python] [--profile N]
           [--quick] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The shared helpers of the table benchmarks (table build, deltalake, checksums, report
# lines) live in mutations.py, which this file's directory (sys.path[0] when run as a
# script) holds; importing it also drops that directory from sys.path again, so benchmark
# names never shadow packages.
_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))
from mutations import (  # noqa: E402
    SCHEMA,
    Acid,
    Line,
    checksum,
    delta_read,
    log,
    paired,
    restore,
    rows,
    snapshot,
)

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

TOPIC = "cdc"
WARM_TOPIC = "cdc-warm-up"
TABLE = "default.bench"
COLUMNS = "id bigint, v string, x double"
ROW_JSON = "struct<id: bigint, v: string, x: double>"
ENVELOPE = (
    f"before {ROW_JSON}, after {ROW_JSON}, op string, ts_ms bigint, "
    "source struct<ts_ms: bigint, lsn: bigint>"
)
"""The Debezium envelope (schemas disabled) as Spark's ``from_json`` schema."""


# ---------------------------------------------------------------------------- events


SPARK_CORES = 2  # the jobs' master: local[2] (kafka_job's default when run outside spark-submit)


@dataclass(frozen=True, kw_only=True)
class Stream:
    """What was produced: counts per op and the wall clock when the last event was sent."""

    events: int
    updates: int
    inserts: int
    deletes: int
    keys_touched: int
    produced_at: float  # time.time() after the producer's flush
    seconds: float


def change_ops(
    rng: random.Random, table_rows: int, keys: int, events: int
) -> list[tuple[str, int]]:
    """``events`` (op, key) pairs: a consistent history of a source table whose key space is
    ``keys`` ids, 80% of them existing rows of the table (a random sample of
    ``0 .. table_rows - 1``), 20% new ids (``table_rows ..``). An update (70%) or delete
    (10%) takes a random key that exists at that point, an insert (20%) one that does not."""
    new = keys // 5
    old = rng.sample(range(table_rows), keys - new)
    live = list(old)  # keys that exist now: random pick and swap-remove are O(1)
    dead = list(range(table_rows, table_rows + new))  # keys that do not
    out: list[tuple[str, int]] = []
    for _ in range(events):
        r = rng.random()
        if (r < 0.2 and dead) or not live:
            i = rng.randrange(len(dead))
            k = dead[i]
            dead[i] = dead[-1]
            dead.pop()
            live.append(k)
            out.append(("c", k))
        elif r < 0.3:
            i = rng.randrange(len(live))
            k = live[i]
            live[i] = live[-1]
            live.pop()
            dead.append(k)
            out.append(("d", k))
        else:
            out.append(("u", live[rng.randrange(len(live))]))
    return out


def envelope(i: int, op: str, key: int, ts_ms: int) -> bytes:
    """Event ``i`` as Debezium's JSON value (schemas disabled): ``after`` the new row for
    c/u, ``before`` the key alone for d (PostgreSQL's default replica identity)."""
    row = {"id": key, "v": f"{op}{i}-{key}", "x": i / 8.0}
    return json.dumps(
        {"before": {"id": key, "v": None, "x": None} if op == "d" else None,
         "after": None if op == "d" else row,
         "source": {"version": "2.7.0.Final", "connector": "postgresql", "name": "bench",
                    "ts_ms": ts_ms, "db": "shop", "schema": "public", "table": "bench",
                    "lsn": 1_000_000 + 8 * i, "txId": 500 + i},
         "op": op, "ts_ms": ts_ms + 1},
        separators=(",", ":"),
    ).encode()  # fmt: skip


def produce(bootstrap: str, topic: str, ops: list[tuple[str, int]]) -> Stream:
    """Send the events to ``topic`` (keyed by id: one key's events in one partition, in
    order), each stamped with the wall clock. confluent-kafka's producer: kafka-python's
    took many minutes for 1M events on a loaded machine (not timed either way)."""
    from confluent_kafka import Producer

    t0 = time.perf_counter()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 512 * 1024, "acks": 1,
         "log_level": 3}
    )  # fmt: skip
    last = time.monotonic()
    for i, (op, key) in enumerate(ops):
        ts_ms = int(time.time() * 1000)
        value = envelope(i, op, key, ts_ms)
        while True:
            try:
                producer.produce(topic, key=b'{"id":%d}' % key, value=value)
                break
            except BufferError:  # the local queue is full: let it drain
                producer.poll(0.05)
        producer.poll(0)
        if time.monotonic() - last >= 5.0:
            log(f"  produce: {i + 1:,}/{len(ops):,}")
            last = time.monotonic()
    if producer.flush(120):
        raise SystemExit("produce: records still unsent after 120 s")
    count = dict.fromkeys("cud", 0)
    for op, _ in ops:
        count[op] += 1
    return Stream(
        events=len(ops), updates=count["u"], inserts=count["c"], deletes=count["d"],
        keys_touched=len({k for _, k in ops}), produced_at=time.time(),
        seconds=time.perf_counter() - t0,
    )  # fmt: skip


# ------------------------------------------------------------------------- a run


@dataclass
class Run:
    """One system's timed run: seconds end to end, and per committed batch the commit's
    wall clock and its events' source timestamps (ms)."""

    system: str
    seconds: float = 0.0
    started_at: float = 0.0  # time.time() at the query's start
    events: int = 0
    batches: int = 0
    commits: list[tuple[float, np.ndarray]] = field(default_factory=list)
    batch_seconds: list[float] = field(default_factory=list)  # the foreachBatch's time
    merge_seconds: list[float] = field(default_factory=list)  # of which the merge / apply
    spark_seconds: list[float] = field(default_factory=list)  # and the Spark job (read, parse)

    def freshness(self, produced_at: float) -> tuple[float, float]:
        """p50 and p99 seconds from each event's source ts_ms to its commit, the run's clock
        shifted to start when the last event was produced."""
        shift = self.started_at - produced_at
        lat = np.concatenate([c - ts.astype(np.float64) / 1000.0 - shift for c, ts in self.commits])
        p50, p99 = np.percentile(lat, [50, 99])
        return float(p50), float(p99)


def parsed_events(df: Any) -> pa.Table:
    """Driver side: a micro-batch of Kafka records parsed from Debezium JSON by Spark
    (``from_json`` on the executors), brought to the driver as Arrow: ``id, v, x, op,
    lsn, src_ts, partition, offset`` (one row per event; tombstones dropped)."""
    from pyspark.sql import functions as F

    e = F.from_json(F.col("value").cast("string"), ENVELOPE)
    return pa.table(
        df.where(F.col("value").isNotNull())
        .select(e.alias("e"), "partition", "offset")
        .select(
            F.coalesce(F.col("e.after.id"), F.col("e.before.id")).alias("id"),
            F.col("e.after.v").alias("v"),
            F.col("e.after.x").alias("x"),
            F.col("e.op").alias("op"),
            F.col("e.source.lsn").alias("lsn"),
            F.col("e.source.ts_ms").alias("src_ts"),
            "partition",
            "offset",
        )
        .toArrow()
    )


def last_per_key(events: pa.Table) -> pa.Table:
    """The Delta way's collapse (driver): per id, the event with the greatest lsn."""
    order = pc.sort_indices(events, [("id", "ascending"), ("lsn", "ascending")])
    t = events.take(order)
    ids = t.column("id").to_numpy()
    last = np.append(ids[1:] != ids[:-1], True) if len(ids) else np.zeros(0, bool)
    return t.filter(pa.array(last))


def delta_apply(path: Path, batch: pa.Table) -> None:
    """One delta-rs MERGE of a collapsed batch (driver)."""
    from deltalake import DeltaTable

    src = batch.select(["id", "v", "x", "op"])
    (
        DeltaTable(str(path))
        .merge(src, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete(predicate="s.op = 'd'")
        .when_matched_update_all()
        .when_not_matched_insert_all(predicate="s.op <> 'd'")
        .execute()
    )


def engine_apply(store: Any, table: str) -> Callable[[int], Callable[[pa.Table], Any]]:
    """acidstream's engine on a micro-batch's events (driver): ``apply_changes`` collapses
    per key by (lsn, partition, offset) and merges in one txn, recording the batch id with
    the commit (what the upsert sink records)."""
    from acidstream.acid.table_name import TableName
    from acidstream.mutation.changes import (
        DELETE_COLUMN,
        OFFSET_COLUMN,
        PARTITION_COLUMN,
        ChangeOptions,
        apply_changes,
    )

    options = ChangeOptions(key=("id",), ordering="lsn")
    name = TableName.parse(table)

    def apply(batch_id: int, events: pa.Table) -> Any:
        ev = pa.table(
            {
                "id": events.column("id"),
                "v": events.column("v"),
                "x": events.column("x"),
                "lsn": events.column("lsn"),
                DELETE_COLUMN: pc.equal(events.column("op"), "d"),
                PARTITION_COLUMN: events.column("partition"),
                OFFSET_COLUMN: events.column("offset"),
            }
        )
        return apply_changes(
            store, name, ev, options,
            commit_param=lambda _r: ("_meta.bench.cdc", json.dumps({"batch_id": batch_id})),
        )  # fmt: skip

    return lambda batch_id: lambda events: apply(batch_id, events)


def foreach_batch_run(
    spark: Any, bootstrap: str, topic: str, checkpoint: Path, system: str, batch: int,
    make_apply: Callable[[int], Callable[[pa.Table], Any]], collapse: bool,
    profile: int | None = None, client: str = "auto", min_partitions: int = 0,
) -> Run:  # fmt: skip
    """A ``foreachBatch`` query over the topic from a fresh checkpoint: each micro-batch
    parsed by Spark, brought to the driver, (collapsed and) applied by ``make_apply``'s
    function. Returns the run's figures."""
    run = Run(system)

    def each(df: Any, batch_id: int) -> None:
        if batch_id == profile:
            profiled(lambda: one(df, batch_id), f"{system}'s batch {batch_id}")
        else:
            one(df, batch_id)

    def one(df: Any, batch_id: int) -> None:
        t0 = time.perf_counter()
        events = parsed_events(df)
        if not events.num_rows:
            return
        apply = make_apply(batch_id)
        t1 = time.perf_counter()
        apply(last_per_key(events) if collapse else events)
        run.commits.append((time.time(), events.column("src_ts").to_numpy()))
        t2 = time.perf_counter()
        run.events += events.num_rows
        run.batches += 1
        run.batch_seconds.append(t2 - t0)
        run.merge_seconds.append(t2 - t1)
        run.spark_seconds.append(t1 - t0)
        log(f"  {system} batch {batch_id}: {events.num_rows:,} events, {t2 - t0:.2f}s "
            f"(merge {t2 - t1:.2f}s)")  # fmt: skip

    q = (
        spark.readStream.format("acidkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endOffsetsFrom", "fetch")
        .option("maxOffsetsPerTrigger", str(batch))
        .option("kafka.client", client)
        .options(**({"minPartitions": str(min_partitions)} if min_partitions else {}))
        .load()
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    run.started_at = time.time()
    t0 = time.perf_counter()
    q.start().awaitTermination()
    run.seconds = time.perf_counter() - t0
    return run


CONNECT_BACK = "Python worker failed to connect back"
# What a Spark query dies of when its Python workers cannot start or connect in time (a
# fixed 10 s in PythonWorkerFactory; at load average 27 importing pyspark took 7.6 s).
SPARK_OVERLOAD = (CONNECT_BACK, "CANNOT_OPEN_SOCKET")


def retried(
    what: str, fn: Callable[[int], Run], reset: Callable[[], None], attempts: int = 8
) -> Run:
    """``fn(attempt)``, again from scratch (``reset()``, then a fresh checkpoint named by the
    attempt) when Spark could not start a Python worker in time: on a loaded machine a
    query's planner or source runner worker sometimes fails to connect back within Spark's
    fixed timeout. Other errors propagate."""
    for attempt in range(attempts):
        try:
            return fn(attempt)
        except Exception as e:
            if not any(m in str(e) for m in SPARK_OVERLOAD) or attempt == attempts - 1:
                raise
            log(f"  {what}: attempt {attempt + 1}: {str(e)[:160]}; again from the built table")
            reset()
    raise AssertionError("unreachable")


def profiled(fn: Callable[[], None], what: str) -> None:
    """Run ``fn`` under cProfile (driver side: the executors' Python workers are other
    processes; the driver's wait for their Spark job shows as py4j socket reads) and print
    the functions with the most cumulative time."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    try:
        fn()
    finally:
        prof.disable()
        print(f"---- profile of {what} (driver, by cumulative time)", flush=True)
        pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(30)


class _Recording:
    """A sink that keeps a copy of each committed batch's stats (driver side), and profiles
    batch ``profile`` (when not None)."""

    def __init__(self, sink: Any, stats: list[dict[str, Any]], profile: int | None) -> None:
        self.sink, self.stats, self.profile = sink, stats, profile

    def __call__(self, df: Any, batch_id: int) -> None:
        if batch_id == self.profile:
            profiled(lambda: self.sink(df, batch_id), f"the upsert sink's batch {batch_id}")
        else:
            self.sink(df, batch_id)
        if self.sink.last_batch_stats.get("batch_id") == batch_id:
            self.stats.append(dict(self.sink.last_batch_stats))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)


def job_run(
    spark: Any, bootstrap: str, acid: Acid, checkpoint: Path, batch: int, *,
    topic: str = TOPIC, table: str = TABLE, profile: int | None = None, client: str = "auto",
    min_partitions: int = 0,
) -> Run:  # fmt: skip
    """Ours: the Kafka job in upsert mode (``run_kafka_job``), the compactor off (the Delta
    way runs none either). Per-batch commits and event times come from the sink's stats:
    its ``event_times_ms`` hold one time per key applied (the last event of each key in the
    batch), where the ``foreachBatch`` runs keep every event's; with 100,000-event batches
    over a 1M key space few keys repeat in a batch, so the two nearly agree."""
    from acidstream.jobs import kafka_job
    from acidstream.jobs.config import KafkaJobConfig

    cfg = KafkaJobConfig.load(
        None,
        overrides={
            "kafka.topic": topic, "kafka.bootstrap_servers": bootstrap,
            "kafka.end_offsets_from": "fetch", "kafka.max_offsets_per_trigger": batch,
            "kafka.client": client, "kafka.min_partitions": min_partitions or None,
            "table.name": table, "table.columns": COLUMNS, "metastore": acid.url,
            "warehouse": acid.wh, "checkpoint": str(checkpoint), "compaction": "off",
            "sink.sink_id": "cdc", "sink.mode": "upsert", "sink.format": "debezium",
            "sink.key": ["id"], "sink.ordering": "source.lsn",
        },
        env={},
    )  # fmt: skip
    run = Run("acidstream")
    stats: list[dict[str, Any]] = []
    make_sink = kafka_job.make_sink

    def recording_sink(config: KafkaJobConfig, *, lineage: str | None) -> Any:
        # run_kafka_job has no per-batch callback: keep each batch's stats (commit time,
        # event times) as the job reads them from its sink.
        return _Recording(make_sink(config, lineage=lineage), stats, profile)

    kafka_job.make_sink = recording_sink
    run.started_at = time.time()
    t0 = time.perf_counter()
    try:
        res = kafka_job.run_kafka_job(cfg, bootstrap=bootstrap, spark=spark)
    finally:
        kafka_job.make_sink = make_sink
    run.seconds = time.perf_counter() - t0
    for st in stats:
        run.commits.append((float(st["committed_at"]), np.asarray(st["event_times_ms"])))
        run.batch_seconds.append(float(st["seconds"]))
        if "apply_seconds" in st:  # the sink's split of its batch (Spark job, apply_changes)
            run.merge_seconds.append(float(st["apply_seconds"]))
            run.spark_seconds.append(float(st["spark_seconds"]))
        run.events += int(st["events"])
    run.batches = res.batches_committed
    return run


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="rows in the table")
    ap.add_argument("--keys", type=int, default=1_000_000, help="key space of the events")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000, help="maxOffsetsPerTrigger (both)")
    ap.add_argument(
        "--our-batch", type=int, default=None, metavar="N",
        help="our job's maxOffsetsPerTrigger only (default: --batch); the Delta way keeps --batch",
    )  # fmt: skip
    ap.add_argument("--partitions", type=int, default=3, help="of the topic")
    ap.add_argument(
        "--min-partitions", type=int, default=None, metavar="N",
        help="the source's minPartitions, both sides (default: partitions x local[2]'s cores; 0: one "
             "task per topic-partition, as before the ninth session)",
    )  # fmt: skip
    ap.add_argument("--repeat", type=int, default=2, help="runs of each side, alternating")
    ap.add_argument("--read-repeat", type=int, default=5, help="best of N for the reads")
    ap.add_argument("--ours", choices=("job", "engine"), default="job")
    ap.add_argument(
        "--profile", type=int, metavar="BATCH", help="cProfile our batch BATCH in the last run"
    )
    ap.add_argument(
        "--quick", action="store_true", help="1M rows, 100k keys and events: a smoke run"
    )
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    ap.add_argument(
        "--client", choices=("auto", "confluent", "kafka-python"), default="auto",
        help="the acidkafka source's kafka.client, both sides (auto: confluent-kafka if installed)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.min_partitions is None:
        # Every core gets as many ranges to read (kafka_to_table.py does the same): 3
        # topic-partitions on 2 cores leave one core idle for a third of each batch.
        args.min_partitions = args.partitions * SPARK_CORES
    if args.quick:
        args.rows, args.keys, args.events, args.batch = 1_000_000, 100_000, 100_000, 20_000
    tmp = Path(args.dir or tempfile.mkdtemp(prefix="acid-cdc-bench-"))
    try:
        return bench(args, tmp)
    finally:
        if not args.dir:
            shutil.rmtree(tmp, ignore_errors=True)


def bench(args: argparse.Namespace, tmp: Path) -> int:
    from acidstream.sources.kafka_options import resolve_client

    """Build, produce, run both sides ``--repeat`` times (alternating which goes first,
    each from the built tables), check, read, report. Returns the exit status."""
    from deltalake import write_deltalake

    from acidstream.jobs.broker import EmbeddedBroker
    from acidstream.jobs.config import KafkaJobConfig
    from acidstream.jobs.kafka_job import spark_session
    from acidstream.sources.kafka import KafkaSource

    status = 0
    acid, dpath = Acid(tmp / "acid"), tmp / "delta"
    log(f"build: {args.rows:,} rows, acidstream (one txn + major compaction) ...")
    t0 = time.perf_counter()
    acid.build(rows(0, args.rows), [])
    store = acid.store()
    try:
        acid.create(store, "warm")
    finally:
        store.close()
    log(f"build: acidstream {time.perf_counter() - t0:.1f}s; deltalake ...")
    t0 = time.perf_counter()
    write_deltalake(str(dpath), rows(0, args.rows))
    write_deltalake(str(tmp / "delta-warm"), rows(0, 1000))
    log(f"build: deltalake {time.perf_counter() - t0:.1f}s")
    acid_copy, delta_copy = tmp / "acid.copy", tmp / "delta.copy"
    snapshot(acid.root, acid_copy)
    snapshot(dpath, delta_copy)

    log(f"events: {args.events:,} over {args.keys:,} keys ...")
    ops = change_ops(random.Random(31), args.rows, args.keys, args.events)
    runs: list[tuple[Run, Run]] = []
    with EmbeddedBroker() as broker:
        broker.create_topic(TOPIC, args.partitions)
        broker.create_topic(WARM_TOPIC, args.partitions)
        produce(broker.bootstrap, WARM_TOPIC, ops[: args.batch])
        stream = produce(broker.bootstrap, TOPIC, ops)
        del ops
        log(f"produced {stream.events:,} events in {stream.seconds:.1f}s: "
            f"{stream.updates:,} u, {stream.inserts:,} c, {stream.deletes:,} d, "
            f"{stream.keys_touched:,} keys")  # fmt: skip
        cfg = KafkaJobConfig.load(
            None,
            overrides={"table.columns": COLUMNS, "warehouse": acid.wh,
                       "spark.conf.spark.ui.showConsoleProgress": "false"},
            env={},
        )  # fmt: skip
        spark = spark_session(cfg)
        spark.dataSource.register(KafkaSource)
        bootstrap = broker.bootstrap

        def with_store(fn: Callable[[Any], Run]) -> Run:
            store = acid.store()
            try:
                return fn(store)
            finally:
                store.close()

        # Not timed: the first query of a session starts Spark's Python workers and the
        # source's clients, the first merges load delta-rs's runtime and acidstream's SQL
        # compiler; one query over a small topic does all of it for both sides.
        log("warm-up ...")

        def warm(store: Any, attempt: int) -> Run:
            ours = engine_apply(store, "default.warm")

            def both(b: int) -> Callable[[pa.Table], Any]:
                def apply(t: pa.Table) -> None:
                    ours(b)(t)
                    delta_apply(tmp / "delta-warm", last_per_key(t))

                return apply

            return foreach_batch_run(spark, bootstrap, WARM_TOPIC, tmp / f"ckpt-warm-{attempt}",
                                     "warm-up", args.batch, both, collapse=False,
                                     client=args.client, min_partitions=args.min_partitions)  # fmt: skip

        # (The warm-up's tables are not compared: a retry may apply its events twice.)
        retried("warm-up", lambda a: with_store(lambda st: warm(st, a)), lambda: None)
        if args.ours == "job":  # the job's own code path: its sink's parse tasks
            retried(
                "warm-up job",
                lambda a: job_run(spark, bootstrap, acid, tmp / f"ckpt-warm-job-{a}", args.batch,
                                  topic=WARM_TOPIC, table="default.warm", client=args.client,
                                  min_partitions=args.min_partitions),
                lambda: None,
            )  # fmt: skip

        def profile(rep: int) -> int | None:
            return args.profile if rep == args.repeat - 1 else None

        def run_ours(rep: int) -> Run:
            def once(attempt: int) -> Run:
                if args.ours == "job":
                    return job_run(
                        spark,
                        bootstrap,
                        acid,
                        tmp / f"ckpt-job-{rep}-{attempt}",
                        args.our_batch or args.batch,
                        profile=profile(rep),
                        client=args.client,
                        min_partitions=args.min_partitions,
                    )
                return with_store(
                    lambda store: foreach_batch_run(
                        spark,
                        bootstrap,
                        TOPIC,
                        tmp / f"ckpt-ours-{rep}-{attempt}",
                        "acidstream",
                        args.batch,
                        engine_apply(store, TABLE),
                        collapse=False,
                        profile=profile(rep),
                        client=args.client,
                        min_partitions=args.min_partitions,
                    )
                )

            return retried("acidstream", once, lambda: restore(acid_copy, acid.root))  # fmt: skip

        def run_delta(rep: int) -> Run:
            def once(attempt: int) -> Run:
                return foreach_batch_run(
                    spark,
                    bootstrap,
                    TOPIC,
                    tmp / f"ckpt-delta-{rep}-{attempt}",
                    "delta",
                    args.batch,
                    lambda _b: lambda t: delta_apply(dpath, t),
                    collapse=True,
                    client=args.client,
                    min_partitions=args.min_partitions,
                )

            return retried("delta", once, lambda: restore(delta_copy, dpath))  # fmt: skip

        for rep in range(args.repeat):
            restore(acid_copy, acid.root)
            restore(delta_copy, dpath)
            first, second = (run_ours, run_delta) if rep % 2 == 0 else (run_delta, run_ours)
            log(f"run {rep + 1} of {args.repeat}: {first.__name__[4:]} first ...")
            r1 = first(rep)
            r2 = second(rep)
            ours, delta = (r1, r2) if rep % 2 == 0 else (r2, r1)
            for r in (ours, delta):
                log(f"  {r.system}: {r.events:,} events in {r.seconds:.1f}s")
                if r.events != stream.events:
                    log(f"  {r.system} applied {r.events:,} events, {stream.events:,} produced")
                    status = 1
            ca, cd = checksum(acid.read()), checksum(delta_read(dpath))
            log(f"  after: acidstream {ca[0]:,} rows, deltalake {cd[0]:,} rows, checksums "
                f"{'equal' if ca == cd else 'DIFFERENT'}")  # fmt: skip
            if ca != cd:
                status = 1
            runs.append((ours, delta))
        spark.stop()

    # The read: our table after the last run against the same rows in one txn.
    a = acid.read()
    store = acid.store()
    try:
        acid.create(store, "ref")
        acid.insert(store, "ref", [a.select(SCHEMA.names)])
    finally:
        store.close()
    n_rows = a.num_rows
    del a
    s_ref, s_ours = paired(
        lambda: acid.read("default.ref"), lambda: acid.read(), lambda: None, lambda: None,
        args.read_repeat,
    )  # fmt: skip
    shutil.rmtree(acid_copy, ignore_errors=True)
    shutil.rmtree(delta_copy, ignore_errors=True)

    print()
    print(f"table: {args.rows:,} rows (id bigint, v string, x double), 8 buckets on id; "
          f"{stream.events:,} Debezium events ({stream.updates:,} u, {stream.inserts:,} c, "
          f"{stream.deletes:,} d) over {stream.keys_touched:,} of {args.keys:,} keys, "
          f"{args.partitions} partitions, minPartitions {args.min_partitions or '-'} (both), "
          f"maxOffsetsPerTrigger {args.batch:,}"
          f"{f' (our job {args.our_batch:,})' if args.our_batch else ''}, local[2], "
          f"acidkafka kafka.client {resolve_client(args.client)} (both sides); "
          f"{args.repeat} runs of each side, alternating")  # fmt: skip
    print()
    print(f"{'run':<4} {'system':<44} {'events/s':>10} {'seconds':>8} {'batches':>7} "
          f"{'merge s':>8} {'p50 s':>7} {'p99 s':>7}")  # fmt: skip
    label = {"job": "acidstream: run_kafka_job, sink.mode upsert",
             "engine": "acidstream: foreachBatch + apply_changes"}[args.ours]  # fmt: skip
    for rep, pair in enumerate(runs):
        for name, r in zip((label, "delta: foreachBatch + delta-rs merge"), pair, strict=True):
            p50, p99 = r.freshness(stream.produced_at)
            merge = f"{sum(r.merge_seconds):8.1f}" if r.merge_seconds else f"{'-':>8}"
            print(f"{rep + 1:<4} {name:<44} {r.events / r.seconds:>10,.0f} {r.seconds:>8.1f} "
                  f"{r.batches:>7} {merge} {p50:>7.1f} {p99:>7.1f}")  # fmt: skip
    print("where each run's time went (sums over its batches): the Spark job (Kafka read, "
          "parse, to the driver), the merge (ours: apply_changes, its key lookup, files and "
          "commit; Delta's: its collapse and delta-rs merge), the rest of the batch function "
          "(ours: the collapse of the tasks' events, the sink's bookkeeping), and outside it "
          "(the query's start, Spark's micro-batch planning, offsets and checkpoint; our "
          "job's progress line and lag lookup)")  # fmt: skip
    for rep, pair in enumerate(runs):
        for r in pair:
            spark_s, merge_s = sum(r.spark_seconds), sum(r.merge_seconds)
            fn_s = sum(r.batch_seconds)
            print(f"  run {rep + 1} {r.system:<10} {r.seconds:6.1f}s = Spark job {spark_s:5.1f}s "
                  f"+ merge {merge_s:5.1f}s + rest {fn_s - spark_s - merge_s:4.1f}s "
                  f"+ outside the batch function {r.seconds - fn_s:4.1f}s")  # fmt: skip
    print(f"read: our table {s_ours:.2f}s, the same {n_rows:,} rows in one txn {s_ref:.2f}s "
          f"(best of {args.read_repeat}, alternating)")  # fmt: skip
    print()
    s_ours_best = min(o.seconds for o, _ in runs)
    s_delta_best = min(d.seconds for _, d in runs)
    lines = [
        Line("events/s vs Delta (best runs)", f"{s_delta_best:.1f}s / {s_ours_best:.1f}s",
             s_delta_best / s_ours_best, 2.0),
        Line("read vs same rows in one txn", f"{s_ref:.2f}s / {s_ours:.2f}s", s_ref / s_ours, 0.5),
    ]  # fmt: skip
    for line in lines:
        print(line.text())
        if not line.met:
            status = 1
    if status:
        print("FAILED: a target missed, an event lost or a checksum differs", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
