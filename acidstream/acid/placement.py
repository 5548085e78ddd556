"""Row placement: which directory and bucket file a row goes to, and the writer for that file.

Every writer (``StreamingConnection``, the Spark sink's executor tasks, the HTTP server,
the compactor) places rows through this one module:

- the partition directory from the partition values (Hive's ``makePartName``, through the
  one codec in :mod:`acidstream.acid.partition_name`);
- the bucket from the bucketing columns (Hive's hash, :mod:`acidstream.acid.bucket_hash`);
- the delta directory and bucket file name (:mod:`acidstream.acid.layout`) and the
  :class:`~acidstream.acid.writer.AcidFileWriter` that writes it.

- the list-bucketing directory inside the delta or base (skewed values stored as
  directories, :mod:`acidstream.acid.list_bucketing`): :meth:`Placement.lb_groups` splits a block's
  rows by directory in one vectorised pass, from the skew of the partition the rows go to
  (its own copy, taken when it was created; the table's for a partition this write
  creates). A bucket then has one file per directory, all numbered by one
  :class:`~acidstream.acid.row_keys.RowIdSequence` so ROW__IDs stay unique per (write id, bucket).

:class:`TableLayout` is a small frozen, picklable value: the Spark sink ships it to its
executors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid import layout
from acidstream.acid.bucket_hash import bucket_number, bucket_numbers_arrow
from acidstream.acid.durability import DEFAULT_DURABILITY, Durability
from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.hive_text import hive_text
from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME, SkewedInfo
from acidstream.acid.partition_name import make_partition_name, parse_partition_name
from acidstream.acid.row_keys import RowIdSequence
from acidstream.acid.schema import HiveType, TableSchema
from acidstream.acid.storage import Storage
from acidstream.acid.writer import AcidFileWriter, OrcWriterOptions

__all__ = ["Placement", "TableLayout", "list_bucketing_dirs"]


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


class _PartitionLike(Protocol):
    @property
    def name(self) -> str: ...


def _skew_of(obj: object) -> SkewedInfo | None:
    """The list-bucketing definition of a table or partition (``None`` when it has none
    or is not stored as directories)."""
    return _lb_only(getattr(obj, "skewed", None))


def _lb_only(skew: object) -> SkewedInfo | None:
    """``skew`` when it is a list-bucketing definition (stored as directories), else None."""
    return skew if isinstance(skew, SkewedInfo) and skew.is_list_bucketed else None


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
        skewed: the table's list bucketing (only when stored as directories): the layout
            of the partitions this write creates (and of an unpartitioned table).
        partition_skews: partition directory -> its own list bucketing (``None``: plain
            layout), for the partitions that existed when the layout was taken.
    """

    location: str
    columns: tuple[tuple[str, str], ...]
    partition_keys: tuple[str, ...] = ()
    bucket_cols: tuple[str, ...] = ()
    num_buckets: int = 0
    bucketing_version: int = 2
    skewed: SkewedInfo | None = None
    partition_skews: Mapping[str, SkewedInfo | None] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        table: _TableLike,
        *,
        partitions: Iterable[_PartitionLike] = (),
        partition_skews: Mapping[str, SkewedInfo] | None = None,
    ) -> TableLayout:
        """The layout of a catalog table (``acidstream.txn.catalog.TableDef`` or alike) and of its
        existing ``partitions`` (``store.list_partitions``: each keeps the list bucketing
        it was created with), or only of those with a skew of their own
        (``partition_skews``, ``store.partition_skews``: enough while the table itself is
        not list-bucketed, since every other partition then reads as the table)."""
        if not table.location:
            raise ConfigError(f"table {table.full_name} has no location")
        return cls(
            location=table.location,
            columns=tuple(table.columns),
            partition_keys=tuple(table.partition_names),
            bucket_cols=tuple(table.bucket_cols),
            num_buckets=table.num_buckets,
            bucketing_version=table.bucketing_version,
            skewed=_skew_of(table),
            partition_skews={
                **{p.name: _skew_of(p) for p in partitions},
                **{name: _lb_only(skew) for name, skew in (partition_skews or {}).items()},
            },
        )

    @property
    def schema(self) -> TableSchema:
        return TableSchema.of(list(self.columns))

    @property
    def is_bucketed(self) -> bool:
        return self.num_buckets > 0 and bool(self.bucket_cols)


