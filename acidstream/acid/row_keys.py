"""ROW__ID bookkeeping of an ACID file writer: which key each row of a file has.

A file's rows are runs (:class:`Segment`) of one write id with consecutive rowIds, or
explicit keys (delete events; :class:`KeyColumns` for keys given as columns); the key
index (``hive.acid.key.index``) looks up the last key of each stripe through them.
:class:`RowIdSequence` numbers the rows of one bucket over several files (one per
list-bucketing directory) so ROW__IDs stay unique per (write id, bucket).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from acidstream.acid.errors import ConfigError

__all__ = ["KeyColumns", "RowIdSequence", "Segment", "int_column"]


@dataclass(frozen=True, slots=True)
class Segment:
    """Rows ``[start, start+n)`` of the file: a run of one write id, or explicit keys."""

    start: int
    n: int
    owid: int
    bucket: int
    rowid: int
    keys: Sequence[tuple[int, int, int]] | None = None

    def key_at(self, i: int) -> tuple[int, int, int]:
        if self.keys is not None:
            return self.keys[i - self.start]
        return (self.owid, self.bucket, self.rowid + (i - self.start))


class RowIdSequence:
    """The next rowId of each write id, for the files that share one bucket's numbering.

    One writer that splits a bucket's rows over several files of one delta (one per
    list-bucketing directory, ``acidstream.acid.list_bucketing``) gives all of them one sequence, so
    ROW__IDs (write id, bucket, rowId) stay unique per (write id, bucket) across those
    files; a file of its own gets a private one (rowIds from 0 per write id).
    """

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next: dict[int, int] = {}

    def start(self, write_id: int) -> int:
        """The first free rowId of ``write_id``."""
        return self._next.get(write_id, 0)

    def advance(self, write_id: int, n: int) -> None:
        """Mark ``n`` more rowIds of ``write_id`` as taken."""
        self._next[write_id] = self._next.get(write_id, 0) + n


def int_column(values: Any, dtype: type[np.integer[Any]], n: int | None = None) -> np.ndarray:
    """An integer column (Arrow, numpy or a sequence) as a numpy array of ``dtype``; with
    ``n``, a single value (Python or numpy integer) stands for ``n`` equal ones."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if values.null_count:
            raise ConfigError("ROW__ID and operation columns cannot hold nulls")
        values = values.to_numpy(zero_copy_only=False)
    out = np.asarray(values, dtype=dtype)
    if out.ndim == 0:
        if n is None:
            raise ConfigError("expected one value per event, got a single value")
        return np.full(n, out, dtype)
    return out


class KeyColumns(Sequence[tuple[int, int, int]]):
    """The ROW__IDs of a run of events given as columns (``write_events``): the key
    index looks up only the last key of each stripe, so no tuples are built per row."""

    def __init__(self, o: np.ndarray, b: np.ndarray, r: np.ndarray) -> None:
        self.o, self.b, self.r = o, b, r

    def __len__(self) -> int:
        return len(self.o)

    def __getitem__(self, i: int) -> tuple[int, int, int]:  # type: ignore[override]
        return (int(self.o[i]), int(self.b[i]), int(self.r[i]))

    def is_sorted(self) -> bool:
        """Whether the keys never go down (equal keys: one row's delete events)."""
        o, b, r = self.o, self.b, self.r
        if len(o) < 2:
            return True
        do, db, dr = np.diff(o), np.diff(b.astype(np.int64)), np.diff(r)
        down = (do < 0) | ((do == 0) & ((db < 0) | ((db == 0) & (dr < 0))))
        return not bool(down.any())
