"""Delete events of a snapshot and their application to data rows, vectorized with Arrow.

Two registries mirror Hive's ``VectorizedOrcAcidRowBatchReader``:

* ``DeleteKeySet`` (Hive's ``ColumnizedDeleteEventRegistry``): every valid delete
  key of the qualifying delete deltas, held in memory as three Arrow columns.
  A row is deleted when its (originalTransaction, bucket, rowId) is in the set.
  Matching packs each key into one int64 (dense ranks of the few distinct
  write ids and buckets, then the rowId bits) and uses a hash ``is_in``; when
  the keys do not fit in 63 bits it falls back to an Arrow hash anti-join.
* ``SortMergedDeletes`` (Hive's ``SortMergedDeleteEventRegistry``), used above
  ``hive.transactional.events.mem``: for each stripe of data it loads only the
  delete events inside that stripe's key interval, skipping delete stripes by
  ``hive.acid.key.index``, so memory stays bounded by one stripe's worth.

Both answer the same question with the same matcher, so they agree exactly.
A delete event counts only when its ``currentTransaction`` is a valid write id.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid import bucket_codec
from acidstream.acid.delete_index import DeleteIndex, deleted_row_mask
from acidstream.acid.directory import AcidState
from acidstream.acid.errors import AcidFormatError
from acidstream.acid.layout import ParsedDelta
from acidstream.acid.lookup_cache import LookupCache, file_id
from acidstream.acid.orc_inspect import AcidKey, OrcFileInfo, inspect_orc, require_acid
from acidstream.acid.snapshot import RangeResponse, ValidWriteIdList
from acidstream.acid.storage import Storage

__all__ = [
    "KEY_COLUMNS",
    "DeleteFile",
    "DeleteIndex",
    "DeleteKeySet",
    "RowIdGroups",
    "SortMergedDeletes",
    "delete_files",
    "deleted_row_mask",
    "is_qualified_delete_delta",
    "key_bounds",
    "normalize_bucket_property",
    "normalize_key",
    "valid_write_id_mask",
]

# Internal column names of a key table: originalTransaction, bucket, rowId.
KEY_COLUMNS = ("o", "b", "r")
_KEY_SCHEMA = pa.schema([("o", pa.int64()), ("b", pa.int32()), ("r", pa.int64())])


@dataclass(frozen=True)
class DeleteFile:
    """One bucket file of a delete delta that a snapshot uses."""

    path: str
    delta: ParsedDelta
    bucket_id: int | None
    logical_length: int
    file_length: int


def delete_files(state: AcidState) -> list[DeleteFile]:
    """The non-empty bucket files of the delete deltas a snapshot (``get_acid_state``) uses."""
    out = []
    for d in state.delete_deltas:
        assert isinstance(d.parsed, ParsedDelta)
        for f in d.files:
            if f.logical_length == 0:
                continue
            out.append(DeleteFile(f.path, d.parsed, f.bucket_id, f.logical_length, f.length))
    return out


def is_qualified_delete_delta(
    *, split_min_write_id: int, split_statement_id: int, delete_delta: ParsedDelta
) -> bool:
    """``VOARBR.isQualifiedDeleteDeltaForSplit``: can this delete delta hit rows of the split?

    A statement id of -1 is treated as 0. Base files and original files have a
    split min write id of 0, so every delete delta qualifies for them.
    """
    if split_min_write_id < delete_delta.max_write_id:
        return True
    if split_min_write_id == delete_delta.max_write_id:
        return max(split_statement_id, 0) < max(delete_delta.statement_id, 0)
    return False


def valid_write_id_mask(
    column: pa.Array | pa.ChunkedArray, write_ids: ValidWriteIdList
) -> pa.Array:
    """True where the write id is valid (``<= hwm`` and not open/aborted)."""
    mask = pc.less_equal(column, pa.scalar(write_ids.high_watermark, pa.int64()))
    exc = write_ids.invalid_write_ids
    if exc:
        mask = pc.and_(mask, pc.invert(pc.is_in(column, value_set=pa.array(exc, pa.int64()))))
    return mask


def key_bounds(keys: pa.Table) -> tuple[AcidKey, AcidKey] | None:
    """Lexicographic (min, max) key of a key table; ``None`` when empty."""
    if keys.num_rows == 0:
        return None
    o, b, r = (keys.column(c) for c in KEY_COLUMNS)

    def extreme(pick: str) -> AcidKey:
        fn = pc.min if pick == "min" else pc.max
        eo = fn(o).as_py()
        sel = pc.equal(o, eo)
        eb = fn(pc.filter(b, sel)).as_py()
        sel = pc.and_(sel, pc.equal(b, eb))
        er = fn(pc.filter(r, sel)).as_py()
        return (int(eo), int(eb), int(er))

    return extreme("min"), extreme("max")


def _ge(lo: AcidKey) -> pc.Expression:
    o, b, r = (pc.field(c) for c in KEY_COLUMNS)
    return (o > lo[0]) | ((o == lo[0]) & ((b > lo[1]) | ((b == lo[1]) & (r >= lo[2]))))


def _le(hi: AcidKey) -> pc.Expression:
    o, b, r = (pc.field(c) for c in KEY_COLUMNS)
    return (o < hi[0]) | ((o == hi[0]) & ((b < hi[1]) | ((b == hi[1]) & (r <= hi[2]))))


def _in_interval(keys: pa.Table, lo: AcidKey, hi: AcidKey) -> pa.Table:
    return keys.filter(_ge(lo) & _le(hi))


_V1 = 1 << 29  # BucketCodec V1's version bits; every V0 value (a plain bucket id) is below


def normalize_bucket_property(b: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Bucket properties with every V0 value (Hive < 3: the plain bucket id, statement 0)
    re-encoded as V1, so Hive 2's delete events match the rows they name: an original
    file's synthetic ROW__IDs are always V1, and a key is compared whole (spec §3.1)."""
    b = pc.cast(b, pa.int32())
    low = pc.min(b).as_py()
    if low is None or low >= _V1:
        return b  # the common case: all V1 (or empty), nothing to compute
    is_v0 = pc.and_(pc.greater_equal(b, 0), pc.less(b, _V1))
    return pc.if_else(is_v0, pc.bit_wise_or(pc.shift_left(b, 16), _V1), b)


