"""Reading one data file of a snapshot: an ACID event file or an original (pre-ACID) file.

``read_acid_file`` applies Hive's rules to one base or delta bucket file (write-id
validity, delete events, ROW__IDs); ``read_original_file`` gives an original file
Hive's synthetic ROW__IDs and applies deletes to them. Both yield batches already in
the output form of a ``ReadPlan`` (``acidstream.acid.read_plan.assemble``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid import bucket_codec
from acidstream.acid.delete_index import DeleteIndex, deleted_row_mask
from acidstream.acid.delete_registry import (
    KEY_COLUMNS,
    DeleteKeySet,
    SortMergedDeletes,
    is_qualified_delete_delta,
    key_table,
    normalize_bucket_property,
    normalize_key,
    valid_write_id_mask,
)
from acidstream.acid.directory import OriginalFile
from acidstream.acid.errors import AcidFormatError
from acidstream.acid.layout import ParsedDelta
from acidstream.acid.orc_inspect import OrcFileInfo, inspect_orc, require_acid
from acidstream.acid.orc_read import read_orc_columns
from acidstream.acid.partitions import Partition
from acidstream.acid.read_plan import ReadPlan, assemble
from acidstream.acid.snapshot import ValidWriteIdList
from acidstream.acid.storage import Storage

__all__ = [
    "Deletes",
    "decode_acid_file",
    "filter_columns",
    "nested_column",
    "read_acid_file",
    "read_original_file",
    "row_paths",
]


def _arange(start: int, n: int) -> pa.Array:
    if n == 0:
        return pa.array([], pa.int64())
    ones = pa.repeat(pa.scalar(1, pa.int64()), n)
    return pc.add(pc.cumulative_sum(ones), start - 1)


@dataclass
class Deletes:
    """The delete events a partition's files are matched against, and their deltas."""

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


def row_paths(info: OrcFileInfo, plan: ReadPlan) -> list[str | None]:
    """ORC column paths of the requested table columns in this file (by position)."""
    fields = info.row_fields
    prefix = f"{info.acid_columns['row']}." if info.acid_columns is not None else ""
    return [prefix + fields[p] if p < len(fields) else None for p in plan.read_positions]


def _as_mask(mask: np.ndarray | None) -> pa.Array | None:
    """A numpy "deleted" mask as an Arrow keep-mask (``None``: keep everything)."""
    if mask is None:
        return None
    return pa.array(~mask, type=pa.bool_())


