"""Spark entry points of the Python API: ``acidstream.spark.merge(table, df, on=...)``.

    import acidstream.spark

    result = (
        acidstream.spark.merge("db.t", changes_df, on=["id"])
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )

The same builder as ``acidstream.table("db.t").merge(changes_df, on=...)``: with a Spark
DataFrame as source the join runs on Spark and the executors write the delete and insert
files; this process (the driver) commits one txn (``acidstream.sinks.spark_merge``,
``docs/mutations.md``, Spark). Importing this module imports neither pyspark nor the
engine; the builder does when it is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from acidstream.acid.errors import ConfigError

if TYPE_CHECKING:
    from acidstream.merge_builder import MergeBuilder
    from acidstream.table_handle import Table

__all__ = ["merge"]


def merge(
    table: str | Table,
    source: Any,
    *,
    on: Sequence[str] | str,
    source_alias: str = "src",
    target_alias: str = "tgt",
    metastore: str | None = None,
    warehouse: str | None = None,
    namespace: str | None = None,
) -> MergeBuilder:
    """``MERGE INTO table USING source ON ...`` with a Spark DataFrame ``source``: a
    builder (add WHEN clauses, then ``execute()``), as :meth:`acidstream.Table.merge`.

    Args:
        table: a :class:`~acidstream.Table` handle, or a ``db.table`` name opened with
            ``metastore``, ``warehouse`` and ``namespace`` (as :func:`acidstream.table`).
        source: a Spark DataFrame (``pyspark.sql.DataFrame``).
        on / source_alias / target_alias: as :meth:`acidstream.Table.merge`.

    Raises:
        ConfigError: ``source`` is not a Spark DataFrame (use ``Table.merge`` for pyarrow
            and pandas sources), bad keys.
        TableNotFoundError: no such table.
    """
    from acidstream.sinks.spark_merge import is_spark_dataframe
    from acidstream.table_handle import Table

    if not is_spark_dataframe(source):
        raise ConfigError(
            "acidstream.spark.merge takes a Spark DataFrame source, not "
            f"{type(source).__name__} (Table.merge takes pyarrow and pandas sources)"
        )
    handle = (
        table
        if isinstance(table, Table)
        else Table(table, metastore=metastore, warehouse=warehouse, namespace=namespace)
    )
    return handle.merge(source, on=on, source_alias=source_alias, target_alias=target_alias)
