"""Strict record writers (ingest/record_writers.py)."""

from __future__ import annotations

import datetime as dt
import timeit
from decimal import Decimal

import pytest

from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.schema import TableSchema
from acidstream.ingest.record_writers import (
    StrictDelimitedInputWriter,
    StrictJsonWriter,
    StrictRegexWriter,
    split_records,
)

ALL_TYPES = TableSchema.parse(
    "b boolean, ti tinyint, si smallint, i int, bi bigint, f float, d double, s string, "
    "vc varchar(3), c char(4), dec decimal(5,2), dt date, ts timestamp, bin binary"
)


def d(*fields: str) -> bytes:
    return "\x01".join(fields).encode()


class TestDelimited:
    def test_defaults_are_hive_separators(self) -> None:
        w = StrictDelimitedInputWriter()
        assert (w.field_delimiter, w.collection_delimiter, w.map_key_delimiter) == (
            "\x01",
            "\x02",
            "\x03",
        )
        assert w.null_format == "\\N"
        assert w.line_delimiter_pattern == "[\r\n]"

    def test_every_primitive_type(self) -> None:
        row, parts = (
            StrictDelimitedInputWriter()
            .bind(ALL_TYPES)
            .encode(
                d("TRUE", "-128", "32767", "7", "-9", "1.5", "2e3", "héllo", "abcdef", "ab",
                  "1.005", "2024-02-29", "2024-02-29 10:11:12.123", "aGk=")
            )
        )  # fmt: skip
        assert row == (
            True, -128, 32767, 7, -9, 1.5, 2000.0, "héllo", "abc", "ab  ", Decimal("1.01"),
            dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 10, 11, 12, 123000), b"hi",
        )  # fmt: skip
        assert parts == ()

    def test_null_handling(self) -> None:
        b = StrictDelimitedInputWriter().bind(ALL_TYPES)
        # \N is NULL everywhere; empty is NULL for non-string types, "" for strings.
        row, _ = b.encode(d(*["\\N"] * 14))
        assert row == (None,) * 14
        row, _ = b.encode(d(*[""] * 14))
        assert row[:7] == (None,) * 7
        assert row[7:10] == ("", "", "    ")
        assert row[10:] == (None,) * 4

    def test_missing_trailing_fields_are_null_and_extra_fields_ignored(self) -> None:
        b = StrictDelimitedInputWriter().bind(TableSchema.parse("a int, b string"))
        assert b.encode(b"1") == ((1, None), ())
        assert b.encode(d("1", "x", "extra", "more")) == ((1, "x"), ())

    def test_custom_delimiters_and_null_format(self) -> None:
        w = StrictDelimitedInputWriter(
            field_delimiter=",", collection_delimiter="|", map_key_delimiter=":", null_format="NULL"
        )
        b = w.bind(TableSchema.parse("a array<int>, m map<string,int>, s string"))
        assert b.encode(b"1|2|NULL,k:1|j:NULL|k:9,NULL") == (
            ([1, 2, None], {"k": 1, "j": None}, None),
            (),
        )

    def test_nested_collections_use_deeper_separators(self) -> None:
        schema = TableSchema.parse(
            "a array<array<int>>, m map<string,array<int>>, s struct<x:int,y:array<string>>"
        )
        rec = d("1\x032\x023", "k\x031\x042", "5\x02p\x03q")
        assert StrictDelimitedInputWriter().bind(schema).encode(rec) == (
            ([[1, 2], [3]], {"k": [1, 2]}, (5, ["p", "q"])),
            (),
        )

    def test_empty_collections_and_struct_missing_fields(self) -> None:
        schema = TableSchema.parse("a array<int>, m map<int,int>, s struct<x:int,y:int>")
        assert StrictDelimitedInputWriter().bind(schema).encode(d("", "", "4")) == (
            ([], {}, (4, None)),
            (),
        )

    def test_dynamic_partition_values_follow_table_columns(self) -> None:
        b = StrictDelimitedInputWriter().bind(
            TableSchema.parse("a int"), partition_columns=["Year", "country"]
        )
        assert b.encode(d("1", "2024", "nz")) == ((1,), ("2024", "nz"))
        # null or empty -> None (the caller maps it to __HIVE_DEFAULT_PARTITION__)
        assert b.encode(d("1", "\\N", "")) == ((1,), (None, None))
        assert b.encode(b"1") == ((1,), (None, None))

    @pytest.mark.parametrize(
        ("typ", "value", "reason"),
        [
            ("int", "12x", "not a valid int"),
            ("int", "2147483648", "out of range"),
            ("tinyint", "128", "out of range"),
            ("bigint", "9223372036854775808", "out of range"),
            ("boolean", "yes", "boolean"),
            ("double", "abc", "not a valid double"),
            ("decimal(5,2)", "1234.5", "out of range for decimal(5,2)"),
            ("decimal(5,2)", "1.2.3", "not a valid"),
            ("date", "2023-02-30", "not a valid date"),
            ("timestamp", "2023-01-01 25:00:00", "not a valid timestamp"),
            ("timestamp", "2023-01-01 00:00:00.123456789", "nanosecond"),
        ],
    )
    def test_bad_values_raise_naming_column_and_value(
        self, typ: str, value: str, reason: str
    ) -> None:
        b = StrictDelimitedInputWriter().bind(TableSchema.parse(f"ok string, col {typ}"))
        rec = d("fine", value)
        with pytest.raises(SerializationError) as ei:
            b.encode(rec)
        msg = str(ei.value)
        assert "'col'" in msg and repr(value) in msg and reason in msg
        assert ei.value.record == rec

    def test_invalid_utf8_in_string_column_is_an_error(self) -> None:
        b = StrictDelimitedInputWriter().bind(TableSchema.parse("s string"))
        with pytest.raises(SerializationError, match="invalid UTF-8"):
            b.encode(b"\xff\xfe")

    def test_binary_keeps_raw_bytes_when_not_base64(self) -> None:
        b = StrictDelimitedInputWriter().bind(TableSchema.parse("x binary"))
        assert b.encode(b"\xff\x00!") == ((b"\xff\x00!",), ())

    def test_bad_configuration(self) -> None:
        with pytest.raises(ConfigError):
            StrictDelimitedInputWriter(field_delimiter="ab")
        with pytest.raises(ConfigError):
            StrictDelimitedInputWriter(field_delimiter=",", collection_delimiter=",")
        with pytest.raises(ConfigError):
            StrictDelimitedInputWriter().bind(TableSchema.parse("a int"), partition_columns=["a"])

    def test_encode_is_fast(self) -> None:
        b = StrictDelimitedInputWriter().bind(TableSchema.parse("id int, name string, v double"))
        rec = d("12345", "alice", "3.25")
        per_call = min(timeit.repeat(lambda: b.encode(rec), number=2000, repeat=5)) / 2000
        # ~4 µs on an idle core; the bound leaves room for a loaded CI machine and still
        # catches an order-of-magnitude regression (figures: benchmarks/record_writers.py)
        assert per_call < 50e-6


