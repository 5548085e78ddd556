"""The bulk path (encode_block) against the per-record path (encode), differentially.

For every writer and every Hive type, random and adversarial lines go through both paths:
the same lines must be accepted (with identical values and partition values) and the
same lines rejected (with the same error class and message).
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Sequence
from typing import Any
from unittest.mock import patch

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acidstream.acid.errors import SerializationError
from acidstream.acid.schema import TableSchema
from acidstream.ingest.record_writers import (
    BoundRecordWriter,
    EncodedBlock,
    StrictDelimitedInputWriter,
    StrictJsonWriter,
    StrictRegexWriter,
    block_schema,
)

PRIMITIVES = (
    "b boolean, ti tinyint, si smallint, i int, bi bigint, f float, d double, s string, "
    "vc varchar(3), c char(4), dec decimal(5,2), dz decimal(3,3), dt date, ts timestamp"
)
PARTITIONS = [("pi", "int"), ("ps", "string"), ("pd", "date")]

# Adversarial field texts: every gate edge of the bulk converters and every rule of the
# row converters (Java whitespace, signs, overflows, exponents, odd dates and times).
ADVERSARIAL = [
    "", "\\N", "0", "-0", "+5", "007", " 1", "1 ", "\x001", "127", "128", "-129", "32768",
    "2147483647", "2147483648", "-2147483649", "9223372036854775807", "9223372036854775808",
    "999999999999999999", "1000000000000000000", "9" * 50, "1e3", "1E2", "1.0", "1.", ".5",
    "-.5", "1.5f", "2d", "NaN", "Infinity", "-Infinity", "inf", "nan", "1e400", "-1e400",
    "1e-400", "1e99999", "3.4028235e38", "3.4028236e38", "1e39", "0x10", "1_0", "１２", "٣",
    "1.005", "99.995", "-99.995", "999.99", "999.995", "0.5", "0.999", "0.9995", ".001",
    "12345678901234567890", "1e2", "true", "TRUE", "False", "yes", "t", "2024-02-29",
    "2023-02-29", "2023-02-30", "0000-01-01", "0001-01-01", "9999-12-31", "10000-01-01",
    "2024-1-5", "2024-01-05 junk", " 2024-01-05", "2024-01-01 10:00:00", "2024-01-01T10:00",
    "2024-01-01T10:00:05.5", "2024-01-01 24:00:00", "2024-01-01 23:59:60",
    "2024-01-01 10:00:00.123456", "2024-01-01 10:00:00.1234567", "2024-01-01 10:00:00.123456789",
    "2024-01-01 10:00:00.123456000", "0001-01-01 00:00:00", "9999-12-31 23:59:59.999999",
    "1970-01-01 00:00:00.000001", "1969-12-31 23:59:59.999999", "2024-01-01 1:2:3",
    "é", "😀", "héllo wörld", "abcdef", "ab", "a" * 300, "\x00", "k=v/x", "%", "\ud800",
    "aGk=", "a b",
]  # fmt: skip

texts = st.one_of(
    st.sampled_from(ADVERSARIAL),
    st.text(max_size=12),
    st.from_regex(r"[+-]?[0-9]{1,20}(\.[0-9]{0,6})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
)


def _norm(v: object) -> object:
    """Comparable form: floats by repr (NaN, -0.0), maps as item lists, structs as tuples."""
    if isinstance(v, float):
        return ("float", "nan" if math.isnan(v) else repr(v))
    if isinstance(v, dict):
        return [(_norm(k), _norm(x)) for k, x in v.items()]
    if isinstance(v, list | tuple):
        return [_norm(x) for x in v]
    return v


def _arrow_norm(v: object) -> object:
    if isinstance(v, dict):  # an Arrow struct
        return [_arrow_norm(x) for x in v.values()]
    if isinstance(v, list) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return [(_arrow_norm(k), _arrow_norm(x)) for k, x in v]  # an Arrow map
    if isinstance(v, list):
        return [_arrow_norm(x) for x in v]
    return _norm(v)


def assert_same(bound: BoundRecordWriter, records: Sequence[bytes]) -> EncodedBlock:
    """encode_block accepts/rejects exactly what encode does, with identical results."""
    expected_rows: list[tuple[int, Any, Any]] = []
    expected_errors: list[tuple[int, type, str]] = []
    for i, r in enumerate(records):
        try:
            row, parts = bound.encode(r)
        except SerializationError as e:
            expected_errors.append((i, type(e), str(e)))
        else:
            expected_rows.append((i, row, parts))
    block = bound.encode_block(records)
    got_errors = [(i, type(e), str(e)) for i, e in block.rejected]
    assert got_errors == expected_errors
    assert all(e.record == records[i] for i, e in block.rejected)
    assert block.good_indices.to_pylist() == [i for i, _, _ in expected_rows]
    got_rows = block.table.to_pylist()
    assert len(got_rows) == len(expected_rows)
    for (i, row, _), got in zip(expected_rows, got_rows, strict=True):
        assert [_arrow_norm(v) for v in got.values()] == [_norm(v) for v in row], records[i]
    if block.partitions is None:
        assert all(parts == () for _, _, parts in expected_rows)
    else:
        got_parts = [tuple(p.values()) for p in block.partitions.to_pylist()]
        assert got_parts == [tuple(parts) for _, _, parts in expected_rows]
    # The bytes the parse counted on the way (when it did) are the records' bytes.
    assert block.nbytes in (-1, sum(map(len, records)))
    return block


FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- delimited

DELIM_SCHEMA = TableSchema.parse(
    PRIMITIVES + ", bin binary, a array<int>, m map<string,double>, st struct<x:int,y:string>"
)
DELIM = StrictDelimitedInputWriter(
    field_delimiter=",", collection_delimiter="|", map_key_delimiter=":"
)
DELIM_BOUND = DELIM.bind(DELIM_SCHEMA, partition_columns=PARTITIONS)
N_DELIM = len(DELIM_SCHEMA.columns) + len(PARTITIONS)


@st.composite
def delimited_lines(draw: st.DrawFn) -> bytes:
    n = draw(st.sampled_from([N_DELIM, N_DELIM, N_DELIM, N_DELIM - 1, N_DELIM + 1, 1, 3]))
    fields = draw(st.lists(texts, min_size=n, max_size=n))
    line = ",".join(fields)
    if draw(st.booleans()) and draw(st.booleans()):
        return line.encode("utf-8", "surrogatepass") + draw(
            st.sampled_from([b"\xff", b"\n", b"\r"])
        )
    return line.encode("utf-8", "surrogatepass")


@FAST
@given(st.lists(delimited_lines(), min_size=1, max_size=25))
def test_delimited_bulk_matches_rows(lines: list[bytes]) -> None:
    assert_same(DELIM_BOUND, lines)


def test_delimited_clean_block_converts_in_bulk() -> None:
    b = StrictDelimitedInputWriter().bind(TableSchema.parse("id int, s string, amount double"))
    lines = [f"{i}\x01name{i}\x01{i}.25".encode() for i in range(1000)] + [b"x\x01y\x01z"]
    block = assert_same(b, lines)
    assert block.table.num_rows == 1000 and [i for i, _ in block.rejected] == [1000]
    assert block.table.schema == block_schema(TableSchema.parse("id int, s string, amount double"))


# --------------------------------------------------------------------------- json

JSON_SCHEMA = TableSchema.parse(PRIMITIVES + ", bin binary")
JSON_BOUND = StrictJsonWriter().bind(JSON_SCHEMA, partition_columns=PARTITIONS)
JSON_NAMES = [*JSON_SCHEMA.names, *(n for n, _ in PARTITIONS)]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(JSON_NAMES), inner, max_size=3)
    ),
    max_leaves=6,
)
RAW_JSON = [
    b"[1, 2]", b"{not json", b'{"i": 1} {"i": 2}', b'{"i": 1, "i": 2}', b'{"I": 5, "i": 6}',
    b'{"_col3": 7}', b'{"\\u0069": 8}', b'{"s": "\\ud800"}', b'{"s": "\\ud83d\\ude00"}',
    b'{"i": ' + b"9" * 5000 + b"}", b'{"x": ' + b"9" * 5000 + b', "i": 1}', b'{"d": 1e400}',
    b'{"i": 1.0}', b'{"i": 1e2}', b'{"i": "12"}', b'{"s": 12}', b'{"s": true}', b'{"s": {"a": [1]}}',
    b'{"dec": 12.345}', b'{"dec": "1.5"}', b'{"dec": 1e400}', b'{"f": NaN}', b'{"s": "x"}\xff',
    b'{"x": ' + b"[" * 2000 + b"]" * 2000 + b"}", b"", b"   ", b'\xef\xbb\xbf{"i": 1}',
    b'{"k": "\\u212a"}', b'{"\xe2\x84\xaa": 1}', b'{"ts": "2024-01-01 10:00:00", "dt": ""}',
]  # fmt: skip


@st.composite
def json_lines(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 5)) == 0:
        return draw(st.sampled_from(RAW_JSON))
    obj: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(JSON_NAMES), max_size=len(JSON_NAMES))):
        key = draw(st.sampled_from([name, name, name, name.upper(), "extra", f"_col{len(obj)}"]))
        obj[key] = draw(json_values)
    return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


@FAST
@given(st.lists(json_lines(), min_size=1, max_size=25))
def test_json_bulk_matches_rows(lines: list[bytes]) -> None:
    assert_same(JSON_BOUND, lines)


@FAST
@given(st.lists(json_lines(), min_size=1, max_size=25))
def test_json_bulk_matches_rows_on_a_fresh_writer(lines: list[bytes]) -> None:
    """A new bound writer tries the read that refuses unknown keys first (the shared one
    above stops trying once a block held extra keys): same results either way."""
    assert_same(StrictJsonWriter().bind(JSON_SCHEMA, partition_columns=PARTITIONS), lines)


def test_json_blocks_skip_the_key_regex_until_a_block_has_extra_keys() -> None:
    bound = StrictJsonWriter().bind(TableSchema.parse("id int, s string"))
    cls = type(bound)
    exact = [json.dumps({"id": i, "s": f"n{i}"}).encode() for i in range(100)]
    extra = [json.dumps({"id": i, "s": f"n{i}", "other": 1}).encode() for i in range(100)]
    variant = [*exact[:50], b'{"ID": 7, "s": "upper"}', *exact[50:]]
    with patch.object(cls, "_read", autospec=True, side_effect=cls._read) as spy:
        assert_same(bound, exact)
        assert [c.kwargs.get("unknown", "ignore") for c in spy.call_args_list] == ["error"]
        spy.reset_mock()
        block = assert_same(bound, variant)  # "ID" is refused, then found by the regex
        assert block.table.column("id").to_pylist()[50] == 7
        assert spy.call_args_list[0].kwargs["unknown"] == "error"
        spy.reset_mock()
        assert_same(bound, extra)  # refused, regex finds nothing: read with keys ignored
        assert [c.kwargs.get("unknown", "ignore") for c in spy.call_args_list] == [
            "error",
            "ignore",
        ]
        spy.reset_mock()
        assert_same(bound, exact)  # from now on: no refused read first
        assert [c.kwargs.get("unknown", "ignore") for c in spy.call_args_list] == ["ignore"]
    # Escapes, NaN and Infinity always take the regex check (Arrow reads what Jackson refuses).
    fresh = StrictJsonWriter().bind(TableSchema.parse("id int, s string, d double"))
    nan = [b'{"id": 1, "s": "a", "d": NaN}', b'{"id": 2, "s": "b\\"", "d": 1}']
    block = assert_same(fresh, nan)
    assert [i for i, _ in block.rejected] == [0]


@st.composite
def plain_json_lines(draw: st.DrawFn) -> bytes:
    """Objects with exact keys only: blocks of these take the one-read path."""
    names = draw(st.lists(st.sampled_from(JSON_NAMES), max_size=len(JSON_NAMES), unique=True))
    obj = {name: draw(json_scalars) for name in names}
    return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


@FAST
@given(st.lists(plain_json_lines(), min_size=1, max_size=25))
def test_json_plain_blocks_match_rows(lines: list[bytes]) -> None:
    assert_same(JSON_BOUND, lines)


@settings(max_examples=15, deadline=None)
@given(st.lists(json_lines(), min_size=1, max_size=10))
def test_json_nested_columns_match_rows(lines: list[bytes]) -> None:
    schema = TableSchema.parse("i int, a array<int>, m map<int,string>, st struct<x:int,s:string>")
    assert_same(StrictJsonWriter().bind(schema), lines)


def test_json_clean_block_converts_in_bulk() -> None:
    schema = TableSchema.parse("id int, s string, amount double")
    lines = [json.dumps({"id": i, "s": f"n{i}", "amount": i / 4}).encode() for i in range(1000)]
    block = assert_same(StrictJsonWriter().bind(schema), [*lines, b'{"id": "x"}'])
    assert block.table.num_rows == 1000 and len(block.rejected) == 1


def test_a_line_longer_than_the_read_block_is_read_in_bulk() -> None:
    """Reads cut a block of lines into small Arrow blocks (so threads share it); one line
    far longer than that block size still lands whole, with its neighbours, in the one
    bulk read of the block (JSON and delimited), not in a fallback."""
    from acidstream.ingest.record_bulk import block_read_size

    schema = TableSchema.parse("id int, s string")
    long_s = "x" * 300_000
    short = [json.dumps({"id": i, "s": f"n{i}"}).encode() for i in range(20_000)]
    lines = [*short[:10_000], json.dumps({"id": -1, "s": long_s}).encode(), *short[10_000:]]
    assert block_read_size(sum(map(len, short)), 40) < len(lines[10_000])  # would straddle
    # Delimited the same way: 20,000 short lines around one long one (a few MB, not GB).
    short_d = [b"%d\x01n%d" % (i, i) for i in range(20_000)]
    delimited = [*short_d[:10_000], b"-1\x01" + long_s.encode(), *short_d[10_000:]]
    assert block_read_size(sum(map(len, short_d)), 40) < len(delimited[10_000])
    for writer, block_lines, n, at in (
        (StrictJsonWriter(), lines, 20_001, 10_000),
        (StrictDelimitedInputWriter(), delimited, 20_001, 10_000),
    ):
        bound = writer.bind(schema)
        cls = type(bound)
        with patch.object(cls, "_read", autospec=True, side_effect=cls._read) as spy:
            block = bound.encode_block(block_lines)
        assert spy.call_count == 1  # the quick read took the whole block
        assert block.table.num_rows == n and not block.rejected
        assert block.table.column("s")[at].as_py() == long_s


# --------------------------------------------------------------------------- regex

REGEX_SCHEMA = TableSchema.parse(PRIMITIVES)
N_REGEX = len(REGEX_SCHEMA.columns) + len(PARTITIONS)
REGEX = "\\|".join(["([^|]*)"] * (N_REGEX - 1) + ["(?:([^|]*))?"])


@st.composite
def regex_lines(draw: st.DrawFn) -> bytes:
    n = draw(st.sampled_from([N_REGEX, N_REGEX, N_REGEX, N_REGEX - 1, N_REGEX + 1]))
    fields = draw(st.lists(texts, min_size=n, max_size=n))
    return "|".join(fields).encode("utf-8", "surrogatepass")


@FAST
@given(st.lists(regex_lines(), min_size=1, max_size=25), st.booleans())
def test_regex_bulk_matches_rows(lines: list[bytes], case_insensitive: bool) -> None:
    w = StrictRegexWriter(regex=REGEX, case_insensitive=case_insensitive)
    assert_same(w.bind(REGEX_SCHEMA, partition_columns=PARTITIONS), lines)


@pytest.mark.parametrize(
    ("regex", "lines"),
    [
        (r"(\d+)\s+(\w*)(?:,(.+))?", [b"12 ab,x", "٣ é".encode(), b"1\x0bab", b"7 ", b"8 z\n"]),
        (r"(?i)id=(\d+) (\w+) (.*)", [b"ID=1 K x", "id=2 \u212a y".encode(), b"Id=3 a "]),
        (r"(a|ab)(c|bcd)(d*)", [b"abcd", b"acd", b"abcdd"]),
        (r"([[:alpha:]]+) (\d+) (.*)", [b"ab 1 x", b"a: 1 y"]),
    ],
)
@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")
def test_regex_semantics_match_rows(regex: str, lines: list[bytes]) -> None:
    w = StrictRegexWriter(regex=regex)
    assert_same(w.bind(TableSchema.parse("a string, b string, c string")), lines)


def test_regex_clean_block_converts_in_bulk() -> None:
    schema = TableSchema.parse("id int, s string, amount double")
    lines = [f"{i}|n{i}|{i}.5".encode() for i in range(1000)]
    block = assert_same(StrictRegexWriter(regex=r"(\d+)\|(\w+)\|(.*)").bind(schema), lines)
    assert block.table.num_rows == 1000 and block.partitions is None


def test_empty_block() -> None:
    block = JSON_BOUND.encode_block([])
    assert block.table.num_rows == 0 and block.rejected == () and len(block.good_indices) == 0
    assert block.partitions is not None and block.partitions.column_names == ["pi", "ps", "pd"]
    assert block.table.schema.field("ts").type == pa.timestamp("us")


def test_decimal_rounding_in_bulk_matches_rows() -> None:
    """Half-up (away from zero) rounding and the overflow after rounding, on whole blocks."""
    values = ["1.005", "-1.005", "99999999.994", "99999999.995", "-99999999.995", "0.0049"]
    values += [f"{i * 7919 % 100003}.{i * 31 % 1000:03d}" for i in range(500)]
    schema = TableSchema.parse("x decimal(10,2)")
    delimited = assert_same(StrictDelimitedInputWriter().bind(schema), [v.encode() for v in values])
    assert [i for i, _ in delimited.rejected] == [3, 4]
    json_lines = [f'{{"x": {v}}}'.encode() for v in values]
    assert_same(StrictJsonWriter().bind(schema), json_lines)


def test_json_decimal_with_an_exponent_is_decided_by_the_row_rule() -> None:
    """pyarrow.json reads an exponent into the wide decimal type without an overflow check
    (``9.712075281962813e+21`` wrapped around to ``52550160.26`` for a ``decimal(10,2)``, and
    ``5.587531680095798e+16`` failed the whole block with ArrowInvalid): such values take the
    row rule, which refuses what is out of range and keeps what fits (``1.5e3``)."""
    schema = TableSchema.parse("x decimal(10,2), y double")
    values = ["9.712075281962813e+21", "5.587531680095798e+16", "1.5e3", "-2.5E-1", "1e2", "7"]
    lines = [f'{{"x": {v}, "y": 1e5}}'.encode() for v in values]
    for block in ([line] for line in lines):
        assert_same(StrictJsonWriter().bind(schema), block)  # the fast path of a plain block
    block = assert_same(StrictJsonWriter().bind(schema), lines)
    assert [i for i, _ in block.rejected] == [0, 1]
    assert block.table.column("x").to_pylist() == [
        decimal.Decimal("1500.00"), decimal.Decimal("-0.25"), decimal.Decimal("100.00"),
        decimal.Decimal("7.00"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("writer", "good", "bad", "max_calls"),
    [
        (StrictDelimitedInputWriter(), "{i}\x01n{i}\x01{i}.5", "x\x01y\x01z", 1),
        (StrictRegexWriter(regex=r"(\d+)\|(\w+)\|(.*)"), "{i}|n{i}|{i}.5", "x|y|z", 1),
        # JSON isolates a failing record to a piece of max(64, n/128) records.
        (StrictJsonWriter(), '{{"id": {i}, "s": "n{i}", "amount": {i}.5}}', '{"id": "x"}', 64),
    ],
)
def test_clean_rows_never_take_the_row_path(
    writer: Any, good: str, bad: str, max_calls: int
) -> None:
    """Only records the bulk converters cannot take go through encode()."""
    bound = writer.bind(TableSchema.parse("id int, s string, amount double"))
    lines = [good.format(i=i).encode() for i in range(5000)]
    lines.insert(2500, bad.encode())
    cls = type(bound)
    with patch.object(cls, "encode", autospec=True, side_effect=cls.encode) as spy:
        block = bound.encode_block(lines)
    assert [i for i, _ in block.rejected] == [2500] and block.table.num_rows == 5000
    assert 1 <= spy.call_count <= max_calls
    assert any(call.args[1] == bad.encode() for call in spy.call_args_list)


@pytest.mark.parametrize("odd", [False, True], ids=["plain", "with-odd-records"])
def test_each_bulk_parse_counts_the_record_bytes_on_the_way(odd: bool) -> None:
    """encode_block reports the records' bytes (write_block and parse-ahead use them
    instead of counting again), for plain blocks and for blocks with odd records."""
    schema = TableSchema.parse("id int, s string, amount double")
    cases: list[tuple[BoundRecordWriter, list[bytes]]] = [
        (StrictJsonWriter().bind(schema),
         [f'{{"id": {i}, "s": "n{i}", "amount": {i}.5}}'.encode() for i in range(50)]),
        (StrictDelimitedInputWriter(field_delimiter=",").bind(schema),
         [f"{i},n{i},{i}.5".encode() for i in range(50)]),
        (StrictRegexWriter(regex=r"(\d+)\|(\w+)\|(.*)").bind(schema),
         [f"{i}|n{i}|{i}.5".encode() for i in range(50)]),
    ]  # fmt: skip
    for bound, lines in cases:
        if odd:  # an empty record and one with a line break: the per-record fallbacks
            lines = [*lines[:10], b"", lines[10] + b"\n" + lines[11], *lines[12:]]
        block = assert_same(bound, lines)
        assert block.nbytes == sum(map(len, lines)) > 0


@pytest.mark.parametrize("with_nulls", [False, True], ids=["no-null-marker", "null-markers"])
def test_plain_delimited_blocks_with_and_without_null_markers(with_nulls: bool) -> None:
    """A plain block with no ``\\N`` in its bytes skips the per-column NULL comparison; one
    with them keeps it: both match the row path (NULL ints, doubles, strings and partition
    values where the marker stands; the marker inside a longer field stays text)."""
    schema = TableSchema.parse("id int, s string, amount double")
    bound = StrictDelimitedInputWriter(field_delimiter=",").bind(schema, partition_columns=["p"])
    lines = [f"{i},n{i},{i}.5,p{i % 3}".encode() for i in range(200)]
    if with_nulls:
        lines[3] = b"\\N,n3,3.5,p0"
        lines[5] = b"5,\\N,5.5,p2"  # the marker only where the gates would not see it
        lines[6] = b"6,n6,6.5,\\N"
        lines[7] = b"7,\\N,\\N,\\N"
        lines[9] = b"9,a\\Nb,9.5,p0"
    block = assert_same(bound, lines)
    assert block.table.num_rows == 200
    rows = block.table.to_pylist()
    assert (rows[3]["id"], rows[5]["s"], rows[7]["s"], rows[7]["amount"]) == (
        (None, None, None, None) if with_nulls else (3, "n5", "n7", 7.5)
    )
    assert block.partitions is not None
    parts = block.partitions.column("p")
    assert (parts[6].as_py(), parts[7].as_py()) == ((None, None) if with_nulls else ("p0", "p1"))


FLOAT_SCHEMA = TableSchema.parse("f float, s string, d double, i int")
FLOAT_BOUND = StrictDelimitedInputWriter(field_delimiter=",").bind(
    FLOAT_SCHEMA, partition_columns=["p"]
)


# Texts Arrow's float parse reads (most of them), Hive's spellings and Arrow's own.
FLOAT_TEXTS = [
    "", "\\N", "0", "-0", "+5", " 1", "1 ", "\t2", "1e3", "1E-2", "+.5", "5.", "1e400",
    "-1e400", "1e-400", "inf", "-inf", "INF", "infinity", "Infinity", "-Infinity", "nan", "NaN",
    "-nan", "1.5f", "2d", "0x10", "3.4028236e38", "1e39", "12345678901234567890.5",
]  # fmt: skip
float_texts = st.one_of(
    st.sampled_from(FLOAT_TEXTS),
    st.from_regex(r"[+-]?[0-9]{1,20}(\.[0-9]{0,6})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
    st.from_regex(r"[+-]?[0-9]{1,6}\.[0-9]{1,6}", fullmatch=True),
)


@st.composite
def full_float_lines(draw: st.DrawFn) -> bytes:
    """Lines with every field present and no line break: plain lines, so the block's
    float columns are parsed by the CSV read itself whenever every value reads."""

    def field(values: st.SearchStrategy[str]) -> str:
        return draw(values).replace(",", "").replace("\n", "").replace("\r", "")

    fields = [field(float_texts), field(texts), field(float_texts), field(texts), field(texts)]
    return ",".join(fields).encode("utf-8", "surrogatepass")


@FAST
@given(st.lists(full_float_lines(), min_size=1, max_size=12))
def test_delimited_float_columns_parsed_by_the_read_match_rows(lines: list[bytes]) -> None:
    """The read's own float parse (exponents, blanks, signs, overflow to infinity, the
    ``inf``/``nan`` spellings Hive refuses, NULL markers, empty fields) gives exactly the
    row path's values and rejections."""
    assert_same(FLOAT_BOUND, lines)


