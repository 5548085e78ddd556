"""``AcidSink``: an exactly-once ``foreachBatch`` sink into a Hive ACID table.

Each micro-batch is one transaction batch (``txns_per_batch`` txns, 1 by default):

1. driver: skip the batch if the table already records it as committed (a replay);
   otherwise open the batch's txns, allocate their (consecutive) write ids
   ``w1..wk``, take Hive's streaming lock for each and start heartbeating them;
2. executors: every task parses its rows with acidstream's record writers and writes
   ``[<partition>/]delta_<w1>_<wk>_<stmt>/bucket_<N>`` files in parallel (no collect of
   data to the driver) in Hive's streaming file format: the task's rows are spread in
   order over the k txns, and each txn boundary gets an intermediate ORC footer and a
   ``_flush_length`` side-file entry; then each task returns one small metadata row
   per file;
3. driver: registers dynamic partitions and commits all the batch's txns together with
   ``{sink id, batch id, source end offsets}`` in ONE metastore transaction
   (``TxnStore.commit_txns`` with a key/value): a crash can never leave part of a
   micro-batch committed, which a replay would then duplicate.

A replayed batch id is detected and skipped; a batch that failed before its commit is
aborted (at once, or by the next run of the sink for its txns left open by a dead
driver) and its files are deleted. Each task writes under its own statement id, so
ROW__IDs stay unique whatever the number of tasks. See ``docs/sink.md``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from acidstream.acid import faults, layout
from acidstream.acid.config_fields import (
    Field,
    Sourced,
    check_fields,
    fields_of,
    parse_section,
    txn_timeout_removed,
)
from acidstream.acid.errors import (
    AcidStreamError,
    CommitStateUnknownError,
    ConfigError,
    SerializationError,
)
from acidstream.acid.partitions import discover_partitions
from acidstream.acid.placement import Placement, TableLayout
from acidstream.acid.storage import Storage
from acidstream.acid.table_name import TableName
from acidstream.acid.table_writer import TableWriter, WriteTarget
from acidstream.acid.writer import OrcWriterOptions
from acidstream.ingest.record_writers import RECORD_FORMATS, RecordWriter, record_writer_for
from acidstream.txn.batch import MAX_TXNS_PER_BATCH, TransactionBatch
from acidstream.txn.catalog import TableDef
from acidstream.txn.config import StoreConfig
from acidstream.txn.namespaces import bind_write_name, check_namespace_mode
from acidstream.txn.storage_options import StorageOptions
from acidstream.txn.store import TxnState, TxnStore, open_store

__all__ = ["SINK_FIELDS", "SPARK_OPTIONS", "AcidSink", "SinkOptions", "committed_offsets"]

log = logging.getLogger(__name__)

META_PREFIX = "_meta.acidstream.sink."
AGENT_PREFIX = "acidstream-sink:"
CRASH_POINTS = ("sink.after_open", "sink.during_heartbeat", "sink.after_files", "sink.after_commit")
"""The sink's fault-injection steps (``acidstream.acid.faults``), in the order a micro-batch passes them."""
TASK_CRASH_POINTS = ("sink.task_after_flush",)
"""The executor task's fault-injection steps (each flush of a task's file)."""
DRAIN_TIMEOUT_S = 60.0
"""How long a failed micro-batch waits for its job's other tasks to end before deleting."""
FILE_SCHEMA = (
    "partition string, path string, bucket int, stmt int, rows long, bad long, "
    "offsets string, dead_letter string, flushes string, times binary"
)


