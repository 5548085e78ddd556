"""acidstream.acid.storage: the write-back head start a streaming commit gives the disk, and
the small writes started ahead of a directory's file (write_bytes_if_absent_soon)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from acidstream.acid import storage_local as storage_mod
from acidstream.acid.storage import Storage


def test_start_writeback_hands_the_bytes_to_the_os_before_any_sync(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    path = storage.join(root, "f")
    f = storage.create(path)
    f.write(b"x" * 1000)  # (still in the writer's buffer)
    storage.start_writeback(f)
    assert Path(path).read_bytes() == b"x" * 1000  # another reader sees them
    f.write(b"y")
    storage.durable_flush(f)
    f.close()
    assert Path(path).stat().st_size == 1001


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")
def test_the_head_start_is_linux_sync_file_range() -> None:
    fn = storage_mod._sync_file_range()
    assert fn is not None and fn.__name__ == "sync_file_range"


def test_start_writeback_is_a_no_op_off_local_files() -> None:
    storage, root = Storage.for_path(f"memory://acidstream-test-{uuid.uuid4().hex}")
    f = storage.create(storage.join(root, "f"))
    f.write(b"abc")
    storage.start_writeback(f)  # no fileno, no flush: nothing to start
    f.close()
    assert storage.fs.cat_file(storage.join(root, "f")) == b"abc"


def test_a_write_ahead_on_a_store_without_conditional_put_lands_before_the_close() -> None:
    """fsspec's memory store has no conditional put: the write ahead goes through a file
    of its own, whose close must not wait for the write itself (it would never end). A
    file closed in the directory afterwards finds the object written."""
    storage, root = Storage.for_path(f"memory://acidstream-test-{uuid.uuid4().hex}")
    marker = storage.join(root, "delta_1_1", "_orc_acid_version")
    write = storage.write_bytes_if_absent_soon(marker, b"2")
    f = storage.create(storage.join(root, "delta_1_1", "bucket_00000"))
    f.write(b"rows")
    f.close()
    assert write.done() and write.result(timeout=0) is True
    assert storage.fs.cat_file(marker) == b"2"
    again = storage.write_bytes_if_absent_soon(marker, b"3")
    storage.wait_for_writes(storage.join(root, "delta_1_1"))
    assert again.result(timeout=0) is False and storage.fs.cat_file(marker) == b"2"


def test_a_write_ahead_elsewhere_than_an_object_store_is_done_at_once(tmp_path: Path) -> None:
    storage, root = Storage.for_path(str(tmp_path))
    write = storage.write_bytes_if_absent_soon(storage.join(root, "m"), b"2")
    assert write.done() and write.result() is True
    assert (tmp_path / "m").read_bytes() == b"2"
