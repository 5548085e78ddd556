"""What a read selects: columns, a filter, a write id to travel back to; parsed once.

:class:`ReadOptions` is the one typed form of the read arguments of
:meth:`acidstream.Table.read`, :meth:`~acidstream.Table.scan`,
:meth:`~acidstream.Table.spark` and :func:`acidstream.read_table`. Filters are what the
reader evaluates (``acidstream.acid.read_plan``): ``(column, op, value)`` tuples, ANDed (they also
prune list-bucketing directories), or a ``pyarrow.compute`` expression. SQL text is not
accepted: no SQL parser is installed, and the project does not write one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import pyarrow.compute as pc

from acidstream.acid.errors import ConfigError
from acidstream.acid.read_plan import Predicate, predicate_expr
from acidstream.acid.timestamps import DEFAULT_TIMESTAMP_UNIT, TimestampUnit, check_timestamp_unit

__all__ = ["Filter", "ReadOptions"]

Filter: TypeAlias = tuple[Predicate, ...] | pc.Expression
"""A read's filter once parsed: ANDed ``(column, op, value)`` tuples, or an expression."""


@dataclass(frozen=True, kw_only=True)
class ReadOptions:
    """The rows and columns a read returns.

    Args:
        columns: the table and partition columns to return (default all): a list or
            tuple of names, matched case-insensitively; table columns come in this
            order, then the partition columns named (as the reader builds rows).
        filter: ``(column, op, value)`` tuples (one tuple, or a sequence of them, ANDed;
            ``op`` one of ``= == != < <= > >= in "not in" "is null" "is not null"``), or
            a ``pyarrow.compute`` expression over the output columns.
        as_of_write_id: read the table as it was when this was its last write id (time
            travel); ``None``: the snapshot's present.
        include_row_id: add Hive's ``row__id`` struct<writeid,bucketid,rowid> first.
        timestamp_unit: the Arrow unit of ``timestamp`` columns, ``"us"`` or ``"ns"``
            (``acidstream.acid.timestamps``).

    Raises:
        ConfigError: a value of the wrong type or form, naming the field.
    """

    columns: tuple[str, ...] | None = None
    filter: Filter | None = None
    as_of_write_id: int | None = None
    include_row_id: bool = False
    timestamp_unit: TimestampUnit = DEFAULT_TIMESTAMP_UNIT

    def __post_init__(self) -> None:
        # Frozen: normalise through object.__setattr__, once, here.
        object.__setattr__(self, "columns", _columns(self.columns))
        object.__setattr__(self, "filter", _filter(self.filter))
        wid = self.as_of_write_id
        if wid is not None and (isinstance(wid, bool) or not isinstance(wid, int) or wid < 0):
            raise ConfigError(f"as_of_write_id must be a write id (an int >= 0), got {wid!r}")
        if not isinstance(self.include_row_id, bool):
            raise ConfigError(f"include_row_id must be True or False, got {self.include_row_id!r}")
        object.__setattr__(self, "timestamp_unit", check_timestamp_unit(self.timestamp_unit))

    @classmethod
    def of(cls, options: ReadOptions | None = None, **fields: Any) -> ReadOptions:
        """``options``, or the options the keyword ``fields`` give (those left ``None``
        or at their default do not count); both at once is refused.

        Raises:
            ConfigError: ``options`` and fields together, or a bad field.
        """
        given = {k: v for k, v in fields.items() if v is not None and v is not False}
        if given.get("timestamp_unit") == DEFAULT_TIMESTAMP_UNIT:
            del given["timestamp_unit"]
        if options is None:
            return cls(**given)
        if given:
            raise ConfigError(
                f"give either options= or {', '.join(sorted(given))}=, not both "
                "(dataclasses.replace(options, ...) combines them)"
            )
        if not isinstance(options, ReadOptions):
            raise ConfigError(f"options must be a ReadOptions, got {type(options).__name__}")
        return options


def _columns(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    # A bare string is a sequence too: "id" would otherwise read as columns i and d.
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigError(f"columns must be a list of column names, got {value!r}")
    if not all(isinstance(c, str) and c.strip() for c in value):
        raise ConfigError(f"columns must be a list of column names, got {list(value)!r}")
    return tuple(c.strip() for c in value)


def _filter(value: object) -> Filter | None:
    if value is None or isinstance(value, pc.Expression):
        return value
    if isinstance(value, str):
        raise ConfigError(
            f"filter {value!r}: SQL text is not supported; give (column, op, value) tuples "
            "or a pyarrow.compute expression"
        )
    if isinstance(value, tuple) and value and isinstance(value[0], str):
        value = (value,)  # one predicate
    if not isinstance(value, Sequence) or not all(isinstance(p, tuple) for p in value):
        raise ConfigError(
            f"filter must be (column, op, value) tuples or a pyarrow.compute expression, "
            f"got {value!r}"
        )
    preds = tuple(value)
    predicate_expr(preds)  # a bad operator or shape is refused here, not mid-read
    return preds