@dataclass(frozen=True, kw_only=True)
class SinkOptions:
    """What the sink parses and how it writes. Parsed once; picklable (sent to executors).

    Attributes:
        format: ``json``, ``delimited``, ``regex`` or ``raw`` (the whole value into the
            table's single string or binary column): how the value column is parsed; in
            upsert mode ``json`` (plain rows) or ``debezium`` (Debezium's JSON envelope).
        mode: ``append`` (every record is a new row: ``AcidSink``) or ``upsert`` (records
            are change events applied by key: ``acidstream.sinks.upsert_sink.UpsertSink``,
            ``docs/cdc.md``).
        key: upsert mode: the key columns; default: the table's ``acidstream.key`` property.
        ordering: upsert mode: a field path whose larger value is the newer version of a
            key (``source.lsn``, ``ts_ms`` in a Debezium envelope; a row column in json);
            Kafka partition and offset break ties. Default: Kafka order.
        ordering_guard: upsert mode: skip (and count) an event older than the table's row.
        delete_when: upsert mode, format json: SQL predicate on the row marking a delete.
        value_column: the column holding each record (``value`` for Kafka).
        delimiter: field delimiter for ``delimited``.
        regex: the regular expression for ``regex``.
        sink_id: names the stream in the table's parameters (exactly-once key); must be
            stable across restarts. Default: ``default``.
        dead_letter_path: a directory: bad records go to a JSON-lines file per task attempt
            in it (``acidstream.ingest.dead_letter``'s format, with the Kafka position); without it a bad
            record fails the batch unless ``skip_bad_records``.
        skip_bad_records: count bad records and go on (they are still reported in the log).
        txns_per_batch: txns in each micro-batch's transaction batch (1..1000); every
            task file gets an intermediate footer per txn. They commit together.
        orc: ORC writer settings.
    """

    format: str = "json"
    mode: str = "append"
    key: tuple[str, ...] | None = None
    ordering: str | None = None
    ordering_guard: bool = False
    delete_when: str | None = None
    value_column: str = "value"
    delimiter: str = ","
    regex: str | None = None
    sink_id: str = "default"
    dead_letter_path: str | None = None
    skip_bad_records: bool = False
    txns_per_batch: int = 1
    orc: OrcWriterOptions = field(default_factory=OrcWriterOptions)

    def __post_init__(self) -> None:
        check_fields(self, SINK_FIELDS)
        self._check_mode()
        if self.mode == "append":
            # Built once here (driver side) so that a regex that does not compile, or a
            # missing one, fails when the options are parsed, not in every executor task.
            _record_writer(self)
        if not self.sink_id or not all(c.isalnum() or c in "_-." for c in self.sink_id):
            raise ConfigError(
                f"sink_id must be letters, digits, '_', '-' or '.', got {self.sink_id!r}"
            )

    def _check_mode(self) -> None:
        """Refuse option combinations that cannot work, naming the option."""
        if self.key is not None:
            keys = tuple(k.strip().lower() for k in self.key)
            if not keys or not all(keys):
                raise ConfigError(f"key must name one or more columns, got {list(self.key)!r}")
            if len(set(keys)) != len(keys):
                raise ConfigError(f"key names a column twice: {list(self.key)!r}")
            object.__setattr__(self, "key", keys)
        if self.mode == "append":
            upsert_only = {"key": self.key, "ordering": self.ordering,
                           "ordering_guard": self.ordering_guard or None,
                           "delete_when": self.delete_when}  # fmt: skip
            for name, value in upsert_only.items():
                if value is not None:
                    raise ConfigError(f"{name} applies to mode upsert (mode is append)")
            if self.format == "debezium":
                raise ConfigError("format debezium needs mode upsert (change events)")
            return
        if self.format not in UPSERT_FORMATS:
            raise ConfigError(
                f"format must be one of {', '.join(UPSERT_FORMATS)} in mode upsert, "
                f"got {self.format!r}"
            )
        if self.delete_when is not None and self.format != "json":
            raise ConfigError(
                "delete_when applies to format json (Debezium's op says what is deleted)"
            )
        if self.ordering_guard and not self.ordering:
            raise ConfigError("ordering_guard needs ordering (the field compared)")
        if self.txns_per_batch != 1:
            raise ConfigError("txns_per_batch must be 1 in mode upsert (one txn per batch)")

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SinkOptions:
        """Parse Spark-style string options (``format``, ``sink.id``, ``deadLetterPath``...;
        any case) with the typing rules of every acidstream config
        (``acidstream.acid.config_fields``): ``skipBadRecords=ture`` is a ``ConfigError``,
        not ``False``.

        Raises:
            ConfigError: an unknown option (with its close matches), a bad value, or the
                removed ``txnTimeout`` (the txn timeout is the metastore's setting).
        """
        tree: dict[str, Sourced] = {}
        for k, v in options.items():
            if str(k).lower() == "key" and isinstance(v, str):
                # A Spark option is text: key columns are comma-separated ("a,b").
                tree[str(k)] = Sourced([c.strip() for c in v.split(",")], "sink option")
            else:
                tree[str(k)] = Sourced(v, "sink option")
        values = parse_section(
            tree, SINK_FIELDS, names=SPARK_OPTIONS, fold_case=True, what="sink option"
        )
        return cls(**values)

    @property
    def meta_key(self) -> str:
        return META_PREFIX + self.sink_id