class TestJson:
    def test_types_and_case_insensitive_fields(self) -> None:
        schema = TableSchema.parse(
            "id int, name string, price decimal(6,2), ok boolean, tags array<string>, "
            "attrs map<int,double>, loc struct<lat:double,lon:double>, at timestamp, day date, "
            "raw binary, code char(3)"
        )
        rec = (
            b'{"ID": 7, "Name": "x", "price": 12.345, "ok": true, "tags": ["a", null], '
            b'"attrs": {"1": 2.5}, "LOC": {"Lat": 1, "lon": -2.5}, "at": "2020-01-02 03:04:05", '
            b'"day": "2020-01-02", "raw": "aGk=", "code": "abcd", "unknown": 1}'
        )
        row, parts = StrictJsonWriter().bind(schema).encode(rec)
        assert row == (
            7, "x", Decimal("12.35"), True, ["a", None], {1: 2.5}, (1.0, -2.5),
            dt.datetime(2020, 1, 2, 3, 4, 5), dt.date(2020, 1, 2), b"hi", "abc",
        )  # fmt: skip
        assert parts == ()

    def test_missing_and_null_fields_are_null(self) -> None:
        b = StrictJsonWriter().bind(TableSchema.parse("a int, b string"))
        assert b.encode(b'{"b": null}') == ((None, None), ())

    def test_strings_get_scalar_and_complex_json_text(self) -> None:
        b = StrictJsonWriter().bind(TableSchema.parse("a string, b string, c string"))
        assert b.encode(b'{"a": 1.50, "b": true, "c": {"k": [1, 2]}}') == (
            ("1.50", "true", '{"k":[1,2]}'),
            (),
        )

    def test_numeric_strings_are_converted(self) -> None:
        b = StrictJsonWriter().bind(TableSchema.parse("a int, b double, c decimal(4,1)"))
        assert b.encode(b'{"a": "12", "b": "1e2", "c": "3.14"}') == (
            (12, 100.0, Decimal("3.1")),
            (),
        )

    def test_col_index_names(self) -> None:
        b = StrictJsonWriter().bind(TableSchema.parse("a int, b string"))
        assert b.encode(b'{"_col1": "x", "_col0": 4}') == ((4, "x"), ())

    def test_dynamic_partitions(self) -> None:
        b = StrictJsonWriter().bind(TableSchema.parse("a int"), partition_columns=["ds", "hr"])
        assert b.encode(b'{"a": 1, "DS": "2024-01-01", "hr": 5}') == ((1,), ("2024-01-01", "5"))
        assert b.encode(b'{"a": 1, "ds": ""}') == ((1,), (None, None))

    @pytest.mark.parametrize(
        ("rec", "fragment"),
        [
            (b"[1, 2]", "expected a JSON object"),
            (b"{not json", "malformed JSON"),
            (b'{"a": "abc"}', "'a'"),
            (b'{"a": 1.5}', "not an integral int"),
            (b'{"a": true}', "boolean is not a int"),
            (b'{"a": 99999999999}', "out of range"),
            (b'{"t": [1]}', "'t'"),
            (b'{"t": {"x": "nope"}}', "'t'"),
        ],
    )
    def test_bad_records(self, rec: bytes, fragment: str) -> None:
        b = StrictJsonWriter().bind(TableSchema.parse("a int, t struct<x:int>"))
        with pytest.raises(SerializationError, match=fragment) as ei:
            b.encode(rec)
        assert ei.value.record == rec


