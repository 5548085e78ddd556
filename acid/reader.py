"""Snapshot reads of Hive ACID tables into Arrow, as Hive's vectorized ACID reader sees them.

``read_table`` resolves the snapshot with ``get_acid_state`` (per partition),
then reads every selected file with ``pyarrow.orc`` and applies Hive's rules
with Arrow compute (no per-row Python):

1. rows whose ``currentTransaction`` is not a valid write id are dropped (skipped
   when the whole delta range is valid, and for bases, as Hive does);
2. rows whose (originalTransaction, bucket, rowId) has a valid delete event in a
   qualifying delete delta are dropped (``acid.delete_registry``);
3. original (pre-ACID) files get Hive's synthetic ROW__IDs;
4. streaming files are read only up to their ``_flush_length``.

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
import functools
import os
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acid import bucket_codec
from acid.delete_registry import (
    DeleteFile,
    DeleteKeySet,
    RowIdGroups,
    SortMergedDeletes,
    deleted_row_mask,
    is_qualified_delete_delta,
    key_table,
    valid_write_id_mask,
)
from acid.directory import AcidDir, AcidState, DataFile, OriginalFile, get_acid_state
from acid.errors import AcidFormatError, ConfigError, TableNotFoundError
from acid.layout import ParsedDelta, is_hidden, parse_dir_name
from acid.orc_inspect import OrcFileInfo, inspect_orc, logical_length, require_acid
from acid.schema import TableSchema
from acid.snapshot import RangeResponse, ValidTxnList, ValidWriteIdList
from acid.storage import Storage

__all__ = [
    "DEFAULT_DELETE_EVENT_CAP",
    "HIVE_DEFAULT_PARTITION",
    "ROW_ID_COLUMN",
    "ROW_ID_TYPE",
    "Predicate",
    "iter_batches",
    "read_table",
]

DEFAULT_DELETE_EVENT_CAP = 10_000_000  # hive.transactional.events.mem
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
ROW_ID_COLUMN = "row__id"
ROW_ID_TYPE = pa.struct([("writeid", pa.int64()), ("bucketid", pa.int32()), ("rowid", pa.int64())])

# (column, op, value) with op in = == != < <= > >= in "not in" "is null" "is not null".
Predicate = tuple[str, str, Any]
_ALL_DELTAS: frozenset[ParsedDelta] = frozenset()


# ---------------------------------------------------------------------------------------------
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


def _predicate_expr(preds: Sequence[Predicate]) -> pc.Expression:
    expr: pc.Expression | None = None
    for item in preds:
        if len(item) == 2:
            col, op, value = item[0], item[1], None
        elif len(item) == 3:
            col, op, value = item
        else:
            raise ConfigError(f"predicate {item!r} must be (column, op, value)")
        f = pc.field(col)
        o = op.strip().lower()
        if o in ("=", "=="):
            e = f == value
        elif o == "!=":
            e = f != value
        elif o == "<":
            e = f < value
        elif o == "<=":
            e = f <= value
        elif o == ">":
            e = f > value
        elif o == ">=":
            e = f >= value
        elif o == "in":
            e = f.isin(list(value))
        elif o == "not in":
            e = ~f.isin(list(value))
        elif o == "is null":
            e = f.is_null()
        elif o == "is not null":
            e = f.is_valid()
        else:
            raise ConfigError(f"unknown predicate operator {op!r}")
        expr = e if expr is None else expr & e
    if expr is None:
        raise ConfigError("empty predicate list")
    return expr


# ---------------------------------------------------------------------------------------------
# partitions


@dataclass(frozen=True)
class _Partition:
    path: str
    values: tuple[tuple[str, str | None], ...]


def _partition_kv(name: str) -> tuple[str, str | None] | None:
    if "=" not in name or is_hidden(name):
        return None
    k, v = name.split("=", 1)
    if not k:
        return None
    value = urllib.parse.unquote(v)  # Hive's escapePathName writes %XX
    return k.lower(), (None if value == HIVE_DEFAULT_PARTITION else value)


def _trailing_partition_values(path: str) -> tuple[tuple[str, str | None], ...]:
    out: list[tuple[str, str | None]] = []
    for part in reversed(path.rstrip("/").split("/")):
        kv = _partition_kv(part)
        if kv is None:
            break
        out.append(kv)
    return tuple(reversed(out))


def _discover_partitions(
    storage: Storage, path: str, values: tuple[tuple[str, str | None], ...]
) -> list[_Partition]:
    """The ``k=v`` partition directories under ``path`` (recursively), or ``path`` itself."""
    children = storage.list_dir(path)
    parts = [(c, _partition_kv(c.name)) for c in children if c.is_dir]
    part_dirs = [(c, kv) for c, kv in parts if kv is not None]
    acid_like = any(
        not c.is_dir or parse_dir_name(c.name) is not None
        for c in children
        if not is_hidden(c.name)
    )
    if not part_dirs or acid_like:
        return [_Partition(path, values)]
    out: list[_Partition] = []
    for c, kv in part_dirs:
        assert kv is not None
        out.extend(_discover_partitions(storage, c.path, (*values, kv)))
    return out


# ---------------------------------------------------------------------------------------------
# the plan: what to read, and the output schema


@dataclass(frozen=True)
class _Output:
    """Reference table columns (names and types, positional) and what the caller asked for."""

    names: tuple[str, ...]
    types: tuple[pa.DataType, ...]
    partition_names: tuple[str, ...]
    projected: tuple[int, ...]  # positions of table columns to return
    read_positions: tuple[int, ...]  # positions to read (projected + filter needs)
    out_partitions: tuple[str, ...]
    include_row_id: bool
    filter: pc.Expression | None

    def schema(self) -> pa.Schema:
        fields: list[pa.Field] = []
        if self.include_row_id:
            fields.append(pa.field(ROW_ID_COLUMN, ROW_ID_TYPE))
        fields += [pa.field(self.names[i], self.types[i]) for i in self.projected]
        fields += [pa.field(p, pa.string()) for p in self.out_partitions]
        return pa.schema(fields)


def _peek_row_schema(storage: Storage, path: str) -> pa.Schema | None:
    """The row schema of any ORC file of a partition, chosen or not (for empty snapshots)."""
    try:
        entries = storage.list_dir(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    for e in entries:
        if is_hidden(e.name) or e.name.endswith("_flush_length"):
            continue
        if e.is_dir:
            if parse_dir_name(e.name) is None:
                continue
            for f in storage.list_dir(e.path):
                if f.is_dir or is_hidden(f.name) or f.name.endswith("_flush_length") or f.size == 0:
                    continue
                try:
                    return inspect_orc(storage, f.path, file_length=f.size)[1].row_schema()
                except AcidFormatError:
                    continue
        elif e.size:
            try:
                return inspect_orc(storage, e.path, file_length=e.size)[1].row_schema()
            except AcidFormatError:
                continue
    return None


def _build_output(
    row_schema: pa.Schema | None,
    *,
    schema: TableSchema | None,
    partition_names: tuple[str, ...],
    columns: Sequence[str] | None,
    include_row_id: bool,
    filter: Sequence[Predicate] | pc.Expression | None,
) -> _Output:
    if schema is not None:
        names = schema.names
        types = tuple(t.to_arrow() for _, t in schema.columns)
    elif row_schema is not None:
        names = tuple(row_schema.names)
        types = tuple(row_schema.types)
    else:
        names, types = (), ()
    lower = {n.lower(): i for i, n in enumerate(names)}
    parts_lower = {p.lower(): p for p in partition_names}
    if columns is None:
        projected = tuple(range(len(names)))
        out_parts = partition_names
    else:
        proj: list[int] = []
        ps: list[str] = []
        for c in columns:
            key = c.strip().lower()
            if key in lower:
                proj.append(lower[key])
            elif key in parts_lower:
                ps.append(parts_lower[key])
            else:
                raise ConfigError(f"unknown column {c!r}; table columns are {list(names)}")
        projected, out_parts = tuple(proj), tuple(ps)
    expr: pc.Expression | None = None
    read = set(projected)
    if filter is not None:
        if isinstance(filter, pc.Expression):
            expr = filter
            read = set(range(len(names)))  # cannot tell which columns an expression uses
        else:
            expr = _predicate_expr(filter)
            for item in filter:
                key = str(item[0]).lower()
                if key in lower:
                    read.add(lower[key])
                elif key not in parts_lower:
                    raise ConfigError(f"unknown column {item[0]!r} in predicate")
    return _Output(
        names=names,
        types=types,
        partition_names=partition_names,
        projected=projected,
        read_positions=tuple(sorted(read)),
        out_partitions=out_parts,
        include_row_id=include_row_id,
        filter=expr,
    )


# ---------------------------------------------------------------------------------------------
# batch assembly


def _arange(start: int, n: int) -> pa.Array:
    if n == 0:
        return pa.array([], pa.int64())
    ones = pa.repeat(pa.scalar(1, pa.int64()), n)
    return pc.add(pc.cumulative_sum(ones), start - 1)


def _finish(
    out: _Output,
    row_cols: list[pa.ChunkedArray | pa.Array | None],
    *,
    n: int,
    keys: pa.Table | None,
    partition: _Partition,
) -> pa.Table:
    """Assemble the output table of one batch: ROW__ID, read columns (renamed), partitions."""
    arrays: list[pa.Array | pa.ChunkedArray] = []
    fields: list[pa.Field] = []
    if out.include_row_id:
        assert keys is not None
        rid = pa.StructArray.from_arrays(
            [
                keys.column("o").combine_chunks(),
                keys.column("b").combine_chunks(),
                keys.column("r").combine_chunks(),
            ],
            fields=list(ROW_ID_TYPE),
        )
        arrays.append(rid)
        fields.append(pa.field(ROW_ID_COLUMN, ROW_ID_TYPE))
    for pos, col in zip(out.read_positions, row_cols, strict=True):
        typ = out.types[pos]
        if col is None:
            col = pa.nulls(n, typ)
        elif not col.type.equals(typ):
            col = pc.cast(col, typ)
        arrays.append(col)
        fields.append(pa.field(out.names[pos], typ))
    pvals = dict(partition.values)
    for p in out.partition_names:
        arrays.append(pa.repeat(pa.scalar(pvals.get(p), pa.string()), n))
        fields.append(pa.field(p, pa.string()))
    t = pa.Table.from_arrays(arrays, schema=pa.schema(fields)) if fields else pa.table({})
    if out.filter is not None and t.num_rows:
        t = t.filter(out.filter)
    return t.select([f.name for f in out.schema()])


# ---------------------------------------------------------------------------------------------
# per-file readers


@dataclass
class _Deletes:
    registry: DeleteKeySet | SortMergedDeletes | None
    deltas: tuple[ParsedDelta, ...]

    def qualifying(self, split_min: int, split_stmt: int) -> frozenset[ParsedDelta]:
        return frozenset(
            d
            for d in self.deltas
            if is_qualified_delete_delta(
                split_min_write_id=split_min, split_statement_id=split_stmt, delete_delta=d
            )
        )


def _row_paths(info: OrcFileInfo, out: _Output) -> list[str | None]:
    """ORC column paths of the requested table columns in this file (by position)."""
    fields = info.row_fields
    prefix = f"{info.acid_columns['row']}." if info.acid_columns is not None else ""
    return [prefix + fields[p] if p < len(fields) else None for p in out.read_positions]


def _as_mask(mask: np.ndarray | None) -> pa.Array | None:
    """A numpy "deleted" mask as an Arrow keep-mask (``None``: keep everything)."""
    if mask is None:
        return None
    return pa.array(~mask, type=pa.bool_())


def _read_acid_file(
    storage: Storage,
    path: str,
    *,
    length: int,
    file_length: int,
    out: _Output,
    partition: _Partition,
    write_ids: ValidWriteIdList,
    check_validity: bool,
    deletes: _Deletes,
    split_min: int,
    split_stmt: int,
) -> Iterator[pa.Table]:
    orcf, info = inspect_orc(storage, path, length=length, file_length=file_length)
    require_acid(info)
    assert info.acid_columns is not None
    names = info.acid_columns
    qualifying = deletes.qualifying(split_min, split_stmt) if deletes.registry else frozenset()
    apply_deletes = bool(qualifying)
    groups: RowIdGroups | None = None
    if apply_deletes and isinstance(deletes.registry, DeleteKeySet):
        # Deletes are matched per (originalTransaction, bucket) group of sorted rowIds
        # (Hive's ColumnizedDeleteEventRegistry); batches with several groups fall back
        # to the general key matcher.
        groups = deletes.registry.groups(qualifying)
        # The key index's last entry is the file's max key: deletes that all sort
        # after it cannot hit this file, and the ACID columns need not be read.
        file_max = info.key_index[-1] if info.key_index else None
        if groups.min_key is None or (file_max is not None and groups.min_key > file_max):
            apply_deletes = False
    need_keys = apply_deletes or out.include_row_id
    row_paths = _row_paths(info, out)
    cols = [p for p in row_paths if p is not None]
    acid_cols: list[str] = []
    if need_keys:
        acid_cols += [names["originalTransaction"], names["bucket"], names["rowId"]]
    if check_validity:
        acid_cols.append(names["currentTransaction"])
    if not cols and not acid_cols:
        acid_cols.append(names["operation"])  # something to count rows with
    read_cols = acid_cols + cols
    if isinstance(deletes.registry, SortMergedDeletes) and apply_deletes:
        batches: Iterator[pa.Table] = (
            pa.Table.from_batches([orcf.read_stripe(i, columns=read_cols)])
            for i in range(info.nstripes)
        )
    else:
        batches = iter([orcf.read(columns=read_cols)])
    for t in batches:
        n = t.num_rows
        keep: pa.Array | pa.ChunkedArray | None = None
        if check_validity:
            keep = valid_write_id_mask(t.column(names["currentTransaction"]), write_ids)
        if apply_deletes:
            assert deletes.registry is not None
            fast = False
            dead: np.ndarray | None = None
            if groups is not None:
                fast, dead = groups.deleted(t.column(0), t.column(1), t.column(2))
            if fast:
                alive = _as_mask(dead)
            else:
                keys = key_table(t.column(0), t.column(1), t.column(2))
                alive = pc.invert(deletes.registry.deleted(keys, qualifying))
            if alive is not None:
                keep = alive if keep is None else pc.and_(keep, alive)
        keys = key_table(t.column(0), t.column(1), t.column(2)) if out.include_row_id else None
        row_cols: list[pa.ChunkedArray | pa.Array | None] = [
            None if p is None else _nested(t, p) for p in row_paths
        ]
        if keep is not None:
            # Filter only what is returned, not the ACID columns used to decide.
            row_cols = _filter_columns(row_cols, keep)
            n = int(pc.sum(pc.cast(keep, pa.int64())).as_py() or 0)  # nulls drop, as filter
            if keys is not None:
                keys = keys.filter(keep)
        yield _finish(out, row_cols, n=n, keys=keys, partition=partition)


def _filter_columns(
    cols: list[pa.ChunkedArray | pa.Array | None], keep: pa.Array | pa.ChunkedArray
) -> list[pa.ChunkedArray | pa.Array | None]:
    """``cols`` filtered by ``keep`` (a null in ``keep`` drops the row) in one table filter."""
    present = [c for c in cols if c is not None]
    if not present:
        return cols
    t = pa.Table.from_arrays(present, names=[str(i) for i in range(len(present))])
    ft = t.filter(keep)
    it = iter(ft.columns)
    return [None if c is None else next(it) for c in cols]


def _nested(t: pa.Table, path: str) -> pa.ChunkedArray:
    """A (possibly nested ``row.x``) column of a table read with nested column selection."""
    head, _, rest = path.partition(".")
    col = t.column(head)
    while rest:
        name, _, rest = rest.partition(".")
        col = pc.struct_field(col, name)
    return col


def _read_original_file(
    storage: Storage,
    of: OriginalFile,
    *,
    out: _Output,
    partition: _Partition,
    write_ids: ValidWriteIdList,
    deletes: _Deletes,
) -> Iterator[pa.Table]:
    orcf, info = inspect_orc(storage, of.path, file_length=of.length)
    if info.is_acid:
        # A full-ACID file where Hive expects an original one (Impala's test puts
        # query-based compaction output at the table root): read its own ROW__IDs.
        yield from _read_acid_file(
            storage,
            of.path,
            length=of.length,
            file_length=of.length,
            out=out,
            partition=partition,
            write_ids=write_ids,
            check_validity=True,
            deletes=deletes,
            split_min=0,
            split_stmt=-1,
        )
        return
    qualifying = (
        deletes.qualifying(of.write_id, of.statement_id) if deletes.registry else frozenset()
    )
    need_keys = bool(qualifying) or out.include_row_id
    if need_keys and of.bucket_id is None:
        raise AcidFormatError(
            f"{of.path}: cannot give ROW__IDs to an original file whose name is not N_M[_copy_K]"
        )
    row_paths = _row_paths(info, out)
    cols = [p for p in row_paths if p is not None]
    t = orcf.read(columns=cols) if cols else orcf.read(columns=[info.schema.names[0]])
    n = t.num_rows
    keys = None
    if need_keys:
        assert of.bucket_id is not None
        bucket = bucket_codec.encode(of.bucket_id, of.statement_id)
        keys = key_table(
            pa.repeat(pa.scalar(of.write_id, pa.int64()), n),
            pa.repeat(pa.scalar(bucket, pa.int32()), n),
            _arange(of.start_row_id, n),
        )
        if qualifying:
            assert deletes.registry is not None
            alive: pa.Array | None
            if isinstance(deletes.registry, DeleteKeySet):
                # One (writeId, bucket) group and dense synthetic rowIds: index the mask.
                dels = deletes.registry.groups(qualifying).row_ids(of.write_id, bucket)
                rows = np.arange(of.start_row_id, of.start_row_id + n, dtype=np.int64)
                alive = _as_mask(deleted_row_mask(rows, dels))
            else:
                alive = pc.invert(deletes.registry.deleted(keys, qualifying))
            if alive is not None:
                t = t.filter(alive)
                keys = keys.filter(alive)
    row_cols: list[pa.ChunkedArray | pa.Array | None] = [
        None if p is None else t.column(p) for p in row_paths
    ]
    yield _finish(out, row_cols, n=t.num_rows, keys=keys, partition=partition)


# ---------------------------------------------------------------------------------------------
# partitions and tables


def _delete_files(state: AcidState) -> list[DeleteFile]:
    out = []
    for d in state.delete_deltas:
        assert isinstance(d.parsed, ParsedDelta)
        for f in d.files:
            if f.logical_length == 0:
                continue
            out.append(DeleteFile(f.path, d.parsed, f.bucket_id, f.logical_length, f.length))
    return out


# One unit of reading (a file): a thunk yielding its tables, and whether it may run in a
# worker thread ahead of the consumer (not on the bounded-memory sort-merge path).
_Task = tuple[Callable[[], Iterator[pa.Table]], bool]

# Files are read by this many threads (pyarrow decodes ORC without the GIL).
READ_THREADS = max(1, min(4, os.cpu_count() or 1))


def _iter_partition(
    storage: Storage,
    partition: _Partition,
    state: AcidState,
    *,
    out: _Output,
    write_ids: ValidWriteIdList,
    delete_event_cap: int,
) -> Iterator[_Task]:
    dfiles = _delete_files(state)
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
    deletes = _Deletes(registry, tuple({f.delta: None for f in dfiles}))
    parallel = not isinstance(registry, SortMergedDeletes)

    def originals_of(dir_name: str | None) -> list[OriginalFile]:
        return [o for o in state.original_files if o.dir_name == dir_name]

    def original(of: OriginalFile) -> _Task:
        return (
            functools.partial(
                _read_original_file,
                storage,
                of,
                out=out,
                partition=partition,
                write_ids=write_ids,
                deletes=deletes,
            ),
            parallel,
        )

    for of in originals_of(None):
        yield original(of)
    dirs: list[AcidDir] = ([state.base] if state.base else []) + list(state.insert_deltas)
    for d in dirs:
        if d.is_raw:
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
            yield (
                functools.partial(
                    _read_acid_file,
                    storage,
                    f.path,
                    length=f.logical_length,
                    file_length=f.length,
                    out=out,
                    partition=partition,
                    write_ids=write_ids,
                    check_validity=check,
                    deletes=deletes,
                    split_min=split_min,
                    split_stmt=split_stmt,
                ),
                parallel,
            )


def _materialize(fn: Callable[[], Iterator[pa.Table]]) -> list[pa.Table]:
    return list(fn())


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
                    yield from pending.popleft().result()
                raise
            if not parallel:
                while pending:
                    yield from pending.popleft().result()
                yield from fn()
                continue
            pending.append(ex.submit(_materialize, fn))
            while len(pending) > 2 * threads:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
    finally:
        for fut in pending:
            fut.cancel()
        ex.shutdown(wait=True)


def _first_row_schema(
    storage: Storage, states: list[tuple[_Partition, AcidState]]
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
        peek = _peek_row_schema(storage, part.path)
        if peek is not None:
            return peek
    return None


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
) -> Iterator[pa.Table]:
    """Stream the visible rows of a snapshot, one Arrow table per file (or stripe).

    Same arguments and semantics as ``read_table``; every yielded table has the
    same schema. Nothing is read before the first ``next()``; after it, up to
    ``2 * READ_THREADS`` files are read ahead in threads (none on the sort-merge path).
    """
    yield from _run(
        path,
        write_ids=write_ids,
        txns=txns,
        columns=columns,
        include_row_id=include_row_id,
        filter=filter,
        delete_event_cap=delete_event_cap,
        schema=schema,
        storage=storage,
    )[1]


def read_table(
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

    Raises:
        TableNotFoundError: ``path`` does not exist.
        AcidFormatError: a file that must be ACID is not, a corrupt side file, etc.
        NotEnoughHistoryError: the snapshot is older than the oldest compacted base.
    """
    out_schema, batches = _run(
        path,
        write_ids=write_ids,
        txns=txns,
        columns=columns,
        include_row_id=include_row_id,
        filter=filter,
        delete_event_cap=delete_event_cap,
        schema=schema,
        storage=storage,
    )
    tables = [t for t in batches if t.num_rows]
    if not tables:
        return out_schema.empty_table()
    return pa.concat_tables(tables)


