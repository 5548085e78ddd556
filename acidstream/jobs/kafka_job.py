"""The Kafka-to-table job: Spark Structured Streaming from Kafka into a Hive ACID table.

Driver side only: builds (or takes) the SparkSession, makes sure the table exists,
reads Kafka with acidstream's Python Kafka source (``acidkafka``; Spark's built-in
``kafka`` format works the same where the JVM connector exists), writes with the sink
of ``sink.mode`` (``append``: ``AcidSink``; ``upsert``: ``UpsertSink``, which applies
change events to a keyed table) and runs with an ``availableNow`` or processing-time
trigger. Each committed batch prints a progress line and feeds the job's metrics
(``acidstream.jobs.metrics``; served at ``job.metrics_port``). With the embedded
defaults it also starts a local broker (see ``examples/kafka_to_table.py``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from acidstream.acid.errors import ConfigError, TableNotFoundError
from acidstream.acid.schema import TableSchema
from acidstream.jobs.config import KafkaJobConfig
from acidstream.jobs.errors import JobFailedError
from acidstream.jobs.metrics import (
    BatchSummary,
    JobMetrics,
    LagProbe,
    MetricsServer,
    progress_line,
)
from acidstream.sinks.foreach_batch import AcidSink, committed_offsets
from acidstream.txn.catalog import TableDef
from acidstream.txn.config import StoreConfig
from acidstream.txn.namespaces import bind_write_name

__all__ = [
    "JobResult",
    "ensure_table",
    "job_failure_message",
    "make_sink",
    "run_kafka_job",
    "spark_session",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobResult:
    """What one run of the job did (``rows``: over the batches this run committed, the
    rows written in append mode, the Kafka records read in upsert mode)."""

    batches_committed: int
    batches_skipped: int
    rows: int
    seconds: float
    started_from: str


DEFAULT_SPARK_MASTER = "local[2]"
"""The master of a job run without spark-submit and without ``spark: master:``."""


def spark_session(config: KafkaJobConfig) -> Any:
    """A SparkSession for the job (driver). Python workers use this interpreter.

    The master is the YAML's ``spark: master:`` when given; otherwise the one spark-submit
    set (``--master``), and ``local[2]`` when the job runs without spark-submit."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = SparkSession.builder
    master = config.spark_master
    # spark-submit starts the driver's JVM itself and hands this process its gateway port;
    # its --master (a default of its own included) is then already set, and a builder's
    # .master() would replace it: only a run outside spark-submit gets the local default.
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = DEFAULT_SPARK_MASTER
    if master is not None:
        b = b.master(master)
    b = (
        b.appName(f"acidstream-{config.sink.sink_id}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.speculation", "false")
    )
    for k, v in config.spark_conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def ensure_table(config: KafkaJobConfig) -> TableDef:
    """The job's table, created from the config when missing and allowed."""
    cfg = StoreConfig.resolve(
        metastore=config.metastore,
        warehouse=config.warehouse,
        storage_options=config.storage_options,
    )
    store = cfg.open()
    try:
        tn = bind_write_name(config.table.name, namespace=config.table.namespace)
        db, name = tn.db, tn.table
        try:
            return store.get_table(db, name)
        except TableNotFoundError:
            if not config.table.create_if_missing:
                raise
        cols = TableSchema.parse(config.table.columns)
        parts = (
            TableSchema.parse(config.table.partitioned_by).columns
            if config.table.partitioned_by
            else ()
        )
        bucket_cols: tuple[str, ...] = ()
        num_buckets = -1
        if config.table.buckets:
            col, _, n = config.table.buckets.partition(":")
            if not n.isdigit():
                raise ConfigError(
                    f"table.buckets must be 'column:count', got {config.table.buckets!r}"
                )
            bucket_cols, num_buckets = (col.strip().lower(),), int(n)
        if db != "default":
            try:
                store.get_database(db)
            except TableNotFoundError:
                store.create_database(db)
        return store.create_table(
            TableDef(
                db=db,
                name=name,
                columns=tuple((n, str(t)) for n, t in cols.columns),
                partition_keys=tuple((n, str(t)) for n, t in parts),
                bucket_cols=bucket_cols,
                num_buckets=num_buckets,
                parameters={"transactional": "true", **_key_parameters(config)},
            ),
            if_not_exists=True,
        )
    finally:
        store.close()


