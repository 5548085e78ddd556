"""Change events: Kafka records (Debezium envelopes or plain JSON rows) as upserts and deletes.

What this is for: the upsert sink (``acidstream.sinks.upsert_sink``) turns each micro-batch
of Kafka records into the events table :func:`acidstream.mutation.changes.apply_changes`
takes. It runs on the Spark executors (inside ``mapInArrow``) and in any Python caller:
Arrow in, Arrow out.

Input: an Arrow table or record batch with ``value`` (bytes or NULL: a tombstone), and
optionally ``key`` (bytes), ``topic``, ``partition``, ``offset`` and ``timestamp`` (Kafka's
columns as Spark's Kafka source names them). Output (:class:`ParsedChanges`): the events,
one per good record, with

- the table's columns typed as the table (the JSON record writer's conversion,
  ``acidstream.ingest.record_json``: the same values accepted, the same errors), and its
  dynamic partition columns (Hive's string form);
- ``DELETE_COLUMN`` (bool), ``PARTITION_COLUMN`` (int32) and ``OFFSET_COLUMN`` (int64);
- the ordering column (:attr:`ChangeParser.ordering_column`) when an ordering is set;
- ``EVENT_TIME_COLUMN``: the event's source time in ms (Debezium ``source.ts_ms``, else
  ``ts_ms``, else the Kafka timestamp);

and the bad records (not JSON, an unknown ``op``, a missing or NULL key, a value that does
not fit its column, a missing ordering) as ``(row, reason)``, for the caller's dead letters.

Formats:

- ``debezium``: the JSON envelope with schemas enabled (``{"schema": ..., "payload":
  {...}}``) or disabled (the payload itself). ``op`` c/r/u: an upsert of ``after``; ``d``:
  a delete whose key comes from ``before`` (or from the Kafka key when ``before`` lacks
  it); a NULL value (tombstone): a delete whose key is the Kafka key (Debezium's key JSON,
  schema'd or not). The ordering is a dotted path in the envelope (``source.lsn``,
  ``ts_ms``, ``after.version``).
- ``json``: one row per record; ``delete_when`` (SQL on the row, ``"op = 'd'"``, compiled
  by ``acidstream.acid.sql_expr``) marks deletes; the ordering is a column of the row.

Vectorised: one ``pyarrow.json`` read of the block with an explicit schema (the envelope
around the JSON writer's read schema), the writer's column conversion, Arrow kernels for
the rest. Records the bulk read cannot take as they are (a case variant of a column name,
escapes, a value out of range...) take the JSON writer's row path, one at a time, as the
writer itself does; so do the Kafka keys of tombstones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from acidstream.acid import sql_expr
from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.schema import TableSchema
from acidstream.ingest.record_bulk import contains, decode_utf8, read_line_parts
from acidstream.ingest.record_common import DEFAULT_MAX_RECORD_BYTES, PartitionColumns
from acidstream.ingest.record_json import StrictJsonWriter, parse_json, read_halving
from acidstream.mutation.changes import DELETE_COLUMN, OFFSET_COLUMN, PARTITION_COLUMN

__all__ = [
    "CHANGE_FORMATS",
    "EVENT_TIME_COLUMN",
    "ORDERING_COLUMN",
    "ChangeParser",
    "ChangeSpec",
    "ParsedChanges",
    "order_tombstones",
]

CHANGE_FORMATS = ("debezium", "json")
EVENT_TIME_COLUMN = "__acid_event_time_ms"
"""Events column (int64): the event's source time in ms, for the freshness histogram."""
ORDERING_COLUMN = "__acid_ordering"
"""Events column (int64) of a Debezium ordering that is not a table column (``source.lsn``)."""
_OPS = {"c": False, "r": False, "u": False, "d": True}


@dataclass(frozen=True, kw_only=True)
class ChangeSpec:
    """How records become change events (picklable: sent to executors).

    Attributes:
        format: ``debezium`` or ``json``.
        key: the key columns (table columns, lower case).
        ordering: a dotted path: in the Debezium envelope (``source.lsn``, ``ts_ms``,
            ``after.<column>``), or a column of the JSON row; None: Kafka order.
        delete_when: ``json`` only: SQL predicate on the row that makes it a delete.
        max_record_bytes: longer records are bad records.
    """

    format: str = "json"
    key: tuple[str, ...] = ()
    ordering: str | None = None
    delete_when: str | None = None
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES

    def __post_init__(self) -> None:
        if self.format not in CHANGE_FORMATS:
            raise ConfigError(
                f"format must be one of {CHANGE_FORMATS} in upsert mode, got {self.format!r}"
            )
        if not self.key:
            raise ConfigError("key: upsert mode needs key columns")
        object.__setattr__(self, "key", tuple(k.strip().lower() for k in self.key))
        if self.ordering is not None:
            path = self.ordering.strip().lower()
            if not path or any(not p for p in path.split(".")):
                raise ConfigError(f"ordering: not a field path: {self.ordering!r}")
            object.__setattr__(self, "ordering", path)
        if self.delete_when is not None and self.format != "json":
            raise ConfigError(
                "delete_when applies to format json (Debezium's op says what is deleted)"
            )


