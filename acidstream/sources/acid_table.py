"""Spark reads Hive ACID tables: a PySpark Python data source named ``acidtable``.

Batch snapshot reads (with time travel), and a streaming source of newly committed
write ids::

    from acidstream.sources.acid_table import AcidTableSource
    spark.dataSource.register(AcidTableSource)
    df = spark.read.format("acidtable").option("metastore", url).load("db.events")
    old = spark.read.format("acidtable").option("asOfWriteId", 7).load("db.events")
    stream = spark.readStream.format("acidtable").option("maxWriteIdsPerTrigger", 10).load("db.events")

Where the code runs (see ``docs/spark_reader.md``):

* :class:`AcidTableSource` is made by Spark from the options and pickled to Python
  workers; it holds only the option strings. ``schema()`` runs in a worker at ``load()``.
* :class:`AcidTableReader` is made in the planning Python worker when a query runs
  (``DataSource.reader``): it takes the snapshot there, once (and opens the lease txn),
  gets the pushed filters (``pushFilters``), is pickled to the executors, and only then
  plans the input partitions (``partitions``). So everything ``read`` needs is set
  before ``partitions``: the snapshot and the filters travel in the reader, the files
  in the :class:`~acidstream.sources.acid_table_plan.AcidTablePartition`\\ s.
* :class:`AcidTableStreamReader`: the driver's streaming Python worker keeps one
  instance for the whole query (``initialOffset``, ``latestOffset``, ``partitions``,
  ``commit``, ``stop``); executors get a pickled copy and call only ``read``.

**Keeping the Cleaner away.** The compactor's Cleaner deletes obsolete files only when no
open txn is older than the compaction's commit (``docs/compaction.md``). A read is
protected by holding a txn open from before its snapshot until its last file is read:

* batch, by default: the planner opens a *lease* txn, takes the snapshot under it, and
  executors heartbeat it while they read. A Python data source is not told when the
  query ends, so nobody commits it: it stays open until the housekeeper's reaper aborts
  it one txn timeout (``hive.txn.timeout``, 300 s) after the last heartbeat. The Cleaner
  is thus held up to that long after the read; a task that finds the lease already
  aborted fails instead of reading a snapshot whose files may be gone.
* batch, exact: :class:`AcidReadTxn` opens the txn in the user's driver process,
  heartbeats it, hands its snapshot to every ``spark.read`` made with its
  :meth:`~AcidReadTxn.options`, and commits it when the ``with`` block ends, i.e. after
  the actions. Several reads in the block see one consistent snapshot.
* streaming: each micro-batch opens a lease txn at planning and commits it in
  ``commit`` (after the batch's sink committed).
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructField, StructType

from acidstream.acid import list_bucketing_prune as lbp
from acidstream.acid.errors import (
    AcidStreamError,
    ConfigError,
    NotEnoughHistoryError,
    TableNotFoundError,
)
from acidstream.acid.partitions import Partition, discover_partitions
from acidstream.acid.read_plan import ROW_ID_COLUMN, ROW_ID_TYPE, Predicate
from acidstream.acid.reader import scan
from acidstream.acid.schema import TableSchema
from acidstream.acid.snapshot import LONG_MAX, ValidTxnList, ValidWriteIdList
from acidstream.acid.storage import Storage
from acidstream.acid.table_name import TableName
from acidstream.sources.acid_table_options import EARLIEST, LATEST, SHORT_NAME, AcidTableOptions
from acidstream.sources.acid_table_plan import (
    AcidTablePartition,
    Lease,
    ReadSpec,
    host_parallelism,
    keep_partition,
    partition_value_types,
    plan_partitions,
    read_partition,
)
from acidstream.txn.namespaces import link_allows, resolve_read
from acidstream.txn.read_txn import LEASE_AGENT, AcidReadTxn, reader_user

__all__ = [
    "LEASE_AGENT",
    "SHORT_NAME",
    "AcidReadTxn",
    "AcidTableOptions",
    "AcidTableReader",
    "AcidTableSource",
    "AcidTableStreamReader",
    "register",
]

log = logging.getLogger(__name__)


def register(spark: Any) -> None:
    """Register ``acidtable`` with a SparkSession (``spark.dataSource.register``)."""
    spark.dataSource.register(AcidTableSource)


# ------------------------------------------------------------------------------ schema


def _spark_schema(schema: pa.Schema) -> StructType:
    # pyspark's converter needs no SparkContext (the Python workers have none).
    from pyspark.sql.pandas.types import from_arrow_type

    return StructType([StructField(f.name, from_arrow_type(f.type), True) for f in schema])


def _arrow_output(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark checks each batch against."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


class _Table:
    """What the driver knows of the table: location, columns and their types."""

    link_partitions: frozenset[str] | None = None  # read through a static link: its partitions

    def __init__(
        self,
        *,
        location: str,
        row_schema: pa.Schema,
        partition_names: tuple[str, ...],
        partition_types: tuple[pa.DataType, ...],
        name: TableName | None,
    ) -> None:
        self.location = location
        self.row_schema = row_schema
        self.partition_names = partition_names
        self.partition_types = partition_types
        self.name = name

    def full_schema(self, include_row_id: bool) -> pa.Schema:
        fields = [pa.field(ROW_ID_COLUMN, ROW_ID_TYPE)] if include_row_id else []
        fields += list(self.row_schema)
        fields += [
            pa.field(n, t) for n, t in zip(self.partition_names, self.partition_types, strict=True)
        ]
        return pa.schema(fields)


def _open_store(opts: AcidTableOptions) -> Any:
    from acidstream.txn.config import StoreConfig

    return StoreConfig.resolve(
        metastore=opts.metastore, warehouse=opts.warehouse, storage_options=opts.storage_options
    ).open()


def _load_table(opts: AcidTableOptions, store: Any | None) -> _Table:
    """The table's columns: the metastore's declaration, or (path mode) a data file's."""
    if store is not None:
        ref = resolve_read(store, opts.table, namespace=opts.namespace)  # names, links
        name = ref.table
        t = store.get_table(name.db, name.table)
        if not t.is_full_acid:
            raise ConfigError(f"{t.full_name} is not a full-ACID table")
        if not t.location:
            raise ConfigError(f"{t.full_name} has no location")
        parts = TableSchema.of(list(t.partition_keys)) if t.partition_keys else None
        loaded = _Table(
            location=t.location,
            row_schema=t.schema.arrow_schema(timestamp_unit="us"),
            partition_names=tuple(n.lower() for n in t.partition_names),
            partition_types=tuple(
                ht.to_arrow(timestamp_unit="us") for _, ht in (parts.columns if parts else ())
            ),
            name=name,
        )
        loaded.link_partitions = ref.partitions
        return loaded
    declared = TableSchema.parse(opts.table_columns) if opts.table_columns else None
    storage, loc = Storage.for_path(opts.table, storage_options=opts.storage_options)
    s = scan(
        loc, schema=declared, txns=opts.valid_txns, write_ids=opts.valid_write_ids, storage=storage
    )
    pnames: list[str] = []
    for p in discover_partitions(storage, loc):
        pnames += [k for k, _ in p.values if k not in pnames]
    row = pa.schema([f for f in s.schema if f.name not in pnames])
    ptypes: dict[str, pa.DataType] = {n: pa.string() for n in pnames}
    if opts.partition_columns:
        for n, ht in TableSchema.parse(opts.partition_columns).columns:
            ptypes[n.lower()] = ht.to_arrow(timestamp_unit="us")
    return _Table(
        location=opts.table if "://" in opts.table else loc,  # a URL keeps its scheme
        row_schema=row,
        partition_names=tuple(pnames),
        partition_types=tuple(ptypes[n] for n in pnames),
        name=None,
    )


