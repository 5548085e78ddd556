"""Line-delimited input in blocks: Hive's record splitting, exact offsets, bounded memory."""

from __future__ import annotations

import io
import re
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.ingest import line_blocks
from acidstream.ingest.line_blocks import read_blocks


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


def _reference(
    data: bytes, block_records: int, max_record_bytes: int
) -> list[tuple[list[bytes], list[int], list[int], list[tuple[int, int, int, bytes]]]]:
    """What the blocks must hold: records split on [\\r\\n] (empty ones skipped), those
    over the limit reported in the block being filled when the input reaches them."""
    segments = []
    i = 0
    for m in re.finditer(rb"[\r\n]", data):
        segments.append((i, m.start(), m.start() + 1))
        i = m.start() + 1
    if i < len(data):
        segments.append((i, len(data), len(data)))
    blocks: list[tuple[list[bytes], list[int], list[int], list[tuple[int, int, int, bytes]]]] = []
    count = 0
    for a, b, end in segments:
        if b == a:
            continue
        k = count // block_records
        while len(blocks) <= k:
            blocks.append(([], [], [], []))
        if b - a > max_record_bytes:
            blocks[k][3].append((a, end, b - a, data[a : a + 1024]))
        else:
            blocks[k][0].append(data[a:b])
            blocks[k][1].append(a)
            blocks[k][2].append(end)
            count += 1
    return [blk for blk in blocks if blk[0] or blk[3]]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80).map(lambda b: bytes(b"ab\r\n"[x % 4] for x in b)),
       st.integers(min_value=1, max_value=5), st.integers(min_value=1, max_value=10),
       st.sampled_from([1, 2, 3, 5, 8, 64]))  # fmt: skip
def test_blocks_match_a_plain_split_across_chunk_boundaries(
    data: bytes, block: int, limit: int, chunk: int
) -> None:
    """The vectorized splitter against a plain one, with reads cut at every size (records,
    CRLF pairs and oversize records straddle chunks)."""
    with patch.object(line_blocks, "_CHUNK", chunk):
        got = list(read_blocks(io.BytesIO(data), block_records=block, max_record_bytes=limit))
    want = _reference(data, block, limit)
    assert [(b.records, b.starts, b.ends) for b in got] == [w[:3] for w in want]
    assert [[(o.start, o.end, o.size) for o in b.oversize] for b in got] == [
        [o[:3] for o in w[3]] for w in want
    ]
    for b, w in zip(got, want, strict=True):
        for o, (_, _, _, head) in zip(b.oversize, w[3], strict=True):
            # The first bytes seen: all 1,024 once the limit is over them, at least the
            # limit's worth + 1 otherwise (a record found too long mid-read).
            assert head.startswith(o.head) and len(o.head) >= min(len(head), limit + 1)