@dataclass(frozen=True)
class ParsedChanges:
    """The change events of one block of records and its bad records.

    Attributes:
        events: one row per good record, in input order (see the module docstring).
        rejected: ``(input row, reason)`` of every bad record, ascending.
        rows: input rows read (tombstones and bad records included).
    """

    events: pa.Table
    rejected: tuple[tuple[int, str], ...]
    rows: int


def _struct_of(fields: dict[str, Any]) -> pa.DataType:
    return pa.struct([(k, _struct_of(v) if isinstance(v, dict) else v) for k, v in fields.items()])


def _path_type(tree: dict[str, Any], path: Sequence[str], leaf: pa.DataType) -> None:
    for p in path[:-1]:
        nxt = tree.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"ordering: {'.'.join(path)!r} goes through a value")
        tree = nxt
    if isinstance(tree.get(path[-1]), dict):
        raise ConfigError(f"ordering: {'.'.join(path)!r} is an object, not a value")
    tree[path[-1]] = leaf


def _child(arr: pa.Array, name: str) -> pa.Array:
    """A struct array's child with the parent's NULLs (``StructArray.field`` drops them)."""
    assert isinstance(arr, pa.StructArray)
    return arr.flatten()[arr.type.get_field_index(name)]


def _mask(arr: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def _walk(obj: object, path: Sequence[str]) -> object:
    for p in path:
        if not isinstance(obj, dict):
            return None
        obj = {k.lower(): v for k, v in obj.items()}.get(p)
    return obj


def _as_int(v: object) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            return None
    return None


def _envelope(obj: object) -> dict[str, Any] | None:
    """The payload of a Debezium value or key, schemas enabled or not."""
    if not isinstance(obj, dict):
        return None
    if "payload" in obj and "schema" in obj:
        inner = obj["payload"]
        return inner if isinstance(inner, dict) else None
    return obj


@dataclass
class _Slow:
    """Row-path results (one Python row each), merged into the bulk columns afterwards."""

    idx: list[int] = field(default_factory=list)
    rows: list[tuple[object, ...]] = field(default_factory=list)
    parts: list[tuple[str | None, ...]] = field(default_factory=list)
    delete: list[bool] = field(default_factory=list)
    ordering: list[object] = field(default_factory=list)
    time_ms: list[int | None] = field(default_factory=list)


class ChangeParser:
    """A :class:`ChangeSpec` bound to a table: parses blocks of Kafka records.

    Built on the driver when the sink opens (every configuration error surfaces there) and
    again on each executor task from the same picklable inputs.

    Args:
        spec: the format, key, ordering, delete_when.
        schema: the table's columns.
        partition_columns: its dynamic partition columns (``TableDef.partition_keys``).

    Raises:
        ConfigError: a key or ordering that is not a table column where one is needed, a
            bad ``delete_when``.
    """

    def __init__(
        self, spec: ChangeSpec, schema: TableSchema, *, partition_columns: PartitionColumns = ()
    ) -> None:
        self.spec = spec
        self.schema = schema
        writer = StrictJsonWriter(max_record_bytes=spec.max_record_bytes)
        # The JSON writer's bound form (its read schema and column conversion are shared).
        self.bound: Any = cast(Any, writer.bind(schema, partition_columns=partition_columns))
        self.names: tuple[str, ...] = self.bound.names  # table columns + partition columns
        self.n_columns: int = self.bound.n_columns
        self.arrow_schema: pa.Schema = self.bound.arrow_schema
        missing = [k for k in spec.key if k not in self.names]
        if missing:
            raise ConfigError(
                f"key: {missing} not column(s) of the table (columns: {list(self.names)})"
            )
        self._path: tuple[str, ...] = tuple(spec.ordering.split(".")) if spec.ordering else ()
        self.ordering_column: str | None = None
        self._ordering_type: pa.DataType = pa.int64()
        if spec.format == "json":
            if spec.ordering is not None:
                if spec.ordering not in self.names[: self.n_columns]:
                    raise ConfigError(
                        f"ordering: {spec.ordering!r} is not a column of the table (format json)"
                    )
                self.ordering_column = spec.ordering
            self._delete_expr: pc.Expression | None = None
            if spec.delete_when is not None:
                self._delete_expr = sql_expr.compile_predicate(spec.delete_when, self._row_schema())
        elif self._path:
            # Debezium: after.<col> is the row's column; any other path is the envelope's,
            # stored in a table column of the same name (the last part of the path) when
            # the table has one (what ordering_guard compares), else in ORDERING_COLUMN.
            last = self._path[-1]
            if self._path[0] == "after" and len(self._path) == 2:
                if last not in self.names[: self.n_columns]:
                    raise ConfigError(
                        f"ordering: {spec.ordering!r}: no column {last!r} in the table"
                    )
                self.ordering_column = last
            elif last in self.names[: self.n_columns]:
                self.ordering_column = last
                self._ordering_type = self.arrow_schema.field(last).type
                if not (pa.types.is_integer(self._ordering_type)):
                    raise ConfigError(
                        f"ordering: {spec.ordering!r} is stored in column {last!r}, which must be an integer type"
                    )
            else:
                self.ordering_column = ORDERING_COLUMN
        self._env_schemas = self._envelope_schemas() if spec.format == "debezium" else None
        self._key_schema = self._kafka_key_schema()

    # ------------------------------------------------------------------ schemas
    def _row_schema(self) -> pa.Schema:
        """The typed row: table columns, then partition columns as strings."""
        parts = [pa.field(n, pa.string()) for n in self.names[self.n_columns :]]
        return pa.schema(list(self.arrow_schema) + parts)

    def _envelope_schemas(self) -> tuple[pa.Schema, pa.Schema, pa.Schema] | None:
        """The read schemas of a block of envelopes: schemas disabled (the payload's
        fields at the top), enabled (under ``payload``), and both (a mixed block)."""
        read = self.bound.read_schema
        if read is None:
            return None  # a column type without a bulk read: every record takes the row path
        row = pa.struct(list(read))
        env: dict[str, Any] = {"op": pa.string(), "before": row, "after": row,
                               "source": {"ts_ms": pa.int64()}, "ts_ms": pa.int64()}  # fmt: skip
        if self._path and self._path[0] != "after":
            _path_type(env, self._path, pa.int64())
        fields = [(k, _struct_of(v) if isinstance(v, dict) else v) for k, v in env.items()]
        payload = ("payload", _struct_of(env))
        return pa.schema(fields), pa.schema([payload]), pa.schema([*fields, payload])

    def _kafka_key_schema(self) -> pa.Schema | None:
        """The read schema of Debezium's key JSON: the key columns, at the top (schemas
        disabled) or under ``payload`` (enabled); None: keys take the row path (a key
        that is a partition column, or a type without a bulk read)."""
        types = dict(self.schema.columns)
        if any(k not in types for k in self.spec.key):
            return None
        # The JSON writer bound to the key columns alone: their conversion, nothing else.
        key_schema = TableSchema.of([(k, types[k]) for k in self.spec.key])
        self._key_bound: Any = cast(Any, StrictJsonWriter().bind(key_schema))
        read = self._key_bound.read_schema
        if read is None:
            return None
        return pa.schema([*read, ("payload", pa.struct(list(read)))])

    @property
    def events_schema(self) -> pa.Schema:
        """The schema of :attr:`ParsedChanges.events`."""
        fields = list(self._row_schema())
        fields += [pa.field(DELETE_COLUMN, pa.bool_()), pa.field(PARTITION_COLUMN, pa.int32()),
                   pa.field(OFFSET_COLUMN, pa.int64())]  # fmt: skip
        if self.ordering_column == ORDERING_COLUMN:
            fields.append(pa.field(ORDERING_COLUMN, pa.int64()))
        fields.append(pa.field(EVENT_TIME_COLUMN, pa.int64()))
        return pa.schema(fields)

    # ------------------------------------------------------------------ parse
    def parse(
        self, batch: pa.Table | pa.RecordBatch, *, value_column: str = "value"
    ) -> ParsedChanges:
        """The change events of ``batch`` (see the module docstring). Executor or driver."""
        t = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        n = t.num_rows
        names = set(t.column_names)
        values = t.column(value_column).combine_chunks()
        if not pa.types.is_binary(values.type):
            values = values.cast(pa.binary())
        kpart = (
            t.column("partition").combine_chunks().cast(pa.int32())
            if "partition" in names
            else pa.nulls(n, pa.int32())
        )
        koff = (
            t.column("offset").combine_chunks().cast(pa.int64())
            if "offset" in names
            else pa.array(np.arange(n, dtype=np.int64))
        )
        kts = pa.nulls(n, pa.int64())
        if "timestamp" in names:
            ts = t.column("timestamp").combine_chunks()
            kts = (
                ts.cast(pa.timestamp("ms")).cast(pa.int64())
                if pa.types.is_timestamp(ts.type)
                else ts.cast(pa.int64())
            )
        keys = t.column("key").combine_chunks() if "key" in names else None
        if self.spec.format == "json":
            cols, delete, ordering, times, bad = self._parse_json(values)
        else:
            cols, delete, ordering, times, bad = self._parse_debezium(values, keys)
        good = np.ones(n, dtype=bool)
        reasons: dict[int, str] = dict(bad)
        good[list(reasons)] = False
        # Key checks: a NULL key (missing in the record) is a bad record.
        for k in self.spec.key:
            col = cols[self.names.index(k)]
            for i in np.flatnonzero(good & ~_mask(col.is_valid())).tolist():
                reasons[i] = f"NULL or missing key column {k!r}"
                good[i] = False
        if ordering is not None:
            # A tombstone has no ordering: it sorts first among its key's events (after
            # the delete it follows, which has the same effect).
            miss = good & ~_mask(ordering.is_valid()) & _mask(values.is_valid())
            for i in np.flatnonzero(miss).tolist():
                reasons[i] = f"missing ordering {self.spec.ordering!r}"
                good[i] = False
        take = pa.array(np.flatnonzero(good))
        arrays = [c.take(take) for c in cols]
        arrays += [delete.take(take), kpart.take(take), koff.take(take)]
        if self.ordering_column == ORDERING_COLUMN:
            assert ordering is not None
            arrays.append(ordering.take(take))
        arrays.append(pc.coalesce(times, kts).take(take))
        events = pa.Table.from_arrays(arrays, schema=self.events_schema)
        return ParsedChanges(events=events, rejected=tuple(sorted(reasons.items())), rows=n)

    # ------------------------------------------------------------------ json
    def _parse_json(
        self, values: pa.Array
    ) -> tuple[list[pa.Array], pa.Array, pa.Array | None, pa.Array, dict[int, str]]:
        n = len(values)
        present = np.flatnonzero(_mask(values.is_valid()))
        bad: dict[int, str] = dict.fromkeys(
            np.flatnonzero(~_mask(values.is_valid())).tolist(),
            "NULL value (a tombstone) in format json",
        )
        records = values.take(pa.array(present)).to_pylist()
        enc = self.bound.encode_block(records)
        for i, err in enc.rejected:
            bad[int(present[i])] = str(err)
        rows = present[enc.good_indices.to_numpy()]
        typed = enc.table
        if enc.partitions is not None:
            for c in enc.partitions.column_names:
                typed = typed.append_column(c, enc.partitions.column(c))
        cols = _scatter(typed, rows, n, self._row_schema())
        table = pa.Table.from_arrays(cols, schema=self._row_schema())
        if self._delete_expr is not None:
            delete = pc.fill_null(_evaluate(table, self._delete_expr), False)
        else:
            delete = pa.array(np.zeros(n, dtype=bool))
        ordering = cols[self.names.index(self.ordering_column)] if self.ordering_column else None
        return cols, delete, ordering, pa.nulls(n, pa.int64()), bad

    # ------------------------------------------------------------------ debezium
    def _parse_debezium(
        self, values: pa.Array, keys: pa.Array | None
    ) -> tuple[list[pa.Array], pa.Array, pa.Array | None, pa.Array, dict[int, str]]:
        n = len(values)
        valid = _mask(values.is_valid())
        present = np.flatnonzero(valid)
        schema = self._row_schema()
        bad: dict[int, str] = {}
        slow = _Slow()
        fast_idx = np.zeros(0, dtype=np.int64)
        fast: pa.Table | None = None
        if self._env_schemas is not None and len(present):
            arr = values.take(pa.array(present))
            schemas_on = _mask(pc.starts_with(arr, '{"schema"'))
            env_schema = self._env_schemas[
                1 if schemas_on.all() else 0 if not schemas_on.any() else 2
            ]
            tables, idx, suspect = self._bulk_read(arr, env_schema)
            if tables is not None:
                fast, conv_suspect = self._debezium_columns(tables)
                suspect[idx[conv_suspect]] = True
                ok = ~conv_suspect
                fast = fast.filter(pa.array(ok))
                fast_idx = present[idx[ok]]
            slow_idx = present[np.flatnonzero(suspect)]
        else:
            slow_idx = present
        for i in slow_idx.tolist():
            self._debezium_row(i, values[i].as_py(), slow, bad)
        for i in np.flatnonzero(~valid).tolist():  # tombstones: deletes keyed by the Kafka key
            slow.idx.append(i)
            slow.rows.append((None,) * self.n_columns)
            slow.parts.append((None,) * (len(self.names) - self.n_columns))
            slow.delete.append(True)
            slow.ordering.append(None)
            slow.time_ms.append(None)
        # Merge the bulk rows and the row-path rows by input position.
        extra = [
            pa.field(DELETE_COLUMN, pa.bool_()),
            pa.field("__ord", self._ordering_type),
            pa.field("__t", pa.int64()),
        ]
        full = pa.schema(list(schema) + extra)
        slow_table = pa.Table.from_arrays(
            [pa.array([r[c] for r in slow.rows], f.type) for c, f in enumerate(self.arrow_schema)]
            + [pa.array([p[j] for p in slow.parts], pa.string()) for j in range(len(self.names) - self.n_columns)]
            + [pa.array(slow.delete, pa.bool_()), pa.array(slow.ordering, self._ordering_type), pa.array(slow.time_ms, pa.int64())],
            schema=full,
        )  # fmt: skip
        parts = [slow_table]
        src = [np.asarray(slow.idx, dtype=np.int64)]
        if fast is not None:
            parts.append(fast.cast(full))
            src.append(fast_idx)
        merged = pa.concat_tables(parts).combine_chunks()
        cols = _scatter(merged, np.concatenate(src), n, full)
        cols = self._keys_from_kafka(cols, keys, bad)
        row_cols = cols[: len(schema)]
        delete = pc.fill_null(cols[len(schema)], False)
        ordering: pa.Array | None = None
        if self.ordering_column is not None:
            if self._path[0] == "after":
                ordering = row_cols[self.names.index(self.ordering_column)]
            else:
                ordering = cols[len(schema) + 1]
                if self.ordering_column != ORDERING_COLUMN:
                    # The envelope's ordering is what the table keeps (ordering_guard).
                    j = self.names.index(self.ordering_column)
                    row_cols[j] = ordering.cast(row_cols[j].type)
        return row_cols, delete, ordering, cols[len(schema) + 2], bad

    def _bulk_read(
        self, arr: pa.Array, schema: pa.Schema
    ) -> tuple[pa.Table | None, np.ndarray, np.ndarray]:
        """One ``pyarrow.json`` read of the JSON texts ``arr`` with ``schema``: the table
        of the records read, their positions in ``arr``, and the records the row path
        must take (what the JSON writer sends there: too long, not one object on one
        line, not UTF-8, a key in another case or with escapes, NaN/Infinity; or a record
        the read refused). The checks run on the block joined once, record by record
        only when the block fails one."""
        n = len(arr)
        lengths = pc.binary_length(arr).to_numpy(zero_copy_only=False)
        suspect = (lengths > self.spec.max_record_bytes) | (lengths == 0)
        suspect |= ~_mask(pc.starts_with(arr, "{"))
        data = _join(arr)
        if data.count(b"\n") != n - 1:
            suspect |= contains(arr, b"\n")
        if b"\r" in data:
            suspect |= contains(arr, b"\r")
        try:
            # Arrow's UTF-8 check over the block's own buffer: no Python str (a decode and
            # a copy of the block: 25 ms against 1 ms for 33,000 envelopes).
            text: pa.Array = _one_text(data)
            per_record = False
        except pa.ArrowInvalid:
            text, nonutf8 = decode_utf8(arr)
            suspect |= nonutf8
            per_record = True
        if per_record or pc.match_substring_regex(text, self.bound.suspect_keys)[0].as_py():
            if not per_record:
                text, _ = decode_utf8(arr)
            suspect |= _mask(pc.match_substring_regex(text, self.bound.suspect_keys))
        if not suspect.any():
            try:
                table = _read(data, schema, threads=True)
                if table.num_rows == n:
                    return table, np.arange(n, dtype=np.int64), suspect
            except pa.ArrowInvalid:
                pass  # a bad record: the halving read below finds it
        tables, idx, failed = _read_blocks(arr, np.flatnonzero(~suspect), schema)
        suspect[failed] = True
        return tables, idx, suspect

    def _debezium_columns(self, env: pa.Table) -> tuple[pa.Table, np.ndarray]:
        """Bulk: the envelope table -> row columns (converted), delete flag, ordering, time;
        and the rows the row path must redo (unknown op, a value that does not convert)."""
        names = env.column_names
        payload = env.column("payload").combine_chunks() if "payload" in names else None

        def pick(name: str) -> pa.Array:
            if payload is None:
                return env.column(name).combine_chunks()
            inner = _child(payload, name)
            if name not in names:
                return inner
            return pc.if_else(payload.is_valid(), inner, env.column(name).combine_chunks())

        op = pick("op")
        is_delete = pc.equal(op, "d")
        known = _mask(pc.is_in(op, pa.array(list(_OPS))))
        row = pc.if_else(is_delete, pick("before"), pick("after"))
        read = pa.Table.from_arrays(row.flatten(), schema=self.bound.read_schema)
        columns, parts, suspect = self.bound.convert_read(read)
        suspect = suspect | ~known
        source = pick("source")
        time_ms = pc.coalesce(_child(source, "ts_ms"), pick("ts_ms"))
        if self._path and self._path[0] != "after":
            o: pa.Array = pick(self._path[0])
            for p in self._path[1:]:
                o = _child(o, p)
            ordering = o.cast(self._ordering_type)
        else:
            ordering = pa.nulls(len(op), self._ordering_type)
        arrays = [c.cast(f.type) for c, f in zip(columns, self.arrow_schema, strict=True)] + list(
            parts
        )
        arrays += [pc.fill_null(is_delete, False), ordering, time_ms]
        names = [*list(self.names), DELETE_COLUMN, "__ord", "__t"]
        return pa.Table.from_arrays(arrays, names=names), suspect

    def _debezium_row(self, i: int, record: bytes, slow: _Slow, bad: dict[int, str]) -> None:
        """The row path of one Debezium value (the JSON writer's ``encode_object``)."""
        try:
            if len(record) > self.spec.max_record_bytes:
                raise SerializationError(f"record is {len(record)} bytes, over max_record_bytes")
            env = _envelope(parse_json(record))
            if env is None:
                raise SerializationError("not a Debezium envelope (a JSON object)")
            env = {k.lower(): v for k, v in env.items()}
            op = env.get("op")
            if op not in _OPS:
                raise SerializationError(f"unknown Debezium op {op!r} (c, r, u or d)")
            body = env.get("before" if op == "d" else "after")
            if body is None:
                if op != "d":
                    raise SerializationError("no 'after' in a Debezium create/update")
                body = {}
            row, pvals = self.bound.encode_object(body, record)
            ordering: object = None
            if self._path and self._path[0] != "after":
                raw = _walk(env, self._path)
                ordering = _as_int(raw)
                if raw is not None and ordering is None:
                    raise SerializationError(
                        f"ordering {self.spec.ordering!r}: {raw!r} is not an integer"
                    )
            t_ms = _as_int(_walk(env, ("source", "ts_ms")))
            if t_ms is None:
                t_ms = _as_int(env.get("ts_ms"))
        except SerializationError as e:
            bad[i] = str(e)
            return
        slow.idx.append(i)
        slow.rows.append(row)
        slow.parts.append(pvals)
        slow.delete.append(op == "d")
        slow.ordering.append(ordering)
        slow.time_ms.append(t_ms)

    def _key_columns(self, keys: pa.Table) -> tuple[list[pa.Array], np.ndarray]:
        """Bulk: Kafka key JSON read with ``_key_schema`` -> the key columns converted as
        the table's (the JSON writer's conversion), and the keys the row path must redo."""
        payload = keys.column("payload").combine_chunks()
        read = self._key_bound.read_schema
        arrays = [
            pc.if_else(payload.is_valid(), _child(payload, k), keys.column(k).combine_chunks())
            for k in self.spec.key
        ]
        columns, _, suspect = self._key_bound.convert_read(
            pa.Table.from_arrays(arrays, schema=read)
        )
        types = self._row_schema()
        out = [c.cast(types.field(k).type) for c, k in zip(columns, self.spec.key, strict=True)]
        return out, suspect

    def _keys_from_kafka(
        self, cols: list[pa.Array], keys: pa.Array | None, bad: dict[int, str]
    ) -> list[pa.Array]:
        """Deletes lacking a key column in the value (tombstones, ``before`` NULL) take
        the key from the Kafka key (Debezium's key JSON), converted as the table's."""
        delete = _mask(cols[len(self.names)])
        need = np.zeros(len(delete), dtype=bool)
        for k in self.spec.key:
            need |= ~_mask(cols[self.names.index(k)].is_valid())
        need &= delete
        need[list(bad)] = False
        if not need.any():
            return cols
        kpos = [self.names.index(k) for k in self.spec.key]
        found: dict[int, list[object]] = {j: [] for j in kpos}
        at: list[int] = []
        rows = np.flatnonzero(need)
        if keys is not None and self._key_schema is not None:
            kvalues = keys.take(pa.array(rows))
            if not pa.types.is_binary(kvalues.type):
                kvalues = kvalues.cast(pa.binary())
            valid = _mask(kvalues.is_valid())
            if valid.any():
                present = rows[valid]
                table, idx, suspect = self._bulk_read(
                    kvalues.filter(pa.array(valid)), self._key_schema
                )
                if table is not None:
                    converted, conv_suspect = self._key_columns(table)
                    suspect[idx[conv_suspect]] = True
                    ok = ~conv_suspect
                    at_fast = present[idx[ok]]
                    for c, j in enumerate(kpos):
                        cols[j] = _replace(
                            cols[j], pa.array(at_fast), converted[c].filter(pa.array(ok)),
                            _positions_mask(at_fast, len(delete)),
                        )  # fmt: skip
                rows = np.concatenate([rows[~valid], present[suspect]])
        for i in np.sort(rows).tolist():
            raw = None if keys is None else keys[i].as_py()
            if raw is None:
                continue  # stays NULL: a bad record ("NULL or missing key")
            if isinstance(raw, str):
                raw = raw.encode()
            try:
                obj = _envelope(parse_json(raw))
                if obj is None:
                    raise SerializationError("the Kafka key is not a JSON object")
                row, _ = self.bound.encode_object(obj, raw)
            except SerializationError as e:
                bad[i] = f"Kafka key: {e}"
                continue
            at.append(i)
            for j in kpos:
                found[j].append(row[j])
        if at:
            idx = pa.array(at, pa.int64())
            mask = np.zeros(len(delete), dtype=bool)
            mask[at] = True
            for j in kpos:
                vals = pa.array(found[j], cols[j].type)
                cols[j] = _replace(cols[j], idx, vals, mask)
        return cols


def _positions_mask(at: np.ndarray, n: int) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[at] = True
    return mask


def _replace(col: pa.Array, idx: pa.Array, vals: pa.Array, mask: np.ndarray) -> pa.Array:
    """``col`` with the values at ``idx`` (ascending) replaced by ``vals``."""
    full = _scatter(
        pa.table({"v": vals}), idx.to_numpy(), len(col), pa.schema([pa.field("v", col.type)])
    )[0]
    return pc.if_else(pa.array(mask), full, col)


def _scatter(table: pa.Table, rows: np.ndarray, n: int, schema: pa.Schema) -> list[pa.Array]:
    """Columns of ``n`` rows: row ``rows[j]`` holds ``table``'s row ``j``, others NULL."""
    pos = np.full(n, -1, dtype=np.int64)
    pos[rows] = np.arange(len(rows), dtype=np.int64)
    take = pa.array(pos, mask=pos < 0)
    return [table.column(i).combine_chunks().cast(f.type).take(take) for i, f in enumerate(schema)]


def _evaluate(table: pa.Table, expr: pc.Expression) -> pa.Array:
    import pyarrow.dataset as ds

    out = ds.dataset(table).to_table(columns={"m": expr}).column("m").combine_chunks()
    return out if out.type == pa.bool_() else out.cast(pa.bool_())


def _read_blocks(
    arr: pa.Array, keep: np.ndarray, schema: pa.Schema
) -> tuple[pa.Table | None, np.ndarray, list[int]]:
    """``pyarrow.json`` reads of the records ``keep`` with ``schema``; a block that fails
    (or yields another row count) is halved until the failing records are isolated."""
    table, idx, failed = read_halving(
        keep,
        lambda i: _read(_join(arr.take(pa.array(i))), schema, threads=False),
        leaf=max(16, len(keep) // 128),
    )
    return (table.combine_chunks() if table is not None else None), idx, failed


def _read(data: bytes, schema: pa.Schema, *, threads: bool) -> pa.Table:
    """``pyarrow.json`` of ``data`` (whole lines) with ``schema``; ``threads``: in parts
    on every core (:func:`read_line_parts`, as the JSON writer reads), else at once."""
    parse_options = pa_json.ParseOptions(
        explicit_schema=schema, unexpected_field_behavior="ignore", newlines_in_values=False
    )

    def read(buf: pa.Buffer) -> pa.Table:
        # Arrow's own reader over the bytes: zero-copy, no interpreter lock per block (a
        # Python file object costs a copy and the lock); one block: no line straddles two.
        return pa_json.read_json(
            pa.BufferReader(buf),
            read_options=pa_json.ReadOptions(
                use_threads=False, block_size=max(1 << 20, buf.size + 1)
            ),
            parse_options=parse_options,
        )

    table = read_line_parts(data, read) if threads else read(pa.py_buffer(data))
    return table.select(schema.names)


def _one_text(data: bytes) -> pa.Array:
    """``data`` as a one-element string array, checked as UTF-8 by Arrow (zero-copy).

    Raises:
        pa.ArrowInvalid: ``data`` is not UTF-8.
    """
    offsets = pa.array([0, len(data)], pa.int64()).buffers()[1]
    raw = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(data)])
    return raw.cast(pa.large_string())


