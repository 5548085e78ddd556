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

import json
import logging
import os
import signal
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from acid import layout
from acid.errors import AcidStreamError, ConfigError, SerializationError, TransactionError
from acid.schema import TableSchema
from acid.storage import Storage
from acid.writer import AcidFileWriter, OrcWriterOptions
from txn.catalog import TableDef, make_partition_name
from txn.config import StoreConfig
from txn.locks import DataOperationType, LockComponent, LockRequest, LockState, LockType
from txn.store import TxnState, TxnStore, open_store

__all__ = ["AcidSink", "SinkOptions", "committed_offsets"]

log = logging.getLogger(__name__)

META_PREFIX = "_meta.acidstream.sink."
AGENT_PREFIX = "acidstream-sink:"
CRASH_ENV = "ACIDSTREAM_CRASH_AT"
MAX_TXNS_PER_BATCH = 1000  # Hive's cap on txns opened in one call
CRASH_POINTS = ("after_open", "during_heartbeat", "after_files", "after_commit")
FILE_SCHEMA = (
    "partition string, path string, bucket int, stmt int, rows long, bad long, "
    "offsets string, dead_letter string, flushes string"
)


@dataclass(frozen=True)
class SinkOptions:
    """What the sink parses and how it writes. Parsed once; picklable (sent to executors).

    Attributes:
        format: ``json``, ``delimited``, ``regex`` or ``raw`` (the whole value into the
            table's single string or binary column): how the value column is parsed.
        value_column: the column holding each record (``value`` for Kafka).
        delimiter: field delimiter for ``delimited``.
        regex: the regular expression for ``regex``.
        sink_id: names the stream in the table's parameters (exactly-once key); must be
            stable across restarts. Default: ``default``.
        dead_letter_path: directory for bad records (one JSON-lines file per task); without
            it a bad record fails the batch unless ``skip_bad_records``.
        skip_bad_records: count bad records and go on (they are still reported in the log).
        txn_timeout_s: the metastore's txn timeout; heartbeats go every half of it.
        txns_per_batch: txns in each micro-batch's transaction batch (1..1000); every
            task file gets an intermediate footer per txn. They commit together.
        orc: ORC writer settings.
    """

    format: str = "json"
    value_column: str = "value"
    delimiter: str = ","
    regex: str | None = None
    sink_id: str = "default"
    dead_letter_path: str | None = None
    skip_bad_records: bool = False
    txn_timeout_s: float = 300.0
    txns_per_batch: int = 1
    orc: OrcWriterOptions = field(default_factory=OrcWriterOptions)

    def __post_init__(self) -> None:
        if self.format not in ("json", "delimited", "regex", "raw"):
            raise ConfigError(f"format must be json, delimited, regex or raw, got {self.format!r}")
        if self.format == "regex" and not self.regex:
            raise ConfigError("format regex needs the regex option")
        if not 1 <= self.txns_per_batch <= MAX_TXNS_PER_BATCH:
            raise ConfigError(
                f"txns_per_batch must be 1..{MAX_TXNS_PER_BATCH}, got {self.txns_per_batch}"
            )
        if not self.sink_id or not all(c.isalnum() or c in "_-." for c in self.sink_id):
            raise ConfigError(
                f"sink_id must be letters, digits, '_', '-' or '.', got {self.sink_id!r}"
            )

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SinkOptions:
        """Parse Spark-style string options (``format``, ``sink.id``, ``deadLetterPath``...)."""
        known = {
            "format": "format", "valuecolumn": "value_column", "delimiter": "delimiter",
            "regex": "regex", "sink.id": "sink_id", "sinkid": "sink_id",
            "deadletterpath": "dead_letter_path", "skipbadrecords": "skip_bad_records",
            "txntimeout": "txn_timeout_s", "txnsperbatch": "txns_per_batch",
        }  # fmt: skip
        kw: dict[str, Any] = {}
        for k, v in options.items():
            name = known.get(k.lower())
            if name is None:
                raise ConfigError(f"unknown sink option {k!r} (known: {sorted(set(known))})")
            if name == "skip_bad_records":
                kw[name] = str(v).lower() in ("1", "true", "yes")
            elif name in ("txn_timeout_s", "txns_per_batch"):
                try:
                    kw[name] = float(v) if name == "txn_timeout_s" else int(v)
                except ValueError as e:
                    raise ConfigError(f"sink option {k!r} must be a number, got {v!r}") from e
            else:
                kw[name] = v
        return cls(**kw)

    @property
    def meta_key(self) -> str:
        return META_PREFIX + self.sink_id


