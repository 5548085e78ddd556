"""Stitched streaming files (arrow engine): the file-level statistics of a file built
from pieces equal those of the same events written as one file, and the merge rules
for what one piece alone cannot show (sum overflow, empty pieces, bounds)."""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import pyorc
import pytest

from acidstream.acid import layout
from acidstream.acid.errors import AcidFormatError
from acidstream.acid.orc_stitch import StripeStitcher, merge_column_statistics
from acidstream.acid.orc_tail import parse_tail
from acidstream.acid.protobuf import decode_fields, encode_fields
from acidstream.acid.storage import Storage
from acidstream.acid.writer import AcidFileWriter
from tests.acid.writer_cases import ALL_TYPES, all_types_row

# root, 6 event fields, 17 table columns and 5 nested (array element, map key/value, 2 struct fields)
N_COLUMNS = 1 + 6 + 17 + 5


def _events(sizes: tuple[int, ...]) -> list[tuple[int, list[tuple[Any, ...]]]]:
    out = []
    start = 0
    for k, n in enumerate(sizes):
        rows = [
            tuple([None] * len(ALL_TYPES.columns))
            if (start + i) % 5 == 4
            else all_types_row(start + i)
            for i in range(n)
        ]
        out.append((k + 1, rows))
        start += n
    return out


def _write(path: str, sizes: tuple[int, ...], *, streaming: bool) -> list[dict[str, Any]]:
    storage, _ = Storage.for_path(path)
    w = AcidFileWriter(storage, path, ALL_TYPES, kind="insert", bucket_id=0, streaming=streaming,
                       side_file=streaming, engine="arrow")  # fmt: skip
    for wid, rows in _events(sizes):
        w.insert(wid, rows)
        if streaming:
            w.flush()
    w.close()
    r = pyorc.Reader(io.BytesIO(Path(path).read_bytes()))
    return [r[c].statistics for c in range(N_COLUMNS)]


@pytest.mark.parametrize("sizes", [(7, 0, 900, 1, 40), (1,), (0, 3), (2000, 2000)])
def test_stitched_statistics_equal_one_file(tmp_path: Path, sizes: tuple[int, ...]) -> None:
    d = layout.delta_dir_name(1, len(sizes))
    whole = _write(str(tmp_path / "a" / d / "bucket_00000"), sizes, streaming=False)
    stitched = _write(str(tmp_path / "b" / d / "bucket_00000"), sizes, streaming=True)
    assert len(whole) == len(stitched) == N_COLUMNS
    for col, (a, b) in enumerate(zip(whole, stitched, strict=True)):
        if isinstance(a.get("sum"), float):
            # Floating-point sums depend on the order of additions: equal up to rounding.
            assert b.pop("sum") == pytest.approx(a.pop("sum"), rel=1e-12), f"column {col}"
        assert a == b, f"column {col}"


def _decode(msg: Any) -> dict[int, Any]:
    assert isinstance(msg, bytes)
    return {n: v for n, _, v in decode_fields(msg)}


def _zz(v: int) -> int:
    return (v << 1) ^ (v >> 63)


def test_int_sum_overflow_is_dropped() -> None:
    big = (1 << 63) - 10
    a = encode_fields(
        [(1, 0, 1), (2, 2, encode_fields([(1, 0, _zz(big)), (2, 0, _zz(big)), (3, 0, _zz(big))]))]
    )
    b = encode_fields(
        [(1, 0, 1), (2, 2, encode_fields([(1, 0, _zz(20)), (2, 0, _zz(20)), (3, 0, _zz(20))]))]
    )
    merged = _decode(merge_column_statistics(a, b))
    ints = _decode(merged[2])
    assert merged[1] == 2
    assert ints[1] == _zz(20) and ints[2] == _zz(big)
    assert 3 not in ints  # the sum overflowed a long: ORC records none


def test_piece_without_values_keeps_the_other_sides_min_max() -> None:
    dbl = lambda x: struct.pack("<d", x)  # noqa: E731
    a = encode_fields([(1, 0, 0), (3, 2, b""), (10, 0, 1)])  # all NULL: no min/max
    b = encode_fields(
        [(1, 0, 2), (3, 2, encode_fields([(1, 1, dbl(-1.5)), (2, 1, dbl(4.0)), (3, 1, dbl(2.5))]))]
    )
    merged = _decode(merge_column_statistics(a, b))
    d = {n: struct.unpack("<d", v)[0] for n, v in _decode(merged[3]).items()}
    assert merged[1] == 2 and merged[10] == 1
    assert d == {1: -1.5, 2: 4.0, 3: 2.5}


def test_string_bounds_stay_bounds() -> None:
    a = encode_fields(
        [(1, 0, 1), (4, 2, encode_fields([(4, 2, b"aaa"), (5, 2, b"zzz"), (3, 0, _zz(3000))]))]
    )
    b = encode_fields(
        [(1, 0, 1), (4, 2, encode_fields([(1, 2, b"b"), (2, 2, b"c"), (3, 0, _zz(1))]))]
    )
    s = _decode(_decode(merge_column_statistics(a, b))[4])
    # The smaller value is the truncated lower bound of a: it stays a bound (field 4), not a min.
    assert s[4] == b"aaa" and 1 not in s
    assert s[5] == b"zzz" and 2 not in s
    assert s[3] == _zz(3001)


