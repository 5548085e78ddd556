"""Poison records are rejected by encode(), never later; partition values typed and checked;
the per-record size limit. Each case also goes through encode_block."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.partition_name import make_partition_name
from acidstream.acid.schema import TableSchema
from acidstream.ingest.record_writers import (
    BoundRecordWriter,
    StrictDelimitedInputWriter,
    StrictJsonWriter,
    StrictRegexWriter,
)


def reject(bound: BoundRecordWriter, record: bytes, fragment: str) -> None:
    """encode raises a SerializationError containing ``fragment``; encode_block agrees."""
    with pytest.raises(SerializationError) as ei:
        bound.encode(record)
    assert fragment in str(ei.value)
    block = bound.encode_block([record])
    assert [(i, str(e)) for i, e in block.rejected] == [(0, str(ei.value))]
    assert block.table.num_rows == 0


def accept(bound: BoundRecordWriter, record: bytes) -> tuple[object, ...]:
    row, parts = bound.encode(record)
    block = bound.encode_block([record])
    assert block.rejected == () and block.table.num_rows == 1
    return row + parts


TS = StrictDelimitedInputWriter().bind(TableSchema.parse("ts timestamp, d date"))


class TestTimestampRange:
    def test_hive_full_range_is_valid(self) -> None:
        assert accept(TS, b"0001-01-01 00:00:00\x010001-01-01") == (
            dt.datetime(1, 1, 1),
            dt.date(1, 1, 1),
        )
        assert accept(TS, b"9999-12-31 23:59:59.999999\x019999-12-31") == (
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
            dt.date(9999, 12, 31),
        )

    @pytest.mark.parametrize(
        "value", ["0000-12-31 23:59:59", "10000-01-01 00:00:00", "9999-12-31 23:59:59.9999999"]
    )
    def test_outside_the_range_is_rejected(self, value: str) -> None:
        reject(TS, value.encode(), "'ts'")

    @pytest.mark.parametrize("value", ["0000-01-01", "10000-01-01"])
    def test_dates_outside_the_range_are_rejected(self, value: str) -> None:
        reject(TS, b"\x01" + value.encode(), "'d'")


class TestPoisonValues:
    def test_json_lone_surrogate_is_rejected(self) -> None:
        b = StrictJsonWriter().bind(TableSchema.parse("s string, m map<string,int>"))
        reject(b, b'{"s": "\\ud800"}', "lone surrogate")
        reject(b, b'{"m": {"\\udfff": 1}}', "lone surrogate")
        reject(b, b'{"s": ["\\ud800"]}', "lone surrogate")  # stringified complex value
        assert accept(b, b'{"s": "\\ud83d\\ude00"}') == ("\U0001f600", None)

    def test_invalid_utf8_text_is_rejected(self) -> None:
        b = StrictRegexWriter(regex="(.*)").bind(TableSchema.parse("s string"))
        reject(b, b"ok\xed\xa0\x80", "invalid UTF-8")

    @pytest.mark.parametrize("value", ["1e400", "-1e400", "1e999999999999", "1" * 2000])
    def test_decimal_overflow_is_a_serialization_error(self, value: str) -> None:
        b = StrictDelimitedInputWriter().bind(TableSchema.parse("x decimal(10,2)"))
        reject(b, value.encode(), "'x'")
        j = StrictJsonWriter().bind(TableSchema.parse("x decimal(10,2)"))
        reject(j, json.dumps({"x": value}).encode(), "'x'")

    def test_json_decimal_number_overflow(self) -> None:
        j = StrictJsonWriter().bind(TableSchema.parse("x decimal(10,2)"))
        reject(j, b'{"x": 1e400}', "out of range")

    def test_huge_integers_are_rejected_not_crashing(self) -> None:
        b = StrictDelimitedInputWriter().bind(TableSchema.parse("x bigint"))
        reject(b, b"9" * 5000, "out of range")
        j = StrictJsonWriter().bind(TableSchema.parse("x bigint"))
        reject(j, b'{"x": ' + b"9" * 5000 + b"}", "out of range")
        reject(j, b'{"x": 1e999999999}', "out of range")

    def test_json_nan_literal_is_not_json(self) -> None:
        j = StrictJsonWriter().bind(TableSchema.parse("x double, s string"))
        reject(j, b'{"s": NaN}', "malformed JSON")
        reject(j, b'{"x": -Infinity}', "malformed JSON")

    def test_regex_classes_are_ascii_as_in_java(self) -> None:
        b = StrictRegexWriter(regex=r"(\d+)").bind(TableSchema.parse("x string"))
        reject(b, "٣".encode(), "does not match")


P = TableSchema.parse("a int")


class TestPartitionValues:
    @pytest.mark.parametrize(
        ("typ", "text", "hive"),
        [
            ("int", "007", "7"),
            ("int", "+5", "5"),
            ("int", "notanint", None),
            ("int", "99999999999", None),
            ("tinyint", "-128", "-128"),
            ("boolean", "TRUE", "true"),
            ("boolean", "yes", None),
            ("double", "1e7", "1.0E7"),
            ("double", "0.001", "0.001"),
            ("double", "0.0001", "1.0E-4"),
            ("double", "100", "100.0"),
            ("float", "0.1", "0.1"),
            ("double", "NaN", "NaN"),
            ("decimal(5,2)", "1.50", "1.5"),
            ("decimal(5,2)", "-0.001", "0"),
            ("decimal(5,2)", "1e5", None),
            ("date", "2024-1-5", "2024-01-05"),
            ("date", "2023-02-30", None),
            ("timestamp", "2024-01-05 01:02:03.500", "2024-01-05 01:02:03.5"),
            ("timestamp", "2024-01-05T01:02", "2024-01-05 01:02:00"),
            ("varchar(3)", "abcdef", "abc"),
            ("char(3)", "a", "a  "),
            ("string", "", None),
        ],
    )
    def test_typed_partition_values_take_hive_string_form(
        self, typ: str, text: str, hive: str | None
    ) -> None:
        b = StrictDelimitedInputWriter().bind(P, partition_columns=[("p", typ)])
        assert accept(b, f"1\x01{text}".encode()) == (1, hive)
        r = StrictRegexWriter(regex=r"(\d+),(.*)").bind(P, partition_columns=[("p", typ)])
        assert accept(r, f"1,{text}".encode()) == (1, hive)

    def test_json_partition_values(self) -> None:
        b = StrictJsonWriter().bind(P, partition_columns=[("p", "int"), ("q", "string")])
        assert accept(b, b'{"a": 1, "p": 7, "q": 7}') == (1, "7", "7")
        assert accept(b, b'{"a": 1, "p": "007", "q": true}') == (1, "7", "true")
        assert accept(b, b'{"a": 1, "p": "x", "q": ""}') == (1, None, None)

    def test_unusable_directory_names_are_rejected(self) -> None:
        b = StrictDelimitedInputWriter().bind(P, partition_columns=["p"])
        reject(b, b"1\x01a\x00b", "NUL")
        reject(b, b"1\x01" + b"x" * 254, "255")
        reject(b, b"1\x01\xff", "surrogate")
        # The longest value a directory can hold is accepted, and the codec agrees.
        value = "x" * 253
        assert accept(b, f"1\x01{value}".encode()) == (1, value)
        assert make_partition_name(["p"], [value]) == f"p={value}"
        # '/' escapes to %2F: three bytes each.
        reject(b, b"1\x01" + b"/" * 90, "255")

    def test_binary_and_nested_partition_columns_are_refused(self) -> None:
        with pytest.raises(ConfigError):
            StrictJsonWriter().bind(P, partition_columns=[("p", "binary")])
        with pytest.raises(ConfigError):
            StrictJsonWriter().bind(P, partition_columns=[("p", "array<int>")])


class TestMaxRecordBytes:
    @pytest.mark.parametrize(
        "writer",
        [
            StrictDelimitedInputWriter(max_record_bytes=10),
            StrictJsonWriter(max_record_bytes=10),
            StrictRegexWriter(regex="(.*)", max_record_bytes=10),
        ],
    )
    def test_longer_records_are_refused_before_parsing(self, writer: object) -> None:
        b = writer.bind(TableSchema.parse("s string"))  # type: ignore[attr-defined]
        # Not even valid input: the size check comes before any parsing.
        reject(b, b"{" * 11, "over the limit of 10 (max_record_bytes)")
        ok = b'{"s":"x"}' if isinstance(writer, StrictJsonWriter) else b"x" * 10
        assert accept(b, ok)[0] is not None

    def test_default_is_16_mib_and_config_is_checked(self) -> None:
        assert StrictJsonWriter().max_record_bytes == 16 * 1024 * 1024
        with pytest.raises(ConfigError):
            StrictJsonWriter(max_record_bytes=0)