def read_acid_file(
    storage: Storage,
    path: str,
    *,
    length: int,
    file_length: int,
    plan: ReadPlan,
    partition: Partition,
    write_ids: ValidWriteIdList,
    check_validity: bool,
    deletes: Deletes,
    split_min: int,
    split_stmt: int,
) -> Iterator[pa.Table]:
    """The visible rows of one ACID bucket file read up to its logical ``length``.

    ``check_validity`` drops rows whose ``currentTransaction`` is not a valid write
    id; ``split_min``/``split_stmt`` pick the qualifying delete deltas. Yields one
    batch, or one per stripe on the bounded-memory sort-merge path.
    """
    orcf, info = inspect_orc(storage, path, length=length, file_length=file_length)
    require_acid(info)
    assert info.acid_columns is not None
    names = info.acid_columns
    index: DeleteIndex | None = None
    threshold = 0
    if isinstance(deletes.registry, DeleteKeySet):
        # One index answers every split: a key counts when the newest delete delta naming
        # it qualifies for this file (acidstream.acid.delete_index).
        index = deletes.registry.index()
        threshold = index.threshold(split_min, split_stmt)
        qualifying: frozenset[ParsedDelta] = frozenset()
        # The key index's last entry is the file's max key: deletes that all sort
        # after it cannot hit this file, and the ACID columns need not be read.
        file_max = (
            normalize_key(info.key_index[-1]) if info.key_index and info.key_index[-1] else None
        )
        apply_deletes = (
            index.qualifies_any(threshold)
            and index.min_key is not None
            and (file_max is None or index.min_key <= file_max)
        )
    else:
        qualifying = deletes.qualifying(split_min, split_stmt) if deletes.registry else frozenset()
        apply_deletes = bool(qualifying)
    need_keys = apply_deletes or plan.include_row_id
    paths = row_paths(info, plan)
    cols = [p for p in paths if p is not None]
    acid_cols: list[str] = []
    if need_keys:
        acid_cols += [names["originalTransaction"], names["bucket"], names["rowId"]]
    if check_validity:
        acid_cols.append(names["currentTransaction"])
    if not cols and not acid_cols:
        acid_cols.append(names["operation"])  # something to count rows with
    read_cols = acid_cols + cols
    # One batch per stripe: memory stays at one decoded stripe whatever the file's size
    # (the sort-merge path also needs it, to load only each stripe's delete events).
    batches: Iterator[pa.Table] = (
        read_orc_columns(
            orcf,
            storage=storage,
            path=path,
            length=length,
            columns=read_cols,
            stripe=i,
            timestamp_unit=plan.timestamp_unit,
        )
        for i in _stripes(info)
    )
    for t in batches:
        n = t.num_rows
        keep: pa.Array | pa.ChunkedArray | None = None
        if check_validity:
            keep = valid_write_id_mask(t.column(names["currentTransaction"]), write_ids)
        if apply_deletes:
            assert deletes.registry is not None
            alive: pa.Array | None
            if index is not None:
                assert isinstance(deletes.registry, DeleteKeySet)
                alive = _index_alive(
                    index,
                    t,
                    threshold,
                    registry=deletes.registry,
                    qualifying=lambda: deletes.qualifying(split_min, split_stmt),
                )
            else:
                keys = key_table(t.column(0), t.column(1), t.column(2))
                alive = pc.invert(deletes.registry.deleted(keys, qualifying))
            if alive is not None:
                keep = alive if keep is None else pc.and_(keep, alive)
        keys = key_table(t.column(0), t.column(1), t.column(2)) if plan.include_row_id else None
        row_cols: list[pa.ChunkedArray | pa.Array | None] = [
            None if p is None else nested_column(t, p) for p in paths
        ]
        if keep is not None:
            # Filter only what is returned, not the ACID columns used to decide.
            row_cols = filter_columns(row_cols, keep)
            n = int(pc.sum(keep).as_py() or 0)  # true values; nulls drop, as in filter
            if keys is not None:
                keys = keys.filter(keep)
        yield assemble(plan, row_cols, n=n, keys=keys, partition=partition)


def _index_alive(
    index: DeleteIndex,
    t: pa.Table,
    threshold: int,
    *,
    registry: DeleteKeySet,
    qualifying: Callable[[], frozenset[ParsedDelta]],
) -> pa.Array | None:
    """Keep-mask of a batch whose first three columns are its keys (``None``: keep all):
    one (originalTransaction, bucket) group by indexing, any other batch by the index's
    packed binary search, or, when keys do not pack (or are null), Arrow's hash join."""
    b = normalize_bucket_property(t.column(1))
    fast, dead = index.deleted_group(t.column(0), b, t.column(2), threshold)
    if fast:
        return _as_mask(dead)
    keys = key_table(t.column(0), b, t.column(2))
    if index.packs and not any(keys.column(c).null_count for c in KEY_COLUMNS):
        o, bb, r = (keys.column(c).to_numpy().astype(np.int64, copy=False) for c in KEY_COLUMNS)
        try:
            return _as_mask(index.deleted(o, bb, r, threshold))
        except ValueError:
            pass  # data keys outside the packed range
    return pc.invert(registry.deleted(keys, qualifying()))


def decode_acid_file(
    storage: Storage, path: str, *, length: int, file_length: int, plan: ReadPlan, keys: bool
) -> tuple[list[str | None], pa.Table]:
    """One whole ACID file's columns for ``plan``, decoded: the ORC paths of the plan's
    columns in this file (``None``: the file lacks it) and the table read, the key columns
    (originalTransaction, bucket, rowId) first when ``keys``, then the row columns."""
    orcf, info = inspect_orc(storage, path, length=length, file_length=file_length)
    require_acid(info)
    assert info.acid_columns is not None
    names = info.acid_columns
    paths = row_paths(info, plan)
    acid_cols = [names["originalTransaction"], names["bucket"], names["rowId"]] if keys else []
    cols = [p for p in paths if p is not None]
    if not cols and not acid_cols:
        acid_cols.append(names["operation"])  # something to count rows with
    t = read_orc_columns(
        orcf,
        storage=storage,
        path=path,
        length=length,
        columns=acid_cols + cols,
        timestamp_unit=plan.timestamp_unit,
    )
    return paths, t


