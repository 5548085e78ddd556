"""The table catalog model: databases, tables and partitions, validated as Hive validates them.

These are plain records; the store persists them. Validation follows Hive's
``TransactionalValidationListener`` (spec §1.5): a transactional table is
managed, stored as ORC (unless insert-only) and not sorted, and its
``transactional_properties`` is ``default`` or ``insert_only`` (missing means
``default``). Partition names use Hive's ``FileUtils.makePartName`` with
``escapePathName`` (spec §8).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from acidstream.acid.bucket_codec import MAX_BUCKET_ID
from acidstream.acid.durability import check_durability_property
from acidstream.acid.errors import ConfigError
from acidstream.acid.list_bucketing import (
    DEFAULT_DIR_NAME,
    SkewedInfo,
    check_skewed_info,
    declared_value_text,
)
from acidstream.acid.orc_options import OrcWriterOptions, check_orc_keys
from acidstream.acid.partition_name import (
    make_partition_name,
)
from acidstream.acid.schema import HiveType, TableSchema, parse_hive_type
from acidstream.acid.table_name import DEFAULT_DB, check_new_name
from acidstream.txn.table_key import check_key_properties

__all__ = [
    "MAX_BUCKETS",
    "ORC_INPUT_FORMAT",
    "ORC_OUTPUT_FORMAT",
    "ORC_SERDE",
    "DatabaseDef",
    "PartitionInfo",
    "TableDef",
    "absolute_location",
    "check_partition_skew",
    "default_table_location",
    "is_absolute_location",
    "validate_table",
]

ORC_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
MANAGED_TABLE = "MANAGED_TABLE"
EXTERNAL_TABLE = "EXTERNAL_TABLE"
TRANSACTIONAL = "transactional"
TRANSACTIONAL_PROPERTIES = "transactional_properties"
BUCKETING_VERSION = "bucketing_version"
BOOLEAN_PROPERTIES = ("no_auto_compaction", "no_cleanup")
"""Flags the compactor reads (keys case-insensitive, as Hive's): ``true`` or ``false``. A
value like ``ture`` would otherwise read as false and compact or clean a table its owner
meant to keep untouched."""

MAX_BUCKETS = MAX_BUCKET_ID + 1
"""The most buckets a table may have: every ACID event carries its bucket id in the 12
bits of Hive's ``BucketCodec`` V1 (ids 0 to 4095)."""


def absolute_location(location: str) -> str:
    """A warehouse, table or partition location as it is stored: an absolute path, or a URL
    with a scheme (``file://``, ``hdfs://``...).

    A relative path is resolved against the current directory once, here, when the store
    or the table is configured, so what is stored never depends on a later process's cwd.
    """
    if "://" in location:
        return location.rstrip("/")
    return os.path.abspath(location)


def is_absolute_location(location: str) -> bool:
    """Whether a stored location names one directory whatever the reader's cwd."""
    return "://" in location or location.startswith("/")


def _join(root: str, *names: str) -> str:
    return "/".join([root.rstrip("/"), *names])


def default_table_location(warehouse: str, db: str, table: str) -> str:
    """Where Hive puts a managed table: ``<warehouse>/<db>.db/<table>``, or
    ``<warehouse>/<table>`` for the ``default`` database."""
    if db == DEFAULT_DB:
        return _join(warehouse, table)
    return _join(warehouse, f"{db}.db", table)


@dataclass(frozen=True)
class DatabaseDef:
    """A database: a name and the directory its tables default under."""

    name: str
    location: str | None = None
    description: str = ""
    owner: str = ""


@dataclass(frozen=True)
class TableDef:
    """A table as the catalog stores it.

    Attributes:
        db: Database name (lower-cased).
        name: Table name (lower-cased).
        columns: ``(name, hive type)`` pairs in table order.
        partition_keys: ``(name, hive type)`` pairs of the partition columns.
        bucket_cols: Bucketing columns (must be table columns).
        num_buckets: Number of buckets; ``-1`` when not bucketed (Hive's convention).
        sort_cols: ``(column, order)`` pairs (1 ascending, 0 descending); transactional
            tables must have none.
        parameters: Table properties (``transactional``, ``bucketing_version``...).
        location: Table directory; ``None`` lets the store default it under the warehouse.
        table_type: ``MANAGED_TABLE`` or ``EXTERNAL_TABLE``.
        input_format: Hive input format class.
        output_format: Hive output format class.
        serde: SerDe class.
        owner: Owner shown by catalog listings.
        skewed: The table's list-bucketing definition (Hive's ``SkewedInfo`` and
            ``storedAsSubDirectories``), or ``None`` when not skewed. Each partition
            keeps the copy it was created with (:attr:`PartitionInfo.skewed`).
    """

    db: str
    name: str
    columns: tuple[tuple[str, str], ...]
    partition_keys: tuple[tuple[str, str], ...] = ()
    bucket_cols: tuple[str, ...] = ()
    num_buckets: int = -1
    sort_cols: tuple[tuple[str, int], ...] = ()
    parameters: Mapping[str, str] = field(default_factory=dict)
    location: str | None = None
    table_type: str = MANAGED_TABLE
    input_format: str = ORC_INPUT_FORMAT
    output_format: str = ORC_OUTPUT_FORMAT
    serde: str = ORC_SERDE
    owner: str = ""
    skewed: SkewedInfo | None = None

    @property
    def full_name(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def schema(self) -> TableSchema:
        """The table columns as a parsed ``TableSchema``."""
        return TableSchema.of(list(self.columns))

    @property
    def partition_names(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.partition_keys)

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_keys)

    @property
    def is_transactional(self) -> bool:
        return self.parameters.get(TRANSACTIONAL, "").lower() == "true"

    @property
    def is_insert_only(self) -> bool:
        return self.is_transactional and self.transactional_properties == "insert_only"

    @property
    def is_full_acid(self) -> bool:
        return self.is_transactional and not self.is_insert_only

    @property
    def transactional_properties(self) -> str:
        return self.parameters.get(TRANSACTIONAL_PROPERTIES, "default").lower()

    @property
    def bucketing_version(self) -> int:
        return int(self.parameters.get(BUCKETING_VERSION, "2"))

    def partition_name(self, values: Sequence[str | None]) -> str:
        """The Hive partition name for values given in partition-key order."""
        return make_partition_name(self.partition_names, values)


@dataclass(frozen=True)
class PartitionInfo:
    """Hive streaming's ``PartitionInfo``: name, directory, and whether it already existed.

    ``skewed`` is the partition's own list-bucketing definition: the table's, copied when
    the partition was created (Hive copies the table's StorageDescriptor), so a later
    ``ALTER TABLE ... SKEWED BY`` changes only partitions created afterwards.
    """

    name: str
    location: str
    exists: bool
    values: tuple[str | None, ...] = ()
    skewed: SkewedInfo | None = None


def _ident(name: str, what: str) -> str:
    n = name.strip().lower()
    if not n or not all(c.isalnum() or c == "_" for c in n):
        raise ConfigError(f"invalid {what} name {name!r}: use letters, digits and '_'")
    return n


def validate_table(t: TableDef, *, check_properties: bool = True) -> TableDef:
    """Check a table definition as Hive does and return it normalised.

    Database and table names follow Hive's rule (:func:`acidstream.acid.table_name.check_new_name`);
    names are lower-cased, types parsed (and printed canonically), ``bucketing_version``
    defaults to ``2`` and a transactional table without ``transactional_properties`` gets
    ``default``.

    The properties acidstream reads (``orc.*``, the compactor's flags) are checked too,
    unless ``check_properties`` is false: an ALTER of something else (the skew) must not
    be refused for a property an older version stored, which no command can change.

    Raises:
        ConfigError: naming the first rule the definition breaks.
    """
    db = check_new_name(t.db, "database")
    name = check_new_name(t.name, "table")
    schema = TableSchema.of(list(t.columns))
    columns = tuple((n, str(typ)) for n, typ in schema.columns)
    col_names = {n for n, _ in columns}
    pkeys: list[tuple[str, str]] = []
    for k, typ in t.partition_keys:
        kn = _ident(k, "partition column")
        if kn in col_names or kn in {p for p, _ in pkeys}:
            raise ConfigError(f"partition column {kn!r} repeats a column name")
        parsed = parse_hive_type(typ)
        if parsed.kind in ("array", "map", "struct", "uniontype"):
            raise ConfigError(f"partition column {kn!r} must have a primitive type, not {parsed}")
        pkeys.append((kn, str(parsed)))
    buckets = tuple(_ident(b, "bucket column") for b in t.bucket_cols)
    for b in buckets:
        if b not in col_names:
            raise ConfigError(f"bucket column {b!r} is not a table column")
    num_buckets = t.num_buckets
    if buckets and num_buckets <= 0:
        raise ConfigError("a bucketed table needs a positive number of buckets")
    if buckets and num_buckets > MAX_BUCKETS:
        # Refused here, not at the first write: the writer could not encode bucket ids
        # past 4095 and every ingest would fail with a half-written delta.
        raise ConfigError(
            f"{num_buckets} buckets: at most {MAX_BUCKETS} (Hive's BucketCodec V1 holds "
            f"bucket ids 0 to {MAX_BUCKET_ID})"
        )
    if not buckets:
        num_buckets = -1
    sort_cols = tuple((_ident(c, "sort column"), o) for c, o in t.sort_cols)
    params = {str(k): str(v) for k, v in t.parameters.items()}
    params.setdefault(BUCKETING_VERSION, "2")
    if params[BUCKETING_VERSION] not in ("1", "2"):
        raise ConfigError(f"bucketing_version must be 1 or 2, not {params[BUCKETING_VERSION]!r}")
    if t.table_type not in (MANAGED_TABLE, EXTERNAL_TABLE):
        raise ConfigError(f"table type must be {MANAGED_TABLE} or {EXTERNAL_TABLE}")
    trans = params.get(TRANSACTIONAL)
    if trans is not None and trans.lower() not in ("true", "false"):
        raise ConfigError(f"transactional must be true or false, not {trans!r}")
    if trans is not None:
        params[TRANSACTIONAL] = trans.lower()
    if check_properties:
        _validate_properties(f"{db}.{name}", params, col_names)
        check_key_properties(f"{db}.{name}", params, dict(columns), dict(pkeys))
        check_durability_property(f"{db}.{name}", params)
    out = replace(
        t,
        db=db,
        name=name,
        columns=columns,
        partition_keys=tuple(pkeys),
        bucket_cols=buckets,
        num_buckets=num_buckets,
        sort_cols=sort_cols,
        parameters=params,
    )
    if t.skewed is not None:
        out = replace(out, skewed=_validate_skew(out, t.skewed))
    if out.is_transactional:
        _validate_transactional(out, params)
    elif TRANSACTIONAL_PROPERTIES in params:
        raise ConfigError("transactional_properties is set but the table is not transactional")
    return replace(out, parameters=params)


def _validate_properties(full_name: str, params: dict[str, str], col_names: set[str]) -> None:
    """The properties acidstream reads besides ``transactional*`` and ``bucketing_version``:
    the ``orc.*`` writer settings (resolved by ``OrcWriterOptions.for_table``, the same
    call every writer makes, so what is accepted here is what a write applies) and the
    compactor's flags. Refused before anything is stored, in Python and the CLI alike."""
    check_orc_keys(params)
    try:
        orc = OrcWriterOptions().for_table(params)
    except ConfigError as e:
        raise ConfigError(f"{full_name}: {e}") from e
    for c in orc.bloom_filter_columns:
        if c not in col_names:
            raise ConfigError(
                f"{full_name}: table property orc.bloom.filter.columns names {c!r}, which is "
                f"not a data column (columns: {', '.join(sorted(col_names))})"
            )
    for key, value in params.items():
        if key.lower() in BOOLEAN_PROPERTIES and value.strip().lower() not in ("true", "false"):
            raise ConfigError(f"{full_name}: table property {key}={value!r}: must be true or false")


def _validate_skew(t: TableDef, skewed: SkewedInfo) -> SkewedInfo:
    """The table-level rules of list bucketing (Hive's ListBucketing design)."""
    info = check_skewed_info(skewed)
    if t.bucket_cols and t.num_buckets > 0:
        raise ConfigError(
            f"{t.full_name}: list bucketing (SKEWED BY) cannot be combined with hash "
            f"bucketing (CLUSTERED BY ({', '.join(t.bucket_cols)}) INTO {t.num_buckets} "
            "BUCKETS)"
        )
    if not t.is_partitioned:
        raise ConfigError(f"{t.full_name}: list bucketing (SKEWED BY) needs a partitioned table")
    data_cols = dict(t.columns)
    for i, c in enumerate(info.col_names):
        if c in t.partition_names:
            raise ConfigError(
                f"{t.full_name}: skewed column {c!r} is a partition column; "
                "skew by data columns only"
            )
        if c not in data_cols:
            raise ConfigError(f"{t.full_name}: skewed column {c!r} is not a column of the table")
        typ = parse_hive_type(data_cols[c])
        if typ.kind in ("array", "map", "struct", "uniontype"):
            raise ConfigError(
                f"{t.full_name}: skewed column {c!r} must have a primitive type, not {typ}"
            )
        for values in info.col_values:
            _check_declared_value(t, c, typ, values[i])
    return info


def _check_declared_value(t: TableDef, col: str, typ: HiveType, value: str) -> None:
    # A row matches when its value prints as the declared text (acid.hive_text), so a
    # value no row prints so would silently never match; '' is the NULL/empty directory.
    if value == "":
        return
    text = declared_value_text(value, typ)
    if text is None:
        raise ConfigError(f"{t.full_name}: skewed value {value!r} of {col!r} is not a {typ} value")
    if text != value:
        raise ConfigError(
            f"{t.full_name}: skewed value {value!r} of {col!r} would never match: Hive "
            f"writes this {typ} value as {text!r}; declare that"
        )


def check_partition_skew(t: TableDef, values: Sequence[str | None]) -> None:
    """Refuse a new partition of a list-bucketed table whose value is the default
    list-bucketing directory name (a reader could not tell the two directories apart).

    Raises:
        ConfigError: naming the partition key.
    """
    if t.skewed is None or not t.skewed.is_list_bucketed:
        return
    for key, value in zip(t.partition_names, values, strict=False):
        if value == DEFAULT_DIR_NAME:
            raise ConfigError(
                f"{t.full_name}: partition value {key}={DEFAULT_DIR_NAME} is the default "
                "list-bucketing directory name and cannot name a partition of a "
                "list-bucketed table"
            )


def _validate_transactional(t: TableDef, params: dict[str, str]) -> None:
    props = params.get(TRANSACTIONAL_PROPERTIES, "default").lower()
    if props not in ("default", "insert_only"):
        raise ConfigError(
            f"{t.full_name}: transactional_properties must be 'default' or 'insert_only', "
            f"not {props!r}"
        )
    params[TRANSACTIONAL_PROPERTIES] = props
    if t.table_type == EXTERNAL_TABLE:
        raise ConfigError(f"{t.full_name}: transactional tables cannot be external")
    if props == "default":
        if t.input_format != ORC_INPUT_FORMAT or t.output_format != ORC_OUTPUT_FORMAT:
            raise ConfigError(
                f"{t.full_name}: The table must be stored using an ACID compliant format "
                "(such as ORC)"
            )
        if t.sort_cols:
            raise ConfigError(
                f"{t.full_name} cannot support full ACID functionality since it is sorted."
            )
