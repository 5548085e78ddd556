"""``UpsertSink``: an exactly-once ``foreachBatch`` sink applying change events by key.

Mode ``upsert`` of the sink (``SinkOptions(mode="upsert")``, ``sink.mode: upsert`` of the
Kafka job; ``docs/cdc.md``). Each micro-batch:

1. driver: skip the batch if the table already records it as committed in this lineage
   (the same table parameter ``SinkOptions.meta_key`` and JSON shape as ``AcidSink``, so
   ``committed_offsets()`` and the job's restart from the table's offsets work alike);
2. executors (``mapInArrow``): every task parses its records into change events
   (``acidstream.ingest.change_events``: Debezium envelopes or plain JSON rows), writes
   its bad records to its dead-letter file, collapses its events to the last one per key
   and returns them as one Arrow IPC blob with its Kafka offsets;
3. driver: collapses the tasks' events again and applies them in ONE txn
   (:func:`acidstream.mutation.changes.apply_changes`: EXCL_WRITE lock, retries on a
   write conflict), whose commit stores ``{sink id, lineage, batch id, offsets, ...}``
   atomically with the data: a crash anywhere leaves the table at its last committed batch.

The offsets recorded are max offset + 1 per topic-partition over ALL records of the batch
(bad records and tombstones included). Runs on the driver, except ``_parse_task``, which
runs on executors.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from acidstream.acid import faults
from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.lookup_cache import LookupCache
from acidstream.ingest.change_events import (
    EVENT_TIME_COLUMN,
    ChangeParser,
    ChangeSpec,
    order_tombstones,
)
from acidstream.mutation.changes import ChangeOptions, ChangeResult, apply_changes, collapse
from acidstream.sinks.foreach_batch import (
    AcidSink,
    _drain_job_group,
    _job_group,
    _merge_offsets,
    batch_offsets,
    whole_task,
)
from acidstream.txn.catalog import TableDef
from acidstream.txn.storage_options import StorageOptions
from acidstream.txn.table_key import table_key

__all__ = ["CRASH_POINTS", "UpsertSink"]

log = logging.getLogger(__name__)

CRASH_POINTS = ("upsert.after_parse", "upsert.before_commit", "upsert.after_commit")
"""The upsert sink's fault-injection steps (``acidstream.acid.faults``), in batch order."""
TASK_SCHEMA = (
    "events binary, n_events long, rows long, bad long, offsets string, dead_letter string"
)
TASK_COLUMNS = ["events", "n_events", "rows", "bad", "offsets", "dead_letter"]
"""The columns of :data:`TASK_SCHEMA`: a micro-batch with exactly these was parsed already."""


@dataclass(frozen=True, kw_only=True)
class _ParsePlan:
    """What an executor task needs to parse its records (pickled to executors)."""

    spec: ChangeSpec
    columns: tuple[tuple[str, str], ...]
    partition_keys: tuple[tuple[str, str], ...]
    key: tuple[str, ...]
    ordering: str | None
    source: str  # db.table, for dead letters
    dead_letter_path: str | None
    skip_bad_records: bool
    # Dead-letter file: <prefix>_t<task>.jsonl, or, read by the Kafka source fused with
    # the parse (``upsert_source``), <prefix>_<topic>-<partition>-<start>.jsonl: either
    # way a retried task rewrites it whole.
    file_prefix: str
    value_column: str
    # The warehouse filesystem's options, for the dead letters (pickled to executors).
    storage_options: StorageOptions = field(default_factory=StorageOptions)


def _parser(plan: _ParsePlan) -> ChangeParser:
    from acidstream.acid.schema import TableSchema

    return ChangeParser(
        plan.spec, TableSchema.of(list(plan.columns)), partition_columns=plan.partition_keys
    )