def _run(
    path: str | os.PathLike[str],
    *,
    write_ids: ValidWriteIdList | str | None,
    txns: ValidTxnList | str | None,
    columns: Sequence[str] | None,
    include_row_id: bool,
    filter: Sequence[Predicate] | pc.Expression | None,
    delete_event_cap: int,
    schema: TableSchema | None,
    storage: Storage | None,
) -> tuple[pa.Schema, Iterator[pa.Table]]:
    if storage is None:
        storage, spath = Storage.for_path(path)
    else:
        spath = os.fspath(path)
    if not storage.exists(spath):
        raise TableNotFoundError(f"{spath}: no such table, partition or file")
    wids = _write_ids(write_ids)
    tx = _txns(txns)
    if not storage.is_dir(spath):
        return _run_file(
            storage,
            spath,
            write_ids=wids,
            columns=columns,
            include_row_id=include_row_id,
            filter=filter,
            schema=schema,
        )
    partitions = _discover_partitions(storage, spath, _trailing_partition_values(spath))
    states = [
        (p, get_acid_state(p.path, write_ids=wids, txns=tx, storage=storage)) for p in partitions
    ]
    pnames: list[str] = []
    for p in partitions:
        for k, _ in p.values:
            if k not in pnames:
                pnames.append(k)
    row_schema = None if schema is not None else _first_row_schema(storage, states)
    out = _build_output(
        row_schema,
        schema=schema,
        partition_names=tuple(pnames),
        columns=columns,
        include_row_id=include_row_id,
        filter=filter,
    )

    def tasks() -> Iterator[_Task]:
        for part, st in states:
            yield from _iter_partition(
                storage, part, st, out=out, write_ids=wids, delete_event_cap=delete_event_cap
            )

    def gen() -> Iterator[pa.Table]:
        yield from _run_tasks(tasks())

    return out.schema(), gen()


def _run_file(
    storage: Storage,
    path: str,
    *,
    write_ids: ValidWriteIdList,
    columns: Sequence[str] | None,
    include_row_id: bool,
    filter: Sequence[Predicate] | pc.Expression | None,
    schema: TableSchema | None,
) -> tuple[pa.Schema, Iterator[pa.Table]]:
    """One data file read as a full-ACID file (its side file honoured when present)."""
    size = storage.size(path)
    length = logical_length(storage, path, file_length=size, use_side_file=True)
    _, info = inspect_orc(storage, path, length=length, file_length=size)
    require_acid(info)
    out = _build_output(
        info.row_schema(),
        schema=schema,
        partition_names=(),
        columns=columns,
        include_row_id=include_row_id,
        filter=filter,
    )
    part = _Partition(path, ())
    batches = _read_acid_file(
        storage,
        path,
        length=length,
        file_length=size,
        out=out,
        partition=part,
        write_ids=write_ids,
        check_validity=True,
        deletes=_Deletes(None, ()),
        split_min=0,
        split_stmt=-1,
    )
    return out.schema(), batches
