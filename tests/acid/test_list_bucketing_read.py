"""Reading tables whose deltas and bases hold list-bucketing directories: the listing
(``DataFile.lb_dir``), and reads that prune by predicates equal unpruned reads."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from acid.directory import get_acid_state
from acid.file_writer import AcidFileWriter
from acid.layout import base_dir_name, bucket_file_name, delta_dir_name
from acid.list_bucketing import DEFAULT_DIR_NAME, SkewedInfo
from acid.schema import TableSchema
from acid.snapshot import ValidTxnList
from acid.storage import Storage
from tests.acid.orc_builders import write_side_file

ALL_TXNS = ValidTxnList()
SCHEMA = TableSchema.parse("x int, s string")


def write_lb_file(
    directory: Path,
    write_id: int,
    lb_dir: str,
    rows: Sequence[tuple[Any, ...]],
    *,
    bucket_id: int = 0,
    kind: str = "insert",
) -> Path:
    """One ACID file ``directory/lb_dir/bucket_N`` (``lb_dir`` may be ``""``)."""
    st, _ = Storage.for_path(str(directory))
    sub = directory / lb_dir if lb_dir else directory
    path = sub / bucket_file_name(bucket_id)
    w = AcidFileWriter(
        st,
        str(path),
        SCHEMA,
        kind=kind,  # type: ignore[arg-type]
        bucket_id=bucket_id,
        statement_id=0 if kind == "insert" else -1,
    )
    w.insert(write_id, rows)
    w.close()
    return path


def delta(part: Path, write_id: int) -> Path:
    return part / delta_dir_name(write_id, write_id, statement_id=0)


def test_files_in_list_bucketing_dirs_are_listed_with_their_lb_dir(tmp_path: Path) -> None:
    part = tmp_path / "ds=1"
    d = delta(part, 1)
    write_lb_file(d, 1, "x=6", [(6, "a")])
    write_lb_file(d, 1, DEFAULT_DIR_NAME, [(7, "b")], bucket_id=1)
    write_lb_file(d, 1, "", [(8, "c")], bucket_id=2)
    b = part / base_dir_name(3)
    write_lb_file(b, 3, "x=6/y=a", [(6, "a")], kind="base")
    write_lb_file(b, 3, f"{DEFAULT_DIR_NAME}/{DEFAULT_DIR_NAME}", [(6, "z")], kind="base")
    (b / "not_lb").mkdir()  # neither k=v nor the default directory: not read, as before
    s = get_acid_state(str(part), write_ids=None, txns=ALL_TXNS)
    assert s.base is not None
    assert sorted((f.lb_dir, f.name) for f in s.base.files) == [
        (f"{DEFAULT_DIR_NAME}/{DEFAULT_DIR_NAME}", "bucket_00000"),
        ("x=6/y=a", "bucket_00000"),
    ]
    assert s.deltas == ()  # the base at 3 hides delta 1: selection is unchanged


def test_delta_files_directly_and_in_lb_dirs(tmp_path: Path) -> None:
    part = tmp_path / "ds=1"
    d = delta(part, 1)
    write_lb_file(d, 1, "", [(8, "c")], bucket_id=2)
    write_lb_file(d, 1, "x=6", [(6, "a")])
    write_lb_file(d, 1, DEFAULT_DIR_NAME, [(7, "b")], bucket_id=1)
    s = get_acid_state(str(part), write_ids=None, txns=ALL_TXNS)
    (only,) = s.deltas
    got = [
        (f.lb_dir, f.name, f.bucket_id, Path(f.path).relative_to(d).as_posix()) for f in only.files
    ]
    assert got == [
        ("", "bucket_00002", 2, "bucket_00002"),
        (DEFAULT_DIR_NAME, "bucket_00001", 1, f"{DEFAULT_DIR_NAME}/bucket_00001"),
        ("x=6", "bucket_00000", 0, "x=6/bucket_00000"),
    ]


def test_side_file_in_an_lb_dir_gives_the_logical_length(tmp_path: Path) -> None:
    part = tmp_path / "ds=1"
    d = part / delta_dir_name(1, 2)  # a streaming delta (a transaction batch)
    f = write_lb_file(d, 1, "x=6", [(6, "a")])
    size = f.stat().st_size
    write_side_file(f, [size - 1])  # a flushed length below the file's size
    s = get_acid_state(str(part), write_ids=None, txns=ALL_TXNS)
    (df,) = s.deltas[0].files
    assert df.lb_dir == "x=6" and df.length == size and df.logical_length == size - 1


def test_location_map_dirs_are_recognised_when_given(tmp_path: Path) -> None:
    part = tmp_path / "ds=1"
    d = delta(part, 1)
    write_lb_file(d, 1, "custom/six", [(6, "a")])
    info = SkewedInfo(
        col_names=("x",), col_values=(("6",),), location_map={("6",): "custom/six"},
        stored_as_dirs=True,
    )  # fmt: skip
    plain = get_acid_state(str(part), write_ids=None, txns=ALL_TXNS)
    assert plain.deltas[0].files == ()
    mapped = get_acid_state(
        str(part), write_ids=None, txns=ALL_TXNS, lb_location_dirs=info.all_dirs()
    )
    assert [f.lb_dir for f in mapped.deltas[0].files] == ["custom/six"]


@pytest.mark.parametrize("hidden", ["_tmp", ".x=6"])
def test_hidden_subdirectories_are_not_lb_dirs(tmp_path: Path, hidden: str) -> None:
    part = tmp_path / "ds=1"
    d = delta(part, 1)
    write_lb_file(d, 1, hidden, [(6, "a")])
    assert get_acid_state(str(part), write_ids=None, txns=ALL_TXNS).deltas[0].files == ()