@dataclass(frozen=True, kw_only=True)
class _TaskPlan:
    """Everything an executor task needs to write its files (pickled to executors)."""

    table: TableLayout
    source: str  # db.table, for dead letters
    write_ids: tuple[int, ...]  # the batch's write ids, consecutive and ascending
    options: SinkOptions
    has_offsets: bool
    has_timestamp: bool = False
    # The warehouse filesystem's options (endpoint, credentials) from the driver's resolved
    # StoreConfig: executors open the table's storage with them, not with their environment.
    storage_options: StorageOptions = field(default_factory=StorageOptions)


UPSERT_FORMATS = ("json", "debezium")
"""The formats of mode upsert: plain JSON rows, or Debezium's JSON envelope."""

SINK_FIELDS = fields_of(
    SinkOptions,
    Field(name="format", choices=(*RECORD_FORMATS, "debezium")),
    Field(name="mode", choices=("append", "upsert")),
    Field(name="txns_per_batch", min=1, max=MAX_TXNS_PER_BATCH),
    skip=("orc",),
    extra=(txn_timeout_removed(),),
)
"""The sink's keys (YAML ``sink.<key>`` of the Kafka job), typed and bounded once."""

SPARK_OPTIONS = {
    "format": "format", "valueColumn": "value_column", "delimiter": "delimiter",
    "regex": "regex", "sink.id": "sink_id", "sinkId": "sink_id",
    "deadLetterPath": "dead_letter_path", "skipBadRecords": "skip_bad_records",
    "txnsPerBatch": "txns_per_batch", "mode": "mode", "key": "key", "ordering": "ordering",
    "orderingGuard": "ordering_guard", "deleteWhen": "delete_when",
    "txnTimeout": "txn_timeout_s",  # removed: refused with the way to set it now
}  # fmt: skip
"""Spark option name (any case) -> ``SinkOptions`` field."""


def _record_writer(opts: SinkOptions) -> RecordWriter:
    """The options' record writer (``record_writer_for``, the one factory by format):
    driver side when the options are built, executor side in each task."""
    return record_writer_for(
        opts.format,
        delimiter=opts.delimiter,
        regex=opts.regex,
        names={"regex": "the regex option"},
    )


def _table_layout(store: TxnStore, table: TableDef, db: str, name: str) -> TableLayout:
    """The layout the tasks place rows with (driver side, once per micro-batch). Each
    existing partition keeps the list bucketing it was created with. While the table is
    list-bucketed every partition is listed (one created before has none, and must not
    take the table's); otherwise only the partitions with a skew of their own are read:
    none for a table that never was skewed, however many partitions it has."""
    if not table.partition_keys:
        return TableLayout.of(table)
    if table.skewed is not None and table.skewed.is_list_bucketed:
        return TableLayout.of(table, partitions=store.list_partitions(db, name))
    return TableLayout.of(table, partition_skews=store.partition_skews(db, name))


