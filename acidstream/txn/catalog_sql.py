"""Catalog persistence: the SQL behind databases, tables, partitions and table parameters.

Functions here run inside a store call's DB transaction (a :class:`~acidstream.txn.db.Tx`);
:class:`~acidstream.txn.store.TxnStore` exposes them as methods. Shared by both backends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from acidstream.acid.errors import ConfigError, TableNotFoundError
from acidstream.acid.list_bucketing import SkewedInfo
from acidstream.acid.partition_name import parse_partition_name
from acidstream.acid.table_name import DEFAULT_DB, check_new_name
from acidstream.txn import skew_sql
from acidstream.txn.catalog import (
    DatabaseDef,
    PartitionInfo,
    TableDef,
    absolute_location,
    check_partition_skew,
    default_table_location,
    is_absolute_location,
    validate_table,
)
from acidstream.txn.db import Tx
from acidstream.txn.relocation import check_relocation, first_file_under, table_write_counts
from acidstream.txn.store_ops import StoreOps

__all__ = ["CatalogOps"]


def _norm(name: str) -> str:
    return name.strip().lower()


_RELOCATE_HINT = (
    "it was stored relative by an older acidstream and would name a different directory "
    "in every working directory; point it at its real directory with `acidstream "
    "set-location {what} /absolute/path` (TxnStore.set_{kind}_location)"
)


def check_location(what: str, location: str, *, kind: str = "table") -> str:
    """A location read back from the metastore, refused if it is relative (an old store).

    Raises:
        ConfigError: naming the table (or database) and the location, and the fix.
    """
    if not is_absolute_location(location):
        target = what if kind == "table" else f"--database {what}"
        hint = _RELOCATE_HINT.format(what=target, kind=kind)
        raise ConfigError(f"{kind} {what} has the relative location {location!r}: {hint}")
    return location


def database_location(tx: Tx, db: str, warehouse: str | None) -> str | None:
    """The database row's location; raises TableNotFoundError if the database is missing."""
    row = tx.one("SELECT LOCATION FROM DBS WHERE NAME = ?", db)
    if row is None:
        raise TableNotFoundError(f"Database {db} does not exist")
    return None if row[0] is None else check_location(db, row[0], kind="database")


def create_database(
    tx: Tx, d: DatabaseDef, *, warehouse: str | None, now_ms: int, if_not_exists: bool
) -> DatabaseDef:
    name = check_new_name(d.name, "database")
    location = None if d.location is None else absolute_location(d.location)
    if location is None and warehouse is not None and name != DEFAULT_DB:
        location = f"{absolute_location(warehouse)}/{name}.db"
    changed = tx.count(
        "INSERT INTO DBS (NAME, LOCATION, DESCRIPTION, OWNER, CREATE_TIME) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (NAME) DO NOTHING",
        name,
        location,
        d.description,
        d.owner,
        now_ms,
    )
    if changed == 0 and not if_not_exists:
        raise ConfigError(f"Database {name} already exists")
    return get_database(tx, name)


def get_database(tx: Tx, name: str) -> DatabaseDef:
    row = tx.one("SELECT NAME, LOCATION, DESCRIPTION, OWNER FROM DBS WHERE NAME = ?", _norm(name))
    if row is None:
        raise TableNotFoundError(f"Database {name} does not exist")
    return DatabaseDef(row[0], row[1], row[2], row[3])


def list_databases(tx: Tx) -> list[DatabaseDef]:
    rows = tx.q("SELECT NAME, LOCATION, DESCRIPTION, OWNER FROM DBS ORDER BY NAME")
    return [DatabaseDef(*r) for r in rows]


