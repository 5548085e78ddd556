"""DELETE and UPDATE: find the rows in the mutation's snapshot, write their delete events
and (UPDATE) their new versions. Runs on the driver side.

Layout (Hive 3, one statement, statement id 0): a DELETE writes
``delete_delta_W_W_0000`` only; an UPDATE writes ``delete_delta_W_W_0000`` and
``delta_W_W_0000`` (split-update). A delete delta of write id W applies to a delta of the
same W only when the delta's statement id is lower, so the new versions are never hit by
their own statement's delete events.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid import faults
from acidstream.acid.errors import ConfigError
from acidstream.acid.key_lookup import LookupCounts
from acidstream.acid.read_plan import expression_columns
from acidstream.mutation.expressions import Expr, compile_predicate, compile_value, evaluate
from acidstream.mutation.key_terms import key_terms
from acidstream.mutation.results import MutationResult
from acidstream.mutation.run import MutationRun
from acidstream.mutation.target import ROW_ID_COLUMN, Target, read_rows
from acidstream.mutation.write import buckets_hit, by_partition, old_buckets

__all__ = ["DELETE_STATEMENT", "UPDATE_STATEMENT", "DeletePlan", "UpdatePlan", "new_versions"]

DELETE_STATEMENT = 0
UPDATE_STATEMENT = 0

# Bucket pruning hashes every combination of the bucketing columns' key values; past this
# many the statement reads every bucket rather than hash them all.
_BUCKET_COMBINATIONS = 100_000


def _lower_map(schema: pa.Schema) -> dict[str, pa.Field]:
    return {f.name.lower(): f for f in schema}


def _find_rows(
    t: Target, where: pc.Expression | None, columns: list[str], counts: LookupCounts
) -> pa.Table:
    """The rows of the snapshot satisfying ``where`` with ``columns`` and ROW__ID, read
    by the key lookup when conjuncts of ``where`` pin columns to values
    (:func:`~acidstream.mutation.key_terms.key_terms`), whole stripes otherwise; the
    lookup's reads are added to ``counts``."""
    keys = key_terms(where, t.schema, exclude=t.partition_names)
    # read_rows looks up only key columns it returns
    cols = columns + [k for k in keys if k not in columns]
    rows = read_rows(
        t, t.prune(t.partitions(), where), where=where, columns=cols, keys=keys or None,
        buckets=_buckets(t, keys), counts=counts,
    )  # fmt: skip
    extra = [k for k in keys if k not in columns]
    return rows.drop_columns(extra) if extra else rows


def _buckets(t: Target, keys: Mapping[str, pa.Array]) -> list[int] | None:
    """The buckets rows holding the key values are in, when the table is bucketed and
    every bucketing column has key values (Hive's bucket pruning; a MERGE does the same
    with its source keys); ``None``: every bucket."""
    tab = t.table
    if tab.num_buckets <= 0 or not tab.bucket_cols or not keys:
        return None
    lower = {k.lower(): v for k, v in keys.items()}
    bcols = [c.lower() for c in tab.bucket_cols]
    if not all(c in lower for c in bcols):
        return None
    values = [lower[c].to_pylist() for c in bcols]
    if math.prod(len(v) for v in values) > _BUCKET_COMBINATIONS:
        return None
    return buckets_hit(tab, itertools.product(*values))


class DeletePlan:
    """A DELETE checked against the table's columns (before any txn): run it with
    :meth:`__call__` inside :func:`~acidstream.mutation.run.run_mutation`.

    ``counts``: what the last run's key lookup read (nothing when the predicate pins no
    column to values)."""

    def __init__(self, schema: pa.Schema, where: Expr | None) -> None:
        self.where = None if where is None else compile_predicate(where, schema)
        self.counts = LookupCounts()

    def __call__(self, run: MutationRun) -> MutationResult:
        t = run.target
        self.counts = LookupCounts()
        rows = _find_rows(t, self.where, list(t.partition_names), self.counts)
        faults.point("mutation.after_find")
        n = 0
        for part, group in by_partition(t, rows):
            n += run.files.delete_events(part, group.column(ROW_ID_COLUMN), DELETE_STATEMENT)
        return MutationResult(rows_deleted=n, write_id=run.write_id)