class TestRegex:
    def test_groups_map_to_columns(self) -> None:
        w = StrictRegexWriter(regex=r"(\d+)\|([^|]*)\|(.*)")
        b = w.bind(TableSchema.parse("id int, name varchar(2), at date"))
        assert b.encode(b"5|alice|2024-05-06") == ((5, "al", dt.date(2024, 5, 6)), ())

    def test_whole_record_must_match(self) -> None:
        b = StrictRegexWriter(regex=r"(\d+)").bind(TableSchema.parse("id int"))
        with pytest.raises(SerializationError, match="does not match"):
            b.encode(b"12 trailing")

    def test_non_participating_group_and_empty_are_null(self) -> None:
        b = StrictRegexWriter(regex=r"(\d*)(?:,(\w+))?").bind(TableSchema.parse("a int, b string"))
        assert b.encode(b"") == ((None, None), ())

    def test_group_count_must_match_input_columns(self) -> None:
        with pytest.raises(ConfigError, match="capture groups"):
            StrictRegexWriter(regex=r"(\d+)").bind(TableSchema.parse("a int, b int"))
        b = StrictRegexWriter(regex=r"(\d+),(\w*)").bind(
            TableSchema.parse("a int"), partition_columns=["p"]
        )
        assert b.encode(b"1,x") == ((1,), ("x",))
        assert b.encode(b"1,") == ((1,), (None,))

    def test_only_primitive_columns(self) -> None:
        with pytest.raises(ConfigError, match="doesn't allow"):
            StrictRegexWriter(regex=r"(.*)").bind(TableSchema.parse("a array<int>"))

    def test_java_named_groups_and_case_insensitive(self) -> None:
        w = StrictRegexWriter(regex=r"id=(?<id>\d+)", case_insensitive=True)
        assert w.bind(TableSchema.parse("id int")).encode(b"ID=3") == ((3,), ())

    def test_bad_value_names_column(self) -> None:
        b = StrictRegexWriter(regex=r"(\w+)").bind(TableSchema.parse("flag boolean"))
        with pytest.raises(SerializationError, match=r"'flag'.*'maybe'"):
            b.encode(b"maybe")

    def test_bad_regex(self) -> None:
        with pytest.raises(ConfigError):
            StrictRegexWriter(regex="(unclosed")


class TestSplitRecords:
    def test_crlf_and_lf(self) -> None:
        assert list(split_records(b"a\r\nb\nc\r\n")) == [b"a", b"b", b"c"]

    def test_scanner_exact_mode_keeps_inner_empty_tokens(self) -> None:
        # java.util.Scanner with "[\r\n]" yields "" between \r and \n.
        assert list(split_records(b"a\r\nb\n", skip_empty=False)) == [b"a", b"", b"b"]
        assert list(split_records(b"\n\na", skip_empty=False)) == [b"", b"a"]

    def test_chunks_spanning_delimiters(self) -> None:
        chunks = [b"ab", b"c\r", b"\nde", b"f"]
        assert list(split_records(chunks)) == [b"abc", b"def"]
        assert list(split_records(iter([b"x|y", b"|z"]), line_delimiter_pattern=r"\|")) == [
            b"x",
            b"y",
            b"z",
        ]