def create_table(
    tx: Tx, table: TableDef, *, warehouse: str | None, now_ms: int, if_not_exists: bool
) -> TableDef:
    t = validate_table(table)
    db_location = database_location(tx, t.db, warehouse)
    if tx.one("SELECT 1 FROM TBLS WHERE TBL_DB = ? AND TBL_NAME = ?", t.db, t.name) is not None:
        if if_not_exists:
            return get_table(tx, t.db, t.name)
        raise ConfigError(f"Table {t.full_name} already exists")
    # Stored absolute: resolved against this process's cwd now, never a later reader's.
    location = None if t.location is None else absolute_location(t.location)
    if location is None:
        if db_location is not None:
            location = f"{db_location.rstrip('/')}/{t.name}"
        elif warehouse is not None:
            location = default_table_location(absolute_location(warehouse), t.db, t.name)
        else:
            raise ConfigError(
                f"{t.full_name}: no location given and no warehouse configured to default it"
            )
    t = replace(t, location=location.rstrip("/"))
    tx.x(
        "INSERT INTO TBLS (TBL_DB, TBL_NAME, TBL_TYPE, LOCATION, INPUT_FORMAT, OUTPUT_FORMAT, "
        "SERDE, NUM_BUCKETS, OWNER, CREATE_TIME) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        t.db,
        t.name,
        t.table_type,
        t.location,
        t.input_format,
        t.output_format,
        t.serde,
        t.num_buckets,
        t.owner,
        now_ms,
    )
    cols: list[tuple[str, str, str, int, str, str | None, int | None]] = []
    cols += [(t.db, t.name, "c", i, n, typ, None) for i, (n, typ) in enumerate(t.columns)]
    cols += [(t.db, t.name, "p", i, n, typ, None) for i, (n, typ) in enumerate(t.partition_keys)]
    cols += [(t.db, t.name, "b", i, n, None, None) for i, n in enumerate(t.bucket_cols)]
    cols += [(t.db, t.name, "s", i, n, None, o) for i, (n, o) in enumerate(t.sort_cols)]
    tx.xmany(
        "INSERT INTO TBL_COLUMNS (COL_DB, COL_TBL, COL_KIND, COL_IDX, COL_NAME, COL_TYPE, "
        "COL_ORDER) VALUES (?, ?, ?, ?, ?, ?, ?)",
        cols,
    )
    tx.xmany(
        "INSERT INTO TABLE_PARAMS (TP_DB, TP_TBL, PARAM_KEY, PARAM_VALUE) VALUES (?, ?, ?, ?)",
        [(t.db, t.name, k, v) for k, v in sorted(t.parameters.items())],
    )
    skew_sql.write_skew(tx, t.db, t.name, skew_sql.TABLE_KEY, t.skewed)
    return t


def get_table(tx: Tx, db: str, name: str, *, check: bool = True) -> TableDef:
    """The table's definition; ``check``: refuse a relative location (:func:`check_location`)."""
    db, name = _norm(db), _norm(name)
    row = tx.one(
        "SELECT TBL_TYPE, LOCATION, INPUT_FORMAT, OUTPUT_FORMAT, SERDE, NUM_BUCKETS, OWNER "
        "FROM TBLS WHERE TBL_DB = ? AND TBL_NAME = ?",
        db,
        name,
    )
    if row is None:
        raise TableNotFoundError(f"Table {db}.{name} not found in the catalog")
    # Columns, parameters and the table's skew in one round trip: rows
    # (partition, kind, index, order, name or key, type or value), kinds c/p/b/s (columns),
    # k (parameters) and skew_sql's f/n/v/l.
    sql = (
        "SELECT '', COL_KIND, COL_IDX, COL_ORDER, COL_NAME, COL_TYPE FROM TBL_COLUMNS "
        "WHERE COL_DB = ? AND COL_TBL = ? "
        "UNION ALL SELECT '', 'k', 0, 0, PARAM_KEY, PARAM_VALUE FROM TABLE_PARAMS "
        "WHERE TP_DB = ? AND TP_TBL = ?"
    )
    args = [db, name, db, name]
    if skew_sql.stored(tx):
        sql += " UNION ALL " + skew_sql.select_sql("SK_DB = ? AND SK_TBL = ? AND SK_PART = ''")
        args += [db, name] * 4
    rows = tx.q(sql, *args)
    cols = sorted((r for r in rows if r[1] in ("c", "p", "b", "s")), key=lambda r: (r[1], r[2]))
    skew = skew_sql.assemble(r for r in rows if r[1] in ("f", "n", "v", "l"))
    return TableDef(
        db=db,
        name=name,
        columns=tuple((c[4], c[5]) for c in cols if c[1] == "c"),
        partition_keys=tuple((c[4], c[5]) for c in cols if c[1] == "p"),
        bucket_cols=tuple(c[4] for c in cols if c[1] == "b"),
        num_buckets=row[5],
        sort_cols=tuple((c[4], c[3]) for c in cols if c[1] == "s"),
        parameters={r[4]: r[5] for r in rows if r[1] == "k"},
        location=check_location(f"{db}.{name}", row[1]) if check else row[1],
        table_type=row[0],
        input_format=row[2],
        output_format=row[3],
        serde=row[4],
        owner=row[6],
        skewed=skew.get(skew_sql.TABLE_KEY),
    )