def normalize_key(key: AcidKey) -> AcidKey:
    """One key with a V0 bucket property re-encoded as V1 (see ``normalize_bucket_property``)."""
    o, b, r = key
    return (o, (b << 16) | _V1, r) if 0 <= b < _V1 else key


def key_table(
    o: pa.Array | pa.ChunkedArray, b: pa.Array | pa.ChunkedArray, r: pa.Array | pa.ChunkedArray
) -> pa.Table:
    """Three key columns as a key table with the canonical names and types (V0 bucket
    properties re-encoded as V1)."""
    return pa.table(
        [pc.cast(o, pa.int64()), normalize_bucket_property(b), pc.cast(r, pa.int64())],
        schema=_KEY_SCHEMA,
    )


def _read_events(
    storage: Storage,
    f: DeleteFile,
    write_ids: ValidWriteIdList,
    *,
    stripe: int | None = None,
    info: OrcFileInfo | None = None,
) -> pa.Table:
    """Valid delete keys of one delete file (or of one of its stripes)."""
    orcf, inf = inspect_orc(storage, f.path, length=f.logical_length, file_length=f.file_length)
    if info is None:
        info = inf
    require_acid(info)
    assert info.acid_columns is not None
    names = info.acid_columns
    cols = [
        names["originalTransaction"],
        names["bucket"],
        names["rowId"],
        names["currentTransaction"],
    ]
    if stripe is None:
        t = orcf.read(columns=cols)
    else:
        t = pa.Table.from_batches([orcf.read_stripe(stripe, columns=cols)])
    ct = t.column(3)
    keys = key_table(t.column(0), t.column(1), t.column(2))
    lo, hi = f.delta.min_write_id, f.delta.max_write_id
    # Every event of a delete delta has its currentTransaction in [min, max]; when that
    # whole range is valid there is nothing to filter.
    if write_ids.is_write_id_range_valid(lo, hi) != RangeResponse.ALL:
        keys = keys.filter(valid_write_id_mask(ct, write_ids))
    if f.bucket_id is not None and keys.num_rows:
        _check_bucket(keys, f)
    return keys