def _refuse_default_dir_value(values: Sequence[str | None], skew: SkewedInfo | None) -> None:
    """Hive refuses a partition value named like the default list-bucketing directory in a
    list-bucketed partition: its directory would read as that one."""
    if skew is not None and DEFAULT_DIR_NAME in values:
        raise SerializationError(
            f"partition value {DEFAULT_DIR_NAME} is reserved in a list-bucketed table"
        )


class Placement:
    """Places the rows of one table: partition directory, bucket, file and writer.

    Holds the table's storage and caches partition names, so it is built once per
    connection (or per executor task) and used for every row. ``storage``: an open
    storage of ``table.location`` to use instead of opening one.
    """

    def __init__(
        self,
        table: TableLayout,
        *,
        storage: Storage | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.table = table
        self.schema = table.schema
        if storage is None:
            # storage_options: the filesystem's (endpoint, credentials) of a remote location.
            self.storage, self.root = Storage.for_path(
                table.location, storage_options=storage_options
            )
        else:
            self.storage, self.root = storage, table.location
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
        self._skews: dict[str, SkewedInfo | None] = dict(table.partition_skews)
        self._matchers: dict[str, _LbMatcher | None] = {}

    @property
    def is_bucketed(self) -> bool:
        return bool(self._bucket_idx)

    # ------------------------------------------------------------------ list bucketing
    def skew_of(self, part: str) -> SkewedInfo | None:
        """The list bucketing of a partition directory (``None``: plain layout): its own
        when it existed when the layout was taken (or was noted since), else the table's."""
        if part in self._skews:
            return self._skews[part]
        return self.table.skewed

    def note_partition(self, part: str, skewed: SkewedInfo | None) -> None:
        """Record the list bucketing a partition was created with (``store.add_partition``).

        A partition value equal to the default list-bucketing directory's name is refused
        (``SerializationError``) once the partition turns out to be list-bucketed, as
        :meth:`partition_dir` refuses it when the layout already knew so."""
        skew = skewed if skewed is not None and skewed.is_list_bucketed else None
        _refuse_default_dir_value([v for _, v in parse_partition_name(part)], skew)
        self._skews[part] = skew
        self._matchers.pop(part, None)

    def is_list_bucketed(self, part: str) -> bool:
        return self._matcher(part) is not None

    def _matcher(self, part: str) -> _LbMatcher | None:
        try:
            return self._matchers[part]
        except KeyError:
            skew = self.skew_of(part)
            m = self._matchers[part] = None if skew is None else _LbMatcher(skew, self.schema)
            return m

    def lb_groups(self, part: str, data: pa.Table) -> list[tuple[str, pa.Table]]:
        """The rows of an Arrow table (columns in table order) split by list-bucketing
        directory (relative to the delta or base; ``""``: not list-bucketed).

        Vectorised: each skewed column is matched against its declared values with one
        ``index_in`` (on the values themselves for integers, booleans, strings and dates,
        on Hive's text of them, :func:`acidstream.acid.hive_text.hive_text`, for other types), and
        the row's tuple among the declared ones with one more; a row matching none
        (NULLs included) goes to the default directory. Rows keep their order within a
        directory.
        """
        m = self._matcher(part)
        if m is None:
            return [("", data)]
        if data.num_rows == 0:
            return []
        idx = m.index(data)
        counts = np.bincount(idx.to_numpy(zero_copy_only=False), minlength=len(m.dirs))
        if np.count_nonzero(counts) == 1:
            return [(m.dirs[int(np.argmax(counts))], data)]
        # One stable sort by directory and one take; each directory is then a slice.
        ordered = data.take(pc.sort_indices(idx))
        out, start = [], 0
        for i, n in enumerate(counts.tolist()):
            if n:
                out.append((m.dirs[i], ordered.slice(start, n)))
                start += n
        return sorted(out, key=lambda g: g[0])

    def rows_to_table(self, rows: Sequence[Sequence[Any]]) -> pa.Table:
        """Row tuples (table column order) as an Arrow table of the table's types
        (``TableSchema.rows_to_arrow``). Values that do not fit raise ``SerializationError``."""
        return pa.Table.from_struct_array(self.schema.rows_to_arrow(rows))

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
            _refuse_default_dir_value(key, self.skew_of(name))
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
        fast = self._bucket_array(data)
        if fast is not None:
            return fast.tolist()
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

    def _bucket_array(self, data: pa.Table) -> np.ndarray | None:
        """Every row's bucket hashed a column at a time (integer-like bucketing columns:
        ``bucket_numbers_arrow``), or ``None`` for other types (hashed row by row): Python
        values per row cost ~25 us, which made hashing a big write's largest cost."""
        return bucket_numbers_arrow(
            [data.column(i) for i in self._bucket_idx],
            self._bucket_types,
            self.table.num_buckets,
            bucketing_version=self.table.bucketing_version,
        )

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
        fast = self._bucket_array(data)
        buckets = pa.array(self.buckets_of(data) if fast is None else fast, pa.int32())
        return [(b, data.filter(pc.equal(buckets, b))) for b in sorted(set(buckets.to_pylist()))]

    # ------------------------------------------------------------------ files
    def partition_path(self, part: str) -> str:
        """The absolute directory of a partition (``""``: the table directory)."""
        return self.storage.join(self.root, part) if part else self.root

    def bucket_file(
        self,
        part: str,
        min_write_id: int,
        max_write_id: int,
        statement_id: int,
        bucket: int,
        lb_dir: str = "",
        *,
        visibility_txn_id: int = 0,
    ) -> str:
        """``<table>/[<part>/]delta_<min>_<max>[_<stmt>][_v<T>]/[<lb_dir>/]bucket_<N>``."""
        d = layout.delta_dir_name(
            min_write_id,
            max_write_id,
            statement_id=statement_id,
            visibility_txn_id=visibility_txn_id,
        )
        parts = [self.partition_path(part), d] + ([lb_dir] if lb_dir else [])
        return self.storage.join(*parts, layout.bucket_file_name(bucket))

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
        lb_dir: str = "",
        row_ids: RowIdSequence | None = None,
        visibility_txn_id: int = 0,
        durability: Durability = DEFAULT_DURABILITY,
    ) -> AcidFileWriter:
        """The writer of one insert-delta bucket file, on the columnar engine.

        ``lb_dir`` is the file's list-bucketing directory (:meth:`lb_groups`); the files
        of one bucket in several such directories must share ``row_ids``.
        ``streaming`` files (more than one txn, or a file that must be readable at each
        txn boundary) get an intermediate footer and a side-file entry per flush where the
        storage can flush a file being written (local files, HDFS); elsewhere the caller
        must keep one txn per file. ``visibility_txn_id``: the ``_v<T>`` suffix of a
        compactor's delta. ``durability``: the file's syncs (``acidstream.acid.durability``).
        Buffering and writing whole tables of rows through such files
        is :class:`acidstream.acid.table_writer.TableWriter`'s.
        """
        path = self.bucket_file(
            part, min_write_id, max_write_id, statement_id, bucket, lb_dir,
            visibility_txn_id=visibility_txn_id,
        )  # fmt: skip
        if lb_dir:
            # The delta itself carries the format marker too (the writer puts one beside
            # its file, in the list-bucketing directory).
            delta = path[: -len(f"/{lb_dir}/{layout.bucket_file_name(bucket)}")]
            self.storage.makedirs(delta)
            self.storage.write_bytes_if_absent(
                self.storage.join(delta, layout.ACID_FORMAT_FILE), str(layout.ACID_VERSION).encode()
            )
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
            row_ids=row_ids,
            durability=durability,
        )