def list_tables(tx: Tx, db: str | None) -> list[TableDef]:
    if db is None:
        rows = tx.q("SELECT TBL_DB, TBL_NAME FROM TBLS ORDER BY TBL_DB, TBL_NAME")
    else:
        get_database(tx, db)
        rows = tx.q(
            "SELECT TBL_DB, TBL_NAME FROM TBLS WHERE TBL_DB = ? ORDER BY TBL_NAME", _norm(db)
        )
    # A listing shows old relative locations as stored instead of failing on them.
    return [get_table(tx, r[0], r[1], check=False) for r in rows]


def _values_in_order(t: TableDef, values: Sequence[str | None] | Mapping[str, str | None]) -> list:
    if isinstance(values, Mapping):
        lowered = {k.lower(): v for k, v in values.items()}
        missing = [k for k in t.partition_names if k not in lowered]
        extra = sorted(set(lowered) - set(t.partition_names))
        if missing or extra:
            raise ConfigError(
                f"{t.full_name} is partitioned by ({', '.join(t.partition_names)}); "
                f"missing {missing}, unknown {extra}"
            )
        return [lowered[k] for k in t.partition_names]
    return list(values)


def add_partition(
    tx: Tx,
    db: str,
    table: str,
    values: Sequence[str | None] | Mapping[str, str | None],
    *,
    now_ms: int,
) -> PartitionInfo:
    """Create the partition if it does not exist (Hive's ``createPartitionIfNotExists``)."""
    t = get_table(tx, db, table)
    if not t.is_partitioned:
        raise ConfigError(f"{t.full_name} is not partitioned")
    ordered = _values_in_order(t, values)
    (info,) = _ensure_partitions(tx, t, [(t.partition_name(ordered), tuple(ordered))], now_ms)
    return info


# Partition names per query: well under SQLite's and PostgreSQL's parameter limits.
_CHUNK = 400


