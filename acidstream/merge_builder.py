"""The MERGE builder of the Table handle: ``t.merge(source, on=...)`` then WHEN clauses,
then ``execute()``, as delta-rs's ``TableMerger`` (keyword-only arguments).

    result = (
        t.merge(changes, on=["id"], source_alias="src", target_alias="tgt")
        .when_matched_delete(condition="src.op = 'd'")
        .when_matched_update_all()
        .when_not_matched_insert_all(condition="src.op <> 'd'")
        .execute(idempotency_key="batch-17")
    )

Each ``when_*`` returns a new builder (the builder is immutable, so a partial one can be
reused). Nothing is read or written before :meth:`MergeBuilder.execute`. Runs on the
driver side (the calling process).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from acidstream.acid.errors import ConfigError
from acidstream.mutation import (
    MatchedDelete,
    MatchedUpdate,
    MergeResult,
    MergeSpec,
    NotMatchedInsert,
)
from acidstream.mutation.expressions import Expr
from acidstream.mutation.merge import Clause, source_table
from acidstream.sinks.spark_merge import is_spark_dataframe, spark_merge_rows, spark_source_schema

__all__ = ["MergeBuilder"]


class MergeBuilder:
    """A MERGE being described; made by :meth:`acidstream.Table.merge`.

    Args:
        run: runs the finished spec (the Table handle's: name, metastore, namespace).
        source: a pyarrow ``Table``/``RecordBatch``/``RecordBatchReader``, a pandas
            ``DataFrame``, or a Spark ``DataFrame`` (then the join runs on Spark and its
            executors write the files: ``acidstream.sinks.spark_merge``); column names
            are matched case-insensitively, and source columns the table lacks are
            ignored by the ``*_all`` clauses.
        on: the key columns (named alike in the source and the table), one name, or a
            SQL join condition of equalities ``"src.a = tgt.b AND src.c = tgt.d"``.
        source_alias / target_alias: the qualifiers of conditions and values
            (``src.col``, ``tgt.col``; ``pc.field("src.col")`` in a pyarrow expression).
    """

    def __init__(
        self,
        run: Callable[..., MergeResult],
        source: Any,
        *,
        on: Sequence[str] | str,
        source_alias: str = "src",
        target_alias: str = "tgt",
    ) -> None:
        self._run = run
        # A Spark DataFrame stays where it is (the join runs on Spark at execute); the spec
        # gets its schema, which is what the clauses are compiled against.
        self._spark_source = source if is_spark_dataframe(source) else None
        self._spec = MergeSpec(
            source=(
                spark_source_schema(source).empty_table()
                if self._spark_source is not None
                else source_table(source)
            ),
            on=on if isinstance(on, str) else tuple(on),
            source_alias=source_alias,
            target_alias=target_alias,
        )

    def _with(self, clause: Clause) -> MergeBuilder:
        new = copy.copy(self)  # the builder is immutable: the old one keeps its clauses
        new._spec = dataclasses.replace(self._spec, clauses=(*self._spec.clauses, clause))
        return new

    @property
    def spec(self) -> MergeSpec:
        """What has been described so far."""
        return self._spec

    def when_matched_update(
        self, *, set: Mapping[str, Expr], condition: Expr | None = None
    ) -> MergeBuilder:
        """``WHEN MATCHED [AND condition] THEN UPDATE SET col = value, ...``."""
        return self._with(MatchedUpdate(set=dict(set), condition=condition))

    def when_matched_update_all(
        self, *, except_columns: Sequence[str] = (), condition: Expr | None = None
    ) -> MergeBuilder:
        """``WHEN MATCHED THEN UPDATE SET *``: every table column the source has (by name),
        except ``except_columns``."""
        if isinstance(except_columns, str):
            raise ConfigError("except_columns is a list of column names")
        return self._with(MatchedUpdate(all_except=tuple(except_columns), condition=condition))

    def when_matched_delete(self, *, condition: Expr | None = None) -> MergeBuilder:
        """``WHEN MATCHED [AND condition] THEN DELETE``."""
        return self._with(MatchedDelete(condition=condition))

    def when_not_matched_insert(
        self, *, values: Mapping[str, Expr], condition: Expr | None = None
    ) -> MergeBuilder:
        """``WHEN NOT MATCHED [AND condition] THEN INSERT``: ``values`` by table column
        (columns not named are NULL); values see only the source (``src.col``)."""
        return self._with(NotMatchedInsert(values=dict(values), condition=condition))

    def when_not_matched_insert_all(self, *, condition: Expr | None = None) -> MergeBuilder:
        """``WHEN NOT MATCHED THEN INSERT *``: every table column from the source column of
        its name (NULL where the source has none)."""
        return self._with(NotMatchedInsert(insert_all=True, condition=condition))

    def execute(self, *, idempotency_key: str | None = None, retries: int = 0) -> MergeResult:
        """Run the MERGE in one txn.

        Args:
            idempotency_key: stored with the commit; a later ``execute`` with the same key
                returns the first result (``replayed=True``) and writes nothing.
            retries: on a commit conflict, start over this many times (a new snapshot).

        Raises:
            ConfigError: unknown columns, bad expressions, no clause (before any txn).
            CardinalityViolationError: a target row matched by two source rows.
            CommitConflictError: a concurrent mutation of a partition won, retries used up.
        """
        if self._spark_source is not None:
            engine = functools.partial(spark_merge_rows, source=self._spark_source)
            return self._run(
                self._spec, retries=retries, idempotency_key=idempotency_key, engine=engine
            )
        return self._run(self._spec, retries=retries, idempotency_key=idempotency_key)

    def __repr__(self) -> str:
        s = self._spec
        rows = "a Spark DataFrame of" if self._spark_source is not None else s.source.num_rows
        return f"MergeBuilder(on={list(s.on)}, {rows} source rows, {len(s.clauses)} clauses)"