def list_bucketing_dirs(skew: SkewedInfo, schema: TableSchema, rows: pa.Table) -> pa.Array:
    """Each row's list-bucketing directory, dictionary-encoded (rows: the table's columns
    in order). For rewrites whose rows come without the directory they were read from
    (the compactor's reads of original files)."""
    m = _LbMatcher(skew, schema)
    idx = pc.cast(m.index(rows), pa.int32())
    return pa.DictionaryArray.from_arrays(idx, pa.array(m.dirs, pa.string()))


class _LbColumn:
    """One skewed column, ready to match: the distinct declared texts of the column and,
    for types whose value a text names exactly (integers, booleans, strings, dates), the
    same values typed, so rows are matched on their own values without printing them."""

    # Kinds whose declared text, cast to the column's type and printed back unchanged,
    # matches exactly the rows holding that value (Hive prints them canonically).
    NATIVE = frozenset({"boolean", "tinyint", "smallint", "int", "bigint", "string", "date"})

    def __init__(self, pos: int, hive: HiveType, texts: Sequence[str]) -> None:
        self.pos, self.hive = pos, hive
        self.texts = pa.array(texts, pa.string())
        self._native: dict[pa.DataType, tuple[pa.Array, pa.Array] | None] = {}

    def _native_set(self, typ: pa.DataType) -> tuple[pa.Array, pa.Array] | None:
        """(declared values of type ``typ``, their codes), or ``None``: match by text."""
        if typ in self._native:
            return self._native[typ]
        out = None
        if self.hive.kind in self.NATIVE and not pa.types.is_dictionary(typ):
            values, codes = [], []
            for code, text in enumerate(self.texts.to_pylist()):
                try:
                    v = pa.array([text], pa.string()).cast(typ)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    continue  # no value of the column prints as this text
                if hive_text(v, self.hive).to_pylist() == [text]:
                    values.append(v)
                    codes.append(code)
            empty = pa.array([], typ)
            out = (pa.concat_arrays([empty, *values]), pa.array(codes, pa.int64()))
        self._native[typ] = out
        return out

    def codes(self, col: pa.Array | pa.ChunkedArray) -> pa.Array:
        """Per row: the position of its value among the declared texts (NULL: none)."""
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        native = self._native_set(arr.type)
        if native is not None:
            values, codes = native
            return pc.take(codes, pc.index_in(arr, value_set=values))
        return pc.cast(pc.index_in(hive_text(arr, self.hive), value_set=self.texts), pa.int64())


