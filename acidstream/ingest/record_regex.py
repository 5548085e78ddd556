"""``StrictRegexWriter``: regex capture groups -> columns (``RegexSerDe``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.errors import ConfigError
from acidstream.acid.schema import HiveType, TableSchema
from acidstream.ingest.record_bulk import (
    assemble_bound,
    binary_nbytes,
    block_schema,
    buffer_has,
    contains,
    convert_partition,
    convert_text,
    decode_utf8,
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
    record_error,
)
from acidstream.ingest.record_common import partition_columns as _partitions
from acidstream.ingest.record_convert import (
    STRING_KINDS,
    ConvError,
    TextConv,
    nullable_text,
    partition_text_conv,
    primitive_text_conv,
)

__all__ = ["StrictRegexWriter"]

_JAVA_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")


def _named_groups(pattern: str) -> str:
    """Name every capturing group ``g0``, ``g1``... in order (``extract_regex`` needs names)."""
    out: list[str] = []
    i = k = 0
    in_class = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            j = i + 1
            if pattern.startswith("^", j):
                j += 1
            if pattern.startswith("]", j):
                j += 1  # a leading ']' is literal
            out.append(pattern[i:j])
            i = j
            continue
        if c == "(" and pattern.startswith("(?P<", i):
            i = pattern.index(">", i) + 1
            out.append(f"(?P<g{k}>")
            k += 1
            continue
        if c == "(" and not pattern.startswith("(?", i):
            out.append(f"(?P<g{k}>")
            k += 1
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _re2_pattern(python_pattern: str, flags: int, groups: int) -> str | None:
    """The anchored RE2 form of the pattern for ``extract_regex``, or ``None`` when RE2
    might read it differently from Python's ``re`` (the block then runs row by row)."""
    if "[:" in python_pattern or "{," in python_pattern:
        return None  # POSIX classes / {,n}: RE2 and Python disagree
    try:
        named = _named_groups(python_pattern)
        check = re.compile(named, flags)
    except (re.error, ValueError):
        return None
    if check.groups != groups or check.groupindex != {f"g{i}": i + 1 for i in range(groups)}:
        return None
    prefix = "(?s)" + ("(?i)" if flags & re.IGNORECASE else "")
    re2 = f"{prefix}^(?:{named})$"
    try:
        pc.match_substring_regex(pa.array([""]), re2)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return re2


