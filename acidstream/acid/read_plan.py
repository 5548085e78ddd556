"""What a snapshot read returns: output columns, their types, predicates, batch assembly.

``build_plan`` turns the caller's ``columns``, ``filter``, ``include_row_id`` and the
table schema (given, or taken from a data file) into a ``ReadPlan``; ``assemble``
turns the columns read from one file into an output batch of exactly the plan's schema.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.directory import is_lb_dir_name
from acidstream.acid.errors import AcidFormatError, ConfigError
from acidstream.acid.layout import is_hidden, parse_dir_name
from acidstream.acid.orc_inspect import inspect_orc
from acidstream.acid.partitions import Partition
from acidstream.acid.schema import TableSchema
from acidstream.acid.storage import Storage
from acidstream.acid.timestamps import TimestampUnit, cast_column, with_timestamp_unit

__all__ = [
    "COMPARISONS",
    "ROW_ID_COLUMN",
    "ROW_ID_TYPE",
    "Predicate",
    "ReadPlan",
    "assemble",
    "assemble_columns",
    "build_plan",
    "combine_predicates",
    "finish",
    "peek_row_schema",
    "predicate_expr",
]

ROW_ID_COLUMN = "row__id"
ROW_ID_TYPE = pa.struct([("writeid", pa.int64()), ("bucketid", pa.int32()), ("rowid", pa.int64())])

# (column, op, value) with op in = == != < <= > >= in "not in" "is null" "is not null".
Predicate = tuple[str, str, Any]
T = TypeVar("T")


COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
"""The comparison operators of a :data:`Predicate`, as Python operators (which pyarrow
expressions, Spark columns and plain values all take)."""


def combine_predicates(
    preds: Sequence[Predicate],
    column: Callable[[str], T],
    *,
    is_null: Callable[[T], T],
    is_valid: Callable[[T], T],
) -> T:
    """The AND of ``(column, op, value)`` tuples in one expression language: ``column``
    names a column (``pyarrow.compute.field``, ``pyspark.sql.functions.col``), ``is_null``
    and ``is_valid`` test one for null; comparisons and ``isin`` are the language's own.

    Raises:
        ConfigError: a tuple of the wrong shape, an unknown operator, an empty list.
    """
    expr: Any = None
    for item in preds:
        if len(item) == 2:
            col, op, value = item[0], item[1], None
        elif len(item) == 3:
            col, op, value = item
        else:
            raise ConfigError(f"predicate {item!r} must be (column, op, value)")
        f: Any = column(col)
        o = op.strip().lower()
        if o in COMPARISONS:
            e = COMPARISONS[o](f, value)
        elif o == "in":
            e = f.isin(list(value))
        elif o == "not in":
            e = ~f.isin(list(value))
        elif o == "is null":
            e = is_null(f)
        elif o == "is not null":
            e = is_valid(f)
        else:
            raise ConfigError(f"unknown predicate operator {op!r}")
        expr = e if expr is None else expr & e
    if expr is None:
        raise ConfigError("empty predicate list")
    return cast(T, expr)


def predicate_expr(preds: Sequence[Predicate]) -> pc.Expression:
    """The AND of ``(column, op, value)`` tuples as a ``pyarrow.compute`` expression."""
    return combine_predicates(
        preds, pc.field, is_null=lambda f: f.is_null(), is_valid=lambda f: f.is_valid()
    )


@dataclass(frozen=True)
class ReadPlan:
    """Reference table columns (names and types, positional) and what the caller asked for."""

    names: tuple[str, ...]
    types: tuple[pa.DataType, ...]
    partition_names: tuple[str, ...]
    projected: tuple[int, ...]  # positions of table columns to return
    read_positions: tuple[int, ...]  # positions to read (projected + filter needs)
    out_partitions: tuple[str, ...]
    include_row_id: bool
    filter: pc.Expression | None
    timestamp_unit: TimestampUnit

    def schema(self) -> pa.Schema:
        """The schema of every batch the read returns."""
        fields: list[pa.Field] = []
        if self.include_row_id:
            fields.append(pa.field(ROW_ID_COLUMN, ROW_ID_TYPE))
        fields += [pa.field(self.names[i], self.types[i]) for i in self.projected]
        fields += [pa.field(p, pa.string()) for p in self.out_partitions]
        return pa.schema(fields)


def peek_row_schema(storage: Storage, path: str) -> pa.Schema | None:
    """The row schema of any ORC file of a partition, chosen or not (for empty snapshots)."""
    try:
        entries = storage.list_dir(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    for e in entries:
        if is_hidden(e.name) or e.name.endswith("_flush_length"):
            continue
        if e.is_dir:
            if parse_dir_name(e.name) is None:
                continue
            found = _peek_dir(storage, e.path)
            if found is not None:
                return found
        elif e.size:
            try:
                return inspect_orc(storage, e.path, file_length=e.size)[1].row_schema()
            except AcidFormatError:
                continue
    return None


def _peek_dir(storage: Storage, path: str) -> pa.Schema | None:
    """The row schema of a file of a base/delta, or of its list-bucketing directories."""
    entries = storage.list_dir(path)
    for f in entries:
        if f.is_dir or is_hidden(f.name) or f.name.endswith("_flush_length") or f.size == 0:
            continue
        try:
            return inspect_orc(storage, f.path, file_length=f.size)[1].row_schema()
        except AcidFormatError:
            continue
    for f in entries:
        if f.is_dir and is_lb_dir_name(f.name):
            found = _peek_dir(storage, f.path)
            if found is not None:
                return found
    return None


def build_plan(
    row_schema: pa.Schema | None,
    *,
    schema: TableSchema | None,
    partition_names: tuple[str, ...],
    columns: Sequence[str] | None,
    include_row_id: bool,
    filter: Sequence[Predicate] | pc.Expression | None,
    timestamp_unit: TimestampUnit,
) -> ReadPlan:
    """The plan of a read: ``schema`` (or else ``row_schema``, a data file's) gives the
    table columns; ``columns`` picks table and partition columns; ``filter`` adds
    the columns it needs to those read."""
    if schema is not None:
        names = schema.names
        types = tuple(t.to_arrow(timestamp_unit=timestamp_unit) for _, t in schema.columns)
    elif row_schema is not None:
        names = tuple(row_schema.names)
        types = tuple(with_timestamp_unit(t, timestamp_unit) for t in row_schema.types)
    else:
        names, types = (), ()
    lower = {n.lower(): i for i, n in enumerate(names)}
    parts_lower = {p.lower(): p for p in partition_names}
    if columns is None:
        projected = tuple(range(len(names)))
        out_parts = partition_names
    else:
        proj: list[int] = []
        ps: list[str] = []
        for c in columns:
            key = c.strip().lower()
            if key in lower:
                proj.append(lower[key])
            elif key in parts_lower:
                ps.append(parts_lower[key])
            else:
                raise ConfigError(f"unknown column {c!r}; table columns are {list(names)}")
        projected, out_parts = tuple(proj), tuple(ps)
    expr: pc.Expression | None = None
    read = set(projected)
    if filter is not None:
        if isinstance(filter, pc.Expression):
            expr = filter
            if len(read) < len(names):  # every column read already: nothing to find
                read |= expression_columns(
                    filter, names, types, partition_names, include_row_id=include_row_id
                )
        else:
            expr = predicate_expr(filter)
            for item in filter:
                key = str(item[0]).lower()
                if key in lower:
                    read.add(lower[key])
                elif key not in parts_lower:
                    raise ConfigError(f"unknown column {item[0]!r} in predicate")
    return ReadPlan(
        names=names,
        types=types,
        partition_names=partition_names,
        projected=projected,
        read_positions=tuple(sorted(read)),
        out_partitions=out_parts,
        include_row_id=include_row_id,
        filter=expr,
        timestamp_unit=timestamp_unit,
    )


def expression_columns(
    expr: pc.Expression,
    names: Sequence[str],
    types: Sequence[pa.DataType],
    partition_names: Sequence[str],
    *,
    include_row_id: bool,
) -> set[int]:
    """The positions of the table columns ``expr`` refers to, so that a read filtered by
    an expression (a DELETE's predicate) decodes only those columns besides the ones it
    returns: a file's other columns (a wide string column) can cost more than the rest of
    the read.

    pyarrow lists no expression's fields, but binding one to a schema that lacks a field
    it names fails: a column is needed when ``expr`` binds to the batch schema
    :func:`assemble` filters, and not to it without that column (bound by filtering an
    empty table of the schema, as :func:`assemble` filters: well under a millisecond,
    and an ``IN`` list is not copied). Anything unexpected, such as an expression that
    does not bind at all, keeps every column, as before; then :func:`assemble` reports
    the error.
    """
    fields = [pa.field(ROW_ID_COLUMN, ROW_ID_TYPE)] if include_row_id else []
    fields += [pa.field(n, t) for n, t in zip(names, types, strict=True)]
    fields += [pa.field(p, pa.string()) for p in partition_names]
    first = 1 if include_row_id else 0
    every = set(range(len(names)))
    if not _binds(expr, fields):
        return every
    return {
        pos for pos in every if not _binds(expr, fields[: first + pos] + fields[first + pos + 1 :])
    }


def _binds(expr: pc.Expression, fields: list[pa.Field]) -> bool:
    """Whether ``expr`` (a predicate or a value of any type) binds to ``fields``."""
    try:
        pa.schema(fields).empty_table().filter(expr.is_valid())
    except (pa.ArrowException, ValueError, TypeError):
        return False
    return True


def assemble(
    plan: ReadPlan,
    row_cols: list[pa.ChunkedArray | pa.Array | None],
    *,
    n: int,
    keys: pa.Table | None,
    partition: Partition,
) -> pa.Table:
    """The output batch of one file (or stripe): ROW__ID, the read columns (renamed and
    cast to the plan's types; ``None`` for a column the file lacks), partition values,
    filtered by the plan's predicate and projected to the plan's schema."""
    return finish(plan, assemble_columns(plan, row_cols, n=n, keys=keys, partition=partition))


def assemble_columns(
    plan: ReadPlan,
    row_cols: list[pa.ChunkedArray | pa.Array | None],
    *,
    n: int,
    keys: pa.Table | None,
    partition: Partition,
) -> pa.Table:
    """``assemble`` before the predicate and the projection: every read column (the
    predicate's too), so that a batch of several files can be cut per file first."""
    arrays: list[pa.Array | pa.ChunkedArray] = []
    fields: list[pa.Field] = []
    if plan.include_row_id:
        assert keys is not None
        rid = pa.StructArray.from_arrays(
            [
                keys.column("o").combine_chunks(),
                keys.column("b").combine_chunks(),
                keys.column("r").combine_chunks(),
            ],
            fields=list(ROW_ID_TYPE),
        )
        arrays.append(rid)
        fields.append(pa.field(ROW_ID_COLUMN, ROW_ID_TYPE))
    for pos, col in zip(plan.read_positions, row_cols, strict=True):
        typ = plan.types[pos]
        arrays.append(pa.nulls(n, typ) if col is None else cast_column(col, typ))
        fields.append(pa.field(plan.names[pos], typ))
    # by lower-case key: a catalog's key names the column, a directory's may differ in case
    pvals = {k.lower(): v for k, v in partition.values}
    for p in plan.partition_names:
        arrays.append(pa.repeat(pa.scalar(pvals.get(p.lower()), pa.string()), n))
        fields.append(pa.field(p, pa.string()))
    t = pa.Table.from_arrays(arrays, schema=pa.schema(fields)) if fields else pa.table({})
    return t


def finish(plan: ReadPlan, t: pa.Table) -> pa.Table:
    """A batch of ``assemble_columns`` filtered by the plan's predicate and projected to
    the plan's schema."""
    if plan.filter is not None and t.num_rows:
        try:
            t = t.filter(plan.filter)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            # e.g. a string column compared with a number
            raise ConfigError(f"cannot apply the filter {plan.filter}: {e}") from e
    return t.select([f.name for f in plan.schema()])
