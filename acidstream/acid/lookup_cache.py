"""What a key lookup learned of a table's immutable files, kept for the next lookup.

A CDC sink applies one MERGE per micro-batch to the same table: every batch's key
lookup (``acidstream.acid.key_lookup``) decodes the key and ROW__ID columns of the same
base and earlier deltas again, and reads every delete delta again to rebuild its delete
registry, though none of those files ever changes (a base or delta directory is written
once, by one txn or one compaction, and its files are never rewritten in place).
:class:`LookupCache` keeps, between lookups:

- per data file, a :class:`FileKeys`: the file's key column (one integer key column)
  sorted, with the ROW__ID of each row (held as constants when the whole file has one
  ``originalTransaction``/bucket property and dense rowIds, as Hive writes them);
- per delete delta, its delete events (``delete_registry._read_delta_events``'s key
  tables), when its whole write-id range is valid (then they are the file's events as
  they are, not a snapshot's filtering of them).

Nothing snapshot-dependent is cached: which files a lookup uses still comes from the
lookup's own snapshot (``get_acid_state`` of its valid write ids), and write-id validity
and the delete events that apply to each row are decided per lookup. An entry is keyed
by the file's path and both its lengths, so a compaction's new base, another writer's
new delta or delete delta, or a file that grew (a streaming delta's side file) is a new
entry, and a file no snapshot uses any more is simply never asked for again (and falls
out by LRU). Runs in the process running the mutations (the driver side); thread-safe
(a lookup reads files in threads).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

__all__ = ["DEFAULT_MAX_BYTES", "FileKeys", "LookupCache", "file_id"]

DEFAULT_MAX_BYTES = 1 << 30
"""Memory the entries of one cache may hold (least recently used go first)."""

FileId = tuple[str, int, int]


def file_id(path: str, logical_length: int, length: int) -> FileId:
    """A file's identity for the cache: its path and both lengths."""
    return (path, int(logical_length), int(length))


def _compact(a: np.ndarray, *, dense: bool = False) -> int | np.ndarray:
    """``a`` as one int when every value is that int (``dense``: ``a[i] == a[0] + i``),
    else the array itself."""
    if len(a) == 0:
        return 0
    first = int(a[0])
    if dense:
        if int(a[-1]) - first == len(a) - 1 and bool(np.all(np.diff(a) == 1)):
            return first
    elif bool(np.all(a == first)):
        return first
    return np.ascontiguousarray(a)


def _expand(v: int | np.ndarray, pos: np.ndarray, *, dense: bool = False) -> np.ndarray:
    if isinstance(v, np.ndarray):
        return v[pos]
    if dense:
        return pos.astype(np.int64) + v
    return np.full(len(pos), v, dtype=np.int64)


