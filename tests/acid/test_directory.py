"""``get_acid_state``: Hive's directory selection rules one by one, and property-based checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.directory import (
    LONG_MIN,
    find_best_working_deltas,
    get_acid_state,
    is_valid_base,
)
from acidstream.acid.errors import AcidFormatError, NotEnoughHistoryError
from acidstream.acid.layout import (
    ParsedBase,
    ParsedDelta,
    base_dir_name,
    delta_dir_name,
    parse_dir_name,
)
from acidstream.acid.snapshot import (
    LONG_MAX,
    ValidCompactorWriteIdList,
    ValidTxnList,
    ValidWriteIdList,
)
from tests.acid.orc_builders import write_side_file

ALL_TXNS = ValidTxnList()


def make(table: Path, *names: str) -> Path:
    for n in names:
        (table / n).mkdir(parents=True, exist_ok=True)
    return table


def names(paths: tuple[str, ...]) -> list[str]:
    return sorted(Path(p).name for p in paths)


def wl(hwm: int, open_ids: tuple[int, ...] = (), aborted: tuple[int, ...] = ()) -> ValidWriteIdList:
    min_open = min(open_ids) if open_ids else LONG_MAX
    return ValidWriteIdList("db.t", hwm, open_ids, aborted, min_open)


def test_valid_txn_list_is_mandatory(tmp_path: Path) -> None:
    with pytest.raises(AcidFormatError, match="No ValidTxnList"):
        get_acid_state(str(make(tmp_path, "delta_0000001_0000001_0000")), write_ids=None, txns=None)


def test_highest_valid_base_wins_and_makes_older_things_obsolete(tmp_path: Path) -> None:
    t = make(
        tmp_path,
        "base_0000005",
        "base_0000010",
        "delta_0000003_0000003_0000",
        "delta_0000011_0000011_0000",
        "sub",
    )
    (t / "000000_0").write_bytes(b"x")
    s = get_acid_state(str(t), write_ids=wl(20), txns=ALL_TXNS)
    assert s.base is not None and s.base.name == "base_0000010"
    assert [d.name for d in s.deltas] == ["delta_0000011_0000011_0000"]
    assert names(s.obsolete) == ["000000_0", "base_0000005", "delta_0000003_0000003_0000", "sub"]
    assert s.original_files == ()


def test_compacted_base_needs_a_valid_visibility_txn(tmp_path: Path) -> None:
    t = make(tmp_path, "base_0000005", "base_0000010_v0000050", "base_0000012_v0000060")
    txns = ValidTxnList(high_watermark=100, open_txns=(50,), aborted_txns=(60,), min_open_txn=50)
    s = get_acid_state(str(t), write_ids=wl(20), txns=txns)
    assert s.base is not None and s.base.name == "base_0000005"
    assert names(s.aborted) == ["base_0000012_v0000060"]  # aborted compactor txn: cleanable
    # Once the compactor txn commits, its base is used.
    s2 = get_acid_state(str(t), write_ids=wl(20), txns=ValidTxnList())
    assert s2.base is not None and s2.base.name == "base_0000012_v0000060"


def test_not_enough_history_when_only_a_newer_compacted_base_exists(tmp_path: Path) -> None:
    t = make(tmp_path, "base_0000010_v0000030", "delta_0000011_0000011_0000")
    # Write id 5 is still open for this reader: the compacted base (10 >= minOpen 5) is unusable.
    with pytest.raises(NotEnoughHistoryError, match=r"Not enough history available for \(20,5\)"):
        get_acid_state(str(t), write_ids=wl(20, open_ids=(5,)), txns=ALL_TXNS)


def test_metadata_acid_file_marks_a_compacted_base(tmp_path: Path) -> None:
    t = make(tmp_path, "base_0000010")
    (t / "base_0000010" / "_metadata_acid").write_text(
        '{"thisFileVersion":"0","dataFormat":"compacted"}'
    )
    with pytest.raises(NotEnoughHistoryError):
        get_acid_state(str(t), write_ids=wl(20, open_ids=(5,)), txns=ALL_TXNS)
    (t / "base_0000010" / "_metadata_acid").write_text(
        '{"thisFileVersion":"1","dataFormat":"compacted"}'
    )
    with pytest.raises(AcidFormatError, match="thisFileVersion"):
        get_acid_state(str(t), write_ids=wl(20), txns=ALL_TXNS)


def test_insert_overwrite_base_only_needs_a_valid_write_id(tmp_path: Path) -> None:
    # IOW base_10 while 5 is open: valid (10 is committed), unlike a compacted base_10.
    t = make(tmp_path, "base_0000010")
    s = get_acid_state(str(t), write_ids=wl(20, open_ids=(5,)), txns=ALL_TXNS)
    assert s.base is not None and s.base.name == "base_0000010"
    # An IOW base of an open write id is not used, and it is no error either.
    s = get_acid_state(str(t), write_ids=wl(20, open_ids=(10, 12)), txns=ALL_TXNS)
    assert s.base is not None  # 10 <= minOpenWriteId 10: Hive's first isValidBase rule
    s = get_acid_state(str(t), write_ids=wl(20, open_ids=(8, 10)), txns=ALL_TXNS)
    assert s.base is None and s.obsolete == ()


def test_aborted_insert_overwrite_base_is_listed_as_aborted(tmp_path: Path) -> None:
    t = make(tmp_path, "base_0000005", "base_0000010")
    s = get_acid_state(str(t), write_ids=wl(20, aborted=(10,)), txns=ALL_TXNS)
    assert s.base is not None and s.base.name == "base_0000005"
    assert names(s.aborted) == ["base_0000010"] and s.aborted_write_ids == (10,)


def test_same_write_id_compacted_base_beats_insert_overwrite(tmp_path: Path) -> None:
    t = make(tmp_path, "base_0000010", "base_0000010_v0000020")
    s = get_acid_state(str(t), write_ids=wl(20), txns=ALL_TXNS)
    assert s.base is not None and s.base.name == "base_0000010_v0000020"
    assert names(s.obsolete) == ["base_0000010"]


def test_is_valid_base_rules() -> None:
    w = wl(20, open_ids=(15,))
    assert is_valid_base(LONG_MIN, compacted=True, write_ids=w)
    assert is_valid_base(15, compacted=True, write_ids=w)  # <= minOpenWriteId
    assert not is_valid_base(16, compacted=True, write_ids=w)
    assert is_valid_base(16, compacted=False, write_ids=w)  # IOW: 16 is a valid write id
    assert not is_valid_base(21, compacted=False, write_ids=w)
    nothing_open = wl(20)
    assert is_valid_base(20, compacted=True, write_ids=nothing_open)
    assert not is_valid_base(21, compacted=True, write_ids=nothing_open)


def test_aborted_deltas(tmp_path: Path) -> None:
    t = make(
        tmp_path,
        "delta_0000001_0000001_0000",
        "delta_0000002_0000002_0000",
        "delta_0000003_0000004",
    )
    s = get_acid_state(str(t), write_ids=wl(10, aborted=(2, 3)), txns=ALL_TXNS)
    assert names(s.aborted) == ["delta_0000002_0000002_0000"]
    assert [d.name for d in s.deltas] == ["delta_0000001_0000001_0000", "delta_0000003_0000004"]
    assert s.uncompacted_aborts  # delta_3_4 is partly aborted


def test_wide_deltas_first(tmp_path: Path) -> None:
    t = make(
        tmp_path,
        "delta_0000005_0000020",
        "delta_0000005_0000010",
        "delta_0000011_0000020",
        "delta_0000051_0000060",
    )
    s = get_acid_state(str(t), write_ids=wl(100), txns=ALL_TXNS)
    assert [d.name for d in s.deltas] == ["delta_0000005_0000020", "delta_0000051_0000060"]
    assert names(s.obsolete) == ["delta_0000005_0000010", "delta_0000011_0000020"]


def test_statement_grouping_and_delete_delta_pairing(tmp_path: Path) -> None:
    t = make(
        tmp_path,
        "delta_0000005_0000005_0000",
        "delta_0000005_0000005_0001",
        "delete_delta_0000005_0000005_0001",
        "delta_0000007_0000007",
        "delete_delta_0000007_0000007",
    )
    s = get_acid_state(str(t), write_ids=wl(10), txns=ALL_TXNS)
    assert [d.name for d in s.deltas] == [
        "delta_0000005_0000005_0000",
        "delete_delta_0000005_0000005_0001",
        "delta_0000005_0000005_0001",
        "delete_delta_0000007_0000007",
        "delta_0000007_0000007",
    ]
    assert s.obsolete == ()


def test_wide_delta_makes_inner_delete_delta_obsolete(tmp_path: Path) -> None:
    t = make(tmp_path, "delta_0000030_0000050", "delete_delta_0000040_0000040_0000")
    s = get_acid_state(str(t), write_ids=wl(60), txns=ALL_TXNS)
    assert [d.name for d in s.deltas] == ["delta_0000030_0000050"]
    assert names(s.obsolete) == ["delete_delta_0000040_0000040_0000"]


def test_delta_above_high_watermark_is_neither_used_nor_obsolete(tmp_path: Path) -> None:
    t = make(tmp_path, "delta_0000001_0000001_0000", "delta_0000005_0000005_0000")
    s = get_acid_state(str(t), write_ids=wl(3), txns=ALL_TXNS)
    assert [d.name for d in s.deltas] == ["delta_0000001_0000001_0000"]
    assert s.obsolete == () and s.aborted == ()


def test_original_files_sorted_by_path_and_original_dirs_recursed(tmp_path: Path) -> None:
    import pyarrow as pa

    from tests.acid.orc_builders import write_original

    t = tmp_path / "t"
    ty = {"id": pa.int32()}
    write_original(t / "000001_0", {"id": [1, 2]}, types=ty)
    write_original(t / "000000_0_copy_1", {"id": [3]}, types=ty)
    write_original(t / "000000_0", {"id": [4, 5, 6]}, types=ty)
    write_original(t / "HIVE_UNION_SUBDIR_1" / "000000_0", {"id": [7]}, types=ty)
    (t / "empty_0").write_bytes(b"")  # 0-length files are ignored
    s = get_acid_state(str(t), write_ids=None, txns=ALL_TXNS)
    got = [
        (Path(o.path).relative_to(t).as_posix(), o.bucket_id, o.start_row_id)
        for o in s.original_files
    ]
    assert got == [
        ("000000_0", 0, 0),
        ("000000_0_copy_1", 0, 3),
        ("000001_0", 1, 0),
        ("HIVE_UNION_SUBDIR_1/000000_0", 0, 4),
    ]


def test_side_file_lengths_only_for_streaming_insert_deltas(tmp_path: Path) -> None:
    from acidstream.acid.schema import TableSchema
    from acidstream.acid.writer import write_delta

    t = tmp_path / "t"
    for d in ("delta_0000001_0000002", "delta_0000004_0000005_v0000009"):
        f = t / d / "bucket_00000"
        f.parent.mkdir(parents=True)
        f.write_bytes(b"0" * 100)
        write_side_file(f, [0, 40])
    # delta_x_x may hold raw files, so it must be a real ORC file here.
    single = Path(write_delta(str(t), TableSchema.parse("a int"), 3, [(1,)]))
    write_side_file(single, [0, 40])
    s = get_acid_state(str(t), write_ids=None, txns=ALL_TXNS)
    lengths = {Path(p).parent.name: n for p, n in s.logical_lengths().items()}
    assert lengths == {
        "delta_0000001_0000002": 40,
        single.parent.name: single.stat().st_size,
        "delta_0000004_0000005_v0000009": 100,
    }


@pytest.mark.parametrize(
    "raw", [b"", b"\x00\x00\x00", b"\x00" * 7 + b"\x28" + b"\x00" * 7 + b"\xff"]
)
def test_corrupt_side_file_is_a_format_error(tmp_path: Path, raw: bytes) -> None:
    f = tmp_path / "delta_0000001_0000002" / "bucket_00000"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"0" * 100)
    write_side_file(f, [], raw=raw)
    with pytest.raises(AcidFormatError, match="_flush_length"):
        get_acid_state(str(tmp_path), write_ids=None, txns=ALL_TXNS)


def test_compactor_write_id_list_excludes_unresolved_streaming_delta(tmp_path: Path) -> None:
    t = make(
        tmp_path,
        "delta_0000001_0000001_0000",
        "delta_0000002_0000004",
        "delta_0000005_0000005_0000",
    )
    cw = ValidCompactorWriteIdList.from_table_state(
        "db.t", 5, open_write_ids=(3,), aborted_write_ids=()
    )
    s = get_acid_state(str(t), write_ids=cw, txns=ALL_TXNS)
    assert [d.name for d in s.deltas] == ["delta_0000001_0000001_0000"]


def test_unparsable_delta_name_is_a_format_error(tmp_path: Path) -> None:
    with pytest.raises(AcidFormatError, match="unparsable"):
        get_acid_state(str(make(tmp_path, "delta_x_y")), write_ids=None, txns=ALL_TXNS)


# ------------------------------------------------------------------------------- names


ids = st.integers(min_value=0, max_value=10**15)


@given(
    lo=ids, span=st.integers(0, 10**6), stmt=st.integers(-1, 9999), vis=ids, delete=st.booleans()
)
def test_delta_names_round_trip_with_wide_numbers(
    lo: int, span: int, stmt: int, vis: int, delete: bool
) -> None:
    name = delta_dir_name(lo, lo + span, statement_id=stmt, visibility_txn_id=vis, delete=delete)
    assert parse_dir_name(name) == ParsedDelta(lo, lo + span, stmt, vis, delete)


@given(w=ids, vis=ids)
def test_base_names_round_trip_with_wide_numbers(w: int, vis: int) -> None:
    assert parse_dir_name(base_dir_name(w, visibility_txn_id=vis)) == ParsedBase(w, vis)


# ------------------------------------------------------------------- property-based selection


@st.composite
def histories(draw: st.DrawFn) -> tuple[set[int], list[tuple[int, int]], ValidWriteIdList]:
    """Write ids 1..n written as delta_w_w (some ids never written), plus disjoint
    minor-compacted ranges over ids that were resolved when compaction ran, and a reader's
    ValidWriteIdList."""
    n = draw(st.integers(1, 14))
    written = {w for w in range(1, n + 1) if draw(st.booleans()) or w == n}
    hwm = draw(st.integers(0, n))
    open_ids = tuple(sorted(w for w in range(1, hwm + 1) if draw(st.integers(0, 4)) == 0))
    aborted = tuple(
        sorted(w for w in range(1, hwm + 1) if w not in open_ids and draw(st.integers(0, 4)) == 0)
    )
    ranges: list[tuple[int, int]] = []
    w = 1
    while w <= hwm:
        if draw(st.integers(0, 2)) == 0:
            hi = draw(st.integers(w, hwm))
            if not any(w <= o <= hi for o in open_ids):
                ranges.append((w, hi))
                w = hi + 1
                continue
        w += 1
    return written, ranges, wl(hwm, open_ids, aborted)


@settings(max_examples=300, deadline=None)
@given(histories())
def test_chosen_deltas_show_exactly_the_valid_write_ids(
    h: tuple[set[int], list[tuple[int, int]], ValidWriteIdList],
) -> None:
    written, ranges, wids = h
    # Brute force: the rows a reader must see are those of valid, written write ids.
    expect = {w for w in written if wids.is_write_id_valid(w)}
    # Content of each delta: its write ids that were written (a compacted range holds the
    # committed ones among them; aborted ids never reach compaction output).
    content: dict[tuple[int, int, int], set[int]] = {}
    for w in written:
        content[(w, w, 0)] = {w}
    for lo, hi in ranges:
        content[(lo, hi, -1)] = {
            w for w in written if lo <= w <= hi and not wids.is_write_id_aborted(w)
        }
    candidates = []
    for lo, hi, stmt in content:
        if wids.is_write_id_range_aborted(lo, hi).name == "ALL":
            continue  # aborted directory
        if wids.is_write_id_range_valid(lo, hi).name != "NONE":
            candidates.append(
                (ParsedDelta(lo, hi, stmt), delta_dir_name(lo, hi, statement_id=stmt))
            )
    chosen, _ = find_best_working_deltas(candidates, base_write_id=None, write_ids=wids)
    seen: list[int] = []
    for d, _name in chosen:
        seen.extend(
            w
            for w in content[(d.min_write_id, d.max_write_id, d.statement_id)]
            if wids.is_write_id_valid(w)
        )
    assert sorted(seen) == sorted(expect)  # every visible write id exactly once


def test_raw_format_is_checked_only_on_original_named_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hive's ``chooseFile`` inspects only ``N_M`` / ``N_M_copy_K`` files: a ``delta_x_x`` of
    ``bucket_N`` files is never raw and none of its files is opened while listing."""
    import acidstream.acid.directory as directory

    t = tmp_path / "t"
    for w in range(1, 21):
        f = t / delta_dir_name(w, w, statement_id=0) / "bucket_00000"
        f.parent.mkdir(parents=True)
        f.write_bytes(b"not even ORC")  # listing must not open it
    raw = t / delta_dir_name(21, 21, statement_id=0) / "000000_0"
    raw.parent.mkdir(parents=True)
    raw.write_bytes(b"not ORC: LOAD DATA of some other format")
    opened: list[str] = []
    real = directory.inspect_orc

    def counting(storage: object, path: str, **kw: object) -> object:
        opened.append(Path(path).name)
        return real(storage, path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(directory, "inspect_orc", counting)
    with pytest.raises(AcidFormatError):
        # The raw file must be read for its row count, and it is not ORC.
        get_acid_state(str(t), write_ids=None, txns=ALL_TXNS)
    assert opened == ["000000_0", "000000_0"]  # the raw check, then the row count
    raw.unlink()
    raw.parent.rmdir()
    opened.clear()
    s = get_acid_state(str(t), write_ids=None, txns=ALL_TXNS)
    assert opened == []
    assert len(s.deltas) == 20 and not any(d.is_raw for d in s.deltas)


def test_side_file_removed_after_listing_means_the_whole_file(tmp_path: Path) -> None:
    """A streaming writer that closes its file between our listing and our side-file read
    leaves no side file: the file's whole (grown) length is valid, not an error."""
    from acidstream.acid.storage import Storage

    t = tmp_path / "t"
    f = t / "delta_0000001_0000002" / "bucket_00000"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"0" * 100)
    side = write_side_file(f, [0, 40])

    class Closing(Storage):
        def read_bytes(self, path: str, *, length: int | None = None) -> bytes:
            if path == str(side):
                with open(f, "ab") as out:  # the writer's final footer...
                    out.write(b"1" * 20)
                side.unlink()  # ...then it drops the side file
            return super().read_bytes(path, length=length)

    storage, root = Storage.for_path(str(t))
    s = get_acid_state(root, write_ids=None, txns=ALL_TXNS, storage=Closing(storage.fs))
    assert s.logical_lengths() == {str(f): 120}


