"""Insert events' key columns spliced into pyarrow's stripes (``acidstream.acid.orc_events``).

The splice must give what ORC C++ writes for the whole event table: byte for byte when
the file is uncompressed (same runs, row-index positions, statistics, types, offsets),
and for every codec, rows that pyarrow reads back, that ORC C++ (pyorc) and ORC Java
seek to through the row index, and streaming files equal to the unspliced writer's.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.orc as pa_orc
import pyorc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.errors import AcidFormatError
from acidstream.acid.file_writer import AcidFileWriter
from acidstream.acid.orc_events import InsertRun, splice_insert_events
from acidstream.acid.orc_tail import compress_chunks, parse_tail, tail_bytes
from acidstream.acid.protobuf import encode_fields
from acidstream.acid.schema import TableSchema
from acidstream.acid.storage import Storage

_I64 = (1 << 63) - 1


def _rows(n: int, offset: int = 0) -> pa.StructArray:
    ids = np.arange(offset, offset + n, dtype=np.int32)
    return pa.StructArray.from_arrays(
        [pa.array(ids), pa.array([f"s{i}" for i in range(offset, offset + n)])], names=["id", "s"]
    )


def _events(runs: list[InsertRun], bucket: int, rows: pa.StructArray) -> pa.Table:
    n = sum(r.count for r in runs)
    wid = np.concatenate([np.full(r.count, r.write_id, np.int64) for r in runs])
    rid = np.concatenate(
        [np.arange(r.first_row_id, r.first_row_id + r.count, dtype=np.int64) for r in runs]
    )
    return pa.table(
        {
            "operation": pa.array(np.zeros(n, np.int32)),
            "originalTransaction": pa.array(wid),
            "bucket": pa.array(np.full(n, bucket, np.int32)),
            "rowId": pa.array(rid),
            "currentTransaction": pa.array(wid),
            "row": rows,
        }
    )


def _write(tables: list[pa.Table], **options: Any) -> bytes:
    out = io.BytesIO()
    writer = pa_orc.ORCWriter(out, **options)
    for t in tables:
        writer.write(t)
    writer.close()
    return out.getvalue()


def _spliced(runs: list[InsertRun], bucket: int, rows: pa.StructArray, **options: Any) -> bytes:
    """The piece pyarrow writes from the rows alone (one write per run), spliced, as a
    whole ORC file."""
    tables, at = [], 0
    for r in runs:
        tables.append(pa.table({"row": rows.slice(at, r.count)}))
        at += r.count
    piece = _write(tables, **options)
    body, tail = splice_insert_events(
        memoryview(piece), parse_tail(tail_bytes(piece)), runs, bucket
    )
    footer = compress_chunks(encode_fields(tail.footer_fields), tail.compression, tail.block_size)
    meta = tail.metadata_section
    ps = encode_fields(
        [
            (n, w, len(footer) if n == 1 else len(meta) if n == 5 else v)
            for n, w, v in tail.postscript_fields
        ]
    )
    return b"ORC" + b"".join(bytes(p) for p in body) + meta + footer + ps + bytes((len(ps),))


def _pyarrow_whole(
    runs: list[InsertRun], bucket: int, rows: pa.StructArray, **options: Any
) -> bytes:
    """What pyarrow writes for the same events, one write per run."""
    tables, at = [], 0
    for r in runs:
        tables.append(_events([r], bucket, rows.slice(at, r.count)))
        at += r.count
    return _write(tables, **options)


# Lengths around RLEv2's run boundaries (512), SHORT_REPEAT (3..10) and DIRECT (1..3)
# remainders, and row-group boundaries (10,000).
LENGTHS = [1, 2, 3, 4, 5, 10, 11, 12, 100, 511, 512, 513, 514, 515, 522, 523, 1027, 10_000, 10_001]


@pytest.mark.parametrize("n", LENGTHS)
def test_one_write_is_byte_for_byte_what_orc_cpp_writes(n: int) -> None:
    runs = [InsertRun(7, 0, n)]
    rows = _rows(n)
    assert _spliced(runs, 536870912, rows) == _pyarrow_whole(runs, 536870912, rows)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 3000),
    write_id=st.integers(0, _I64),
    first=st.integers(0, 1 << 40),
    bucket=st.integers(0, (1 << 31) - 1),
    stride=st.sampled_from([10_000, 1000, 777, 512]),
)
def test_any_values_and_row_index_stride_match_orc_cpp(
    n: int, write_id: int, first: int, bucket: int, stride: int
) -> None:
    runs = [InsertRun(write_id, first, n)]
    rows = _rows(n)
    opts = {"row_index_stride": stride}
    assert _spliced(runs, bucket, rows, **opts) == _pyarrow_whole(runs, bucket, rows, **opts)


@pytest.mark.parametrize("width", [118, 122, 123, 130])
def test_wide_rows_match_orc_cpp(width: int) -> None:
    """Rows of so many columns that renumbered column ids need two-byte varints (a row
    column from id 123 on lands at 128 or past it), in streams and statistics."""
    n = 700
    rows = pa.StructArray.from_arrays(
        [pa.array(np.arange(n, dtype=np.int32) * k) for k in range(width)],
        names=[f"c{k}" for k in range(width)],
    )
    runs = [InsertRun(3, 0, n)]
    assert _spliced(runs, 536870912, rows) == _pyarrow_whole(runs, 536870912, rows)


def test_writes_that_continue_each_other_match_one_encoder() -> None:
    # ORC C++'s encoder runs on across writes; so do the spliced columns.
    runs = [InsertRun(9, 0, 3000), InsertRun(9, 3000, 7001), InsertRun(9, 10_001, 4)]
    rows = _rows(10_005)
    assert _spliced(runs, 536936448, rows) == _pyarrow_whole(runs, 536936448, rows)


def _check_reads(data: bytes, expected: pa.Table) -> None:
    """pyarrow reads ``data`` as ``expected``; pyorc (ORC C++) seeks through the row index
    to row-group starts and rows inside groups."""
    assert pa_orc.ORCFile(io.BytesIO(data)).read().equals(expected)
    want = expected.to_pylist()
    reader = pyorc.Reader(io.BytesIO(data))
    n = len(want)
    for k in sorted({0, 1, 777, 999, 1000, 1001, 9999, 10_000, 10_001, 20_000, n - 1}):
        if k >= n:
            continue
        reader.seek(k)
        got = next(reader)
        e = want[k]
        keys = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction")
        assert got[:5] == tuple(e[c] for c in keys), k
        assert got[5] == (e["row"]["id"], e["row"]["s"]), k


@pytest.mark.parametrize("codec", ["uncompressed", "zlib", "snappy", "zstd"])
@pytest.mark.parametrize("stride", [10_000, 1000])
def test_every_codec_reads_back_and_seeks(codec: str, stride: int) -> None:
    runs = [InsertRun(5, 0, 25_000), InsertRun(5, 25_000, 3)]
    rows = _rows(25_003)
    opts = {"compression": codec, "row_index_stride": stride}
    _check_reads(_spliced(runs, 536870912, rows, **opts), _events(runs, 536870912, rows))


@pytest.mark.parametrize("codec", ["uncompressed", "zlib"])
def test_runs_of_other_write_ids_and_several_stripes(codec: str) -> None:
    # Runs that do not continue each other restart the encoding; a small stripe size
    # gives several stripes, each with its own streams and statistics, some of them
    # splitting a run.
    runs = [InsertRun(3, 0, 5), InsertRun(4, 0, 78_000), InsertRun(2**40, 2**35, 1030)]
    rows = _rows(79_035)
    opts = {"stripe_size": 64 * 1024, "compression": codec}
    data = _spliced(runs, 537001984, rows, **opts)
    assert pyorc.Reader(io.BytesIO(data)).num_of_stripes > 1
    _check_reads(data, _events(runs, 537001984, rows))


def test_runs_must_cover_the_piece() -> None:
    piece = _write([pa.table({"row": _rows(10)})])
    with pytest.raises(AcidFormatError, match="do not cover"):
        splice_insert_events(
            memoryview(piece), parse_tail(tail_bytes(piece)), [InsertRun(1, 0, 9)], 0
        )


SCHEMA = TableSchema.parse("id int, s string")


def _streaming_file(path: Path, codec: str, blocks: list[list[int]]) -> bytes:
    """A streaming delta file (side file, one footer per txn) of ``blocks``: per txn,
    the sizes of its writes."""
    from acidstream.acid.orc_options import OrcWriterOptions

    storage, root = Storage.for_path(str(path))
    w = AcidFileWriter(
        storage,
        storage.join(root, "delta_0000001_0000009", "bucket_00000"),
        SCHEMA,
        kind="insert",
        bucket_id=0,
        streaming=True,
        side_file=True,
        engine="arrow",
        options=OrcWriterOptions(compression=codec),
    )
    offset = 0
    for write_id, sizes in enumerate(blocks, 1):
        for n in sizes:
            rows = _rows(n, offset)
            w.insert_arrow(write_id, pa.table({"id": rows.field(0), "s": rows.field(1)}))
            offset += n
        w.flush()
    w.close()
    return (path / "delta_0000001_0000009" / "bucket_00000").read_bytes()


@pytest.mark.parametrize("codec", ["NONE", "ZLIB"])
def test_streaming_files_are_the_unspliced_writers(
    codec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import acidstream.acid.file_pieces as file_pieces

    calls: list[int] = []

    def counted(*args: Any) -> Any:
        calls.append(1)
        return splice_insert_events(*args)

    monkeypatch.setattr(file_pieces, "splice_insert_events", counted)
    blocks = [[10_000], [3, 5000, 5000], [1], [20_001]]
    spliced = _streaming_file(tmp_path / "a", codec, blocks)
    assert len(calls) == len(blocks)  # one piece per txn, each spliced
    monkeypatch.setattr(AcidFileWriter, "splice_events", False)
    plain = _streaming_file(tmp_path / "b", codec, blocks)
    assert len(calls) == len(blocks)
    if codec == "NONE":
        assert spliced == plain  # every footer, statistic and offset included
    a = pa_orc.ORCFile(io.BytesIO(spliced)).read()
    assert a.equals(pa_orc.ORCFile(io.BytesIO(plain)).read())
    assert a.num_rows == 40_005
    assert a.column("rowId").to_pylist()[-3:] == [19_998, 19_999, 20_000]


@pytest.mark.spark
@pytest.mark.parametrize("codec", ["NONE", "ZLIB"])
def test_orc_java_seeks_through_the_spliced_row_index(
    codec: str, tmp_path: Path, jvm_orc: Any
) -> None:
    from py4j.java_gateway import get_field

    data = _streaming_file(tmp_path, codec, [[25_000], [12_345]])
    path = str(tmp_path / "delta_0000001_0000009" / "bucket_00000")
    assert Path(path).read_bytes() == data
    jvm = jvm_orc.jvm
    orc = jvm.org.apache.orc.OrcFile
    reader = orc.createReader(jvm.org.apache.hadoop.fs.Path(path), orc.readerOptions(jvm_orc.conf))
    rows = reader.rows()
    batch = reader.getSchema().createRowBatch(1)
    expected = pa_orc.ORCFile(io.BytesIO(data)).read().to_pylist()
    for k in (0, 9_999, 10_000, 20_001, 24_999, 25_000, 35_000, 37_344):
        rows.seekToRow(k)
        assert rows.nextBatch(batch)
        cols = get_field(batch, "cols")
        got = [get_field(cols[c], "vector")[0] for c in range(5)]
        e = expected[k]
        assert got == [
            e["operation"],
            e["originalTransaction"],
            e["bucket"],
            e["rowId"],
            e["currentTransaction"],
        ], k
    rows.close()
