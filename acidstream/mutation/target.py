"""The table a mutation changes, and finding its rows in the mutation's own snapshot.

Hive runs an UPDATE, DELETE or MERGE as a query over the table in the snapshot of the
statement's own txn (opened first, then ``getValidWriteIds`` for it), reading ROW__ID with
the rows. :func:`read_rows` does the same with the ACID reader (``include_row_id=True``),
reading only what the mutation can touch:

- partitions the predicate (or the MERGE source's partition values) cannot match are not
  listed at all: each partition is a fragment with its ``k = v`` guarantee, and Arrow's
  dataset simplification keeps those the filter may satisfy (sound for any expression:
  ``OR``, ``NOT`` and ``IS NULL`` included);
- with ``buckets`` (a MERGE on the key of a table bucketed on it), only those buckets'
  files are read;
- with ``keys`` (a MERGE's source keys), only the stripes and row groups of each file
  whose statistics and bloom filters may hold a key are decoded, and of them only the
  rows holding one are returned (``acidstream.acid.key_lookup``): the cost grows with
  the rows and row groups the keys touch, not with the table. Partitions with original
  files or list bucketing are read whole and filtered.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from acidstream.acid.directory import get_acid_state
from acidstream.acid.errors import ConfigError
from acidstream.acid.key_lookup import LookupCounts, lookup_partition
from acidstream.acid.list_bucketing import SkewedInfo
from acidstream.acid.list_bucketing_prune import partition_skews
from acidstream.acid.lookup_cache import LookupCache
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.partition_name import make_partition_name
from acidstream.acid.partitions import Partition, PartitionValues, discover_partitions
from acidstream.acid.placement import Placement, TableLayout
from acidstream.acid.read_plan import ROW_ID_COLUMN, ROW_ID_TYPE, build_plan
from acidstream.acid.reader import DEFAULT_DELETE_EVENT_CAP, scan
from acidstream.acid.snapshot import ValidTxnList, ValidWriteIdList
from acidstream.acid.storage import Storage
from acidstream.acid.timestamps import DEFAULT_TIMESTAMP_UNIT
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore

__all__ = ["ROW_ID_COLUMN", "Target", "key_values", "read_rows", "row_schema"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Target:
    """One table in one mutation's snapshot (the driver side: the process running the
    mutation).

    Attributes:
        table: the catalog entry, read inside the mutation's txn.
        placement: where new rows go (partition, bucket, list-bucketing directory).
        write_ids / txns: the snapshot of the mutation's txn (its own write id open).
        options: the ORC writer settings with the table's ``orc.*`` properties.
        skews: each partition's list bucketing, for the reader.
    """

    table: TableDef
    placement: Placement
    write_ids: ValidWriteIdList
    txns: ValidTxnList
    options: OrcWriterOptions
    skews: dict[PartitionValues, SkewedInfo]

    @classmethod
    def open(cls, store: TxnStore, table: TableDef, txn_id: int) -> Target:
        """The table as the txn ``txn_id`` sees it (Hive: open the txn, then its snapshot)."""
        if not table.is_full_acid:
            raise ConfigError(
                f"{table.full_name} is not a full ACID table (transactional=true, not "
                "insert_only): rows of it cannot be deleted or updated"
            )
        txns = store.get_valid_txns(current_txn=txn_id)
        wids = store.get_valid_write_ids(table.db, table.name, txns)
        parts = store.list_partitions(table.db, table.name) if table.is_partitioned else []
        layout = TableLayout.of(table, partitions=parts)
        skews = partition_skews(table.partition_names, parts, table.skewed)
        return cls(
            table=table,
            placement=Placement(layout, storage=store.storage(layout.location)[0]),
            write_ids=wids,
            txns=txns,
            options=OrcWriterOptions().for_table(table.parameters),
            skews=skews,
        )

    @property
    def storage(self) -> Storage:
        return self.placement.storage

    @property
    def root(self) -> str:
        return self.placement.root

    @property
    def partition_names(self) -> tuple[str, ...]:
        return tuple(k.lower() for k in self.table.partition_names)

    @functools.cached_property
    def schema(self) -> pa.Schema:
        """What a read returns: the table's columns, then its partition columns (strings)."""
        return row_schema(self.table)

    def partitions(self) -> list[Partition]:
        """The partition directories on disk (the table directory itself when unpartitioned)."""
        if not self.storage.exists(self.root):
            return []
        if not self.partition_names:
            return [Partition(self.root, ())]
        found = discover_partitions(self.storage, self.root)
        return [p for p in found if len(p.values) == len(self.partition_names)]

    def prune(
        self, partitions: Sequence[Partition], where: pc.Expression | None
    ) -> list[Partition]:
        """The partitions rows satisfying ``where`` may be in."""
        if where is None or not self.partition_names or not partitions:
            return list(partitions)
        guarantees = [_guarantee(p) for p in partitions]
        fake = [f"/p{i}" for i in range(len(partitions))]  # never opened: paths only name fragments
        dataset = ds.FileSystemDataset.from_paths(
            fake,
            schema=self.schema,
            format=ds.ParquetFileFormat(),
            filesystem=pafs.LocalFileSystem(),
            partitions=guarantees,
        )
        kept = {f.path for f in dataset.get_fragments(filter=where)}
        return [p for p, f in zip(partitions, fake, strict=True) if f in kept]

    def partition_name(self, p: Partition) -> str:
        """``k=v/...`` of a partition (``""`` for the table directory)."""
        if not p.values:
            return ""
        return make_partition_name([k for k, _ in p.values], [v for _, v in p.values])


def _guarantee(p: Partition) -> pc.Expression:
    expr: pc.Expression | None = None
    for k, v in p.values:
        e = pc.field(k.lower()).is_null() if v is None else pc.field(k.lower()) == v
        expr = e if expr is None else expr & e
    assert expr is not None
    return expr


