"""Snapshot reads by table name or path, with the snapshot a Hive reader would take.

``acidstream.acid.reader.read_path(path)`` reads files with whatever snapshot it is given, and
"everything valid" without one: after an abort or a ``kill -9``, aborted and uncommitted
rows then show. This module gives the user-facing read (``acidstream.read_table`` and
``acidstream read``) the right snapshot: for a ``db.table`` name, and for a path that is a
registered table or partition location, the snapshot comes from the metastore; for any
other path a one-line :class:`NoSnapshotWarning` says that no snapshot was given.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from acidstream.acid.errors import AcidStreamError, ConfigError, TableNotFoundError
from acidstream.acid.list_bucketing import SkewedInfo
from acidstream.acid.partitions import PartitionValues
from acidstream.acid.schema import TableSchema
from acidstream.acid.snapshot import ValidTxnList, ValidWriteIdList
from acidstream.acid.storage import Storage
from acidstream.acid.table_name import DEFAULT_DB, NAME_LOOKUP_PATTERN
from acidstream.txn.config import StoreConfig
from acidstream.txn.namespaces import check_table_namespace, resolve_read, scan_read

if TYPE_CHECKING:
    from acidstream.acid.reader import Scan
    from acidstream.txn.catalog import TableDef
    from acidstream.txn.read_txn import AcidReadTxn

__all__ = [
    "NoSnapshotWarning",
    "ReadTarget",
    "find_registered",
    "iter_table_batches",
    "resolve",
    "scan_location",
    "scan_table",
]

log = logging.getLogger(__name__)

READ_AGENT = "acidstream-read "
"""What the read txn of a Python or CLI read shows in ``show_txns`` (after the lease prefix)."""

# The lookup syntax of txn.namespaces (acid.table_name): a leading digit is a name too.
_W = NAME_LOOKUP_PATTERN
_TABLE_NAME = re.compile(rf"^(?:{_W}\.)?{_W}(?:@{_W})?$")


class NoSnapshotWarning(UserWarning):
    """A read of a path no metastore knows: every write id counts as committed."""


@dataclass(frozen=True)
class ReadTarget:
    """What to read and with which snapshot."""

    path: str
    source: str  # "table db.t", "partition db.t/ds=1" or "path"
    schema: TableSchema | None = None
    partition_keys: tuple[str, ...] = ()
    write_ids: ValidWriteIdList | str | None = None
    txns: ValidTxnList | str | None = None
    partitions: frozenset[str] | None = None  # through a static link: the ones it exposes
    # Each partition's list bucketing, by partition values (() when unpartitioned).
    skews: Mapping[PartitionValues, SkewedInfo] = field(default_factory=dict)
    # The read txn taken before the snapshot (``lease=True``): close it when the read ends.
    lease: AcidReadTxn | None = field(default=None, compare=False)

    @property
    def has_snapshot(self) -> bool:
        return self.write_ids is not None


def _metastore_exists(cfg: StoreConfig) -> bool:
    url = cfg.metastore_url
    if url.startswith("sqlite:///"):
        return os.path.exists(url[len("sqlite:///") :])
    return True


def resolve(
    name_or_path: str,
    *,
    metastore: str | None = None,
    warehouse: str | None = None,
    write_ids: ValidWriteIdList | str | None = None,
    txns: ValidTxnList | str | None = None,
    namespace: str | None = None,
    lease: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> ReadTarget:
    """Where a name or path is, and the snapshot to read it with.

    Explicit ``write_ids``/``txns`` win. Otherwise a table name, or a path that is a
    registered table or partition location, gets the metastore's current snapshot; any
    other path gets none. Names follow ``acidstream.txn.namespaces`` (``namespace``: the client's
    binding; a link ``T1@B`` reads its target with the same snapshot as a direct read,
    restricted to the link's partitions).

    ``lease``: take that snapshot under a read txn (Hive's readers hold one), so the
    Cleaner keeps the files the snapshot reads until :attr:`ReadTarget.lease` is closed.
    Only where the metastore can take it: a read-only metastore, or one at an older schema
    version (a read does not migrate it), is read without, as is an explicit snapshot.
    ``storage_options``: the warehouse filesystem's (endpoint, credentials).
    """
    cfg = StoreConfig.resolve(
        metastore=metastore, warehouse=warehouse, storage_options=storage_options
    )
    is_path = "://" in name_or_path or os.path.exists(name_or_path)
    if not is_path and not _TABLE_NAME.match(name_or_path):
        raise TableNotFoundError(f"{name_or_path}: no such table, partition or file")
    if not _metastore_exists(cfg):
        if not is_path:
            raise TableNotFoundError(
                f"{name_or_path!r} is not a path, and there is no metastore at "
                f"{cfg.metastore_url} to look it up"
            )
        return ReadTarget(name_or_path, "path", write_ids=write_ids, txns=txns)
    store = cfg.open(read_only=True)
    link_parts: frozenset[str] | None = None
    link_source: str | None = None
    try:
        partition: str | None = None
        registered: str | None = None
        if is_path:
            found = find_registered(store, name_or_path)
            if found is None:
                return ReadTarget(name_or_path, "path", write_ids=write_ids, txns=txns)
            table, partition, registered = found
            check_table_namespace(store, table.db, namespace=namespace)
        else:
            ref = resolve_read(store, name_or_path, namespace=namespace)
            table = store.get_table(ref.table.db, ref.table.table)
            link_parts, link_source = ref.partitions, ref.source
        if write_ids is not None:
            _check_snapshot_table(write_ids, table.full_name)
        skews = _skews(store, table)
        held: AcidReadTxn | None = None
        if write_ids is None:
            if txns is None and lease:
                held = _open_lease(cfg, store, table.full_name)
            if held is not None and held.txns is not None:
                snapshot_txns = held.txns
            elif txns is not None:
                snapshot_txns = ValidTxnList.from_string(txns) if isinstance(txns, str) else txns
            else:
                snapshot_txns = store.get_valid_txns()
            try:
                write_ids = store.get_valid_write_ids(table.db, table.name, snapshot_txns)
            except BaseException:
                if held is not None:
                    held.close()
                raise
            if txns is None:
                txns = snapshot_txns
    finally:
        store.close()
    if table.location is None:
        if held is not None:
            held.close()
        raise TableNotFoundError(f"table {table.full_name} has no location")
    # An alias (symlink, file:// URL, '..') is read at the registered location itself, so
    # the partition values come from the real directory names.
    path = registered if registered is not None else table.location
    source = f"partition {table.full_name}/{partition}" if partition else f"table {table.full_name}"
    source = link_source or source
    return ReadTarget(
        path,
        source,
        schema=TableSchema.of(list(table.columns)),
        partition_keys=tuple(k.lower() for k, _ in table.partition_keys),
        write_ids=write_ids,
        txns=txns,
        partitions=link_parts,
        skews=skews,
        lease=held,
    )


def _local_real(location: str | None) -> str | None:
    """The real path (symlinks resolved, ``..`` folded) of a local location, a path or a
    ``file://`` URL; ``None`` for a remote URL or a relative location (an old store's,
    which names no one directory)."""
    if not location:
        return None
    if "://" in location:
        storage, path = Storage.for_path(location)
        local = storage.local_path(path)
        if local is None:
            return None
        path = local
    elif not location.startswith("/"):
        return None
    else:
        path = location
    return os.path.realpath(path)


def find_registered(store: Any, name_or_path: str) -> tuple[TableDef, str | None, str] | None:
    """The table, or the partition of a table, whose registered location ``name_or_path``
    names, however it is spelt: ``(table, partition name or None, registered location)``,
    or ``None`` for a path no table owns.

    The catalog stores locations as given (absolute paths, ``file://`` or remote URLs), so
    a symlink to a table directory, its ``file://`` URL, a path with ``..`` or a trailing
    slash, or a real path under a symlinked warehouse would miss an exact look-up and be
    read without a snapshot (aborted rows showing). Local paths are therefore compared as
    real paths: the exact forms first (one indexed look-up each), then every table's
    location, and a partition by its name below its table's real directory.
    """
    storage, path = store.storage(name_or_path)
    local = storage.local_path(path)
    if local is None:
        found = store.find_location(name_or_path)
        return None if found is None else (found[0], found[1], name_or_path.rstrip("/"))
    real = os.path.realpath(local)
    for candidate in dict.fromkeys((path, real)):
        found = store.find_location(candidate)
        if found is not None:
            return found[0], found[1], candidate
    for t in store.list_tables():
        loc = _local_real(t.location)
        if loc is None:
            continue
        if real == loc:
            return store.get_table(t.db, t.name), None, t.location
        if t.partition_keys and real.startswith(loc.rstrip("/") + "/"):
            name = real[len(loc.rstrip("/")) + 1 :]
            part = store.get_partitions(t.db, t.name, [name]).get(name)
            if part is not None and _local_real(part.location) == real:
                return store.get_table(t.db, t.name), name, part.location
    return None


def _check_snapshot_table(write_ids: ValidWriteIdList | str, table: str) -> None:
    """Refuse an explicit write-id list of another table: its write ids number that
    table's writes, and would select arbitrary ones of ``table``.

    Raises:
        ConfigError: naming both tables.
    """
    wids = ValidWriteIdList.from_string(write_ids) if isinstance(write_ids, str) else write_ids
    if wids.table_name is None:  # Hive's "null": a list that names no table
        return
    named = wids.table_name.strip().lower()
    if "." not in named:
        named = f"{DEFAULT_DB}.{named}"
    if named != table:
        raise ConfigError(
            f"the write ids given are table {named}'s, but the read is of table {table}: "
            f"give {table}'s write-id list (or none, for the metastore's snapshot)"
        )


def _open_lease(cfg: StoreConfig, store: Any, table: str) -> AcidReadTxn | None:
    """A read txn for a snapshot read of ``table``, or None (said in the log) where the
    metastore cannot take one."""
    from acidstream.txn.migrations import SCHEMA_VERSION
    from acidstream.txn.read_txn import AcidReadTxn

    if store.schema_version != SCHEMA_VERSION:
        log.info("reading %s without a read txn: the metastore's schema is older", table)
        return None
    held = AcidReadTxn(
        metastore=cfg.metastore_url, warehouse=cfg.warehouse, agent_info=f"{READ_AGENT}{table}"
    )
    try:
        held.__enter__()
    except (AcidStreamError, OSError) as e:  # e.g. a metastore on read-only media
        log.warning(
            "reading %s without a read txn (the Cleaner may remove files it reads): %s", table, e
        )
        return None
    return held


def leased(batches: Iterable[pa.Table], lease: AcidReadTxn | None) -> Iterator[pa.Table]:
    """``batches``, with the read txn closed when they end (exhausted, failed or dropped)."""
    try:
        yield from batches
    finally:
        if lease is not None:
            lease.close()


def _skews(store: Any, table: Any) -> dict[PartitionValues, SkewedInfo]:
    """Each partition's own list bucketing (a partition keeps the definition it was
    created with), for the reader to prune list-bucketing directories with."""
    from acidstream.acid.list_bucketing_prune import partition_skews

    parts = store.list_partitions(table.db, table.name) if table.partition_keys else ()
    return partition_skews(table.partition_names, parts, table.skewed)


def _warn_if_no_snapshot(target: ReadTarget) -> None:
    if not target.has_snapshot:
        warnings.warn(
            f"{target.path}: no snapshot given and no metastore knows this path: every "
            "write id is read as committed (aborted or uncommitted rows may show)",
            NoSnapshotWarning,
            stacklevel=3,
        )


def scan_table(
    name_or_path: str,
    *,
    metastore: str | None = None,
    warehouse: str | None = None,
    write_ids: ValidWriteIdList | str | None = None,
    txns: ValidTxnList | str | None = None,
    columns: Sequence[str] | None = None,
    include_row_id: bool = False,
    namespace: str | None = None,
    as_of_write_id: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[pa.Schema, Iterator[pa.Table]]:
    """The output schema and the batches of a snapshot read (``acidstream.read_table``):
    ``kwargs`` are :func:`acidstream.acid.reader.read_path`'s (``filter``, ``timestamp_unit``...).
    A catalog table nothing was written to yet (no directory) reads as zero rows.
    ``as_of_write_id``: the snapshot as it was when that was the table's last write id.
    ``storage_options``: the warehouse filesystem's (endpoint, credentials).

    Raises:
        ConfigError: an ``as_of_write_id`` beyond the snapshot's last write id.
    """
    t = resolve(
        name_or_path, metastore=metastore, warehouse=warehouse, write_ids=write_ids, txns=txns,
        namespace=namespace, lease=True, storage_options=storage_options,
    )  # fmt: skip
    try:
        _warn_if_no_snapshot(t)
        if as_of_write_id is not None:
            t = dataclasses.replace(t, write_ids=_capped(t, as_of_write_id))
        if t.skews:
            kwargs.setdefault("skews", t.skews)
        if t.schema is not None:
            kwargs.setdefault("schema", t.schema)
        s = scan_location(t.path, partitions=t.partitions, partition_keys=t.partition_keys,
                          write_ids=t.write_ids, txns=t.txns, columns=columns,
                          include_row_id=include_row_id, storage_options=storage_options,
                          **kwargs)  # fmt: skip
    except BaseException:
        if t.lease is not None:
            t.lease.close()
        raise
    return s.schema, leased(s.batches, t.lease)


def _capped(t: ReadTarget, as_of_write_id: int) -> ValidWriteIdList:
    """``t``'s write ids as they were when ``as_of_write_id`` was the last (time travel);
    a path no metastore knows has every write id valid, so any is in its past."""
    wids = t.write_ids
    if wids is None:
        return ValidWriteIdList().capped(as_of_write_id)
    if isinstance(wids, str):
        wids = ValidWriteIdList.from_string(wids)
    if as_of_write_id > wids.high_watermark:
        raise ConfigError(
            f"as_of_write_id {as_of_write_id} is in the future for {t.source} "
            f"(its highest write id is {wids.high_watermark})"
        )
    return wids.capped(as_of_write_id)


def iter_table_batches(name_or_path: str, **kwargs: Any) -> Iterator[pa.Table]:
    """The batches of :func:`scan_table` (memory bounded by a batch, not the table); the
    same keyword arguments. ``acidstream.read_table`` and ``Table.read``/``scan`` are the
    typed reads built on it."""
    _schema, batches = scan_table(name_or_path, **kwargs)
    yield from batches


def scan_location(
    path: str,
    *,
    partitions: frozenset[str] | None = None,
    partition_keys: tuple[str, ...] = (),
    storage_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Scan:
    """The scan of a catalog table's location (or a path), the one way every by-name read
    (``acidstream.read_table``, ``acidstream read``, ``run-kafka``'s summary) reads: ``partition_keys``
    (the catalog's) are columns of the result whether or not a partition directory exists,
    and a location not created yet (nothing written) reads as zero rows with the catalog's
    columns when ``schema`` is given. ``partitions``, ``kwargs``: those of
    :func:`acidstream.txn.namespaces.scan_read`. ``storage_options``: the filesystem's
    (endpoint, credentials), used unless ``kwargs`` bring a ``storage``.

    Raises:
        TableNotFoundError: ``path`` does not exist and no ``schema`` says what it holds.
    """
    from acidstream.acid.read_plan import build_plan
    from acidstream.acid.reader import Scan

    if kwargs.get("storage") is None:
        storage, p = Storage.for_path(path, storage_options=storage_options)
        # The read opens this storage, not one of its own without the options: the path
        # is then the storage's (no scheme).
        kwargs["storage"], path = storage, p
    else:
        storage, p = kwargs["storage"], path
    if kwargs.get("schema") is not None and not storage.exists(p):
        plan = build_plan(
            None,
            schema=kwargs["schema"],
            partition_names=partition_keys,
            columns=kwargs.get("columns"),
            include_row_id=kwargs.get("include_row_id", False),
            filter=None,
            timestamp_unit=kwargs.get("timestamp_unit", "us"),
        )
        return Scan(plan.schema(), iter(()))
    return scan_read(path, partitions=partitions, partition_keys=partition_keys, **kwargs)
