"""MERGE: one vectorised join of the source keys against the target's (key, ROW__ID), the
cardinality check, then each WHEN clause's rows. Runs on the driver side.

The target is read in the mutation's snapshot with only what the source can match:
partitions pruned by the source's partition values when the keys include every partition
column, buckets pruned to those the source keys hash to when the table is bucketed on key
columns, and rows pre-filtered with one ``is_in`` per key column. The lookup itself is
``pa.Table.join`` of (key columns, row index) on both sides, never a predicate per key.

Semantics as SQL's MERGE (Hive's ``MergeRewriter``): a (source row, target row) pair
matches when the keys are equal (NULL keys never match); a matched pair takes the first
WHEN MATCHED clause whose condition holds, an unmatched source row the first WHEN NOT
MATCHED clause whose condition holds; target rows no source row matches are untouched.
With any WHEN MATCHED clause, a target row matched by two source rows raises
``CardinalityViolationError`` (``hive.merge.cardinality.check``): nothing is written and
the txn is aborted.

Statement ids (Hive treats the WHEN branches as statements of one txn): the INSERT clauses
first (``delta_W_W_0000``...), then each UPDATE clause (its delete events in
``delete_delta_W_W_SSSS``, its new versions in ``delta_W_W_SSSS``), then each DELETE clause
(``delete_delta_W_W_SSSS``): the seed's ``WHEN MATCHED UPDATE ... WHEN NOT MATCHED INSERT``
gives ``delta_W_W_0000`` (insert), ``delete_delta_W_W_0001`` + ``delta_W_W_0001``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
import sqlglot.errors
from sqlglot import exp

from acidstream.acid import faults
from acidstream.acid.bucket_hash import bucket_numbers_arrow
from acidstream.acid.errors import CardinalityViolationError, ConfigError
from acidstream.acid.lookup_cache import LookupCache
from acidstream.acid.read_plan import expression_columns
from acidstream.mutation.expressions import Expr, compile_predicate, compile_value, evaluate, mask
from acidstream.mutation.ops import cast_to
from acidstream.mutation.results import MergeResult
from acidstream.mutation.run import MutationRun
from acidstream.mutation.target import ROW_ID_COLUMN, Target, key_values, read_rows
from acidstream.mutation.write import by_partition, key_buckets, old_buckets

__all__ = [
    "ClauseRows",
    "MatchedDelete",
    "MatchedUpdate",
    "Matches",
    "MergePlan",
    "MergeSpec",
    "NotMatchedInsert",
    "source_table",
]


@dataclass(frozen=True, kw_only=True)
class MatchedUpdate:
    """``WHEN MATCHED [AND condition] THEN UPDATE SET col = value, ...``; ``all_except``
    set: ``UPDATE SET *`` (every target column the source has, by name), less those."""

    set: Mapping[str, Expr] = field(default_factory=dict)
    condition: Expr | None = None
    all_except: tuple[str, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class MatchedDelete:
    """``WHEN MATCHED [AND condition] THEN DELETE``."""

    condition: Expr | None = None


@dataclass(frozen=True, kw_only=True)
class NotMatchedInsert:
    """``WHEN NOT MATCHED [AND condition] THEN INSERT``: ``values`` by target column (the
    others NULL), or ``insert_all``: every target column the source has, by name."""

    values: Mapping[str, Expr] = field(default_factory=dict)
    condition: Expr | None = None
    insert_all: bool = False


Clause = MatchedUpdate | MatchedDelete | NotMatchedInsert


@dataclass(frozen=True, kw_only=True)
class MergeSpec:
    """A MERGE as the builder collected it."""

    source: pa.Table
    on: tuple[str, ...] | str
    source_alias: str = "src"
    target_alias: str = "tgt"
    clauses: tuple[Clause, ...] = ()


def source_table(source: Any) -> pa.Table:
    """A MERGE source as an Arrow table with lower-case column names: a ``pyarrow.Table``,
    ``RecordBatch``, ``RecordBatchReader`` or a pandas ``DataFrame``.

    Raises:
        ConfigError: another kind of source, or two columns whose names differ only in case.
    """
    if isinstance(source, pa.Table):
        t = source
    elif isinstance(source, pa.RecordBatch):
        t = pa.Table.from_batches([source])
    elif isinstance(source, pa.RecordBatchReader):
        t = source.read_all()
    elif type(source).__module__.startswith("pandas") and hasattr(source, "columns"):
        t = pa.Table.from_pandas(source, preserve_index=False)
    else:
        raise ConfigError(
            "a MERGE source is a pyarrow Table, RecordBatch or RecordBatchReader, or a pandas "
            f"DataFrame, not {type(source).__name__}"
        )
    names = [n.lower() for n in t.column_names]
    if len(set(names)) != len(names):
        raise ConfigError(f"source columns differ only in case: {t.column_names}")
    return t.rename_columns(names)


def _qualified_schema(schema: pa.Schema, alias: str) -> pa.Schema:
    return pa.schema([f.with_name(f"{alias}.{f.name}") for f in schema])


def _qualified(table: pa.Table, alias: str) -> pa.Table:
    return table.rename_columns([f"{alias}.{n}" for n in table.column_names])


@dataclass(frozen=True)
class _Compiled:
    """A WHEN clause compiled: its kind, statement id, condition and values (by column)."""

    kind: str  # "insert", "update" or "delete"
    condition: pc.Expression | None
    values: dict[str, pc.Expression]
    statement_id: int = -1


@dataclass(frozen=True, kw_only=True)
class Matches:
    """What :meth:`MergePlan.find` found: the target rows read (with their ROW__IDs) and
    the matched pairs (``__t``: row of ``target``, ``__s``: row of the source), sorted
    by source row."""

    target: pa.Table
    pairs: pa.Table


@dataclass(frozen=True, kw_only=True)
class ClauseRows:
    """What one WHEN clause does to a batch of rows (:meth:`MergePlan.matched_rows`,
    :meth:`MergePlan.not_matched_rows`): the rows it takes (``mask``), and the rows it
    writes (``rows``, :attr:`MergePlan.target_schema`; ``None`` for a DELETE) with the
    bucket each keeps (``buckets``: an updated row whose bucketing columns stay; ``None``:
    Hive's hash decides)."""

    statement_id: int
    kind: str  # "insert", "update" or "delete"
    mask: pa.Array
    rows: pa.Table | None = None
    buckets: pa.Array | None = None


# The statement ids go to the INSERT clauses first, then UPDATE, then DELETE (the seed's
# example: the INSERT clause of WHEN MATCHED UPDATE / WHEN NOT MATCHED INSERT is 0000).
_STATEMENT_ORDER = {"insert": 0, "update": 1, "delete": 2}


class MergePlan:
    """A MERGE checked against the table's and the source's columns before any txn; run
    it with :meth:`__call__` inside :func:`~acidstream.mutation.run.run_mutation`."""

    def __init__(self, spec: MergeSpec, target_schema: pa.Schema) -> None:
        if not spec.clauses:
            raise ConfigError("a MERGE needs at least one WHEN clause")
        s, ta = spec.source_alias.lower(), spec.target_alias.lower()
        if not s or not ta or s == ta:
            raise ConfigError(f"source and target aliases must differ: {s!r}, {ta!r}")
        self.src_alias, self.tgt_alias = s, ta
        self.source = spec.source
        self.target_schema = target_schema
        self._tnames = {f.name.lower(): f for f in target_schema}
        self._snames = {f.name: f for f in self.source.schema}
        self.keys = self._keys(spec.on, self._tnames, self._snames)
        self.source_schema = _qualified_schema(self.source.schema, s)
        self.joined_schema = pa.schema(
            list(_qualified_schema(target_schema, ta)) + list(self.source_schema)
        )
        compiled = [self._compile(c) for c in spec.clauses]
        order = sorted(range(len(compiled)), key=lambda i: (_STATEMENT_ORDER[compiled[i].kind], i))
        for stmt, i in enumerate(order):
            compiled[i] = dataclasses.replace(compiled[i], statement_id=stmt)
        # Matching keeps the caller's order: the first clause whose condition holds wins.
        self.matched = [c for c in compiled if c.kind != "insert"]
        self.not_matched = [c for c in compiled if c.kind == "insert"]

    # -------------------------------------------------------------- clauses
    def _column(self, name: str, what: str) -> pa.Field:
        f = self._tnames.get(name.lower())
        if f is None:
            raise ConfigError(f"{what} names unknown column {name!r}")
        return f

    def _from_source(self, skip: Collection[str] = ()) -> dict[str, pc.Expression]:
        """``*``: every target column from the source column of its name."""
        return {
            f.name: pc.field(f"{self.src_alias}.{f.name}")
            for f in self.target_schema
            if f.name in self._snames and f.name not in skip
        }

    def _compile(self, c: Clause) -> _Compiled:
        s = self.src_alias
        both = {self.tgt_alias: f"{self.tgt_alias}.", s: f"{s}."}
        if isinstance(c, NotMatchedInsert):
            # An INSERT's values and condition see the source row only.
            only_src = {s: f"{s}."}
            values = self._from_source() if c.insert_all else {}
            for col, v in c.values.items():
                f = self._column(col, "INSERT")
                values[f.name] = compile_value(
                    v, self.source_schema, target=f, qualifiers=only_src, default_qualifier=s
                )
            if not values:
                raise ConfigError("a WHEN NOT MATCHED INSERT clause inserts no column")
            for name, v in values.items():
                compile_value(v, self.source_schema, target=self._tnames[name])
            cond = None
            if c.condition is not None:
                cond = compile_predicate(
                    c.condition, self.source_schema, qualifiers=only_src, default_qualifier=s
                )
            return _Compiled("insert", cond, values)
        cond = None
        if c.condition is not None:
            cond = compile_predicate(c.condition, self.joined_schema, qualifiers=both)
        if isinstance(c, MatchedDelete):
            return _Compiled("delete", cond, {})
        if not isinstance(c, MatchedUpdate):
            raise ConfigError(f"unknown MERGE clause {c!r}")
        values = {}
        if c.all_except is not None:
            skip = {self._column(x, "except_columns").name for x in c.all_except}
            values = self._from_source(skip)
        for col, v in c.set.items():
            f = self._column(col, "UPDATE")
            values[f.name] = compile_value(v, self.joined_schema, target=f, qualifiers=both)
        if not values:
            raise ConfigError("a WHEN MATCHED UPDATE clause sets no column")
        for name, v in values.items():
            compile_value(v, self.joined_schema, target=self._tnames[name])
        return _Compiled("update", cond, values)

    # -------------------------------------------------------------- keys
    def _keys(
        self,
        on: tuple[str, ...] | str,
        tnames: dict[str, pa.Field],
        snames: dict[str, pa.Field],
    ) -> list[tuple[str, str]]:
        """``(source column, target column)`` pairs the rows match on: key columns named
        alike on both sides, or SQL equalities ``src.a = tgt.b`` joined by AND."""
        if isinstance(on, str) and not _IDENTIFIER.fullmatch(on.strip()):
            pairs = _on_condition(on, self.src_alias, self.tgt_alias)
        else:
            cols = [on] if isinstance(on, str) else list(on)
            pairs = [(c.strip().lower(), c.strip().lower()) for c in cols]
        if not pairs:
            raise ConfigError("a MERGE needs at least one key column in on=")
        for sk, tk in pairs:
            if tk not in tnames:
                raise ConfigError(f"MERGE key {tk!r} is not a column of the table")
            if sk not in snames:
                raise ConfigError(f"MERGE key {sk!r} is not a column of the source")
        if len({tk for _, tk in pairs}) != len(pairs):
            raise ConfigError(f"a MERGE key column is named twice in on={on!r}")
        return pairs

    # -------------------------------------------------------------- run
    def __call__(self, run: MutationRun) -> MergeResult:
        return self.write(run, self.find(run))

    def find(self, run: MutationRun, *, cache: LookupCache | None = None) -> Matches:
        """The target rows the source can match, read in the txn's snapshot, and the
        matched (source row, target row) pairs; raises ``CardinalityViolationError``.
        ``cache``: the key lookup's cache of the table's files (a sink's, kept from one
        batch to the next)."""
        t = run.target
        src = self.source
        skeys = pa.table(
            {tk: cast_to(src.column(sk), self.target_schema.field(tk)) for sk, tk in self.keys}
        )
        key_names = [tk for _, tk in self.keys]
        parts = t.prune(t.partitions(), self._partition_filter(t, skeys))
        buckets = self._buckets(t, skeys)
        # Only the target columns the statement uses are decoded (an UPDATE SET * never
        # reads the old values), and the key pre-filter (read_rows' own: given the keys,
        # it keeps only rows whose key columns each hold a key) runs once on them, not per file:
        # per file, Arrow rebuilt the source keys' hash set for every one of a table's
        # files (10M-row table, MERGE of 100k rows, one thread: 2.37 -> 1.50 CPU s).
        # The source keys also prune stripes and row groups (statistics, bloom filters):
        # a MERGE of a few keys decodes the row groups that can hold them, not the table.
        target = read_rows(
            t,
            parts,
            columns=self._target_columns(t),
            buckets=buckets,
            keys=skeys,
            bucket_keys=self._bucket_keys(t, skeys),
            cache=cache,
        )
        tk = target.select(key_names).append_column(
            "__t", pa.array(np.arange(target.num_rows, dtype=np.int64))
        )
        sk = skeys.append_column("__s", pa.array(np.arange(src.num_rows, dtype=np.int64)))
        tk = tk.filter(_no_null(tk, key_names))
        sk = sk.filter(_no_null(sk, key_names))
        pairs = tk.join(sk, keys=key_names, join_type="inner", use_threads=True).select(
            ["__t", "__s"]
        )
        pairs = pairs.sort_by([("__s", "ascending"), ("__t", "ascending")])
        if self.matched and pairs.num_rows:
            counts = pc.value_counts(pairs.column("__t").combine_chunks())
            worst = pc.max(counts.field("counts")).as_py()
            if worst is not None and worst > 1:
                raise CardinalityViolationError(
                    f"MERGE into {t.table.full_name}: a target row is matched by {worst} source "
                    "rows (hive.merge.cardinality.check); nothing was written"
                )
        faults.point("mutation.after_find")
        return Matches(target=target, pairs=pairs)

    def write(self, run: MutationRun, found: Matches) -> MergeResult:
        """Each WHEN clause's files for the pairs :meth:`find` found."""
        t, src, target, pairs = run.target, self.source, found.target, found.pairs
        deleted = updated = inserted = 0
        if self.matched and pairs.num_rows:
            trow, joined = self.joined_pairs(target, src, pairs)
            for a in self.matched_rows(t, joined, trow.column(ROW_ID_COLUMN)):
                hit = trow.filter(a.mask)
                for part, group in by_partition(t, hit):
                    run.files.delete_events(part, group.column(ROW_ID_COLUMN), a.statement_id)
                if a.rows is None:
                    deleted += hit.num_rows
                    continue
                run.files.insert_rows(a.rows, a.statement_id, buckets=a.buckets)
                updated += hit.num_rows
        if self.not_matched:
            matched_src = pc.is_in(
                pa.array(np.arange(src.num_rows, dtype=np.int64)),
                value_set=pairs.column("__s").combine_chunks(),
            )
            rest = _qualified(src.filter(pc.invert(matched_src)), self.src_alias)
            for a in self.not_matched_rows(rest):
                assert a.rows is not None
                run.files.insert_rows(a.rows, a.statement_id)
                inserted += a.rows.num_rows
        return MergeResult(
            rows_inserted=inserted,
            rows_updated=updated,
            rows_deleted=deleted,
            write_id=run.write_id,
        )

    def _target_columns(self, t: Target) -> list[str]:
        """The target columns the MERGE needs: the keys, the partition columns (where
        rows and their new versions go), those a WHEN MATCHED condition or SET value
        names (``tgt.c``), and those an UPDATE clause does not set (they are copied)."""
        n = len(self.target_schema)
        need = {tk for _, tk in self.keys} | set(t.partition_names)
        names, types = self.joined_schema.names, self.joined_schema.types
        for c in self.matched:
            exprs = list(c.values.values()) + ([c.condition] if c.condition is not None else [])
            for e in exprs:
                used = expression_columns(e, names, types, (), include_row_id=False)
                need |= {self.target_schema.field(i).name for i in used if i < n}
            if c.kind == "update":
                need |= {f.name for f in self.target_schema if f.name not in c.values}
        return [f.name for f in self.target_schema if f.name in need]

    # -------------------------------------------------------------- WHEN clauses
    def joined_pairs(
        self, target: pa.Table, source: pa.Table, pairs: pa.Table
    ) -> tuple[pa.Table, pa.Table]:
        """The matched pairs' target rows (with their ROW__IDs), and each joined with its
        source row in :attr:`joined_schema` (what the clauses' conditions and values read)."""
        trow = target.take(pairs.column("__t"))
        srow = source.take(pairs.column("__s"))
        have = set(trow.column_names)
        # Columns not read are named by no condition or value: NULLs stand in.
        tcols = [
            trow.column(f.name) if f.name in have else pa.nulls(trow.num_rows, f.type)
            for f in self.target_schema
        ]
        return trow, pa.Table.from_arrays(tcols + list(srow.columns), schema=self.joined_schema)

    def matched_rows(
        self, t: Target, joined: pa.Table, row_ids: pa.Array | pa.ChunkedArray
    ) -> Iterator[ClauseRows]:
        """The WHEN MATCHED clauses on matched pairs: ``joined`` (:attr:`joined_schema`)
        and the target rows' ROW__IDs. Yields each clause that takes a pair (the first
        whose condition holds), with its new versions for an UPDATE. Runs where the pairs
        are: here on the driver, in ``acidstream.sinks.spark_merge`` on executors."""
        remaining = pa.array(np.ones(joined.num_rows, dtype=bool))
        qualified = _qualified_schema(self.target_schema, self.tgt_alias)
        for c in self.matched:
            m = pc.and_(mask(joined, c.condition), remaining)
            remaining = pc.and_(remaining, pc.invert(m))
            if not pc.any(m).as_py():
                continue
            if c.kind == "delete":
                yield ClauseRows(statement_id=c.statement_id, kind=c.kind, mask=m)
                continue
            sub = joined.filter(m)
            cols = [
                cast_to(evaluate(sub, c.values[f.name]), f)
                if f.name in c.values
                else sub.column(qf.name)
                for f, qf in zip(self.target_schema, qualified, strict=True)
            ]
            keep = self._keeps_buckets(t, c.values)
            yield ClauseRows(
                statement_id=c.statement_id,
                kind=c.kind,
                mask=m,
                rows=pa.Table.from_arrays(cols, schema=self.target_schema),
                buckets=old_buckets(row_ids.filter(m)) if keep else None,
            )

    def not_matched_rows(self, rest: pa.Table) -> Iterator[ClauseRows]:
        """The WHEN NOT MATCHED clauses on unmatched source rows ``rest`` (qualified,
        :attr:`source_schema`): each clause that takes a row (the first whose condition
        holds), with the rows it inserts. Runs where the rows are, as :meth:`matched_rows`."""
        remaining = pa.array(np.ones(rest.num_rows, dtype=bool))
        for c in self.not_matched:
            if rest.num_rows == 0:
                break
            m = pc.and_(mask(rest, c.condition), remaining)
            remaining = pc.and_(remaining, pc.invert(m))
            sub = rest.filter(m)
            if sub.num_rows == 0:
                continue
            cols = [
                cast_to(evaluate(sub, c.values[f.name]), f)
                if f.name in c.values
                else pa.nulls(sub.num_rows, f.type)
                for f in self.target_schema
            ]
            rows = pa.Table.from_arrays(cols, schema=self.target_schema)
            yield ClauseRows(statement_id=c.statement_id, kind=c.kind, mask=m, rows=rows)

    # -------------------------------------------------------------- pruning
    def _partition_filter(self, t: Target, skeys: pa.Table) -> pc.Expression | None:
        """When the keys include every partition column, only the partitions holding the
        source's values can match: ``k IN (source values)`` per partition column."""
        pnames = t.partition_names
        if not pnames or not set(pnames) <= set(skeys.column_names):
            return None
        expr: pc.Expression | None = None
        for k in pnames:
            vals = pc.unique(skeys.column(k).combine_chunks()).drop_null()
            e = pc.field(k).isin(vals)
            expr = e if expr is None else expr & e
        return expr

    def _keeps_buckets(self, t: Target, values: Mapping[str, pc.Expression]) -> bool:
        """Whether an UPDATE clause's new versions stay in their rows' buckets: each
        bucketing column is left alone or set to the source key it was matched on (equal
        by the join, so its hash is too)."""
        tab = t.table
        if tab.num_buckets <= 0 or not tab.bucket_cols:
            return False
        key_of = {tk: sk for sk, tk in self.keys}
        for c in (x.lower() for x in tab.bucket_cols):
            v = values.get(c)
            if v is None:
                continue
            sk = key_of.get(c)
            if sk is None or not v.equals(pc.field(f"{self.src_alias}.{sk}")):
                return False
        return True

    def _buckets(self, t: Target, skeys: pa.Table) -> list[int] | None:
        """The buckets the source keys hash to, when the table is bucketed on key columns
        (every bucketing column a key); ``None``: read every bucket."""
        tab = t.table
        if tab.num_buckets <= 0 or not tab.bucket_cols:
            return None
        bcols = [c.lower() for c in tab.bucket_cols]
        if not set(bcols) <= set(skeys.column_names):
            return None
        return key_buckets(tab, skeys.select(bcols))

    def _bucket_keys(self, t: Target, skeys: pa.Table) -> dict[int, dict[str, pa.Array]] | None:
        """The source keys split by the bucket Hive's hash sends them to, when the table is
        bucketed on key columns of integer-like types (hashed a column at a time): a
        bucket file is then searched for its own bucket's keys only, an eighth of a
        batch's keys in an 8-bucket table (fewer stripes and row groups whose min/max
        hold one, smaller binary searches). ``None``: every file gets every key."""
        tab = t.table
        if tab.num_buckets <= 1 or not tab.bucket_cols or skeys.num_rows == 0:
            return None
        bcols = [c.lower() for c in tab.bucket_cols]
        if not set(bcols) <= set(skeys.column_names):
            return None
        types = {n.lower(): ty for n, ty in tab.schema.columns}
        hashed = bucket_numbers_arrow(
            [skeys.column(c) for c in bcols],
            [types[c] for c in bcols],
            tab.num_buckets,
            bucketing_version=tab.bucketing_version,
        )
        if hashed is None:
            return None
        order = np.argsort(hashed, kind="stable")
        cut = np.flatnonzero(np.diff(hashed[order])) + 1
        out: dict[int, dict[str, pa.Array]] = {}
        for rows in np.split(order, cut):
            part = skeys.take(pa.array(rows))
            out[int(hashed[rows[0]])] = key_values(part)
        return out


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _on_condition(text: str, src: str, tgt: str) -> list[tuple[str, str]]:
    """The key pairs of a join condition ``src.a = tgt.b [AND ...]`` (parsed by sqlglot, in
    Hive's dialect). Anything else (a constant, an OR, a comparison other than ``=``) is
    refused: filter the source instead."""
    try:
        tree = sqlglot.parse_one(text, read="hive")
    except sqlglot.errors.ParseError as e:
        raise ConfigError(f"MERGE on={text!r}: {e}") from e
    conjuncts = list(tree.flatten()) if isinstance(tree, exp.And) else [tree]
    pairs = []
    for c in conjuncts:
        while isinstance(c, exp.Paren):
            c = c.this
        if not (
            isinstance(c, exp.EQ)
            and isinstance(c.left, exp.Column)
            and isinstance(c.right, exp.Column)
        ):
            raise ConfigError(
                f"MERGE on={text!r}: only equalities of a {src} and a {tgt} column joined "
                f"by AND are supported, not {c.sql(dialect='hive')!r}"
            )
        sides = {
            c.left.table.lower(): c.left.name.lower(),
            c.right.table.lower(): c.right.name.lower(),
        }
        if set(sides) != {src, tgt}:
            raise ConfigError(
                f"MERGE on={text!r}: qualify each key with the aliases {src!r} and {tgt!r}"
            )
        pairs.append((sides[src], sides[tgt]))
    return pairs


def _no_null(t: pa.Table, names: Sequence[str]) -> pa.Array:
    m: Any = None
    for n in names:
        v = pc.is_valid(t.column(n))
        m = v if m is None else pc.and_(m, v)
    return m
