"""The write step of a mutation: delete events and new row versions, as Hive 3 lays them out.

Kept in one small module so the mutation can move to the buffered table writer
(``acidstream.acid.table_writer``) without touching the rest. Runs on the driver side
(the process running the mutation).

- Delete events (split-update, ``OrcRecordUpdater.addSplitUpdateEvent``): operation 2, the
  deleted row's (originalTransaction, bucket, rowId), ``currentTransaction`` = the
  mutation's write id, ``row`` NULL, in ``<part>/delete_delta_W_W_SSSS/bucket_N``: one file
  per writer id ``N`` of the deleted rows' bucket property (Hive's readers refuse an event
  whose writer id differs from the file's), each sorted by ROW__ID.
- New row versions (an UPDATE's, a MERGE's updates and inserts) in
  ``<part>/delta_W_W_SSSS/[<lb dir>/]bucket_N``: the partition from the row's (possibly
  new) partition values, the bucket by Hive's hash of a bucketed table's bucketing
  columns (bucket 0 otherwise), fresh rowIds from 0 per file under bucket property
  ``encode(N, SSSS)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid import faults, layout
from acidstream.acid.bucket_hash import bucket_numbers, bucket_numbers_arrow
from acidstream.acid.file_writer import DELETE_OP, AcidFileWriter, sync_data_of
from acidstream.acid.row_keys import RowIdSequence
from acidstream.mutation.target import Target
from acidstream.txn.catalog import TableDef

__all__ = [
    "MutationFiles",
    "buckets_hit",
    "by_partition",
    "hashed_buckets",
    "key_buckets",
    "old_buckets",
]


@dataclass
class MutationFiles:
    """The files one mutation writes for one write id (its txn), and the partitions they
    are in. On failure :meth:`remove` deletes them (their write id is aborted: no reader
    can see them, and the Cleaner would otherwise remove them later).

    ``defer_sync``: each file's final footer is written when it is done, but its
    ``fdatasync`` waits for :meth:`sync`, which makes every such file durable at once
    (``acidstream.acid.group_sync``: one wait for the disk, not one per file; a change
    batch writes a delete delta and an insert delta per bucket, 16 files in an 8-bucket
    table). The owner calls :meth:`sync` before the commit."""

    target: Target
    write_id: int
    paths: list[str] = field(default_factory=list)
    partitions: set[str] = field(default_factory=set)
    defer_sync: bool = False
    _unsynced: list[AcidFileWriter] = field(default_factory=list)

    def _done(self, w: AcidFileWriter) -> None:
        """A file fully written: closed (durable) now, or ended and kept for :meth:`sync`."""
        if not self.defer_sync:
            w.close()
            return
        try:
            w.end()
        except BaseException:
            w.abandon()
            raise
        self._unsynced.append(w)

    def sync(self) -> None:
        """Make the files :meth:`_done` kept durable, together, and close them (the
        mutation's commit may follow). On a failure they are abandoned (and the caller's
        :meth:`remove` deletes them)."""
        writers, self._unsynced = self._unsynced, []
        try:
            sync_data_of(writers)
            for w in writers:
                w.finish()
        except BaseException:
            for w in writers:
                w.abandon()
            raise

    def delete_events(
        self, part: str, row_ids: pa.Array | pa.ChunkedArray, statement_id: int
    ) -> int:
        """Write delete events for the rows ``row_ids`` (ROW__ID structs) of partition
        ``part``. Returns the number of events."""
        if isinstance(row_ids, pa.ChunkedArray):
            row_ids = row_ids.combine_chunks()
        n = len(row_ids)
        if n == 0:
            return 0
        keys = pa.table(
            {
                "o": pc.struct_field(row_ids, "writeid"),
                "b": pc.struct_field(row_ids, "bucketid"),
                "r": pc.struct_field(row_ids, "rowid"),
            }
        ).sort_by([("o", "ascending"), ("b", "ascending"), ("r", "ascending")])
        b = keys.column("b").to_numpy()
        writer = (b.astype(np.int64) & 0x0FFF0000) >> 16  # BucketCodec V1's writer id
        st = self.target.storage
        d = layout.delta_dir_name(
            self.write_id, self.write_id, statement_id=statement_id, delete=True
        )
        for wid in np.unique(writer).tolist():
            sel = keys.filter(pa.array(writer == wid))
            path = st.join(
                self.target.placement.partition_path(part), d, layout.bucket_file_name(int(wid))
            )
            self._track(path, part)
            w = AcidFileWriter(
                st,
                path,
                self.target.table.schema,
                kind="delete",
                bucket_id=int(wid),
                statement_id=statement_id,
                options=self.target.options,
                engine="arrow",
            )
            try:
                w.write_events(
                    DELETE_OP,
                    sel.column("o"),
                    sel.column("b"),
                    sel.column("r"),
                    self.write_id,
                    None,
                )
            except BaseException:
                w.abort()
                raise
            self._done(w)
        faults.point("mutation.after_delete_delta")
        return n

    def insert_rows(
        self, rows: pa.Table, statement_id: int, *, buckets: pa.Array | None = None
    ) -> int:
        """Write ``rows`` (the table's data columns in order, then its partition columns
        as strings, as :attr:`Target.schema`) as insert events of this write id. Returns
        the number of rows.

        ``buckets``: each row's bucket when the caller knows it (an updated row whose
        bucketing columns did not change stays in its bucket: the writer id of its old
        ROW__ID); ``None``: Hive's hash of the bucketing columns decides."""
        if rows.num_rows == 0:
            return 0
        t = self.target
        pl = t.placement
        ndata = len(t.table.schema.columns)
        if buckets is not None:
            rows = rows.append_column("__bucket", buckets)
        groups: list[tuple[str, pa.Table]]
        if t.partition_names:
            groups = [
                (pl.partition_dir(list(values)), rows.take(idx))
                for values, idx in pl.partition_groups(rows.select(list(t.partition_names)))
            ]
        else:
            groups = [("", rows)]
        for part, prows in groups:
            data = prows.select(list(range(ndata)))
            if buckets is None:
                by_bucket = pl.bucket_groups(data)
            else:
                b = prows.column("__bucket")
                by_bucket = [
                    (int(n), data.filter(pc.equal(b, n))) for n in pc.unique(b).to_pylist()
                ]
            for bucket, bdata in sorted(by_bucket, key=lambda g: g[0]):
                seq = RowIdSequence()
                for lb_dir, ldata in pl.lb_groups(part, bdata):
                    w = pl.insert_writer(
                        part,
                        bucket,
                        min_write_id=self.write_id,
                        max_write_id=self.write_id,
                        statement_id=statement_id,
                        streaming=False,
                        options=t.options,
                        lb_dir=lb_dir,
                        row_ids=seq,
                    )
                    self._track(w.path, part)
                    try:
                        w.insert_arrow(self.write_id, ldata)
                    except BaseException:
                        w.abort()
                        raise
                    self._done(w)
        faults.point("mutation.after_delta")
        return rows.num_rows

    def _track(self, path: str, part: str) -> None:
        self.paths.append(path)
        self.partitions.add(part)

    def remove(self) -> None:
        """Delete the files written (best effort: a failure leaves them to the Cleaner)."""
        writers, self._unsynced = self._unsynced, []
        for w in writers:
            w.abandon()  # closes its handles (nothing of it was committed)
        st = self.target.storage
        for p in self.paths:
            try:
                if st.exists(p):
                    st.delete(p)
            except OSError:
                pass


