"""The backends of filesystems that can flush a file being written: the local disk and
HDFS-like filesystems (``hflush``).

:class:`LocalStorage` goes to the operating system directly (``os.scandir``, ``open``,
``fdatasync``, ``sync_file_range``, ``truncate``, ``rename``): several times faster than
fsspec's generic local filesystem on big trees, and the only way to the durability calls.
Its failures stay the OS's ``OSError``s (the writers turn them into ``StorageError``s that
say what they were doing, errno kept). :class:`FlushableStorage` is the generic fsspec
backend plus ``hflush``/``hsync``.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable, Iterable
from typing import IO, Any

from acidstream.acid.storage import FileInfo, RetryPolicy, Storage

__all__ = ["FlushableStorage", "LocalStorage"]


class LocalStorage(Storage):
    """This machine's file system, through os calls."""

    def __init__(self, fs: Any, *, retry: RetryPolicy | None = None) -> None:
        super().__init__(fs, retry=retry)

    @property
    def supports_flush(self) -> bool:
        return True

    @property
    def is_local(self) -> bool:
        return True

    def local_path(self, path: str) -> str | None:
        return path

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def list_dir(self, path: str) -> list[FileInfo]:
        """Entries of a directory, sorted by name. Raises ``FileNotFoundError`` if missing."""
        out = []
        with os.scandir(path) as it:
            for e in it:
                is_dir = e.is_dir()
                try:
                    size = 0 if is_dir else e.stat().st_size
                except FileNotFoundError:
                    # Removed between the directory read and the stat (a writer closing
                    # a file deletes its side file): it is not part of this listing.
                    continue
                out.append(FileInfo(e.path, e.name, is_dir, size))
        return sorted(out, key=lambda f: f.name)

    def list_tree(self, path: str) -> list[FileInfo]:
        out = []
        for directory, _dirs, files in os.walk(path):
            for name in files:
                p = os.path.join(directory, name)
                try:
                    size = os.path.getsize(p)
                except FileNotFoundError:  # removed since the directory was read
                    continue
                out.append(FileInfo(p, name, False, size))
        return sorted(out, key=lambda f: f.path)

    def read_bytes(self, path: str, *, length: int | None = None) -> bytes:
        with open(path, "rb") as f:
            return f.read() if length is None else f.read(length)

    def open_read(self, path: str) -> IO[bytes]:
        return open(path, "rb")

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def create(self, path: str, *, overwrite: bool = False) -> IO[bytes]:
        """Open a new file for writing (``O_EXCL`` unless ``overwrite``: race-free); its
        directory is made when missing."""
        mode = "wb" if overwrite else "xb"
        try:
            # The directory usually exists (the writer made it, or a file beside this one
            # did): the open alone, not a mkdir and a stat before it on every file.
            return open(path, mode)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            return open(path, mode)

    def durable_flush(self, f: IO[bytes], *, sync: bool = True) -> None:
        f.flush()
        if sync:
            # fdatasync: the data and the size needed to read it back, without the
            # timestamps fsync would also write (one disk write fewer per commit).
            getattr(os, "fdatasync", os.fsync)(f.fileno())

    def start_writeback(self, f: IO[bytes]) -> None:
        """Hand a file's written bytes to the OS and start writing them to disk now, not
        waiting for them (Linux ``sync_file_range(SYNC_FILE_RANGE_WRITE)``)."""
        start = _sync_file_range()
        if start is None:
            return
        f.flush()
        start(f.fileno(), 0, 0, _SYNC_FILE_RANGE_WRITE)  # 0, 0: the whole file

    def truncate(self, path: str, length: int) -> None:
        """Cut a file back to ``length`` bytes, durably."""
        with open(path, "r+b") as f:
            f.truncate(length)
            getattr(os, "fdatasync", os.fsync)(f.fileno())

    def delete(self, path: str, *, recursive: bool = False) -> None:
        try:
            self.fs.rm(path, recursive=recursive)
        except FileNotFoundError:
            pass

    def delete_many(self, paths: Iterable[str]) -> None:
        for p in paths:
            try:
                os.remove(p)
            except FileNotFoundError:
                pass

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)


class FlushableStorage(Storage):
    """An HDFS-like filesystem: a file being written can be made readable (``hflush``) and
    durable (``hsync``) mid-way, and renames are atomic."""

    @property
    def supports_flush(self) -> bool:
        return True

    def durable_flush(self, f: IO[bytes], *, sync: bool = True) -> None:
        """``hsync`` (``sync``, where the file has it; else ``hflush``) or ``hflush``: the
        bytes reach the datanodes' disks, or only their memory (readable by others and
        kept through a writer crash)."""
        f.flush()
        hsync = getattr(f, "hsync", None) if sync else None
        call = hsync if callable(hsync) else getattr(f, "hflush", None)
        if callable(call):
            call()

    def truncate(self, path: str, length: int) -> None:
        """HDFS truncate where the filesystem offers it; else the file is left as it is
        (readers honour its side file, ``acidstream repair`` finishes it)."""
        cut = getattr(self.fs, "truncate", None)
        if callable(cut):
            self._call("truncate", path, lambda: cut(path, length), retry=False)


_SYNC_FILE_RANGE_WRITE = 2


@functools.cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """libc's ``sync_file_range`` (Linux), looked up on first use; ``None`` elsewhere.
    Its result is not checked: a failed head start only leaves the work to the
    ``fdatasync`` that follows."""
    try:
        fn = ctypes.CDLL(None).sync_file_range
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn
