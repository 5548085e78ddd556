"""Hive's ``ListBucketingPruner``: which list-bucketing directories a filter may need.

A partition stored with list bucketing (:mod:`acidstream.acid.list_bucketing`) keeps the rows of
each declared skewed tuple in its own directory inside every delta/base and all other
rows in the default directory. A read with a filter on the skewed columns then needs
only some of those directories. The rules are Hive's (spec §8, ``ListBucketingPruner``
and ``ListBucketingPrunerUtils``):

1. Each skewed column's declared unique values plus "other" give a cross product of
   cells.
2. The filter is evaluated on each cell with 3-valued logic: only ``=`` (and ``IN`` as an
   OR of ``=``), AND, OR and NOT on skewed columns are understood; anything else is
   unknown. On an "other" cell, ``col = v`` is false when ``v`` is one of the column's
   declared values and unknown otherwise.
3. A declared tuple's directory is kept unless its cell is false.
4. The default directory is skipped only when every cell that is not a declared tuple
   is false.
5. Nothing selected, or any error: a full scan.

Values are compared as Hive's text (:func:`acidstream.acid.hive_text.hive_text`), the text the
writers compare with the declared tuples when they place a row, after casting the
filter's value to the column's type. Only column types whose text is a faithful image of
equality are pruned on (integers, boolean, string, varchar, date, decimal); for others
(floating point: ``-0.0 = 0.0`` yet their texts differ) a comparison is unknown.

Pruning only skips files; the rows of the files read are still filtered, so a pruned read
returns exactly the rows of an unpruned one.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from acidstream.acid.directory import AcidDir, AcidState, DataFile
from acidstream.acid.hive_text import hive_text
from acidstream.acid.list_bucketing import SkewedInfo
from acidstream.acid.partitions import Partition, PartitionValues
from acidstream.acid.schema import HiveType, TableSchema

__all__ = [
    "MAX_CELLS",
    "And",
    "Eq",
    "Expr",
    "In",
    "LbSelection",
    "ListBucketingPruner",
    "Not",
    "Opaque",
    "Or",
    "evaluate_cell",
    "from_predicates",
    "partition_skews",
    "select_dirs",
]

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------ filter model


@dataclass(frozen=True)
class Eq:
    """``column = value`` (a Python value of the column's type)."""

    column: str
    value: Any


@dataclass(frozen=True)
class In:
    """``column IN (values)``: an OR of :class:`Eq`."""

    column: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class And:
    children: tuple[Expr, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Expr, ...]


@dataclass(frozen=True)
class Not:
    child: Expr


@dataclass(frozen=True)
class Opaque:
    """Any condition the pruner does not understand (unknown on every cell)."""

    what: str = ""


Expr = Eq | In | And | Or | Not | Opaque


def from_predicates(preds: Iterable[Sequence[Any]]) -> Expr:
    """The AND of ``acidstream.acid.read_plan`` predicates ``(column, op, value)`` as an :data:`Expr`:
    ``=``/``==`` and ``in`` are understood, ``!=`` and ``not in`` as their NOT, the rest
    is :class:`Opaque`."""
    out: list[Expr] = []
    for p in preds:
        if len(p) != 3:
            out.append(Opaque(repr(p)))
            continue
        col, op, value = str(p[0]).lower(), str(p[1]).strip().lower(), p[2]
        if op in ("=", "=="):
            out.append(Eq(col, value))
        elif op == "!=":
            out.append(Not(Eq(col, value)))
        elif op in ("in", "not in") and isinstance(value, (list, tuple, set, frozenset)):
            e: Expr = In(col, tuple(value))
            out.append(e if op == "in" else Not(e))
        else:
            out.append(Opaque(f"{col} {op}"))
    return And(tuple(out))


# --------------------------------------------------------------------- cell evaluation

# The value of a cell's column that matches none of its declared values.
_OTHER = None

# Column kinds whose Hive text is equal exactly when the values compare equal.
_TEXT_KINDS = frozenset(
    {"boolean", "tinyint", "smallint", "int", "bigint", "string", "varchar", "date", "decimal"}
)

# Above this many cells (the cross product grows with every skewed column) a full scan.
MAX_CELLS = 100_000

# (column, value) -> Hive's text of the value cast to the column's type; None: unknown.
TextOf = Callable[[str, Any], str | None]


def text_of_schema(schema: TableSchema) -> TextOf:
    """Hive's text of a filter value for a column of ``schema``, as the writers print the
    column's values; ``None`` (unknown) when the value does not cast exactly, is NULL, or
    the column's type is not one whose text is a faithful image of equality."""
    types: dict[str, HiveType] = {n.lower(): t for n, t in schema.columns}
    memo: dict[tuple[str, type, Any], str | None] = {}

    def text(col: str, value: Any) -> str | None:
        # Every cell asks again for the same few values: print each once.
        try:
            key = (col, type(value), value)
            if key in memo:
                return memo[key]
        except TypeError:  # an unhashable value
            return _text(col, value)
        out = memo[key] = _text(col, value)
        return out

    def _text(col: str, value: Any) -> str | None:
        ht = types.get(col)
        if ht is None or ht.kind not in _TEXT_KINDS or value is None:
            return None
        if isinstance(value, bool) != (ht.kind == "boolean"):
            return None  # True = 1 in Python, not in a filter on a Hive column
        try:
            arr = pa.array([value]).cast(ht.to_arrow(), safe=True)
            out = hive_text(arr, ht)[0].as_py()
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return None
        return out if isinstance(out, str) else None

    return text


def evaluate_cell(
    expr: Expr,
    cell: Sequence[str | None],
    *,
    col_index: Mapping[str, int],
    uniques: Sequence[frozenset[str]],
    text: TextOf,
) -> bool | None:
    """``expr`` on one cell (a declared text per skewed column, or ``None`` for "other"):
    True, False or None (unknown), as ``ListBucketingPrunerUtils`` evaluates it."""
    if isinstance(expr, Eq):
        i = col_index.get(expr.column.lower())
        if i is None:
            return None  # not a skewed column
        t = text(expr.column.lower(), expr.value)
        if t is None:
            return None
        c = cell[i]
        if c is not _OTHER:
            return t == c
        return False if t in uniques[i] else None
    if isinstance(expr, In):
        return _or(
            evaluate_cell(Eq(expr.column, v), cell, col_index=col_index, uniques=uniques, text=text)
            for v in expr.values
        )
    if isinstance(expr, And):
        return _and(
            evaluate_cell(c, cell, col_index=col_index, uniques=uniques, text=text)
            for c in expr.children
        )
    if isinstance(expr, Or):
        return _or(
            evaluate_cell(c, cell, col_index=col_index, uniques=uniques, text=text)
            for c in expr.children
        )
    if isinstance(expr, Not):
        r = evaluate_cell(expr.child, cell, col_index=col_index, uniques=uniques, text=text)
        return None if r is None else not r
    return None


def _and(results: Iterable[bool | None]) -> bool | None:
    unknown = False
    for r in results:
        if r is False:
            return False
        unknown = unknown or r is None
    return None if unknown else True


def _or(results: Iterable[bool | None]) -> bool | None:
    unknown = False
    for r in results:
        if r is True:
            return True
        unknown = unknown or r is None
    return None if unknown else False


# ------------------------------------------------------------------------------ pruning


@dataclass(frozen=True)
class LbSelection:
    """The list-bucketing directories a read needs of one partition.

    ``kept`` are read; ``known`` are all directories the partition's definition names.
    A file in a directory the definition does not name (or directly in the delta) is
    always read.
    """

    kept: frozenset[str]
    known: frozenset[str]

    def keeps(self, lb_dir: str) -> bool:
        """Whether a file in ``lb_dir`` (relative to its delta/base) is read."""
        return not lb_dir or lb_dir in self.kept or lb_dir not in self.known


def select_dirs(info: SkewedInfo, expr: Expr, text: TextOf) -> LbSelection | None:
    """Hive's ``ListBucketingPruner.prune`` for one partition: the directories to read,
    or ``None`` for a full scan (not list-bucketed, nothing selected, too many cells, or
    any error)."""
    if not info.is_list_bucketed:
        return None
    try:
        n = len(info.col_names)
        col_index = {c.lower(): i for i, c in enumerate(info.col_names)}
        ordered: list[list[str]] = [[] for _ in range(n)]
        for tup in info.col_values:
            for i, v in enumerate(tup):
                if v not in ordered[i]:
                    ordered[i].append(v)
        cells = 1
        for vals in ordered:
            cells *= len(vals) + 1
        if cells > MAX_CELLS:
            log.info("list bucketing: %d cells, more than %d: full scan", cells, MAX_CELLS)
            return None
        uniques = [frozenset(v) for v in ordered]
        declared = set(info.col_values)
        kept: set[str] = set()
        default_needed = False
        axes: list[list[str | None]] = [[*vals, _OTHER] for vals in ordered]
        for cell in itertools.product(*axes):
            r = evaluate_cell(expr, cell, col_index=col_index, uniques=uniques, text=text)
            if r is False:
                continue
            if _OTHER not in cell and cell in declared:
                kept.add(info.dir_of(tuple(c for c in cell if c is not None)))
            else:
                default_needed = True
        if default_needed:
            kept.add(info.default_dir)
        if not kept:
            return None  # Hive: nothing selected means a full scan
        return LbSelection(frozenset(kept), frozenset(info.all_dirs()))
    except Exception as e:  # Hive's rule 5: any error in pruning means a full scan
        log.warning("list bucketing pruning failed, reading every directory: %s", e)
        return None


def _prune_dir(d: AcidDir, sel: LbSelection) -> AcidDir:
    files: tuple[DataFile, ...] = tuple(f for f in d.files if sel.keeps(f.lb_dir))
    return d if len(files) == len(d.files) else dataclasses.replace(d, files=files)


def prune_state(state: AcidState, sel: LbSelection | None) -> AcidState:
    """``state`` without the insert files of the directories ``sel`` does not keep
    (delete deltas are untouched: a delete event may hit a row of any directory)."""
    if sel is None:
        return state
    base = _prune_dir(state.base, sel) if state.base is not None else None
    deltas = tuple(d if d.is_delete else _prune_dir(d, sel) for d in state.deltas)
    return dataclasses.replace(state, base=base, deltas=deltas)


class _PartitionLike(Protocol):
    @property
    def values(self) -> tuple[str | None, ...]: ...

    @property
    def skewed(self) -> SkewedInfo | None: ...


def partition_skews(
    partition_keys: Sequence[str],
    partitions: Iterable[_PartitionLike],
    table_skew: SkewedInfo | None,
) -> dict[PartitionValues, SkewedInfo]:
    """Each partition's own list bucketing by partition values (the catalog's
    ``PartitionInfo.values`` / ``.skewed``, each the copy the partition was created with);
    an unpartitioned table's is the table's, under ``()``."""
    if not partition_keys:
        return {(): table_skew} if table_skew is not None else {}
    keys = [k.lower() for k in partition_keys]
    return {
        tuple(zip(keys, p.values, strict=True)): p.skewed
        for p in partitions
        if p.skewed is not None
    }


@dataclass(frozen=True)
class ListBucketingPruner:
    """List bucketing of a read: each partition's own :class:`SkewedInfo` (by partition
    values; a partition missing here has none) and the filter to prune with.

    Picklable (the Spark source builds it on the driver). Without ``schema`` or ``expr``
    nothing is pruned, but list-bucketing directories named by location maps are still
    recognised.
    """

    skews: Mapping[PartitionValues, SkewedInfo] = field(default_factory=dict)
    schema: TableSchema | None = None
    expr: Expr | None = None

    def skew_of(self, partition: Partition) -> SkewedInfo | None:
        info = self.skews.get(partition.values)
        return info if info is not None and info.is_list_bucketed else None

    def location_dirs(self, partition: Partition) -> tuple[str, ...]:
        """The partition's list-bucketing directories (for ``get_acid_state``)."""
        info = self.skew_of(partition)
        return info.all_dirs() if info is not None else ()

    def selection(self, partition: Partition) -> LbSelection | None:
        """The directories to read of ``partition`` (``None``: all)."""
        info = self.skew_of(partition)
        if info is None or self.schema is None or self.expr is None:
            return None
        return select_dirs(info, self.expr, text_of_schema(self.schema))

    def prune(self, partition: Partition, state: AcidState) -> AcidState:
        """``state`` of ``partition`` without the files of directories the filter skips."""
        return prune_state(state, self.selection(partition))