def _read_delta_events(
    storage: Storage, files: Sequence[DeleteFile], write_ids: ValidWriteIdList
) -> list[pa.Table]:
    """Valid delete keys of the bucket files of one delete delta, as ``_read_events``
    gives them file by file, but converted, filtered and checked in one pass (a MERGE
    leaves a delete delta of a few events per bucket: per file, the Arrow calls cost
    more than the events)."""
    if len(files) < 2:
        return [_read_events(storage, f, write_ids) for f in files]
    raw: list[pa.Table] = []
    for f in files:
        orcf, info = inspect_orc(
            storage, f.path, length=f.logical_length, file_length=f.file_length
        )
        require_acid(info)
        assert info.acid_columns is not None
        names = info.acid_columns
        cols = [names[c] for c in ("originalTransaction", "bucket", "rowId", "currentTransaction")]
        raw.append(orcf.read(columns=cols).rename_columns(["o", "b", "r", "c"]))
    try:
        t = pa.concat_tables(raw)
    except pa.ArrowInvalid:  # files of one delta with different types: one by one
        return [_read_events(storage, f, write_ids) for f in files]
    fileno = np.repeat(np.arange(len(files), dtype=np.int32), [x.num_rows for x in raw])
    keys = key_table(t.column("o"), t.column("b"), t.column("r"))
    d = files[0].delta
    if write_ids.is_write_id_range_valid(d.min_write_id, d.max_write_id) != RangeResponse.ALL:
        valid = valid_write_id_mask(t.column("c"), write_ids)
        keys = keys.filter(valid)
        fileno = fileno[np.asarray(valid.to_numpy(zero_copy_only=False), dtype=np.bool_)]
    if keys.num_rows and _may_be_misplaced(keys, files, fileno):
        # Some event names another writer: the per-file check says which file (or lets
        # a file of legacy bucket properties pass, as it does).
        start = 0
        for i, f in enumerate(files):
            n = int((fileno == i).sum())
            if f.bucket_id is not None and n:
                _check_bucket(keys.slice(start, n), f)
            start += n
    return [keys]


def _delta_events(
    storage: Storage,
    files: Sequence[DeleteFile],
    write_ids: ValidWriteIdList,
    cache: LookupCache | None,
) -> list[pa.Table]:
    """``_read_delta_events``, kept in ``cache`` (and taken from it) when the delta's
    whole write-id range is valid: its events are then the files' own, whatever the
    snapshot (a delta of an open or aborted write id is filtered, and not kept)."""
    d = files[0].delta
    if cache is None or (
        write_ids.is_write_id_range_valid(d.min_write_id, d.max_write_id) != RangeResponse.ALL
    ):
        return _read_delta_events(storage, files, write_ids)
    ids = [file_id(f.path, f.logical_length, f.file_length) for f in files]
    got = cache.delete_events(ids)
    if got is None:
        got = _read_delta_events(storage, files, write_ids)
        cache.put_delete_events(ids, got)
    return got


def _may_be_misplaced(keys: pa.Table, files: Sequence[DeleteFile], fileno: np.ndarray) -> bool:
    """Whether some V1 event's writer id differs from its file's bucket id (a superset of
    what ``_check_bucket`` rejects file by file)."""
    b = keys.column("b").to_numpy().astype(np.int64) & 0xFFFFFFFF
    expected = np.array([-1 if f.bucket_id is None else f.bucket_id for f in files], np.int64)
    want = expected[fileno]
    v1 = (b & 0xE0000000) >> 29 == 1
    writer = (b & 0x0FFF0000) >> 16
    return bool((v1 & (want >= 0) & (writer != want)).any())


