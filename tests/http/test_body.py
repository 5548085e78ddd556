"""Body handling: line splitting, gzip limits, and the two parse paths agreeing."""

from __future__ import annotations

import gzip

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.placement import Placement, TableLayout
from acidstream.acid.schema import TableSchema
from acidstream.ingest.http.body import (
    ROW_PATH_MAX_RECORDS,
    BodyTooLarge,
    gunzip,
    parse_lines,
    split_lines,
)
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef


def test_split_lines_numbers_lines_as_the_client_does() -> None:
    records, numbers = split_lines(b"a\r\n\nb\n\r\nc")
    assert records == [b"a", b"b", b"c"] and numbers == [1, 3, 5]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60).map(lambda b: bytes(b"ab\r\n"[x % 4] for x in b)))
def test_split_lines_fast_path_agrees_with_the_line_loop(body: bytes) -> None:
    """Bodies with and without CR and empty lines: the C split and the loop agree."""
    want = [
        (line.removesuffix(b"\r"), i)
        for i, line in enumerate(body.split(b"\n"), 1)
        if line.removesuffix(b"\r")
    ]
    records, numbers = split_lines(body)
    assert list(zip(records, numbers, strict=True)) == want


def test_gunzip_caps_the_inflated_size() -> None:
    assert gunzip(gzip.compress(b"x" * 100), limit=100) == b"x" * 100
    with pytest.raises(BodyTooLarge):
        gunzip(gzip.compress(b"x" * 101), limit=100)
    with pytest.raises(ValueError):
        gunzip(b"plain", limit=100)
    with pytest.raises(ValueError):
        gunzip(gzip.compress(b"x" * 100)[:-8], limit=1000)  # truncated


@pytest.mark.parametrize("tail", [b"garbage", b"\0\0\0\0", b"\x1f\x8bnot gzip", b"\x1f"])
def test_gunzip_refuses_bytes_after_the_gzip_data(tail: bytes) -> None:
    with pytest.raises(ValueError, match="after the gzip data"):
        gunzip(gzip.compress(b"x\n") + tail, limit=100)


def test_gunzip_takes_concatenated_members_within_the_limit() -> None:
    assert gunzip(gzip.compress(b"a\n") + gzip.compress(b"b\n"), limit=4) == b"a\nb\n"
    with pytest.raises(BodyTooLarge):
        gunzip(gzip.compress(b"a\n") + gzip.compress(b"b\n"), limit=3)


def _rows(p: object) -> list[tuple[object, ...]]:
    if isinstance(p, pa.Table):
        return [tuple(r.values()) for r in p.to_pylist()]
    assert isinstance(p, list)
    return p


@pytest.mark.parametrize("dynamic", [False, True])
def test_small_and_large_bodies_parse_to_the_same_rows_and_rejections(
    tmp_path: object, dynamic: bool
) -> None:
    schema = TableSchema.parse("id bigint, msg string, amount decimal(6,2)")
    table = TableDef(
        db="default", name="t", columns=tuple((n, str(t)) for n, t in schema.columns),
        partition_keys=(("ds", "string"),), location=str(tmp_path),
        parameters={"transactional": "true"},
    )  # fmt: skip
    placement = Placement(TableLayout.of(table))
    writer = StrictJsonWriter().bind(
        schema, partition_columns=table.partition_keys if dynamic else ()
    )
    lines = [
        b'{"id":%d,"msg":"m%d","amount":"%d.25","ds":"d%d"}' % (i, i, i, i % 3) for i in range(40)
    ]
    lines[3] = b'{"id":"x"}'
    lines[7] = b"not json"
    lines[11] = b'{"id":1,"amount":"123456.789"}'
    static = None if dynamic else ("d0",)

    def parse(records: list[bytes]) -> tuple[dict[object, list[tuple[object, ...]]], list[int]]:
        p = parse_lines(records, writer=writer, placement=placement, static=static, dynamic=dynamic)  # fmt: skip
        rows: dict[object, list[tuple[object, ...]]] = {}
        for values, part in p.groups:
            rows.setdefault(values, []).extend(_rows(part))
        assert p.accepted == sum(len(v) for v in rows.values())
        return rows, [i for i, _ in p.rejected]

    small = lines[: ROW_PATH_MAX_RECORDS - 1]
    assert len(lines) >= ROW_PATH_MAX_RECORDS
    row_path = parse(small)
    block_path = parse(small + lines[len(small) :])
    # The per-record path (small bodies) and the columnar path agree on the shared records.
    assert row_path[1] == [3, 7, 11] == block_path[1]
    for values, rows in row_path[0].items():
        assert {r for r in block_path[0][values] if r[0] < len(small)} == set(rows)