def _write_task(plan: _TaskPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """Executor side: parse this task's records and write its ACID files.

    Runs inside ``mapInArrow`` on an executor; yields one Arrow record batch of file
    metadata (``FILE_SCHEMA``). The statement id is the Spark partition id, so two tasks
    never write the same ROW__ID (and never the same directory). Each file is a
    streaming file of the whole transaction batch: its rows are spread in order over
    the batch's write ids, with a flush (intermediate footer + side-file length) after
    each one.
    """
    import pyarrow as pa
    from pyspark import TaskContext

    from acidstream.ingest.dead_letter import DeadLetterWriter

    ctx = TaskContext.get()
    stmt = ctx.partitionId() if ctx is not None else 0
    attempt = ctx.attemptNumber() if ctx is not None else 0
    if stmt >= 4096:
        raise ConfigError("more than 4096 tasks in one micro-batch: repartition to fewer")
    storage, _ = Storage.for_path(plan.table.location, storage_options=plan.storage_options)
    place = Placement(plan.table, storage=storage)
    wids = plan.write_ids
    # Every file is a streaming file of the whole batch, written under the task's own
    # statement id; a file left by an earlier, failed attempt of this task is replaced:
    # that attempt is dead (Spark retries only after a failure; speculation is refused by
    # the driver).
    out = TableWriter(
        place,
        target=WriteTarget(min_write_id=wids[0], max_write_id=wids[-1], statement_id=stmt),
        options=plan.options.orc,
        streaming=True,
        replace_files=True,
    )
    bound = _record_writer(plan.options).bind(
        place.schema, partition_columns=plan.table.partition_keys
    )
    opts = plan.options
    dead: DeadLetterWriter | None = None
    if opts.dead_letter_path:
        dead = DeadLetterWriter(
            opts.dead_letter_path,
            source=plan.source,
            file_name=f"write_{plan.write_ids[0]:07d}_task_{stmt:04d}_{attempt}.jsonl",
            storage_options=plan.storage_options,
        )
    offsets: dict[str, dict[str, int]] = {}
    bad = 0
    times: list[np.ndarray] = []  # the Kafka timestamps (ms) of the rows written
    for batch in whole_task(batches):
        column = batch.column(opts.value_column)
        values = column.to_pylist()
        if column.null_count == 0 and pa.types.is_binary(column.type):
            # The usual Kafka micro-batch: record i is row i (no index list to build).
            where: list[int] | None = None
            recs = values
        else:
            where = [i for i, v in enumerate(values) if v is not None]  # tombstones: skipped
            recs = [v if isinstance(v, bytes) else str(v).encode() for v in (values[i] for i in where)]  # fmt: skip
        if plan.has_offsets and batch.num_rows:
            offsets = _merge_offsets(offsets, batch_offsets(batch))
        if not recs:
            continue
        enc = bound.encode_block(recs)  # one columnar pass over the batch's records
        rejected = list(enc.rejected)
        groups: list[tuple[str, pa.Table]] = [("", enc.table)]
        if plan.table.partition_keys and enc.partitions is not None:
            groups = []
            for pvals, rows in place.partition_groups(enc.partitions):
                try:
                    groups.append((place.partition_dir(pvals), enc.table.take(rows)))
                except SerializationError as e:
                    rejected.extend((i, e) for i in enc.good_indices.take(rows).to_pylist())
        for part, t in groups:
            out.add_arrow(part, t, nbytes=0)  # the task keeps its rows until the end
        if plan.has_timestamp:
            written = np.ones(len(recs), dtype=bool)
            written[[i for i, _ in rejected]] = False
            ts = kafka_times_ms(batch.column("timestamp"))
            if where is not None:
                ts = ts[np.asarray(where, dtype=np.int64)]
            times.append(ts[written])
        for i, err in sorted(rejected, key=lambda r: r[0]):
            bad += 1
            row = i if where is None else where[i]
            pos = _position(batch, row) if plan.has_offsets else ""
            if dead is not None:
                dead.add(recs[i], str(err), position=pos)
            elif opts.skip_bad_records:
                log.warning("skipped bad record at %s: %s", pos or "?", err)
            else:
                raise SerializationError(
                    f"bad record {pos} in micro-batch (no dead letter configured): {err}"
                ) from err
    dl_path = ""
    if dead is not None:
        dead.close()
        dl_path = dead.path if dead.count else ""
    out_rows: list[dict[str, Any]] = []
    # One file per (partition, bucket[, list-bucketing directory]), opened one at a time;
    # the files of a bucket in list-bucketing directories share one rowId numbering, so
    # ROW__IDs stay unique per (write id, bucket).
    for (part, bucket, lb), rows in out.buffered_files():
        w = out.file(part, bucket, lb)
        path = w.path
        try:
            share, extra = divmod(rows.num_rows, len(wids))
            start = 0
            for i, wid in enumerate(wids):
                n = share + (1 if i < extra else 0)
                w.insert_arrow(wid, rows.slice(start, n))
                w.flush()  # the txn boundary: intermediate footer + side-file length
                # Executor side: a task attempt dying here leaves part of its file (chaos
                # suite: Spark retries the task, which rewrites the file whole).
                faults.point("sink.task_after_flush")
                start += n
        except BaseException:
            w.abort()
            raise
        w.close()
        out_rows.append({"partition": part, "path": path, "bucket": bucket, "stmt": stmt,
                         "rows": rows.num_rows, "bad": 0, "offsets": "", "dead_letter": "",
                         "flushes": json.dumps(w.flush_lengths), "times": b""})  # fmt: skip
    # One extra row carries the task's offsets and bad-record count even without files.
    out_rows.append({"partition": "", "path": "", "bucket": -1, "stmt": stmt, "rows": 0, "bad": bad,
                     "offsets": json.dumps(offsets), "dead_letter": dl_path, "flushes": "[]",
                     "times": np.concatenate(times).tobytes() if times else b""})  # fmt: skip
    yield pa.RecordBatch.from_pylist(out_rows, schema=_file_arrow_schema())


def _position(batch: Any, row: int) -> str:
    """Executor side: ``topic/partition@offset`` of one row of a Kafka batch, for a bad
    record's report, built only for the rejected rows (a string for every row of every
    batch was ~17% of a task's CPU, parse and write included)."""
    t, p, o = (batch.column(c)[row].as_py() for c in ("topic", "partition", "offset"))
    return f"{t}/{p}@{o}"


def whole_task(batches: Iterator[Any]) -> Iterator[Any]:
    """Executor side: a task's Arrow record batches (``mapInArrow`` hands them over
    ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows at a time) as one batch, so
    that its records are parsed in one bulk pass (the record writers' ``encode_block``,
    the change-event parser) on every core, not in one pass per 10,000 rows. The task
    keeps all its rows until it writes them anyway."""
    import pyarrow as pa

    got = [b for b in batches if b.num_rows]
    if len(got) == 1:
        yield got[0]
    elif got:
        yield pa.concat_batches(got)


def _file_arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("partition", pa.string()), ("path", pa.string()), ("bucket", pa.int32()), ("stmt", pa.int32()),
         ("rows", pa.int64()), ("bad", pa.int64()), ("offsets", pa.string()), ("dead_letter", pa.string()),
         ("flushes", pa.string()), ("times", pa.binary())]
    )  # fmt: skip