@dataclass(frozen=True)
class _TaskPlan:
    """Everything an executor task needs to write its files (pickled to executors)."""

    location: str
    columns: tuple[tuple[str, str], ...]
    partition_keys: tuple[str, ...]
    bucket_cols: tuple[str, ...]
    num_buckets: int
    bucketing_version: int
    write_ids: tuple[int, ...]  # the batch's write ids, consecutive and ascending
    options: SinkOptions
    has_offsets: bool


@dataclass(frozen=True)
class _RawValue:
    """The ``raw`` format: the record itself is the table's one string or binary column."""

    as_text: bool

    def encode(self, record: bytes) -> tuple[tuple[Any, ...], tuple[str | None, ...]]:
        if not self.as_text:
            return (record,), ()
        try:
            return (record.decode("utf-8"),), ()
        except UnicodeDecodeError as e:
            raise SerializationError(f"raw value is not UTF-8 text: {e}", record=record) from e


class _RawWriter:
    def bind(self, schema: TableSchema, *, partition_columns: Any = ()) -> _RawValue:
        kind = schema.columns[0][1].kind
        if (
            partition_columns
            or len(schema.columns) != 1
            or kind not in ("string", "binary", "varchar")
        ):
            raise ConfigError(
                "format raw needs an unpartitioned table with one string or binary column"
            )
        return _RawValue(as_text=kind != "binary")


