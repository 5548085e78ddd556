"""Row placement: which directory and bucket file a row goes to, and the writer for that file.

Every writer (``StreamingConnection``, the Spark sink's executor tasks, the HTTP server,
the compactor) places rows through this one module:

- the partition directory from the partition values (Hive's ``makePartName``, through the
  one codec in :mod:`acid.partition_name`);
- the bucket from the bucketing columns (Hive's hash, :mod:`acid.bucket_hash`);
- the delta directory and bucket file name (:mod:`acid.layout`) and the
  :class:`~acid.writer.AcidFileWriter` that writes it.

List-bucketing directories (skewed values stored as directories) are to be added here,
in :meth:`Placement.bucket_file`, so that no writer changes.

:class:`TableLayout` is a small frozen, picklable value: the Spark sink ships it to its
executors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute

from acid import layout
from acid.bucket_hash import bucket_number
from acid.errors import ConfigError, SerializationError
from acid.partition_name import make_partition_name
from acid.schema import HiveType, TableSchema
from acid.storage import Storage
from acid.writer import AcidFileWriter, OrcWriterOptions

__all__ = ["Placement", "TableLayout"]


class _TableLike(Protocol):
    @property
    def location(self) -> str | None: ...
    @property
    def columns(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def partition_names(self) -> tuple[str, ...]: ...
    @property
    def bucket_cols(self) -> tuple[str, ...]: ...
    @property
    def num_buckets(self) -> int: ...
    @property
    def bucketing_version(self) -> int: ...
    @property
    def full_name(self) -> str: ...


@dataclass(frozen=True, kw_only=True)
class TableLayout:
    """What placing rows needs to know of a table (picklable).

    Attributes:
        location: the table directory (absolute path or URL).
        columns: ``(name, hive type)`` of the data columns, in table order.
        partition_keys: partition column names, in order.
        bucket_cols: bucketing columns (empty: not bucketed).
        num_buckets: number of buckets (``<= 0``: not bucketed).
        bucketing_version: Hive's ``bucketing_version`` (1 or 2).
    """

    location: str
    columns: tuple[tuple[str, str], ...]
    partition_keys: tuple[str, ...] = ()
    bucket_cols: tuple[str, ...] = ()
    num_buckets: int = 0
    bucketing_version: int = 2

    @classmethod
    def of(cls, table: _TableLike) -> TableLayout:
        """The layout of a catalog table (``txn.catalog.TableDef`` or alike)."""
        if not table.location:
            raise ConfigError(f"table {table.full_name} has no location")
        return cls(
            location=table.location,
            columns=tuple(table.columns),
            partition_keys=tuple(table.partition_names),
            bucket_cols=tuple(table.bucket_cols),
            num_buckets=table.num_buckets,
            bucketing_version=table.bucketing_version,
        )

    @property
    def schema(self) -> TableSchema:
        return TableSchema.of(list(self.columns))

    @property
    def is_bucketed(self) -> bool:
        return self.num_buckets > 0 and bool(self.bucket_cols)


class Placement:
    """Places the rows of one table: partition directory, bucket, file and writer.

    Holds the table's storage and caches partition names, so it is built once per
    connection (or per executor task) and used for every row.
    """

    def __init__(self, table: TableLayout) -> None:
        self.table = table
        self.schema = table.schema
        self.storage, self.root = Storage.for_path(table.location)
        names = list(self.schema.names)
        self._bucket_idx: list[int] = []
        self._bucket_types: list[HiveType] = []
        if table.is_bucketed:
            try:
                self._bucket_idx = [names.index(c) for c in table.bucket_cols]
            except ValueError as e:
                raise ConfigError(f"bucketing column not in the table: {e}") from e
            self._bucket_types = [self.schema.columns[i][1] for i in self._bucket_idx]
        self._names: dict[tuple[str | None, ...], str] = {}

    @property
    def is_bucketed(self) -> bool:
        return bool(self._bucket_idx)

    # ------------------------------------------------------------------ rows
    def partition_dir(self, values: Sequence[str | None]) -> str:
        """The partition directory (``k1=v1/k2=v2``, relative to the table) for these
        values; ``""`` for an unpartitioned table. Bad values raise ``SerializationError``."""
        keys = self.table.partition_keys
        if not keys:
            if values:
                raise SerializationError(
                    f"partition values given for an unpartitioned table: {list(values)}"
                )
            return ""
        key = tuple(values)
        name = self._names.get(key)
        if name is None:
            if len(key) != len(keys):
                raise SerializationError(
                    f"record gives {len(key)} partition values, the table has {len(keys)}"
                )
            name = make_partition_name(keys, [None if v == "" else v for v in key])
            self._names[key] = name
        return name

    def bucket_of(self, row: Sequence[Any]) -> int:
        """Hive's bucket of a row (tuple in table column order); 0 when not bucketed."""
        if not self._bucket_idx:
            return 0
        return bucket_number(
            [row[i] for i in self._bucket_idx],
            self._bucket_types,
            self.table.num_buckets,
            bucketing_version=self.table.bucketing_version,
        )

    def buckets_of(self, data: pa.Table) -> list[int]:
        """The bucket of every row of an Arrow table (columns in table order)."""
        if not self._bucket_idx:
            return [0] * data.num_rows
        cols = [data.column(i).to_pylist() for i in self._bucket_idx]
        return [
            bucket_number(
                list(vals),
                self._bucket_types,
                self.table.num_buckets,
                bucketing_version=self.table.bucketing_version,
            )
            for vals in zip(*cols, strict=True)
        ]

    def partition_groups(
        self, partitions: pa.Table
    ) -> list[tuple[tuple[str | None, ...], pa.Int64Array]]:
        """Rows of a block grouped by their partition values (one string column per
        partition key, row-aligned with the block): ``(values, row positions)``."""
        keys = list(partitions.column_names)
        grouped = (
            partitions.append_column("__row", pa.array(range(partitions.num_rows), pa.int64()))
            .group_by(keys, use_threads=False)
            .aggregate([("__row", "list")])
        )
        values = zip(*(grouped.column(k).to_pylist() for k in keys), strict=True)
        rows = grouped.column("__row_list").combine_chunks()
        return [(tuple(v), rows[i].values) for i, v in enumerate(values)]

    def bucket_groups(self, data: pa.Table) -> list[tuple[int, pa.Table]]:
        """The rows of an Arrow table (columns in table order) split by bucket."""
        if not self._bucket_idx:
            return [(0, data)]
        buckets = pa.array(self.buckets_of(data), pa.int32())
        return [
            (b, data.filter(pa.compute.equal(buckets, b))) for b in sorted(set(buckets.to_pylist()))
        ]

    # ------------------------------------------------------------------ files
    def partition_path(self, part: str) -> str:
        """The absolute directory of a partition (``""``: the table directory)."""
        return self.storage.join(self.root, part) if part else self.root

    def bucket_file(
        self, part: str, min_write_id: int, max_write_id: int, statement_id: int, bucket: int
    ) -> str:
        """``<table>/[<part>/]delta_<min>_<max>[_<stmt>]/bucket_<N>``."""
        d = layout.delta_dir_name(min_write_id, max_write_id, statement_id=statement_id)
        return self.storage.join(self.partition_path(part), d, layout.bucket_file_name(bucket))

    def insert_writer(
        self,
        part: str,
        bucket: int,
        *,
        min_write_id: int,
        max_write_id: int,
        statement_id: int,
        streaming: bool,
        options: OrcWriterOptions,
    ) -> AcidFileWriter:
        """The writer of one insert-delta bucket file, on the columnar engine.

        ``streaming`` files (more than one txn, or a file that must be readable at each
        txn boundary) get an intermediate footer and a side-file entry per flush where the
        storage can flush a file being written (local files, HDFS); elsewhere the caller
        must keep one txn per file.
        """
        path = self.bucket_file(part, min_write_id, max_write_id, statement_id, bucket)
        return AcidFileWriter(
            self.storage,
            path,
            self.schema,
            kind="insert",
            bucket_id=bucket,
            statement_id=statement_id,
            streaming=streaming,
            side_file=streaming and self.storage.supports_flush,
            options=options,
            engine="arrow",
        )