def kafka_times_ms(col: Any) -> np.ndarray:
    """Executor side: Kafka's ``timestamp`` column (Arrow timestamp or integer ms) as
    int64 milliseconds, NULL as -1 (dropped from the freshness figures)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("ms"))
    ms = pc.fill_null(col.cast(pa.int64()), -1)
    return np.asarray(ms.to_numpy(zero_copy_only=False), dtype=np.int64)


def event_times(rows: Any) -> np.ndarray:
    """Driver side: the event times (ms) the tasks returned in their ``times`` column."""
    parts = [np.frombuffer(r["times"], dtype=np.int64) for r in rows if r["times"]]
    out = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return out[out >= 0]


def _merge_offsets(
    old: Mapping[str, Mapping[str, int]], new: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    out = {t: dict(p) for t, p in old.items()}
    for t, parts in new.items():
        tp = out.setdefault(t, {})
        for p, o in parts.items():
            tp[p] = max(o, tp.get(p, -1))
    return out


def batch_offsets(batch: Any) -> dict[str, dict[str, int]]:
    """The next offset to read per topic and partition after an Arrow batch of Kafka
    records (its max offset + 1, as Spark records offsets); executor side."""
    import pyarrow as pa

    agg = (
        pa.Table.from_batches([batch.select(["topic", "partition", "offset"])])
        .group_by(["topic", "partition"])
        .aggregate([("offset", "max")])
    )
    out: dict[str, dict[str, int]] = {}
    cols = (agg.column(c).to_pylist() for c in ("topic", "partition", "offset_max"))
    for t, p, o in zip(*cols, strict=True):
        out.setdefault(t, {})[str(p)] = o + 1
    return out


def committed_offsets(
    table: str,
    *,
    sink_id: str = "default",
    metastore: str | None = None,
    warehouse: str | None = None,
) -> dict[str, Any] | None:
    """What the sink last committed for ``sink_id``: ``{"batch_id", "offsets", ...}`` or None.

    With a lost Spark checkpoint, ``offsets`` (next offsets to read per topic and partition)
    is the ``startingOffsets`` JSON to restart from (see ``docs/sink.md``).
    """
    cfg = StoreConfig.resolve(metastore=metastore, warehouse=warehouse)
    store = open_store(cfg.metastore_url, warehouse=cfg.warehouse)
    try:
        name = TableName.parse(table)
        raw = store.get_table_param(name.db, name.table, META_PREFIX + sink_id)
    finally:
        store.close()
    return None if raw is None else json.loads(raw)


_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


@contextlib.contextmanager
def _job_group(sc: Any, group: str, description: str) -> Iterator[None]:
    """Driver side: run the micro-batch's Spark job in its own job group (so a failure can
    cancel and wait for exactly its tasks), restoring the caller's group afterwards."""
    saved = {k: sc.getLocalProperty(k) for k in _GROUP_PROPERTIES}
    sc.setJobGroup(group, description, interruptOnCancel=True)
    try:
        yield
    finally:
        for k, v in saved.items():
            sc.setLocalProperty(k, v)


