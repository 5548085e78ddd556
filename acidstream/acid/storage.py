"""Storage access through fsspec: local paths and any fsspec URL.

The ACID library reads and writes through ``Storage`` so that the same code
serves a local warehouse, HDFS or an object store. ``durable_flush`` is the
``hflush``/``fsync`` that streaming commits rely on; filesystems that cannot
make a partly written file visible (object stores) report
``supports_flush=False`` and get one transaction per streaming file.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any

import fsspec

from acidstream.acid.errors import ConfigError

__all__ = ["FileInfo", "Storage"]


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One directory entry."""

    path: str
    name: str
    is_dir: bool
    size: int


class Storage:
    """A filesystem plus helpers for the operations the ACID format needs.

    Build one with ``Storage.for_path(url_or_path)``; paths passed to methods are
    in the filesystem's own form (as returned by ``for_path`` and ``join``).
    """

    def __init__(self, fs: Any) -> None:
        self.fs = fs
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        self.protocol: str = protocol
        self.is_local = protocol in ("file", "local")

    @classmethod
    def for_path(
        cls,
        url_or_path: str | os.PathLike[str],
        *,
        storage_options: Mapping[str, Any] | None = None,
    ) -> tuple[Storage, str]:
        """The storage for a path or URL, and the path in that filesystem's form.

        ``storage_options`` go to the fsspec filesystem (for S3: ``endpoint_url``, ``key``,
        ``secret``, ``client_kwargs``...); without them the standard environment applies."""
        text = os.fspath(url_or_path)
        if "\x00" in text:
            raise ConfigError(f"path {text!r} contains a NUL character")
        if "://" not in text:
            text = os.path.abspath(text)
        fs, path = fsspec.core.url_to_fs(text, **dict(storage_options or {}))
        return cls(fs), path

    @property
    def supports_flush(self) -> bool:
        """Whether a file being written can be made durable and readable mid-way (hflush).

        Local files and HDFS can; any other fsspec filesystem that declares
        ``supports_hflush = True`` and gives its files an ``hflush()`` method can too."""
        return (
            self.is_local
            or self.protocol in ("hdfs", "webhdfs")
            or bool(getattr(self.fs, "supports_hflush", False))
        )

    def join(self, *parts: str) -> str:
        return "/".join(p.rstrip("/") if i == 0 else p.strip("/") for i, p in enumerate(parts))

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(path))

    def is_dir(self, path: str) -> bool:
        return bool(self.fs.isdir(path))

    def list_dir(self, path: str) -> list[FileInfo]:
        """Entries of a directory, sorted by name. Raises ``FileNotFoundError`` if missing."""
        if self.is_local:
            # os.scandir is several times faster than fsspec's generic ls for big trees.
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
        entries = self.fs.ls(path, detail=True)
        res = []
        for e in entries:
            p = e["name"].rstrip("/")
            res.append(
                FileInfo(p, p.rsplit("/", 1)[-1], e["type"] == "directory", int(e.get("size") or 0))
            )
        return sorted(res, key=lambda f: f.name)

    def size(self, path: str) -> int:
        if self.is_local:
            return os.path.getsize(path)
        return int(self.fs.size(path))

    def read_bytes(self, path: str, *, length: int | None = None) -> bytes:
        """The whole file, or its first ``length`` bytes."""
        with self.fs.open(path, "rb") as f:
            data: bytes = f.read() if length is None else f.read(length)
        return data

    def open_read(self, path: str) -> IO[bytes]:
        f: IO[bytes] = self.fs.open(path, "rb")
        return f

    def makedirs(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def create(self, path: str, *, overwrite: bool = False) -> IO[bytes]:
        """Open a new file for writing; with ``overwrite=False`` an existing file is an error
        (``FileExistsError``), as Hive's ``fs.create(path, false)``."""
        if self.is_local:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            f: IO[bytes] = open(path, "wb" if overwrite else "xb")
            return f
        if not overwrite and self.fs.exists(path):
            raise FileExistsError(path)
        out: IO[bytes] = self.fs.open(path, "wb")
        return out

    def write_bytes_if_absent(self, path: str, data: bytes) -> bool:
        """Write a small file unless it exists; ``True`` if this call wrote it."""
        try:
            with self.create(path) as f:
                f.write(data)
                self.durable_flush(f)
        except FileExistsError:
            return False
        return True

    def durable_flush(self, f: IO[bytes]) -> None:
        """Flush a file being written so its bytes survive a crash (fsync / hflush)."""
        f.flush()
        if self.is_local:
            # fdatasync: the data and the size needed to read it back, without the
            # timestamps fsync would also write (one disk write fewer per commit).
            getattr(os, "fdatasync", os.fsync)(f.fileno())
        else:
            hflush = getattr(f, "hflush", None)
            if callable(hflush):
                hflush()

    def start_writeback(self, f: IO[bytes]) -> None:
        """Hand a file's written bytes to the OS and start writing them to disk now, not
        waiting for them (Linux ``sync_file_range(SYNC_FILE_RANGE_WRITE)``): the
        :meth:`durable_flush` that follows has less left to wait for. Only a head
        start, never durability; a no-op off local Linux files."""
        if not self.is_local:
            return
        start = _sync_file_range()
        if start is None:
            return
        f.flush()
        start(f.fileno(), 0, 0, _SYNC_FILE_RANGE_WRITE)  # 0, 0: the whole file

    def truncate(self, path: str, length: int) -> None:
        """Cut a file back to ``length`` bytes, durably (local files; elsewhere the file is
        left as it is: readers honour its side file)."""
        if not self.is_local:
            return
        with open(path, "r+b") as f:
            f.truncate(length)
            getattr(os, "fdatasync", os.fsync)(f.fileno())

    def delete(self, path: str, *, recursive: bool = False) -> None:
        """Delete a file or directory; a missing path is not an error."""
        try:
            self.fs.rm(path, recursive=recursive)
        except FileNotFoundError:
            pass

    def rename(self, src: str, dst: str) -> None:
        if self.is_local:
            os.rename(src, dst)
        else:
            self.fs.mv(src, dst)


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
