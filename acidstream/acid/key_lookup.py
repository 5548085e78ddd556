"""Snapshot reads of only the rows that may hold some keys: a MERGE's (or a by-key
UPDATE's) lookup, at a cost that grows with the rows touched, not with the table.

For each base and delta bucket file of the snapshot, :func:`lookup_partition`

1. skips stripes whose statistics (min/max of each key column) hold no key;
2. in the others, picks the row groups (``orc.row.index.stride`` rows) whose row-index
   min/max and bloom filter (``orc.bloom.filter.columns``) may hold a key
   (``acidstream.acid.key_prune``);
3. decodes only those row groups of the columns the lookup needs (key columns, the
   ROW__ID columns, ``currentTransaction`` where validity is checked, the columns asked
   for) with ``acidstream.acid.orc_row_groups``; a stripe it cannot decode that way (a
   column type or codec it does not handle, no row index) or where most groups hold a
   key is read whole with pyarrow;
4. keeps the rows whose key columns hold key values, then applies Hive's rules as the
   full reader does (``acidstream.acid.file_reader``): write-id validity, delete events
   of the qualifying delete deltas, ROW__ID, the plan's columns and partition values.

Partitions with original (pre-ACID) files or list-bucketing directories are read by the
full reader (``acidstream.acid.reader.scan``); the caller filters those rows by key.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.delete_registry import (
    KEY_COLUMNS,
    DeleteKeySet,
    SortMergedDeletes,
    delete_files,
    key_table,
    valid_write_id_mask,
)
from acidstream.acid.directory import AcidState, DataFile
from acidstream.acid.file_reader import Deletes, read_acid_file
from acidstream.acid.key_prune import (
    ColumnKeys,
    PruneCounts,
    SortedKeys,
    groups_with_keys,
    stripe_may_hold,
)
from acidstream.acid.layout import ParsedDelta
from acidstream.acid.lookup_cache import FileKeys, LookupCache, file_id
from acidstream.acid.orc_inspect import open_orc
from acidstream.acid.orc_read import read_orc_columns
from acidstream.acid.orc_row_groups import (
    STRUCT,
    OrcBytes,
    OrcMeta,
    StripeReader,
    Unsupported,
    group_ranges,
)
from acidstream.acid.partitions import Partition
from acidstream.acid.read_plan import ReadPlan, assemble
from acidstream.acid.reader import READ_THREADS, THREADED_READ_MIN_AVG_BYTES
from acidstream.acid.schema import ACID_COLUMNS
from acidstream.acid.snapshot import RangeResponse, ValidWriteIdList
from acidstream.acid.storage import Storage
from acidstream.acid.timestamps import cast_column

__all__ = ["LookupCounts", "lookup_partition"]

log = logging.getLogger(__name__)

# A stripe where the chosen row groups hold more than this share of its rows is read
# whole by pyarrow (its C++ decoder beats decoding nearly everything in numpy).
WHOLE_STRIPE_SHARE = 0.25


@dataclass
class LookupCounts:
    """What a lookup read, for logs, tests and the benchmark."""

    files: int = 0
    stripes: int = 0
    stripes_pruned: int = 0
    stripes_whole: int = 0
    groups: int = 0
    groups_read: int = 0
    files_cached: int = 0  # files answered from a LookupCache entry, nothing decoded
    prune: PruneCounts = field(default_factory=PruneCounts)

    def add(self, other: LookupCounts) -> None:
        self.files += other.files
        self.stripes += other.stripes
        self.stripes_pruned += other.stripes_pruned
        self.stripes_whole += other.stripes_whole
        self.groups += other.groups
        self.groups_read += other.groups_read
        self.files_cached += other.files_cached
        self.prune.by_stats += other.prune.by_stats
        self.prune.by_bloom += other.prune.by_bloom

    def text(self) -> str:
        return (
            f"{self.files} files ({self.files_cached} from the cache), stripes {self.stripes - self.stripes_pruned}/{self.stripes} "
            f"read ({self.stripes_whole} of them whole), row groups {self.groups_read} read of "
            f"{self.groups} in the stripes read ({self.prune.by_stats} ruled out by min/max, "
            f"{self.prune.by_bloom} by bloom filters)"
        )


def _registry(
    storage: Storage,
    state: AcidState,
    write_ids: ValidWriteIdList,
    cap: int,
    cache: LookupCache | None = None,
) -> Deletes:
    dfiles = delete_files(state)
    registry: DeleteKeySet | SortMergedDeletes | None = None
    if dfiles and cache is not None:
        # The kept events of every delta whose range is valid, the others read: the
        # in-memory registry unless the events are over the cap (then the bounded one,
        # as without a cache).
        keyset = DeleteKeySet(storage, dfiles, write_ids, cache=cache)
        registry = keyset if keyset.size <= cap else SortMergedDeletes(storage, dfiles, write_ids)
    elif dfiles:
        merged = SortMergedDeletes(storage, dfiles, write_ids)
        registry = merged if merged.size > cap else DeleteKeySet(storage, dfiles, write_ids)
    return Deletes(registry, tuple({f.delta: None for f in dfiles}))


def lookup_partition(
    storage: Storage,
    partition: Partition,
    state: AcidState,
    *,
    plan: ReadPlan,
    keys: Mapping[str, pa.Array],
    write_ids: ValidWriteIdList,
    buckets: Collection[int] | None = None,
    delete_event_cap: int,
    blooms: bool = True,
    counts: LookupCounts | None = None,
    bucket_keys: Mapping[int, Mapping[str, pa.Array]] | None = None,
    cache: LookupCache | None = None,
) -> Iterator[pa.Table]:
    """The visible rows of one partition's snapshot ``state`` (no original files) whose
    key columns hold one of ``keys``' values (table column name -> values, the table's
    types), as batches of ``plan``'s schema (which must include ROW__ID).

    ``blooms``: whether files may have bloom filters on key columns (the table's
    ``orc.bloom.filter.columns``); without, a stripe of one row group is read as it is
    once its statistics say it may hold a key.

    ``bucket_keys``: ``keys`` split by the bucket Hive's hash sends them to (the caller
    knows the table is bucketed on key columns): a ``bucket_N`` file is searched for
    bucket N's keys only and a file of a bucket without keys is skipped, as ``buckets``
    skips it.

    ``cache``: what earlier lookups learned of these (immutable) files, kept in and
    taken from it (``acidstream.acid.lookup_cache``): a file whose keys are dense
    enough to be read nearly whole anyway is decoded once, then answered from memory;
    delete deltas are read once."""
    assert plan.include_row_id
    if state.original_files or any(d.is_raw for d in state.deltas):
        raise ValueError("lookup_partition does not read original files")
    deletes = _registry(storage, state, write_ids, delete_event_cap, cache)
    per_bucket = (
        None
        if bucket_keys is None
        else {b: {k: SortedKeys(v) for k, v in kv.items()} for b, kv in bucket_keys.items()}
    )
    # With the keys split by bucket every file takes its bucket's: all of them (sorted
    # once more, 100,000 keys of a CDC batch) would serve nothing.
    sorted_keys = {} if per_bucket is not None else {k: SortedKeys(v) for k, v in keys.items()}
    tasks: list[Callable[[], tuple[pa.Table | None, LookupCounts]]] = []
    sizes: list[int] = []
    c = counts if counts is not None else LookupCounts()
    dirs = ([state.base] if state.base else []) + list(state.insert_deltas)
    for d in dirs:
        if isinstance(d.parsed, ParsedDelta):
            split_min, split_stmt = d.parsed.min_write_id, d.parsed.statement_id
            check = (
                write_ids.is_write_id_range_valid(d.parsed.min_write_id, d.parsed.max_write_id)
                != RangeResponse.ALL
            )
        else:
            split_min, split_stmt, check = 0, -1, False
        for f in d.files:
            if f.logical_length == 0 or (buckets is not None and f.bucket_id not in buckets):
                continue
            file_keys = sorted_keys
            if per_bucket is not None:
                if f.bucket_id not in per_bucket:
                    continue  # no key hashes to this bucket
                file_keys = per_bucket[f.bucket_id]
            tasks.append(
                functools.partial(
                    _lookup_file,
                    storage,
                    f,
                    plan=plan,
                    partition=partition,
                    sorted_keys=file_keys,
                    write_ids=write_ids,
                    check_validity=check,
                    deletes=deletes,
                    split=(split_min, split_stmt),
                    blooms=blooms,
                    cache=cache,
                )
            )
            sizes.append(f.logical_length)
    # Files are looked up in threads when they are large enough on average for pyarrow's
    # and zlib's GIL-free decoding to beat the per-file Python (as the full reader does).
    # Not with the bounded-memory delete registry (it is not shared between threads, as
    # in the full reader).
    big = sum(sizes) >= len(sizes) * THREADED_READ_MIN_AVG_BYTES
    threads = READ_THREADS if big and not isinstance(deletes.registry, SortMergedDeletes) else 1
    results: Iterator[tuple[pa.Table | None, LookupCounts]]
    if threads > 1 and len(tasks) > 1:
        with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="key-lookup") as ex:
            results = iter(list(ex.map(lambda fn: fn(), tasks)))
    else:
        results = (fn() for fn in tasks)
    for t, fc in results:
        c.add(fc)
        if t is not None and t.num_rows:
            yield t
    if counts is None:
        log.debug("key lookup in %s: %s", partition.path, c.text())


@dataclass
class _File:
    """One data file being looked up: its layout and the ORC ids of what is read."""

    storage: Storage
    f: DataFile
    data: OrcBytes
    meta: OrcMeta
    acid: dict[str, int]  # canonical ACID name -> column id
    row_ids: list[int | None]  # per plan.read_positions: the column id, None if absent
    acid_names: dict[str, str]  # canonical ACID name -> the file's spelling
    row_name: str
    row_fields: tuple[str, ...]

    @classmethod
    def open(cls, storage: Storage, f: DataFile, plan: ReadPlan) -> _File | None:
        data = OrcBytes(storage, f.path, length=f.logical_length)
        meta = OrcMeta.of(data.tail())
        root = meta.types[0] if meta.types else None
        if root is None or root.kind != STRUCT:
            data.close()
            return None
        low = {n.lower(): n for n in root.names}
        if len(root.names) != len(ACID_COLUMNS) or any(a.lower() not in low for a in ACID_COLUMNS):
            data.close()
            return None  # not an ACID event file: the full reader says why
        names = {a: low[a.lower()] for a in ACID_COLUMNS}
        acid = {a: meta.column_id([names[a]]) for a in ACID_COLUMNS}
        row = acid["row"]
        if row is None or meta.types[row].kind != STRUCT or any(v is None for v in acid.values()):
            data.close()
            return None
        rtype = meta.types[row]
        row_ids = [
            rtype.subtypes[p] if p < len(rtype.subtypes) else None for p in plan.read_positions
        ]
        return cls(
            storage,
            f,
            data,
            meta,
            {k: v for k, v in acid.items() if v is not None},
            row_ids,
            names,
            names["row"],
            rtype.names,
        )

    def key_columns(self, plan: ReadPlan, keys: Mapping[str, SortedKeys]) -> list[ColumnKeys]:
        """The keys of each key column the file holds, by its column id (positional, as
        the plan maps table columns to file fields)."""
        out: list[ColumnKeys] = []
        row = self.meta.types[self.acid["row"]]
        lower = {n.lower(): i for i, n in enumerate(plan.names)}
        for name, values in keys.items():
            pos = lower.get(name.lower())
            if pos is None or pos >= len(row.subtypes):
                continue
            k = values.of_column(self.meta, row.subtypes[pos])
            if k is not None:
                out.append(k)
        return out


def _lookup_file(
    storage: Storage,
    f: DataFile,
    *,
    plan: ReadPlan,
    partition: Partition,
    sorted_keys: Mapping[str, SortedKeys],
    write_ids: ValidWriteIdList,
    check_validity: bool,
    deletes: Deletes,
    split: tuple[int, int],
    blooms: bool,
    cache: LookupCache | None = None,
) -> tuple[pa.Table | None, LookupCounts]:
    counts = LookupCounts()
    if cache is not None and not check_validity:
        # Only files whose rows all have a valid write id: a cached entry then answers
        # for any snapshot that uses the file (validity is not part of it).
        cached = _cached_rows(cache, storage, f, plan, sorted_keys)
        if cached is not None:
            counts.files += 1
            counts.files_cached += 1
            if not cached.num_rows:
                return None, counts
            qualifying = deletes.qualifying(*split) if deletes.registry else frozenset()
            return _finish(
                cached,
                plan=plan,
                partition=partition,
                write_ids=write_ids,
                check_validity=False,
                deletes=deletes,
                qualifying=qualifying,
                split=split,
            ), counts
    fl = _File.open(storage, f, plan)
    if fl is None:
        return _whole_file(
            storage,
            f,
            plan=plan,
            partition=partition,
            write_ids=write_ids,
            check_validity=check_validity,
            deletes=deletes,
            split=split,
        ), counts
    qualifying = deletes.qualifying(*split) if deletes.registry else frozenset()
    counts.files += 1
    try:
        kcols = fl.key_columns(plan, sorted_keys)
        acid_cols = ["originalTransaction", "bucket", "rowId"]
        if check_validity:
            acid_cols.append("currentTransaction")
        pieces: list[pa.Table] = []
        for s in range(len(fl.meta.stripes)):
            counts.stripes += 1
            if not stripe_may_hold(fl.meta, s, kcols):
                counts.stripes_pruned += 1
                continue
            t = _read_stripe(fl, s, kcols, acid_cols, plan, counts, blooms)
            t = _key_rows(t, plan, sorted_keys, fl)
            if t.num_rows:
                pieces.append(
                    _finish(
                        t,
                        plan=plan,
                        partition=partition,
                        write_ids=write_ids,
                        check_validity=check_validity,
                        deletes=deletes,
                        qualifying=qualifying,
                        split=split,
                    )
                )
    finally:
        fl.data.close()
    return (pa.concat_tables(pieces) if pieces else None), counts


def _cache_column(
    plan: ReadPlan, sorted_keys: Mapping[str, SortedKeys]
) -> tuple[int, str, SortedKeys] | None:
    """``(plan position index, key name, keys)`` when a lookup can be answered from
    :class:`FileKeys`: one integer key column, the only column the plan reads (a MERGE
    whose UPDATE SET * reads no old value); ``None`` otherwise."""
    if len(sorted_keys) != 1 or len(plan.read_positions) != 1:
        return None
    ((name, keys),) = sorted_keys.items()
    pos = plan.read_positions[0]
    if plan.names[pos].lower() != name.lower() or keys.ints is None or keys.date:
        return None
    if not pa.types.is_integer(plan.types[pos]) or plan.filter is not None:
        return None
    return 0, name.lower(), keys


def _cached_rows(
    cache: LookupCache,
    storage: Storage,
    f: DataFile,
    plan: ReadPlan,
    sorted_keys: Mapping[str, SortedKeys],
) -> pa.Table | None:
    """The key rows of ``f`` as :func:`_read_stripe` + :func:`_key_rows` give them (for
    :func:`_finish`), from the cache's entry of the file, built here when the keys are
    dense in the file (at least one per row group: the pruned read would decode nearly
    all of it anyway); ``None``: look the file up without the cache."""
    how = _cache_column(plan, sorted_keys)
    if how is None:
        return None
    i, name, keys = how
    assert keys.ints is not None
    fid = file_id(f.path, f.logical_length, f.length)
    column = (name, str(plan.types[plan.read_positions[i]]))
    entry = cache.file_keys(fid, column)
    if entry is None:
        if cache.uncacheable(fid, column):
            return None
        built = _build_file_keys(storage, f, plan, i, len(keys.ints))
        if not isinstance(built, FileKeys):
            if built == "never":
                cache.mark_uncacheable(fid, column)
            return None
        entry = built
        cache.put_file_keys(fid, column, entry)
    o, b, r, key = entry.columns(keys.ints)
    return pa.table(
        {
            _acid_key("originalTransaction"): pa.array(o, pa.int64()),
            _acid_key("bucket"): pa.array(b, pa.int32()),
            _acid_key("rowId"): pa.array(r, pa.int64()),
            _row_key(i): key,
        }
    )


def _build_file_keys(
    storage: Storage, f: DataFile, plan: ReadPlan, i: int, n_keys: int
) -> FileKeys | str:
    """The :class:`FileKeys` of ``f`` (its key column: plan position ``i``); ``"never"``
    when the file cannot have one (not an ACID file the lookup takes apart, no such
    column, NULL keys); ``"not now"`` when ``n_keys`` keys are fewer than its row groups
    (a pruned read of a few groups costs less than decoding the whole file)."""
    fl = _File.open(storage, f, plan)
    if fl is None:
        return "never"
    try:
        c = fl.row_ids[i]
        if c is None:
            return "never"
        stride = fl.meta.row_index_stride
        rows = sum(s.rows for s in fl.meta.stripes)
        groups = sum(-(-s.rows // stride) for s in fl.meta.stripes) if stride > 0 else rows
        if n_keys < groups:
            return "not now"
        rtype = fl.meta.types[fl.acid["row"]]
        field = rtype.names[rtype.subtypes.index(c)]
        acid = [fl.acid_names[a] for a in ("originalTransaction", "bucket", "rowId")]
        t = read_orc_columns(
            open_orc(fl.storage, f.path, length=f.logical_length),
            storage=fl.storage,
            path=f.path,
            length=f.logical_length,
            columns=[*acid, f"{fl.row_name}.{field}"],
        )
        key = cast_column(
            pc.struct_field(t.column(fl.row_name), field), plan.types[plan.read_positions[i]]
        )
        if key.null_count:
            return "never"
        return FileKeys.build(
            key.to_numpy().astype(np.int64, copy=False),
            t.column(acid[0]).to_numpy(),
            t.column(acid[1]).to_numpy(),
            t.column(acid[2]).to_numpy(),
            plan.types[plan.read_positions[i]],
        )
    finally:
        fl.data.close()


# Column names of the internal table one stripe's read gives.
def _acid_key(a: str) -> str:
    return f"acid.{a}"


def _row_key(i: int) -> str:
    return f"row.{i}"


def _read_stripe(
    fl: _File,
    s: int,
    kcols: Sequence[ColumnKeys],
    acid_cols: Sequence[str],
    plan: ReadPlan,
    counts: LookupCounts,
    blooms: bool,
) -> pa.Table:
    """The needed columns of the row groups of stripe ``s`` that may hold a key (all of
    them when read whole), named by :func:`_acid_key` / :func:`_row_key`."""
    info = fl.meta.stripes[s]
    stride = fl.meta.row_index_stride
    if not blooms and (stride <= 0 or info.rows <= stride):
        # One row group (or no row index): its statistics are the stripe's, already
        # asked; without bloom filters to ask, read it as it is.
        counts.stripes_whole += 1
        counts.groups += 1
        counts.groups_read += 1
        return _pyarrow_stripe(fl, s, acid_cols)
    if not blooms and stride > 0 and _dense(fl.meta, s, kcols, -(-info.rows // stride)):
        # Keys spread over the whole stripe, several per row group: nearly every group
        # holds one, so the stripe is read whole below anyway; parsing its row index
        # first (in Python) cost a 100,000-key lookup in a 10M-row base ~0.1 s a batch.
        n_groups = -(-info.rows // stride)
        counts.stripes_whole += 1
        counts.groups += n_groups
        counts.groups_read += n_groups
        return _pyarrow_stripe(fl, s, acid_cols)
    reader = StripeReader(fl.data, fl.meta, s)
    cols = [fl.acid[a] for a in acid_cols] + [c for c in fl.row_ids if c is not None]
    groups = groups_with_keys(reader, kcols, counts.prune) if kcols else None
    n_groups = reader.groups
    counts.groups += n_groups
    if groups is not None:
        rows = sum(reader.group_rows(g) for g in groups)
        if not groups:
            return pa.table({})
        if rows <= WHOLE_STRIPE_SHARE * reader.rows and all(reader.supports(c) for c in cols):
            try:
                ranges = group_ranges(groups)
                arrays = {_acid_key(a): reader.read(fl.acid[a], ranges) for a in acid_cols}
                for i, c in enumerate(fl.row_ids):
                    if c is not None:
                        arrays[_row_key(i)] = reader.read(c, ranges)
                counts.groups_read += len(groups)
                return pa.table(arrays)
            except Unsupported:
                pass
    counts.stripes_whole += 1
    counts.groups_read += n_groups
    return _pyarrow_stripe(fl, s, acid_cols)


# A stripe is read whole without asking its row index when every key column (integers) has
# at least DENSE_KEYS_PER_GROUP keys per row group inside the stripe's [min, max], and
# they fall in at least DENSE_SPREAD of that range cut into as many equal parts as the
# stripe has row groups (keys clustered in a corner still ask the row index). Only
# without bloom filters, which may rule groups out whatever their min/max say.
DENSE_KEYS_PER_GROUP = 2
DENSE_SPREAD = 0.5


def _dense(meta: OrcMeta, s: int, kcols: Sequence[ColumnKeys], n_groups: int) -> bool:
    """Whether the keys are so many and so spread in stripe ``s`` that (by the stripe's
    statistics alone) every row group very likely holds one: every key column an integer
    one that passes the DENSE_KEYS_PER_GROUP and DENSE_SPREAD tests."""
    if n_groups <= 1 or not kcols:
        return False
    for k in kcols:
        ints = k.keys.ints
        if ints is None:
            return False
        st = meta.column_stats(s, k.column)
        if st is None or st.int_min is None or st.int_max is None or st.int_max <= st.int_min:
            return False
        span = k.span(st)
        if span is None or span[1] - span[0] < DENSE_KEYS_PER_GROUP * n_groups:
            return False
        inside = ints[span[0] : span[1]]
        width = (st.int_max - st.int_min) / n_groups
        cells = np.unique(((inside - st.int_min) / width).astype(np.int64))
        if len(cells) < DENSE_SPREAD * n_groups:
            return False
    return True


def _pyarrow_stripe(fl: _File, s: int, acid_cols: Sequence[str]) -> pa.Table:
    orcf = open_orc(fl.storage, fl.f.path, length=fl.f.logical_length)
    paths = [fl.acid_names[a] for a in acid_cols]
    row_paths: dict[int, str] = {}
    rtype = fl.meta.types[fl.acid["row"]]
    for i, c in enumerate(fl.row_ids):
        if c is not None:
            row_paths[i] = f"{fl.row_name}.{rtype.names[rtype.subtypes.index(c)]}"
    t = read_orc_columns(
        orcf,
        storage=fl.storage,
        path=fl.f.path,
        length=fl.f.logical_length,
        columns=paths + list(row_paths.values()),
        stripe=s,
    )
    arrays: dict[str, pa.Array | pa.ChunkedArray] = {
        _acid_key(a): t.column(p) for a, p in zip(acid_cols, paths, strict=True)
    }
    for i, p in row_paths.items():
        arrays[_row_key(i)] = pc.struct_field(t.column(fl.row_name), p.split(".", 1)[1])
    return pa.table(arrays)


def _key_rows(
    t: pa.Table, plan: ReadPlan, sorted_keys: Mapping[str, SortedKeys], fl: _File
) -> pa.Table:
    """The rows of ``t`` whose key columns hold key values (in the table's types).

    Integer and date keys are matched by binary search in the sorted keys: no hash set
    is built per stripe (a MERGE of 100,000 rows reads most stripes whole)."""
    if t.num_rows == 0:
        return t
    mask: np.ndarray | None = None
    lower = {plan.names[p].lower(): i for i, p in enumerate(plan.read_positions)}
    for name, keys in sorted_keys.items():
        i = lower.get(name.lower())
        if i is None or fl.row_ids[i] is None:
            continue
        col = cast_column(t.column(_row_key(i)), plan.types[plan.read_positions[i]])
        if keys.ints is not None and len(keys.ints):
            days = pa.types.is_date32(col.type)  # Arrow casts date32 to int32 only
            ints = pc.cast(pc.cast(col, pa.int32()) if days else col, pa.int64())
            valid = pc.is_valid(ints).to_numpy(zero_copy_only=False)
            vals = pc.fill_null(ints, 0).to_numpy(zero_copy_only=False)
            m = _sorted_hits(vals, keys.ints) if valid.all() else None
            if m is None:
                at = np.minimum(np.searchsorted(keys.ints, vals), len(keys.ints) - 1)
                m = (keys.ints[at] == vals) & valid
        elif keys.ints is not None:
            m = np.zeros(t.num_rows, dtype=bool)
        else:
            m = pc.is_in(col, value_set=keys.values).to_numpy(zero_copy_only=False)
        mask = m if mask is None else mask & m
    return t if mask is None else t.filter(pa.array(mask))


def _sorted_hits(vals: np.ndarray, keys: np.ndarray) -> np.ndarray | None:
    """The rows of ``vals`` equal to one of the sorted ``keys`` when ``vals`` is sorted
    too (a compacted base holds each bucket's rows by key), else ``None``: the keys are
    looked up in the rows (few keys of the stripe's range, a binary search each) instead
    of every row in the keys (1.25M searches per base stripe in a 10M-row table)."""
    n = len(vals)
    if n == 0 or not bool(np.all(vals[1:] >= vals[:-1])):
        return None
    inside = keys[np.searchsorted(keys, vals[0], "left") : np.searchsorted(keys, vals[-1], "right")]
    lo = np.searchsorted(vals, inside, "left")
    hi = np.searchsorted(vals, inside, "right")
    # +1 where a key's run of equal rows starts, -1 past its end: covered rows sum > 0.
    edges = np.bincount(lo, minlength=n + 1) - np.bincount(hi, minlength=n + 1)
    return np.cumsum(edges[:n]) > 0


def _finish(
    t: pa.Table,
    *,
    plan: ReadPlan,
    partition: Partition,
    write_ids: ValidWriteIdList,
    check_validity: bool,
    deletes: Deletes,
    qualifying: frozenset[ParsedDelta],
    split: tuple[int, int],
) -> pa.Table:
    """Hive's rules on the key rows of one file: validity, deletes, ROW__ID, columns."""
    keep: pa.Array | None = None
    if check_validity:
        keep = valid_write_id_mask(t.column(_acid_key("currentTransaction")), write_ids)
    kt = key_table(
        t.column(_acid_key("originalTransaction")),
        t.column(_acid_key("bucket")),
        t.column(_acid_key("rowId")),
    )
    if deletes.registry is not None and t.num_rows:
        alive = _alive(deletes, kt, split, qualifying)
        if alive is not None:
            keep = alive if keep is None else pc.and_(keep, alive)
    if keep is not None:
        t = t.filter(keep)
        kt = kt.filter(keep)
    row_cols: list[pa.ChunkedArray | pa.Array | None] = [
        t.column(_row_key(i)) if _row_key(i) in t.column_names else None
        for i in range(len(plan.read_positions))
    ]
    return assemble(plan, row_cols, n=t.num_rows, keys=kt, partition=partition)


def _alive(
    deletes: Deletes,
    kt: pa.Table,
    split: tuple[int, int],
    qualifying: frozenset[ParsedDelta],
) -> pa.Array | None:
    """Keep-mask of key rows ``kt`` (``key_table``) under the delete deltas that qualify
    for their file (``split``); ``None``: none is deleted. An in-memory registry answers
    through its one :class:`~acidstream.acid.delete_index.DeleteIndex` (each key once, with
    the newest delta naming it), as the full reader does: the per-qualifying-set matcher
    is rebuilt for every distinct set, and a lookup after N change batches has about N
    sets (the base's and each earlier batch's insert delta), each over up to every delete
    event of the partition."""
    reg = deletes.registry
    assert reg is not None
    if isinstance(reg, DeleteKeySet):
        index = reg.index()
        threshold = index.threshold(*split)
        if not index.qualifies_any(threshold):
            return None
        if index.packs and not any(kt.column(c).null_count for c in KEY_COLUMNS):
            o, b, r = (kt.column(c).to_numpy().astype(np.int64, copy=False) for c in KEY_COLUMNS)
            try:
                dead = index.deleted(o, b, r, threshold)
            except ValueError:
                pass  # data keys outside the packed range: the matcher below
            else:
                return None if dead is None else pa.array(~dead)
    if not qualifying:
        return None
    return pc.invert(reg.deleted(kt, qualifying))


def _whole_file(
    storage: Storage,
    f: DataFile,
    *,
    plan: ReadPlan,
    partition: Partition,
    write_ids: ValidWriteIdList,
    check_validity: bool,
    deletes: Deletes,
    split: tuple[int, int],
) -> pa.Table | None:
    """A file this module does not take apart, read by the full reader's file reader."""
    split_min, split_stmt = split
    parts = [
        b
        for b in read_acid_file(
            storage,
            f.path,
            length=f.logical_length,
            file_length=f.length,
            plan=plan,
            partition=partition,
            write_ids=write_ids,
            check_validity=check_validity,
            deletes=deletes,
            split_min=split_min,
            split_stmt=split_stmt,
        )
        if b.num_rows
    ]
    return pa.concat_tables(parts) if parts else None