def _drain_job_group(sc: Any, group: str, *, timeout_s: float = DRAIN_TIMEOUT_S) -> bool:
    """Driver side, after a failed job: cancel what is left of it and wait until none of
    its tasks runs (``False`` if some still did after ``timeout_s``)."""
    try:
        sc.cancelJobGroup(group)
        tracker = sc.statusTracker()
        deadline = time.monotonic() + timeout_s
        while True:
            active = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job is not None else ():
                    stage = tracker.getStageInfo(stage_id)
                    active += stage.numActiveTasks if stage is not None else 0
            if not active:
                return True
            if time.monotonic() >= deadline:
                log.warning("%d tasks of failed job group %s still run", active, group)
                return False
            time.sleep(0.05)  # Spark's status tracker offers nothing to wait on
    except Exception as e:  # a stopped context: nothing runs any more
        log.warning("could not wait for the tasks of failed job group %s: %s", group, e)
        return False


class AcidSink:
    """The ``foreachBatch`` function: ``query.writeStream.foreachBatch(AcidSink(...))``.

    Runs on the driver (Spark calls it once per micro-batch with ``(batch_df, batch_id)``);
    the per-task writer it ships to executors is a module-level function over a frozen,
    picklable plan.

    Args:
        table: ``db.table`` (a full-ACID table in the metastore).
        metastore / warehouse: as for the CLI (arguments > environment > defaults).
        options: parsing and writing options (``SinkOptions``).
        lineage: identifies the Spark checkpoint the batch ids belong to. Batch ids restart
            at 0 with a new checkpoint, so a batch id is a replay only within the same
            lineage (``run_kafka_job`` keeps one per checkpoint directory).
        namespace: the namespace the sink is bound to (``docs/namespaces.md``); links and
            other namespaces' tables are refused.
        storage_options: the warehouse filesystem's options (endpoint, credentials); they
            travel to the executor tasks inside each task's plan (pickled), not through
            the executors' environment.
    """

    def __init__(
        self,
        *,
        table: str,
        metastore: str | None = None,
        warehouse: str | None = None,
        options: SinkOptions | None = None,
        lineage: str | None = None,
        namespace: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.options = options or SinkOptions()
        self.lineage = lineage
        self.config = StoreConfig.resolve(
            metastore=metastore, warehouse=warehouse, storage_options=storage_options
        )
        self.namespace = namespace
        self.name = bind_write_name(table, namespace=namespace, action="sink into")
        self.db, self.table_name = self.name.db, self.name.table
        self.agent = f"{AGENT_PREFIX}{self.db}.{self.table_name}:{self.options.sink_id}"
        self._store: TxnStore | None = None
        self._table: TableDef | None = None
        self._aborted_write_ids: set[int] = set()
        self.batches_committed = 0
        self.batches_skipped = 0
        self.last_batch_stats: dict[str, Any] = {}

    # --------------------------------------------------------------- driver setup
    def _open(self) -> tuple[TxnStore, TableDef]:
        if self._store is None or self._table is None:
            store = self.config.open()  # with the warehouse's storage options
            try:
                check_namespace_mode(store, self.name, namespace=self.namespace)
                t = store.get_table(self.db, self.table_name)
                if not t.is_transactional or t.is_insert_only:
                    raise ConfigError(f"{t.full_name} is not a full-ACID table")
                if not t.location:
                    raise ConfigError(f"{t.full_name} has no location")
                self.options.orc.for_table(t.parameters)  # a bad ORC property fails here
                # Hive's metastore creates the table directory with the table; a reader of an
                # empty table must find it.
                storage, loc = store.storage(t.location)
                storage.makedirs(loc)
                self._store, self._table = store, t
                self.recover()
            except BaseException:
                store.close()
                self._store = self._table = None
                raise
        return self._store, self._table

    def recover(self) -> list[int]:
        """Abort this sink's txns left open by a dead driver and delete their files.

        Safe because one sink id has one driver at a time (its Spark checkpoint): any open
        txn of ours found at start-up belongs to a run that is gone. Returns their ids.
        """
        store, table = self._store, self._table
        assert store is not None and table is not None
        stale = [
            t for t in store.show_txns() if t.state == TxnState.OPEN and t.agent_info == self.agent
        ]
        wids = set()
        for info in stale:
            wid = store.write_id_for_txn(info.txn_id, self.db, self.table_name)
            store.abort_txn(
                info.txn_id, reason="stale sink txn of a dead driver (recovered at restart)"
            )
            if wid is not None:
                wids.add(wid)
            log.warning("recovered: aborted stale txn %s (write id %s)", info.txn_id, wid)
        self._delete_writes(wids)
        return [t.txn_id for t in stale]

    def _delete_writes(self, write_ids: set[int]) -> None:
        """Delete the sink's delta directories (``delta_a_b_stmt``) whose write ids are
        all aborted ones, in every partition. Directories that also hold another write
        id (e.g. a compactor's output, which has no statement id anyway) are kept."""
        if not write_ids:
            return
        assert self._table is not None and self._table.location is not None
        storage, root = self.config.storage(self._table.location)
        if not storage.exists(root):
            return
        dirs = [p.path for p in discover_partitions(storage, root)]
        for d in dirs:
            if not storage.exists(d):
                continue
            for e in storage.list_dir(d):
                parsed = layout.parse_dir_name(e.name) if e.is_dir else None
                if (
                    isinstance(parsed, layout.ParsedDelta)
                    and not parsed.is_delete
                    and parsed.statement_id >= 0
                    and parsed.visibility_txn_id == 0
                    and all(
                        w in write_ids for w in range(parsed.min_write_id, parsed.max_write_id + 1)
                    )
                ):
                    storage.delete(e.path, recursive=True)

    def _last_committed(self, store: TxnStore) -> dict[str, Any] | None:
        raw = store.get_table_param(self.db, self.table_name, self.options.meta_key)
        return None if raw is None else json.loads(raw)

    # --------------------------------------------------------------- per batch
    def __call__(self, batch_df: Any, batch_id: int) -> None:
        """Driver side: write one micro-batch as one transaction batch, exactly once."""
        t0 = time.monotonic()
        spark = batch_df.sparkSession
        if str(spark.conf.get("spark.speculation", "false")).lower() == "true":
            raise ConfigError("AcidSink needs spark.speculation=false (a file per task attempt)")
        store, table = self._open()
        if self._aborted_write_ids:
            # Late files of a failed batch (aborted write ids: nobody reads them).
            self._delete_writes(self._aborted_write_ids)
            self._aborted_write_ids = set()
        last = self._last_committed(store)
        if (
            last is not None
            and last.get("lineage") == self.lineage
            and int(last["batch_id"]) >= batch_id
        ):
            self.batches_skipped += 1
            log.info("batch %s already committed (last %s): skipped", batch_id, last["batch_id"])
            return
        if self.options.value_column not in batch_df.columns:
            raise ConfigError(f"the micro-batch has no column {self.options.value_column!r}")
        batch = TransactionBatch(
            store,
            self.name,
            size=self.options.txns_per_batch,
            dynamic=bool(table.partition_keys),
            user=os.environ.get("USER", "spark"),
            host=socket.gethostname(),
            agent_info=self.agent,
        )
        txns, write_ids = list(batch.txn_ids), batch.write_ids
        group = f"acidstream-{self.name}-{batch_id}-{txns[0]}"
        try:
            batch.lock_all()
            faults.point("sink.after_open")
            faults.point("sink.during_heartbeat")
            plan = _TaskPlan(
                table=_table_layout(store, table, self.db, self.table_name),
                source=str(self.name),
                write_ids=write_ids,
                # The table's ORC properties (orc.compress...) win, as in Hive.
                options=replace(self.options, orc=self.options.orc.for_table(table.parameters)),
                has_offsets={"topic", "partition", "offset"} <= set(batch_df.columns),
                has_timestamp="timestamp" in batch_df.columns,
                storage_options=self.config.storage_options,
            )
            cols = [self.options.value_column] + (
                ["topic", "partition", "offset"] if plan.has_offsets else []
            )
            cols += ["timestamp"] if plan.has_timestamp else []
            with _job_group(spark.sparkContext, group, f"acidstream {self.name} batch {batch_id}"):
                files = (
                    batch_df.select(*cols)
                    .mapInArrow(lambda it, plan=plan: _write_task(plan, it), FILE_SCHEMA)
                    .collect()
                )
            faults.point("sink.after_files")
            rows = sum(int(f["rows"]) for f in files)
            bad = sum(int(f["bad"]) for f in files)
            offsets: dict[str, dict[str, int]] = dict((last or {}).get("offsets") or {})
            for f in files:
                if f["offsets"]:
                    offsets = _merge_offsets(offsets, json.loads(f["offsets"]))
            # Every file holds rows of every txn of the batch: each txn names every partition.
            parts = sorted({f["partition"] for f in files if f["path"] and f["partition"]})
            wrange = [write_ids[0], write_ids[-1]]
            value = json.dumps({"sink_id": self.options.sink_id, "lineage": self.lineage, "batch_id": batch_id, "offsets": offsets,
                                "write_ids": wrange, "txn_ids": [txns[0], txns[-1]], "rows": rows, "bad_records": bad})  # fmt: skip
            batch.commit_all(partitions=parts, key=self.options.meta_key, value=value)
            committed_at = time.time()
            faults.point("sink.after_commit")
            self.batches_committed += 1
            self.last_batch_stats = {"batch_id": batch_id, "txn_ids": txns, "write_ids": wrange, "rows": rows,
                                     "bad_records": bad, "files": sum(1 for f in files if f["path"]),
                                     "partitions": parts, "seconds": time.monotonic() - t0,
                                     "committed_at": committed_at, "event_times_ms": event_times(files),
                                     # the length at each txn boundary (intermediate footer) per file
                                     "flush_lengths": {f["path"]: json.loads(f["flushes"]) for f in files if f["path"]}}  # fmt: skip
            log.info("batch %s: %s rows in write ids %s..%s (%s bad)", batch_id, rows, *wrange, bad)
        except CommitStateUnknownError:
            # The commit may have landed and the metastore cannot tell now: keep every file
            # and txn as they are; the next run's recover() (or a replay) decides from the
            # metastore. Deleting here could destroy a committed micro-batch.
            raise
        except BaseException:
            if batch.state is not TxnState.COMMITTED:
                # A failed task fails the job at once, while the job's other tasks may
                # still be writing: let them end before their files are deleted.
                _drain_job_group(spark.sparkContext, group)
                self._abort(batch)
            raise
        finally:
            batch.close()

    def _abort(self, batch: TransactionBatch) -> None:
        """A micro-batch that failed before its commit: abort its txns, delete its files.

        The write ids stay on the list of the next batch's cleanup too: a killed task's
        Python worker can still create a file for a moment after its task ended."""
        try:
            batch.abort_remaining("micro-batch failed before commit")
            self._aborted_write_ids |= set(batch.write_ids)
            self._delete_writes(set(batch.write_ids))
        except (AcidStreamError, OSError) as e:
            log.error(
                "could not abort txns %s after a failed batch: %s (recover() will at restart)",
                list(batch.txn_ids), e,
            )  # fmt: skip

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __getstate__(self) -> dict[str, Any]:
        # Spark may pickle the sink with the query; the store connection stays behind.
        state = dict(self.__dict__)
        state["_store"] = None
        state["_table"] = None
        return state
