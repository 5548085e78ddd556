"""The fixed work of a small commit's file (issue 33: 1,000-row commits at batch 1).

A streaming connection at batch 1 opens a new file per commit, so what every file
repeats is paid per commit: its settings derived from the table (worked out once per
table), a ``mkdir`` before each create of a file in a directory that exists (only when
the directory is missing), and the early write-back of a piece whose ``fdatasync``
follows at once (only for big pieces).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from acidstream.acid.file_writer import AcidFileWriter
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.schema import TableSchema
from acidstream.acid.storage import Storage

SCHEMA = TableSchema.parse("id bigint, name string, salary int")


def _rows(n: int, *, wide: bool = False) -> pa.Table:
    ids = np.arange(n, dtype=np.int64)
    names = [os.urandom(48).hex() for _ in range(n)] if wide else [f"n{i}" for i in range(n)]
    return pa.table(
        {
            "id": pa.array(ids),
            "name": pa.array(names),
            "salary": pa.array((ids % 1000).astype(np.int32)),
        }
    )


def _writer(storage: Storage, root: str, write_id: int) -> AcidFileWriter:
    name = f"delta_{write_id:07d}_{write_id:07d}_0000"
    return AcidFileWriter(
        storage,
        storage.join(root, name, "bucket_00000"),
        SCHEMA,
        kind="insert",
        bucket_id=0,
        options=OrcWriterOptions(),
    )


def test_a_small_piece_waits_for_its_sync_and_a_big_one_starts_its_write_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    started: list[str] = []
    real = storage.start_writeback

    def counted(f: IO[bytes]) -> None:
        started.append(f.name if isinstance(f.name, str) else "")
        real(f)

    monkeypatch.setattr(storage, "start_writeback", counted)
    small = _writer(storage, root, 1)
    small.insert_arrow(1, _rows(1000))
    small.close()
    assert started == []  # 1,000 rows: the close's fdatasync does it all
    big = _writer(storage, root, 2)
    big.insert_arrow(2, _rows(100_000, wide=True))  # ~5 MB of stripes
    big.close()
    assert started  # (one per piece)
    for wid, n in ((1, 1000), (2, 100_000)):
        path = tmp_path / f"delta_{wid:07d}_{wid:07d}_0000" / "bucket_00000"
        assert pa_orc.ORCFile(str(path)).nrows == n


def test_the_files_of_one_table_share_the_settings_derived_from_it(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    a, b = _writer(storage, root, 1), _writer(storage, root, 2)
    assert a.options is b.options  # the delta options, derived once
    assert a._row_type is b._row_type
    assert a.options.stripe_size == OrcWriterOptions().stripe_size // 8  # Hive's delta ratio
    for w in (a, b):
        w.abort()


def test_a_file_is_created_without_a_mkdir_where_its_directory_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    made: list[str] = []
    real = os.mkdir

    def counted(path: str, *args: int, **kwargs: int) -> None:
        made.append(str(path))
        real(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", counted)
    with storage.create(storage.join(root, "a", "b", "f1")) as f:  # missing: made
        f.write(b"1")
    assert made == [str(tmp_path / "a"), str(tmp_path / "a" / "b")]
    made.clear()
    with storage.create(storage.join(root, "a", "b", "f2")) as f:  # exists: the open only
        f.write(b"2")
    assert made == []
    with pytest.raises(FileExistsError):
        storage.create(storage.join(root, "a", "b", "f2"))
    with storage.create(storage.join(root, "a", "b", "f2"), overwrite=True) as f:
        f.write(b"3")
    assert (tmp_path / "a" / "b" / "f2").read_bytes() == b"3"
    assert made == []


def test_a_local_file_is_created_on_a_creating_thread_while_its_rows_encode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delta's directory, marker and file (0.3-0.5 ms of ext4's work per batch-1
    commit, measured) are made off the writing thread; the file is whole and its
    marker synced with it as before."""
    storage, root = Storage.for_path(str(tmp_path))
    threads: list[str] = []
    real = storage.create

    def create(path: str, *, overwrite: bool = False) -> IO[bytes]:
        threads.append(threading.current_thread().name)
        return real(path, overwrite=overwrite)

    monkeypatch.setattr(storage, "create", create)
    w = _writer(storage, root, 1)
    w.insert_arrow(1, _rows(1000))
    w.close()
    assert len(threads) == 2  # the marker, then the file
    assert all(t.startswith("acidstream-create") for t in threads), threads
    delta = tmp_path / "delta_0000001_0000001_0000"
    assert pa_orc.ORCFile(str(delta / "bucket_00000")).nrows == 1000
    assert (delta / "_orc_acid_version").read_bytes() == b"2"


def test_a_file_found_at_the_path_fails_the_write_and_is_left_as_it_was(
    tmp_path: Path,
) -> None:
    """The creation's error reaches the writer at its first use of the file; giving the
    writer up then touches nothing at the path (the file is another writer's)."""
    storage, root = Storage.for_path(str(tmp_path))
    path = tmp_path / "delta_0000001_0000001_0000" / "bucket_00000"
    path.parent.mkdir()
    path.write_bytes(b"another writer's")
    for give_up in ("abort", "abandon"):
        w = _writer(storage, root, 1)
        w.insert_arrow(1, _rows(10))
        with pytest.raises(FileExistsError):
            w.close()
        getattr(w, give_up)()
        assert path.read_bytes() == b"another writer's"


@pytest.mark.parametrize("durability", ["fsync", "flush"])
def test_the_new_delta_marker_is_synced_while_the_rows_encode_and_the_commit_syncs_the_data_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str
) -> None:
    """Durability fsync: the marker's fdatasync runs on the creating thread, before the
    commit's, which then syncs the data file alone (no second thread to wait for);
    durability flush syncs neither."""
    storage, root = Storage.for_path(str(tmp_path))
    synced: list[tuple[str, str]] = []
    real = storage.durable_flush

    def durable_flush(f: IO[bytes], *, sync: bool = True) -> None:
        if sync:
            synced.append((os.path.basename(str(f.name)), threading.current_thread().name))
        real(f, sync=sync)

    monkeypatch.setattr(storage, "durable_flush", durable_flush)
    w = _writer(storage, root, 1)
    w.sync = durability == "fsync"
    w.insert_arrow(1, _rows(1000))
    w.end()
    w.sync_data()
    if durability == "flush":
        assert synced == []
    else:
        assert [n for n, _ in synced] == ["_orc_acid_version", "bucket_00000"]
        assert synced[0][1].startswith("acidstream-create")
        assert synced[1][1] == threading.current_thread().name
    w.finish()
    delta = tmp_path / "delta_0000001_0000001_0000"
    assert pa_orc.ORCFile(str(delta / "bucket_00000")).nrows == 1000
    assert (delta / "_orc_acid_version").read_bytes() == b"2"