def old_buckets(row_ids: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The writer id (bucket) of each ROW__ID's bucket property (BucketCodec V1)."""
    b = pc.struct_field(row_ids, "bucketid")
    return pc.shift_right(pc.bit_wise_and(b, 0x0FFF0000), 16)


def hashed_buckets(target: Target, rows: pa.Table) -> pa.Array:
    """The bucket Hive's hash of the bucketing columns sends each of ``rows`` to
    (:attr:`Target.schema`'s columns; 0 for every row of a table without buckets), as
    :meth:`MutationFiles.insert_rows` places rows given no ``buckets``."""
    out = np.zeros(rows.num_rows, dtype=np.int32)
    if rows.num_rows == 0 or target.table.num_buckets <= 0:
        return pa.array(out)
    ndata = len(target.table.schema.columns)
    data = rows.select(list(range(ndata))).append_column(
        "__i", pa.array(np.arange(rows.num_rows, dtype=np.int64))
    )
    for b, group in target.placement.bucket_groups(data):
        out[group.column("__i").to_numpy()] = b
    return pa.array(out)


def by_partition(target: Target, rows: pa.Table) -> list[tuple[str, pa.Table]]:
    """``rows`` (with the target's partition columns) grouped by partition directory
    (``k=v/...``; one ``""`` group for an unpartitioned table), in one vectorised pass."""
    pnames = list(target.partition_names)
    if not pnames or rows.num_rows == 0:
        return [("", rows)] if rows.num_rows else []
    pl = target.placement
    return [
        (pl.partition_dir(list(values)), rows.take(idx))
        for values, idx in pl.partition_groups(rows.select(pnames))
    ]


_HASH_CHUNK = 4_096


def buckets_hit(table: TableDef, rows: Iterable[Sequence[Any]]) -> list[int] | None:
    """The buckets Hive's hash sends ``rows`` (values of ``table.bucket_cols``, in their
    order) to: the buckets a statement on those key values must read. ``None`` as soon as
    every bucket is hit (nothing to prune): hashing is per row, so it stops early."""
    types = {n.lower(): t for n, t in table.schema.columns}
    col_types = [types[c.lower()] for c in table.bucket_cols]
    found: set[int] = set()
    it = iter(rows)
    while chunk := list(itertools.islice(it, _HASH_CHUNK)):
        found.update(
            bucket_numbers(
                chunk, col_types, table.num_buckets, bucketing_version=table.bucketing_version
            )
        )
        if len(found) == table.num_buckets:
            return None
    return sorted(found)


def key_buckets(table: TableDef, keys: pa.Table) -> list[int] | None:
    """The buckets Hive's hash sends ``keys`` (one column per ``table.bucket_cols``, in
    that order) to, as :func:`buckets_hit`, ``None`` when every bucket is hit.
    Integer-like columns are hashed a column at a time (``bucket_numbers_arrow``): a
    100,000-key CDC batch hashed 4,096 rows one by one in Python before it found all 8
    buckets of its table hit (0.1 s a batch); other types take :func:`buckets_hit`."""
    types = {n.lower(): t for n, t in table.schema.columns}
    bcols = [c.lower() for c in table.bucket_cols]
    fast = bucket_numbers_arrow(
        [keys.column(i) for i in range(len(bcols))],
        [types[c] for c in bcols],
        table.num_buckets,
        bucketing_version=table.bucketing_version,
    )
    if fast is None:
        rows = (
            row
            for chunk in keys.to_batches(max_chunksize=_ROW_CHUNK)
            for row in zip(*(c.to_pylist() for c in chunk.columns), strict=True)
        )
        return buckets_hit(table, rows)
    hit = [int(b) for b in np.unique(fast).tolist()]
    return None if len(hit) == table.num_buckets else hit


_ROW_CHUNK = 256
