"""MERGE with a Spark DataFrame as source: the join runs on Spark, executors write the files.

``t.merge(spark_df, on=...)...execute()`` (and ``acidstream.spark.merge``) run here
instead of in the driver's memory (``acidstream.mutation.merge``). The statement is the
same: one txn and one write id (``acidstream.mutation.run.run_mutation``: SHARED_WRITE
lock, the txn's snapshot, retries on a commit conflict, idempotency keys), the WHEN
clauses compiled and checked by :class:`~acidstream.mutation.merge.MergePlan` before the
txn opens, and the files laid out as the Python engine lays them out
(:class:`~acidstream.mutation.write.MutationFiles` writes them, on the executors):

1. driver: the source's key columns, cast to the target's key types, give the
   partitions (when the keys include every partition column) and buckets (when the
   table is bucketed on key columns) the source can match: one small Spark job;
2. executors (``mapInArrow``, one task per pruned partition and bucket): the target's
   rows with their ROW__ID in the txn's snapshot (``acidstream.mutation.target.read_rows``);
3. Spark: ``source LEFT JOIN target`` on the keys (an inner join without WHEN NOT
   MATCHED clauses; NULL keys never match), repartitioned by the key, so that every
   pair of one target row is in one task: there a target row matched twice raises
   ``CardinalityViolationError`` (Hive's ``hive.merge.cardinality.check``), and each
   pair takes the first WHEN clause whose condition holds (as the Python engine);
   the output is one event per delete event and per new row, keyed by the file it
   goes to (statement id, kind, partition, writer id or bucket);
4. Spark: events repartitioned by that file key and sorted by it and by (source row,
   target row); each executor task writes its files whole with ``MutationFiles``
   (delete events sorted by ROW__ID, new rows in source order: the same bytes as the
   Python engine's files for the same inputs) and returns their paths and counts;
5. driver: the txn commits with the partitions written, or, on any failure, the job's
   tasks are cancelled and drained, the write id's directories deleted, the txn aborted.

Values cross Spark as Spark types; timestamps travel as int64 (Hive keeps nanoseconds,
Spark microseconds). Keys are compared after Spark's cast of the source key to the
target key's type (ANSI mode: a value that does not fit fails the job). Runs on the
driver, except the functions named ``_*_task``, which run on executors.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid import faults, layout
from acidstream.acid.bucket_hash import bucket_numbers, bucket_numbers_arrow
from acidstream.acid.errors import CardinalityViolationError, ConfigError
from acidstream.acid.partitions import Partition
from acidstream.acid.read_plan import ROW_ID_COLUMN
from acidstream.acid.table_name import TableName
from acidstream.mutation.merge import MergePlan, MergeSpec
from acidstream.mutation.results import MergeResult
from acidstream.mutation.run import MutationRun, run_mutation
from acidstream.mutation.target import Target, read_rows, row_schema
from acidstream.mutation.write import MutationFiles, by_partition, old_buckets
from acidstream.txn.locks import DataOperationType
from acidstream.txn.store import TxnStore

__all__ = [
    "TASK_CRASH_POINTS",
    "is_spark_dataframe",
    "spark_merge_rows",
    "spark_source_schema",
]

log = logging.getLogger(__name__)

TASK_CRASH_POINTS = ("merge.task_after_files",)
"""The executor-side fault-injection step: a write task's files are whole, not reported."""

DELETE, INSERT = 0, 1
"""Event kinds: a delete event (of a matched target row), a new row (insert or update)."""

_CARDINALITY = "CardinalityViolationError"


def is_spark_dataframe(obj: object) -> bool:
    """Whether ``obj`` is a Spark DataFrame (classic or Spark Connect), told by its class
    so that pyspark is never imported for a pyarrow or pandas source."""
    t = type(obj)
    return t.__name__ == "DataFrame" and t.__module__.startswith("pyspark.sql")


