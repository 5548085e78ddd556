"""Hive 2.x layouts the compactor and readers meet: the originals-only major compaction
base ``base_-9223372036854775808`` and delete events with V0 (plain) bucket numbers."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from acidstream.acid import bucket_codec
from acidstream.acid.directory import get_acid_state
from acidstream.acid.layout import ORIGINALS_BASE_WRITE_ID, base_dir_name, parse_dir_name
from acidstream.acid.reader import read_path
from acidstream.acid.schema import TableSchema
from acidstream.acid.snapshot import ValidTxnList, ValidWriteIdList
from acidstream.acid.storage import Storage
from acidstream.acid.writer import AcidFileWriter, write_delete_delta, write_delta
from tests.acid.orc_builders import write_original

SCHEMA = TableSchema.parse("id int, name string")
TYPES = {"id": pa.int32(), "name": pa.string()}
HIVE2_BASE = "base_-9223372036854775808"


def test_originals_base_name_parses_and_round_trips() -> None:
    parsed = parse_dir_name(HIVE2_BASE)
    assert parsed is not None and parsed.write_id == ORIGINALS_BASE_WRITE_ID == -(2**63)
    assert base_dir_name(ORIGINALS_BASE_WRITE_ID) == HIVE2_BASE
    with pytest.raises(ValueError):
        base_dir_name(-1)


def _originals_base(tmp_path: Path) -> None:
    """What Hive 2's compactor leaves: originals (now obsolete) and the base holding their
    rows under their synthetic ROW__IDs (write id 0)."""
    write_original(tmp_path / "000000_0", {"id": [1, 2], "name": ["a", "b"]}, types=TYPES)
    storage, root = Storage.for_path(str(tmp_path))
    path = f"{root}/{HIVE2_BASE}/bucket_00000"
    with AcidFileWriter(storage, path, SCHEMA, kind="base", bucket_id=0) as w:
        w.insert(0, [(1, "a"), (2, "b")])


def test_originals_base_is_chosen_and_read(tmp_path: Path) -> None:
    _originals_base(tmp_path)
    write_delta(str(tmp_path), SCHEMA, 1, [(3, "c")])
    write_delete_delta(str(tmp_path), SCHEMA, 2, [(0, bucket_codec.encode(0), 1)])
    wids = ValidWriteIdList.from_string("db.t:2:9223372036854775807::")
    st = get_acid_state(str(tmp_path), write_ids=wids, txns=ValidTxnList())
    assert st.base is not None and st.base.name == HIVE2_BASE
    assert [Path(p).name for p in st.obsolete] == ["000000_0"]  # the originals it replaced
    assert st.original_files == ()
    assert [d.name for d in st.deltas] == [
        "delta_0000001_0000001_0000",
        "delete_delta_0000002_0000002_0000",
    ]
    got = read_path(tmp_path, write_ids=wids, include_row_id=True)
    assert [(r["row__id"]["writeid"], r["row__id"]["rowid"], r["id"]) for r in got.to_pylist()] == [
        (0, 0, 1),
        (1, 0, 3),
    ]
    # Any real base supersedes it.
    storage, root = Storage.for_path(str(tmp_path))
    with AcidFileWriter(
        storage, f"{root}/base_0000001/bucket_00000", SCHEMA, kind="base", bucket_id=0
    ) as w:
        w.insert(1, [(9, "z")])
    st = get_acid_state(str(tmp_path), write_ids=wids, txns=ValidTxnList())
    assert st.base is not None and st.base.name == "base_0000001"
    assert HIVE2_BASE in [Path(p).name for p in st.obsolete]


@pytest.mark.parametrize("cap", [10_000_000, 0], ids=["key-set", "sort-merge"])
def test_v0_delete_events_delete_original_rows(tmp_path: Path, cap: int) -> None:
    write_original(tmp_path / "000000_0", {"id": [0, 1, 2], "name": ["a", "b", "c"]}, types=TYPES)
    write_original(
        tmp_path / "000001_0", {"id": [10, 11, 12], "name": ["x", "y", "z"]}, types=TYPES
    )
    # Hive 2 wrote these: the bucket field is the plain bucket number (V0), not V1.
    assert bucket_codec.version(1) == 0
    write_delete_delta(str(tmp_path), SCHEMA, 1, [(0, 0, 0), (0, 1, 2)])
    got = read_path(tmp_path, delete_event_cap=cap, include_row_id=True)
    assert [r["id"] for r in got.to_pylist()] == [1, 2, 10, 11]
    # The rows keep Hive's synthetic (V1) ROW__IDs.
    assert {r["row__id"]["bucketid"] for r in got.to_pylist()} == {
        bucket_codec.encode(0),
        bucket_codec.encode(1),
    }
    # V1 events for the same rows delete the same rows.
    other = tmp_path / "v1"
    for f in ("000000_0", "000001_0"):
        (other / f).parent.mkdir(exist_ok=True)
        (other / f).write_bytes((tmp_path / f).read_bytes())
    write_delete_delta(
        str(other), SCHEMA, 1, [(0, bucket_codec.encode(0), 0), (0, bucket_codec.encode(1), 2)]
    )
    assert (
        read_path(other, delete_event_cap=cap).to_pylist()
        == got.drop_columns(["row__id"]).to_pylist()
    )


def test_v0_delete_events_delete_v0_acid_rows(tmp_path: Path) -> None:
    """Rows Hive 2 wrote into ACID files carry V0 buckets too; V0 and V1 events both hit them."""
    storage, root = Storage.for_path(str(tmp_path))
    path = f"{root}/delta_0000001_0000001/bucket_00001"
    with AcidFileWriter(storage, path, SCHEMA, kind="insert", bucket_id=1) as w:
        w.bucket_property = 1  # V0, as Hive 2's OrcRecordUpdater wrote it
        w.insert(1, [(5, "e"), (6, "f"), (7, "g")])
    write_delete_delta(str(tmp_path), SCHEMA, 2, [(1, 1, 0)])
    write_delete_delta(str(tmp_path), SCHEMA, 3, [(1, bucket_codec.encode(1), 2)])
    for cap in (10_000_000, 0):
        assert [r["id"] for r in read_path(tmp_path, delete_event_cap=cap).to_pylist()] == [6]
