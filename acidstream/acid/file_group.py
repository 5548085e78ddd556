"""Reading a run of small ACID files of one partition as one batch.

A table after many small writes (streaming txns, MERGEs: an insert, an update and a
delete delta per statement and bucket) has hundreds of files of a few hundred rows.
Read one by one, each costs more GIL-holding Python (open, match deletes, filter,
assemble: ~1 ms) than decoding, and the read threads wait on each other for the GIL.
``read_acid_files`` decodes the files of a run one after the other (pyarrow, without
the GIL), then matches the whole run against the partition's ``DeleteIndex`` in one
binary search, filters once and assembles once, and yields one zero-copy slice per file:
the same batches, in the same order, as ``file_reader.read_acid_file`` file by file.

Only files that need no write-id validity check (a base, or a delta whose range is all
valid) are grouped, on the in-memory delete path (``DeleteKeySet``) or with no deletes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from acidstream.acid.delete_index import DeleteIndex
from acidstream.acid.delete_registry import DeleteKeySet, key_table, normalize_bucket_property
from acidstream.acid.file_reader import (
    Deletes,
    decode_acid_file,
    filter_columns,
    nested_column,
    read_acid_file,
)
from acidstream.acid.partitions import Partition
from acidstream.acid.read_plan import ReadPlan, assemble_columns, finish
from acidstream.acid.snapshot import ValidWriteIdList
from acidstream.acid.storage import Storage

__all__ = ["GROUP_FILE_MAX_BYTES", "GROUP_MAX_BYTES", "SmallFile", "read_acid_files"]

# A file up to this size may join a group; a group holds up to GROUP_MAX_BYTES of files
# (bounding the memory of one decoded group, and leaving the read threads several groups).
GROUP_FILE_MAX_BYTES = 1024 * 1024
GROUP_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class SmallFile:
    """One ACID bucket file of a group: where it is and where its split starts."""

    path: str
    length: int
    file_length: int
    split_min: int
    split_stmt: int


def _np(col: pa.ChunkedArray) -> np.ndarray:
    return col.to_numpy().astype(np.int64, copy=False)


def read_acid_files(
    storage: Storage,
    files: Sequence[SmallFile],
    *,
    plan: ReadPlan,
    partition: Partition,
    write_ids: ValidWriteIdList,
    deletes: Deletes,
) -> Iterator[pa.Table]:
    """The visible rows of ``files`` (no validity check needed, deletes in memory or
    none), one batch per file; consecutive files read with the same columns are
    matched, filtered and assembled together."""
    index: DeleteIndex | None = None
    if isinstance(deletes.registry, DeleteKeySet):
        index = deletes.registry.index()
        if index.size == 0:
            index = None
    elif deletes.registry is not None:
        raise ValueError("read_acid_files: the sort-merge path reads file by file")
    if index is not None and not index.packs:
        # Keys that do not pack: file by file, with the general matcher.
        for f in files:
            yield from _one(storage, f, plan, partition, write_ids, deletes)
        return
    need_keys = index is not None or plan.include_row_id
    run: list[tuple[SmallFile, pa.Table]] = []
    run_key: tuple[object, ...] | None = None
    run_paths: list[str | None] = []
    for f in files:
        try:
            paths, t = decode_acid_file(
                storage,
                f.path,
                length=f.length,
                file_length=f.file_length,
                plan=plan,
                keys=need_keys,
            )
        except Exception:
            # A sequential read would have returned the files before this one first.
            if run:
                yield from _run(storage, run, run_paths, plan, partition, write_ids, deletes, index)
            raise
        key = (tuple(paths), t.schema)
        if run and key != run_key:
            yield from _run(storage, run, run_paths, plan, partition, write_ids, deletes, index)
            run = []
        run.append((f, t))
        run_key, run_paths = key, paths
    if run:
        yield from _run(storage, run, run_paths, plan, partition, write_ids, deletes, index)


def _one(
    storage: Storage,
    f: SmallFile,
    plan: ReadPlan,
    partition: Partition,
    write_ids: ValidWriteIdList,
    deletes: Deletes,
) -> Iterator[pa.Table]:
    return read_acid_file(
        storage,
        f.path,
        length=f.length,
        file_length=f.file_length,
        plan=plan,
        partition=partition,
        write_ids=write_ids,
        check_validity=False,
        deletes=deletes,
        split_min=f.split_min,
        split_stmt=f.split_stmt,
    )


def _run(
    storage: Storage,
    run: list[tuple[SmallFile, pa.Table]],
    paths: list[str | None],
    plan: ReadPlan,
    partition: Partition,
    write_ids: ValidWriteIdList,
    deletes: Deletes,
    index: DeleteIndex | None,
) -> Iterator[pa.Table]:
    """One batch of a run of files read with the same columns (same schema); the ACID
    key columns come first when deletes or ROW__IDs need them."""
    try:
        counts, full = _match_and_assemble(run, paths, plan, partition, index)
    except _PerFile:
        counts, full = None, None
    except Exception:
        # An error (a value the table type cannot hold, say) is raised by the file that
        # holds it, after the files before it, as a sequential read raises it.
        counts, full = None, None
        if len(run) == 1:
            raise
    if counts is None or full is None:
        for f, _ in run:
            yield from _one(storage, f, plan, partition, write_ids, deletes)
        return
    # One batch per file, as file_reader yields them (zero-copy slices of one batch).
    offset = 0
    for c in counts.tolist():
        yield finish(plan, full.slice(offset, c))
        offset += c


class _PerFile(Exception):
    """This run must be read file by file (``file_reader``'s general path)."""


def _match_and_assemble(
    run: list[tuple[SmallFile, pa.Table]],
    paths: list[str | None],
    plan: ReadPlan,
    partition: Partition,
    index: DeleteIndex | None,
) -> tuple[np.ndarray, pa.Table]:
    """The surviving row count of each file of ``run`` and their rows, assembled
    (``assemble_columns``) in one batch."""
    t = pa.concat_tables([ft for _, ft in run])
    n = t.num_rows
    keys = None
    dead: np.ndarray | None = None
    if index is not None or plan.include_row_id:
        if any(t.column(i).null_count for i in range(3)):
            raise _PerFile("a null key part (never in Hive's files): the general path")
        b = normalize_bucket_property(t.column(1))
        if index is not None:
            thresholds = np.repeat(
                np.array([index.threshold(f.split_min, f.split_stmt) for f, _ in run], np.int64),
                [ft.num_rows for _, ft in run],
            )
            try:
                dead = index.deleted(_np(t.column(0)), _np(b), _np(t.column(2)), thresholds)
            except ValueError:
                raise _PerFile("data keys outside the packed range: the general path") from None
        if plan.include_row_id:
            keys = key_table(t.column(0), b, t.column(2))
    row_cols: list[pa.ChunkedArray | pa.Array | None] = [
        None if p is None else nested_column(t, p) for p in paths
    ]
    counts = np.array([ft.num_rows for _, ft in run], np.int64)
    if dead is not None:
        keep = pa.array(~dead, type=pa.bool_())
        row_cols = filter_columns(row_cols, keep)
        # surviving rows of each file (a file may have no rows: no reduceat)
        ends = np.cumsum(counts)
        dead_before = np.concatenate(([0], np.cumsum(dead, dtype=np.int64)))
        counts = counts - (dead_before[ends] - dead_before[ends - counts])
        n = int(counts.sum())
        if keys is not None:
            keys = keys.filter(keep)
    return counts, assemble_columns(plan, row_cols, n=n, keys=keys, partition=partition)