def filter_columns(
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


def nested_column(t: pa.Table, path: str) -> pa.ChunkedArray:
    """A (possibly nested ``row.x``) column of a table read with nested column selection."""
    head, _, rest = path.partition(".")
    col = t.column(head)
    while rest:
        name, _, rest = rest.partition(".")
        col = pc.struct_field(col, name)
    return col


def read_original_file(
    storage: Storage,
    of: OriginalFile,
    *,
    plan: ReadPlan,
    partition: Partition,
    write_ids: ValidWriteIdList,
    deletes: Deletes,
) -> Iterator[pa.Table]:
    """The visible rows of one original (pre-ACID) file, with Hive's synthetic ROW__IDs
    (write id of its directory, ``bucket`` from its name, rowIds from its offset)."""
    orcf, info = inspect_orc(storage, of.path, file_length=of.length)
    if info.is_acid:
        # A full-ACID file where Hive expects an original one (Impala's test puts
        # query-based compaction output at the table root): read its own ROW__IDs.
        yield from read_acid_file(
            storage,
            of.path,
            length=of.length,
            file_length=of.length,
            plan=plan,
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
    need_keys = bool(qualifying) or plan.include_row_id
    if need_keys and of.bucket_id is None:
        raise AcidFormatError(
            f"{of.path}: cannot give ROW__IDs to an original file whose name is not N_M[_copy_K]"
        )
    paths = row_paths(info, plan)
    cols = [p for p in paths if p is not None]
    start_row_id = of.start_row_id
    for stripe in _stripes(info):
        t = read_orc_columns(
            orcf,
            storage=storage,
            path=of.path,
            length=of.length,
            columns=cols or [info.schema.names[0]],
            stripe=stripe,
            timestamp_unit=plan.timestamp_unit,
        )
        n = t.num_rows
        yield _original_batch(
            t, of, start_row_id, plan=plan, partition=partition, deletes=deletes,
            qualifying=qualifying if need_keys else None, row_paths=paths,
        )  # fmt: skip
        start_row_id += n


def _stripes(info: OrcFileInfo) -> list[int | None]:
    """Stripe numbers to read one by one; ``[None]`` (the whole file) for one stripe or none."""
    return list(range(info.nstripes)) if info.nstripes > 1 else [None]


def _original_batch(
    t: pa.Table,
    of: OriginalFile,
    start_row_id: int,
    *,
    plan: ReadPlan,
    partition: Partition,
    deletes: Deletes,
    qualifying: frozenset[ParsedDelta] | None,
    row_paths: list[str | None],
) -> pa.Table:
    """One stripe of an original file whose first row has rowId ``start_row_id``;
    ``qualifying`` is ``None`` when no ROW__IDs are needed."""
    n = t.num_rows
    keys = None
    if qualifying is not None:
        assert of.bucket_id is not None
        bucket = bucket_codec.encode(of.bucket_id, of.statement_id)
        keys = key_table(
            pa.repeat(pa.scalar(of.write_id, pa.int64()), n),
            pa.repeat(pa.scalar(bucket, pa.int32()), n),
            _arange(start_row_id, n),
        )
        if qualifying:
            assert deletes.registry is not None
            alive: pa.Array | None
            if isinstance(deletes.registry, DeleteKeySet):
                # One (writeId, bucket) group and dense synthetic rowIds: index the mask.
                index = deletes.registry.index()
                threshold = index.threshold(of.write_id, of.statement_id)
                dels = index.row_ids(of.write_id, bucket, threshold)
                rows = np.arange(start_row_id, start_row_id + n, dtype=np.int64)
                alive = _as_mask(deleted_row_mask(rows, dels))
            else:
                alive = pc.invert(deletes.registry.deleted(keys, qualifying))
            if alive is not None:
                t = t.filter(alive)
                keys = keys.filter(alive)
    row_cols: list[pa.ChunkedArray | pa.Array | None] = [
        None if p is None else t.column(p) for p in row_paths
    ]
    return assemble(plan, row_cols, n=t.num_rows, keys=keys, partition=partition)
