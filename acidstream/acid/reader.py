"""Snapshot reads of Hive ACID tables into Arrow, as Hive's vectorized ACID reader sees them.

``read_path`` resolves the snapshot with ``get_acid_state`` (per partition),
then reads every selected file with ``pyarrow.orc`` and applies Hive's rules
with Arrow compute (no per-row Python):

1. rows whose ``currentTransaction`` is not a valid write id are dropped (skipped
   when the whole delta range is valid, and for bases, as Hive does);
2. rows whose (originalTransaction, bucket, rowId) has a valid delete event in a
   qualifying delete delta are dropped (``acidstream.acid.delete_registry``);
3. original (pre-ACID) files get Hive's synthetic ROW__IDs;
4. streaming files are read only up to their ``_flush_length``.

Files inside list-bucketing directories are read as well; given each partition's
``SkewedInfo`` (``skews``) and a filter of ``(column, op, value)`` predicates, the
directories the filter cannot need are skipped (``acidstream.acid.list_bucketing_prune``).

The ACID key columns are read only when deletes may hit the file, ROW__ID is
requested, or validity must be checked, so the common path reads just the
requested row columns. Deletes are matched per (originalTransaction, bucket)
group of sorted rowIds when a batch holds one group (every Hive-written
``delta_w_w`` file), and files are read in ``READ_THREADS`` threads; see
``docs/reading.md`` ("Performance").
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
import os
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.delete_registry import DeleteKeySet, SortMergedDeletes, delete_files
from acidstream.acid.directory import AcidDir, AcidState, DataFile, OriginalFile, get_acid_state
from acidstream.acid.errors import TableNotFoundError
from acidstream.acid.file_group import (
    GROUP_FILE_MAX_BYTES,
    GROUP_MAX_BYTES,
    SmallFile,
    read_acid_files,
)
from acidstream.acid.file_reader import Deletes, read_acid_file, read_original_file
from acidstream.acid.layout import ParsedDelta
from acidstream.acid.list_bucketing import SkewedInfo
from acidstream.acid.list_bucketing_prune import ListBucketingPruner, from_predicates
from acidstream.acid.orc_inspect import inspect_orc, logical_length, require_acid
from acidstream.acid.partitions import Partition, PartitionValues, discover_partitions
from acidstream.acid.read_plan import (
    ROW_ID_COLUMN,
    ROW_ID_TYPE,
    Predicate,
    ReadPlan,
    build_plan,
    peek_row_schema,
)
from acidstream.acid.schema import TableSchema
from acidstream.acid.snapshot import RangeResponse, ValidTxnList, ValidWriteIdList
from acidstream.acid.storage import Storage
from acidstream.acid.timestamps import DEFAULT_TIMESTAMP_UNIT, TimestampUnit, check_timestamp_unit

__all__ = [
    "DEFAULT_DELETE_EVENT_CAP",
    "READ_AHEAD_MAX_BYTES",
    "READ_THREADS",
    "ROW_ID_COLUMN",
    "ROW_ID_TYPE",
    "Predicate",
    "Scan",
    "iter_batches",
    "read_path",
    "scan",
]

DEFAULT_DELETE_EVENT_CAP = 10_000_000  # hive.transactional.events.mem


# arguments


def _write_ids(value: ValidWriteIdList | str | None) -> ValidWriteIdList:
    if value is None:
        return ValidWriteIdList()
    if isinstance(value, str):
        return ValidWriteIdList.from_string(value)
    return value


def _txns(value: ValidTxnList | str | None) -> ValidTxnList:
    # Hive requires a ValidTxnList; a reader without one sees every txn committed,
    # the same default as a missing ValidWriteIdList.
    if value is None:
        return ValidTxnList()
    if isinstance(value, str):
        return ValidTxnList.from_string(value)
    return value


# ---------------------------------------------------------------------------------------------
# partitions and tables


# One unit of reading (a file): a thunk yielding its tables, and whether it may run in a
# worker thread ahead of the consumer (not on the bounded-memory sort-merge path, and not
# for large files, which stream stripe by stripe instead).
_Task = tuple[Callable[[], Iterator[pa.Table]], bool]

# Files are read by this many threads (pyarrow decodes ORC without the GIL).
READ_THREADS = max(1, min(4, os.cpu_count() or 1))

# Files up to this size are read ahead in threads (whole, in memory); larger ones are read
# in the consumer, one stripe at a time, so a read's memory does not grow with file size.
READ_AHEAD_MAX_BYTES = 64 * 1024 * 1024


def _iter_partition(
    storage: Storage,
    partition: Partition,
    state: AcidState,
    *,
    plan: ReadPlan,
    write_ids: ValidWriteIdList,
    delete_event_cap: int,
) -> Iterator[_Task]:
    dfiles = delete_files(state)
    registry: DeleteKeySet | SortMergedDeletes | None = None
    has_data = bool(state.original_files) or any(
        f.logical_length
        for d in ((state.base,) if state.base else ()) + state.insert_deltas
        for f in d.files
    )
    if dfiles and has_data:
        merged = SortMergedDeletes(storage, dfiles, write_ids)
        registry = (
            merged if merged.size > delete_event_cap else DeleteKeySet(storage, dfiles, write_ids)
        )
    deletes = Deletes(registry, tuple({f.delta: None for f in dfiles}))
    parallel = not isinstance(registry, SortMergedDeletes)

    def originals_of(dir_name: str | None) -> list[OriginalFile]:
        return [o for o in state.original_files if o.dir_name == dir_name]

    def ahead(length: int) -> bool:
        return parallel and length <= READ_AHEAD_MAX_BYTES

    def original(of: OriginalFile) -> _Task:
        return (
            functools.partial(
                read_original_file,
                storage,
                of,
                plan=plan,
                partition=partition,
                write_ids=write_ids,
                deletes=deletes,
            ),
            ahead(of.length),
        )

    group: list[SmallFile] = []
    group_bytes = 0

    def flush() -> Iterator[_Task]:
        nonlocal group, group_bytes
        if group:
            files, group, group_bytes = tuple(group), [], 0
            yield (
                functools.partial(
                    read_acid_files,
                    storage,
                    files,
                    plan=plan,
                    partition=partition,
                    write_ids=write_ids,
                    deletes=deletes,
                ),
                True,
            )

    for of in originals_of(None):
        yield original(of)
    dirs: list[AcidDir] = ([state.base] if state.base else []) + list(state.insert_deltas)
    for d in dirs:
        if d.is_raw:
            yield from flush()
            for of in originals_of(d.name):
                yield original(of)
            continue
        if isinstance(d.parsed, ParsedDelta):
            split_min, split_stmt = d.parsed.min_write_id, d.parsed.statement_id
            lo, hi = d.parsed.min_write_id, d.parsed.max_write_id
            check = write_ids.is_write_id_range_valid(lo, hi) != RangeResponse.ALL
        else:
            split_min, split_stmt, check = 0, -1, False  # a base holds only valid write ids
        for f in d.files:
            if f.logical_length == 0:
                continue
            if parallel and not check and f.logical_length <= GROUP_FILE_MAX_BYTES:
                # Small files are read in groups (acidstream.acid.file_group).
                if group_bytes + f.logical_length > GROUP_MAX_BYTES:
                    yield from flush()
                group.append(SmallFile(f.path, f.logical_length, f.length, split_min, split_stmt))
                group_bytes += f.logical_length
                continue
            yield from flush()
            yield (
                functools.partial(
                    read_acid_file,
                    storage,
                    f.path,
                    length=f.logical_length,
                    file_length=f.length,
                    plan=plan,
                    partition=partition,
                    write_ids=write_ids,
                    check_validity=check,
                    deletes=deletes,
                    split_min=split_min,
                    split_stmt=split_stmt,
                ),
                ahead(f.logical_length),
            )
    yield from flush()


# Below this average data-file size a read runs in one thread: a small file costs more
# GIL-holding Python (open, match deletes, assemble) than GIL-free decoding, so threads
# only add contention (1,000 files of 100 rows: 0.80 s in one thread, 0.88 s in two).
# From a few tens of KiB threads win: 40 files averaging 57 KiB read in 41 ms in one
# thread, 38 ms in threads; averaging 113 KiB, 73 ms and 46 ms; the 10 files of 255 KiB a
# pruned list-bucketing read picks, 69 ms and 39 ms (was 256 KiB, which kept those in one).
THREADED_READ_MIN_AVG_BYTES = 64 * 1024


def _threads_for(states: Sequence[tuple[Partition, AcidState]]) -> int:
    """``READ_THREADS``, or 1 when the snapshot's data files are small on average."""
    n = total = 0
    for _, st in states:
        for d in ([st.base] if st.base else []) + list(st.insert_deltas):
            for f in d.files:
                n += 1
                total += f.logical_length
        n += len(st.original_files)
        total += sum(o.length for o in st.original_files)
    return READ_THREADS if n and total >= n * THREADED_READ_MIN_AVG_BYTES else 1