class _LbMatcher:
    """One list bucketing, ready to match rows: per skewed column the position of each
    row's value among the column's declared values, combined into one number per row and
    looked up among the declared tuples' numbers; the directory of each tuple, then the
    default's."""

    def __init__(self, skew: SkewedInfo, schema: TableSchema) -> None:
        names = [n.lower() for n in schema.names]
        try:
            cols = [names.index(c.lower()) for c in skew.col_names]
        except ValueError as e:
            raise ConfigError(
                f"skewed column not in the table: {list(skew.col_names)} ({e})"
            ) from e
        distinct = [sorted({v[j] for v in skew.col_values}) for j in range(len(cols))]
        self.columns = [
            _LbColumn(c, schema.columns[c][1], texts)
            for c, texts in zip(cols, distinct, strict=True)
        ]
        # Tuple -> one int64: mixed radix over the columns' declared values.
        self._radix = [1]
        for texts in distinct[:-1]:
            self._radix.append(self._radix[-1] * len(texts))
        self.keys = pa.array(
            [
                sum(distinct[j].index(v[j]) * self._radix[j] for j in range(len(cols)))
                for v in skew.col_values
            ],
            pa.int64(),
        )
        self.dirs = (*(skew.dir_of(v) for v in skew.col_values), skew.default_dir)

    def index(self, data: pa.Table) -> pa.Array:
        """Per row: the position of its declared tuple, or ``len(keys)`` (the default)."""
        key: pa.Array | None = None
        for col, radix in zip(self.columns, self._radix, strict=True):
            code = col.codes(data.column(col.pos))
            part = code if radix == 1 else pc.multiply(code, radix)
            key = part if key is None else pc.add(key, part)  # NULL (no match) stays NULL
        return pc.fill_null(pc.index_in(key, value_set=self.keys), len(self.dirs) - 1)
