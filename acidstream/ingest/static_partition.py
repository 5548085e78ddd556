"""Partition values a caller names (a static partition, ``--partition k=v``, HTTP
``?partition=``, ``write_rows(partition=...)``), converted as record values are.

A record's partition fields are read with the column's type and the directory is named by
the value's Hive string (:func:`acidstream.ingest.record_convert.partition_text_conv`): ``007`` in an
``int`` column is partition ``h=7``. A value given by the caller goes through the same
conversion, so static and dynamic rows of one value land in ONE partition; but where a
record's unparsable value goes to the default partition (Hive's streaming writers), a
caller's unparsable value is a mistake in a setting and is refused with a ConfigError
naming the column and the value, before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.partition_name import DEFAULT_PARTITION_NAME, check_partition_value
from acidstream.acid.schema import HiveType, parse_hive_type
from acidstream.ingest.record_convert import (
    STRING_KINDS,
    ConvError,
    check_partition_type,
    hive_string,
    partition_text_conv,
    primitive_text_conv,
)

__all__ = ["canonical_partition_values", "static_partition_values"]

PartitionKeys = Sequence[tuple[str, str | HiveType]]

_SHAPE = (
    "give a mapping of every partition key to its value ({'ds': '2024-05-05'}) or a "
    "sequence of values in key order (['2024-05-05'])"
)


def static_partition_values(
    keys: PartitionKeys, values: Mapping[str, str | None] | Sequence[str | None], table: str
) -> tuple[str | None, ...]:
    """The canonical values of a static partition given by key or in key order.

    Args:
        keys: the table's ``(partition column, Hive type)`` pairs, in order.
        values: ``{key: value}`` (keys matched case-insensitively) or the values in key
            order; a ``str`` is refused (it would be taken character by character).
        table: the table's name, for messages.

    Raises:
        ConfigError: wrong shape, missing or extra keys, or a value that does not convert.
    """
    names = [k.lower() for k, _ in keys]
    if isinstance(values, (str, bytes, bytearray)):
        raise ConfigError(f"static partition of {table} is a {type(values).__name__}: {_SHAPE}")
    if isinstance(values, Mapping):
        given = {str(k).strip().lower(): v for k, v in values.items()}
        if len(given) != len(values) or set(given) != set(names):
            raise ConfigError(
                f"static partition of {table} must give exactly {names}, got {list(values)}"
            )
        ordered: Sequence[str | None] = [given[k] for k in names]
    elif isinstance(values, Sequence):
        ordered = values
    else:
        raise ConfigError(f"static partition of {table} is a {type(values).__name__}: {_SHAPE}")
    return canonical_partition_values(keys, ordered, table)


def canonical_partition_values(
    keys: PartitionKeys, values: Sequence[str | None], table: str
) -> tuple[str | None, ...]:
    """Values given in key order, each converted to its column's type and written back in
    Hive's string form (``None``: the default partition, for ``None``, ``''`` or
    ``__HIVE_DEFAULT_PARTITION__``).

    Raises:
        ConfigError: a count other than the keys', a value that is not text, does not
            convert to the column's type, or names no directory.
    """
    if len(values) != len(keys):
        raise ConfigError(
            f"partition of {table} needs {len(keys)} values ({[k for k, _ in keys]}), "
            f"got {len(values)}"
        )
    return tuple(_canonical(k, t, v, table) for (k, t), v in zip(keys, values, strict=True))


def _canonical(key: str, typ: str | HiveType, value: str | None, table: str) -> str | None:
    if value is None or value in ("", DEFAULT_PARTITION_NAME):
        return None
    if not isinstance(value, str):
        raise ConfigError(
            f"partition column {key!r} of {table}: value {value!r} is a "
            f"{type(value).__name__}; give partition values as text"
        )
    t = typ if isinstance(typ, HiveType) else parse_hive_type(typ)
    check_partition_type(key, t)
    if t.kind in STRING_KINDS:
        out = partition_text_conv(t)(value)  # char/varchar: fitted as a record's value is
    else:
        try:
            out = hive_string(primitive_text_conv(t)(value), t)
        except ConvError as e:
            raise ConfigError(
                f"partition column {key!r} of {table}: {value!r} does not convert to {t} ({e})"
            ) from e
    if out is None:
        return None
    try:
        check_partition_value(key, out)
    except SerializationError as e:
        raise ConfigError(f"partition column {key!r} of {table}: {e}") from e
    return out