def _select(table: _Table, opts: AcidTableOptions) -> pa.Schema:
    """The source's schema: ``row__id`` on request, then the chosen columns."""
    full = table.full_schema(opts.include_row_id)
    if opts.columns is None:
        return full
    by = {f.name.lower(): f for f in full}
    picked = [by[ROW_ID_COLUMN]] if opts.include_row_id else []
    for c in opts.columns:
        f = by.get(c.lower())
        if f is None:
            raise ConfigError(f"unknown column {c!r}; the table has {[x.name for x in full]}")
        picked.append(f)
    return pa.schema(picked)


# ---------------------------------------------------------------------------- snapshot


def _cap_txns(txns: ValidTxnList, txn_id: int) -> ValidTxnList:
    """The snapshot of a reader that began just after txn ``txn_id``."""
    opens = tuple(t for t in txns.open_txns if t <= txn_id)
    return ValidTxnList(
        txn_id,
        opens,
        tuple(t for t in txns.aborted_txns if t <= txn_id),
        opens[0] if opens else LONG_MAX,
    )


class _Snapshot:
    """A table snapshot taken on the driver: txn list, write ids and the txn protecting it."""

    def __init__(self, txns: ValidTxnList, write_ids: ValidWriteIdList, lease: Lease | None):
        self.txns = txns
        self.write_ids = write_ids
        self.lease = lease