def _live_streaming_file(tmp_path: Path) -> tuple[Any, str, Any]:
    """A streaming bucket file with a side file and the 10 rows of write id 1 buffered."""
    from acidstream.acid import layout
    from acidstream.acid.file_writer import AcidFileWriter
    from acidstream.acid.storage import Storage
    from tests.acid.writer_cases import SIMPLE, simple_rows

    storage, root = Storage.for_path(str(tmp_path))
    path = storage.join(root, layout.delta_dir_name(1, 2), "bucket_00000")
    w = AcidFileWriter(storage, path, SIMPLE, kind="insert", bucket_id=0, streaming=True,
                       side_file=True, engine="arrow")  # fmt: skip
    w.insert(1, simple_rows(10))
    return storage, path, w


def test_a_file_closed_between_the_listing_and_the_side_file_check_is_read_whole(
    tmp_path: Path,
) -> None:
    """The listing caught a streaming file mid-write (a piece's stripes written, its footer
    not yet) and the writer closed it before the side file was looked for: the file is
    whole now and is read at its length now, not at the listed one (no valid tail there).
    A file listed empty before its writer made the side file stays empty."""
    from acidstream.acid import layout
    from acidstream.acid.orc_inspect import logical_length, open_orc
    from tests.acid.writer_cases import simple_rows

    storage, path, w = _live_streaming_file(tmp_path)
    first = w.flush()
    w.insert(2, simple_rows(500, seed=2))
    w.close()
    assert not Path(layout.side_file_name(path)).exists()
    whole = Path(path).stat().st_size
    listed = first + 100  # mid-write: past the first footer, before the second
    assert first < listed < whole
    got = logical_length(storage, path, file_length=listed, use_side_file=True)
    assert got == whole
    assert open_orc(storage, path, length=got).nrows == 510
    assert logical_length(storage, path, file_length=0, use_side_file=True) == 0


