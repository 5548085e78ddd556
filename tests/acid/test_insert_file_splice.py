"""A one-txn insert file (not streaming) is spliced too (issue 33: a cheaper small commit).

pyarrow encodes only the ``row`` column of an insert file and the event columns are
spliced in (``acidstream.acid.orc_events``), as streaming files already were: fewer
streams, so less of the encoder's fixed cost per stream. The file must hold what the
unspliced writer wrote: the same rows, events and ACID metadata, for every codec.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

import acidstream.acid.file_pieces as file_pieces
from acidstream.acid.file_writer import AcidFileWriter
from acidstream.acid.orc_events import splice_insert_events
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.orc_tail import parse_tail, tail_bytes
from acidstream.acid.schema import TableSchema
from acidstream.acid.storage import Storage

SCHEMA = TableSchema.parse("id bigint, name string, salary int")


def _data(n: int, offset: int) -> pa.Table:
    ids = np.arange(offset, offset + n, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "name": pa.array([f"name-{i % 97:04x}" for i in range(offset, offset + n)]),
            "salary": pa.array((ids * 31 % 1_000_000).astype(np.int32)),
        }
    )


def _insert_file(path: Path, codec: str, writes: list[int], write_id: int = 7) -> bytes:
    storage, root = Storage.for_path(str(path))
    name = f"delta_{write_id:07d}_{write_id:07d}_0000"
    w = AcidFileWriter(
        storage,
        storage.join(root, name, "bucket_00000"),
        SCHEMA,
        kind="insert",
        bucket_id=0,
        options=OrcWriterOptions(compression=codec),
    )
    offset = 0
    for n in writes:
        w.insert_arrow(write_id, _data(n, offset))
        offset += n
    w.close()
    return (path / name / "bucket_00000").read_bytes()


@pytest.mark.parametrize("codec", ["NONE", "ZLIB"])
@pytest.mark.parametrize("writes", [[1000], [1], [3, 2000, 17]])
def test_a_one_txn_insert_file_is_spliced_and_holds_the_unspliced_writers_events(
    codec: str, writes: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def counted(*args: Any) -> Any:
        calls.append(1)
        return splice_insert_events(*args)

    monkeypatch.setattr(file_pieces, "splice_insert_events", counted)
    spliced = _insert_file(tmp_path / "a", codec, writes)
    assert calls  # pyarrow encoded the rows only
    monkeypatch.setattr(AcidFileWriter, "splice_events", False)
    n = len(calls)
    plain = _insert_file(tmp_path / "b", codec, writes)
    assert len(calls) == n
    a = pa_orc.ORCFile(io.BytesIO(spliced))
    b = pa_orc.ORCFile(io.BytesIO(plain))
    got = a.read()
    assert got.equals(b.read())
    total = sum(writes)
    assert got.num_rows == total
    assert got.column("rowId").to_pylist() == list(range(total))
    assert set(got.column("originalTransaction").to_pylist()) == {7}
    assert got.column("row").combine_chunks().field("id").to_pylist() == list(range(total))
    # The ACID metadata Hive reads (key index, stats, version) and the exact types.
    ta, tb = parse_tail(tail_bytes(spliced)), parse_tail(tail_bytes(plain))
    assert a.metadata == b.metadata
    assert ta.stripe_rows == tb.stripe_rows
    assert str(a.schema) == str(b.schema)