def spark_source_schema(df: Any) -> pa.Schema:
    """The Arrow schema of a Spark DataFrame's rows with lower-case names: what the
    MERGE's clauses are compiled against (driver side, before any txn).

    Raises:
        ConfigError: two columns whose names differ only in case.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(df.schema)
    names = [n.lower() for n in schema.names]
    if len(set(names)) != len(names):
        raise ConfigError(f"source columns differ only in case: {schema.names}")
    return pa.schema([f.with_name(n) for f, n in zip(schema, names, strict=True)])


# ---------------------------------------------------------------- Spark <-> Arrow types


def _carried(t: pa.DataType) -> pa.DataType:
    """The Arrow type a target value crosses Spark as: timestamps as int64 in their own
    unit (Spark's timestamps are microseconds, Hive's nanoseconds), the rest as they are."""
    return pa.int64() if pa.types.is_timestamp(t) else t


def _spark_type(t: pa.DataType) -> Any:
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(_carried(t))


def _to_carried(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    return col.cast(pa.int64()) if pa.types.is_timestamp(col.type) else col


def _struct_type(fields: Sequence[tuple[str, pa.DataType]]) -> Any:
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(n, _spark_type(t), True) for n, t in fields])


def _arrow_of(spark_type: Any) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_type)


def _batches(t: pa.Table, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """``t`` (columns in ``schema``'s order) as record batches of ``schema``'s types."""
    out = pa.Table.from_arrays(
        [c.cast(f.type) if c.type != f.type else c for c, f in zip(t.columns, schema, strict=True)],
        schema=schema,
    )
    yield from out.to_batches()


def _table(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    got = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(got) if got else schema.empty_table()


# ---------------------------------------------------------------- the plan executors get


@dataclass(frozen=True, kw_only=True)
class _Job:
    """What executor tasks need (pickled into each task): the MERGE compiled against the
    source's schema, the table in the txn's snapshot, the write id, the units to read."""

    plan: MergePlan
    target: Target
    write_id: int
    units: tuple[tuple[Partition, int | None], ...]
    source_cols: tuple[str, ...]  # lower-case, in the plan's source schema order
    key_cols: tuple[str, ...]  # the target's key column of each key pair

    @functools.cached_property
    def target_schema(self) -> pa.Schema:
        """The rows a read returns (data columns, then partition columns as strings)."""
        return self.target.schema

    def read_fields(self) -> list[tuple[str, pa.DataType]]:
        """The target side of the join: ``t__<col>``, its ROW__ID and its read ordinal."""
        from acidstream.acid.read_plan import ROW_ID_TYPE

        return (
            [(f"t__{f.name}", f.type) for f in self.target_schema]
            + [("t__" + ROW_ID_COLUMN, ROW_ID_TYPE), ("__to", pa.int64())]
        )  # fmt: skip

    def event_fields(self) -> list[tuple[str, pa.DataType]]:
        """An event: its file key, its order, a delete event's ROW__ID, a new row's values."""
        from acidstream.acid.read_plan import ROW_ID_TYPE

        return [
            ("stmt", pa.int32()), ("kind", pa.int32()), ("part", pa.string()),
            ("bucket", pa.int32()), ("so", pa.int64()), ("to", pa.int64()),
            ("rid", ROW_ID_TYPE),
        ] + [(f"r__{f.name}", f.type) for f in self.target_schema]  # fmt: skip


FILE_FIELDS = (
    ("stmt", pa.int32()), ("kind", pa.int32()), ("part", pa.string()),
    ("path", pa.string()), ("rows", pa.int64()),
)  # fmt: skip
"""What a write task reports: one row per file (``rows`` 0) and one per file key with its
event count (``path`` empty)."""


# ---------------------------------------------------------------- executor tasks


def _read_task(job: _Job, schema: pa.Schema, batches: Iterator[Any]) -> Iterator[Any]:
    """Executor side: the target rows of this task's units (their ids in ``batches``),
    with ROW__ID, in the txn's snapshot; ``__to`` orders them as the read did."""
    for b in batches:
        for u in b.column(0).to_pylist():
            part, bucket = job.units[u]
            rows = read_rows(job.target, [part], buckets=None if bucket is None else [bucket])
            if rows.num_rows == 0:
                continue
            cols = [_to_carried(rows.column(f.name)) for f in job.target_schema]
            cols.append(rows.column(ROW_ID_COLUMN))
            cols.append(pa.array((u << 32) + np.arange(rows.num_rows, dtype=np.int64)))
            yield from _batches(pa.Table.from_arrays(cols, names=schema.names), schema)


def _from_carried(col: pa.ChunkedArray | pa.Array, f: pa.Field) -> pa.ChunkedArray | pa.Array:
    return col.cast(f.type) if col.type != f.type else col


def _clause_task(
    job: _Job, in_schema: pa.Schema, out_schema: pa.Schema, batches: Iterator[Any]
) -> Iterator[Any]:
    """Executor side: this task's joined (source row, target row) pairs -> events.

    Every pair of one target row is in this task (the input is partitioned by key), so
    the cardinality check is local: a ROW__ID twice among the matched pairs raises
    ``CardinalityViolationError`` and the job fails, nothing committed."""
    plan = job.plan
    joined = _table(batches, in_schema)
    rid = joined.column("t__" + ROW_ID_COLUMN)
    is_matched = pc.is_valid(rid)
    matched = joined.filter(is_matched)
    if plan.matched and matched.num_rows:
        ids = matched.column("t__" + ROW_ID_COLUMN).combine_chunks()
        keys = pa.table({k: pc.struct_field(ids, k) for k in ("writeid", "bucketid", "rowid")})
        counts = keys.group_by(list(keys.column_names)).aggregate([([], "count_all")])
        worst = pc.max(counts.column("count_all")).as_py()
        if worst is not None and worst > 1:
            raise CardinalityViolationError(
                f"{_CARDINALITY}: MERGE into {job.target.table.full_name}: a target row is "
                f"matched by {worst} source rows (hive.merge.cardinality.check); nothing "
                "was written"
            )
    events: list[pa.Table] = []
    schema = out_schema
    if plan.matched and matched.num_rows:
        trow = pa.Table.from_arrays(
            [matched.column("t__" + ROW_ID_COLUMN)]
            + [_from_carried(matched.column(f"t__{f.name}"), f) for f in job.target_schema],
            names=[ROW_ID_COLUMN, *job.target_schema.names],
        )
        pairs = pa.Table.from_arrays(
            list(trow.drop_columns([ROW_ID_COLUMN]).columns)
            + [matched.column(f"s__{n}") for n in job.source_cols],
            schema=plan.joined_schema,
        )
        so, to = matched.column("__so"), matched.column("__to")
        for a in plan.matched_rows(job.target, pairs, trow.column(ROW_ID_COLUMN)):
            hit = trow.filter(a.mask)
            order = pa.table({"so": so, "to": to}).filter(a.mask)
            hit = hit.append_column("__so", order.column("so")).append_column(
                "__to", order.column("to")
            )
            for part, group in by_partition(job.target, hit):
                ids = group.column(ROW_ID_COLUMN).combine_chunks()
                writer = old_buckets(ids).to_numpy(zero_copy_only=False)
                events.append(_events(schema, a.statement_id, DELETE, part, writer, group, rid=ids))
            if a.rows is not None:
                # New versions whose bucketing columns stay keep their rows' buckets
                # (a.buckets, the plan's decision); the others are hashed.
                events += _new_rows(job, schema, a.statement_id, a.rows, order, buckets=a.buckets)
    if plan.not_matched:
        rest = joined.filter(pc.invert(is_matched))
        qualified = pa.Table.from_arrays(
            [rest.column(f"s__{n}") for n in job.source_cols], schema=plan.source_schema
        )
        so = rest.column("__so")
        order = pa.table({"so": so, "to": pa.array(np.zeros(len(so), dtype=np.int64))})
        for a in plan.not_matched_rows(qualified):
            assert a.rows is not None
            events += _new_rows(job, schema, a.statement_id, a.rows, order.filter(a.mask))
    for e in events:
        yield from e.to_batches()


def _new_rows(
    job: _Job,
    schema: pa.Schema,
    stmt: int,
    rows: pa.Table,
    order: pa.Table,
    *,
    buckets: pa.Array | None = None,
) -> list[pa.Table]:
    """Events of new rows (``Target.schema``'s columns), keyed by the partition and bucket
    each goes to: ``buckets`` when given, else Hive's hash of the bucketing columns (as
    ``MutationFiles.insert_rows`` places them)."""
    pl = job.target.placement
    pnames = list(job.target.partition_names)
    ndata = len(job.target.table.schema.columns)
    rows = rows.append_column("__so", order.column("so")).append_column("__to", order.column("to"))
    if buckets is not None:
        rows = rows.append_column("__kept", buckets)
    groups: list[tuple[str, pa.Table]] = [("", rows)]
    if pnames:
        groups = [
            (pl.partition_dir(list(values)), rows.take(idx))
            for values, idx in pl.partition_groups(rows.select(pnames))
        ]
    out = []
    for part, g in groups:
        if buckets is not None:
            bucket = g.column("__kept").to_numpy().astype(np.int64)
        else:
            # Hive's hash of the bucketing columns, as the writer would place each row.
            bucket = np.zeros(g.num_rows, dtype=np.int64)
            idx = pa.array(np.arange(g.num_rows, dtype=np.int64))
            data = g.select(list(range(ndata))).append_column("__i", idx)
            for b, bdata in pl.bucket_groups(data):
                bucket[bdata.column("__i").to_numpy()] = b
        out.append(_events(schema, stmt, INSERT, part, bucket, g, rid=None))
    return out


def _events(
    schema: pa.Schema,
    stmt: int,
    kind: int,
    part: str,
    bucket: np.ndarray,
    rows: pa.Table,
    *,
    rid: pa.Array | None,
) -> pa.Table:
    n = rows.num_rows
    cols: list[Any] = [
        pa.array(np.full(n, stmt, dtype=np.int32)),
        pa.array(np.full(n, kind, dtype=np.int32)),
        pa.array([part] * n, pa.string()),
        pa.array(bucket.astype(np.int32)),
        rows.column("__so"),
        rows.column("__to"),
        rid if rid is not None else pa.nulls(n, schema.field("rid").type),
    ]
    for f in schema:
        if not f.name.startswith("r__"):
            continue
        name = f.name[3:]
        if kind == INSERT:
            cols.append(_to_carried(rows.column(name)).cast(f.type))
        else:
            cols.append(pa.nulls(n, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def _write_task(job: _Job, in_schema: pa.Schema, batches: Iterator[Any]) -> Iterator[Any]:
    """Executor side: write the files of this task's file keys, each whole.

    The input is sorted by (file key, source row, target row); a file key's events are
    in this task only, so its files are this task's alone: a file left by a dead attempt
    of this task is deleted before it is written again."""
    events = _table(batches, in_schema)
    files = MutationFiles(job.target, job.write_id)
    out: list[dict[str, Any]] = []
    if events.num_rows:
        keys = events.select(["stmt", "kind", "part", "bucket"]).to_pylist()
        starts = [i for i in range(len(keys)) if i == 0 or keys[i] != keys[i - 1]]
        for s, e in zip(starts, [*starts[1:], len(keys)], strict=True):
            k = keys[s]
            group = events.slice(s, e - s)
            stmt, kind, part = int(k["stmt"]), int(k["kind"]), str(k["part"])
            _clear(job, stmt, kind, part, int(k["bucket"]))
            before = len(files.paths)
            if kind == DELETE:
                n = files.delete_events(part, group.column("rid"), stmt)
            else:
                rows = pa.Table.from_arrays(
                    [_from_carried(group.column(f"r__{f.name}"), f) for f in job.target_schema],
                    schema=job.target_schema,
                )
                # The bucket each row was given (hashed, or kept from its old version).
                kept = group.column("bucket") if job.target.table.num_buckets > 0 else None
                n = files.insert_rows(rows, stmt, buckets=kept)
            out.append({"stmt": stmt, "kind": kind, "part": part, "path": "", "rows": n})
            out += [
                {"stmt": stmt, "kind": kind, "part": part, "path": p, "rows": 0}
                for p in files.paths[before:]
            ]
    # Executor side: a task attempt dying here leaves whole files nobody reported; Spark
    # retries the task, which deletes and rewrites them.
    faults.point("merge.task_after_files")
    yield pa.RecordBatch.from_pylist(out, schema=pa.schema(list(FILE_FIELDS)))


def _clear(job: _Job, stmt: int, kind: int, part: str, bucket: int) -> None:
    """Delete what an earlier attempt of this task may have left of one file key's files
    (``bucket_N`` in the directory, and in its list-bucketing subdirectories)."""
    st = job.target.storage
    d = st.join(
        job.target.placement.partition_path(part),
        layout.delta_dir_name(job.write_id, job.write_id, statement_id=stmt, delete=kind == DELETE),
    )
    if not st.exists(d):
        return
    name = layout.bucket_file_name(bucket)
    todo = [d]
    while todo:
        for e in st.list_dir(todo.pop()):
            if e.is_dir:
                todo.append(e.path)
            elif e.name in (name, layout.side_file_name(name)):
                st.delete(e.path)


def _prune_task(
    partition_cols: tuple[str, ...],
    bucketing: tuple[tuple[str, ...], tuple[Any, ...], int, int] | None,
    batches: Iterator[Any],
) -> Iterator[Any]:
    """Executor side: the distinct (partition values, bucket) of the source's keys."""
    seen: set[tuple[Any, ...]] = set()
    for b in batches:
        t = pa.Table.from_batches([b])
        pvals = [t.column(c).to_pylist() for c in partition_cols]
        if bucketing is not None:
            cols, types, n, version = bucketing
            # A column at a time where the types allow it, else row by row (same numbers).
            fast = bucket_numbers_arrow(
                [t.column(c) for c in cols], list(types), n, bucketing_version=version
            )
            if fast is not None:
                buckets = fast.tolist()
            else:
                rows = zip(*(t.column(c).to_pylist() for c in cols), strict=True)
                buckets = bucket_numbers(rows, list(types), n, bucketing_version=version)
        else:
            buckets = [-1] * t.num_rows
        seen.update(zip(*pvals, buckets, strict=True))
    names = [*partition_cols, "__bucket"]
    cols_out = [[r[i] for r in seen] for i in range(len(names))]
    out_types = [pa.string()] * len(partition_cols) + [pa.int32()]
    yield pa.RecordBatch.from_arrays(
        [pa.array(c, t) for c, t in zip(cols_out, out_types, strict=True)], names=names
    )


# ---------------------------------------------------------------- driver


class _SparkMergeBody:
    """The body :func:`~acidstream.mutation.run.run_mutation` runs in the txn: the Spark
    jobs of one MERGE (driver side)."""

    def __init__(self, plan: MergePlan, source: Any) -> None:
        self.plan = plan
        self.source = source

    def __call__(self, run: MutationRun) -> MergeResult:
        from pyspark.sql import functions as F

        # The sink's job group handling: cancel and drain exactly this MERGE's tasks.
        from acidstream.sinks.foreach_batch import _drain_job_group, _job_group

        plan, t, df = self.plan, run.target, self.source
        spark = df.sparkSession
        sc = spark.sparkContext
        tschema = t.schema
        lower = {c.lower(): c for c in df.columns}
        source_cols = tuple(plan.source.column_names)
        # The source with its columns as s__<name>, its row order, and its keys cast to the
        # target's key types (what the join compares, as the Python engine casts them).
        keys = [
            F.col(lower[sk]).cast(_spark_type(tschema.field(tk).type)).alias(f"__k{i}")
            for i, (sk, tk) in enumerate(plan.keys)
        ]
        src = df.select(
            *[F.col(lower[n]).alias(f"s__{n}") for n in source_cols],
            F.monotonically_increasing_id().alias("__so"),
            *keys,
        )
        t0 = time.monotonic()
        units = self._units(t, src)
        t1 = time.monotonic()
        job = _Job(
            plan=plan,
            target=t,
            write_id=run.write_id,
            units=tuple(units),
            source_cols=source_cols,
            key_cols=tuple(tk for _, tk in plan.keys),
        )
        read_type = _struct_type(job.read_fields())
        read_schema = _arrow_of(read_type)
        # One read task per unit, up to a few per core (a task reads its units in turn).
        tasks = max(1, min(len(units), 4 * sc.defaultParallelism))
        tgt = (
            spark.range(len(units), numPartitions=tasks)
            .select(F.col("id").cast("int").alias("u"))
            .mapInArrow(functools.partial(_read_task, job, read_schema), read_type)
        )
        cond = [src[f"__k{i}"] == tgt[f"t__{tk}"] for i, (_, tk) in enumerate(plan.keys)]
        joined = src.join(tgt, on=cond, how="left" if plan.not_matched else "inner")
        nparts = _shuffle_partitions(spark)
        joined_schema = _arrow_of(joined.schema)
        event_type = _struct_type(job.event_fields())
        event_schema = _arrow_of(event_type)
        events = joined.repartition(nparts, *[f"__k{i}" for i in range(len(plan.keys))]).mapInArrow(
            functools.partial(_clause_task, job, joined_schema, event_schema), event_type
        )
        order = ["stmt", "kind", "part", "bucket", "so", "to"]
        file_type = _struct_type(list(FILE_FIELDS))
        written = (
            events.repartition(nparts, "stmt", "kind", "part", "bucket")
            .sortWithinPartitions(*order)
            .mapInArrow(functools.partial(_write_task, job, event_schema), file_type)
        )
        group = f"acidstream-merge-{t.table.full_name}-{run.txn_id}"
        try:
            with _job_group(sc, group, f"acidstream MERGE into {t.table.full_name}"):
                rows = written.collect()
        except BaseException as e:
            _drain_job_group(sc, group)
            _remove_write(t, run.write_id)
            if _CARDINALITY in str(e):
                msg = str(e).split(f"{_CARDINALITY}: ", 1)[1].splitlines()[0]
                raise CardinalityViolationError(msg) from e
            raise
        result = self._result(run, rows)
        log.info(
            "MERGE into %s: %d read units (%.2f s to prune), join and files %.2f s, %d files",
            t.table.full_name, len(units), t1 - t0, time.monotonic() - t1, len(run.files.paths),
        )  # fmt: skip
        return result

    def _units(self, t: Target, src: Any) -> list[tuple[Partition, int | None]]:
        """The (partition, bucket) pieces of the target the source's keys can match."""
        plan = self.plan
        key_of = {tk: f"__k{i}" for i, (_, tk) in enumerate(plan.keys)}
        pnames = tuple(t.partition_names)
        tab = t.table
        prune_parts = bool(pnames) and set(pnames) <= set(key_of)
        bcols = tuple(c.lower() for c in tab.bucket_cols)
        on_key = tab.num_buckets > 0 and bool(bcols) and set(bcols) <= set(key_of)
        parts = t.partitions()
        buckets: list[int | None] = list(range(tab.num_buckets)) if tab.num_buckets > 0 else [None]
        if parts and (prune_parts or on_key):
            types = dict(tab.schema.columns)
            bucketing = (
                (bcols, tuple(types[c] for c in bcols), tab.num_buckets, tab.bucketing_version)
                if on_key
                else None
            )
            pcols = pnames if prune_parts else ()
            cols = [src[key_of[c]].alias(c) for c in dict.fromkeys((*pcols, *bcols))]
            out_type = _struct_type([(c, pa.string()) for c in pcols] + [("__bucket", pa.int32())])
            found = (
                src.select(*cols)
                .mapInArrow(functools.partial(_prune_task, pcols, bucketing), out_type)
                .distinct()
                .collect()
            )
            if prune_parts:
                expr: pc.Expression | None = None
                for k in pnames:
                    vals = pa.array({r[k] for r in found if r[k] is not None}, pa.string())
                    e = pc.field(k).isin(vals)
                    expr = e if expr is None else expr & e
                parts = t.prune(parts, expr)
            if on_key:
                buckets = [*sorted({int(r["__bucket"]) for r in found})]
        return [(p, b) for p in parts for b in buckets]

    def _result(self, run: MutationRun, rows: list[Any]) -> MergeResult:
        kind_of = {c.statement_id: c.kind for c in (*self.plan.matched, *self.plan.not_matched)}
        inserted = updated = deleted = 0
        for r in rows:
            if r["path"]:
                run.files.paths.append(r["path"])
                run.files.partitions.add(r["part"])
                continue
            clause = kind_of[int(r["stmt"])]
            n = int(r["rows"])
            if clause == "insert":
                inserted += n
            elif clause == "delete":
                deleted += n
            elif int(r["kind"]) == DELETE:  # an update: one delete event per row updated
                updated += n
        run.files.paths.sort()
        return MergeResult(
            rows_inserted=inserted,
            rows_updated=updated,
            rows_deleted=deleted,
            write_id=run.write_id,
        )


def _shuffle_partitions(spark: Any) -> int:
    """The tasks of the MERGE's two shuffles: ``spark.sql.shuffle.partitions`` (the
    default parallelism where it is not a number, e.g. ``auto``)."""
    try:
        return max(1, int(spark.conf.get("spark.sql.shuffle.partitions")))
    except (TypeError, ValueError):
        return max(1, int(spark.sparkContext.defaultParallelism))


def _remove_write(t: Target, write_id: int) -> None:
    """Delete every directory of ``write_id`` (``delta_W_W_SSSS``, ``delete_delta_W_W_SSSS``)
    in every partition: a failed job's tasks may have written some. The write id is this
    txn's alone and never committed: nothing else is in them."""
    st = t.storage
    for p in t.partitions():
        try:
            entries = st.list_dir(p.path)
        except FileNotFoundError:
            continue
        for e in entries:
            parsed = layout.parse_dir_name(e.name) if e.is_dir else None
            if (
                isinstance(parsed, layout.ParsedDelta)
                and parsed.min_write_id == parsed.max_write_id == write_id
                and parsed.visibility_txn_id == 0
            ):
                try:
                    st.delete(e.path, recursive=True)
                except OSError as err:
                    log.warning("could not delete %s of a failed MERGE: %s", e.path, err)


def spark_merge_rows(
    store: TxnStore,
    name: TableName,
    spec: MergeSpec,
    *,
    source: Any,
    retries: int = 0,
    idempotency_key: str | None = None,
) -> MergeResult:
    """``MERGE INTO name USING source ...`` with a Spark DataFrame ``source``: the join on
    Spark, the files written by executors, one txn committed by the driver (this process).

    ``spec`` is the builder's MERGE; its ``source`` is an empty table of the DataFrame's
    schema (:func:`spark_source_schema`), enough to compile and check the clauses before
    any txn. Arguments and errors as :func:`acidstream.mutation.merge_rows`.

    Raises:
        ConfigError: bad clauses or keys (before any txn), ``spark.speculation`` on.
        CardinalityViolationError: a target row matched by two source rows (nothing
            committed, the files removed).
        CommitConflictError: a concurrent mutation of a partition won, retries used up.
    """
    if not is_spark_dataframe(source):
        raise ConfigError(f"a Spark MERGE needs a Spark DataFrame, not {type(source).__name__}")
    spark = source.sparkSession
    if str(spark.conf.get("spark.speculation", "false")).lower() == "true":
        raise ConfigError("a Spark MERGE needs spark.speculation=false (files per task)")
    table = store.get_table(name.db, name.table)
    plan = MergePlan(spec, row_schema(table))
    for _, tk in plan.keys:
        if pa.types.is_timestamp(plan.target_schema.field(tk).type):
            raise ConfigError(f"MERGE key {tk!r}: timestamp keys are not supported on Spark")
    return run_mutation(
        store, name, operation=DataOperationType.UPDATE, body=_SparkMergeBody(plan, source),
        kind=MergeResult, retries=retries, idempotency_key=idempotency_key,
    )  # fmt: skip