def _check_bucket(keys: pa.Table, f: DeleteFile) -> None:
    """``DeleteReaderValue.checkBucketId``: every event's writer id must be the file's bucket."""
    b = pc.cast(keys.column("b"), pa.int64())
    version_ok = pc.all(pc.equal(pc.shift_right(pc.bit_wise_and(b, 0xE0000000), 29), 1))
    if not version_ok.as_py():
        return  # V0 (legacy) bucket properties carry the bucket id itself; nothing to check
    writer = pc.shift_right(pc.bit_wise_and(b, 0x0FFF0000), 16)
    bad = pc.not_equal(writer, f.bucket_id)
    if pc.any(bad).as_py():
        first = pc.filter(b, bad)[0].as_py()
        raise AcidFormatError(
            f"{f.path}: Corrupted records with different bucket ids from the containing bucket "
            f"file found! Expected bucket id {f.bucket_id}, found "
            f"{bucket_codec.decode_writer_id(first)} (bucket property {first})"
        )


def _rank(values: pa.Array | pa.ChunkedArray, value_set: pa.Array) -> pa.Array | pa.ChunkedArray:
    return pc.index_in(values, value_set=value_set)


class _Matcher:
    """Answers "which of these keys are deleted" for one fixed set of delete keys."""

    def __init__(self, deletes: pa.Table) -> None:
        self.deletes = deletes
        self.size = deletes.num_rows
        self.bounds = key_bounds(deletes)
        self._packed: pa.Array | None = None
        if self.size == 0:
            return
        self._owids = pc.unique(deletes.column("o"))
        self._buckets = pc.unique(deletes.column("b"))
        self._rmin = pc.min(deletes.column("r")).as_py()
        self._rmax = pc.max(deletes.column("r")).as_py()
        nb = len(self._buckets)
        self._nb = nb
        self._rbits = max(1, int(self._rmax).bit_length()) if self._rmin >= 0 else 64
        # Pack (rank(o) * nb + rank(b)) << rbits | r into an int64 when it fits.
        if self._rmin >= 0 and len(self._owids) * nb * (1 << self._rbits) < (1 << 62):
            self._packed = self._pack(deletes.column("o"), deletes.column("b"), deletes.column("r"))

    def _pack(
        self,
        o: pa.Array | pa.ChunkedArray,
        b: pa.Array | pa.ChunkedArray,
        r: pa.Array | pa.ChunkedArray,
    ) -> pa.Array:
        ro = pc.cast(_rank(o, self._owids), pa.int64())
        rb = pc.cast(_rank(b, self._buckets), pa.int64())
        # Row ids outside the deleted range cannot match; null them so they cannot
        # spill into a neighbouring group's bits either.
        r_ok = pc.if_else(
            pc.and_(pc.greater_equal(r, 0), pc.less_equal(r, self._rmax)),
            r,
            pa.scalar(None, pa.int64()),
        )
        group = pc.add(pc.multiply(ro, self._nb), rb)
        packed = pc.add(pc.shift_left(group, self._rbits), r_ok)
        if isinstance(packed, pa.ChunkedArray):
            packed = packed.combine_chunks()
        return packed

    def deleted(self, keys: pa.Table) -> pa.Array:
        """Boolean mask over ``keys``: True where the key is deleted."""
        n = keys.num_rows
        if self.size == 0 or n == 0:
            return pa.repeat(pa.scalar(False), n)
        if self._packed is not None:
            packed = self._pack(keys.column("o"), keys.column("b"), keys.column("r"))
            mm = pc.min_max(packed).as_py()
            if mm["min"] is None:
                return pa.repeat(pa.scalar(False), n)
            # Hash only the delete keys inside this batch's packed range: a file usually
            # holds one write id, so this is its own group's keys, not the whole set.
            value_set = self._packed.filter(
                pc.and_(
                    pc.greater_equal(self._packed, mm["min"]),
                    pc.less_equal(self._packed, mm["max"]),
                )
            )
            if len(value_set) == 0:
                return pa.repeat(pa.scalar(False), n)
            return pc.fill_null(pc.is_in(packed, value_set=value_set), False)
        return _anti_join_mask(keys, self.deletes)


def _anti_join_mask(keys: pa.Table, deletes: pa.Table) -> pa.Array:
    """General matcher: an Arrow hash semi-join on the three key columns, order restored."""
    n = keys.num_rows
    idx = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), 1)
    probe = keys.append_column("__i", idx)
    hits = probe.join(
        deletes.group_by(list(KEY_COLUMNS)).aggregate([]),
        keys=list(KEY_COLUMNS),
        join_type="left semi",
    )
    hit_idx = hits.column("__i")
    return pc.is_in(
        idx, value_set=hit_idx.combine_chunks() if hit_idx.num_chunks else pa.array([], pa.int64())
    )


