"""A big write's rows encoded on several threads (issue 33 item 3): the file is the same
ACID file, event for event, as one encoder writes, cut into one piece per slice."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from acidstream.acid.file_writer import AcidFileWriter
from acidstream.acid.parallel_encode import MIN_ROWS_PER_THREAD, parallel_slices, threads
from acidstream.acid.schema import TableSchema
from acidstream.acid.storage import Storage

SCHEMA = TableSchema.parse("id bigint, name string, salary int")
N = 2 * MIN_ROWS_PER_THREAD + 1234


def _data(n: int, seed: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(seed, seed + n), pa.int64()),
            "name": pa.array([f"n{(i * 7919) % 1000}" for i in range(n)]),
            "salary": pa.array([i % 977 for i in range(n)], pa.int32()),
        }
    )


def _write(tmp: Path, name: str, *, streaming: bool, splice: bool) -> pa_orc.ORCFile:
    storage, root = Storage.for_path(str(tmp / name))
    path = f"{root}/delta_0000001_0000002/bucket_00000"
    old = AcidFileWriter.splice_events
    AcidFileWriter.splice_events = splice
    try:
        w = AcidFileWriter(
            storage, path, SCHEMA, kind="insert", bucket_id=0, streaming=streaming,
            side_file=streaming, engine="arrow",
        )  # fmt: skip
        w.insert_arrow(1, _data(1000, 0))  # a small write first: its own piece
        if streaming:
            w.flush()
        w.insert_arrow(2, _data(N, 10_000_000))
        w.close()
    finally:
        AcidFileWriter.splice_events = old
    return pa_orc.ORCFile(path)


def test_slices_need_two_threads_and_enough_rows() -> None:
    assert parallel_slices(2 * MIN_ROWS_PER_THREAD - 1, 1, 1 << 26) == [
        (0, 2 * MIN_ROWS_PER_THREAD - 1)
    ]
    many = parallel_slices(10 * MIN_ROWS_PER_THREAD, 1, 1 << 26)
    if threads() > 1:
        assert (
            len(many) == min(threads(), 10) and sum(n for _, n in many) == 10 * MIN_ROWS_PER_THREAD
        )
        # Bigger than a stripe: slices of about a stripe each.
        assert len(parallel_slices(10 * MIN_ROWS_PER_THREAD, 5 << 26, 1 << 26)) >= 5


@pytest.mark.skipif(threads() < 2, reason="one core: big writes are not split")
@pytest.mark.parametrize("streaming", [False, True])
def test_big_write_is_split_into_pieces_with_the_same_events(
    tmp_path: Path, streaming: bool
) -> None:
    split = _write(tmp_path, "split", streaming=streaming, splice=True)
    whole = _write(tmp_path, "whole", streaming=streaming, splice=False)  # one encoder
    assert split.nstripes > whole.nstripes  # the big write's slices are stripes of their own
    got, want = split.read(), whole.read()
    assert got.num_rows == want.num_rows == 1000 + N
    assert got.equals(want)
    row_ids = got.column("rowId").to_pylist()
    assert row_ids == list(range(1000)) + list(range(N))  # numbering restarts per write id
    meta = split.metadata
    assert len(meta[b"hive.acid.key.index"].split(b";")) - 1 == split.nstripes
