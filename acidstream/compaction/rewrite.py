"""The file work of one compaction: read a partition's snapshot, write Hive's compacted dirs.

* **Major** writes ``base_<hwm>_v<ctxn>/bucket_N``: base + deltas - deletes, one file per
  writer id, rows sorted by ROW__ID, each event with its original ROW__ID and
  ``currentTransaction = originalTransaction`` (Hive's ``MajorQueryCompactor``). Event
  files are merged directly (:func:`merged_events`: each file read once, deletes applied
  with one key-set lookup); partitions with original or raw LOAD DATA files are read
  through :func:`acidstream.acid.reader.iter_batches`, which gives those rows Hive's synthetic
  ROW__IDs (:func:`reader_events`).
* **Minor** reads the events of the chosen deltas as they are (deletes are not
  applied, as Hive's minor compaction does not) and writes them, still sorted by
  ROW__ID, to ``delta_<min>_<hwm>_v<ctxn>`` and ``delete_delta_<min>_<hwm>_v<ctxn>``.

Both see the table through the compactor's snapshot: deltas reaching above the hwm are
left out whole, and events of aborted write ids are dropped row by row. List-bucketing
directories are kept: each event stays in the directory of the file it came from
(``DataFile.lb_dir``), and the output has one file per (directory, writer id) inside the
new base/delta; the writers numbered a bucket's rows across its directories, so ROW__IDs
stay unique. A partition read through the reader (original files) has its rows placed
by value with the partition's own skew (:func:`acidstream.acid.placement.list_bucketing_dirs`).
Files are written
through the one table writer, :class:`acidstream.acid.table_writer.TableWriter` (its
events-as-they-are mode, :meth:`~acidstream.acid.table_writer.TableWriter.write_events`,
:func:`compaction_writer`); timestamps are kept exactly (:func:`conform_events`).
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid import faults, layout
from acidstream.acid.delete_registry import (
    DeleteKeySet,
    delete_files,
    key_table,
    valid_write_id_mask,
)
from acidstream.acid.directory import AcidState, get_acid_state
from acidstream.acid.errors import AcidFormatError
from acidstream.acid.layout import ParsedDelta
from acidstream.acid.list_bucketing import SkewedInfo
from acidstream.acid.orc_inspect import (
    ACID_VERSION_KEY,
    acid_column_names,
    inspect_orc,
    open_orc,
    require_acid,
)
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.orc_read import read_orc_columns
from acidstream.acid.placement import Placement, TableLayout, list_bucketing_dirs
from acidstream.acid.reader import READ_THREADS, iter_batches
from acidstream.acid.schema import TableSchema
from acidstream.acid.snapshot import (
    RangeResponse,
    ValidCompactorWriteIdList,
    ValidTxnList,
    ValidWriteIdList,
)
from acidstream.acid.storage import Storage
from acidstream.acid.table_writer import EventKind, TableWriter, WriteTarget
from acidstream.acid.timestamps import TimestampUnit, with_timestamp_unit
from acidstream.compaction.self_deleted import drop_self_deleted

__all__ = [
    "CompactorSnapshot",
    "RewriteResult",
    "compaction_writer",
    "empty_events",
    "is_event_only",
    "lb_groups",
    "major",
    "merged_events",
    "minor",
    "reader_events",
    "row_type_of",
    "sort_events",
    "whole_delta_hwm",
    "write_bucket_file",
    "write_events_file",
    "writer_ids",
]

_EVENT_NAMES = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row")


class CompactorSnapshot(ValidCompactorWriteIdList):
    """The compactor's ``ValidCompactorWriteIdList`` with per-event validity for the reader.

    Directory choice is Hive's compactor rule: a delta is usable only when it lies
    wholly at or below the hwm (``NONE`` otherwise). Inside a usable delta the range
    answer is the reader's (``SOME`` when it holds aborted write ids), so the reader
    checks each event's ``currentTransaction`` instead of trusting the whole delta,
    as Hive's ``OrcRawRecordMerger`` does during compaction.
    """

    @classmethod
    def of(cls, write_ids: ValidCompactorWriteIdList) -> CompactorSnapshot:
        return cls(write_ids.table_name, write_ids.high_watermark, (), write_ids.aborted_write_ids)

    def is_write_id_range_valid(self, lo: int, hi: int) -> RangeResponse:
        if hi > self.high_watermark:
            return RangeResponse.NONE
        return ValidWriteIdList.is_write_id_range_valid(self, lo, hi)


def whole_delta_hwm(
    write_ids: ValidCompactorWriteIdList, names: Sequence[str]
) -> ValidCompactorWriteIdList:
    """``write_ids`` with its hwm lowered below every delta that straddles it.

    A streaming delta ``delta_6_7`` whose txn 7 is still open is left out of the
    compaction (hwm 6); if the new base were ``base_6`` a later reader would take
    ``delta_6_7`` after it and see write id 6 twice. So the hwm drops to 5: every delta
    is then wholly inside or wholly above the compacted range.
    """
    ranges = [
        (p.min_write_id, p.max_write_id)
        for p in (layout.parse_dir_name(n) for n in names)
        if isinstance(p, ParsedDelta)
    ]
    hwm = write_ids.high_watermark
    changed = True
    while changed:
        changed = False
        for lo, hi in ranges:
            if lo <= hwm < hi:
                hwm, changed = lo - 1, True
    if hwm == write_ids.high_watermark:
        return write_ids
    aborted = tuple(a for a in write_ids.aborted_write_ids if a <= hwm)
    return ValidCompactorWriteIdList(write_ids.table_name, hwm, (), aborted)


@dataclass(frozen=True)
class RewriteResult:
    """What one compaction of one partition wrote."""

    output_dirs: tuple[str, ...]
    inserts: int
    deletes: int
    buckets: int


def writer_ids(bucket_property: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Vectorized ``BucketCodec.decodeWriterId`` (V1; a V0 property is the bucket itself)."""
    b = np.asarray(bucket_property.to_numpy(zero_copy_only=False), dtype=np.int64) & 0xFFFFFFFF
    version = b >> 29
    return np.where(version == 1, (b >> 16) & 0x0FFF, b).astype(np.int64)