class RowIdGroups:
    """Delete keys grouped by (originalTransaction, bucket): sorted unique int64 rowIds.

    Hive's ``ColumnizedDeleteEventRegistry`` layout. Keys with a null part never
    match a (non-null) data key and are dropped.
    """

    _EMPTY = np.empty(0, dtype=np.int64)

    def __init__(self, keys: pa.Table) -> None:
        self.groups: dict[tuple[int, int], np.ndarray] = {}
        self.min_key: AcidKey | None = None
        if keys.num_rows == 0:
            return
        if any(keys.column(c).null_count for c in KEY_COLUMNS):
            keys = keys.filter(
                pc.and_(
                    pc.and_(pc.is_valid(keys.column("o")), pc.is_valid(keys.column("b"))),
                    pc.is_valid(keys.column("r")),
                )
            )
            if keys.num_rows == 0:
                return
        o = keys.column("o").to_numpy()
        b = keys.column("b").to_numpy().astype(np.int64)
        r = keys.column("r").to_numpy()
        new_group = (o[1:] != o[:-1]) | (b[1:] != b[:-1])
        # Hive writes delete events in key order; sort only when they are not.
        ordered = bool(
            (
                (o[1:] > o[:-1])
                | ((o[1:] == o[:-1]) & ((b[1:] > b[:-1]) | (~new_group & (r[1:] > r[:-1]))))
            ).all()
        )
        if not ordered:
            order = np.lexsort((r, b, o))
            o, b, r = o[order], b[order], r[order]
            new_group = (o[1:] != o[:-1]) | (b[1:] != b[:-1])
        cuts = (np.flatnonzero(new_group) + 1).tolist()
        for s, e in zip([0, *cuts], [*cuts, len(r)], strict=True):
            rows = r[s:e]
            if not ordered and e - s > 1 and not bool((rows[1:] != rows[:-1]).all()):
                rows = np.unique(rows)
            self.groups[(int(o[s]), int(b[s]))] = np.ascontiguousarray(rows)
        first = next(iter(self.groups.items()))
        self.min_key = (first[0][0], first[0][1], int(first[1][0]))

    def row_ids(self, original_transaction: int, bucket: int) -> np.ndarray:
        """The sorted deleted rowIds of one (originalTransaction, bucket); maybe empty."""
        return self.groups.get((original_transaction, bucket), self._EMPTY)

    def deleted(
        self,
        o: pa.Array | pa.ChunkedArray,
        b: pa.Array | pa.ChunkedArray,
        r: pa.Array | pa.ChunkedArray,
    ) -> tuple[bool, np.ndarray | None]:
        """``(True, mask or None)`` when the batch has one (o, b) and no nulls; else ``(False, None)``.

        The mask is True where the row is deleted; ``None`` means nothing is deleted.
        """
        n = len(r)
        if n == 0:
            return True, None
        if o.null_count or b.null_count or r.null_count:
            return False, None
        b = normalize_bucket_property(b)
        mo = pc.min_max(o).as_py()
        mb = pc.min_max(b).as_py()
        if mo["min"] != mo["max"] or mb["min"] != mb["max"]:
            return False, None
        dels = self.row_ids(int(mo["min"]), int(mb["min"]))
        if len(dels) == 0:
            return True, None
        rows = r.to_numpy() if isinstance(r, pa.ChunkedArray) else r.to_numpy(zero_copy_only=False)
        return True, deleted_row_mask(rows.astype(np.int64, copy=False), dels)


