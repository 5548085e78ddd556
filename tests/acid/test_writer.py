"""The ACID writer: event schema, ROW__ID order, per-footer metadata, side files."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyorc
import pytest

from acidstream.acid import bucket_codec, layout
from acidstream.acid.errors import AcidFormatError, ConfigError, SerializationError
from acidstream.acid.orc_tail import parse_tail
from acidstream.acid.schema import TableSchema
from acidstream.acid.side_file import decode_flush_lengths
from acidstream.acid.storage import Storage
from acidstream.acid.writer import AcidFileWriter, OrcWriterOptions, write_delta
from tests.acid.writer_cases import BUILDERS, SIMPLE, WrittenFile, simple_rows

ACID_KEYS = {"hive.acid.key.index", "hive.acid.stats", "hive.acid.version"}


def _prefix(path: str, length: int | None) -> bytes:
    data = Path(path).read_bytes()
    return data if length is None else data[:length]


def _stripe_last_keys(data: bytes) -> list[str]:
    """The key index a reader expects, derived from the rows themselves."""
    r = pyorc.Reader(io.BytesIO(data))
    out = []
    for i in range(r.num_of_stripes):
        rows = list(r.read_stripe(i))
        _, owid, bucket, rowid, _, _ = rows[-1]
        out.append(f"{owid},{bucket},{rowid};")
    return out


@pytest.mark.parametrize("case", sorted(BUILDERS))
def test_every_prefix_is_a_valid_acid_file(case: str, tmp_path: Path) -> None:
    wf: WrittenFile = BUILDERS[case](tmp_path)
    for length, nrows in wf.prefixes.items():
        data = _prefix(wf.path, length)
        r = pyorc.Reader(io.BytesIO(data))
        assert len(r) == nrows
        assert str(r.schema) == wf.schema.orc_event_schema()
        md = r.user_metadata
        assert set(md) == ACID_KEYS
        assert md["hive.acid.version"] == b"2"
        if nrows:
            entries = md["hive.acid.key.index"].decode().split(";")
            assert entries[-1] == ""
            assert [e + ";" for e in entries[:-1]] == _stripe_last_keys(data)
        kind_deletes = wf.events and wf.events[0][0] == 2
        expect_stats = f"0,0,{nrows}" if kind_deletes else f"{nrows},0,0"
        assert md["hive.acid.stats"].decode() == expect_stats
        # Exactly one metadata item per key in the footer itself (pyorc alone appends duplicates).
        names = list(parse_tail(data).user_metadata)
        assert sorted(names) == sorted(ACID_KEYS)
        assert _raw_metadata_item_count(data) == 3


def _raw_metadata_item_count(data: bytes) -> int:
    tail = parse_tail(data)
    return sum(1 for num, _, _ in tail.footer_fields if num == 5)


@pytest.mark.parametrize("case", sorted(BUILDERS))
def test_events_are_exact_and_in_row_id_order(case: str, tmp_path: Path) -> None:
    wf = BUILDERS[case](tmp_path)
    got = list(pyorc.Reader(io.BytesIO(Path(wf.path).read_bytes())))
    assert len(got) == len(wf.events)
    for g, e in zip(got, wf.events, strict=True):
        assert g[:5] == e[:5]
        if e[5] is None:
            assert g[5] is None
    keys = [g[1:4] for g in got]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)


def test_all_types_round_trip(tmp_path: Path) -> None:
    wf = BUILDERS["insert_delta_all_types"](tmp_path)
    got = list(pyorc.Reader(io.BytesIO(Path(wf.path).read_bytes())))
    assert len(got) == len(wf.events)
    for g, e in zip(got, wf.events, strict=True):
        row, exp = list(g[5]), list(e[5])
        assert row[:9] == exp[:9]
        assert row[9] == exp[9]  # char(3), exactly 3 characters
        assert row[10:12] == exp[10:12]  # decimal, date
        assert row[12].replace(tzinfo=None) == exp[12]  # timestamp as UTC wall clock
        assert row[13:15] == exp[13:15]  # binary, array
        assert row[15] == exp[15]  # map
        assert tuple(row[16]) == exp[16]  # struct


def test_streaming_rowids_restart_per_write_id_and_side_file_format(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    path = storage.join(root, "delta_0000001_0000003", "bucket_00000")
    w = AcidFileWriter(
        storage, path, SIMPLE, kind="insert", bucket_id=0, streaming=True, side_file=True
    )
    side = Path(layout.side_file_name(path))
    assert decode_flush_lengths(side.read_bytes()) == [0]  # created with an initial 0
    lengths = []
    for wid, n in ((1, 4), (2, 3), (3, 5)):
        w.insert(wid, simple_rows(n, seed=wid))
        lengths.append(w.flush())
        raw = side.read_bytes()
        assert raw[:8] == b"\0" * 8
        assert decode_flush_lengths(raw) == [0, *lengths]
        assert raw[-8:] == lengths[-1].to_bytes(8, "big", signed=True)
    assert lengths == sorted(lengths)
    w.close()
    assert not side.exists()  # deleted on clean close
    rows = list(pyorc.Reader(io.BytesIO(Path(path).read_bytes())))
    assert [(r[1], r[3]) for r in rows] == [(1, i) for i in range(4)] + [
        (2, i) for i in range(3)
    ] + [(3, i) for i in range(5)]
    assert (tmp_path / "delta_0000001_0000003" / "_orc_acid_version").read_bytes() == b"2"


def test_delta_writer_settings_follow_hive(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    path = storage.join(root, "delta_0000001_0000002", "bucket_00000")
    with AcidFileWriter(
        storage, path, SIMPLE, kind="insert", bucket_id=0, streaming=True, side_file=True
    ) as w:
        w.insert(1, simple_rows(10))
        w.flush()
    r = pyorc.Reader(open(path, "rb"))
    assert r.compression_block_size == 256 * 1024 // 8
    assert r.row_index_stride == 0  # streaming optimizations: no row index
    base = Path(write_delta(str(tmp_path / "t2"), SIMPLE, 1, simple_rows(10)))
    assert pyorc.Reader(base.open("rb")).row_index_stride == 10_000


def test_delete_delta_rejects_events_of_another_writer(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    path = storage.join(root, "delete_delta_0000002_0000002_0000", "bucket_00001")
    w = AcidFileWriter(storage, path, SIMPLE, kind="delete", bucket_id=1, statement_id=0)
    with pytest.raises(AcidFormatError, match="writer id 0"):
        w.delete(2, [(1, bucket_codec.encode(0), 0)])
    with pytest.raises(ConfigError, match="increasing"):
        w.delete(2, [(1, bucket_codec.encode(1), 5), (1, bucket_codec.encode(1), 4)])
    w.abort()
    assert not Path(path).exists()


def test_write_ids_must_not_go_down_within_a_file(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    path = storage.join(root, "delta_0000001_0000002", "bucket_00000")
    w = AcidFileWriter(
        storage, path, SIMPLE, kind="insert", bucket_id=0, streaming=True, side_file=True
    )
    w.insert(2, simple_rows(1))
    with pytest.raises(ConfigError, match="must not go down"):
        w.insert(1, simple_rows(1))
    w.close()


def test_empty_insert_file_is_removed_but_empty_base_kept(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    p = storage.join(root, "delta_0000001_0000001_0000", "bucket_00000")
    AcidFileWriter(storage, p, SIMPLE, kind="insert", bucket_id=0).close()
    assert not Path(p).exists()
    b = storage.join(root, "base_0000001", "bucket_00000")
    AcidFileWriter(storage, b, SIMPLE, kind="base", bucket_id=0).close()
    assert len(pyorc.Reader(open(b, "rb"))) == 0


def test_abort_with_side_file_keeps_committed_rows(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    path = storage.join(root, "delta_0000001_0000002", "bucket_00000")
    w = AcidFileWriter(
        storage, path, SIMPLE, kind="insert", bucket_id=0, streaming=True, side_file=True
    )
    w.insert(1, simple_rows(5))
    w.flush()
    w.insert(2, simple_rows(3))
    w.abort()
    rows = list(pyorc.Reader(open(path, "rb")))
    # The aborted txn's rows stay in the file; readers hide them by write id.
    assert [r[1] for r in rows] == [1] * 5 + [2] * 3
    assert not Path(layout.side_file_name(path)).exists()


def test_abort_without_side_file_deletes_the_file(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    path = storage.join(root, "delta_0000004_0000004_0000", "bucket_00000")
    w = AcidFileWriter(storage, path, SIMPLE, kind="insert", bucket_id=0)
    w.insert(4, simple_rows(5))
    w.abort()
    assert not Path(path).exists()


def test_flush_needs_a_streaming_writer(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    w = AcidFileWriter(
        storage,
        storage.join(root, "delta_0000001_0000001", "bucket_00000"),
        SIMPLE,
        kind="insert",
        bucket_id=0,
    )
    with pytest.raises(ConfigError, match="streaming"):
        w.flush()
    w.close()


def test_file_name_must_match_bucket(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    with pytest.raises(ConfigError, match="does not match"):
        AcidFileWriter(
            storage, storage.join(root, "d", "bucket_00001"), SIMPLE, kind="insert", bucket_id=2
        )


def test_existing_file_is_never_overwritten(tmp_path: Path) -> None:
    p = write_delta(str(tmp_path), SIMPLE, 1, simple_rows(3))
    before = Path(p).read_bytes()
    with pytest.raises(FileExistsError):
        write_delta(str(tmp_path), SIMPLE, 1, simple_rows(4))
    assert Path(p).read_bytes() == before


def test_options_are_validated() -> None:
    with pytest.raises(ConfigError, match="compression"):
        OrcWriterOptions(compression="LZO")
    with pytest.raises(ConfigError):
        OrcWriterOptions(stripe_size=0)


def test_arrow_engine_keeps_hive_char_and_varchar_semantics(tmp_path: Path) -> None:
    wf = BUILDERS["arrow_delta_char_varchar"](tmp_path)
    r = pyorc.Reader(io.BytesIO(Path(wf.path).read_bytes()))
    # The footer declares Hive's exact types, not pyarrow's `string`.
    assert str(r.schema) == wf.schema.orc_event_schema()
    got = [tuple(x[5]) for x in r]
    assert got == [e[5] for e in wf.events]  # char padded to 4, varchar truncated to 3


def test_bad_value_raises_serialization_error_and_keeps_key_index_exact(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    path = storage.join(root, "delta_0000001_0000002", "bucket_00000")
    w = AcidFileWriter(
        storage, path, SIMPLE, kind="insert", bucket_id=0, streaming=True, side_file=True
    )
    with pytest.raises(SerializationError):
        w.insert(1, [(1, "a", 1), (2, "b", "not an int"), (3, "c", 3)])
    assert w.rows_written == 1
    w.insert(2, [(4, "d", 4)])
    length = w.flush()
    w.close()
    r = pyorc.Reader(io.BytesIO(Path(path).read_bytes()[:length]))
    assert [(x[1], x[3]) for x in r] == [(1, 0), (2, 0)]
    assert r.user_metadata["hive.acid.key.index"] == b"2,536870912,0;"


# ---------------------------------------------------------------- write_events
def _events_writer(tmp_path: Path, kind: str, schema_text: str = "id int, ts timestamp") -> Any:
    storage, root = Storage.for_path(str(tmp_path))
    folder = "delete_delta_0000001_0000009" if kind == "delete" else "base_0000009"
    return AcidFileWriter(
        storage,
        storage.join(root, folder, "bucket_00000"),
        TableSchema.parse(schema_text),
        kind=kind,  # type: ignore[arg-type]
        bucket_id=0,
        engine="arrow",
        options=OrcWriterOptions(stripe_size=64 * 1024),
    )


def test_write_events_keeps_the_given_row_ids_and_writes_timestamps_exactly(
    tmp_path: Path,
) -> None:
    b0 = bucket_codec.encode(0, 0)
    # Two runs of events, as a compactor hands them over: kept ROW__IDs and currentTxns.
    runs = [
        ([3, 3, 5], [b0, b0, b0], [0, 7, 2], [3, 4, 5]),
        ([6, 8], [b0, b0], [0, 0], [6, 8]),
    ]
    stamps = [
        dt.datetime(2020, 1, 1, 0, 0, 0, 5),
        dt.datetime(1969, 7, 20, 20, 17, 40, 500000),  # the exact path, mid-file
        dt.datetime(1, 1, 1, 0, 0, 0, 1),
        None,
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    ]
    w = _events_writer(tmp_path, "base")
    done = 0
    for o, b, r, c in runs:
        n = len(o)
        rows = pa.StructArray.from_arrays(
            [
                pa.array(range(done, done + n), pa.int32()),
                pa.array(stamps[done : done + n], pa.timestamp("us")),
            ],
            names=["id", "ts"],
        )
        written = w.write_events(
            0, pa.array(o, pa.int64()), np.array(b, np.int32), r, pa.array(c, pa.int64()), rows
        )
        assert written == n
        done += n
    w.close()
    data = Path(w.path).read_bytes()
    got = list(pyorc.Reader(io.BytesIO(data), timezone=ZoneInfo("UTC")))
    keys = [k for o, b, r, _ in runs for k in zip(o, b, r, strict=True)]
    cwids = [x for run in runs for x in run[3]]
    assert [g[1:4] for g in got] == keys
    assert [g[4] for g in got] == cwids
    assert [g[0] for g in got] == [0] * 5
    assert [None if g[5][1] is None else g[5][1].replace(tzinfo=None) for g in got] == stamps
    md = pyorc.Reader(io.BytesIO(data)).user_metadata
    assert [e + ";" for e in md["hive.acid.key.index"].decode().split(";")[:-1]] == (
        _stripe_last_keys(data)
    )
    assert md["hive.acid.stats"] == b"5,0,0"


def test_write_events_takes_delete_events_and_checks_row_id_order(tmp_path: Path) -> None:
    b0 = bucket_codec.encode(0, 0)
    w = _events_writer(tmp_path, "delete")
    # One row deleted by two txns (equal keys, newest first): allowed.
    assert w.write_events(2, [1, 1, 2], [b0] * 3, [4, 4, 0], [9, 7, 9], None) == 3
    assert w.write_events(np.int32(2), [2], [b0], [3], np.int64(9), None) == 1  # numpy scalars
    with pytest.raises(ConfigError, match="ROW__ID order"):
        w.write_events(2, [1], [b0], [9], 9, None)  # goes back before (2, b0, 0)
    with pytest.raises(ConfigError, match="ROW__ID order"):
        w.write_events(2, [3, 3], [b0, b0], [5, 4], 9, None)
    with pytest.raises(ConfigError, match="length"):
        w.write_events(2, [3, 3], [b0], [5, 6], 9, None)
    w.close()
    got = list(pyorc.Reader(io.BytesIO(Path(w.path).read_bytes())))
    assert [(g[0], g[1], g[3], g[4], g[5]) for g in got] == [
        (2, 1, 4, 9, None),
        (2, 1, 4, 7, None),
        (2, 2, 0, 9, None),
        (2, 2, 3, 9, None),
    ]


# (pyorc's insert_arrow hands struct values over as dicts, which pyorc refuses: not covered.)
@pytest.mark.parametrize(
    ("engine", "via"), [("pyorc", "rows"), ("arrow", "rows"), ("arrow", "arrow")]
)
def test_null_structs_keep_later_values_in_place(tmp_path: Path, engine: str, via: str) -> None:
    # pyarrow wrote the (undefined) children of a NULL struct nested in the event row as
    # values; ORC readers skip children of NULL parents, so later values shifted.
    schema = TableSchema.parse(
        "id int, st struct<x:int,y:string>, arr array<struct<a:int>>, m map<string,struct<b:int>>"
    )
    rows: list[tuple[Any, ...]] = [
        (i, None if i % 3 == 1 else (i, str(i)), [None, (i,)] if i % 2 else [(i,)],
         {"k": None if i % 4 == 0 else (i,)})
        for i in range(12)
    ]  # fmt: skip
    storage, root = Storage.for_path(str(tmp_path))
    path = storage.join(root, "delta_0000001_0000001_0000", "bucket_00000")
    with AcidFileWriter(storage, path, schema, kind="insert", bucket_id=0, engine=engine) as w:  # type: ignore[arg-type]
        if via == "arrow":
            typ = pa.struct([pa.field(n, t.to_arrow()) for n, t in schema.columns])
            w.insert_arrow(1, pa.Table.from_struct_array(pa.array(rows, typ)))
        else:
            w.insert(1, rows)
    got = [tuple(e[5]) for e in pyorc.Reader(io.BytesIO(Path(path).read_bytes()))]
    assert [(g[0], g[1], g[2], g[3]) for g in got] == [(r[0], r[1], r[2], r[3]) for r in rows]
    from acidstream.acid.reader import read_path

    back = read_path(tmp_path).to_pylist()
    assert [(b["id"], None if b["st"] is None else (b["st"]["x"], b["st"]["y"])) for b in back] == [
        (r[0], r[1]) for r in rows
    ]