def row_type_of(schema: TableSchema, timestamp_unit: TimestampUnit = "ns") -> pa.StructType:
    """The Arrow type of the event ``row`` struct for a table schema.

    Timestamps are nanoseconds by default: ORC stores nanoseconds and the compactor
    rewrites values exactly (see :func:`conform_events` for values outside that range).
    """
    return pa.struct(
        [pa.field(n, t.to_arrow(timestamp_unit=timestamp_unit)) for n, t in schema.columns]
    )


def _conform_rows(
    rows: pa.Array | pa.ChunkedArray, row_type: pa.StructType
) -> pa.StructArray | pa.ChunkedArray:
    """A file's ``row`` struct as the table's row type, matched by position (as it is,
    chunks and all, when it already has that type)."""
    if rows.type.equals(row_type):
        return rows
    arr = rows.combine_chunks() if isinstance(rows, pa.ChunkedArray) else rows
    n = len(arr)
    children = arr.flatten() if pa.types.is_struct(arr.type) else []
    out = []
    for i, f in enumerate(row_type):
        if i < len(children):
            child = children[i]
            if child.type.equals(f.type):
                out.append(child)
                continue
            try:
                out.append(pc.cast(child, f.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                # e.g. nanosecond digits in a partition that also holds a value past 2262
                # (so it is rewritten in microseconds): never drop digits silently.
                raise AcidFormatError(
                    f"cannot rewrite column {f.name!r} ({child.type}) as {f.type} "
                    f"without changing its values: {e}"
                ) from e
        else:
            out.append(pa.nulls(n, f.type))  # a column added after the file was written
    return pa.StructArray.from_arrays(out, fields=list(row_type))


def sort_events(t: pa.Table, *, newest_first: bool = False) -> pa.Table:
    """Events in ROW__ID order (then ``currentTransaction`` descending, for delete events).

    Events already in that order come back as they are: the stable sort would return the
    same rows in the same order, and deltas read in write-id order usually are (the take
    is a copy of every column)."""
    keys = [("o", "ascending"), ("b", "ascending"), ("r", "ascending")]
    if newest_first:
        keys.append(("c", "descending"))
    if _is_sorted(t, keys):
        return t
    return t.take(pc.sort_indices(t, sort_keys=keys))


def _is_sorted(t: pa.Table, keys: Sequence[tuple[str, str]]) -> bool:
    """Whether ``t`` is already in ``keys`` order (lexicographic, no nulls in the keys)."""
    if t.num_rows < 2:
        return True
    cols = [t.column(name) for name, _ in keys]
    if any(c.null_count for c in cols):
        return False  # nulls sort last in Arrow; leave them to sort_indices
    ok: np.ndarray | None = None
    # From the last key to the first: row i+1 follows row i when its key is past row i's,
    # or equal to it and the rest of the keys follow.
    for col, (_, order) in zip(reversed(cols), reversed(keys), strict=True):
        v = col.to_numpy()
        prev, nxt = v[:-1], v[1:]
        after = nxt > prev if order == "ascending" else nxt < prev
        ok = (after | (nxt == prev)) if ok is None else (after | ((nxt == prev) & ok))
    return bool(ok is not None and ok.all())


_LB = "lb"
"""The event column naming each event's list-bucketing directory (dictionary-encoded;
present only when some input file sits in one)."""

OutKey = tuple[str, int]
"""An output file: (list-bucketing directory, ``""`` for none; writer id)."""


def lb_groups(t: pa.Table) -> list[tuple[str, pa.Table]]:
    """Events split by list-bucketing directory (the ``lb`` column dropped)."""
    if _LB not in t.column_names:
        return [("", t)]
    col = t.column(_LB).combine_chunks()
    rest = t.drop_columns([_LB])
    dictionary = col.dictionary.to_pylist()
    idx = col.indices.to_numpy(zero_copy_only=False)
    uniq = np.unique(idx)
    if len(uniq) == 1:
        return [(dictionary[int(uniq[0])], rest)]
    return [(dictionary[int(i)], rest.filter(pa.array(idx == i))) for i in uniq]


def _split_by_writer(t: pa.Table, into: dict[OutKey, list[pa.Table]]) -> None:
    for lb, part in lb_groups(t):
        ids = writer_ids(part.column("b"))
        uniq = np.unique(ids)
        if len(uniq) == 1:
            into.setdefault((lb, int(uniq[0])), []).append(part)
            continue
        for w in uniq:
            into.setdefault((lb, int(w)), []).append(part.filter(pa.array(ids == w)))


class _LbTagger:
    """Tags each file's events with its list-bucketing directory, when any input has one:
    a dictionary column over one shared dictionary, so tables concatenate as they are."""

    def __init__(self, dirs: Sequence[str]) -> None:
        self.dirs = sorted(set(dirs))
        self.active = self.dirs != [""] and bool(self.dirs)
        self._dictionary = pa.array(self.dirs, pa.string())

    def tag(self, t: pa.Table, lb: str) -> pa.Table:
        if not self.active:
            return t
        idx = pa.array(np.full(t.num_rows, self.dirs.index(lb), np.int32))
        return t.append_column(_LB, pa.DictionaryArray.from_arrays(idx, self._dictionary))


def compaction_writer(
    storage: Storage,
    part_dir: str,
    schema: TableSchema,
    out_dir_name: str,
    *,
    options: OrcWriterOptions,
) -> TableWriter:
    """The table writer of one compaction's output in one partition directory:
    ``out_dir_name`` is the base (``base_<hwm>_v<ctxn>``) or the insert delta
    (``delta_<min>_<hwm>_v<ctxn>``, its delete delta alike) the events go to."""
    parsed = layout.parse_dir_name(out_dir_name)
    if isinstance(parsed, layout.ParsedBase):
        target = WriteTarget(
            min_write_id=parsed.write_id,
            max_write_id=parsed.write_id,
            visibility_txn_id=parsed.visibility_txn_id,
            base=True,
        )
    elif isinstance(parsed, ParsedDelta):
        target = WriteTarget(
            min_write_id=parsed.min_write_id,
            max_write_id=parsed.max_write_id,
            statement_id=parsed.statement_id,
            visibility_txn_id=parsed.visibility_txn_id,
        )
    else:
        raise AcidFormatError(f"{out_dir_name} is not a base or delta directory name")
    # The partition directory as the placement's root: a compaction is one partition's.
    table = TableLayout(location=part_dir, columns=tuple((n, str(t)) for n, t in schema.columns))
    return TableWriter(Placement(table, storage=storage), target=target, options=options)


def write_events_file(
    writer: TableWriter,
    bucket: int,
    events: pa.Table,
    *,
    kind: EventKind,
    row_type: pa.StructType,
    lb_dir: str = "",
) -> int:
    """Write sorted ``events`` (``kind``: base, insert or delete) to the writer's
    ``[lb_dir/]bucket_N``; returns the number of events. Fault step
    ``compaction.after_bucket`` follows."""
    n = events.num_rows
    # Every event keeps its ROW__ID and currentTransaction (the writer checks the order).
    writer.write_events(
        "",
        bucket,
        kind=kind,
        op=events.column("op").combine_chunks(),
        original_txn=events.column("o").combine_chunks(),
        bucket_property=events.column("b").combine_chunks(),
        row_id=events.column("r").combine_chunks(),
        current_txn=events.column("c").combine_chunks(),
        rows=None if kind == "delete" else _conform_rows(events.column("row"), row_type),
        lb_dir=lb_dir,
    )
    faults.point("compaction.after_bucket")
    return n


def write_bucket_file(
    storage: Storage,
    out_dir: str,
    schema: TableSchema,
    bucket: int,
    events: pa.Table,
    *,
    kind: EventKind,
    options: OrcWriterOptions,
    row_type: pa.StructType,
    lb_dir: str = "",
) -> int:
    """Write sorted ``events`` to ``out_dir/[lb_dir/]bucket_N`` (``kind``: base, insert or
    delete) through :func:`compaction_writer`; returns the number of events (for one
    file on its own, e.g. a Spark task's bucket)."""
    part_dir, name = out_dir.rstrip("/").rsplit("/", 1)
    writer = compaction_writer(storage, part_dir, schema, name, options=options)
    return write_events_file(writer, bucket, events, kind=kind, row_type=row_type, lb_dir=lb_dir)


def _timestamp_unit(types: Sequence[pa.DataType]) -> TimestampUnit:
    """``ns`` unless a file had to be decoded in microseconds (a value outside 1677..2262).

    pyarrow decodes ORC timestamps to nanoseconds (exact); only a file holding a value
    Arrow's ``timestamp[ns]`` cannot represent (Hive's ``9999-12-31``) comes back in
    microseconds from ``acidstream.acid.orc_read``'s fallback. One such file puts the whole output in
    microseconds, and :func:`_conform_rows` refuses to drop any nanosecond digit.
    """
    return "us" if any(with_timestamp_unit(t, "ns") != t for t in types) else "ns"


# Above this many files, a partition's events are copied into one chunk before they are
# filtered and sorted; below it, the files' own chunks are kept (no copy of big files).
_MAX_CHUNKS = 64


def _row_types(tables: Sequence[pa.Table]) -> list[pa.DataType]:
    """The distinct ``row`` types of ``tables``. Tables are compared a whole schema at a
    time (one C++ comparison each): hashing each file's struct type cost 5 ms per 1,000
    files, more than concatenating them."""
    schemas: list[pa.Schema] = []
    types: list[pa.DataType] = []
    for t in tables:
        s = t.schema
        if any(s.equals(x) for x in schemas):
            continue
        schemas.append(s)
        rt = s.field("row").type
        if not any(rt.equals(x) for x in types):
            types.append(rt)
    return types


def conform_events(tables: Sequence[pa.Table], schema: TableSchema) -> pa.Table | None:
    """Event tables of several files (``row`` as each file has it) as one table whose
    ``row`` is the table's row type (:func:`row_type_of`, by position)."""
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return None
    row_types = _row_types(tables)
    row_type = row_type_of(schema, _timestamp_unit(row_types))
    if len(row_types) == 1:
        # Every file has the same row type (the common case): one concatenation and one
        # conversion for the whole partition instead of one per file.
        t = pa.concat_tables(tables)
        if t.column("row").num_chunks > _MAX_CHUNKS or not row_type.equals(row_types[0]):
            # Many small files: one copy now makes the filter, sort and split after it
            # cheaper than working over thousands of chunks.
            t = t.combine_chunks()
        return t.set_column(5, "row", _conform_rows(t.column("row"), row_type))
    conformed = [t.set_column(5, "row", _conform_rows(t.column("row"), row_type)) for t in tables]
    return pa.concat_tables(conformed).combine_chunks()


def reader_events(
    part_dir: str,
    schema: TableSchema,
    snapshot: CompactorSnapshot,
    txns: ValidTxnList,
    storage: Storage,
) -> pa.Table | None:
    """The visible rows with ROW__IDs as one table of event columns (op, o, b, r, c, row).

    Timestamps are read in nanoseconds; a partition holding a value outside that range
    (Hive's ``9999-12-31``) is read again in microseconds (see :func:`conform_events`).
    """
    try:
        return _reader_events(part_dir, schema, snapshot, txns, storage, "ns")
    except AcidFormatError:
        # Out-of-range timestamps (or a real format error, which the second read raises).
        events = _reader_events(part_dir, schema, snapshot, txns, storage, "us")
    # The microsecond read floors sub-microsecond digits: refuse if any file has one, as
    # conform_events does for event files.
    state = get_acid_state(part_dir, write_ids=snapshot, txns=txns, storage=storage)
    paths = [(o.path, o.length, o.length) for o in state.original_files]
    dirs = ([state.base] if state.base is not None else []) + list(state.insert_deltas)
    paths += [(f.path, f.logical_length, f.length) for d in dirs for f in d.files
              if f.logical_length and not d.is_raw]  # fmt: skip
    for path, logical, length in paths:
        orcf = open_orc(storage, path, length=logical if logical < length else None)
        try:
            t = read_orc_columns(
                orcf, storage=storage, path=path, length=logical, timestamp_unit="ns"
            )
        except AcidFormatError:
            continue  # the file past 2262: decoded in microseconds, as it was read
        for col in t.columns:
            if _has_sub_microsecond(col):
                raise AcidFormatError(
                    f"{path}: cannot rewrite its nanosecond timestamps in microseconds without "
                    "changing its values (a file of this partition holds a timestamp past "
                    "2262-04-11, which only microseconds can hold)"
                )
    return events


def _has_sub_microsecond(col: pa.Array | pa.ChunkedArray) -> bool:
    """Whether any (nested) nanosecond timestamp of ``col`` has a digit below a microsecond."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    t = arr.type
    if pa.types.is_timestamp(t):
        if t.unit != "ns":
            return False
        v = pc.fill_null(arr.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        return bool(np.any(v % 1000 != 0))
    if pa.types.is_struct(t):
        return any(_has_sub_microsecond(arr.field(i)) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _has_sub_microsecond(arr.keys) or _has_sub_microsecond(arr.items)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_sub_microsecond(arr.flatten())
    return False


def _reader_events(
    part_dir: str,
    schema: TableSchema,
    snapshot: CompactorSnapshot,
    txns: ValidTxnList,
    storage: Storage,
    unit: TimestampUnit,
) -> pa.Table | None:
    row_type = row_type_of(schema, unit)
    batches = [
        t
        for t in iter_batches(
            part_dir,
            write_ids=snapshot,
            txns=txns,
            columns=list(schema.names),
            include_row_id=True,
            schema=schema,
            storage=storage,
            timestamp_unit=unit,
        )
        if t.num_rows
    ]
    if not batches:
        return None
    # One conversion for the whole partition: per-file Arrow calls cost more than the data.
    t = pa.concat_tables(batches).combine_chunks()
    rid = t.column(0).chunk(0)
    o, b, r = rid.field(0), rid.field(1), rid.field(2)
    rows = pa.StructArray.from_arrays(
        [t.column(i).chunk(0) for i in range(1, t.num_columns)], fields=list(row_type)
    )
    return pa.table(
        {
            "op": pa.array(np.zeros(t.num_rows, np.int32)),
            "o": o,
            "b": b,
            "r": r,
            # Hive's MajorQueryCompactor: currentTransaction = ROW__ID.writeId.
            "c": o,
            "row": rows,
        }
    )


def is_event_only(state: AcidState) -> bool:
    """Whether every input is an ACID event file (no original or raw LOAD DATA files)."""
    if state.original_files or (state.base is not None and state.base.is_raw):
        return False
    return not any(d.is_raw for d in state.deltas)


_T = TypeVar("_T")
_R = TypeVar("_R")


# The compactor reads an event file with a few Python calls (open, read, rename), much
# less per file than the reader's read plan (``THREADED_READ_MIN_AVG_BYTES``, 64 KiB), so
# its threads pay off for much smaller files. Measured on 2 cores, 1,000 files read
# serially vs on 2 threads: 1 row each (0.9 KB) 169-207 vs 186-212 ms (no gain); 20 rows
# (1.2 KB) 185 vs 168; 100 rows (2 KB) 184-203 vs 156-178; 10,000 rows 160 vs 77 ms.
THREADED_EVENT_READ_MIN_AVG_BYTES = 1024

# Threads trade CPU for time: on 1,000 files of 100 rows the two threads' GIL hand-offs
# cost ~120 ms of CPU more than one thread (460 vs 375 ms CPU for the whole compaction),
# which is only won back as wall time when a core is idle; with the other core busy the
# threaded compaction was slower (median 464 vs 427 ms). So the compactor, a background
# service, reads in threads only while the machine has a core to spare: the one-minute
# load average (which counts this process's own running thread) at most the cores less
# this many.
SPARE_CORES_FOR_THREADS = 0.5


def _cores_to_spare() -> bool:
    """Whether the load average leaves at least ``SPARE_CORES_FOR_THREADS`` cores idle."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform: use the threads
        return True
    return load <= (os.cpu_count() or 1) - SPARE_CORES_FOR_THREADS


def map_in_threads(
    fn: Callable[[_T], _R], items: Sequence[_T], *, total_bytes: int | None = None
) -> list[_R]:
    """``[fn(x) for x in items]``, on ``READ_THREADS`` threads in contiguous chunks when the
    items are files averaging at least ``THREADED_EVENT_READ_MIN_AVG_BYTES``
    (``total_bytes``; below it each file costs more GIL-holding Python than GIL-free
    decoding, and threads only add contention) and the machine has a core to spare
    (``SPARE_CORES_FOR_THREADS``). The result is the same either way, in item order.

    pyarrow decodes ORC without the GIL. One task per chunk rather than per file: with
    thousands of small files, a future per file costs as much as reading the file.
    """
    n = len(items)
    small = total_bytes is not None and total_bytes < n * THREADED_EVENT_READ_MIN_AVG_BYTES
    if READ_THREADS <= 1 or n < 2 or small or not _cores_to_spare():
        return [fn(x) for x in items]
    k = min(n, READ_THREADS * 4)  # a few chunks per thread even out uneven files
    step = -(-n // k)
    chunks = [items[i : i + step] for i in range(0, n, step)]
    with concurrent.futures.ThreadPoolExecutor(READ_THREADS, thread_name_prefix="compact") as ex:
        parts = list(ex.map(lambda ch: [fn(x) for x in ch], chunks))
    return [r for part in parts for r in part]


def merged_events(
    state: AcidState,
    snapshot: CompactorSnapshot,
    storage: Storage,
    schema: TableSchema,
    *,
    bucket: int | None = None,
) -> pa.Table | None:
    """Base + insert deltas - deletes, as event columns, in one vectorized pass.

    Each insert file's events are read as they are (:func:`map_in_threads`), events of
    invalid write ids are dropped, then every event whose ROW__ID has a valid delete
    event is removed with one key-set lookup (the reader's ``DeleteKeySet``). Applying
    all delete deltas to all rows is exact: a delete event names one ROW__ID, and Hive's
    per-split qualification only skips deltas that cannot name any row of the split.
    ``row`` has the table's row type (:func:`conform_events`).

    With ``bucket``, only the files ``bucket_<bucket>`` are read: Hive keeps a writer id's
    inserts and the delete events that name them in files of that bucket number.
    """
    jobs: list[tuple[str, int, int, bool, str]] = []
    if state.base is not None:
        jobs += [(f.path, f.logical_length, f.length, False, f.lb_dir) for f in state.base.files
                 if bucket is None or f.bucket_id == bucket]  # fmt: skip
    for d in state.insert_deltas:
        assert isinstance(d.parsed, ParsedDelta)
        check = (
            snapshot.is_write_id_range_valid(d.parsed.min_write_id, d.parsed.max_write_id)
            != RangeResponse.ALL
        )
        jobs += [(f.path, f.logical_length, f.length, check, f.lb_dir) for f in d.files
                 if bucket is None or f.bucket_id == bucket]  # fmt: skip
    jobs = [j for j in jobs if j[1] > 0]
    tagger = _LbTagger([j[4] for j in jobs])

    def read(job: tuple[str, int, int, bool, str]) -> pa.Table:
        path, logical, length, check, lb = job
        t = _read_events(storage, path, logical, length, delete=False)
        if check and t.num_rows:
            t = t.filter(valid_write_id_mask(t.column("c"), snapshot))
        return tagger.tag(t, lb)

    events = conform_events(map_in_threads(read, jobs, total_bytes=sum(j[1] for j in jobs)), schema)
    if events is None:
        return None
    dfiles = [f for f in delete_files(state) if bucket is None or f.bucket_id == bucket]
    if dfiles:
        registry = DeleteKeySet(storage, dfiles, snapshot)
        keys = key_table(events.column("o"), events.column("b"), events.column("r"))
        dead = registry.deleted(keys, frozenset(f.delta for f in dfiles))
        events = events.filter(pc.invert(dead))
    n = events.num_rows
    out = pa.table(
        {
            "op": pa.array(np.zeros(n, np.int32)),
            "o": events.column("o"),
            "b": events.column("b"),
            "r": events.column("r"),
            # Hive's MajorQueryCompactor: currentTransaction = ROW__ID.writeId.
            "c": events.column("o"),
            "row": events.column("row"),
        }
    )
    if _LB in events.column_names:
        out = out.append_column(_LB, events.column(_LB))
    return out


def major(
    part_dir: str,
    state: AcidState,
    *,
    schema: TableSchema,
    write_ids: ValidCompactorWriteIdList,
    txns: ValidTxnList,
    compactor_txn_id: int,
    storage: Storage,
    options: OrcWriterOptions,
    skewed: SkewedInfo | None = None,
) -> RewriteResult:
    """Write ``base_<hwm>_v<ctxn>`` holding every row of the compactor's snapshot.

    ``state`` is the directory as :class:`CompactorSnapshot` sees it. When every input is
    an event file, events are merged directly (:func:`merged_events`); with original
    files the rows come through :func:`acidstream.acid.reader.iter_batches`, which gives them
    Hive's synthetic ROW__IDs.
    """
    snapshot = CompactorSnapshot.of(write_ids)
    by_bucket: dict[OutKey, list[pa.Table]] = {}
    if is_event_only(state):
        events = merged_events(state, snapshot, storage, schema)
    else:
        events = reader_events(part_dir, schema, snapshot, txns, storage)
        if events is not None and skewed is not None and skewed.is_list_bucketed:
            # The reader does not say which directory a row came from: place it by value,
            # as the writers did.
            rows = pa.Table.from_struct_array(events.column("row").combine_chunks())
            events = events.append_column(_LB, list_bucketing_dirs(skewed, schema, rows))
    if events is not None:
        row_type = events.schema.field("row").type
        _split_by_writer(events, by_bucket)
    else:
        row_type = row_type_of(schema)
    out_name = layout.base_dir_name(write_ids.high_watermark, visibility_txn_id=compactor_txn_id)
    out_dir = storage.join(part_dir, out_name)
    writer = compaction_writer(storage, part_dir, schema, out_name, options=options)
    total = 0
    if not by_bucket:
        # Everything was deleted: an empty base still supersedes the old directories.
        by_bucket[("", 0)] = [empty_events(row_type)]
    n_buckets = len({b for _, b in by_bucket})
    for key in sorted(by_bucket):
        ev = sort_events(pa.concat_tables(by_bucket.pop(key)))
        total += write_events_file(
            writer, key[1], ev, kind="base", row_type=row_type, lb_dir=key[0]
        )
    return RewriteResult((out_dir,), total, 0, n_buckets)


def empty_events(row_type: pa.StructType) -> pa.Table:
    """An event table with no rows."""
    return pa.table(
        {
            "op": pa.array([], pa.int32()),
            "o": pa.array([], pa.int64()),
            "b": pa.array([], pa.int32()),
            "r": pa.array([], pa.int64()),
            "c": pa.array([], pa.int64()),
            "row": pa.array([], row_type),
        }
    )


_SHORT = ("op", "o", "b", "r", "c", "row")


def _read_events(
    storage: Storage, path: str, logical: int, length: int, *, delete: bool
) -> pa.Table:
    """One ACID file's events as columns op, o, b, r, c (and ``row`` as the file has it).

    Only the file tail pyarrow opens anyway is consulted (the event column names and
    ``hive.acid.version``); a file failing those checks gets ``require_acid``'s error.
    Timestamps decode in nanoseconds, or microseconds for a file holding a value
    outside that range (``acidstream.acid.orc_read``).
    """
    orcf = open_orc(storage, path, length=logical if logical < length else None)
    layout_ = _event_layout(tuple(orcf.schema.names))
    version = (orcf.metadata or {}).get(ACID_VERSION_KEY.encode(), b"").strip()
    if layout_ is None or (version and not (version.isdigit() and int(version) >= 2)):
        # Not a Hive 3+ event file: the full inspection gives the precise error.
        _, info = inspect_orc(storage, path, length=logical, file_length=length)
        require_acid(info)
        raise AcidFormatError(f"{path}: not a Hive ACID event file (version {version!r})")
    file_cols, short_names = layout_
    # Insert files: every column is wanted, and reading them all spares pyarrow's name
    # lookup; they come in file order, which ``short_names`` follows.
    t = read_orc_columns(
        orcf,
        storage=storage,
        path=path,
        length=logical,
        columns=list(file_cols[:5]) if delete else None,
        timestamp_unit="us",
    )
    if delete:
        return t.select(list(file_cols[:5])).rename_columns(list(_SHORT[:5]))
    t = t.rename_columns(list(short_names))
    return t if short_names == _SHORT else t.select(list(_SHORT))


@functools.lru_cache(maxsize=256)
def _event_layout(top: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """For a file's top-level column names: (its names of the six event columns in
    canonical order, the short name of each of its columns in file order); ``None`` when
    they are not the ACID event columns (``acid_column_names``). Cached: a partition's
    files almost always share one layout."""
    names = acid_column_names(pa.schema([pa.field(n, pa.null()) for n in top]))
    if names is None:
        return None
    short = {names[n]: _SHORT[i] for i, n in enumerate(_EVENT_NAMES)}
    return tuple(names[n] for n in _EVENT_NAMES), tuple(short[n] for n in top)


def minor(
    part_dir: str,
    state: AcidState,
    *,
    schema: TableSchema,
    write_ids: ValidCompactorWriteIdList,
    compactor_txn_id: int,
    storage: Storage,
    options: OrcWriterOptions,
) -> RewriteResult:
    """Write ``delta_<min>_<hwm>_v<ctxn>`` and ``delete_delta_<min>_<hwm>_v<ctxn>`` from the
    deltas ``state`` chose (computed with :class:`CompactorSnapshot`)."""
    snapshot = CompactorSnapshot.of(write_ids)
    deltas = [d for d in state.deltas if isinstance(d.parsed, ParsedDelta)]
    if not deltas:
        return RewriteResult((), 0, 0, 0)
    lo = min(d.parsed.min_write_id for d in deltas)  # type: ignore[union-attr]
    hwm = write_ids.high_watermark
    jobs: list[tuple[str, int, int, bool, bool, str]] = []
    for d in deltas:
        assert isinstance(d.parsed, ParsedDelta)
        check = (
            snapshot.is_write_id_range_valid(d.parsed.min_write_id, d.parsed.max_write_id)
            != RangeResponse.ALL
        )
        jobs += [(f.path, f.logical_length, f.length, d.is_delete, check, f.lb_dir)
                 for f in d.files if f.logical_length]  # fmt: skip
    tagger = _LbTagger([j[5] for j in jobs])

    def read(job: tuple[str, int, int, bool, bool, str]) -> tuple[bool, pa.Table]:
        path, logical, length, is_delete, check, lb = job
        t = _read_events(storage, path, logical, length, delete=is_delete)
        if check and t.num_rows:
            t = t.filter(valid_write_id_mask(t.column("c"), snapshot))
        return is_delete, tagger.tag(t, lb)

    read_back = map_in_threads(read, jobs, total_bytes=sum(j[1] for j in jobs))
    inserts: dict[OutKey, list[pa.Table]] = {}
    deletes: dict[OutKey, list[pa.Table]] = {}
    ins_events = conform_events([t for is_del, t in read_back if not is_del], schema)
    # A row its own write id inserted and deleted would come back in delta_W_W_vT.
    ins_events, del_events = drop_self_deleted(ins_events, [t for d, t in read_back if d])
    if ins_events is not None:
        _split_by_writer(ins_events, inserts)
    for t in del_events:
        if t.num_rows:
            _split_by_writer(t, deletes)
    row_type = (
        ins_events.schema.field("row").type if ins_events is not None else row_type_of(schema)
    )
    outputs: list[str] = []
    n_ins = n_del = 0
    writer = compaction_writer(
        storage,
        part_dir,
        schema,
        layout.delta_dir_name(lo, hwm, visibility_txn_id=compactor_txn_id),
        options=options,
    )
    # The insert delta is always written (maybe empty): it is what makes the compacted
    # deltas obsolete even when every event in them was aborted.
    outputs.append(writer.make_dir(""))
    for key in sorted(inserts):
        events = sort_events(pa.concat_tables(inserts[key]))
        n_ins += write_events_file(
            writer, key[1], events, kind="insert", row_type=row_type, lb_dir=key[0]
        )
    if any(d.is_delete for d in deltas):
        outputs.append(writer.make_dir("", delete=True))
        for key in sorted(deletes):
            events = sort_events(pa.concat_tables(deletes[key]), newest_first=True)
            n_del += write_events_file(
                writer, key[1], events, kind="delete", row_type=row_type, lb_dir=key[0]
            )
    buckets = {b for _, b in inserts} | {b for _, b in deletes}
    return RewriteResult(tuple(outputs), n_ins, n_del, len(buckets))