def test_plain_float_blocks_are_parsed_by_the_read_unless_a_value_is_not_finite() -> None:
    """A plain block's double and float columns come typed out of the read; a block with
    ``inf`` (which Arrow reads and Hive refuses) is read as bytes and decided per value."""
    names = ["c0", "c1", "c2", "c3", "c4"]
    bound = FLOAT_BOUND
    lines = [b"1.5,a,2e3,1,p", b" -0.25 ,b,\\N,2,p", b",c,+.5,3,p"]
    data = b"\n".join(lines)
    table = bound._read_plain(data, names, longest=20)  # type: ignore[attr-defined]
    assert table is not None
    assert [table.column(k).type for k in (0, 2)] == [pa.float64(), pa.float64()]
    assert table.column(0).to_pylist() == [1.5, -0.25, None]
    assert table.column(2).to_pylist() == [2000.0, None, 0.5]
    assert_same(bound, lines)
    odd = [*lines, b"inf,d,1,4,p"]
    table = bound._read_plain(b"\n".join(odd), names, longest=20)  # type: ignore[attr-defined]
    assert table is not None and table.column(0).type == pa.binary()
    block = assert_same(bound, odd)
    assert [i for i, _ in block.rejected] == [3]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=8),
            st.integers(0, 3000).map(lambda k: b"x" * k),
            st.sampled_from([b"", b"a\nb", b"a\r", b"\n", b"ok"]),
        ),
        min_size=1,
        max_size=40,
    ),
    st.integers(1, 4000),
    st.integers(1, 5000),
)
def test_joined_lines_answer_as_the_lengths_do(
    records: list[bytes], bound: int, limit: int
) -> None:
    """``joined_lines`` takes exactly the blocks of plain lines within the limit, and its
    line-length answers (a pass over the breaks, lengths only on demand) are the exact ones."""
    from acidstream.ingest.record_bulk import block_read_size, joined_lines

    lengths = [len(r) for r in records]
    plain = all(r and b"\n" not in r and b"\r" not in r for r in records)
    lines = joined_lines(records, limit)
    if not plain or max(lengths) > limit:
        assert lines is None
        return
    assert lines is not None and lines.data == b"\n".join(records)
    assert lines.longest_below(bound) == (max(lengths) < bound)
    assert lines.lengths().tolist() == lengths
    fresh = joined_lines(records, limit)
    assert fresh is not None
    nbytes = len(fresh.data)
    assert block_read_size(nbytes, fresh.longest_bound()) == block_read_size(nbytes, max(lengths))
    assert fresh.longest_bound() >= max(lengths)