def _record_writer(opts: SinkOptions) -> Any:
    from ingest.record_writers import (
        StrictDelimitedInputWriter,
        StrictJsonWriter,
        StrictRegexWriter,
    )

    if opts.format == "raw":
        return _RawWriter()
    if opts.format == "json":
        return StrictJsonWriter()
    if opts.format == "delimited":
        return StrictDelimitedInputWriter(field_delimiter=opts.delimiter)
    return StrictRegexWriter(regex=opts.regex or "")


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

    from acid.bucket_hash import bucket_number

    ctx = TaskContext.get()
    stmt = ctx.partitionId() if ctx is not None else 0
    if stmt >= 4096:
        raise ConfigError("more than 4096 tasks in one micro-batch: repartition to fewer")
    schema = TableSchema.of(list(plan.columns))
    bound = _record_writer(plan.options).bind(schema, partition_columns=plan.partition_keys)
    storage, root = Storage.for_path(plan.location)
    names = list(schema.names)
    bidx = [names.index(c) for c in plan.bucket_cols]
    btypes = [schema.columns[i][1] for i in bidx]
    buffers: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
    offsets: dict[str, dict[str, int]] = {}
    part_names: dict[tuple[str | None, ...], str] = {}
    bad = 0
    dead: list[str] = []
    for batch in batches:
        values = batch.column(plan.options.value_column).to_pylist()
        if plan.has_offsets and batch.num_rows:
            # Vectorized: the max offset per topic-partition of this Arrow batch.
            agg = (
                pa.Table.from_batches([batch.select(["topic", "partition", "offset"])])
                .group_by(["topic", "partition"])
                .aggregate([("offset", "max")])
            )
            cols = (agg.column(c).to_pylist() for c in ("topic", "partition", "offset_max"))
            for t, p, o in zip(*cols, strict=True):
                tp = offsets.setdefault(t, {})
                if o + 1 > tp.get(str(p), -1):
                    tp[str(p)] = o + 1  # the next offset to read, as Spark records it
        for v in values:
            if v is None:
                continue
            rec = v if isinstance(v, bytes) else str(v).encode()
            try:
                row, pvals = bound.encode(rec)
            except SerializationError as e:
                bad += 1
                if plan.options.dead_letter_path or plan.options.skip_bad_records:
                    dead.append(
                        json.dumps({"reason": str(e), "record": rec.decode("utf-8", "replace")})
                    )
                    continue
                raise SerializationError(
                    f"bad record in micro-batch (no dead letter configured): {e}"
                ) from e
            part = ""
            if plan.partition_keys:
                part = part_names.get(pvals, "")
                if not part:
                    part = part_names[pvals] = make_partition_name(plan.partition_keys, list(pvals))
            bucket = (
                bucket_number([row[i] for i in bidx], btypes, plan.num_buckets,
                              bucketing_version=plan.bucketing_version)
                if bidx else 0
            )  # fmt: skip
            buffers.setdefault((part, bucket), []).append(row)
    out_rows: list[dict[str, Any]] = []
    dl_path = ""
    if dead and plan.options.dead_letter_path:
        dstore, droot = Storage.for_path(plan.options.dead_letter_path)
        attempt = ctx.attemptNumber() if ctx is not None else 0
        dl_path = dstore.join(
            droot, f"write_{plan.write_ids[0]:07d}_task_{stmt:04d}_{attempt}.jsonl"
        )
        dstore.makedirs(droot)
        with dstore.create(dl_path, overwrite=True) as f:
            f.write(("\n".join(dead) + "\n").encode())
    wids = plan.write_ids
    d = layout.delta_dir_name(wids[0], wids[-1], statement_id=stmt)
    for (part, bucket), rows in sorted(buffers.items()):
        base = storage.join(root, part) if part else root
        path = storage.join(base, d, layout.bucket_file_name(bucket))
        # A file left by an earlier, failed attempt of this task: that attempt is dead
        # (Spark retries only after a failure; speculation is refused by the driver).
        storage.delete(path)
        storage.delete(layout.side_file_name(path))
        w = AcidFileWriter(
            storage, path, schema, kind="insert", bucket_id=bucket, statement_id=stmt,
            streaming=True, side_file=storage.supports_flush, options=plan.options.orc,
            engine="arrow",
        )  # fmt: skip
        try:
            share, extra = divmod(len(rows), len(wids))
            start = 0
            for i, wid in enumerate(wids):
                end = start + share + (1 if i < extra else 0)
                w.insert(wid, rows[start:end])
                w.flush()  # the txn boundary: intermediate footer + side-file length
                start = end
        except BaseException:
            w.abort()
            raise
        w.close()
        out_rows.append({"partition": part, "path": path, "bucket": bucket, "stmt": stmt,
                         "rows": len(rows), "bad": 0, "offsets": "", "dead_letter": "",
                         "flushes": json.dumps(w.flush_lengths)})  # fmt: skip
    # One extra row carries the task's offsets and bad-record count even without files.
    out_rows.append({"partition": "", "path": "", "bucket": -1, "stmt": stmt, "rows": 0, "bad": bad,
                     "offsets": json.dumps(offsets), "dead_letter": dl_path, "flushes": "[]"})  # fmt: skip
    yield pa.RecordBatch.from_pylist(out_rows, schema=_file_arrow_schema())


def _file_arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("partition", pa.string()), ("path", pa.string()), ("bucket", pa.int32()), ("stmt", pa.int32()),
         ("rows", pa.int64()), ("bad", pa.int64()), ("offsets", pa.string()), ("dead_letter", pa.string()),
         ("flushes", pa.string())]
    )  # fmt: skip


def _crash_point(step: str) -> None:
    """Crash injection for recovery tests: SIGKILL this driver at a named step."""
    if os.environ.get(CRASH_ENV) == step:
        log.warning("crash injection: killing the driver at %s", step)
        os.kill(os.getpid(), signal.SIGKILL)