def test_pieces_must_share_compression(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.orc as po

    def piece(compression: str) -> bytes:
        buf = io.BytesIO()
        po.write_table(pa.table({"a": [1, 2]}), buf, compression=compression)
        return buf.getvalue()

    st = StripeStitcher()
    first = piece("zlib")
    tail = parse_tail(first)
    st.add_piece(tail, body_start=3, body_length=len(first) - 3 - tail.tail_length)
    with pytest.raises(AcidFormatError, match="compression"):
        st.add_piece(parse_tail(piece("uncompressed")), body_start=st.position, body_length=0)


def test_stitched_stripes_stream_to_the_file_before_the_flush(tmp_path: Path) -> None:
    """Memory stays at about one stripe: stripes reach the file as pyarrow cuts them."""
    from acidstream.acid.writer import OrcWriterOptions
    from tests.acid.writer_cases import SIMPLE, simple_rows

    storage, root = Storage.for_path(str(tmp_path))
    path = storage.join(root, layout.delta_dir_name(1, 2), "bucket_00000")
    w = AcidFileWriter(storage, path, SIMPLE, kind="insert", bucket_id=0, streaming=True,
                       side_file=True, engine="arrow",
                       options=OrcWriterOptions(stripe_size=64 * 1024 * 8))  # fmt: skip
    w.insert(1, simple_rows(10))
    first = w.flush()
    w.insert(2, simple_rows(200_000, seed=2))
    before_flush = Path(path).stat().st_size
    second = w.flush()
    w.close()
    # Most of the second txn's stripes were on disk before its flush wrote the tail.
    assert before_flush - first > (second - first) * 0.5
    r = pyorc.Reader(io.BytesIO(Path(path).read_bytes()))
    assert len(r) == 200_010 and r.num_of_stripes > 3
    assert [row[3] for row in r.read_stripe(0)] == list(range(10))


@pytest.mark.parametrize("flushed_first", [False, True])
def test_aborting_a_stitched_file_without_side_file_deletes_it(
    tmp_path: Path, flushed_first: bool
) -> None:
    from tests.acid.writer_cases import SIMPLE, simple_rows

    storage, root = Storage.for_path(str(tmp_path))
    path = storage.join(root, layout.delta_dir_name(1, 1), "bucket_00000")
    w = AcidFileWriter(storage, path, SIMPLE, kind="insert", bucket_id=0, streaming=True,
                       engine="arrow")  # fmt: skip
    w.insert(1, simple_rows(100))
    if flushed_first:
        w.flush()
        w.insert(1, simple_rows(5, seed=3))
    w.abort()
    assert not Path(path).exists()
    assert not Path(layout.side_file_name(path)).exists()


def _exact_events(sizes: tuple[int, ...]) -> list[tuple[int, list[tuple[Any, ...]]]]:
    """``_events`` with every other txn's timestamps before 1970 with a fraction: those
    txns take the arrow engine's exact path (pieces written by pyorc)."""
    out = []
    for wid, rows in _events(sizes):
        if wid % 2 == 0:
            ts = ALL_TYPES.names.index("ts")
            rows = [
                r
                if r[ts] is None
                else (*r[:ts], r[ts].replace(year=1969, microsecond=250_000 + wid), *r[ts + 1 :])
                for r in rows
            ]
        out.append((wid, rows))
    return out


@pytest.mark.parametrize("streaming", [False, True])
def test_mixed_exact_and_fast_pieces_have_one_files_statistics(
    tmp_path: Path, streaming: bool
) -> None:
    sizes = (30, 500, 1, 40, 7)
    d = layout.delta_dir_name(1, len(sizes))
    stats = []
    for name, engine, stream in (("one", "pyorc", False), ("mixed", "arrow", streaming)):
        path = str(tmp_path / name / d / "bucket_00000")
        storage, _ = Storage.for_path(path)
        w = AcidFileWriter(storage, path, ALL_TYPES, kind="insert", bucket_id=0,
                           streaming=stream, side_file=stream, engine=engine)  # type: ignore[arg-type]  # fmt: skip
        for wid, rows in _exact_events(sizes):
            w.insert(wid, rows)
            if stream:
                w.flush()
        w.close()
        r = pyorc.Reader(io.BytesIO(Path(path).read_bytes()))
        stats.append([r[c].statistics for c in range(N_COLUMNS)])
        if name == "mixed":
            assert r.num_of_stripes == len(sizes)  # one piece per txn: exact, fast, ...
    for col, (a, b) in enumerate(zip(*stats, strict=True)):
        if isinstance(a.get("sum"), float):
            assert b.pop("sum") == pytest.approx(a.pop("sum"), rel=1e-12), f"column {col}"
        assert a == b, f"column {col}"


def test_running_merge_equals_merging_the_encoded_statistics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stitcher keeps its merged statistics decoded between pieces; folding
    ``merge_column_statistics`` over each piece's encoded statistics gives the same bytes."""
    folded: list[bytes] = []
    checked: list[int] = []
    add_piece = StripeStitcher.add_piece

    def checking(self: StripeStitcher, tail: Any, **kw: Any) -> None:
        add_piece(self, tail, **kw)
        piece = [v for n, _, v in tail.footer_fields if n == 7]
        if not folded:
            folded.extend(piece)
        else:
            folded[:] = [merge_column_statistics(a, b) for a, b in zip(folded, piece, strict=True)]
        assert [s.blob for s in self._stats or []] == folded
        checked.append(len(piece))

    monkeypatch.setattr(StripeStitcher, "add_piece", checking)
    sizes = (7, 0, 900, 1, 40, 2000)
    _write(str(tmp_path / layout.delta_dir_name(1, len(sizes)) / "bucket_00000"), sizes,
           streaming=True)  # fmt: skip
    assert checked and set(checked) == {N_COLUMNS}