def _key_parameters(config: KafkaJobConfig) -> dict[str, str]:
    """The table key an upsert job's new table gets (``acidstream.key``: the sink's key
    columns), so later writers (``StreamingConnection.upsert``, the HTTP server's upsert
    mode) find it; an append job's table has none."""
    key = getattr(config.sink, "key", None)
    if _mode(config) != "upsert" or not key:
        return {}
    return {"acidstream.key": ",".join(key)}


def _mode(config: KafkaJobConfig) -> str:
    """``sink.mode``: ``append`` (the default) or ``upsert``."""
    return str(getattr(config.sink, "mode", "append"))


def make_sink(config: KafkaJobConfig, *, lineage: str | None) -> Any:
    """The ``foreachBatch`` sink of ``sink.mode`` (driver side): ``AcidSink`` appends,
    ``UpsertSink`` applies change events. Both record the batch and its Kafka offsets
    under the same table parameter (``SinkOptions.meta_key``), so a restart from the
    table's offsets works for both."""
    kwargs: dict[str, Any] = {
        "table": config.table.name, "metastore": config.metastore,
        "warehouse": config.warehouse, "options": config.sink, "lineage": lineage,
        "namespace": config.table.namespace, "storage_options": config.storage_options,
    }  # fmt: skip
    if _mode(config) == "upsert":
        # Imported here: only an upsert job needs the change-event parser and the
        # mutation engine behind it.
        from acidstream.sinks.upsert_sink import UpsertSink

        return UpsertSink(**kwargs)
    return AcidSink(**kwargs)


def _starting_offsets(config: KafkaJobConfig) -> tuple[str, str]:
    """``startingOffsets`` for the source, and where it came from.

    The Spark checkpoint wins when it exists. Without it, and with
    ``recover_offsets_from_table``, the offsets the table recorded at its last commit.
    """
    if os.path.isdir(os.path.join(config.checkpoint, "offsets")):
        return config.kafka.starting_offsets, "checkpoint"
    if config.recover_offsets_from_table:
        meta = committed_offsets(
            config.table.name, sink_id=config.sink.sink_id, metastore=config.metastore,
            warehouse=config.warehouse,
        )  # fmt: skip
        offsets = (meta or {}).get("offsets") or {}
        mine = offsets.get(config.kafka.topic)
        if mine:
            return json.dumps({config.kafka.topic: {p: int(o) for p, o in mine.items()}}), "table"
    return config.kafka.starting_offsets, "config"


_HINTS = {
    "DataLossError": "the checkpoint's offsets are no longer in the topic (topic re-created, or a "
    "new broker): set kafka.fail_on_data_loss: false to go on from what is there, or start with "
    "a new checkpoint",
    "SourceError": "check kafka.bootstrap_servers and kafka.topic (is the broker up?)",
    "SerializationError": "set sink.dead_letter_path (or sink.skip_bad_records: true) to divert "
    "bad records instead of failing the batch",
    "StorageError": "free space or fix permissions on the warehouse, then run again (committed "
    "data is intact)",
    "TxnAbortedError": "the metastore aborted the batch's txns (heartbeat timeout?): run again",
    "CommitStateUnknownError": "the metastore went away during a commit: run again; the job "
    "re-checks the commit and never duplicates",
    "ConfigError": "fix the configuration",
}

_ERROR_LINE = re.compile(r"(?:^|[\s.:])([A-Z]\w*(?:Error|Exception)): (.+)")


def job_failure_message(report: str) -> str:
    """One line for a failed query: the innermost acidstream error Spark's report names
    (or its first line) and the fix."""
    found: list[tuple[str, str]] = []
    for line in report.splitlines():
        m = _ERROR_LINE.search(line.strip())
        if m:
            found.append((m.group(1), m.group(2).strip()))
    known = [(n, msg) for n, msg in found if n in _HINTS]
    if known:
        name, msg = known[-1]
        return f"streaming query failed: {name}: {msg} (fix: {_HINTS[name]})"
    first = next((ln.strip() for ln in report.splitlines() if ln.strip()), "unknown failure")
    return f"streaming query failed: {first}"


