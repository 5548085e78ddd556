"""Table keys: which columns identify a row of a table that takes upserts and deletes.

A table is *keyed* by its table properties ``acidstream.key`` (``"id"`` or ``"a,b"``:
columns of the table) and optionally ``acidstream.ordering`` (one data column: per key the
event with the greatest value wins, e.g. a source LSN or a change timestamp). Writers that
apply change streams (the Kafka job's upsert mode, ``StreamingConnection(mode="upsert")``,
the HTTP server's ``?mode=upsert``) read the key with :func:`table_key`; the catalog checks
the properties when a table is created (:func:`check_key_properties`), in Python and the
CLI alike, so a key naming a missing column is refused there, not at the first upsert.

A partitioned table's key need not include the partition columns: an upsert may move a
row to another partition (its old version is deleted where it was).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from acidstream.acid.errors import ConfigError
from acidstream.acid.schema import parse_hive_type

if TYPE_CHECKING:
    from acidstream.txn.catalog import TableDef

__all__ = ["KEY_PROPERTY", "ORDERING_PROPERTY", "TableKey", "check_key_properties", "table_key"]

KEY_PROPERTY = "acidstream.key"
ORDERING_PROPERTY = "acidstream.ordering"

# Types a key or ordering column cannot have: their values cannot be compared or
# grouped on (the collapse groups events by key, the guard compares orderings).
_COMPLEX = ("array", "map", "struct", "uniontype")


@dataclass(frozen=True, kw_only=True)
class TableKey:
    """A keyed table's key columns (lower case, in declared order) and ordering column."""

    columns: tuple[str, ...]
    ordering: str | None = None


def _prop(params: Mapping[str, str], name: str) -> str | None:
    """A property by case-insensitive name (Hive's keys are case-insensitive)."""
    for k, v in params.items():
        if k.lower() == name:
            return v
    return None


def check_key_properties(
    full_name: str,
    params: Mapping[str, str],
    columns: Mapping[str, str],
    partition_keys: Mapping[str, str],
) -> TableKey | None:
    """Check ``acidstream.key`` / ``acidstream.ordering`` against the table's columns
    (``name -> Hive type``, lower case) and return the key (``None``: not keyed).

    Raises:
        ConfigError: naming the property and the column it cannot use.
    """
    key_text = _prop(params, KEY_PROPERTY)
    ordering_text = _prop(params, ORDERING_PROPERTY)
    if key_text is None:
        if ordering_text is not None:
            raise ConfigError(
                f"{full_name}: table property {ORDERING_PROPERTY} needs {KEY_PROPERTY} "
                "(the key whose versions it orders)"
            )
        return None
    transactional = (_prop(params, "transactional") or "").strip().lower() == "true"
    props = (_prop(params, "transactional_properties") or "default").strip().lower()
    if not transactional or props == "insert_only":
        raise ConfigError(
            f"{full_name}: table property {KEY_PROPERTY} needs a full ACID table "
            "(transactional=true, not insert_only): upserts update and delete rows"
        )
    names = [c.strip().lower() for c in key_text.split(",")]
    if not key_text.strip() or not all(names):
        raise ConfigError(
            f"{full_name}: table property {KEY_PROPERTY}={key_text!r}: give column names "
            'separated by commas, e.g. "id" or "a,b"'
        )
    all_cols = {**columns, **partition_keys}
    seen: set[str] = set()
    for c in names:
        if c in seen:
            raise ConfigError(f"{full_name}: table property {KEY_PROPERTY} names {c!r} twice")
        seen.add(c)
        if c not in all_cols:
            raise ConfigError(
                f"{full_name}: table property {KEY_PROPERTY} names {c!r}, which is not a "
                f"column of the table (columns: {', '.join(all_cols)})"
            )
        typ = parse_hive_type(all_cols[c])
        if typ.kind in _COMPLEX:
            raise ConfigError(
                f"{full_name}: table property {KEY_PROPERTY} names {c!r} of type {typ}: a key "
                "column must have a primitive type"
            )
    ordering = None
    if ordering_text is not None:
        ordering = ordering_text.strip().lower()
        if ordering not in columns:
            raise ConfigError(
                f"{full_name}: table property {ORDERING_PROPERTY} names {ordering_text!r}, "
                f"which is not a data column of the table (columns: {', '.join(columns)})"
            )
        typ = parse_hive_type(columns[ordering])
        if typ.kind in _COMPLEX or typ.kind in ("boolean", "binary"):
            raise ConfigError(
                f"{full_name}: table property {ORDERING_PROPERTY} names {ordering!r} of type "
                f"{typ}: an ordering column must be a number, string, date or timestamp"
            )
    return TableKey(columns=tuple(names), ordering=ordering)


def table_key(table: TableDef) -> TableKey | None:
    """The key of ``table`` (``None``: the table is not keyed).

    Raises:
        ConfigError: the stored properties do not fit the table (they are checked at
            create; a table stored by an older version may still break them).
    """
    return check_key_properties(
        table.full_name,
        table.parameters,
        {n.lower(): t for n, t in table.columns},
        {n.lower(): t for n, t in table.partition_keys},
    )
