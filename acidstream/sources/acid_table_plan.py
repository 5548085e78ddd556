"""Planning and reading the input partitions of the ``acidtable`` Spark source.

The driver side (:func:`plan_partitions`) turns one snapshot of a table into input
partitions: one per (partition directory, bucket) file group with the delete deltas of
that bucket, a group bigger than the split size cut into several (by file, and big
files by stripe). The executor side (:func:`read_partition`) reads one input partition
with the acid library (``acidstream.acid.file_reader``), so Spark sees exactly the rows
``acidstream.acid.reader.read_path`` returns for the same snapshot.

Everything that crosses from driver to executor here (:class:`ReadSpec`,
:class:`AcidTablePartition`, :class:`Piece`) is a frozen dataclass of plain values,
Arrow schemas and the acid library's frozen dataclasses: all picklable.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition

from acidstream.acid.delete_registry import (
    DeleteFile,
    DeleteKeySet,
    SortMergedDeletes,
    delete_files,
    key_table,
    valid_write_id_mask,
)
from acidstream.acid.directory import AcidState, OriginalFile, get_acid_state
from acidstream.acid.errors import AcidFormatError
from acidstream.acid.file_reader import Deletes, read_acid_file, read_original_file
from acidstream.acid.layout import ParsedDelta
from acidstream.acid.list_bucketing_prune import ListBucketingPruner
from acidstream.acid.orc_inspect import inspect_orc, require_acid
from acidstream.acid.orc_read import read_orc_columns
from acidstream.acid.partitions import Partition
from acidstream.acid.read_plan import (
    COMPARISONS,
    ROW_ID_COLUMN,
    Predicate,
    ReadPlan,
    assemble,
    build_plan,
)
from acidstream.acid.reader import DEFAULT_DELETE_EVENT_CAP
from acidstream.acid.snapshot import RangeResponse, ValidTxnList, ValidWriteIdList
from acidstream.acid.storage import Storage
from acidstream.txn.storage_options import StorageOptions

__all__ = [
    "AcidTablePartition",
    "Lease",
    "Piece",
    "ReadSpec",
    "host_parallelism",
    "keep_partition",
    "partition_value_types",
    "plan_partitions",
    "read_partition",
]

# Spark's spark.sql.files.openCostInBytes: the least bytes an input partition is sized for.
_OPEN_COST = 4 * 1024 * 1024


@dataclass(frozen=True)
class Lease:
    """The reader txn that keeps the Cleaner off the snapshot's files, and how to reach it.

    Executors heartbeat it (``heartbeat_s``) so a long read is not reaped as a dead
    client; a txn found aborted means the files may be gone and the read fails.
    """

    metastore: str
    warehouse: str
    txn_id: int
    heartbeat_s: float


@dataclass(frozen=True)
class ReadSpec:
    """What every input partition of one read shares (driver -> executor).

    ``row_schema`` holds the table columns (Arrow, positional); ``partition_types`` the
    declared type of each partition column. ``predicates`` are pushed filters on table
    columns (applied per file, after deletes). ``write_range`` (streaming) keeps only rows
    whose ROW__ID write id is in ``(lo, hi]``.
    """

    row_schema: pa.Schema
    partition_names: tuple[str, ...]
    partition_types: tuple[pa.DataType, ...]
    columns: tuple[str, ...]
    include_row_id: bool
    output_schema: pa.Schema
    write_ids: str
    predicates: tuple[Predicate, ...] = ()
    write_range: tuple[int, int] | None = None
    lease: Lease | None = None
    delete_event_cap: int = DEFAULT_DELETE_EVENT_CAP
    # The warehouse filesystem's options (endpoint, credentials): executors open the
    # files with them (pickled here, not read from the executors' environment).
    storage_options: StorageOptions = field(default_factory=StorageOptions)
    # The table's location as the catalog names it (with its scheme: ``s3://...``): the
    # partitions' paths are the storage's own (``bucket/key`` on S3), which name no
    # filesystem by themselves.
    location: str | None = None


@dataclass(frozen=True)
class Piece:
    """One unit of reading: an ACID bucket file (or some of its stripes) or an original file."""

    path: str
    length: int
    file_length: int
    split_min: int = 0
    split_stmt: int = -1
    check_validity: bool = False
    original: OriginalFile | None = None
    stripes: tuple[int, ...] | None = None  # None: the whole file


@dataclass(frozen=True)
class AcidTablePartition(InputPartition):
    """One input partition: some pieces of one (partition, bucket) group and its deletes."""

    partition: Partition
    bucket: int | None
    pieces: tuple[Piece, ...]
    deletes: tuple[DeleteFile, ...] = field(default=())


# ------------------------------------------------------------------------------ driver


def partition_value_types(
    partition: Partition, names: Sequence[str], types: Sequence[pa.DataType]
) -> dict[str, Any]:
    """The typed value of each partition column of ``partition`` (``None`` for Hive's
    default partition)."""
    values = dict(partition.values)
    out: dict[str, Any] = {}
    for n, t in zip(names, types, strict=True):
        raw = values.get(n.lower())
        out[n] = None if raw is None else pa.array([raw], pa.string()).cast(t)[0].as_py()
    return out


def keep_partition(typed: dict[str, Any], preds: Sequence[Predicate]) -> bool:
    """Whether a partition may hold rows passing ``preds`` (ANDed; SQL null semantics)."""
    for col, op, value in preds:
        v = typed[col]
        try:
            if op == "is null":
                ok = v is None
            elif op == "is not null":
                ok = v is not None
            elif v is None:
                ok = False
            elif op in COMPARISONS:
                ok = COMPARISONS[op](v, value)
            elif op == "in":
                ok = v in value
            else:
                ok = True
        except TypeError:
            ok = True  # cannot compare here: keep it, Spark filters the rows
        if not ok:
            return False
    return True


def _groups(
    state: AcidState, storage: Storage, write_ids: ValidWriteIdList, *, min_write_id: int | None
) -> dict[int | None, list[Piece]]:
    """The pieces of one partition's snapshot by bucket (as ``acidstream.acid.reader`` reads them).

    ``min_write_id`` (streaming) skips directories holding only write ids at or below it.
    """
    out: dict[int | None, list[Piece]] = {}
    for of in state.original_files:
        if min_write_id is not None and of.write_id <= min_write_id:
            continue
        out.setdefault(of.bucket_id, []).append(
            Piece(path=of.path, length=of.length, file_length=of.length, original=of)
        )
    dirs = ([state.base] if state.base else []) + list(state.insert_deltas)
    for d in dirs:
        if d.is_raw:
            continue  # its files are among original_files
        if isinstance(d.parsed, ParsedDelta):
            lo, hi = d.parsed.min_write_id, d.parsed.max_write_id
            split_min, split_stmt = lo, d.parsed.statement_id
            check = write_ids.is_write_id_range_valid(lo, hi) != RangeResponse.ALL
        else:
            hi = d.parsed.write_id
            split_min, split_stmt, check = 0, -1, False  # a base holds only valid write ids
        if min_write_id is not None and hi <= min_write_id:
            continue
        for f in d.files:
            if f.logical_length == 0:
                continue
            out.setdefault(f.bucket_id, []).append(
                Piece(
                    path=f.path,
                    length=f.logical_length,
                    file_length=f.length,
                    split_min=split_min,
                    split_stmt=split_stmt,
                    check_validity=check,
                )
            )
    return out


def _split_big(storage: Storage, piece: Piece, max_bytes: int) -> list[Piece]:
    """An ACID file bigger than ``max_bytes`` as runs of stripes of about that size."""
    if piece.original is not None or piece.length <= max_bytes:
        return [piece]
    _, info = inspect_orc(storage, piece.path, length=piece.length, file_length=piece.file_length)
    if info.nstripes <= 1:
        return [piece]
    per_run = max(1, math.floor(info.nstripes * max_bytes / piece.length))
    out = []
    for start in range(0, info.nstripes, per_run):
        stripes = tuple(range(start, min(info.nstripes, start + per_run)))
        out.append(
            Piece(
                path=piece.path,
                length=piece.length,
                file_length=piece.file_length,
                split_min=piece.split_min,
                split_stmt=piece.split_stmt,
                check_validity=piece.check_validity,
                stripes=stripes,
            )
        )
    return out


def _piece_bytes(p: Piece) -> int:
    if p.stripes is None:
        return p.length
    return max(1, p.length // max(1, len(p.stripes)))  # an estimate; runs are near equal


def plan_partitions(
    storage: Storage,
    partitions: Sequence[Partition],
    *,
    write_ids: ValidWriteIdList,
    txns: ValidTxnList,
    max_partition_bytes: int,
    parallelism: int,
    min_write_id: int | None = None,
    lb: ListBucketingPruner | None = None,
) -> list[AcidTablePartition]:
    """Input partitions of a snapshot: one per (partition, bucket) group, big groups split.

    The split size follows Spark's file sources: ``min(max_partition_bytes,
    max(4 MiB, total / parallelism))``, so a small table still spreads over the cores.
    ``lb`` skips the list-bucketing directories its filter cannot need.

    Raises:
        NotEnoughHistoryError: compaction removed the history the snapshot needs.
    """
    grouped: list[tuple[Partition, int | None, list[Piece], list[DeleteFile]]] = []
    for part in partitions:
        state = get_acid_state(
            part.path, write_ids=write_ids, txns=txns, storage=storage,
            lb_location_dirs=lb.location_dirs(part) if lb is not None else (),
        )  # fmt: skip
        if lb is not None:
            state = lb.prune(part, state)
        dfiles = delete_files(state) if min_write_id is None else []
        for bucket, pieces in sorted(
            _groups(state, storage, write_ids, min_write_id=min_write_id).items(),
            key=lambda kv: (kv[0] is None, kv[0] or 0),
        ):
            mine = [
                d for d in dfiles if d.bucket_id is None or bucket is None or d.bucket_id == bucket
            ]
            grouped.append((part, bucket, pieces, mine))
    total = sum(p.length for _, _, ps, _ in grouped for p in ps)
    split = max(1, min(max_partition_bytes, max(_OPEN_COST, total // max(1, parallelism))))
    out: list[AcidTablePartition] = []
    for part, bucket, pieces, dels in grouped:
        run: list[Piece] = []
        size = 0
        for p in (q for piece in pieces for q in _split_big(storage, piece, split)):
            b = _piece_bytes(p)
            if run and size + b > split:
                out.append(AcidTablePartition(part, bucket, tuple(run), tuple(dels)))
                run, size = [], 0
            run.append(p)
            size += b
        if run:
            out.append(AcidTablePartition(part, bucket, tuple(run), tuple(dels)))
    return out


# ---------------------------------------------------------------------------- executor


class _LeaseKeeper:
    """Executor: heartbeats the lease txn at the start of a task and then every interval."""

    def __init__(self, lease: Lease | None) -> None:
        self.lease = lease
        self.next_beat = 0.0

    def beat_if_due(self) -> None:
        lease = self.lease
        if lease is None or time.monotonic() < self.next_beat:
            return
        from acidstream.txn.store import open_store

        store = open_store(lease.metastore, warehouse=lease.warehouse)
        try:
            res = store.heartbeat_txn_range(lease.txn_id, lease.txn_id)
        finally:
            store.close()
        if lease.txn_id in res.lost:
            raise AcidFormatError(
                f"the read's lease txn {lease.txn_id} was aborted (timed out?): the cleaner may "
                "have removed files of its snapshot; run the query again"
            )
        self.next_beat = time.monotonic() + lease.heartbeat_s


def _plan(spec: ReadSpec) -> ReadPlan:
    cols = [c for c in spec.columns if c.lower() != ROW_ID_COLUMN]
    data_preds = [p for p in spec.predicates if p[0] not in spec.partition_names]
    return build_plan(
        spec.row_schema,
        schema=None,
        partition_names=spec.partition_names,
        columns=cols,
        include_row_id=spec.include_row_id or spec.write_range is not None,
        filter=data_preds or None,
        timestamp_unit="us",
    )


def _stripe_batches(
    storage: Storage,
    piece: Piece,
    *,
    plan: ReadPlan,
    partition: Partition,
    write_ids: ValidWriteIdList,
    deletes: Deletes,
) -> Iterator[pa.Table]:
    """Some stripes of one ACID file: ``read_acid_file``'s rules for a stripe range.

    ``acidstream.acid.file_reader.read_acid_file`` reads every stripe of a file and takes no stripe
    range; until it does, split files are read here with the same public pieces (validity
    mask, delete matching by key, ``assemble``), without its per-group fast path.
    """
    assert piece.stripes is not None
    orcf, info = inspect_orc(
        storage, piece.path, length=piece.length, file_length=piece.file_length
    )
    require_acid(info)
    assert info.acid_columns is not None
    names = info.acid_columns
    qualifying = (
        deletes.qualifying(piece.split_min, piece.split_stmt) if deletes.registry else frozenset()
    )
    need_keys = bool(qualifying) or plan.include_row_id
    prefix = f"{names['row']}."
    fields = info.row_fields
    row_paths = [prefix + fields[p] if p < len(fields) else None for p in plan.read_positions]
    acid_cols = [names["originalTransaction"], names["bucket"], names["rowId"]] if need_keys else []
    if piece.check_validity:
        acid_cols.append(names["currentTransaction"])
    cols = [p for p in row_paths if p is not None]
    if not cols and not acid_cols:
        acid_cols.append(names["operation"])
    for s in piece.stripes:
        t = read_orc_columns(
            orcf,
            storage=storage,
            path=piece.path,
            length=piece.length,
            columns=acid_cols + cols,
            stripe=s,
            timestamp_unit=plan.timestamp_unit,
        )
        keep: pa.Array | pa.ChunkedArray | None = None
        if piece.check_validity:
            keep = valid_write_id_mask(t.column(names["currentTransaction"]), write_ids)
        keys = key_table(t.column(0), t.column(1), t.column(2)) if need_keys else None
        if qualifying and keys is not None:
            assert deletes.registry is not None
            alive = pc.invert(deletes.registry.deleted(keys, qualifying))
            keep = alive if keep is None else pc.and_(keep, alive)
        row_cols: list[pa.ChunkedArray | pa.Array | None] = []
        for p in row_paths:
            if p is None:
                row_cols.append(None)
                continue
            head, _, rest = p.partition(".")
            col = t.column(head)
            while rest:
                name, _, rest = rest.partition(".")
                col = pc.struct_field(col, name)
            row_cols.append(col)
        n = t.num_rows
        if keep is not None:
            row_cols = [None if c is None else c.filter(keep) for c in row_cols]
            n = int(pc.sum(pc.cast(keep, pa.int64())).as_py() or 0)
            if keys is not None:
                keys = keys.filter(keep)
        yield assemble(
            plan, row_cols, n=n, keys=keys if plan.include_row_id else None, partition=partition
        )


def _shape(t: pa.Table, spec: ReadSpec, typed_parts: dict[str, Any]) -> pa.Table:
    """The rows of ``t`` in the output schema: write range, typed partitions, order."""
    if spec.write_range is not None and t.num_rows:
        lo, hi = spec.write_range
        w = pc.struct_field(t.column(ROW_ID_COLUMN), "writeid")
        t = t.filter(pc.and_(pc.greater(w, lo), pc.less_equal(w, hi)))
    cols: list[pa.Array | pa.ChunkedArray] = []
    lower = {n.lower(): i for i, n in enumerate(t.schema.names)}
    for f in spec.output_schema:
        key = f.name.lower()
        if key in typed_parts:
            cols.append(pa.repeat(pa.scalar(typed_parts[key], f.type), t.num_rows))
        else:
            cols.append(t.column(lower[key]).cast(f.type))
    return pa.Table.from_arrays(cols, schema=spec.output_schema)


def read_partition(spec: ReadSpec, part: AcidTablePartition) -> Iterator[pa.RecordBatch]:
    """Executor: the visible rows of one input partition, as Arrow batches of the output schema.

    Raises:
        AcidFormatError: a file is not what the snapshot says, or the lease was lost.
    """
    lease = _LeaseKeeper(spec.lease)
    lease.beat_if_due()
    storage, _ = Storage.for_path(
        spec.location or part.partition.path, storage_options=spec.storage_options
    )
    write_ids = ValidWriteIdList.from_string(spec.write_ids)
    plan = _plan(spec)
    registry: DeleteKeySet | SortMergedDeletes | None = None
    if part.deletes:
        merged = SortMergedDeletes(storage, part.deletes, write_ids)
        registry = (
            merged
            if merged.size > spec.delete_event_cap
            else DeleteKeySet(storage, part.deletes, write_ids)
        )
    deletes = Deletes(registry, tuple({f.delta: None for f in part.deletes}))
    typed = {
        k.lower(): v
        for k, v in partition_value_types(
            part.partition, spec.partition_names, spec.partition_types
        ).items()
    }
    for piece in part.pieces:
        tables: Iterator[pa.Table]
        if piece.original is not None:
            tables = read_original_file(
                storage,
                piece.original,
                plan=plan,
                partition=part.partition,
                write_ids=write_ids,
                deletes=deletes,
            )
        elif piece.stripes is not None:
            tables = _stripe_batches(
                storage,
                piece,
                plan=plan,
                partition=part.partition,
                write_ids=write_ids,
                deletes=deletes,
            )
        else:
            tables = read_acid_file(
                storage,
                piece.path,
                length=piece.length,
                file_length=piece.file_length,
                plan=plan,
                partition=part.partition,
                write_ids=write_ids,
                check_validity=piece.check_validity,
                deletes=deletes,
                split_min=piece.split_min,
                split_stmt=piece.split_stmt,
            )
        for t in tables:
            lease.beat_if_due()
            out = _shape(t, spec, typed)
            if out.num_rows:
                yield from out.to_batches()


def host_parallelism() -> int:
    """The driver host's CPU count: the default number of input partitions to aim for."""
    return max(1, os.cpu_count() or 1)