def _lineage(checkpoint: str) -> str:
    """The id of this checkpoint directory's lineage of batch ids (created on first use)."""
    import uuid

    path = os.path.join(checkpoint, "acidstream_lineage")
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        os.makedirs(checkpoint, exist_ok=True)
        value = uuid.uuid4().hex
        with open(path, "w") as f:
            f.write(value)
        return value


def run_kafka_job(
    config: KafkaJobConfig,
    *,
    bootstrap: str | None = None,
    spark: Any = None,
    timeout_s: float | None = None,
    on_batch: Callable[[BatchSummary], None] | None = None,
) -> JobResult:
    """Run the job until the trigger ends it (``availableNow``) or ``timeout_s`` passes.

    Args:
        config: the job configuration.
        bootstrap: Kafka bootstrap servers, overriding the config (an embedded broker's).
        spark: an existing SparkSession (driver); one is built from the config otherwise.
        timeout_s: stop a processing-time query after this long (``None``: run until killed).
        on_batch: called in the driver after each committed batch (once its metrics are
            recorded, its lag looked up and its progress line printed) with the batch's
            summary, on the job's progress thread, in batch order, while the next batch
            runs; every call has returned when this function returns.
    """
    servers = bootstrap or config.kafka.bootstrap_servers
    if servers == "embedded":
        raise ConfigError(
            "kafka.bootstrap_servers is 'embedded': start the broker first (examples/kafka_to_table.py)"
        )
    ensure_table(config)
    services = _TableServices(config)
    try:
        return _run(config, servers, spark, timeout_s, on_batch)
    finally:
        services.stop()


class _TableServices:
    """What keeps the table healthy while the job runs, in the driver: the housekeeper
    (aborts txns of dead writers) and, with ``compaction: auto``, the compactor (initiator,
    worker, cleaner), each on its own threads and store connection."""

    def __init__(self, config: KafkaJobConfig) -> None:
        from acidstream.txn.housekeeper import Housekeeper

        cfg = StoreConfig.resolve(
            metastore=config.metastore,
            warehouse=config.warehouse,
            storage_options=config.storage_options,
        )
        self.housekeeper = Housekeeper(
            cfg.metastore_url,
            interval_s=config.housekeeping_interval_s,
        )
        self.housekeeper.start()
        self.compactor: Any = None
        self._store: Any = None
        if config.compaction == "auto":
            from acidstream.compaction.service import Compactor

            self._store = cfg.open()
            self.compactor = Compactor(
                self._store, on_event=lambda line: log.info("compactor: %s", line)
            )
            self.compactor.start()

    def stop(self) -> None:
        try:
            if self.compactor is not None:
                self.compactor.stop()
        finally:
            if self._store is not None:
                self._store.close()
            self.housekeeper.stop()


def _run(
    config: KafkaJobConfig,
    servers: str,
    spark: Any,
    timeout_s: float | None,
    on_batch: Callable[[BatchSummary], None] | None,
) -> JobResult:
    spark = spark or spark_session(config)
    from acidstream.sources.kafka import KafkaSource

    spark.dataSource.register(KafkaSource)
    start, origin = _starting_offsets(config)
    sink = make_sink(config, lineage=_lineage(config.checkpoint))
    # The upsert sink reads through its own source: acidkafka with the sink's parse in the
    # worker that fetched the records (no second Python worker per task).
    fused = getattr(sink, "fused_source", None)
    reader = (
        spark.readStream.format("acidkafka" if fused is None else fused(spark))
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", config.kafka.topic)
        .option("startingOffsets", start)
        .option("failOnDataLoss", str(config.kafka.fail_on_data_loss).lower())
        .option("kafka.client", config.kafka.client)
    )
    if config.kafka.end_offsets_from:
        reader = reader.option("endOffsetsFrom", config.kafka.end_offsets_from)
    if config.kafka.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(config.kafka.max_offsets_per_trigger))
    if config.kafka.min_partitions:
        reader = reader.option("minPartitions", str(config.kafka.min_partitions))
    progress = _Progress(config, servers)
    rows = 0

    def batch(df: Any, batch_id: int) -> None:
        nonlocal rows
        sink(df, batch_id)
        st = sink.last_batch_stats
        if st.get("batch_id") != batch_id:
            progress.skipped(batch_id)
            return
        rows += int(st["rows"])
        progress.committed(st, on_batch)

    writer = (
        reader.load()
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", config.checkpoint)
    )
    writer = (writer.trigger(availableNow=True) if config.trigger.available_now
              else writer.trigger(processingTime=config.trigger.processing_time))  # fmt: skip
    t0 = time.monotonic()
    from pyspark.errors import StreamingQueryException

    try:
        query = writer.start()
        try:
            if timeout_s is None:
                query.awaitTermination()
            else:
                query.awaitTermination(timeout_s)
                if query.isActive:
                    query.processAllAvailable()
            failure = query.exception()
        except StreamingQueryException as e:
            failure = e
        finally:
            if query.isActive:
                query.stop()
    finally:
        sink.close()
        progress.close()
    if failure is not None:
        raise JobFailedError(job_failure_message(str(failure))) from failure
    return JobResult(
        sink.batches_committed, sink.batches_skipped, rows, time.monotonic() - t0, origin
    )


