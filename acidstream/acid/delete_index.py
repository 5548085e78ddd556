"""One index of a partition's in-memory delete events, shared by every file of a read.

Hive applies to each data file (split) only the delete deltas that qualify for it
(``VectorizedOrcAcidRowBatchReader.isQualifiedDeleteDeltaForSplit``): a delete delta
with max write id ``D`` and statement id ``ds`` qualifies for a split starting at write
id ``W`` with statement id ``s`` exactly when ``(W, max(s, 0)) < (D, max(ds, 0))``
(lexicographic). The qualifying rule is an order, so a row is deleted exactly when the
*newest* delete delta naming its key ranks above the split's threshold. ``DeleteIndex``
keeps each distinct delete key once, with that newest delta's rank: one structure
answers every split, where a registry per set of qualifying deltas would be rebuilt for
each of them (20 MERGEs gave 20 such sets, 0.13 s of a 1.45 s read).

Keys are sorted by (originalTransaction, bucket, rowId) and grouped by
(originalTransaction, bucket): a batch of one group (every Hive-written ``delta_w_w``
file and every original file) is matched by indexing when its rowIds are dense
(``deleted_row_mask``); a batch of many files or groups is matched in one binary search
over keys packed into one int64 (``deleted``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.layout import ParsedDelta

__all__ = ["DeleteIndex", "deleted_row_mask", "split_rank"]

_I64 = np.int64


def split_rank(write_id: int, statement_id: int) -> tuple[int, int]:
    """The position of a split or a delete delta in the qualifying order (a statement id
    of -1 counts as 0, as in Hive)."""
    return (write_id, max(statement_id, 0))


def deleted_row_mask(row_ids: np.ndarray, deleted: np.ndarray) -> np.ndarray | None:
    """Mask over ``row_ids`` (one (originalTransaction, bucket) group): True where deleted.

    ``deleted`` is sorted and unique. ``None`` when nothing is deleted. Row ids
    written by Hive are dense and in order (``start .. start+n-1``); then the mask
    is built by indexing, O(n) with no hashing. Any other order uses a binary search.
    """
    n = len(row_ids)
    if n == 0 or len(deleted) == 0:
        return None
    first, last = int(row_ids[0]), int(row_ids[-1])
    lo = int(np.searchsorted(deleted, first, side="left"))
    if last - first == n - 1 and (n == 1 or bool((np.diff(row_ids) == 1).all())):
        hi = int(np.searchsorted(deleted, last, side="right"))
        if lo >= hi:
            return None
        mask = np.zeros(n, dtype=np.bool_)
        mask[deleted[lo:hi] - first] = True
        return mask
    pos = np.searchsorted(deleted, row_ids)
    np.minimum(pos, len(deleted) - 1, out=pos)
    hit = deleted[pos] == row_ids
    return hit if bool(hit.any()) else None


def _np(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An int column (no nulls) as an int64 numpy array."""
    if isinstance(col, pa.ChunkedArray):
        arr = col.to_numpy()
    else:
        arr = col.to_numpy(zero_copy_only=False)
    return arr.astype(_I64, copy=False)