class DeleteKeySet:
    """All valid delete keys of some delete files, in memory (``ColumnizedDeleteEventRegistry``).

    Keys are kept per delete delta so that each data file can use exactly its
    qualifying deltas; the common all-qualify case shares one matcher.
    """

    def __init__(
        self,
        storage: Storage,
        files: Sequence[DeleteFile],
        write_ids: ValidWriteIdList,
        *,
        cache: LookupCache | None = None,
    ) -> None:
        by_delta: dict[ParsedDelta, list[DeleteFile]] = {}
        for f in files:
            by_delta.setdefault(f.delta, []).append(f)
        self._by_delta: dict[ParsedDelta, list[pa.Table]] = {
            d: _delta_events(storage, fs, write_ids, cache) for d, fs in by_delta.items()
        }
        self._matchers: dict[frozenset[ParsedDelta], _Matcher] = {}
        self._groups: dict[frozenset[ParsedDelta], RowIdGroups] = {}
        self._index: DeleteIndex | None = None
        self._lock = threading.Lock()  # files may be read in threads

    @property
    def size(self) -> int:
        return sum(t.num_rows for ts in self._by_delta.values() for t in ts)

    def _keys(self, qualifying: frozenset[ParsedDelta]) -> pa.Table:
        tables = [t for d in qualifying for t in self._by_delta.get(d, [])]
        return pa.concat_tables(tables) if tables else _KEY_SCHEMA.empty_table()

    def matcher(self, qualifying: frozenset[ParsedDelta]) -> _Matcher:
        with self._lock:
            m = self._matchers.get(qualifying)
            if m is None:
                m = self._matchers[qualifying] = _Matcher(self._keys(qualifying))
            return m

    def groups(self, qualifying: frozenset[ParsedDelta]) -> RowIdGroups:
        """The qualifying keys grouped by (originalTransaction, bucket), built once."""
        with self._lock:
            g = self._groups.get(qualifying)
            if g is None:
                g = self._groups[qualifying] = RowIdGroups(self._keys(qualifying))
            return g

    def index(self) -> DeleteIndex:
        """Every key once, with the newest delta naming it: one index for every split
        (``acidstream.acid.delete_index``), built once."""
        with self._lock:
            if self._index is None:
                self._index = DeleteIndex(self._by_delta)
            return self._index

    def deleted(self, keys: pa.Table, qualifying: frozenset[ParsedDelta]) -> pa.Array:
        return self.matcher(qualifying).deleted(keys)


class SortMergedDeletes:
    """Bounded-memory delete application (``SortMergedDeleteEventRegistry``).

    For each batch of data keys only the delete events inside the batch's key
    interval are loaded: delete stripes outside it are skipped using
    ``hive.acid.key.index`` (stripe j holds keys in ``(K[j-1], K[j]]``), and the
    events of the remaining stripes are cut to the interval.
    """

    def __init__(
        self, storage: Storage, files: Sequence[DeleteFile], write_ids: ValidWriteIdList
    ) -> None:
        self._storage = storage
        self._write_ids = write_ids
        self._files: list[tuple[DeleteFile, OrcFileInfo]] = []
        for f in files:
            _, info = inspect_orc(
                storage, f.path, length=f.logical_length, file_length=f.file_length
            )
            require_acid(info)
            self._files.append((f, info))
        self.peak_events = 0

    @property
    def size(self) -> int:
        return sum(info.nrows for _, info in self._files)

    def _stripes_in(self, info: OrcFileInfo, lo: AcidKey, hi: AcidKey) -> list[int]:
        if info.key_index is None or any(k is None for k in info.key_index):
            return list(range(info.nstripes))
        out = []
        prev: AcidKey | None = None
        for j, key in enumerate(info.key_index):
            assert key is not None
            last = normalize_key(key)
            if last >= lo and (prev is None or prev < hi):
                out.append(j)
            prev = last
        return out

    def deleted(self, keys: pa.Table, qualifying: frozenset[ParsedDelta]) -> pa.Array:
        bounds = key_bounds(keys)
        if bounds is None:
            return pa.array([], pa.bool_())
        lo, hi = bounds
        parts: list[pa.Table] = []
        for f, info in self._files:
            if f.delta not in qualifying:
                continue
            for j in self._stripes_in(info, lo, hi):
                ev = _read_events(self._storage, f, self._write_ids, stripe=j, info=info)
                parts.append(_in_interval(ev, lo, hi))
        deletes = pa.concat_tables(parts) if parts else _KEY_SCHEMA.empty_table()
        self.peak_events = max(self.peak_events, deletes.num_rows)
        return _Matcher(deletes).deleted(keys)