@dataclass(frozen=True, slots=True)
class _BoundRegex:
    names: tuple[str, ...]
    types: tuple[HiveType, ...]
    convs: tuple[TextConv, ...]
    partition_names: tuple[str, ...]
    partition_convs: tuple[Callable[[str], str | None], ...]
    pattern: re.Pattern[str]
    re2: str | None
    ascii_only: bool
    max_record_bytes: int
    arrow_schema: pa.Schema

    def encode(self, record: bytes) -> Encoded:
        if len(record) > self.max_record_bytes:
            check_record_size(record, self.max_record_bytes)
        text = record.decode("utf-8", "surrogateescape")
        m = self.pattern.fullmatch(text)
        if m is None:
            snippet = text if len(text) <= 200 else text[:200] + "..."
            raise record_error(
                f"record does not match input.regex {self.pattern.pattern!r}: {snippet!r}",
                record,
            )
        groups = m.groups()
        row: list[object] = []
        for i, conv in enumerate(self.convs):
            s = groups[i]
            if s is None:
                row.append(None)  # the group did not participate
                continue
            try:
                row.append(conv(s))
            except ConvError as e:
                raise column_error(self.names[i], s, str(e), record) from None
        ncols = len(self.convs)
        pvals: list[str | None] = []
        for j, name in enumerate(self.partition_names):
            raw = groups[ncols + j]
            v = None if raw is None else self.partition_convs[j](raw)
            pvals.append(partition_value(name, v, raw, record))
        return tuple(row), tuple(pvals)

    def encode_block(self, records: Sequence[bytes]) -> EncodedBlock:
        """Bulk :meth:`encode`: one ``pyarrow.compute.extract_regex`` over the block."""
        arr, suspect = size_suspects(records, self.max_record_bytes)
        if self.re2 is None:
            suspect[:] = True
            return assemble_bound(self, records, None, [], [], suspect)
        text, bad = decode_utf8(arr)
        # Python's '$' also matches before a final '\n'; RE2's '\s' lacks '\v'.
        suspect |= bad
        if buffer_has(arr, b"\n\x0b"):
            suspect |= contains(arr, b"\n") | contains(arr, b"\x0b")
        if self.ascii_only and buffer_has(arr, bytes(range(0x80, 0x100))):
            # Java/Python fold case in ASCII only, RE2 in Unicode.
            suspect |= ~np.asarray(
                pc.fill_null(pc.string_is_ascii(text), True).to_numpy(zero_copy_only=False),
                dtype=bool,
            )
        matched = pc.extract_regex(text, self.re2)
        suspect |= ~np.asarray(
            pc.fill_null(matched.is_valid(), False).to_numpy(zero_copy_only=False), dtype=bool
        )
        columns: list[pa.Array] = []
        for i, t in enumerate(self.types):
            field = matched.field(f"g{i}")
            if t.kind in STRING_KINDS:
                # "" may be a group that did not participate (NULL): the row path decides.
                suspect |= np.asarray(
                    pc.fill_null(pc.equal(field, ""), False).to_numpy(zero_copy_only=False),
                    dtype=bool,
                )
            values, sus = convert_text(field, t, empty_is_null=True)
            suspect |= sus
            columns.append(values)
        parts: list[pa.Array] = []
        ncols = len(self.types)
        for j, name in enumerate(self.partition_names):
            values, sus = convert_partition(
                name, matched.field(f"g{ncols + j}"), self.partition_convs[j]
            )
            suspect |= sus
            parts.append(values)
        rows_idx = np.arange(len(records), dtype=np.int64)
        return assemble_bound(
            self, records, rows_idx, columns, parts, suspect, nbytes=binary_nbytes(arr)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StrictRegexWriter:
    """Regex capture groups -> columns (Hive ``StrictRegexWriter`` / ``RegexSerDe``).

    The whole record must match (``Matcher.matches``); the pattern is compiled
    with DOTALL as RegexSerDe does, and with Java's defaults: ``\\d``, ``\\w``, ``\\s``,
    ``\\b`` and case-insensitivity are ASCII-only. Java's ``(?<name>...)`` groups are
    accepted.

    Args:
        regex: ``input.regex``; one capture group per input column.
        case_insensitive: ``input.regex.case.insensitive``.
        line_delimiter_pattern: For :func:`split_records` (default ``[\\r\\n]``).
        max_record_bytes: Longer records are rejected before parsing (default 16 MiB).
    """

    regex: str
    case_insensitive: bool = False
    line_delimiter_pattern: str = DEFAULT_LINE_DELIMITER_PATTERN
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES

    def __post_init__(self) -> None:
        self._compile()
        compile_line_pattern(self.line_delimiter_pattern)
        check_max_record_bytes(self.max_record_bytes)

    def _flags(self) -> int:
        return re.DOTALL | re.ASCII | (re.IGNORECASE if self.case_insensitive else 0)

    def _python_pattern(self) -> str:
        return _JAVA_NAMED_GROUP.sub("(?P<", self.regex)

    def _compile(self) -> re.Pattern[str]:
        try:
            return re.compile(self._python_pattern(), self._flags())
        except (re.error, ValueError) as e:
            raise ConfigError(f"bad regex {self.regex!r}: {e}") from e

    def bind(
        self, schema: TableSchema, *, partition_columns: PartitionColumns = ()
    ) -> BoundRecordWriter:
        """Check the group count and build converters; see :class:`RecordWriter`.

        Raises:
            ConfigError: A column is not primitive (RegexSerDe refuses them) or
                is ``binary`` (RegexSerDe never fills it), or the number of
                capture groups differs from the number of input columns.
        """
        pnames, ptypes = _partitions(schema, partition_columns)
        pattern = self._compile()
        n_inputs = len(schema.columns) + len(pnames)
        if pattern.groups != n_inputs:
            raise ConfigError(
                f"regex has {pattern.groups} capture groups but there are {n_inputs} "
                "input columns (table columns + partition columns)"
            )
        convs: list[TextConv] = []
        for name, t in schema.columns:
            if t.kind in ("array", "map", "struct", "binary"):
                raise ConfigError(f"RegexSerDe doesn't allow column {name!r} with type {t}")
            convs.append(nullable_text(primitive_text_conv(t), t))
        source = self._python_pattern()
        return _BoundRegex(
            names=schema.names,
            types=tuple(t for _, t in schema.columns),
            convs=tuple(convs),
            partition_names=pnames,
            partition_convs=tuple(partition_text_conv(t) for t in ptypes),
            pattern=pattern,
            re2=_re2_pattern(source, self._flags(), pattern.groups),
            # Inline (?i) counts too: any case folding differs outside ASCII.
            ascii_only=self.case_insensitive or bool(re.search(r"\(\?[a-zA-Z]*i", source)),
            max_record_bytes=self.max_record_bytes,
            arrow_schema=block_schema(schema),
        )