@dataclass(frozen=True)
class FileKeys:
    """One data file's integer key column and ROW__IDs, for lookups by key.

    Attributes:
        keys: the key values sorted (int64), rows with a NULL key left out.
        order: the file position of each of ``keys`` (``None``: the file's rows are in
            key order, the position is the index).
        o, b, r: ``originalTransaction``, bucket property and ``rowId`` by file
            position: an array, or an int when constant (``r``: the rowId of position
            0, the others following densely).
        key_type: the key column's type in the table (the lookup's plan).
    """

    keys: np.ndarray
    order: np.ndarray | None
    o: int | np.ndarray
    b: int | np.ndarray
    r: int | np.ndarray
    key_type: pa.DataType
    unique: bool = True  # no key on two rows (then one binary search per wanted key)

    @classmethod
    def build(
        cls, keys: np.ndarray, o: np.ndarray, b: np.ndarray, r: np.ndarray, key_type: pa.DataType
    ) -> FileKeys:
        """From a file's columns in file order (``keys`` int64 without NULLs)."""
        keys = keys.astype(np.int64, copy=False)
        order: np.ndarray | None = None
        if len(keys) > 1 and not bool(np.all(keys[1:] >= keys[:-1])):
            order = np.argsort(keys, kind="stable")
            keys = keys[order]
        unique = len(keys) < 2 or bool(np.all(keys[1:] != keys[:-1]))
        return cls(
            unique=unique,
            keys=np.ascontiguousarray(keys),
            order=order,
            o=_compact(o.astype(np.int64, copy=False)),
            b=_compact(b.astype(np.int64, copy=False)),
            r=_compact(r.astype(np.int64, copy=False), dense=True),
            key_type=key_type,
        )

    @property
    def nbytes(self) -> int:
        n = self.keys.nbytes + (self.order.nbytes if self.order is not None else 0)
        for v in (self.o, self.b, self.r):
            n += v.nbytes if isinstance(v, np.ndarray) else 8
        return n + 256

    def rows(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, keys)`` of the rows whose key is one of ``wanted`` (sorted
        distinct int64), in file order."""
        if len(self.keys) == 0 or len(wanted) == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        lo = np.searchsorted(self.keys, wanted, "left")
        if self.unique:
            at = np.minimum(lo, len(self.keys) - 1)
            idx = at[self.keys[at] == wanted]
            return self._in_file_order(idx)
        hi = np.searchsorted(self.keys, wanted, "right")
        cnt = hi - lo
        if len(cnt) == 0 or int(cnt.max()) == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        if int(cnt.max()) == 1:
            idx = lo[cnt == 1]
        else:  # a key on several rows of the file: every one of them
            starts = np.repeat(lo, cnt)
            first = np.repeat(np.cumsum(cnt) - cnt, cnt)
            idx = starts + (np.arange(int(cnt.sum())) - first)
        return self._in_file_order(idx)

    def _in_file_order(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions and keys of the sorted keys ``idx`` (ascending), in file order."""
        if self.order is None:
            return idx.astype(np.int64, copy=False), self.keys[idx]
        pos = self.order[idx]
        by_pos = np.argsort(pos, kind="stable")
        return pos[by_pos].astype(np.int64, copy=False), self.keys[idx][by_pos]

    def columns(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array]:
        """``(o, b, r, key)`` of the rows whose key is one of ``wanted``, in file order."""
        pos, key = self.rows(wanted)
        return (
            _expand(self.o, pos),
            _expand(self.b, pos).astype(np.int32),
            _expand(self.r, pos, dense=True),
            pa.array(key, pa.int64()).cast(self.key_type),
        )


class LookupCache:
    """Entries of :class:`FileKeys` and delete events, by file identity, LRU-bounded by
    ``max_bytes``. Owned by one writer (an upsert sink) for its table; see the module
    docstring for why an entry can never be stale."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _get(self, key: Hashable) -> object | None:
        with self._lock:
            got = self._entries.get(key)
            if got is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return got[0]

    def _put(self, key: Hashable, value: object, nbytes: int) -> None:
        if nbytes > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (value, nbytes)
            self._bytes += nbytes
            while self._bytes > self.max_bytes and self._entries:
                _, (_, n) = self._entries.popitem(last=False)
                self._bytes -= n

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def file_keys(self, fid: FileId, column: Hashable) -> FileKeys | None:
        """The entry of data file ``fid`` for key column ``column``, if kept."""
        got = self._get(("keys", fid, column))
        return got if isinstance(got, FileKeys) else None

    def put_file_keys(self, fid: FileId, column: Hashable, entry: FileKeys) -> None:
        self._put(("keys", fid, column), entry, entry.nbytes)

    def uncacheable(self, fid: FileId, column: Hashable) -> bool:
        """Whether data file ``fid`` was found unfit for an entry (not an ACID file, NULL
        keys, no such column): not tried again."""
        return self._get(("never", fid, column)) is not None

    def mark_uncacheable(self, fid: FileId, column: Hashable) -> None:
        self._put(("never", fid, column), True, 256)

    def delete_events(self, files: Sequence[FileId]) -> list[pa.Table] | None:
        """The delete events (key tables) of the delete delta of ``files``, if kept."""
        got = self._get(("deletes", tuple(files)))
        return got if isinstance(got, list) else None

    def put_delete_events(self, files: Sequence[FileId], tables: list[pa.Table]) -> None:
        self._put(("deletes", tuple(files)), tables, sum(t.nbytes for t in tables) + 256)