def _open_lease(store: Any, cfg: Any, opts: AcidTableOptions, what: str) -> tuple[int, Lease]:
    txn = store.open_txns(
        1, user=reader_user(), host=socket.gethostname(), agent_info=f"{LEASE_AGENT}{what}"
    )[0]
    return txn, Lease(cfg.metastore_url, cfg.warehouse, txn, opts.lease_heartbeat_s)


def _take_snapshot(opts: AcidTableOptions, store: Any, table: _Table) -> _Snapshot:
    """The driver's one snapshot of the table (time travel and lease included).

    Raises:
        ConfigError: an ``asOf`` beyond the table's present.
    """
    from acidstream.txn.config import StoreConfig

    assert table.name is not None
    cfg = StoreConfig.resolve(
        metastore=opts.metastore, warehouse=opts.warehouse, storage_options=opts.storage_options
    )
    lease: Lease | None = None
    if opts.read_txn_id is not None:
        # The caller holds the txn (AcidReadTxn) and gave its snapshot.
        txns = (
            ValidTxnList.from_string(opts.valid_txns)
            if opts.valid_txns
            else store.get_valid_txns(opts.read_txn_id)
        )
    else:
        txn, lease = _open_lease(store, cfg, opts, str(table.name))
        txns = store.get_valid_txns(txn)
    if opts.as_of_txn is not None:
        if opts.as_of_txn > txns.high_watermark:
            raise ConfigError(
                f"asOfTxn {opts.as_of_txn} is in the future (highest txn is {txns.high_watermark})"
            )
        # The write ids valid for a reader that began just after the txn. Directory
        # visibility keeps today's txn list: a compaction committed since then makes its
        # base visible, and Hive's rule refuses the older version (NotEnoughHistoryError)
        # instead of reading the old deltas until the Cleaner silently removes them.
        wids = store.get_valid_write_ids(
            table.name.db, table.name.table, _cap_txns(txns, opts.as_of_txn)
        )
    else:
        wids = store.get_valid_write_ids(table.name.db, table.name.table, txns)
    if opts.as_of_write_id is not None:
        if opts.as_of_write_id > wids.high_watermark:
            raise ConfigError(
                f"asOfWriteId {opts.as_of_write_id} is in the future for {table.name} "
                f"(highest write id is {wids.high_watermark})"
            )
        wids = wids.capped(opts.as_of_write_id)
    return _Snapshot(txns, wids, lease)


def _history_error(opts: AcidTableOptions, e: NotEnoughHistoryError) -> NotEnoughHistoryError:
    when = (
        f"asOfWriteId={opts.as_of_write_id}"
        if opts.as_of_write_id is not None
        else f"asOfTxn={opts.as_of_txn}"
        if opts.as_of_txn is not None
        else "this snapshot"
    )
    return NotEnoughHistoryError(
        f"{opts.table}: not enough history for {when}: compaction has removed the files of "
        f"that version of the table ({e})"
    )


# ----------------------------------------------------------------------------- filters


_SIMPLE = (bool, int, float, str, date, datetime, Decimal)
_OPS: dict[type, str] = {
    EqualTo: "=",
    EqualNullSafe: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}


