"""How durable a commit is: ``fsync`` (the default) or ``flush`` (Hive's ``hflush``).

- ``fsync``: before a commit returns, its files' bytes (data, ``_flush_length`` side
  file, the delta's ``_orc_acid_version`` marker) are on the disk (``fdatasync``) and so
  is the metastore commit (SQLite ``synchronous=FULL`` for the commit's DB transaction;
  PostgreSQL's default ``synchronous_commit``). A committed txn survives a power loss.
- ``flush``: the bytes are handed to the operating system (``write``), not waited for on
  the disk, and the metastore commit is not synced either (SQLite ``synchronous=NORMAL``
  in WAL mode; PostgreSQL ``synchronous_commit=off`` for the commit). A committed txn
  survives the writer's crash (the OS holds its bytes), not a power loss or a kernel
  crash; after one, the last commits may be gone (``docs/durability.md``).

The setting comes from the writer's option (``StreamingOptions.durability``, the
``durability=`` keyword of ``StreamingConnection``) or, when that is not given, from the
table property ``acidstream.durability``; the catalog checks the property when a table is
created (:func:`check_durability_property`). The format layer holds it because the file
writer needs it and every layer above may name it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from acidstream.acid.errors import ConfigError

__all__ = [
    "DEFAULT_DURABILITY",
    "DURABILITY_PROPERTY",
    "DURABILITY_VALUES",
    "Durability",
    "check_durability_property",
    "parse_durability",
    "resolve_durability",
]

Durability = Literal["fsync", "flush"]
DURABILITY_VALUES: tuple[Durability, ...] = ("fsync", "flush")
DEFAULT_DURABILITY: Durability = "fsync"
DURABILITY_PROPERTY = "acidstream.durability"


def parse_durability(value: str, *, what: str = "durability") -> Durability:
    """``value`` as a durability (case and surrounding spaces ignored).

    Raises:
        ConfigError: naming ``what`` (the option or property) and the allowed values.
    """
    v = value.strip().lower()
    if v not in DURABILITY_VALUES:
        raise ConfigError(f"{what} must be fsync or flush, not {value!r}")
    return v


def _property(params: Mapping[str, str]) -> str | None:
    """The property by case-insensitive name (Hive's keys are case-insensitive)."""
    for k, v in params.items():
        if k.lower() == DURABILITY_PROPERTY:
            return v
    return None


def check_durability_property(full_name: str, params: Mapping[str, str]) -> None:
    """Refuse a bad ``acidstream.durability`` table property (the catalog, at create).

    Raises:
        ConfigError: naming the table and the property.
    """
    text = _property(params)
    if text is not None:
        parse_durability(text, what=f"{full_name}: table property {DURABILITY_PROPERTY}")


def resolve_durability(
    option: str | None, params: Mapping[str, str], *, full_name: str = "the table"
) -> Durability:
    """A writer's durability: its own ``option`` when given (it overrides the table's),
    else the table property, else ``fsync``.

    Raises:
        ConfigError: a bad option or a bad stored property.
    """
    if option is not None:
        return parse_durability(option)
    text = _property(params)
    if text is None:
        return DEFAULT_DURABILITY
    return parse_durability(text, what=f"{full_name}: table property {DURABILITY_PROPERTY}")