def _merge_offsets(
    old: Mapping[str, Mapping[str, int]], new: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    out = {t: dict(p) for t, p in old.items()}
    for t, parts in new.items():
        tp = out.setdefault(t, {})
        for p, o in parts.items():
            tp[p] = max(o, tp.get(p, -1))
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
        db, _, name = table.lower().rpartition(".")
        raw = store.get_table_param(db or "default", name, META_PREFIX + sink_id)
    finally:
        store.close()
    return None if raw is None else json.loads(raw)


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
    """

    def __init__(
        self,
        *,
        table: str,
        metastore: str | None = None,
        warehouse: str | None = None,
        options: SinkOptions | None = None,
        lineage: str | None = None,
    ) -> None:
        self.options = options or SinkOptions()
        self.lineage = lineage
        self.config = StoreConfig.resolve(metastore=metastore, warehouse=warehouse)
        db, _, name = table.lower().rpartition(".")
        self.db, self.table_name = db or "default", name
        self.agent = f"{AGENT_PREFIX}{self.db}.{self.table_name}:{self.options.sink_id}"
        self._store: TxnStore | None = None
        self._table: TableDef | None = None
        self.batches_committed = 0
        self.batches_skipped = 0
        self.last_batch_stats: dict[str, Any] = {}

    # --------------------------------------------------------------- driver setup
    def _open(self) -> tuple[TxnStore, TableDef]:
        if self._store is None or self._table is None:
            store = open_store(self.config.metastore_url, warehouse=self.config.warehouse)
            try:
                t = store.get_table(self.db, self.table_name)
                if not t.is_transactional or t.is_insert_only:
                    raise ConfigError(f"{t.full_name} is not a full-ACID table")
                if not t.location:
                    raise ConfigError(f"{t.full_name} has no location")
                # Hive's metastore creates the table directory with the table; a reader of an
                # empty table must find it.
                storage, loc = Storage.for_path(t.location)
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
        storage, root = Storage.for_path(self._table.location)
        dirs = [root]
        if self._table.partition_keys:
            dirs = []
            stack = [(root, 0)]
            while stack:
                d, depth = stack.pop()
                if depth == len(self._table.partition_keys):
                    dirs.append(d)
                    continue
                if storage.exists(d):
                    stack.extend(
                        (e.path, depth + 1)
                        for e in storage.list_dir(d)
                        if e.is_dir and "=" in e.name
                    )
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
        """Driver side: write one micro-batch as one transaction, exactly once."""
        t0 = time.monotonic()
        spark = batch_df.sparkSession
        if str(spark.conf.get("spark.speculation", "false")).lower() == "true":
            raise ConfigError("AcidSink needs spark.speculation=false (a file per task attempt)")
        store, table = self._open()
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
        from ingest.heartbeat import Heartbeater

        k = self.options.txns_per_batch
        txns = store.open_txns(k, user=os.environ.get("USER", "spark"), host=socket.gethostname(),
                               agent_info=self.agent)  # fmt: skip
        committed = False
        hb: Heartbeater | None = None
        try:
            if len(txns) != k:
                raise TransactionError(f"asked for {k} txns, the metastore opened {len(txns)}")
            by_txn = store.allocate_write_ids(txns, self.db, self.table_name)
            write_ids = tuple(by_txn[t] for t in txns)
            if write_ids != tuple(range(write_ids[0], write_ids[0] + k)):
                # One allocation call hands out consecutive ids; the delta name relies on it.
                raise TransactionError(f"write ids {write_ids} of one batch are not consecutive")
            for txn in txns:
                req = LockRequest(
                    components=(LockComponent(LockType.SHARED_READ, self.db, self.table_name, None,
                                              operation=DataOperationType.INSERT,
                                              is_dynamic_partition_write=bool(table.partition_keys)),),
                    txn_id=txn, agent_info=self.agent,
                )  # fmt: skip
                if store.lock(req, wait_s=60).state != LockState.ACQUIRED:
                    raise TransactionError(
                        f"Unable to acquire lock on {table.full_name} for txn {txn}"
                    )
            _crash_point("after_open")
            lost: list[frozenset[int]] = []
            hb = Heartbeater(open_store(store.url), interval_s=self.options.txn_timeout_s / 2,
                             txn_range=lambda: (txns[0], txns[-1]), on_lost=lost.append)  # fmt: skip
            hb.start()
            _crash_point("during_heartbeat")
            plan = _TaskPlan(
                location=table.location or "",
                columns=table.columns,
                partition_keys=table.partition_names,
                bucket_cols=table.bucket_cols,
                num_buckets=table.num_buckets,
                bucketing_version=table.bucketing_version,
                write_ids=write_ids,
                options=self.options,
                has_offsets={"topic", "partition", "offset"} <= set(batch_df.columns),
            )
            cols = [self.options.value_column] + (
                ["topic", "partition", "offset"] if plan.has_offsets else []
            )
            files = (
                batch_df.select(*cols)
                .mapInArrow(lambda it, plan=plan: _write_task(plan, it), FILE_SCHEMA)
                .collect()
            )
            _crash_point("after_files")
            if lost:
                raise TransactionError(
                    f"txns {sorted(lost[0])} were aborted while the batch ran (heartbeat lost)"
                )
            rows = sum(int(f["rows"]) for f in files)
            bad = sum(int(f["bad"]) for f in files)
            offsets: dict[str, dict[str, int]] = dict((last or {}).get("offsets") or {})
            for f in files:
                if f["offsets"]:
                    offsets = _merge_offsets(offsets, json.loads(f["offsets"]))
            parts = sorted({f["partition"] for f in files if f["path"] and f["partition"]})
            if parts:
                # Every file holds rows of every txn of the batch. Registers the partitions
                # in the catalog too (Hive's addDynamicPartitions).
                for txn, wid in zip(txns, write_ids, strict=True):
                    store.add_dynamic_partitions(txn, wid, self.db, self.table_name, parts,
                                                 DataOperationType.INSERT)  # fmt: skip
            wrange = [write_ids[0], write_ids[-1]]
            value = json.dumps({"sink_id": self.options.sink_id, "lineage": self.lineage, "batch_id": batch_id, "offsets": offsets,
                                "write_ids": wrange, "txn_ids": [txns[0], txns[-1]], "rows": rows, "bad_records": bad})  # fmt: skip
            store.commit_txns(
                txns, key=self.options.meta_key, value=value, db=self.db, table=self.table_name
            )
            committed = True
            _crash_point("after_commit")
            self.batches_committed += 1
            self.last_batch_stats = {"batch_id": batch_id, "txn_ids": list(txns), "write_ids": wrange, "rows": rows,
                                     "bad_records": bad, "files": sum(1 for f in files if f["path"]),
                                     "partitions": parts, "seconds": time.monotonic() - t0,
                                     # the length at each txn boundary (intermediate footer) per file
                                     "flush_lengths": {f["path"]: json.loads(f["flushes"]) for f in files if f["path"]}}  # fmt: skip
            log.info("batch %s: %s rows in write ids %s..%s (%s bad)", batch_id, rows, *wrange, bad)
        except BaseException:
            if not committed:
                self._abort(txns, store)
            raise
        finally:
            if hb is not None:
                hb.stop()

    def _abort(self, txns: list[int], store: TxnStore) -> None:
        try:
            wids = set()
            for txn in txns:
                wid = store.write_id_for_txn(txn, self.db, self.table_name)
                store.abort_txn(txn, reason="micro-batch failed before commit")
                if wid is not None:
                    wids.add(wid)
            self._delete_writes(wids)
        except (AcidStreamError, OSError) as e:
            log.error("could not abort txns %s after a failed batch: %s (the reaper will)", txns, e)

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