def _to_predicate(f: Filter, columns: set[str]) -> Predicate | None:
    """A Spark filter as an ``acidstream.acid.read_plan`` predicate, or ``None`` if not pushable."""
    attr = getattr(f, "attribute", None)
    if isinstance(f, Not):
        inner = f.child
        if isinstance(inner, EqualTo) and len(inner.attribute) == 1:
            p = _to_predicate(inner, columns)
            return None if p is None else (p[0], "!=", p[2])
        return None
    if not isinstance(attr, tuple) or len(attr) != 1 or attr[0].lower() not in columns:
        return None
    col = attr[0].lower()
    if isinstance(f, IsNull):
        return (col, "is null", None)
    if isinstance(f, IsNotNull):
        return (col, "is not null", None)
    if isinstance(f, In):
        vals = tuple(f.value)
        if all(isinstance(v, _SIMPLE) and not _zoned(v) for v in vals):
            return (col, "in", vals)
        return None
    op = _OPS.get(type(f))
    value = getattr(f, "value", None)
    if op is None or not isinstance(value, _SIMPLE):
        return None  # EqualNullSafe with NULL, string patterns, nested values...
    if _zoned(value):
        return None
    return (col, op, value)


def _zoned(value: object) -> bool:
    # A Spark TIMESTAMP literal (an instant) against Hive's zone-less timestamps: Spark decides.
    return isinstance(value, datetime) and value.tzinfo is not None


# ------------------------------------------------------------------------------ source


class AcidTableSource(DataSource):
    """``spark.read.format("acidtable")`` / ``spark.readStream.format("acidtable")``.

    Holds only the option strings (pickled to Python workers).
    """

    @classmethod
    def name(cls) -> str:
        """Short name for ``format()``: ``"acidtable"``."""
        return SHORT_NAME

    def _opts(self) -> AcidTableOptions:
        return AcidTableOptions.parse(self.options)

    def schema(self) -> StructType:
        """Worker, at ``load()``: the table's columns (typed as declared) as Spark's schema."""
        opts = self._opts()
        store = None if opts.is_path else _open_store(opts)
        try:
            return _spark_schema(_select(_load_table(opts, store), opts))
        finally:
            if store is not None:
                store.close()

    def reader(self, schema: StructType) -> AcidTableReader:
        """Planning worker: take the snapshot now (see the module docstring)."""
        opts = self._opts()
        cls = AcidTableFilteringReader if opts.filter_pushdown else AcidTableReader
        return cls(opts, schema)

    def streamReader(self, schema: StructType) -> AcidTableStreamReader:
        """Streaming worker (driver) and, pickled, executors."""
        opts = self._opts()
        if opts.is_path:
            raise ConfigError("the acidtable streaming source needs a metastore table (db.table)")
        if opts.as_of_write_id is not None or opts.as_of_txn is not None:
            raise ConfigError("asOfWriteId/asOfTxn are for batch reads, not streams")
        return AcidTableStreamReader(opts, schema)


def _spec_columns(schema: StructType) -> tuple[tuple[str, ...], bool]:
    names = tuple(f.name.lower() for f in schema.fields)
    return tuple(n for n in names if n != ROW_ID_COLUMN), ROW_ID_COLUMN in names