def _existing_partitions(
    tx: Tx, t: TableDef, names: Sequence[str]
) -> dict[str, tuple[str, SkewedInfo | None]]:
    """Location and own skew of those of ``names`` that exist: one round trip per chunk
    (the partitions and their skew in one ``UNION ALL``)."""
    out: dict[str, tuple[str, SkewedInfo | None]] = {}
    unique = sorted(set(names))
    for i in range(0, len(unique), _CHUNK):
        chunk = unique[i : i + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        sql = (
            "SELECT PART_NAME, 'P', 0, 0, LOCATION, '' FROM PARTITIONS "
            f"WHERE PART_DB = ? AND PART_TBL = ? AND PART_NAME IN ({marks})"
        )
        args = [t.db, t.name, *chunk]
        if skew_sql.stored(tx):
            where = f"SK_DB = ? AND SK_TBL = ? AND SK_PART IN ({marks})"
            sql += " UNION ALL " + skew_sql.select_sql(where)
            args += [t.db, t.name, *chunk] * 4
        rows = tx.q(sql, *args)
        skews = skew_sql.assemble(r for r in rows if r[1] != "P")
        for r in rows:
            if r[1] == "P":
                loc = check_location(f"{t.full_name} partition {r[0]}", r[4])
                out[r[0]] = (loc, skews.get(r[0]))
    return out


def _ensure_partitions(
    tx: Tx, t: TableDef, parts: Sequence[tuple[str, tuple[str | None, ...]]], now_ms: int
) -> list[PartitionInfo]:
    """Create the partitions ``(name, values)`` that are missing; a new one copies the
    table's skew (as Hive copies the table's storage descriptor) in this DB transaction,
    an existing one reports its own."""
    existing = _existing_partitions(tx, t, [name for name, _ in parts])
    out = []
    for name, values in parts:
        if name in existing:
            location, skewed = existing[name]
            out.append(PartitionInfo(name, location, True, values, skewed))
            continue
        location = f"{t.location}/{name}"
        created = tx.count(
            "INSERT INTO PARTITIONS (PART_DB, PART_TBL, PART_NAME, LOCATION, CREATE_TIME) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (PART_DB, PART_TBL, PART_NAME) DO NOTHING",
            t.db,
            t.name,
            name,
            location,
            now_ms,
        )
        if created == 0:  # named twice, or created by a concurrent transaction just now
            location, skewed = _existing_partitions(tx, t, [name])[name]
            out.append(PartitionInfo(name, location, True, values, skewed))
            continue
        check_partition_skew(t, values)
        skew_sql.write_skew(tx, t.db, t.name, name, t.skewed)
        out.append(PartitionInfo(name, location, False, values, t.skewed))
    return out


def ensure_partitions_by_name(
    tx: Tx, db: str, table: str, names: Sequence[str], *, now_ms: int
) -> list[PartitionInfo]:
    """Register dynamic partitions named ``k1=v1/k2=v2`` (created if missing)."""
    t = get_table(tx, db, table)
    parts = []
    for name in names:
        pairs = parse_partition_name(name)
        if tuple(k for k, _ in pairs) != t.partition_names:
            raise ConfigError(
                f"partition {name!r} does not match {t.full_name}'s keys {t.partition_names}"
            )
        parts.append((name, tuple(v for _, v in pairs)))
    return _ensure_partitions(tx, t, parts, now_ms)


def list_partitions(tx: Tx, db: str, table: str) -> list[PartitionInfo]:
    t = get_table(tx, db, table)
    rows = tx.q(
        "SELECT PART_NAME, LOCATION FROM PARTITIONS WHERE PART_DB = ? AND PART_TBL = ? "
        "ORDER BY PART_NAME",
        t.db,
        t.name,
    )
    skews = skew_sql.read_skews(tx, t.db, t.name) if rows else {}
    return [
        PartitionInfo(
            r[0],
            check_location(f"{t.full_name} partition {r[0]}", r[1]),
            True,
            tuple(v for _, v in parse_partition_name(r[0])),
            skews.get(r[0]),
        )
        for r in rows
    ]


def get_partitions(tx: Tx, db: str, table: str, names: Sequence[str]) -> dict[str, PartitionInfo]:
    """Those of the partitions ``names`` that exist, by name, without listing the others."""
    t = get_table(tx, db, table)
    return {
        name: PartitionInfo(name, loc, True, tuple(v for _, v in parse_partition_name(name)), skew)
        for name, (loc, skew) in _existing_partitions(tx, t, names).items()
    }


def partition_skews(tx: Tx, db: str, table: str) -> dict[str, SkewedInfo]:
    """The partitions that have a skew definition of their own, by name: none for a table
    that never was skewed, whatever its number of partitions (no partition is listed)."""
    t = get_table(tx, db, table)
    skews = skew_sql.read_skews(tx, t.db, t.name)
    skews.pop(skew_sql.TABLE_KEY, None)
    return skews


def set_skewed(tx: Tx, db: str, table: str, skewed: SkewedInfo | None) -> TableDef:
    """``ALTER TABLE ... SKEWED BY ... ON ... [STORED AS DIRECTORIES]`` (a new definition,
    its own location map) or ``NOT SKEWED`` (``None``). Existing partitions keep theirs."""
    t = get_table(tx, db, table)
    if skewed is None:
        new = None
    else:
        new = validate_table(replace(t, skewed=skewed), check_properties=False).skewed
    skew_sql.write_skew(tx, t.db, t.name, skew_sql.TABLE_KEY, new)
    return get_table(tx, t.db, t.name)


def _skewed_table(tx: Tx, db: str, table: str, what: str) -> tuple[TableDef, SkewedInfo]:
    t = get_table(tx, db, table)
    if t.skewed is None:
        raise ConfigError(f"{t.full_name} is not skewed: {what} needs SKEWED BY first")
    return t, t.skewed


def set_stored_as_dirs(tx: Tx, db: str, table: str, stored_as_dirs: bool) -> TableDef:
    """``ALTER TABLE ... [NOT] STORED AS DIRECTORIES``; the skew stays declared."""
    what = "STORED AS DIRECTORIES" if stored_as_dirs else "NOT STORED AS DIRECTORIES"
    t, info = _skewed_table(tx, db, table, what)
    return set_skewed(tx, t.db, t.name, replace(info, stored_as_dirs=stored_as_dirs))


def set_skewed_locations(
    tx: Tx, db: str, table: str, locations: Mapping[tuple[str, ...], str]
) -> TableDef:
    """``ALTER TABLE ... SET SKEWED LOCATION (values=dir, ...)``: directories (relative to
    each delta/base) of declared value tuples, or of the default directory (key
    ``(DEFAULT_KEY,)``); other entries stay."""
    t, info = _skewed_table(tx, db, table, "SET SKEWED LOCATION")
    if not locations:
        raise ConfigError("SET SKEWED LOCATION needs at least one VALUES=LOCATION")
    merged = {**info.location_map, **{tuple(k): v for k, v in locations.items()}}
    return set_skewed(tx, t.db, t.name, replace(info, location_map=merged))


def set_table_location(
    tx: Tx,
    db: str,
    table: str,
    location: str,
    *,
    old_file: str | None = None,
    new_file: str | None = None,
) -> TableDef:
    """Point a table at an absolute location; partitions under its old location follow.

    The explicit migration of a table stored with a relative location by an older
    acidstream (which :func:`check_location` refuses to guess), and the re-pointing of a
    table with no data. ``old_file``/``new_file``: a file found under the current and the
    new location (:func:`acidstream.txn.relocation.first_file_under`, looked up before this DB
    transaction); the write ids are checked here, with the change.

    Raises:
        ConfigError: committed data would be orphaned, or ``location`` overlaps another
            table's directory (:func:`acidstream.txn.relocation.check_relocation`).
    """
    new = absolute_location(location)
    t = get_table(tx, db, table, check=False)
    old = (t.location or "").rstrip("/")
    if new == old:
        return get_table(tx, t.db, t.name)
    writes = table_write_counts(tx, t.db, t.name)
    others = [
        (f"{r[0]}.{r[1]}", str(r[2]))
        for r in tx.q("SELECT TBL_DB, TBL_NAME, LOCATION FROM TBLS")
        if r[2] and (r[0], r[1]) != (t.db, t.name)
    ]
    check_relocation(t, new, writes, old_file=old_file, new_file=new_file, others=others)
    tx.x("UPDATE TBLS SET LOCATION = ? WHERE TBL_DB = ? AND TBL_NAME = ?", new, t.db, t.name)
    parts = tx.q(
        "SELECT PART_NAME, LOCATION FROM PARTITIONS WHERE PART_DB = ? AND PART_TBL = ?",
        t.db,
        t.name,
    )
    moved = []
    for name, loc in parts:
        if loc == f"{old}/{name}" or not is_absolute_location(loc):
            moved.append((f"{new}/{name}", t.db, t.name, name))
    tx.xmany(
        "UPDATE PARTITIONS SET LOCATION = ? WHERE PART_DB = ? AND PART_TBL = ? AND PART_NAME = ?",
        moved,
    )
    return get_table(tx, t.db, t.name)


def set_database_location(tx: Tx, db: str, location: str) -> DatabaseDef:
    """Point a database (where its new tables default) at an absolute location."""
    get_database(tx, db)
    tx.x("UPDATE DBS SET LOCATION = ? WHERE NAME = ?", absolute_location(location), _norm(db))
    return get_database(tx, db)


def get_table_param(tx: Tx, db: str, table: str, key: str) -> str | None:
    db, table = _norm(db), _norm(table)
    row = tx.one(
        "SELECT PARAM_VALUE FROM TABLE_PARAMS WHERE TP_DB = ? AND TP_TBL = ? AND PARAM_KEY = ?",
        db,
        table,
        key,
    )
    if row is None:
        if tx.one("SELECT 1 FROM TBLS WHERE TBL_DB = ? AND TBL_NAME = ?", db, table) is None:
            raise TableNotFoundError(f"Table {db}.{table} not found in the catalog")
        return None
    value: str | None = row[0]
    return value


def table_params_with_prefix(tx: Tx, db: str, table: str, prefix: str) -> dict[str, str | None]:
    """Every parameter of a table whose key starts with ``prefix`` (the keys a writer
    family stores, e.g. the HTTP server's idempotency records)."""
    db, table = _norm(db), _norm(table)
    if tx.one("SELECT 1 FROM TBLS WHERE TBL_DB = ? AND TBL_NAME = ?", db, table) is None:
        raise TableNotFoundError(f"Table {db}.{table} not found in the catalog")
    # substr, not LIKE: the prefixes hold '_' and '.', which LIKE would treat as patterns.
    rows = tx.q(
        "SELECT PARAM_KEY, PARAM_VALUE FROM TABLE_PARAMS WHERE TP_DB = ? AND TP_TBL = ? "
        "AND substr(PARAM_KEY, 1, ?) = ?",
        db,
        table,
        len(prefix),
        prefix,
    )
    return {str(r[0]): r[1] for r in rows}


def delete_table_params(tx: Tx, db: str, table: str, keys: list[str]) -> int:
    """Remove parameters of a table; returns how many existed."""
    db, table = _norm(db), _norm(table)
    return sum(
        tx.count(
            "DELETE FROM TABLE_PARAMS WHERE TP_DB = ? AND TP_TBL = ? AND PARAM_KEY = ?",
            db,
            table,
            key,
        )
        for key in keys
    )


def set_table_param(tx: Tx, db: str, table: str, key: str, value: str) -> None:
    db, table = _norm(db), _norm(table)
    if tx.one("SELECT 1 FROM TBLS WHERE TBL_DB = ? AND TBL_NAME = ?", db, table) is None:
        raise TableNotFoundError(f"Table {db}.{table} not found in the catalog")
    tx.x(
        "INSERT INTO TABLE_PARAMS (TP_DB, TP_TBL, PARAM_KEY, PARAM_VALUE) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (TP_DB, TP_TBL, PARAM_KEY) DO UPDATE SET PARAM_VALUE = excluded.PARAM_VALUE",
        db,
        table,
        key,
        value,
    )


def add_table_param(tx: Tx, db: str, table: str, key: str, value: str) -> bool:
    """Store a table parameter unless it exists; whether it was stored. On PostgreSQL a
    concurrent insert of the same key waits for the other's DB transaction to end."""
    db, table = _norm(db), _norm(table)
    if tx.one("SELECT 1 FROM TBLS WHERE TBL_DB = ? AND TBL_NAME = ?", db, table) is None:
        raise TableNotFoundError(f"Table {db}.{table} not found in the catalog")
    return (
        tx.count(
            "INSERT INTO TABLE_PARAMS (TP_DB, TP_TBL, PARAM_KEY, PARAM_VALUE) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (TP_DB, TP_TBL, PARAM_KEY) DO NOTHING",
            db,
            table,
            key,
            value,
        )
        == 1
    )


def delete_table_param(tx: Tx, db: str, table: str, key: str) -> None:
    tx.x(
        "DELETE FROM TABLE_PARAMS WHERE TP_DB = ? AND TP_TBL = ? AND PARAM_KEY = ?",
        _norm(db),
        _norm(table),
        key,
    )


class CatalogOps(StoreOps):
    """The catalog half of :class:`~acidstream.txn.store.TxnStore`: one DB transaction per method."""

    # -- catalog ----------------------------------------------------------------------------
    def create_database(
        self,
        name: str,
        *,
        location: str | None = None,
        description: str = "",
        owner: str = "",
        if_not_exists: bool = False,
    ) -> DatabaseDef:
        """Create a database; its location defaults to ``<warehouse>/<name>.db``."""
        d = DatabaseDef(name, location, description, owner)
        return self._db.run(
            "create_database",
            lambda tx: create_database(
                tx, d, warehouse=self.warehouse, now_ms=self._now_ms(), if_not_exists=if_not_exists
            ),
        )

    def get_database(self, name: str) -> DatabaseDef:
        return self._db.run(
            "get_database",
            lambda tx: get_database(tx, name),
            write=False,
            idempotent=True,
        )

    def list_databases(self) -> list[DatabaseDef]:
        return self._db.run("list_databases", list_databases, write=False, idempotent=True)

    def create_table(self, table: TableDef, *, if_not_exists: bool = False) -> TableDef:
        """Validate (as Hive does) and create a table; returns the stored definition.

        Raises:
            ConfigError: the definition breaks a rule, or the table exists.
            TableNotFoundError: the database does not exist.
        """
        return self._db.run(
            "create_table",
            lambda tx: create_table(
                tx,
                table,
                warehouse=self.warehouse,
                now_ms=self._now_ms(),
                if_not_exists=if_not_exists,
            ),
        )

    def get_table(self, db: str, table: str) -> TableDef:
        """The table's definition. Raises TableNotFoundError."""
        return self._db.run(
            "get_table",
            lambda tx: get_table(tx, db, table),
            write=False,
            idempotent=True,
        )

    def find_location(self, location: str) -> tuple[TableDef, str | None] | None:
        """The table whose directory, or the partition of a table whose directory, is
        ``location`` (an absolute path or URL): ``(table, partition name or None)``."""

        def body(tx: Tx) -> tuple[TableDef, str | None] | None:
            loc = location.rstrip("/")
            row = tx.one("SELECT TBL_DB, TBL_NAME FROM TBLS WHERE LOCATION = ?", loc)
            if row is not None:
                return get_table(tx, row[0], row[1]), None
            row = tx.one(
                "SELECT PART_DB, PART_TBL, PART_NAME FROM PARTITIONS WHERE LOCATION = ?", loc
            )
            if row is not None:
                return get_table(tx, row[0], row[1]), str(row[2])
            return None

        return self._db.run("find_location", body, write=False, idempotent=True)

    def list_tables(self, db: str | None = None) -> list[TableDef]:
        """Tables of one database, or of all, by name."""
        return self._db.run(
            "list_tables", lambda tx: list_tables(tx, db), write=False, idempotent=True
        )

    def add_partition(
        self, db: str, table: str, values: Sequence[str | None] | Mapping[str, str | None]
    ) -> PartitionInfo:
        """Create a partition if it does not exist (values in key order, or by key)."""
        return self._db.run(
            "add_partition",
            lambda tx: add_partition(tx, db, table, values, now_ms=self._now_ms()),
        )

    def set_table_location(self, db: str, table: str, location: str) -> TableDef:
        """Move a table's catalog entry to ``location`` (made absolute against the cwd);
        partitions at their default place under the old location follow. Files are not
        moved. This is the explicit migration of a table an older acidstream stored with a
        relative location, which every other call refuses (ConfigError), and the
        re-pointing of a table with no data.

        Raises:
            ConfigError: the table has data the move would orphan: a file under its
                current location, an open write id, or committed write ids and no file
                under ``location`` (``docs/namespaces.md``, set-location); or
                ``location`` is, holds or lies inside another table's directory.
            TableNotFoundError: no such table.
        """
        current = self._db.run(
            "get_table",
            lambda tx: get_table(tx, db, table, check=False),
            write=False,
            idempotent=True,
        )
        # The file system is looked at outside the DB transaction; a writer that starts
        # meanwhile holds an open write id, which the transaction sees.
        # The store's filesystem options (TxnStore.storage_options: endpoint, credentials).
        opts = getattr(self, "storage_options", None)
        old_file = first_file_under(current.location, storage_options=opts)
        new_file = first_file_under(absolute_location(location), storage_options=opts)
        return self._db.run(
            "set_table_location",
            lambda tx: set_table_location(
                tx, db, table, location, old_file=old_file, new_file=new_file
            ),
        )

    def set_database_location(self, db: str, location: str) -> DatabaseDef:
        """Change where a database's new tables default (made absolute against the cwd)."""
        return self._db.run(
            "set_database_location", lambda tx: set_database_location(tx, db, location)
        )

    # -- list bucketing (each changes the table only: partitions keep their own copy) --------
    def set_skewed(self, db: str, table: str, skewed: SkewedInfo | None) -> TableDef:
        """``ALTER TABLE SKEWED BY`` (a new definition) or ``NOT SKEWED`` (``None``).

        Raises:
            ConfigError: the definition breaks a rule (see :func:`acidstream.txn.catalog.validate_table`).
        """
        return self._db.run("set_skewed", lambda tx: set_skewed(tx, db, table, skewed))

    def set_stored_as_dirs(self, db: str, table: str, stored_as_dirs: bool) -> TableDef:
        """``ALTER TABLE [NOT] STORED AS DIRECTORIES`` of a skewed table."""
        return self._db.run(
            "set_stored_as_dirs", lambda tx: set_stored_as_dirs(tx, db, table, stored_as_dirs)
        )

    def set_skewed_location(
        self, db: str, table: str, values: Sequence[str], location: str
    ) -> TableDef:
        """``ALTER TABLE SET SKEWED LOCATION (values=location)``: ``values`` a declared
        tuple, or ``(DEFAULT_KEY,)`` for the default directory; ``location`` relative to
        each delta/base."""
        return self.set_skewed_locations(db, table, {tuple(values): location})

    def set_skewed_locations(
        self, db: str, table: str, locations: Mapping[tuple[str, ...], str]
    ) -> TableDef:
        """Several ``SET SKEWED LOCATION`` entries in one DB transaction."""
        return self._db.run(
            "set_skewed_location", lambda tx: set_skewed_locations(tx, db, table, locations)
        )

    def list_partitions(self, db: str, table: str) -> list[PartitionInfo]:
        return self._db.run(
            "list_partitions",
            lambda tx: list_partitions(tx, db, table),
            write=False,
            idempotent=True,
        )

    def get_partitions(self, db: str, table: str, names: Sequence[str]) -> dict[str, PartitionInfo]:
        """The partitions ``names`` that exist (location and own skew), by name: one round
        trip, whatever the table's number of partitions (``list_partitions`` reads all)."""
        return self._db.run(
            "get_partitions",
            lambda tx: get_partitions(tx, db, table, names),
            write=False,
            idempotent=True,
        )

    def partition_skews(self, db: str, table: str) -> dict[str, SkewedInfo]:
        """The partitions with a skew definition of their own (``list_partitions`` lists
        every partition; this reads only the skewed ones)."""
        return self._db.run(
            "partition_skews",
            lambda tx: partition_skews(tx, db, table),
            write=False,
            idempotent=True,
        )

    def get_table_param(self, db: str, table: str, key: str) -> str | None:
        """A table parameter (property, or a key stored by ``commit_txn``), or ``None``."""
        return self._db.run(
            "get_table_param",
            lambda tx: get_table_param(tx, db, table, key),
            write=False,
            idempotent=True,
        )

    def set_table_param(self, db: str, table: str, key: str, value: str) -> None:
        self._db.run(
            "set_table_param",
            lambda tx: set_table_param(tx, db, table, key, value),
            idempotent=True,
        )

    def table_params_with_prefix(self, db: str, table: str, prefix: str) -> dict[str, str | None]:
        """Parameters of a table whose key starts with ``prefix``."""
        return self._db.run(
            "table_params_with_prefix",
            lambda tx: table_params_with_prefix(tx, db, table, prefix),
            write=False,
            idempotent=True,
        )

    def delete_table_params(self, db: str, table: str, keys: list[str]) -> int:
        """Remove parameters of a table in one DB transaction; how many existed."""
        return self._db.run(
            "delete_table_params",
            lambda tx: delete_table_params(tx, db, table, list(keys)),
            idempotent=True,
        )
