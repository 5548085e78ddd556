"""A handle on one catalog table: its schema and description, snapshot reads, Spark.

``acidstream.table("db.events")`` is where a table's operations live (reads today; the
row-level ``delete``/``update``/``merge`` of the next issue), as delta-rs hangs them on
``DeltaTable`` and pyiceberg on ``Table``::

    t = acidstream.table("db.events", metastore=url)
    t.read(columns=["id"], filter=[("ds", "=", "2024-01-01")])
    with t.snapshot():                    # one read txn: the Cleaner waits for it
        a = t.read()
        df = t.spark(spark)               # the same snapshot, through ``acidtable``
        assert df.count() == a.num_rows

Every read takes the snapshot a Hive reader would (``acidstream.snapshot_read``): outside
:meth:`Table.snapshot` each read takes the metastore's current one under a read txn of its
own (held until its last batch is read); inside, every read uses the held one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from acidstream.acid.errors import ConfigError, TableNotFoundError
from acidstream.acid.list_bucketing import SkewedInfo
from acidstream.acid.read_plan import ROW_ID_COLUMN
from acidstream.acid.snapshot import ValidTxnList, ValidWriteIdList
from acidstream.acid.timestamps import DEFAULT_TIMESTAMP_UNIT, TimestampUnit
from acidstream.read_options import Filter, ReadOptions
from acidstream.snapshot_read import READ_AGENT, scan_table
from acidstream.txn.config import StoreConfig

if TYPE_CHECKING:
    from acidstream.merge_builder import MergeBuilder
    from acidstream.mutation import ChangeResult, MergeResult, MutationResult
    from acidstream.mutation.expressions import Expr
    from acidstream.txn.catalog import TableDef
    from acidstream.txn.namespaces import ReadRef
    from acidstream.txn.read_txn import AcidReadTxn

__all__ = ["Snapshot", "Table", "TableDescription", "read_table", "table"]

R = TypeVar("R")


@dataclass(frozen=True)
class TableDescription:
    """A table as the catalog describes it (what ``acidstream describe`` shows).

    Attributes:
        name: The table's ``db.table`` (for a link, the target's: the data's owner).
        columns: ``(name, hive type)`` pairs, in table order.
        partition_keys: ``(name, hive type)`` pairs of the partition columns.
        bucket_cols: The bucketing columns (``()``: not bucketed).
        num_buckets: The number of buckets; ``-1`` when not bucketed (Hive's convention).
        properties: The table properties (``transactional``, ``orc.*``...), read-only.
        location: The table directory.
        skewed: The table's list bucketing, or ``None``.
        is_link: Whether the handle was opened through a link (``T1@B``).
        link: The link's full name (``A.T1@B``), or ``None``.
        link_partitions: The target's partitions a static link exposes; ``None``: all.
    """

    name: str
    columns: tuple[tuple[str, str], ...]
    partition_keys: tuple[tuple[str, str], ...]
    bucket_cols: tuple[str, ...]
    num_buckets: int
    properties: Mapping[str, str]
    location: str | None
    skewed: SkewedInfo | None
    is_link: bool = False
    link: str | None = None
    link_partitions: frozenset[str] | None = None

    @property
    def partition_names(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.partition_keys)

    @property
    def is_bucketed(self) -> bool:
        return self.num_buckets > 0


@dataclass(frozen=True)
class Snapshot:
    """A snapshot held by :meth:`Table.snapshot`: the txn list and the table's write ids
    every read inside the ``with`` block uses, and the read txn protecting their files."""

    txns: ValidTxnList
    write_ids: ValidWriteIdList
    read_txn: AcidReadTxn

    @property
    def txn_id(self) -> int | None:
        return self.read_txn.txn_id


class Table:
    """One catalog table (or a link to one), opened by :func:`table`.

    The handle keeps the name and the metastore, not the data: each read resolves the
    catalog anew (a table moved by ``set-location`` is read where it now is), except
    inside :meth:`snapshot`. A handle may be shared by threads; a snapshot it holds
    applies to every read made through it until the ``with`` block ends.
    """

    def __init__(
        self,
        name: str,
        *,
        metastore: str | None = None,
        warehouse: str | None = None,
        namespace: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        """See :func:`table`."""
        self._config = StoreConfig.resolve(
            metastore=metastore, warehouse=warehouse, storage_options=storage_options
        )
        self._name = name
        self._namespace = namespace
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        _ref, tdef = self._load()
        self._full_name = tdef.full_name
        self._schema = _read_schema(tdef)

    # ------------------------------------------------------------------ catalog

    def _load(self) -> tuple[ReadRef, TableDef]:
        """The name resolved (namespaces, links) and the table's catalog entry.

        Raises:
            TableNotFoundError: no metastore, no such table or link, or a link whose
                target is gone.
        """
        from acidstream.snapshot_read import _metastore_exists
        from acidstream.txn.namespaces import resolve_read

        if not _metastore_exists(self._config):
            raise TableNotFoundError(
                f"table {self._name}: there is no metastore at {self._config.metastore_url}"
            )
        store = self._config.open(read_only=True)
        try:
            ref = resolve_read(store, self._name, namespace=self._namespace)
            return ref, store.get_table(ref.table.db, ref.table.table)
        finally:
            store.close()

    @property
    def name(self) -> str:
        """The table's ``db.table`` (for a link, its target's)."""
        return self._full_name

    @property
    def schema(self) -> pa.Schema:
        """The columns a full read returns: the table's (typed as declared), then its
        partition columns."""
        return self._schema

    def describe(self) -> TableDescription:
        """The table's definition as the catalog holds it now."""
        ref, t = self._load()
        link = ref.link
        return TableDescription(
            name=t.full_name,
            columns=tuple(t.columns),
            partition_keys=tuple(t.partition_keys),
            bucket_cols=tuple(t.bucket_cols),
            num_buckets=t.num_buckets,
            properties=MappingProxyType(dict(t.parameters)),
            location=t.location,
            skewed=t.skewed,
            is_link=link is not None,
            link=None if link is None else link.full_name,
            link_partitions=ref.partitions,
        )

    # ------------------------------------------------------------------ snapshots

    @contextmanager
    def snapshot(self) -> Iterator[Snapshot]:
        """Hold one snapshot: every read of this handle inside the block (``read``,
        ``scan``, ``spark``) sees it, whatever commits meanwhile. It is taken under a
        read txn (:class:`~acidstream.txn.read_txn.AcidReadTxn`, heartbeaten), so the
        Cleaner keeps the files it reads until the block ends and the txn commits.

        Raises:
            ConfigError: a snapshot of this handle is already held.
            TransactionError: the read txn was aborted meanwhile (a read or the end of
                the block says so: files of the snapshot may be gone).
        """
        from acidstream.txn.read_txn import AcidReadTxn

        with self._lock:
            if self._snapshot is not None:
                raise ConfigError(f"{self._full_name}: a snapshot of this handle is already held")
            held = AcidReadTxn(
                metastore=self._config.metastore_url,
                warehouse=self._config.warehouse,
                agent_info=f"{READ_AGENT}{self._full_name}",
            )
            held.__enter__()
            try:
                assert held.txns is not None
                ref, _ = self._load()
                store = self._config.open(read_only=True)
                try:
                    wids = store.get_valid_write_ids(ref.table.db, ref.table.table, held.txns)
                finally:
                    store.close()
            except BaseException:
                held.close()
                raise
            snap = Snapshot(held.txns, wids, held)
            self._snapshot = snap
        try:
            yield snap
        except BaseException as e:
            self._release()
            held.__exit__(type(e), e, e.__traceback__)  # logs its own failure: e is the one
            raise
        self._release()
        held.close()  # commits: the Cleaner may now remove the snapshot's files

    def _release(self) -> None:
        with self._lock:
            self._snapshot = None

    # ------------------------------------------------------------------ reads

    def _options(self, options: ReadOptions | None, **fields: Any) -> ReadOptions:
        """The read's options, its columns checked against the table's."""
        opts = ReadOptions.of(options, **fields)
        if opts.columns is not None:
            known = {n.lower() for n in self._schema.names}
            for c in opts.columns:
                if c.lower() not in known:
                    raise ConfigError(
                        f"unknown column {c!r} of {self._full_name}; its columns are "
                        f"{self._schema.names}"
                    )
        return opts

    def _scan(self, opts: ReadOptions) -> tuple[pa.Schema, Iterator[pa.Table]]:
        snap = self._snapshot
        snapshot: dict[str, Any] = {}
        if snap is not None:
            snap.read_txn.check()  # refuse to read files the Cleaner may have removed
            snapshot = {"write_ids": snap.write_ids, "txns": snap.txns}
        return scan_table(
            self._name,
            metastore=self._config.metastore_url,
            warehouse=self._config.warehouse,
            storage_options=self._config.storage_options,
            namespace=self._namespace,
            columns=opts.columns,
            filter=opts.filter,
            as_of_write_id=opts.as_of_write_id,
            include_row_id=opts.include_row_id,
            timestamp_unit=opts.timestamp_unit,
            **snapshot,
        )

    def read(
        self,
        columns: list[str] | tuple[str, ...] | None = None,
        filter: Filter | list[Any] | None = None,
        as_of_write_id: int | None = None,
        *,
        options: ReadOptions | None = None,
    ) -> pa.Table:
        """The table's rows in the snapshot (the held one, or the current one).

        Args:
            columns / filter / as_of_write_id: as in :class:`ReadOptions`.
            options: all of them at once (then none of the others).

        Raises:
            ConfigError: an unknown column, a bad filter, an ``as_of_write_id`` in the
                future.
            NotEnoughHistoryError: compaction has removed that version's files.
        """
        opts = self._options(options, columns=columns, filter=filter, as_of_write_id=as_of_write_id)
        schema, batches = self._scan(opts)
        return _concat(schema, batches)

    def scan(
        self,
        columns: list[str] | tuple[str, ...] | None = None,
        filter: Filter | list[Any] | None = None,
        as_of_write_id: int | None = None,
        *,
        options: ReadOptions | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """:meth:`read` as a stream of record batches: memory bounded by a few files'
        batches, not the table. Outside :meth:`snapshot`, the read txn is held until the
        iterator is exhausted or closed. Errors in the arguments are raised here, before
        the first batch."""
        opts = self._options(options, columns=columns, filter=filter, as_of_write_id=as_of_write_id)
        _schema, tables = self._scan(opts)
        return _record_batches(tables)

    def spark(
        self,
        spark_session: Any,
        columns: list[str] | tuple[str, ...] | None = None,
        filter: Filter | list[Any] | None = None,
        as_of_write_id: int | None = None,
        *,
        options: ReadOptions | None = None,
    ) -> Any:
        """A Spark DataFrame of the table through the ``acidtable`` source (registered
        with ``spark_session`` here). Inside :meth:`snapshot` it reads the held snapshot
        (the source takes its txn list, and no lease of its own); the DataFrame must then
        be evaluated inside the block. Runs on the driver.

        ``filter`` tuples become a Spark ``filter`` (the source pushes them down); an
        expression is refused (it is pyarrow's, not Spark's: filter the DataFrame).

        Raises:
            ConfigError: as :meth:`read`, or a ``pyarrow.compute`` filter.
        """
        from acidstream.sources.acid_table import register
        from acidstream.sources.acid_table_options import spark_storage_options

        opts = self._options(options, columns=columns, filter=filter, as_of_write_id=as_of_write_id)
        if opts.filter is not None and not isinstance(opts.filter, tuple):
            raise ConfigError(
                "Table.spark takes (column, op, value) filters; filter the DataFrame with "
                "Spark for anything else"
            )
        if opts.timestamp_unit != DEFAULT_TIMESTAMP_UNIT:
            raise ConfigError("Table.spark reads timestamps as Spark does (microseconds)")
        register(spark_session)
        o: dict[str, str] = {
            "metastore": self._config.metastore_url,
            "warehouse": self._config.warehouse,
            **spark_storage_options(self._config.storage_options),
        }
        if self._namespace is not None:
            o["namespace"] = self._namespace
        if self._snapshot is not None:
            self._snapshot.read_txn.check()
            o.update(self._snapshot.read_txn.options())
        if opts.columns is not None:
            # The source projects: the columns the filter needs are read too, then dropped.
            wanted = {c.lower() for c in opts.columns}
            extra = [str(p[0]) for p in opts.filter or () if str(p[0]).lower() not in wanted]
            o["columns"] = ",".join([*opts.columns, *dict.fromkeys(extra)])
        if opts.include_row_id:
            o["includeRowId"] = "true"
        if opts.as_of_write_id is not None:
            o["asOfWriteId"] = str(opts.as_of_write_id)
        df = spark_session.read.format("acidtable").options(**o).load(self._name)
        if opts.filter is not None:
            df = df.filter(_spark_condition(opts.filter))
            if opts.columns is not None:
                keep = [*([ROW_ID_COLUMN] if opts.include_row_id else []), *opts.columns]
                df = df.select(*keep)
        return df

    # ------------------------------------------------------------------ mutations

    def _mutate(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """Run a row-level mutation (``acidstream.mutation``) on a store of its own."""
        from acidstream.txn.namespaces import resolve_write

        store = self._config.open()
        try:
            name = resolve_write(store, self._name, namespace=self._namespace, action="mutate")
            return fn(store, name, *args, **kwargs)
        finally:
            store.close()

    def delete(
        self,
        where: Expr | None,
        *,
        retries: int = 0,
        idempotency_key: str | None = None,
    ) -> MutationResult:
        """``DELETE FROM t WHERE where``: one txn, one write id, delete events in
        ``delete_delta_W_W_0000`` (``docs/mutations.md``).

        Args:
            where: SQL text in Hive's syntax, or a ``pyarrow.compute`` expression, over the
                table's columns (partition columns are strings); ``None`` deletes every row.
            retries: on a commit conflict (another mutation of a partition committed first),
                start over this many times with a new snapshot.
            idempotency_key: stored with the commit; a repeat returns the first result.

        Raises:
            ConfigError: unknown columns, a type error (before any txn).
            CommitConflictError: a concurrent mutation won and ``retries`` are used up.
            LinkReadOnlyError: the handle names a link.
        """
        from acidstream.mutation import delete_rows

        return self._mutate(delete_rows, where, retries=retries, idempotency_key=idempotency_key)

    def update(
        self,
        set: Mapping[str, Expr],
        where: Expr | None = None,
        *,
        retries: int = 0,
        idempotency_key: str | None = None,
    ) -> MutationResult:
        """``UPDATE t SET col = value, ... [WHERE where]`` (split-update: delete events in
        ``delete_delta_W_W_0000``, new versions in ``delta_W_W_0000``). Updating a
        partition column moves the row; a bucketing column re-buckets it.

        Args:
            set: column -> SQL text or ``pyarrow`` expression over the row's columns.
            where / retries / idempotency_key: as :meth:`delete`.

        Raises:
            ConfigError, CommitConflictError, LinkReadOnlyError: as :meth:`delete`.
        """
        from acidstream.mutation import update_rows

        return self._mutate(
            update_rows, set, where, retries=retries, idempotency_key=idempotency_key
        )

    def merge(
        self,
        source: Any,
        *,
        on: Sequence[str] | str,
        source_alias: str = "src",
        target_alias: str = "tgt",
    ) -> MergeBuilder:
        """``MERGE INTO t USING source ON keys``: a builder; add WHEN clauses and
        ``execute()`` (:class:`~acidstream.merge_builder.MergeBuilder`).

        Raises:
            ConfigError: a source of another kind (pyarrow, pandas, Spark DataFrame).
        """
        from acidstream.merge_builder import MergeBuilder
        from acidstream.mutation import merge_rows

        def run(
            spec: Any, *, engine: Callable[..., MergeResult] = merge_rows, **kw: Any
        ) -> MergeResult:
            return self._mutate(engine, spec, **kw)

        return MergeBuilder(
            run, source, on=on, source_alias=source_alias, target_alias=target_alias
        )

    def upsert(
        self,
        source: Any,
        *,
        key: Sequence[str] | None = None,
        ordering: str | None = None,
        ordering_guard: bool = False,
        delete_when: Expr | None = None,
        retries: int = 3,
    ) -> ChangeResult:
        """Upsert rows by key in one txn: each key of ``source`` (pyarrow or pandas) keeps
        its last row (by ``ordering``, then position), and is updated if the table holds
        it, inserted if not, or deleted when ``delete_when`` holds (``docs/cdc.md``).
        Upserts of one table take turns (an EXCL_WRITE lock): two never insert one key.

        Args:
            key: the key columns; default: the table property ``acidstream.key``.
            ordering: a column whose greater value is the newer version; default: the
                table property ``acidstream.ordering`` (when ``key`` is not given).
            ordering_guard: leave a row alone when the table's version is newer.
            delete_when: SQL text or a pyarrow expression over the source's columns.
            retries: write conflicts with concurrent updates survived (keys found anew).

        Raises:
            ConfigError: no key, a column missing, a NULL key (nothing written).
            CommitConflictError: conflicts outlived ``retries``.
        """
        from acidstream.mutation.api import upsert_rows

        return self._mutate(
            upsert_rows, source, key=key, ordering=ordering, ordering_guard=ordering_guard,
            delete_when=delete_when, retries=retries,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"Table({self._name!r}, metastore={self._config.metastore_url!r})"


def _concat(schema: pa.Schema, batches: Iterator[pa.Table | pa.RecordBatch]) -> pa.Table:
    tables = [pa.table(b) if isinstance(b, pa.RecordBatch) else b for b in batches]
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _record_batches(tables: Iterator[pa.Table | pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    try:
        for t in tables:
            if isinstance(t, pa.RecordBatch):
                yield t
            else:
                yield from t.to_batches()
    finally:
        close = getattr(tables, "close", None)
        if close is not None:
            close()  # ends the read txn of a read outside a snapshot


def _read_schema(t: TableDef) -> pa.Schema:
    """What a full read of ``t`` returns: the plan of an empty read."""
    from acidstream.acid.read_plan import build_plan

    return build_plan(
        None,
        schema=t.schema,
        partition_names=tuple(k.lower() for k in t.partition_names),
        columns=None,
        include_row_id=False,
        filter=None,
        timestamp_unit=DEFAULT_TIMESTAMP_UNIT,
    ).schema()


def _spark_condition(preds: tuple[Any, ...]) -> Any:
    """``(column, op, value)`` predicates (validated by ``ReadOptions``) as one Spark
    condition, their AND; the ``acidtable`` source pushes these back down."""
    from pyspark.sql import functions as F

    from acidstream.acid.read_plan import combine_predicates

    return combine_predicates(
        preds, F.col, is_null=lambda c: c.isNull(), is_valid=lambda c: c.isNotNull()
    )


def table(
    name: str,
    *,
    metastore: str | None = None,
    warehouse: str | None = None,
    namespace: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Table:
    """Open the catalog table ``name`` (``db.table``, ``table``, or a link ``T1@B``).

    Args:
        name: the table, as ``acidstream read`` names it (``acidstream.txn.namespaces``).
        metastore / warehouse: as for the rest of the project (arguments > environment).
        namespace: the client's namespace binding (namespace mode).
        storage_options: the warehouse filesystem's options (for S3: ``endpoint_url``,
            ``key``, ``secret``, ``client_kwargs={"region_name": ...}``); without them
            s3fs reads the standard AWS environment.

    Raises:
        TableNotFoundError: no metastore, or no such table or link.
        NamespaceError: ``name`` is outside the client's namespace.
        ConfigError: a malformed name.
    """
    return Table(
        name,
        metastore=metastore,
        warehouse=warehouse,
        namespace=namespace,
        storage_options=storage_options,
    )


def read_table(
    name_or_path: str,
    *,
    metastore: str | None = None,
    warehouse: str | None = None,
    namespace: str | None = None,
    columns: list[str] | tuple[str, ...] | None = None,
    filter: Filter | list[Any] | None = None,
    as_of_write_id: int | None = None,
    include_row_id: bool = False,
    timestamp_unit: TimestampUnit = DEFAULT_TIMESTAMP_UNIT,
    write_ids: ValidWriteIdList | str | None = None,
    txns: ValidTxnList | str | None = None,
    options: ReadOptions | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> pa.Table:
    """Read a table (``db.table``, or a link), a partition or a path with the snapshot a
    Hive reader would take: for a name, or a path the catalog registered, the metastore's
    current one, under a read txn for the read's duration; for any other path none (a
    :class:`~acidstream.snapshot_read.NoSnapshotWarning` says so).

    Args:
        name_or_path: a table name, or a table or partition directory (or one ACID file).
        metastore / warehouse / namespace / storage_options: as for :func:`table`.
        columns / filter / as_of_write_id / include_row_id / timestamp_unit: as in
            :class:`ReadOptions`; or ``options``, all at once.
        write_ids / txns: an explicit snapshot (the table's ``ValidWriteIdList`` and the
            ``ValidTxnList``, or their strings) instead of the metastore's.

    Raises:
        TableNotFoundError: no such table, partition or path.
        ConfigError: an unknown column, a bad filter, another table's write ids...
    """
    opts = ReadOptions.of(
        options,
        columns=columns,
        filter=filter,
        as_of_write_id=as_of_write_id,
        include_row_id=include_row_id,
        timestamp_unit=timestamp_unit,
    )
    schema, batches = scan_table(
        name_or_path,
        metastore=metastore,
        warehouse=warehouse,
        storage_options=storage_options,
        namespace=namespace,
        write_ids=write_ids,
        txns=txns,
        columns=opts.columns,
        filter=opts.filter,
        as_of_write_id=opts.as_of_write_id,
        include_row_id=opts.include_row_id,
        timestamp_unit=opts.timestamp_unit,
    )
    return _concat(schema, batches)
