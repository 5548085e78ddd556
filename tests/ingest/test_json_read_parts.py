"""A JSON block big enough to be read in parts (``record_bulk.read_line_parts``, one part per
CPU, the parts after the first on a pool) gives what the per-record rule gives, record by
record, wherever the odd records fall: in the first part, in a later one, on a cut."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from unittest.mock import patch

import pyarrow as pa
import pyarrow.json as pa_json
import pytest

from acidstream.acid.schema import TableSchema
from acidstream.ingest import record_bulk, record_json
from acidstream.ingest.record_bulk import read_line_parts
from acidstream.ingest.record_writers import StrictJsonWriter
from tests.ingest.test_record_bulk import assert_same

SCHEMA = TableSchema.parse("id int, s string, amount double")
ARROW = pa.schema([("id", pa.int64()), ("s", pa.string()), ("amount", pa.float64())])


def _lines(n: int) -> list[bytes]:
    return [json.dumps({"id": i, "s": f"name-{i:08x}", "amount": i / 4}).encode() for i in range(n)]


def _reader(unknown: str = "error") -> Callable[[pa.Buffer], pa.Table]:
    def read(buf: pa.Buffer) -> pa.Table:
        return pa_json.read_json(
            pa.BufferReader(buf),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=max(1 << 20, len(buf) + 1)),
            parse_options=pa_json.ParseOptions(explicit_schema=ARROW, unexpected_field_behavior=unknown),
        )  # fmt: skip

    return read


@pytest.fixture
def four_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four parts whatever this machine's CPU count (the cut is by Arrow's count)."""
    monkeypatch.setattr(record_bulk.pa, "cpu_count", lambda: 4)


@pytest.mark.usefixtures("four_parts")
def test_the_parts_are_read_in_order_and_the_table_is_the_whole_read() -> None:
    data = b"\n".join(_lines(12_000))
    reads: list[int] = []
    read = _reader()

    def counting(buf: pa.Buffer) -> pa.Table:
        reads.append(len(buf))
        return read(buf)

    got = read_line_parts(data, counting)
    assert len(reads) == 4 and sum(reads) == len(data) - 3  # three line breaks cut on
    assert got.equals(read(pa.py_buffer(data)))


@pytest.mark.usefixtures("four_parts")
def test_an_error_in_a_later_part_is_raised_after_every_part_ended() -> None:
    lines = _lines(12_000)
    lines[11_000] = b'{"id": "not a number", "s": "x", "amount": 1}'
    with pytest.raises(pa.ArrowInvalid):
        read_line_parts(b"\n".join(lines), _reader())


def test_small_blocks_and_single_lines_are_one_read() -> None:
    reads: list[int] = []
    read = _reader()

    def counting(buf: pa.Buffer) -> pa.Table:
        reads.append(len(buf))
        return read(buf)

    small = b"\n".join(_lines(100))
    assert read_line_parts(small, counting).num_rows == 100 and reads == [len(small)]
    reads.clear()
    one = json.dumps({"id": 1, "s": "x" * 300_000, "amount": 0.5}).encode()
    assert read_line_parts(one, counting).num_rows == 1 and reads == [len(one)]


@pytest.mark.usefixtures("four_parts")
@pytest.mark.parametrize(
    "odd",
    [
        {},  # clean: one read in parts
        {5: b'{"id": 99999999999, "s": "big", "amount": 1}'},  # out of range: the row rule
        {11_500: b'{"id": 1, "s": "x", "amount": 2, "extra": 3}'},  # a key the table lacks
        {3_000: b'{"id": "x", "s": "s", "amount": 2}', 9_000: b'{"ID": 4, "s": "t"}'},
        {2_999: b'{"id": 1.5, "s": "s"}', 3_000: b'{"s": 7, "amount": "1e3"}', 11_999: b"{}"},
    ],
)
def test_a_block_read_in_parts_matches_the_per_record_rule(odd: dict[int, bytes]) -> None:
    lines = _lines(12_000)
    for i, line in odd.items():
        lines[i] = line
    bound = StrictJsonWriter().bind(SCHEMA)
    with patch.object(
        record_json, "read_line_parts", autospec=True, side_effect=read_line_parts
    ) as spy:
        block = assert_same(bound, lines)
    assert block.table.num_rows + len(block.rejected) == len(lines)
    if not odd:
        assert spy.call_count == 1 and not block.rejected


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is not available here")
@pytest.mark.usefixtures("four_parts")
def test_a_forked_child_reads_in_parts_after_its_parent_did() -> None:
    """The parent's pool threads do not survive a fork: the child must not hand its parts
    to that pool (they would never run), it makes its own."""
    data = b"\n".join(_lines(12_000))
    assert read_line_parts(data, _reader()).num_rows == 12_000  # the parent's pool is up
    pid = os.fork()
    if pid == 0:  # the child: killed by SIGALRM if its read hangs
        code = 3
        try:
            signal.alarm(60)
            code = 0 if read_line_parts(data, _reader()).num_rows == 12_000 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's read in parts did not end"