def test_a_file_grown_since_its_listing_is_opened_at_its_logical_length(
    tmp_path: Path,
) -> None:
    """Listed when it ended at a footer (listed size == side-file length), then the writer
    appended its next piece's stripes (their footer comes at the commit): the file is
    opened at the logical length, not whole."""
    from acidstream.acid.orc_inspect import inspect_orc

    storage, path, w = _live_streaming_file(tmp_path)
    length = w.flush()
    assert Path(path).stat().st_size == length
    with open(path, "ab") as f:
        f.write(b"\x00stripes of the next txn, no footer yet" * 10)
    _, info = inspect_orc(storage, path, length=length, file_length=length)
    assert info.nrows == 10
    w.abandon()


def test_a_flush_after_the_listing_is_read_at_its_new_length(tmp_path: Path) -> None:
    """A live writer flushes between a reader's listing and its read of the side file: the
    new length is beyond the listed size but within the file; anything beyond the real
    file is still corrupt."""
    import struct

    from acidstream.acid.errors import AcidFormatError
    from acidstream.acid.orc_inspect import logical_length
    from acidstream.acid.storage import Storage

    data = tmp_path / "bucket_00000"
    data.write_bytes(b"x" * 3000)
    side = tmp_path / "bucket_00000_flush_length"
    side.write_bytes(struct.pack(">q", 1912) + struct.pack(">q", 2986))
    storage, path = Storage.for_path(str(data))
    assert logical_length(storage, path, file_length=1912, use_side_file=True) == 2986
    side.write_bytes(struct.pack(">q", 4000))
    with pytest.raises(AcidFormatError, match="outside the data file"):
        logical_length(storage, path, file_length=1912, use_side_file=True)


def test_a_side_file_removed_during_the_listing_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer's close deletes its side file between the directory read and the stat of
    each entry: the listing leaves the vanished file out instead of failing the read."""
    import os

    import acidstream.acid.storage as storage_mod
    from acidstream.acid.storage import Storage

    d = tmp_path / "delta_0000001_0000002"
    d.mkdir()
    (d / "bucket_00000").write_bytes(b"0" * 100)
    side = write_side_file(d / "bucket_00000", [0, 40])
    real_scandir = os.scandir

    class Vanishing:
        def __init__(self, path: str) -> None:
            self.it = real_scandir(path)

        def __enter__(self) -> Vanishing:
            return self

        def __exit__(self, *exc: object) -> None:
            self.it.close()

        def __iter__(self):  # type: ignore[no-untyped-def]
            entries = list(self.it)  # the directory read...
            side.unlink()  # ...then the writer closes its file
            return iter(entries)

    monkeypatch.setattr(storage_mod.os, "scandir", Vanishing)
    storage, root = Storage.for_path(str(d))
    assert [e.name for e in storage.list_dir(root)] == ["bucket_00000"]