class AcidTableReader(DataSourceReader):
    """Batch reader: the snapshot is taken in ``__init__`` (planning worker), once.

    Picklable: holds options, the table description, the snapshot strings and the
    pushed predicates; no store connection survives ``__init__``.
    """

    def __init__(self, options: AcidTableOptions, schema: StructType) -> None:
        self.opts = options
        columns, include_row_id = _spec_columns(schema)
        store = None if options.is_path else _open_store(options)
        try:
            table = _load_table(options, store)
            known = {f.name.lower() for f in table.full_schema(True)}
            unknown = [c for c in columns if c not in known]
            if unknown:
                raise ConfigError(f"{options.table} has no column(s) {unknown}")
            # Each partition's list bucketing (pruned with the pushed filters); taken before
            # the snapshot: a partition created in between is read whole.
            self.lb = _lb_pruner(store, table)
            if store is not None:
                snap = _take_snapshot(options, store, table)
            else:
                txns = ValidTxnList.from_string(options.valid_txns or None)
                wids = ValidWriteIdList.from_string(options.valid_write_ids or None)
                if options.as_of_write_id is not None:
                    wids = wids.capped(options.as_of_write_id)
                snap = _Snapshot(txns, wids, None)
        finally:
            if store is not None:
                store.close()
        self.location = table.location
        self.link_partitions = table.link_partitions
        self.partition_names = table.partition_names
        self.partition_types = table.partition_types
        self.txns = snap.txns.to_string()
        self.spec = ReadSpec(
            row_schema=table.row_schema,
            partition_names=table.partition_names,
            partition_types=table.partition_types,
            columns=columns,
            include_row_id=include_row_id,
            output_schema=_arrow_output(schema),
            write_ids=snap.write_ids.to_string(),
            lease=snap.lease,
            storage_options=options.storage_options,
            location=table.location,
        )
        self.partition_filters: tuple[Predicate, ...] = ()

    def partitions(self) -> Sequence[InputPartition]:
        """Planning worker: one input partition per (partition, bucket) file group.

        Raises:
            NotEnoughHistoryError: time travel to a version compaction has removed.
        """
        storage, loc = Storage.for_path(self.location, storage_options=self.opts.storage_options)
        if not storage.exists(loc):
            if self.opts.is_path:
                raise TableNotFoundError(f"{loc}: no such table directory")
            return []  # a metastore table nobody has written yet
        parts = [
            p
            for p in discover_partitions(storage, loc)
            if _keep(p, self.partition_names, self.partition_types, self.partition_filters)
            and link_allows(self.link_partitions, p.values)
        ]
        try:
            return plan_partitions(
                storage,
                parts,
                write_ids=ValidWriteIdList.from_string(self.spec.write_ids),
                txns=ValidTxnList.from_string(self.txns),
                max_partition_bytes=self.opts.max_partition_bytes,
                parallelism=self.opts.parallelism or host_parallelism(),
                lb=self.lb,
            )
        except NotEnoughHistoryError as e:
            raise _history_error(self.opts, e) from e

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: the rows of one file group (Arrow batches of the output schema)."""
        if not isinstance(partition, AcidTablePartition):
            return iter(())  # Spark's stand-in InputPartition(None) for an empty plan
        return read_partition(self.spec, partition)


def _lb_pruner(store: Any | None, table: _Table) -> lbp.ListBucketingPruner:
    """Planning worker: each partition's own list bucketing from the catalog (a partition
    keeps the definition it was created with); none in path mode."""
    if store is None or table.name is None:
        return lbp.ListBucketingPruner()
    t = store.get_table(table.name.db, table.name.table)
    parts = store.list_partitions(t.db, t.name) if t.partition_keys else ()
    return lbp.ListBucketingPruner(
        skews=lbp.partition_skews(t.partition_names, parts, t.skewed), schema=t.schema
    )


def _lb_expr(f: Filter) -> lbp.Expr:
    """A pushed filter as a list-bucketing pruner condition: ``EqualTo``, ``EqualNullSafe``
    with a value, ``In`` and ``Not`` are understood, the rest is unknown (Hive's rules).
    Spark hands top-level ANDs over as separate filters and pushes no OR."""
    if isinstance(f, Not):
        return lbp.Not(_lb_expr(f.child))
    attr = getattr(f, "attribute", None)
    if not isinstance(attr, tuple) or len(attr) != 1:
        return lbp.Opaque(type(f).__name__)
    col = attr[0].lower()
    value = getattr(f, "value", None)
    if isinstance(f, EqualTo | EqualNullSafe) and isinstance(value, _SIMPLE):
        return lbp.Opaque("zoned") if _zoned(value) else lbp.Eq(col, value)
    if isinstance(f, In) and all(isinstance(v, _SIMPLE) and not _zoned(v) for v in f.value):
        return lbp.In(col, tuple(f.value))
    return lbp.Opaque(type(f).__name__)


def _keep(
    p: Partition,
    names: tuple[str, ...],
    types: tuple[pa.DataType, ...],
    preds: Sequence[Predicate],
) -> bool:
    if not preds:
        return True
    return keep_partition(partition_value_types(p, names, types), preds)


class AcidTableFilteringReader(AcidTableReader):
    """The batch reader with ``pushFilters`` (option ``filterPushdown=true``).

    A separate class because Spark refuses a reader that implements ``pushFilters``
    unless ``spark.sql.python.filterPushdown.enabled`` is true (default false).
    """

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Planning worker, before pickling: keep what prunes partitions or rows.

        Partition-column predicates prune partition directories at planning; ``=``, ``IN``
        and ``NOT`` on skewed columns prune list-bucketing directories at planning (Hive's
        rules, ``acidstream.acid.list_bucketing_prune``); table-column predicates drop rows in each
        file after deletes. Every filter is still returned
        to Spark, which re-checks the (fewer) rows: our comparisons run on Arrow values and
        Spark's semantics stay the reference.
        """
        columns = {n.lower() for n in self.spec.row_schema.names} | set(self.partition_names)
        part_preds: list[Predicate] = []
        row_preds: list[Predicate] = []
        for f in filters:
            p = _to_predicate(f, columns)
            if p is not None:
                (part_preds if p[0] in self.partition_names else row_preds).append(p)
            yield f
        self.partition_filters = tuple(part_preds)
        self.spec = dataclasses.replace(self.spec, predicates=tuple(row_preds))
        self.lb = dataclasses.replace(self.lb, expr=lbp.And(tuple(_lb_expr(f) for f in filters)))


# --------------------------------------------------------------------------- streaming


class AcidTableStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Streams the rows of each newly committed write id (offsets ``{"writeId": N}``).

    Offset ``N`` means: every write id ``<= N`` has been emitted. A write id is emitted
    only once every lower write id has committed or aborted (the table's write-id order:
    nothing below a still-open writer is ever skipped), in write-id order; a micro-batch
    ``(start, end]`` reads the rows whose ROW__ID write id is in that range, so a replay
    after a restart reads the same rows. Inserts only: a delete delta in the range fails
    the query (``onDeletes=fail``) or is skipped (``onDeletes=ignore``).
    """

    def __init__(self, options: AcidTableOptions, schema: StructType) -> None:
        self.opts = options
        self.columns, self.include_row_id = _spec_columns(schema)
        self.output_schema = _arrow_output(schema)
        self._store: Any = None
        self._table: _Table | None = None
        self._leases: dict[int, Lease] = {}  # micro-batch end -> its lease txn
        self._target: int | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_store"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- driver ------------------------------------------------------------

    def _open(self) -> tuple[Any, _Table]:
        if self._store is None:
            self._store = _open_store(self.opts)
        if self._table is None:
            self._table = _load_table(self.opts, self._store)
        return self._store, self._table

    def _frontier(self) -> int:
        """The highest write id below which every write id has committed or aborted."""
        store, table = self._open()
        assert table.name is not None
        txns = store.get_valid_txns()
        w = store.get_valid_write_ids(table.name.db, table.name.table, txns)
        low_open = w.min_open_write_id if w.min_open_write_id != LONG_MAX else None
        return w.high_watermark if low_open is None else min(w.high_watermark, low_open - 1)

    def initialOffset(self) -> dict:
        """Driver: ``startingWriteId`` as an offset (``earliest`` is -1: originals too)."""
        s = self.opts.starting_write_id
        if s == EARLIEST:
            return {"writeId": -1}
        if s == LATEST:
            return {"writeId": self._frontier()}
        return {"writeId": int(s)}

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxWriteIdsPerTrigger`` (carried as Spark's max-rows limit) or everything."""
        n = self.opts.max_write_ids_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        """Driver: ``Trigger.AvailableNow`` stops at the frontier seen now."""
        self._target = self._frontier()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """Driver: the end of the next micro-batch."""
        begin = int(start["writeId"])
        end = self._target if self._target is not None else self._frontier()
        if isinstance(limit, ReadMaxRows):
            # Write ids start at 1; -1 (earliest) only adds the originals' write id 0.
            end = min(end, max(begin, 0) + limit.max_rows)
        return {"writeId": max(begin, end)}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """Driver: the files holding write ids ``(start, end]``, under a lease txn.

        Raises:
            AcidStreamError: a delete delta in the range (``onDeletes=fail``).
            NotEnoughHistoryError: compaction removed the deltas of the range.
        """
        lo, hi = int(start["writeId"]), int(end["writeId"])
        if hi <= lo:
            return []
        store, table = self._open()
        assert table.name is not None
        from acidstream.txn.config import StoreConfig

        cfg = StoreConfig.resolve(
            metastore=self.opts.metastore,
            warehouse=self.opts.warehouse,
            storage_options=self.opts.storage_options,
        )
        with self._lock:
            lease = self._leases.get(hi)
            if lease is None:
                lease = self._leases[hi] = _open_lease(store, cfg, self.opts, str(table.name))[1]
        txn = lease.txn_id
        txns = store.get_valid_txns(txn)
        wids = store.get_valid_write_ids(table.name.db, table.name.table, txns).capped(hi)
        storage, loc = Storage.for_path(table.location, storage_options=self.opts.storage_options)
        if not storage.exists(loc):
            return []
        parts = [
            p
            for p in discover_partitions(storage, loc)
            if link_allows(table.link_partitions, p.values)
        ]
        if self.opts.on_deletes == "fail":
            _refuse_deletes(storage, parts, wids, txns, lo, hi)
        try:
            groups = plan_partitions(
                storage,
                parts,
                write_ids=wids,
                txns=txns,
                max_partition_bytes=self.opts.max_partition_bytes,
                parallelism=self.opts.parallelism or host_parallelism(),
                min_write_id=lo,
                lb=_lb_pruner(store, table),  # location-map directories of each partition
            )
        except NotEnoughHistoryError as e:
            raise NotEnoughHistoryError(
                f"{table.name}: write ids ({lo}, {hi}] can no longer be streamed: compaction "
                f"has folded them into a newer base ({e})"
            ) from e
        spec = ReadSpec(
            row_schema=table.row_schema,
            partition_names=table.partition_names,
            partition_types=table.partition_types,
            columns=self.columns,
            include_row_id=self.include_row_id,
            output_schema=self.output_schema,
            write_ids=wids.to_string(),
            write_range=(lo, hi),
            lease=lease,
            storage_options=self.opts.storage_options,
            location=table.location,
        )
        return [_StreamPartition(g, spec) for g in groups]

    def commit(self, end: dict) -> None:
        """Driver: the batch up to ``end`` is done: end its lease txn (and older ones)."""
        done = int(end["writeId"])
        with self._lock:
            ended = [(k, t) for k, t in self._leases.items() if k <= done]
            for k, _ in ended:
                del self._leases[k]
        if ended:
            store, _ = self._open()
            for _, lease in ended:
                store.commit_txn(lease.txn_id)

    def stop(self) -> None:
        """Driver: end open leases and close the store."""
        if self._store is not None:
            with self._lock:
                leases, self._leases = list(self._leases.values()), {}
            for lease in leases:
                try:
                    self._store.commit_txn(lease.txn_id)
                except AcidStreamError as e:  # best effort: the reaper ends it otherwise
                    log.warning("could not end lease txn %s: %s", lease.txn_id, e)
            self._store.close()
            self._store = None

    # -- executor ----------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: the rows of the partition's files with write ids in the batch's range."""
        if not isinstance(partition, _StreamPartition):
            return iter(())
        return read_partition(partition.spec, partition.group)


class _StreamPartition(InputPartition):
    """A file group of a micro-batch with the batch's read spec (range, snapshot, lease).

    The executors' copy of the stream reader is pickled before the driver's copy has
    loaded the table, so everything ``read`` needs travels here (picklable).
    """

    def __init__(self, group: AcidTablePartition, spec: ReadSpec) -> None:
        super().__init__(None)
        self.group, self.spec = group, spec


def _refuse_deletes(
    storage: Storage,
    parts: Sequence[Partition],
    wids: ValidWriteIdList,
    txns: ValidTxnList,
    lo: int,
    hi: int,
) -> None:
    from acidstream.acid.directory import get_acid_state
    from acidstream.acid.layout import ParsedDelta

    for p in parts:
        st = get_acid_state(p.path, write_ids=wids, txns=txns, storage=storage)
        for d in st.delete_deltas:
            assert isinstance(d.parsed, ParsedDelta)
            if d.parsed.max_write_id > lo and d.parsed.min_write_id <= hi:
                raise AcidStreamError(
                    f"{d.path}: delete events (DELETE/UPDATE) in write ids ({lo}, {hi}]; the "
                    "acidtable stream reads inserts only. Set onDeletes=ignore to emit the "
                    "inserts and skip deletes (an UPDATE then shows as the new row only)."
                )