def _parse_task(
    plan: _ParsePlan, batches: Iterator[Any], *, dead_letter_name: str | None = None
) -> Iterator[Any]:
    """Executor side: parse this task's records into change events (one Arrow IPC blob,
    collapsed per key), dead-letter the bad ones, and track the Kafka offsets.
    ``dead_letter_name``: the dead-letter file's name (default: by the task's index)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark import TaskContext

    from acidstream.ingest.dead_letter import DeadLetterWriter

    ctx = TaskContext.get()
    task = ctx.partitionId() if ctx is not None else 0
    parser = _parser(plan)
    dead: DeadLetterWriter | None = None
    if plan.dead_letter_path:
        # One file per task and batch, without the attempt: a retried task rewrites it
        # whole, so a record is never dead-lettered twice.
        dead = DeadLetterWriter(
            plan.dead_letter_path,
            source=plan.source,
            file_name=dead_letter_name or f"{plan.file_prefix}_t{task:04d}.jsonl",
            storage_options=plan.storage_options,
        )
    offsets: dict[str, dict[str, int]] = {}
    pieces: list[pa.Table] = []
    rows = bad = 0
    options = ChangeOptions(key=plan.key, ordering=plan.ordering)
    for batch in whole_task(batches):  # one parse of the task's whole micro-batch
        rows += batch.num_rows
        if "topic" in batch.schema.names and "offset" in batch.schema.names:
            offsets = _merge_offsets(offsets, batch_offsets(batch))
        parsed = parser.parse(batch, value_column=plan.value_column)
        if parsed.rejected:
            values = batch.column(plan.value_column)
            where = _positions(batch, [i for i, _ in parsed.rejected])
            for (i, reason), pos in zip(parsed.rejected, where, strict=True):
                bad += 1
                raw = values[i].as_py()
                record = (
                    b"" if raw is None else raw if isinstance(raw, bytes) else str(raw).encode()
                )
                if dead is not None:
                    dead.add(record, reason, position=pos)
                elif plan.skip_bad_records:
                    log.warning("skipped bad change event at %s: %s", pos or "?", reason)
                else:
                    raise SerializationError(
                        f"bad change event {pos} in micro-batch (no dead letter configured): {reason}"
                    )
        if parsed.events.num_rows:
            pieces.append(parsed.events)
    if dead is not None:
        dead.close()
    events = pa.concat_tables(pieces) if pieces else parser.events_schema.empty_table()
    n_events = events.num_rows
    if n_events:
        # Each key's last event, tombstones aside: what a tombstone stands for depends on
        # its key's events of the whole batch (order_tombstones, on the driver), and the
        # winner of every task's events is all it needs of them.
        tomb = _tombstones(events, plan.ordering)
        if tomb is not None:
            events = pa.concat_tables(
                [collapse(events.filter(pc.invert(tomb)), options), events.filter(tomb)]
            )
        else:
            events = collapse(events, options)  # keeps every column: the driver collapses again
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, events.schema) as w:
        w.write_table(events)
    out = {"events": sink.getvalue(), "n_events": n_events, "rows": rows, "bad": bad,
           "offsets": json.dumps(offsets), "dead_letter": dead.path if dead is not None and dead.count else ""}  # fmt: skip
    yield pa.RecordBatch.from_pylist([out], schema=_task_arrow_schema())


def _tombstones(events: Any, ordering: str | None) -> Any:
    """Executor side: the mask of the tombstones (deletes without an ordering value), or
    None when there are none (or no ordering: then Kafka order places them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from acidstream.mutation.changes import DELETE_COLUMN

    if ordering is None:
        return None
    mask = pc.and_(
        pc.fill_null(events.column(DELETE_COLUMN), False), events.column(ordering).is_null()
    )
    mask = mask.combine_chunks() if isinstance(mask, pa.ChunkedArray) else mask
    return mask if pc.any(mask).as_py() else None


def _task_arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("events", pa.binary()), ("n_events", pa.int64()), ("rows", pa.int64()), ("bad", pa.int64()),
         ("offsets", pa.string()), ("dead_letter", pa.string())]
    )  # fmt: skip


def _positions(batch: Any, rows: list[int]) -> list[str]:
    """``topic/partition@offset`` of some rows (empty when the batch has no offsets)."""
    names = batch.schema.names
    if not {"topic", "partition", "offset"} <= set(names):
        return [""] * len(rows)
    cols = [batch.column(c) for c in ("topic", "partition", "offset")]
    return [f"{cols[0][i].as_py()}/{cols[1][i].as_py()}@{cols[2][i].as_py()}" for i in rows]


