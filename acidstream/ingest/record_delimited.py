"""``StrictDelimitedInputWriter``: delimited text with ``LazySimpleSerDe`` semantics."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from acidstream.acid.errors import ConfigError
from acidstream.acid.schema import HiveType, TableSchema
from acidstream.ingest.record_bulk import (
    BYTE_GATED_KINDS,
    VECTOR_KINDS,
    assemble_bound,
    binary_nbytes,
    block_arrow_type,
    block_read_size,
    block_schema,
    contains,
    convert_partition,
    convert_text,
    convert_values,
    decode_utf8,
    joined_lines,
    lacks,
    size_suspects,
)
from acidstream.ingest.record_common import (
    DEFAULT_LINE_DELIMITER_PATTERN,
    DEFAULT_MAX_RECORD_BYTES,
    BoundRecordWriter,
    Encoded,
    EncodedBlock,
    PartitionColumns,
    check_max_record_bytes,
    check_record_size,
    column_error,
    compile_line_pattern,
    partition_value,
)
from acidstream.ingest.record_common import partition_columns as _partitions
from acidstream.ingest.record_convert import (
    ConvError,
    TextConv,
    nullable_text,
    partition_text_conv,
    primitive_text_conv,
)

__all__ = ["StrictDelimitedInputWriter"]

#: Column kinds the plain read parses as float64 itself (``_BoundDelimited._read_plain``).
_PARSED_FLOATS = frozenset({"double", "float"})

# LazySerDeParameters: the three configurable separators, then 4..8.
_EXTRA_SEPARATORS = tuple(chr(b) for b in range(4, 9))


def _delimited_conv(t: HiveType, seps: Sequence[str], level: int, null: str) -> TextConv:
    """The LazyFactory object tree: nesting level ``level`` splits on ``seps[level]``."""
    if t.kind in ("array", "map", "struct"):
        need = level + (2 if t.kind == "map" else 1)
        if need > len(seps):
            raise ConfigError(
                f"type {t} nests deeper than the {len(seps)} LazySimpleSerDe separators allow"
            )
    if t.kind == "array":
        sep = seps[level]
        elem = _delimited_field(t.children[0], seps, level + 1, null)

        def arr(s: str) -> object:
            if s == "":
                return []  # LazyArray: zero-length data is an empty array
            return [elem(x) for x in s.split(sep)]

        return arr
    if t.kind == "map":
        item_sep, kv_sep = seps[level], seps[level + 1]
        key = _delimited_field(t.children[0], seps, level + 2, null)
        val = _delimited_field(t.children[1], seps, level + 2, null)

        def mp(s: str) -> object:
            out: dict[object, object] = {}
            if s == "":
                return out
            for item in s.split(item_sep):
                k_text, found, v_text = item.partition(kv_sep)
                k = key(k_text)
                # LazyMap drops NULL keys and keeps the first of duplicate keys.
                if k is not None and k not in out:
                    out[k] = val(v_text) if found else None
            return out

        return mp
    if t.kind == "struct":
        sep = seps[level]
        fields = [_delimited_field(c, seps, level + 1, null) for c in t.children]
        n = len(fields)

        def st(s: str) -> object:
            parts = s.split(sep, n)  # extra fields are ignored
            return tuple(fields[i](parts[i]) if i < len(parts) else None for i in range(n))

        return st
    return nullable_text(primitive_text_conv(t), t)


def _delimited_field(t: HiveType, seps: Sequence[str], level: int, null: str) -> TextConv:
    inner = _delimited_conv(t, seps, level, null)
    return lambda s: None if s == null else inner(s)


def _single_char(name: str, value: str) -> str:
    if len(value) != 1 or not value.isascii() or value in "\r\n":
        raise ConfigError(
            f"{name} must be a single ASCII character other than CR/LF, got {value!r}"
        )
    return value


@dataclass(frozen=True, slots=True)
class _BoundDelimited:
    names: tuple[str, ...]
    types: tuple[HiveType, ...]
    convs: tuple[TextConv, ...]
    partition_names: tuple[str, ...]
    partition_convs: tuple[Callable[[str], str | None], ...]
    field_delimiter: str
    null_format: str
    max_record_bytes: int
    arrow_schema: pa.Schema

    @property
    def parsed_floats(self) -> bool:
        """Whether the plain read parses some column (``_read_plain``)."""
        return any(t.kind in _PARSED_FLOATS for t in self.types)

    def encode(self, record: bytes) -> Encoded:
        if len(record) > self.max_record_bytes:
            check_record_size(record, self.max_record_bytes)
        text = record.decode("utf-8", "surrogateescape")
        parts = text.split(self.field_delimiter)
        n = len(parts)
        null = self.null_format
        row: list[object] = []
        for i, conv in enumerate(self.convs):
            if i >= n:
                row.append(None)  # missing trailing field
                continue
            s = parts[i]
            if s == null:
                row.append(None)
                continue
            try:
                row.append(conv(s))
            except ConvError as e:
                raise column_error(self.names[i], s, str(e), record) from None
        ncols = len(self.convs)
        pvals: list[str | None] = []
        for j, name in enumerate(self.partition_names):
            k = ncols + j
            raw = parts[k] if k < n and parts[k] != null else None
            v = None if raw is None else self.partition_convs[j](raw)
            pvals.append(partition_value(name, v, raw, record))
        return tuple(row), tuple(pvals)

    def encode_block(self, records: Sequence[bytes]) -> EncodedBlock:
        """Bulk :meth:`encode`: one ``pyarrow.csv`` read, then vectorized conversions."""
        n_inputs = len(self.convs) + len(self.partition_names)
        names = [f"c{i}" for i in range(n_inputs)]
        table: pa.Table | None = None
        quick = joined_lines(records, self.max_record_bytes)
        nbytes = -1 if quick is None else len(quick.data) - len(records) + 1
        if quick is not None:
            # Every record is a plain line: one read; a wrong field count fails it.
            table = self._read_plain(quick.data, names, longest=quick.longest_bound())
        null = self.null_format.encode("utf-8", "surrogateescape")
        # A block whose bytes hold no null marker has no NULL field: no column is compared.
        nulls = True
        if table is not None and table.num_rows == len(records):
            suspect = np.zeros(len(records), dtype=bool)
            keep = np.arange(len(records), dtype=np.int64)
            nulls = quick is not None and not lacks(quick.data, null)
        else:
            arr, suspect = size_suspects(records, self.max_record_bytes)
            nbytes = binary_nbytes(arr)
            # A record holding a line break cannot be one CSV line, and one with missing
            # or extra fields is not a full CSV row: encode() decides those.
            fields = pc.count_substring(arr, self.field_delimiter.encode()).to_numpy(
                zero_copy_only=False
            )
            suspect |= (fields != n_inputs - 1) | contains(arr, b"\n") | contains(arr, b"\r")
            keep = np.flatnonzero(~suspect)
            if not len(keep):
                return assemble_bound(self, records, None, [], [], suspect)
            kept = [records[i] for i in keep.tolist()]
            table = self._read(b"\n".join(kept), names, longest=max(map(len, kept)))
        row_suspect = np.zeros(len(keep), dtype=bool)
        columns: list[pa.Array] = []
        for i, t in enumerate(self.types):
            raw = table.column(i).combine_chunks()
            if raw.type == pa.float64():  # parsed by the read (``_read_plain``)
                columns.append(raw if t.kind == "double" else pc.cast(raw, pa.float32()))
                continue
            is_null = pc.equal(raw, null) if nulls else None
            if t.kind in VECTOR_KINDS:
                if t.kind in BYTE_GATED_KINDS:
                    # The number gates read bytes: invalid UTF-8 fails them (the row
                    # path then decides), so the text need not be validated first.
                    text, bad = raw.view(pa.string()), None
                else:
                    text, bad = decode_utf8(raw)
                if is_null is not None and is_null.true_count:
                    text = pc.if_else(is_null, pa.nulls(len(text), pa.string()), text)
                values, sus = convert_text(text, t, empty_is_null=True)
                row_suspect |= sus if bad is None else bad | sus
            else:
                fields = [
                    None if b is None or b == null else b.decode("utf-8", "surrogateescape")
                    for b in raw.to_pylist()
                ]
                values, sus = convert_values(fields, self.convs[i], block_arrow_type(t))
                row_suspect |= sus
            columns.append(values)
        parts: list[pa.Array] = []
        for j, name in enumerate(self.partition_names):
            raw = table.column(len(self.types) + j).combine_chunks()
            text, bad = decode_utf8(raw)
            if nulls:
                text = pc.if_else(pc.equal(raw, null), pa.nulls(len(text), pa.string()), text)
            values, sus = convert_partition(name, text, self.partition_convs[j])
            row_suspect |= bad | sus
            parts.append(values)
        suspect[keep[row_suspect]] = True
        return assemble_bound(self, records, keep, columns, parts, suspect, nbytes=nbytes)

    def _read_plain(self, data: bytes, names: list[str], *, longest: int) -> pa.Table | None:
        """The read of a block of plain lines, None when some line is not a full row.

        ``double`` and ``float`` columns are parsed by the read itself, as Arrow's
        ``float64`` (the floor's read does the same), instead of read as bytes and
        converted afterwards: over finite results Arrow's parse is the row rule
        (``Double.parseDouble``: decimal and exponent forms, a leading sign, surrounding
        blanks; text Arrow refuses fails the read), and the null marker and the empty
        field are NULL as ``encode`` makes them. Arrow also reads ``inf`` and ``nan``,
        which Hive refuses: a block with a non-finite value, or one that fails this
        read, is read again as bytes and converted value by value (``convert_text``).
        """
        if self.parsed_floats:
            try:
                table = self._read(data, names, longest=longest, floats=True)
            except pa.ArrowInvalid:
                table = None
            if table is not None and all(
                pc.all(pc.is_finite(table.column(i))).as_py() is not False
                for i, t in enumerate(self.types)
                if t.kind in _PARSED_FLOATS
            ):
                return table
        try:
            return self._read(data, names, longest=longest)
        except pa.ArrowInvalid:
            return None

    def _read(
        self, data: bytes, names: list[str], *, longest: int, floats: bool = False
    ) -> pa.Table:
        """One pyarrow.csv read: no quoting, no escapes, every field as raw bytes (with
        ``floats``, ``double`` and ``float`` columns as ``float64``, the null marker and
        the empty field as NULL)."""
        types = dict.fromkeys(names, pa.binary())
        if floats:
            for i, t in enumerate(self.types):
                if t.kind in _PARSED_FLOATS:
                    types[names[i]] = pa.float64()
        return pa_csv.read_csv(
            io.BytesIO(data),
            read_options=pa_csv.ReadOptions(
                column_names=names,
                use_threads=True,
                block_size=block_read_size(len(data), longest),
            ),
            parse_options=pa_csv.ParseOptions(
                delimiter=self.field_delimiter,
                quote_char=False,
                escape_char=False,
                double_quote=False,
                newlines_in_values=False,
                ignore_empty_lines=False,
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types=types,
                # Only typed columns take NULLs from the read (bytes columns cannot).
                null_values=[self.null_format, ""] if floats else [],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StrictDelimitedInputWriter:
    """Delimited text with ``LazySimpleSerDe`` semantics (Hive ``StrictDelimitedInputWriter``).

    Args:
        field_delimiter: ``field.delim`` (default ``\\x01``).
        collection_delimiter: ``collection.delim`` (default ``\\x02``).
        map_key_delimiter: ``mapkey.delim`` (default ``\\x03``).
        null_format: ``serialization.null.format`` (default ``\\N``).
        line_delimiter_pattern: For :func:`split_records` (default ``[\\r\\n]``).
        max_record_bytes: Longer records are rejected before parsing (default 16 MiB).
    """

    field_delimiter: str = "\x01"
    collection_delimiter: str = "\x02"
    map_key_delimiter: str = "\x03"
    null_format: str = "\\N"
    line_delimiter_pattern: str = DEFAULT_LINE_DELIMITER_PATTERN
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES

    def __post_init__(self) -> None:
        seps = (
            _single_char("field_delimiter", self.field_delimiter),
            _single_char("collection_delimiter", self.collection_delimiter),
            _single_char("map_key_delimiter", self.map_key_delimiter),
        )
        if len(set(seps)) != 3:
            raise ConfigError(f"delimiters must differ, got {seps!r}")
        compile_line_pattern(self.line_delimiter_pattern)
        check_max_record_bytes(self.max_record_bytes)

    def bind(
        self, schema: TableSchema, *, partition_columns: PartitionColumns = ()
    ) -> BoundRecordWriter:
        """Build the per-column converters for ``schema``; see :class:`RecordWriter`."""
        first: tuple[str, ...] = (
            self.field_delimiter,
            self.collection_delimiter,
            self.map_key_delimiter,
        )
        seps = first + tuple(c for c in _EXTRA_SEPARATORS if c not in first)
        pnames, ptypes = _partitions(schema, partition_columns)
        return _BoundDelimited(
            names=schema.names,
            types=tuple(t for _, t in schema.columns),
            convs=tuple(_delimited_conv(t, seps, 1, self.null_format) for _, t in schema.columns),
            partition_names=pnames,
            partition_convs=tuple(partition_text_conv(t) for t in ptypes),
            field_delimiter=self.field_delimiter,
            null_format=self.null_format,
            max_record_bytes=self.max_record_bytes,
            arrow_schema=block_schema(schema),
        )