def _join(arr: pa.Array) -> bytes:
    """The records of a binary array joined by newlines, without a Python object per row."""
    one = pa.ListArray.from_arrays(pa.array([0, len(arr)], pa.int32()), arr.cast(pa.binary()))
    return bytes(pc.binary_join(one, b"\n")[0].as_buffer())


def order_tombstones(
    events: pa.Table, key: Sequence[str], ordering: str | None, *, alone: bool = True
) -> pa.Table:
    """Give each tombstone (a delete without an ordering value) the ordering of its place
    in its Kafka partition: a tombstone deletes its key *there*.

    - After events of its key in its partition (lower offsets): their greatest ordering.
      It ties with the newest of them and wins on its offset: the update or delete it
      follows is replaced by the delete.
    - No other event of its key at all (``alone``: a compacted topic kept the tombstone
      and dropped the delete): the ordering type's largest value, so it deletes the key,
      also under ``ordering_guard`` (where a NULL ordering counts as late).
    - Otherwise (its key's other events all come after it) it stays NULL: it sorts
      first, and those later events decide.

    The driver calls it on all of the batch's events: the tasks' collapsed events and
    their tombstones (which the tasks do not collapse). ``alone=False`` leaves a lone
    tombstone NULL.
    """
    if ordering is None or not events.num_rows:
        return events
    o = events.column(ordering).combine_chunks()
    if not pa.types.is_integer(o.type):
        return events  # only Debezium has tombstones, and its orderings are integers
    tomb = _mask(events.column(DELETE_COLUMN).combine_chunks()) & ~_mask(o.is_valid())
    if not tomb.any():
        return events
    n = events.num_rows
    cols = [*key, PARTITION_COLUMN, OFFSET_COLUMN]
    order = pc.sort_indices(events.select(cols), sort_keys=[(c, "ascending") for c in cols])
    order = order.to_numpy()
    sorted_keys = events.select([*key, PARTITION_COLUMN]).take(pa.array(order))
    same_key = np.ones(n, dtype=bool)  # sorted row i has sorted row i-1's key
    same_key[0] = False
    same_part = same_key.copy()
    for c in sorted_keys.column_names:
        a = sorted_keys.column(c).combine_chunks()
        eq = pc.equal(a.slice(1), a.slice(0, n - 1))
        if c == PARTITION_COLUMN:  # two NULL partitions (no Kafka) are one
            eq = pc.or_kleene(eq, pc.and_(a.slice(1).is_null(), a.slice(0, n - 1).is_null()))
            same_part[1:] &= _mask(eq)
        else:
            same_key[1:] &= _mask(eq)
    same_part &= same_key
    stomb = tomb[order]
    valid = _mask(o.is_valid())[order] & ~stomb
    low = np.iinfo(np.int64).min
    vals = np.where(valid, pc.fill_null(o, 0).to_numpy(zero_copy_only=False)[order], low)
    part_start = np.maximum.accumulate(np.where(~same_part, np.arange(n), 0))
    key_id = np.cumsum(~same_key) - 1
    others = np.bincount(key_id, weights=valid.astype(np.int64), minlength=int(key_id[-1]) + 1)
    top = int(np.iinfo(o.type.to_pandas_dtype()).max)
    filled = np.zeros(n, dtype=np.int64)
    set_at = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(stomb).tolist():  # one step per tombstone, never per event
        before = vals[part_start[i] : i]
        if len(before) and before.max() > low:
            filled[i], set_at[i] = before.max(), True
        elif alone and others[key_id[i]] == 0:
            filled[i], set_at[i] = top, True
    if not set_at.any():
        return events
    back = np.empty(n, dtype=np.int64)
    back[order] = np.arange(n)
    new = pc.if_else(pa.array(set_at[back]), pa.array(filled[back]).cast(o.type), o)
    return events.set_column(events.column_names.index(ordering), ordering, new)