class DeleteIndex:
    """Every distinct valid delete key of some delete deltas, each with the rank of the
    newest delta naming it (see the module docstring). Immutable once built, so the read
    threads share it without a lock.

    ``keys_by_delta``: key tables (``o``, ``b``, ``r``; bucket properties already
    normalized, ``delete_registry.key_table``) of each delete delta. Keys with a null
    part never match a (non-null) data key and are dropped.
    """

    def __init__(self, keys_by_delta: Mapping[ParsedDelta, Sequence[pa.Table]]) -> None:
        self._order = sorted({split_rank(d.max_write_id, d.statement_id) for d in keys_by_delta})
        os_, bs, rs, ks = [], [], [], []
        for d, tables in keys_by_delta.items():
            rank = self._order.index(split_rank(d.max_write_id, d.statement_id))
            for t in tables:
                if t.num_rows == 0:
                    continue
                if any(t.column(c).null_count for c in ("o", "b", "r")):
                    valid = pc.and_(
                        pc.and_(pc.is_valid(t.column("o")), pc.is_valid(t.column("b"))),
                        pc.is_valid(t.column("r")),
                    )
                    t = t.filter(valid)
                    if t.num_rows == 0:
                        continue
                os_.append(_np(t.column("o")))
                bs.append(_np(t.column("b")))
                rs.append(_np(t.column("r")))
                ks.append(np.full(t.num_rows, rank, dtype=np.int32))
        empty = np.empty(0, dtype=_I64)
        o = np.concatenate(os_) if os_ else empty
        b = np.concatenate(bs) if bs else empty
        r = np.concatenate(rs) if rs else empty
        k = np.concatenate(ks) if ks else np.empty(0, dtype=np.int32)
        if len(r) > 1:
            # One delta's events are in key order as Hive writes them; several deltas' are
            # not, so sort (stable: equal keys stay together for the max below).
            # The bucket property as unsigned 32 bits, the order of the packed (o, b)
            # that ``deleted`` searches (a negative int32 property sorts last).
            order = np.lexsort((r, b & 0xFFFFFFFF, o))
            o, b, r, k = o[order], b[order], r[order], k[order]
            new = np.empty(len(r), dtype=np.bool_)
            new[0] = True
            new[1:] = (o[1:] != o[:-1]) | (b[1:] != b[:-1]) | (r[1:] != r[:-1])
            starts = np.flatnonzero(new)
            k = np.maximum.reduceat(k, starts)
            o, b, r = o[starts], b[starts], r[starts]
        self.size = len(r)
        self._r = r
        self._rank = k
        # groups: (o, b) -> slice of the sorted keys
        self._groups: dict[tuple[int, int], tuple[int, int]] = {}
        if len(r):
            cut = np.flatnonzero((o[1:] != o[:-1]) | (b[1:] != b[:-1])) + 1
            starts_l = [0, *cut.tolist()]
            ends_l = [*cut.tolist(), len(r)]
            for s, e in zip(starts_l, ends_l, strict=True):
                self._groups[(int(o[s]), int(b[s]))] = (s, e)
        # The smallest key as AcidKey tuples compare (signed bucket property).
        self.min_key: tuple[int, int, int] | None = None
        if len(r):
            o0 = int(o.min())
            at = o == o0
            b0 = int(b[at].min())
            self.min_key = (o0, b0, int(r[at & (b == b0)].min()))
        self._packed = self._pack_events(o, b, r)

    # -- qualifying order

    def threshold(self, split_min: int, split_stmt: int) -> int:
        """The lowest rank of a delete delta that qualifies for a split starting at
        ``split_min``/``split_stmt`` (a delta qualifies when its rank >= this)."""
        return bisect.bisect_right(self._order, split_rank(split_min, split_stmt))

    def qualifies_any(self, threshold: int) -> bool:
        """Whether any delete delta qualifies above ``threshold`` (and has events)."""
        return self.size > 0 and threshold < len(self._order)

    # -- one group

    def row_ids(self, o: int, b: int, threshold: int) -> np.ndarray:
        """Sorted deleted rowIds of one (originalTransaction, bucket) for a split."""
        span = self._groups.get((o, b))
        if span is None:
            return self._r[:0]
        r = self._r[span[0] : span[1]]
        if threshold == 0:
            return r
        rank = self._rank[span[0] : span[1]]
        return r[rank >= threshold]

    def deleted_group(
        self,
        o: pa.Array | pa.ChunkedArray,
        b: pa.Array | pa.ChunkedArray,
        r: pa.Array | pa.ChunkedArray,
        threshold: int,
    ) -> tuple[bool, np.ndarray | None]:
        """``(True, mask or None)`` when the batch has one (o, b) and no nulls; else
        ``(False, None)``. ``b`` must be normalized. The mask is True where the row is
        deleted; ``None`` means nothing is deleted."""
        n = len(r)
        if n == 0:
            return True, None
        if o.null_count or b.null_count or r.null_count:
            return False, None
        mo = pc.min_max(o).as_py()
        mb = pc.min_max(b).as_py()
        if mo["min"] != mo["max"] or mb["min"] != mb["max"]:
            return False, None
        dels = self.row_ids(int(mo["min"]), int(mb["min"]), threshold)
        if len(dels) == 0:
            return True, None
        return True, deleted_row_mask(_np(r), dels)

    # -- many files and groups at once

    def _pack_events(self, o: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray | None:
        """Keys packed into one sorted int64 (group number, then rowId), when they fit."""
        self._gob = np.empty(0, dtype=_I64)
        self._rmin = self._rbits = 0
        if len(r) == 0:
            return np.empty(0, dtype=_I64)
        # (o, b) as one int64: write ids below 2**31 (Hive's are ints in practice) and
        # the 32 bits of the bucket property.
        if int(o.min()) < 0 or int(o.max()) >= 1 << 31:
            return None
        ob = (o << 32) | (b & 0xFFFFFFFF)
        cut = np.flatnonzero(ob[1:] != ob[:-1]) + 1
        gid = np.zeros(len(r), dtype=_I64)
        gid[cut] = 1
        gid = np.cumsum(gid)
        ngroups = int(gid[-1]) + 1
        rmin, rmax = int(r.min()), int(r.max())
        rbits = max(1, (rmax - rmin).bit_length())
        if (ngroups - 1).bit_length() + rbits > 62:
            return None
        self._gob = ob[np.concatenate(([0], cut))]
        self._rmin, self._rbits = rmin, rbits
        return (gid << rbits) | (r - rmin)

    def deleted(
        self,
        o: np.ndarray,
        b: np.ndarray,
        r: np.ndarray,
        threshold: np.ndarray | int,
    ) -> np.ndarray | None:
        """Deleted mask over rows of any groups (int64 arrays, no nulls, ``b``
        normalized), each row with its split's ``threshold``; ``None`` when no row is
        deleted.

        Raises:
            ValueError: the keys do not pack (see ``packs``); use the general matcher.
        """
        packed = self._packed
        if packed is None:
            raise ValueError("delete keys do not pack into int64")
        n = len(r)
        if n == 0 or len(packed) == 0:
            return None
        if int(o.min()) < 0 or int(o.max()) >= 1 << 31:
            raise ValueError("data keys do not pack into int64")
        ob = (o << 32) | (b & 0xFFFFFFFF)
        g = np.searchsorted(self._gob, ob)
        np.minimum(g, len(self._gob) - 1, out=g)
        rr = r - self._rmin
        cand = (self._gob[g] == ob) & (rr >= 0) & (rr < (1 << self._rbits))
        if not cand.any():
            return None
        key = (g << self._rbits) | np.where(cand, rr, 0)
        pos = np.searchsorted(packed, key)
        np.minimum(pos, len(packed) - 1, out=pos)
        hit = cand & (packed[pos] == key) & (self._rank[pos] >= threshold)
        return hit if bool(hit.any()) else None

    @property
    def packs(self) -> bool:
        """Whether ``deleted`` can be used (the delete keys pack into int64)."""
        return self._packed is not None