class UpsertSink(AcidSink):
    """The ``foreachBatch`` function of mode upsert: ``foreachBatch(UpsertSink(...))``.

    Same constructor as :class:`~acidstream.sinks.foreach_batch.AcidSink` (``options``
    must have ``mode="upsert"``); runs on the driver. ``last_batch_stats`` has
    ``AcidSink``'s keys plus the change counts (``docs/cdc.md``, "Sink stats").

    Raises (at the first batch, when the table is opened):
        ConfigError: no key (neither ``key`` nor the table's ``acidstream.key``), a key or
            ordering that is not a table column, ``ordering_guard`` with an ordering the
            table does not store, a bad ``delete_when``.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.options.mode != "upsert":
            raise ConfigError("UpsertSink needs SinkOptions(mode='upsert')")
        self._spec: ChangeSpec | None = None
        self._change: ChangeOptions | None = None
        # What each batch's key lookup learned of the table's files (immutable), for the
        # next batch's: the base and earlier deltas are decoded once, not every batch.
        # Each batch's txn still picks the files from its own snapshot (a compaction or
        # another writer's commit in between is seen).
        self.lookup_cache = LookupCache()
        self._fused_plan: _ParsePlan | None = None

    def _bind(self, table: TableDef) -> tuple[ChangeSpec, ChangeOptions]:
        """Driver side, once: the key and ordering checked against the table."""
        if self._spec is not None and self._change is not None:
            return self._spec, self._change
        opts = self.options
        key = opts.key
        ordering = opts.ordering
        if key is None:
            tkey = table_key(table)
            if tkey is None:
                raise ConfigError(
                    f"key: mode upsert needs key columns (sink.key) or the table property "
                    f"acidstream.key on {table.full_name}"
                )
            key = tkey.columns
            if ordering is None and opts.format == "json":
                ordering = tkey.ordering
        spec = ChangeSpec(
            format=opts.format, key=key, ordering=ordering, delete_when=opts.delete_when
        )
        parser = ChangeParser(spec, table.schema, partition_columns=table.partition_keys)
        if opts.ordering_guard:
            col = parser.ordering_column
            if col is None or col not in dict(table.columns):
                raise ConfigError(
                    f"ordering_guard: the table must store the ordering {ordering!r} "
                    f"(a column named {ordering.split('.')[-1] if ordering else ordering!r})"
                )
        self._spec = spec
        self._change = ChangeOptions(
            key=spec.key, ordering=parser.ordering_column, ordering_guard=opts.ordering_guard
        )
        return self._spec, self._change

    def _plan(
        self,
        table: TableDef,
        spec: ChangeSpec,
        change: ChangeOptions,
        *,
        batch_id: int | None = None,
    ) -> _ParsePlan:
        """Driver side: what the parse tasks need. Dead-letter files are named by batch
        and task, or (``batch_id`` None: the fused source's plan, made before any batch)
        by the range each task reads."""
        opts = self.options
        lineage_tag = hashlib.sha1(str(self.lineage).encode()).hexdigest()[:8]
        prefix = f"upsert_{opts.sink_id}_{lineage_tag}"
        return _ParsePlan(
            spec=spec,
            columns=tuple((n, str(t)) for n, t in table.columns),
            partition_keys=tuple((n, str(t)) for n, t in table.partition_keys),
            key=change.key,
            ordering=change.ordering,
            source=str(self.name),
            dead_letter_path=opts.dead_letter_path,
            skip_bad_records=opts.skip_bad_records,
            file_prefix=prefix if batch_id is None else f"{prefix}_b{batch_id:07d}",
            value_column=opts.value_column,
            storage_options=self.config.storage_options,
        )

    def fused_source(self, spark: Any) -> str:
        """Driver side: register, in ``spark``, the ``acidkafka`` source with this sink's
        parse fused into its read (``acidstream.sinks.upsert_source``) and return its
        ``format`` name. A query reading it hands this sink micro-batches already parsed
        on the executors: one pass over the records in the Python worker that fetched
        them, instead of a second worker (``mapInArrow``) the JVM copies every record to.
        Opens the table now: a bad key or ordering fails here, before the query starts."""
        from acidstream.sinks.upsert_source import register_upsert_source

        _, table = self._open()
        spec, change = self._bind(table)
        self._fused_plan = self._plan(table, spec, change)
        return register_upsert_source(spark, self._fused_plan)

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        """Driver side: apply one micro-batch of change events in one txn, exactly once.

        ``batch_df``: the Kafka source's records (parsed here, on the executors), or the
        parse tasks' results when this sink's :meth:`fused_source` read them."""
        import pyarrow as pa

        t0 = time.monotonic()
        spark = batch_df.sparkSession
        if str(spark.conf.get("spark.speculation", "false")).lower() == "true":
            # Two attempts of one task would write one dead-letter file at once.
            raise ConfigError("UpsertSink needs spark.speculation=false (a file per task)")
        store, table = self._open()
        spec, change = self._bind(table)
        last = self._last_committed(store)
        if (
            last is not None
            and last.get("lineage") == self.lineage
            and int(last["batch_id"]) >= batch_id
        ):
            self.batches_skipped += 1
            log.info("batch %s already committed (last %s): skipped", batch_id, last["batch_id"])
            return
        opts = self.options
        fused = batch_df.columns == TASK_COLUMNS
        if fused:
            # Parsed by this sink's fused source with the plan it made (the sink binds its
            # table once, so that plan is this batch's too); nothing else may hand it results.
            if self._fused_plan is None:
                raise ConfigError(
                    f"a micro-batch of parse results for {self.name} was not read by this "
                    "sink's source (UpsertSink.fused_source)"
                )
        elif opts.value_column not in batch_df.columns:
            raise ConfigError(f"the micro-batch has no column {opts.value_column!r}")
        plan = self._plan(table, spec, change, batch_id=batch_id)
        cols = [opts.value_column] + [
            c for c in ("key", "topic", "partition", "offset", "timestamp") if c in batch_df.columns
        ]
        group = f"acidstream-upsert-{self.name}-{batch_id}-{time.time_ns()}"
        t_job = time.monotonic()
        try:
            with _job_group(
                spark.sparkContext, group, f"acidstream upsert {self.name} batch {batch_id}"
            ):
                tasks = (
                    batch_df.collect()
                    if fused
                    else batch_df.select(*cols)
                    .mapInArrow(lambda it, plan=plan: _parse_task(plan, it), TASK_SCHEMA)
                    .collect()
                )
        except BaseException:
            _drain_job_group(spark.sparkContext, group)
            raise
        t_job = time.monotonic() - t_job
        faults.point("upsert.after_parse")
        pieces = [pa.ipc.open_stream(r["events"]).read_all() for r in tasks if r["n_events"]]
        rows = sum(int(r["rows"]) for r in tasks)
        bad = sum(int(r["bad"]) for r in tasks)
        n_events = sum(int(r["n_events"]) for r in tasks)
        offsets: dict[str, dict[str, int]] = dict((last or {}).get("offsets") or {})
        for r in tasks:
            if r["offsets"]:
                offsets = _merge_offsets(offsets, json.loads(r["offsets"]))
        events = pa.concat_tables(pieces) if pieces else None
        if events is not None:
            events = collapse(order_tombstones(events, change.key, change.ordering), change)
        if events is None:
            events = _parser(plan).events_schema.empty_table()
        times = events.column(EVENT_TIME_COLUMN).to_numpy(zero_copy_only=False)
        times = np.asarray(
            times[~np.isnan(times)] if times.dtype.kind == "f" else times, dtype=np.int64
        )
        events = events.drop_columns([EVENT_TIME_COLUMN])

        def commit_param(result: ChangeResult) -> tuple[str, str]:
            value = {"sink_id": opts.sink_id, "lineage": self.lineage, "batch_id": batch_id,
                     "offsets": offsets, "write_ids": [result.write_id, result.write_id],
                     "txn_ids": [result.txn_id, result.txn_id], "rows": rows, "bad_records": bad, "mode": "upsert", "events": n_events,
                     "inserted": result.inserted, "updated": result.updated, "deletes": result.deleted,
                     "absent_deletes": result.absent_deletes, "skipped_late": result.skipped_late}  # fmt: skip
            faults.point("upsert.before_commit")
            return opts.meta_key, json.dumps(value)

        # The sink's agent on the txn: recover() at the next start aborts it if this driver
        # dies holding it (else its EXCL_WRITE lock would wait out the metastore's timeout).
        t_apply = time.monotonic()
        result = apply_changes(
            store, self.name, events, change, commit_param=commit_param, agent_info=self.agent,
            cache=self.lookup_cache,
        )  # fmt: skip
        t_apply = time.monotonic() - t_apply
        committed_at = time.time()
        faults.point("upsert.after_commit")
        self.batches_committed += 1
        self.last_batch_stats = {
            "batch_id": batch_id, "txn_ids": [result.txn_id, result.txn_id], "write_ids": [result.write_id, result.write_id],
            "rows": rows, "bad_records": bad, "files": len(result.files_written),
            "partitions": list(result.partitions), "seconds": time.monotonic() - t0,
            "events": n_events, "upserts": result.upserts, "inserted": result.inserted,
            "updated": result.updated, "deletes": result.deleted, "absent_deletes": result.absent_deletes,
            "skipped_late": result.skipped_late, "dead_letters": bad if opts.dead_letter_path else 0,
            "committed_at": committed_at, "event_times_ms": times, "attempts": result.attempts,
            "spark_seconds": t_job, "apply_seconds": t_apply,
        }  # fmt: skip
        log.info(
            "batch %s: %s events (%s upserts, %s deletes, %s late, %s bad) in write id %s",
            batch_id, n_events, result.upserts, result.deleted, result.skipped_late, bad, result.write_id,
        )  # fmt: skip