class _Progress:
    """The job's view of its batches (driver side): the console line of each and the
    metrics (served on ``job.metrics_port`` when set). The consumer lag compares the
    broker's end offsets with the offsets the table recorded at its last commit, read
    with a store connection of its own.

    The batch thread only records a batch's counts; its lag (a broker round trip of
    10-130 ms here, which the next micro-batch would wait for), its console line and the
    ``on_batch`` callback follow on one progress thread, in batch order. ``close`` waits
    for them, so every line is out when the job returns."""

    def __init__(self, config: KafkaJobConfig, servers: str) -> None:
        self.config = config
        self.name = bind_write_name(config.table.name, namespace=config.table.namespace)
        self.lag = LagProbe(
            servers, config.kafka.topic, method=config.kafka.end_offsets_from or "listOffsets"
        )
        self.metrics = JobMetrics(
            table=str(self.name), sink_id=config.sink.sink_id, mode=_mode(config), lag=self.lag
        )
        self._store = StoreConfig.resolve(
            metastore=config.metastore,
            warehouse=config.warehouse,
            storage_options=config.storage_options,
        ).open()
        self.server: MetricsServer | None = None
        self._reports = ThreadPoolExecutor(1, thread_name_prefix="acidstream-progress")
        try:
            self._read_committed()
            if config.job.metrics_port:
                self.server = MetricsServer(self.metrics.registry, config.job.metrics_port)
                print(f"metrics: http://127.0.0.1:{self.server.port}/metrics", flush=True)
        except BaseException:
            self._reports.shutdown()
            self._store.close()
            raise

    def _read_committed(self) -> None:
        raw = self._store.get_table_param(self.name.db, self.name.table, self.config.sink.meta_key)
        self.lag.set_committed(json.loads(raw).get("offsets") if raw else None)

    def committed(
        self, stats: dict[str, Any], on_batch: Callable[[BatchSummary], None] | None = None
    ) -> None:
        """After a batch's commit (batch thread): its metrics now; its lag, console line
        and ``on_batch(summary)`` on the progress thread."""
        summary = self.metrics.record_batch(stats, lag=False)
        self._reports.submit(self._report, summary, on_batch)

    def _report(
        self, summary: BatchSummary, on_batch: Callable[[BatchSummary], None] | None
    ) -> None:
        """(Progress thread.) A failure here is logged: the batch is committed whatever
        its report does, and the next batch must not wait for it."""
        try:
            self._read_committed()
            summary = self.metrics.with_lag(summary)
            print(progress_line(summary), flush=True)
            if on_batch is not None:
                on_batch(summary)
        except Exception as e:
            log.warning("reporting batch %d failed: %s", summary.batch_id, e)

    def skipped(self, batch_id: int) -> None:
        """A replayed batch the table had committed already (after a restart)."""
        self.metrics.skipped.inc()
        line = f"batch {batch_id}: committed before (a replay after a restart): skipped"
        self._reports.submit(print, line, flush=True)

    def close(self) -> None:
        try:
            self._reports.shutdown(wait=True)  # every batch's line is out
            if self.server is not None:
                self.server.stop()
        finally:
            self._store.close()