def _materialize(fn: Callable[[], Iterator[pa.Table]]) -> list[pa.Table]:
    """The tables of a task; when it fails part-way (a group of files whose third is
    corrupt), the tables before the failure and then the error, as a sequential read."""
    out: list[pa.Table] = []
    try:
        for t in fn():
            out.append(t)
    except Exception as e:
        out.append(_Failed(e))
    return out


class _Failed:
    """An error in a materialized task's tables, raised where it occurred."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _unpack(tables: list[pa.Table]) -> Iterator[pa.Table]:
    for t in tables:
        if isinstance(t, _Failed):
            raise t.error
        yield t


def _run_tasks(tasks: Iterator[_Task], threads: int | None = None) -> Iterator[pa.Table]:
    """The tables of ``tasks`` in order; parallel tasks run up to ``2 * threads`` files ahead.

    Errors surface in task order, as a sequential read would raise them. A task that
    may not run ahead (sort-merge) runs lazily in the caller once earlier ones are done.
    """
    if threads is None:
        threads = READ_THREADS
    if threads <= 1:
        for fn, _ in tasks:
            yield from fn()
        return
    ex = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="acid-read")
    pending: collections.deque[concurrent.futures.Future[list[pa.Table]]] = collections.deque()
    try:
        while True:
            try:
                fn, parallel = next(tasks)
            except StopIteration:
                break
            except Exception:
                # Planning the next partition failed: hand out what came before first.
                while pending:
                    yield from _unpack(pending.popleft().result())
                raise
            if not parallel:
                while pending:
                    yield from _unpack(pending.popleft().result())
                yield from fn()
                continue
            pending.append(ex.submit(_materialize, fn))
            while len(pending) > 2 * threads:
                yield from _unpack(pending.popleft().result())
        while pending:
            yield from _unpack(pending.popleft().result())
    finally:
        for fut in pending:
            fut.cancel()
        ex.shutdown(wait=True)


def _first_row_schema(
    storage: Storage, states: list[tuple[Partition, AcidState]]
) -> pa.Schema | None:
    for _, st in states:
        files: list[DataFile] = []
        for d in ([st.base] if st.base else []) + list(st.insert_deltas) + list(st.delete_deltas):
            files.extend(f for f in d.files if f.logical_length)
        paths = [(o.path, o.length, o.length) for o in st.original_files]
        paths += [(f.path, f.logical_length, f.length) for f in files]
        for p, length, real in paths:
            return inspect_orc(storage, p, length=length, file_length=real)[1].row_schema()
    for part, _ in states:
        peek = peek_row_schema(storage, part.path)
        if peek is not None:
            return peek
    return None


@dataclass(frozen=True)
class Scan:
    """A snapshot read, planned but not yet run: the schema every batch has, and the
    batches (lazily; nothing is read before the first ``next()``). ``lb_files_skipped``
    counts the data files list-bucketing pruning left out."""

    schema: pa.Schema
    batches: Iterator[pa.Table]
    lb_files_skipped: int = 0

    def __iter__(self) -> Iterator[pa.Table]:
        return self.batches


def scan(
    path: str | os.PathLike[str],
    *,
    write_ids: ValidWriteIdList | str | None = None,
    txns: ValidTxnList | str | None = None,
    columns: Sequence[str] | None = None,
    include_row_id: bool = False,
    filter: Sequence[Predicate] | pc.Expression | None = None,
    delete_event_cap: int = DEFAULT_DELETE_EVENT_CAP,
    schema: TableSchema | None = None,
    storage: Storage | None = None,
    storage_options: Mapping[str, Any] | None = None,
    timestamp_unit: TimestampUnit = DEFAULT_TIMESTAMP_UNIT,
    skews: Mapping[PartitionValues, SkewedInfo] | None = None,
    partition_keys: Sequence[str] = (),
    buckets: Collection[int] | None = None,
) -> Scan:
    """Plan a snapshot read: its output schema, and its batches as ``iter_batches`` yields
    them. Same arguments as ``read_path``. Planning lists the directories and reads
    one file tail (for the schema when ``schema`` is not given).

    ``buckets``: read only the files of these bucket ids (data and delete deltas alike:
    a delete event of ``delete_delta/bucket_N`` only hits rows of writer ``N``). For a
    bucketed table, a caller that knows which buckets its keys hash to (a MERGE on the
    bucketing key, ``acidstream.mutation``) reads those alone."""
    check_timestamp_unit(timestamp_unit)
    if storage is None:
        storage, spath = Storage.for_path(path, storage_options=storage_options)
    else:
        spath = os.fspath(path)
    if not storage.exists(spath):
        raise TableNotFoundError(f"{spath}: no such table, partition or file")
    wids = _write_ids(write_ids)
    tx = _txns(txns)
    if not storage.is_dir(spath):
        return _scan_file(
            storage,
            spath,
            write_ids=wids,
            columns=columns,
            include_row_id=include_row_id,
            filter=filter,
            schema=schema,
            timestamp_unit=timestamp_unit,
        )
    partitions = discover_partitions(storage, spath)
    pruner = ListBucketingPruner(
        skews=skews or {},
        schema=schema,
        expr=from_predicates(filter)
        if filter is not None and not isinstance(filter, pc.Expression)
        else None,
    )
    states: list[tuple[Partition, AcidState]] = []
    skipped = 0
    for p in partitions:
        full = get_acid_state(
            p.path,
            write_ids=wids,
            txns=tx,
            storage=storage,
            lb_location_dirs=pruner.location_dirs(p),
        )
        st = pruner.prune(p, full)
        if buckets is not None:
            st = _keep_buckets(st, frozenset(buckets))
        skipped += _file_count(full) - _file_count(st)
        states.append((p, st))
    # The table's partition keys are columns whether or not a partition directory exists
    # yet (a table created and never written, or one an empty batch only created): taken
    # from the directories alone, an empty partitioned table would lose them. Directories
    # may add k=v levels a bare path read does not know of.
    pnames: list[str] = list(partition_keys)
    seen = {k.lower() for k in pnames}
    for p in partitions:
        for k, _ in p.values:
            if k.lower() not in seen:
                pnames.append(k)
                seen.add(k.lower())
    row_schema = None if schema is not None else _first_row_schema(storage, states)
    plan = build_plan(
        row_schema,
        schema=schema,
        partition_names=tuple(pnames),
        columns=columns,
        include_row_id=include_row_id,
        filter=filter,
        timestamp_unit=timestamp_unit,
    )

    def tasks() -> Iterator[_Task]:
        for part, st in states:
            yield from _iter_partition(
                storage, part, st, plan=plan, write_ids=wids, delete_event_cap=delete_event_cap
            )

    def gen() -> Iterator[pa.Table]:
        yield from _run_tasks(tasks(), _threads_for(states))

    return Scan(plan.schema(), gen(), lb_files_skipped=skipped)


def _keep_buckets(state: AcidState, buckets: frozenset[int]) -> AcidState:
    """``state`` with only the files of ``buckets`` (every other file is left unread)."""

    def keep(d: AcidDir) -> AcidDir:
        return dataclasses.replace(d, files=tuple(f for f in d.files if f.bucket_id in buckets))

    return dataclasses.replace(
        state,
        base=keep(state.base) if state.base is not None else None,
        deltas=tuple(keep(d) for d in state.deltas),
        original_files=tuple(o for o in state.original_files if o.bucket_id in buckets),
    )


def _file_count(state: AcidState) -> int:
    return sum(len(d.files) for d in ([state.base] if state.base else []) + list(state.deltas))


def iter_batches(
    path: str | os.PathLike[str],
    *,
    write_ids: ValidWriteIdList | str | None = None,
    txns: ValidTxnList | str | None = None,
    columns: Sequence[str] | None = None,
    include_row_id: bool = False,
    filter: Sequence[Predicate] | pc.Expression | None = None,
    delete_event_cap: int = DEFAULT_DELETE_EVENT_CAP,
    schema: TableSchema | None = None,
    storage: Storage | None = None,
    storage_options: Mapping[str, Any] | None = None,
    timestamp_unit: TimestampUnit = DEFAULT_TIMESTAMP_UNIT,
    skews: Mapping[PartitionValues, SkewedInfo] | None = None,
    partition_keys: Sequence[str] = (),
) -> Iterator[pa.Table]:
    """Stream the visible rows of a snapshot, one Arrow table per file or stripe.

    Same arguments and semantics as ``read_path``; every yielded table has the
    same schema (``scan`` gives it even when nothing is yielded). Nothing is read
    before the first ``next()``; after it, up to ``2 * READ_THREADS`` files are read
    ahead in threads (none on the sort-merge path).
    """
    yield from scan(
        path,
        write_ids=write_ids,
        txns=txns,
        columns=columns,
        include_row_id=include_row_id,
        filter=filter,
        delete_event_cap=delete_event_cap,
        schema=schema,
        storage=storage,
        storage_options=storage_options,
        timestamp_unit=timestamp_unit,
        skews=skews,
        partition_keys=partition_keys,
    ).batches


def read_path(
    path: str | os.PathLike[str],
    *,
    write_ids: ValidWriteIdList | str | None = None,
    txns: ValidTxnList | str | None = None,
    columns: Sequence[str] | None = None,
    include_row_id: bool = False,
    filter: Sequence[Predicate] | pc.Expression | None = None,
    delete_event_cap: int = DEFAULT_DELETE_EVENT_CAP,
    schema: TableSchema | None = None,
    storage: Storage | None = None,
    storage_options: Mapping[str, Any] | None = None,
    timestamp_unit: TimestampUnit = DEFAULT_TIMESTAMP_UNIT,
    skews: Mapping[PartitionValues, SkewedInfo] | None = None,
    partition_keys: Sequence[str] = (),
) -> pa.Table:
    """Read the rows of a Hive ACID table (or partition, or one ACID file) visible in a snapshot.

    Args:
        path: a table directory (partitions ``k=v`` below it are all read and their
            values appended as string columns), a partition directory, or one
            ACID data file. Local path or any fsspec URL.
        write_ids: the table's ``ValidWriteIdList`` (or its string form); ``None``
            means every write id is valid, Hive's default.
        txns: the ``ValidTxnList`` (or its string form) that decides which
            compactor-written ``_v`` directories are visible; ``None`` means all.
        columns: table (and partition) columns to return, in this order; default all.
        include_row_id: add Hive's ``row__id`` struct<writeid,bucketid,rowid> first.
        filter: ``(column, op, value)`` tuples (ANDed) or a ``pyarrow.compute``
            expression over the output columns; applied to each file's rows.
        delete_event_cap: above this many delete events (``hive.transactional.events.mem``)
            deletes are applied by the bounded-memory sort-merge path.
        schema: the table schema; when given, file columns are matched to it by
            position (``orc.force.positional.evolution``) and cast to its types.
        storage: the filesystem; derived from ``path`` when omitted.
        storage_options: the filesystem's options (endpoint, credentials) when ``storage``
            is derived from ``path``.
        timestamp_unit: the Arrow unit of ``timestamp`` columns: ``"us"`` (default)
            holds Hive's whole range 0001..9999, sub-microsecond digits dropped;
            ``"ns"`` is exact but raises ``AcidFormatError`` for a value outside
            1677-09-21..2262-04-11 (``acidstream.acid.timestamps``).
        skews: each partition's list bucketing (``SkewedInfo``), by its partition values
            (``()`` for an unpartitioned table); a partition missing here is read whole.
            With ``schema`` and a ``filter`` of predicates, list-bucketing directories no
            row passing the filter can be in are skipped (Hive's rules,
            ``acidstream.acid.list_bucketing_prune``); a ``pyarrow`` expression prunes nothing.
            Rows are filtered as without it: the result is the same, read faster.
        partition_keys: the table's partition columns (the catalog's, for a read by name):
            always columns of the result, in this order, even when no partition directory
            exists yet; partition columns found only on disk follow them.

    Raises:
        TableNotFoundError: ``path`` does not exist.
        AcidFormatError: a file that must be ACID is not, a corrupt side file, data
            that cannot be decoded or cast to the table's types, etc.
        NotEnoughHistoryError: the snapshot is older than the oldest compacted base.
    """
    s = scan(
        path,
        write_ids=write_ids,
        txns=txns,
        columns=columns,
        include_row_id=include_row_id,
        filter=filter,
        delete_event_cap=delete_event_cap,
        schema=schema,
        storage=storage,
        storage_options=storage_options,
        timestamp_unit=timestamp_unit,
        skews=skews,
        partition_keys=partition_keys,
    )
    tables = [t for t in s.batches if t.num_rows]
    if not tables:
        return s.schema.empty_table()
    return pa.concat_tables(tables)


def _scan_file(
    storage: Storage,
    path: str,
    *,
    write_ids: ValidWriteIdList,
    columns: Sequence[str] | None,
    include_row_id: bool,
    filter: Sequence[Predicate] | pc.Expression | None,
    schema: TableSchema | None,
    timestamp_unit: TimestampUnit,
) -> Scan:
    """One data file read as a full-ACID file (its side file honoured when present)."""
    size = storage.size(path)
    length = logical_length(storage, path, file_length=size, use_side_file=True)
    _, info = inspect_orc(storage, path, length=length, file_length=size)
    require_acid(info)
    plan = build_plan(
        info.row_schema(),
        schema=schema,
        partition_names=(),
        columns=columns,
        include_row_id=include_row_id,
        filter=filter,
        timestamp_unit=timestamp_unit,
    )
    batches = read_acid_file(
        storage,
        path,
        length=length,
        file_length=size,
        plan=plan,
        partition=Partition(path, ()),
        write_ids=write_ids,
        check_validity=True,
        deletes=Deletes(None, ()),
        split_min=0,
        split_stmt=-1,
    )
    return Scan(plan.schema(), batches)
