"""Predicates, conditions and SET values of a mutation: SQL text or ``pyarrow`` expressions.

SQL text (Hive's syntax) is compiled by :mod:`acidstream.acid.sql_expr` (sqlglot to Arrow
compute expressions, ``docs/mutations.md``, Expressions); a ``pyarrow.compute.Expression``
is taken as it is. Either way the
result is checked against the columns it runs on *before* any txn opens: an unknown column
or a type error is a ``ConfigError`` and nothing is written.

Column names: DELETE and UPDATE run on the table's columns (partition columns are strings,
as reads return them). A MERGE runs on qualified names: ``<target_alias>.<col>`` and
``<source_alias>.<col>`` (``pc.field("src.op")`` in a pyarrow expression).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from acidstream.acid import sql_expr
from acidstream.acid.errors import ConfigError

__all__ = ["Expr", "check_predicate", "compile_predicate", "compile_value", "evaluate", "mask"]

Expr: TypeAlias = str | pc.Expression
"""A predicate, condition or value: SQL text, or a ``pyarrow.compute`` expression."""


def compile_predicate(
    where: Expr,
    schema: pa.Schema,
    *,
    qualifiers: Mapping[str, str] | None = None,
    default_qualifier: str | None = None,
) -> pc.Expression:
    """``where`` as a boolean Arrow expression over ``schema``'s columns, checked.

    ``qualifiers`` (alias -> the prefix of its columns in ``schema``, ``{"src": "src."}``)
    and ``default_qualifier`` resolve a MERGE's qualified names
    (:func:`acidstream.acid.sql_expr.compile_predicate`).

    Raises:
        ConfigError: unknown columns, a type error, a value that is not boolean.
    """
    if isinstance(where, pc.Expression):
        expr = where
    elif isinstance(where, str):
        expr = sql_expr.compile_predicate(
            where, schema, qualifiers=qualifiers, default_qualifier=default_qualifier
        )
    else:
        raise ConfigError(f"a predicate is SQL text or a pyarrow expression, not {where!r}")
    check_predicate(expr, schema)
    return expr


def compile_value(
    value: Expr,
    schema: pa.Schema,
    *,
    target: pa.Field,
    qualifiers: Mapping[str, str] | None = None,
    default_qualifier: str | None = None,
) -> pc.Expression:
    """``value`` (a SET or INSERT value) as an Arrow expression over ``schema`` whose
    result casts to ``target``'s type, checked on one all-NULL row.

    Raises:
        ConfigError: unknown columns, a type error, a result that cannot be cast.
    """
    if isinstance(value, pc.Expression):
        expr = value
    elif isinstance(value, str):
        try:
            expr = sql_expr.compile_value(
                value,
                schema,
                target=target.type,
                qualifiers=qualifiers,
                default_qualifier=default_qualifier,
            )
        except ConfigError as e:
            raise ConfigError(f"the value of {target.name!r}: {e}") from e
    else:
        raise ConfigError(
            f"the value of {target.name!r} is SQL text or a pyarrow expression, not {value!r}"
        )
    try:
        # One all-NULL row: a constant that cannot be cast (``'abc'`` for an int) fails
        # here, before any txn, and NULL inputs make no other expression fail.
        out = evaluate(_null_row(schema), expr)
        pc.cast(out, target.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError) as e:
        raise ConfigError(f"the value of {target.name!r}: {e}") from e
    return expr


def _null_row(schema: pa.Schema) -> pa.Table:
    return pa.Table.from_arrays([pa.nulls(1, f.type) for f in schema], schema=schema)


def check_predicate(expr: pc.Expression, schema: pa.Schema) -> None:
    """Raise ``ConfigError`` unless ``expr`` filters a table of ``schema``."""
    try:
        schema.empty_table().filter(expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError) as e:
        raise ConfigError(f"predicate {expr}: {e}") from e


def evaluate(table: pa.Table, expr: pc.Expression) -> pa.ChunkedArray:
    """The values of ``expr`` on every row of ``table``."""
    if table.num_columns == 0:
        raise ConfigError("an expression needs at least one column to run on")
    out = ds.dataset(table).to_table(columns={"__value": expr}, use_threads=False)
    return out.column("__value")


def mask(table: pa.Table, expr: pc.Expression | None) -> pa.Array:
    """A boolean array: the rows of ``table`` for which ``expr`` is true (NULL counts as
    false, as in SQL's WHERE); all true when ``expr`` is ``None``."""
    if expr is None:
        return pa.array([True] * table.num_rows, pa.bool_())
    values = evaluate(table, expr).combine_chunks()
    return pc.fill_null(values, False)
