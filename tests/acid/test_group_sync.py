"""A commit's files synced together (``acidstream.acid.group_sync``), on real files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from acidstream.acid.group_sync import DeltaMarker, flush_files
from acidstream.acid.storage import Storage


def test_files_are_synced_on_several_threads_and_a_failure_waits_for_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage, _root = Storage.for_path(str(tmp_path))
    files = [open(tmp_path / f"f{i}", "wb") for i in range(4)]
    for f in files:
        f.write(b"x" * 100)
    seen: list[str] = []
    real = os.fdatasync

    def watch(fd: int) -> None:
        seen.append(threading.current_thread().name)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", watch)
    flush_files(storage, files, sync=True)
    assert len(seen) == 4 and any(n.startswith("acidstream-fsync") for n in seen)
    assert all((tmp_path / f"f{i}").stat().st_size == 100 for i in range(4))

    seen.clear()
    bad = files[1]
    os.close(bad.fileno())  # its sync fails with EBADF
    with pytest.raises(OSError):
        flush_files(storage, files, sync=True)
    assert len(seen) == 4  # every other file was still synced
    seen.clear()
    flush_files(storage, [files[0], files[2]], sync=False)  # flush: handed to the OS only
    assert seen == []
    for f in (files[0], files[2], files[3]):
        f.close()
    with pytest.raises(OSError):
        bad.close()  # its descriptor is gone already


def test_marker_is_written_at_once_and_synced_with_the_first_group(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    path = f"{root}/delta_1_1/_orc_acid_version"
    os.makedirs(os.path.dirname(path))
    m = DeltaMarker(storage, path, b"2")
    assert Path(path).read_bytes() == b"2"  # handed to the OS: a killed writer keeps it
    (pending,) = m.pending()
    flush_files(storage, [pending], sync=True)
    m.synced(durable=True)
    assert m.pending() == []
    # Another file of the same delta: the marker exists and this process synced it.
    assert DeltaMarker(storage, path, b"2").pending() == []
