"""Line-delimited input in blocks: Hive's record splitting, exact offsets, bounded memory."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from ingest.line_blocks import read_blocks


def _all(data: bytes, **kw: int) -> tuple[list[bytes], list[int], list[tuple[int, int, int]]]:
    recs: list[bytes] = []
    ends: list[int] = []
    big: list[tuple[int, int, int]] = []
    for b in read_blocks(io.BytesIO(data), **kw):
        recs += b.records
        ends += b.ends
        big += [(o.start, o.end, o.size) for o in b.oversize]
    return recs, ends, big


def test_records_split_on_cr_or_lf_and_empty_lines_are_skipped() -> None:
    recs, ends, big = _all(b"a\r\nb\n\nc\rd")
    (block,) = read_blocks(io.BytesIO(b"a\r\nb\n\nc\rd"))
    assert block.starts == [0, 3, 6, 8]
    assert recs == [b"a", b"b", b"c", b"d"]
    assert ends == [2, 5, 8, 9] and big == []


@given(st.lists(st.binary(min_size=0, max_size=40).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b"")), max_size=60),
       st.integers(min_value=1, max_value=7))  # fmt: skip
def test_offsets_let_a_reader_resume_after_any_record(lines: list[bytes], block: int) -> None:
    data = b"".join(x + b"\n" for x in lines)
    recs, ends, _ = _all(data, block_records=block)
    assert recs == [x for x in lines if x]
    for k, end in enumerate(ends):
        rest, _, _ = _all(data[end:], start=end)
        assert rest == recs[k + 1 :]


def test_an_oversize_record_is_skipped_whole_and_reported() -> None:
    big = b"x" * 5_000_000
    data = b"a\n" + big + b"\nb\n" + big  # the last one has no newline
    recs, _, oversize = _all(data, max_record_bytes=1_000_000)
    assert recs == [b"a", b"b"]
    assert oversize == [(2, 5_000_003, 5_000_000), (5_000_005, 10_000_005, 5_000_000)]
