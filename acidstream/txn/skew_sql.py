"""List-bucketing persistence: the SQL behind :class:`~acidstream.acid.list_bucketing.SkewedInfo`.

Hive keeps ``SkewedInfo`` in the storage descriptor of a table and of each partition
(``SKEWED_COL_NAMES``, ``SKEWED_VALUES`` over ``SKEWED_STRING_LIST_VALUES``,
``SKEWED_COL_VALUE_LOC_MAP``, ``SDS.IS_STOREDASSUBDIRECTORIES``). Ours has the same four
parts (migration 3, :mod:`acidstream.txn.migrations`) keyed by ``(db, table, partition)``, the
partition name ``''`` standing for the table itself; a row in ``SKEWED_INFO`` means the
table or partition is skewed. Functions here run inside a store call's DB transaction;
:mod:`acidstream.txn.catalog_sql` calls them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from acidstream.acid.list_bucketing import SkewedInfo
from acidstream.txn.db import Tx

__all__ = [
    "TABLE_KEY",
    "assemble",
    "delete_skew",
    "read_skews",
    "select_sql",
    "stored",
    "write_skew",
]

TABLE_KEY = ""
"""The partition-name key of a table's own definition."""

_TABLES = ("SKEWED_INFO", "SKEWED_COL_NAMES", "SKEWED_VALUES", "SKEWED_COL_VALUE_LOC_MAP")

# Names per query: well under SQLite's and PostgreSQL's parameter limits (4 per name).
_CHUNK = 400


def stored(tx: Tx) -> bool:
    """Whether the list-bucketing tables exist. A read-write store is migrated when it
    opens; a read-only one may be an older schema (``READABLE_FROM_VERSION``), where no
    table or partition is skewed."""
    return not tx.read_only or tx.has_table("SKEWED_INFO")


def write_skew(tx: Tx, db: str, table: str, part: str, info: SkewedInfo | None) -> None:
    """Replace the skew definition of a table (``part == TABLE_KEY``) or a partition."""
    delete_skew(tx, db, table, part)
    if info is None:
        return
    key = (db, table, part)
    tx.x(
        "INSERT INTO SKEWED_INFO (SK_DB, SK_TBL, SK_PART, IS_STOREDASSUBDIRECTORIES) "
        "VALUES (?, ?, ?, ?)",
        *key,
        1 if info.stored_as_dirs else 0,
    )
    tx.xmany(
        "INSERT INTO SKEWED_COL_NAMES (SK_DB, SK_TBL, SK_PART, INTEGER_IDX, SKEWED_COL_NAME) "
        "VALUES (?, ?, ?, ?, ?)",
        [(*key, i, c) for i, c in enumerate(info.col_names)],
    )
    tx.xmany(
        "INSERT INTO SKEWED_VALUES (SK_DB, SK_TBL, SK_PART, STRING_LIST_IDX, INTEGER_IDX, "
        "STRING_LIST_VALUE) VALUES (?, ?, ?, ?, ?, ?)",
        [(*key, i, j, v) for i, values in enumerate(info.col_values) for j, v in enumerate(values)],
    )
    tx.xmany(
        "INSERT INTO SKEWED_COL_VALUE_LOC_MAP (SK_DB, SK_TBL, SK_PART, LOC_KEY, LOCATION) "
        "VALUES (?, ?, ?, ?, ?)",
        [(*key, json.dumps(list(k)), loc) for k, loc in sorted(info.location_map.items())],
    )


def delete_skew(tx: Tx, db: str, table: str, part: str | None = TABLE_KEY) -> None:
    """Forget the skew of a table's own definition or one partition (``part=None``: of the
    table and all its partitions)."""
    if not stored(tx):
        return
    for name in _TABLES:
        if part is None:
            tx.x(f"DELETE FROM {name} WHERE SK_DB = ? AND SK_TBL = ?", db, table)
        else:
            tx.x(
                f"DELETE FROM {name} WHERE SK_DB = ? AND SK_TBL = ? AND SK_PART = ?",
                db,
                table,
                part,
            )


def read_skews(
    tx: Tx, db: str, table: str, parts: Iterable[str] | None = None
) -> dict[str, SkewedInfo]:
    """The skew definitions of a table (key ``TABLE_KEY``) and its partitions (key: the
    partition name), only those of ``parts`` when given; an absent key is not skewed.

    One query per chunk of names: the four tables are read with one ``UNION ALL``.
    """
    if not stored(tx):
        return {}
    if parts is None:
        return assemble(_query(tx, db, table, None))
    names = sorted(set(parts))
    rows: list[Sequence[Any]] = []
    for i in range(0, len(names), _CHUNK):
        rows += _query(tx, db, table, names[i : i + _CHUNK])
    return assemble(rows)


def select_sql(where: str) -> str:
    """The four tables as one ``UNION ALL`` of rows ``(partition, kind, i, j, text,
    location)`` for :func:`assemble`; ``where`` (on ``SK_DB``, ``SK_TBL``, ``SK_PART``) is
    repeated in each branch, so its parameters are given four times. Kinds are ``f``
    (flag), ``n`` (column name), ``v`` (value), ``l`` (location)."""
    return (
        f"SELECT SK_PART, 'f', IS_STOREDASSUBDIRECTORIES, 0, '', '' FROM SKEWED_INFO "
        f"WHERE {where} "
        f"UNION ALL SELECT SK_PART, 'n', INTEGER_IDX, 0, SKEWED_COL_NAME, '' "
        f"FROM SKEWED_COL_NAMES WHERE {where} "
        f"UNION ALL SELECT SK_PART, 'v', STRING_LIST_IDX, INTEGER_IDX, STRING_LIST_VALUE, '' "
        f"FROM SKEWED_VALUES WHERE {where} "
        f"UNION ALL SELECT SK_PART, 'l', 0, 0, LOC_KEY, LOCATION "
        f"FROM SKEWED_COL_VALUE_LOC_MAP WHERE {where}"
    )


def _query(tx: Tx, db: str, table: str, names: Sequence[str] | None) -> list[Sequence[Any]]:
    if names is not None and not names:
        return []
    where = "SK_DB = ? AND SK_TBL = ?"
    params: list[object] = [db, table]
    if names is not None:
        where += f" AND SK_PART IN ({', '.join('?' * len(names))})"
        params += names
    return list(tx.q(select_sql(where), *(params * 4)))


def assemble(rows: Iterable[Sequence[Any]]) -> dict[str, SkewedInfo]:
    """Skew definitions by partition key from :func:`select_sql`'s rows."""
    flags: dict[str, bool] = {}
    names: dict[str, list[tuple[int, str]]] = {}
    values: dict[str, list[tuple[int, int, str]]] = {}
    locations: dict[str, dict[tuple[str, ...], str]] = {}
    for part, kind, i, j, text, loc in rows:
        if kind == "f":
            flags[part] = bool(i)
        elif kind == "n":
            names.setdefault(part, []).append((i, text))
        elif kind == "v":
            values.setdefault(part, []).append((i, j, text))
        else:
            locations.setdefault(part, {})[tuple(json.loads(text))] = loc
    out = {}
    for p, stored_as_dirs in flags.items():
        tuples: dict[int, list[str]] = {}
        for i, _, v in sorted(values.get(p, ())):
            tuples.setdefault(i, []).append(v)
        out[p] = SkewedInfo(
            col_names=tuple(n for _, n in sorted(names.get(p, ()))),
            col_values=tuple(tuple(t) for t in tuples.values()),
            location_map=locations.get(p, {}),
            stored_as_dirs=stored_as_dirs,
        )
    return out
