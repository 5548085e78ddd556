"""The ``raw`` record writer: now reachable from every entry point (one factory, issue 29), it
bounds a record's size like the other writers, with the same result per record and per block."""

from __future__ import annotations

import pytest

from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.schema import TableSchema
from acidstream.ingest.record_raw import RawWriter


@pytest.mark.parametrize("column", ["line string", "line binary"])
def test_a_record_over_max_record_bytes_is_rejected_alike_per_record_and_per_block(
    column: str,
) -> None:
    bound = RawWriter(max_record_bytes=4).bind(TableSchema.parse(column))
    records = [b"ok", b"toolong", b"four"]
    with pytest.raises(SerializationError, match="over the limit of 4") as one:
        bound.encode(b"toolong")
    block = bound.encode_block(records)
    assert [i for i, _ in block.rejected] == [1]
    assert str(block.rejected[0][1]) == str(one.value)
    assert block.good_indices.to_pylist() == [0, 2]
    expected = ["ok", "four"] if column.endswith("string") else [b"ok", b"four"]
    assert block.table.column(0).to_pylist() == expected


def test_bad_utf8_and_oversize_records_are_told_apart() -> None:
    bound = RawWriter(max_record_bytes=4).bind(TableSchema.parse("line string"))
    block = bound.encode_block([b"\xff", b"fine", b"12345"])
    reasons = {i: str(e) for i, e in block.rejected}
    assert set(reasons) == {0, 2}
    assert "not UTF-8" in reasons[0] and "over the limit of 4" in reasons[2]
    assert block.table.column(0).to_pylist() == ["fine"]


def test_within_the_limit_every_record_is_kept_whole() -> None:
    bound = RawWriter().bind(TableSchema.parse("line string"))
    block = bound.encode_block([b"a b", b'{"x": 1}', "é".encode()])
    assert block.rejected == ()
    assert block.table.column(0).to_pylist() == ["a b", '{"x": 1}', "é"]
    assert bound.encode_block([]).table.num_rows == 0


@pytest.mark.parametrize("limit", [0, -1, True, 1.5])
def test_a_bad_limit_is_a_config_error(limit: object) -> None:
    with pytest.raises(ConfigError, match="max_record_bytes"):
        RawWriter(max_record_bytes=limit)  # type: ignore[arg-type]
