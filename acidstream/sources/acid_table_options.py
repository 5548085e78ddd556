"""Options of the ``acidtable`` Spark source, parsed once from Spark's option strings.

Kept apart from :mod:`acidstream.sources.acid_table` so the option surface (names, defaults, checks)
reads in one place. Everything here is a frozen dataclass of plain values: it is pickled
with the reader to Python workers and executors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from acidstream.acid.errors import ConfigError
from acidstream.txn.storage_options import StorageOptions

__all__ = [
    "EARLIEST",
    "LATEST",
    "SHORT_NAME",
    "STORAGE_PREFIX",
    "AcidTableOptions",
    "spark_storage_options",
]

SHORT_NAME = "acidtable"

STORAGE_PREFIX = "storage."
"""Spark options ``storage.<name>`` are the warehouse filesystem's options
(``storage.endpoint_url``, ``storage.client_kwargs.region_name``...)."""

EARLIEST = "earliest"
LATEST = "latest"

# Option keys as users spell them; matching is case-insensitive, as Spark's is.
_KEYS = {
    "path": "table",
    "table": "table",
    "metastore": "metastore",
    "warehouse": "warehouse",
    "columns": "columns",
    "includerowid": "include_row_id",
    "asofwriteid": "as_of_write_id",
    "asoftxn": "as_of_txn",
    "readtxnid": "read_txn_id",
    "validtxns": "valid_txns",
    "validwriteids": "valid_write_ids",
    "tablecolumns": "table_columns",
    "partitioncolumns": "partition_columns",
    "maxpartitionbytes": "max_partition_bytes",
    "parallelism": "parallelism",
    "filterpushdown": "filter_pushdown",
    "leaseheartbeatseconds": "lease_heartbeat_s",
    "startingwriteid": "starting_write_id",
    "maxwriteidspertrigger": "max_write_ids_per_trigger",
    "ondeletes": "on_deletes",
    "namespace": "namespace",
}

_INT_FIELDS = {
    "as_of_write_id",
    "as_of_txn",
    "read_txn_id",
    "max_partition_bytes",
    "parallelism",
    "max_write_ids_per_trigger",
}


def _bool(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise ConfigError(f"option {key!r} must be true or false, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class AcidTableOptions:
    """The parsed options of one ``acidtable`` read.

    Attributes:
        table: ``db.table`` (read through the metastore) or a table directory (a path with
            ``/`` or a URL: read without a metastore, Hive-written layouts included).
        metastore / warehouse: the metastore URL and warehouse root (arguments >
            ``ACIDSTREAM_METASTORE`` / ``ACIDSTREAM_WAREHOUSE`` > defaults, resolved on the
            driver by ``acidstream.txn.config.StoreConfig``).
        columns: the table and partition columns to return (default all, table order).
        include_row_id: add Hive's ``row__id`` struct<writeid,bucketid,rowid> first.
        as_of_write_id: time travel: the table as it was when this write id was the last one.
        as_of_txn: time travel: the table as a reader that began just after txn ``N`` saw it.
        read_txn_id / valid_txns: a reader txn the caller holds open (``AcidReadTxn``) and
            its snapshot; the source then opens no lease txn of its own.
        valid_write_ids: path mode only: the table's ``ValidWriteIdList`` string.
        table_columns / partition_columns: path mode only: Hive DDL of the columns
            (``"id int, name string"``); default: the columns of a data file, and
            partition columns as strings.
        max_partition_bytes: an input partition reads at most about this many bytes of data
            files; bigger (partition, bucket) groups are split by file, big files by stripe.
        parallelism: the number of input partitions to aim for at least (Spark's
            ``bytesPerCore`` rule); default the driver host's CPU count.
        filter_pushdown: give Spark a reader with ``pushFilters`` (needs
            ``spark.sql.python.filterPushdown.enabled=true`` too, else Spark refuses it).
        lease_heartbeat_s: executors heartbeat the lease txn this often while reading.
        starting_write_id: streaming: ``earliest``, ``latest`` or a write id; rows of write
            ids above it are emitted.
        max_write_ids_per_trigger: streaming: at most this many write ids per micro-batch.
        on_deletes: streaming: ``fail`` (default) or ``ignore`` delete events (Hive updates
            are a delete plus an insert; ``ignore`` emits the inserts only).
        namespace: the reader's namespace binding (``docs/namespaces.md``): ``table`` may
            then be ``T`` or a link ``T1@B`` held by the namespace.
        storage_options: the warehouse filesystem's options (``storage.<name>`` Spark
            options: endpoint, credentials), pickled to the executors that read the files;
            printed masked.
    """

    table: str
    metastore: str | None = None
    warehouse: str | None = None
    columns: tuple[str, ...] | None = None
    include_row_id: bool = False
    as_of_write_id: int | None = None
    as_of_txn: int | None = None
    read_txn_id: int | None = None
    valid_txns: str | None = None
    valid_write_ids: str | None = None
    table_columns: str | None = None
    partition_columns: str | None = None
    max_partition_bytes: int = 128 * 1024 * 1024
    parallelism: int | None = None
    filter_pushdown: bool = False
    lease_heartbeat_s: float = 60.0
    starting_write_id: str = EARLIEST
    max_write_ids_per_trigger: int | None = None
    on_deletes: str = "fail"
    namespace: str | None = None
    storage_options: StorageOptions = field(default_factory=StorageOptions)

    def __post_init__(self) -> None:
        if not self.table:
            raise ConfigError(f"{SHORT_NAME}: give the table: load('db.table') or a path")
        if self.as_of_write_id is not None and self.as_of_txn is not None:
            raise ConfigError("asOfWriteId and asOfTxn cannot be used together")
        if self.as_of_txn is not None and self.read_txn_id is not None:
            raise ConfigError("asOfTxn and readTxnId cannot be used together")
        if self.max_partition_bytes < 1:
            raise ConfigError("maxPartitionBytes must be >= 1")
        if self.parallelism is not None and self.parallelism < 1:
            raise ConfigError("parallelism must be >= 1")
        if self.max_write_ids_per_trigger is not None and self.max_write_ids_per_trigger < 1:
            raise ConfigError("maxWriteIdsPerTrigger must be >= 1")
        if self.on_deletes not in ("fail", "ignore"):
            raise ConfigError(f"onDeletes must be fail or ignore, got {self.on_deletes!r}")
        s = self.starting_write_id
        if s not in (EARLIEST, LATEST) and not s.lstrip("-").isdigit():
            raise ConfigError(f"startingWriteId must be earliest, latest or a number, got {s!r}")
        if self.is_path and (self.as_of_txn is not None or self.read_txn_id is not None):
            raise ConfigError("asOfTxn and readTxnId need a metastore table (db.table), not a path")

    @property
    def is_path(self) -> bool:
        """Whether ``table`` names a directory rather than a metastore table."""
        return "/" in self.table or "://" in self.table

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> AcidTableOptions:
        """Parse Spark's option strings (unknown keys are refused, naming the known ones)."""
        kw: dict[str, object] = {}
        pairs: list[str] = []
        for key, value in options.items():
            if key.lower().startswith(STORAGE_PREFIX):
                pairs.append(f"{key[len(STORAGE_PREFIX) :]}={value}")
                continue
            name = _KEYS.get(key.lower())
            if name is None:
                raise ConfigError(f"unknown {SHORT_NAME} option {key!r} (known: {sorted(_KEYS)})")
            if name in _INT_FIELDS:
                try:
                    kw[name] = int(value)
                except ValueError as e:
                    raise ConfigError(f"option {key!r} must be an integer, got {value!r}") from e
            elif name in ("include_row_id", "filter_pushdown"):
                kw[name] = _bool(key, value)
            elif name == "lease_heartbeat_s":
                try:
                    kw[name] = float(value)
                except ValueError as e:
                    raise ConfigError(f"option {key!r} must be a number, got {value!r}") from e
            elif name == "columns":
                cols = tuple(c.strip() for c in value.split(",") if c.strip())
                kw[name] = cols or None
            elif name == "starting_write_id":
                kw[name] = value.strip().lower()
            else:
                kw[name] = value
        if "table" not in kw:
            raise ConfigError(f"{SHORT_NAME}: give the table: load('db.table') or a path")
        if pairs:
            kw["storage_options"] = StorageOptions.from_pairs(pairs, where="storage.<name>")
        return cls(**kw)  # type: ignore[arg-type]


def spark_storage_options(options: Mapping[str, Any]) -> dict[str, str]:
    """Storage options as ``acidtable`` Spark options (``storage.<name>``, nested names
    dotted, values as text that :meth:`AcidTableOptions.parse` types back)."""
    out: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        elif isinstance(value, bool):
            out[STORAGE_PREFIX + prefix] = "true" if value else "false"
        else:
            out[STORAGE_PREFIX + prefix] = "null" if value is None else str(value)

    walk("", dict(options))
    return out
