"""Which stripes and row groups of an ORC file may hold some of a lookup's keys.

A MERGE (or an UPDATE/DELETE by key) looks up a set of key values. For each key
column, an ORC stripe or row group may hold a key only if some key lies in its
``[min, max]`` (stripe statistics in the file's metadata, row-group statistics in the
row index) and, where the column has a bloom filter (``orc.bloom.filter.columns``),
the filter does not rule every such key out. Integer-family columns (tinyint..bigint,
date) and strings are pruned; any other column type prunes nothing. A row group is
read only when every key column says "maybe" (the keys are matched column by column,
a superset of the key tuples: sound).
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.orc_bloom import BloomFilter, long_hashes, parse_bloom_index, string_hash
from acidstream.acid.orc_row_groups import (
    BLOOM_FILTER,
    BLOOM_FILTER_UTF8,
    BYTE,
    CHAR,
    DATE,
    INT,
    LONG,
    SHORT,
    STRING,
    VARCHAR,
    ColumnStats,
    OrcMeta,
    StripeReader,
)

__all__ = ["ColumnKeys", "PruneCounts", "SortedKeys", "groups_with_keys", "stripe_may_hold"]

_INT_KINDS = {BYTE, SHORT, INT, LONG, DATE}
_STR_KINDS = {STRING, VARCHAR, CHAR}
# Above this many keys inside one row group's [min, max], its bloom filter is not asked
# (a group holding that many candidates is read anyway, almost surely).
_BLOOM_MAX_KEYS = 256


class SortedKeys:
    """The distinct non-null values of one key column, sorted, prepared once per lookup:
    ``ints`` for integer and date keys (``date``: dates), ``strs`` for string keys;
    neither for another type (nothing is pruned on it)."""

    def __init__(self, values: pa.Array) -> None:
        vals = pc.unique(values.drop_null())
        self.values = vals
        self.date = pa.types.is_date32(vals.type)
        self.ints: np.ndarray | None = None
        self.strs: tuple[str, ...] | None = None
        if pa.types.is_integer(vals.type) or self.date:
            # dates as their day numbers (Arrow casts date32 to int32 only)
            arr = vals.cast(pa.int32() if self.date else pa.int64()).to_numpy(zero_copy_only=False)
            self.ints = np.sort(arr.astype(np.int64))
        elif pa.types.is_string(vals.type):
            self.strs = tuple(sorted(vals.to_pylist()))
        self._str_hashes: dict[int, int] = {}

    def __len__(self) -> int:
        if self.ints is not None:
            return len(self.ints)
        return len(self.strs) if self.strs is not None else 0

    @functools.cached_property
    def _int_hashes(self) -> np.ndarray:
        assert self.ints is not None
        return long_hashes(self.ints)

    def hashes(self, lo: int, hi: int) -> np.ndarray:
        """ORC bloom-filter hashes of the sorted keys ``[lo, hi)``: integers all at once
        (vectorized), strings (hashed in Python) only those asked for, each once."""
        if self.ints is not None:
            return self._int_hashes[lo:hi]
        assert self.strs is not None
        out = np.empty(hi - lo, dtype=np.int64)
        for j in range(lo, hi):
            h = self._str_hashes.get(j)
            if h is None:
                h = self._str_hashes[j] = string_hash(self.strs[j].encode())
            out[j - lo] = h
        return out

    def of_column(self, meta: OrcMeta, column: int) -> ColumnKeys | None:
        """These keys as keys of file column ``column``; ``None`` when the types do not
        let statistics prune (then nothing is pruned on this column)."""
        kind = meta.types[column].kind
        if self.ints is not None and kind in _INT_KINDS and self.date == (kind == DATE):
            return ColumnKeys(column=column, keys=self)
        if self.strs is not None and kind in _STR_KINDS and kind != CHAR:
            return ColumnKeys(column=column, keys=self)
        return None


@dataclass(frozen=True)
class ColumnKeys:
    """A lookup's keys of one key column, for one file column (``column``: its ORC
    column id)."""

    column: int
    keys: SortedKeys

    def __len__(self) -> int:
        return len(self.keys)

    def span(self, stats: ColumnStats) -> tuple[int, int] | None:
        """The keys inside ``stats``' ``[min, max]`` as ``[lo, hi)`` indexes; ``None``:
        the statistics cannot tell (then every key may be there)."""
        if stats.values == 0 and stats.has_null is not None:
            return (0, 0)  # no non-null value: no key
        ints, strs = self.keys.ints, self.keys.strs
        if ints is not None:
            if stats.int_min is None or stats.int_max is None:
                return None
            lo = int(np.searchsorted(ints, stats.int_min, "left"))
            hi = int(np.searchsorted(ints, stats.int_max, "right"))
            return lo, max(lo, hi)
        assert strs is not None
        if stats.str_min is None or stats.str_max is None:
            return None
        lo = bisect.bisect_left(strs, stats.str_min)
        hi = bisect.bisect_right(strs, stats.str_max)
        return lo, max(lo, hi)

    def hashes(self, lo: int, hi: int) -> np.ndarray:
        """ORC bloom-filter hashes of the keys ``[lo, hi)``."""
        return self.keys.hashes(lo, hi)


def stripe_may_hold(meta: OrcMeta, stripe: int, keys: Sequence[ColumnKeys]) -> bool:
    """Whether stripe ``stripe`` may hold a key by its statistics (``True`` without them)."""
    for k in keys:
        st = meta.column_stats(stripe, k.column)
        if st is None:
            continue
        span = k.span(st)
        if span is not None and span[0] == span[1]:
            return False
    return True


def _blooms(reader: StripeReader, column: int) -> list[BloomFilter] | None:
    raw = reader.stream_bytes(column, BLOOM_FILTER_UTF8)
    if raw is None:
        raw = reader.stream_bytes(column, BLOOM_FILTER)
    if raw is None:
        return None
    blooms = parse_bloom_index(raw)
    return blooms if len(blooms) == reader.groups else None


@dataclass
class PruneCounts:
    """What pruning left out, for logs and the benchmark: row groups ruled out by
    min/max and by bloom filters."""

    by_stats: int = 0
    by_bloom: int = 0


def groups_with_keys(
    reader: StripeReader, keys: Sequence[ColumnKeys], counts: PruneCounts | None = None
) -> list[int] | None:
    """The row groups of the stripe that may hold a key (sorted); ``None`` when the
    stripe has no usable row index (read it whole)."""
    n = reader.groups
    if n == 0:
        return None
    keep = np.ones(n, dtype=bool)
    for k in keys:
        index = reader.row_index(k.column)
        if index is None:
            continue
        blooms = _blooms(reader, k.column)
        for g, entry in enumerate(index):
            if not keep[g]:
                continue
            span = k.span(entry.stats)
            lo, hi = (0, len(k)) if span is None else span
            if lo == hi:
                keep[g] = False
                if counts is not None:
                    counts.by_stats += 1
                continue
            if blooms is not None and hi - lo <= _BLOOM_MAX_KEYS:
                if not blooms[g].may_contain(k.hashes(lo, hi)).any():
                    keep[g] = False
                    if counts is not None:
                        counts.by_bloom += 1
    return np.flatnonzero(keep).tolist()