def test_a_line_longer_than_the_read_size_sets_the_read_size() -> None:
    from acidstream.ingest.record_bulk import block_read_size, joined_lines

    short = [b"y" * 50] * 3000
    lines = joined_lines(short, 1 << 24)
    assert lines is not None and lines.longest_bound() == block_read_size(len(lines.data), 0) - 1
    long_block = [*short[:1000], b"z" * 70_000, *short[1000:]]
    lines = joined_lines(long_block, 1 << 24)
    assert lines is not None and lines.longest_bound() == 70_000
    assert joined_lines(long_block, 69_999) is None


@pytest.mark.parametrize(
    ("records", "rejected"),
    [
        ([b'{"i": 1} {"i": 2}', b"   "], {0, 1}),  # the plain (one read) path
        ([b'{"i": 1} {"i": 2}', b"   ", b'{"s": "\xff"}'], {0, 1, 2}),  # bad UTF-8: record-set path
        ([b"  ", b'{"i": 3}{"i": 4}', b' {"i": 5}'], {0, 1}),  # leading space: a good record
    ],
)
def test_json_bulk_a_blank_record_cannot_hide_a_two_object_record(
    records: list[bytes], rejected: set[int]
) -> None:
    # pyarrow.json skips a blank line and reads "{..} {..}" as two rows: counted together
    # they looked like two good rows (found by hypothesis as the case of the first line).
    block = assert_same(JSON_BOUND, records)
    assert {i for i, _ in block.rejected} == rejected