def row_schema(table: TableDef) -> pa.Schema:
    """The columns a read of ``table`` returns (data columns typed, partition columns as
    strings), without ROW__ID."""
    fields = [pa.field(n, t.to_arrow()) for n, t in table.schema.columns]
    fields += [pa.field(k.lower(), pa.string()) for k in table.partition_names]
    return pa.schema(fields)


def key_values(keys: pa.Table) -> dict[str, pa.Array]:
    """The distinct non-null values of each key column (lower-cased names) of ``keys``,
    as :func:`read_rows` takes them; nested columns are left out (they prune nothing)."""
    out: dict[str, pa.Array] = {}
    for name in keys.column_names:
        col = keys.column(name)
        if pa.types.is_nested(col.type):
            continue
        out[name.lower()] = pc.unique(col.combine_chunks()).drop_null()
    return out


def read_rows(
    target: Target,
    partitions: Sequence[Partition],
    *,
    where: pc.Expression | None = None,
    columns: Sequence[str] | None = None,
    buckets: Collection[int] | None = None,
    keys: pa.Table | Mapping[str, pa.Array] | None = None,
    counts: LookupCounts | None = None,
    bucket_keys: Mapping[int, Mapping[str, pa.Array]] | None = None,
    cache: LookupCache | None = None,
) -> pa.Table:
    """The rows of ``partitions`` visible to the mutation's snapshot that satisfy ``where``,
    with ROW__ID first (``row__id`` struct<writeid, bucketid, rowid>) and every column
    of :attr:`Target.schema` (or ``columns``).

    ``keys``: a table of key values (or their distinct values per column, as
    :func:`key_values` gives), named as the table's columns (those not read are
    ignored): only rows whose key columns each hold one of the values are returned (the rows a join on those keys can match),
    found by statistics, bloom filters and row-group reads. ``counts`` receives what the
    lookup read (stripes and row groups). ``bucket_keys``: the same keys split by the
    bucket Hive's hash sends them to (a table bucketed on key columns): each bucket file
    is searched for its bucket's keys only, and a bucket without keys is not read.
    ``cache``: the key lookup's :class:`~acidstream.acid.lookup_cache.LookupCache`
    (what earlier lookups of the table learned of its immutable files)."""
    out_schema = pa.schema(
        [pa.field(ROW_ID_COLUMN, ROW_ID_TYPE)]
        + [f for f in target.schema if columns is None or f.name in set(columns)]
    )
    kv = key_values(keys) if isinstance(keys, pa.Table) else keys
    if kv is not None:
        kv = {k: v for k, v in kv.items() if k in set(out_schema.names)}
    tables: list[pa.Table] = []
    c = counts if counts is not None else LookupCounts()
    for p in partitions:
        if kv and target.table.skewed is None:
            batches = _lookup(target, p, out_schema, where, buckets, kv, c, bucket_keys, cache)
        else:
            batches = None
        if batches is None:
            batches = _scan(target, p, out_schema, where, buckets)
        for t in batches:
            if t.num_rows:
                tables.append(t.cast(out_schema) if t.schema != out_schema else t)
    if kv:
        log.debug("MERGE key lookup in %s: %s", target.table.full_name, c.text())
    if not tables:
        return out_schema.empty_table()
    out = pa.concat_tables(tables)
    if kv and out.num_rows:
        mask: pc.Expression | None = None
        for k, v in kv.items():
            e = pc.field(k).isin(v)
            mask = e if mask is None else mask & e
        assert mask is not None
        out = out.filter(mask)
    return out


def _scan(
    target: Target,
    p: Partition,
    out_schema: pa.Schema,
    where: pc.Expression | None,
    buckets: Collection[int] | None,
) -> list[pa.Table]:
    s = scan(
        p.path,
        write_ids=target.write_ids,
        txns=target.txns,
        columns=[f.name for f in out_schema][1:],
        include_row_id=True,
        filter=where,
        schema=target.table.schema,
        storage=target.storage,
        skews=target.skews,
        partition_keys=target.partition_names,
        buckets=buckets,
    )
    return list(s.batches)


def _lookup(
    target: Target,
    p: Partition,
    out_schema: pa.Schema,
    where: pc.Expression | None,
    buckets: Collection[int] | None,
    keys: Mapping[str, pa.Array],
    counts: LookupCounts,
    bucket_keys: Mapping[int, Mapping[str, pa.Array]] | None = None,
    cache: LookupCache | None = None,
) -> list[pa.Table] | None:
    """The partition's key rows by :func:`lookup_partition`; ``None`` when it holds
    original files (read by the full reader instead)."""
    state = get_acid_state(
        p.path, write_ids=target.write_ids, txns=target.txns, storage=target.storage
    )
    if state.original_files or any(d.is_raw for d in state.deltas):
        return None
    plan = build_plan(
        None,
        schema=target.table.schema,
        partition_names=target.partition_names,
        columns=[f.name for f in out_schema][1:],
        include_row_id=True,
        filter=where,
        timestamp_unit=DEFAULT_TIMESTAMP_UNIT,
    )
    return list(
        lookup_partition(
            target.storage,
            p,
            state,
            plan=plan,
            keys=keys,
            write_ids=target.write_ids,
            buckets=buckets,
            delete_event_cap=DEFAULT_DELETE_EVENT_CAP,
            blooms=bool(target.options.bloom_filter_columns),
            counts=counts,
            bucket_keys=(
                None
                if bucket_keys is None
                else {
                    b: {k: v for k, v in kv.items() if k in keys} for b, kv in bucket_keys.items()
                }
            ),
            cache=cache,
        )
    )