class UpdatePlan:
    """An UPDATE checked against the table's columns (before any txn); ``counts`` as
    :class:`DeletePlan`'s."""

    def __init__(self, schema: pa.Schema, set: Mapping[str, Expr], where: Expr | None) -> None:
        if not set:
            raise ConfigError("an UPDATE needs at least one column to set")
        by_name = _lower_map(schema)
        self.values: dict[str, pc.Expression] = {}
        for col, value in set.items():
            f = by_name.get(col.lower())
            if f is None:
                raise ConfigError(
                    f"UPDATE sets unknown column {col!r}; the columns are {schema.names}"
                )
            if f.name in self.values:
                raise ConfigError(f"UPDATE sets column {f.name!r} twice")
            self.values[f.name] = compile_value(value, schema, target=f)
        self.where = None if where is None else compile_predicate(where, schema)
        self.counts = LookupCounts()

    def __call__(self, run: MutationRun) -> MutationResult:
        t = run.target
        self.counts = LookupCounts()
        rows = _find_rows(t, self.where, self._columns(t), self.counts)
        faults.point("mutation.after_find")
        for part, group in by_partition(t, rows):
            run.files.delete_events(part, group.column(ROW_ID_COLUMN), UPDATE_STATEMENT)
        keep = _keeps_buckets(t, self.values)
        run.files.insert_rows(
            new_versions(t, rows.drop_columns([ROW_ID_COLUMN]), self.values),
            UPDATE_STATEMENT,
            buckets=old_buckets(rows.column(ROW_ID_COLUMN)) if keep else None,
        )
        return MutationResult(rows_updated=rows.num_rows, write_id=run.write_id)

    def _columns(self, t: Target) -> list[str]:
        """The columns the new versions need: those not set (copied), those a SET value
        names, and the partition columns (where the rows are). A column only SET is not
        decoded (``SET v = 'x'`` never reads the old ``v``); the reader adds the WHERE
        clause's columns itself."""
        schema = t.schema
        need = set(t.partition_names) | {f.name for f in schema if f.name not in self.values}
        for e in self.values.values():
            used = expression_columns(e, schema.names, schema.types, (), include_row_id=False)
            need |= {schema.field(i).name for i in used}
        return [f.name for f in schema if f.name in need]


def _keeps_buckets(target: Target, values: Mapping[str, pc.Expression]) -> bool:
    """Whether new versions stay in their rows' buckets: a bucketed table whose bucketing
    columns the UPDATE does not set (hashing them again would give the same bucket)."""
    tab = target.table
    if tab.num_buckets <= 0 or not tab.bucket_cols:
        return False
    return not {c.lower() for c in tab.bucket_cols} & {k.lower() for k in values}


def new_versions(target: Target, rows: pa.Table, values: Mapping[str, pc.Expression]) -> pa.Table:
    """``rows`` (columns of :attr:`Target.schema`) with ``values`` evaluated on them and
    cast to their columns' types: the new versions, in :attr:`Target.schema`'s order. A
    partition column's new value is its text (it names the partition directory)."""
    cols = []
    for f in target.schema:
        if f.name in values:
            cols.append(cast_to(evaluate(rows, values[f.name]), f))
        else:
            cols.append(rows.column(f.name))
    return pa.Table.from_arrays(cols, schema=target.schema)


def cast_to(values: pa.ChunkedArray | pa.Array, f: pa.Field) -> pa.ChunkedArray | pa.Array:
    """``values`` cast to ``f``'s type (safe cast: an overflow or a lossy cast is a
    ``ConfigError``, nothing written)."""
    if values.type == f.type:
        return values
    try:
        return pc.cast(values, f.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise ConfigError(
            f"a value for column {f.name!r} does not fit its type {f.type}: {e}"
        ) from e
