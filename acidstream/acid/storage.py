"""Storage access through fsspec: one backend class per kind of filesystem.

The ACID library reads and writes through a ``Storage`` so that the same code serves a
local warehouse, HDFS or an object store. ``Storage.for_path`` picks the backend:

- :class:`~acidstream.acid.storage_local.LocalStorage` (local paths, ``file://``): os
  calls, ``fdatasync``, ``sync_file_range``, ``truncate``, memory-mapped reads;
- :class:`~acidstream.acid.storage_local.FlushableStorage` (HDFS and any fsspec
  filesystem declaring ``supports_hflush``): a file being written can be made readable
  mid-way (``hflush``), so a streaming file may hold several transactions;
- :class:`~acidstream.acid.storage_object.ObjectStorage` (``s3://``, ``gs://``,
  ``az://``, ``memory://``...): no hflush (a streaming file is one object per commit), no
  atomic rename (final names are written once, with the store's conditional put where a
  write must not replace an object), failed uploads aborted, bulk deletes, retries with
  backoff for idempotent calls.

This base class is the generic fsspec implementation the backends refine: it works on any
fsspec filesystem (``Storage(fs)``) with the conservative capabilities. Callers branch on
the capability properties (``supports_flush``, ``supports_rename``, ``is_object_store``)
and :meth:`Storage.local_path`, never on the kind.

Errors: missing and existing paths keep Python's ``FileNotFoundError`` /
``FileExistsError`` (callers act on them); any other failure of a remote store is a
:class:`~acidstream.acid.errors.StorageError` (one line, no secret in it). Local files keep
the operating system's ``OSError`` (the writers add what they were doing, with its errno).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import IO, Any, TypeVar

import fsspec

from acidstream.acid.errors import ConfigError

__all__ = ["FileInfo", "RetryPolicy", "Storage"]

T = TypeVar("T")

log = logging.getLogger(__name__)

# Protocols whose fsspec filesystems keep file contents on this machine's disk.
LOCAL_PROTOCOLS = frozenset({"file", "local"})
# HDFS-like filesystems: a file being written can be made visible and durable (hflush).
FLUSHABLE_PROTOCOLS = frozenset({"hdfs", "webhdfs", "viewfs"})


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One directory entry."""

    path: str
    name: str
    is_dir: bool
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How a remote backend retries an idempotent call that failed for a passing reason
    (throttling such as S3's ``503 SlowDown``, a timeout, a dropped connection).

    Attributes:
        attempts: Calls in all, the first included (1: no retry).
        first_wait_s: Wait before the first retry; doubled each retry, with jitter.
        max_wait_s: Cap on one wait.
        deadline_s: No retry starts after this many seconds since the first call, so a
            store that stays unavailable fails the call in bounded time.
    """

    attempts: int = 5
    first_wait_s: float = 0.1
    max_wait_s: float = 2.0
    deadline_s: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigError(f"RetryPolicy.attempts must be at least 1, not {self.attempts}")
        if self.first_wait_s < 0 or self.max_wait_s < 0 or self.deadline_s < 0:
            raise ConfigError("RetryPolicy waits and deadline must not be negative")


NO_RETRY = RetryPolicy(attempts=1)


class Storage:
    """A filesystem plus the operations the ACID format needs (the generic fsspec backend).

    Build one with ``Storage.for_path(url_or_path)``; paths passed to methods are in the
    filesystem's own form (as returned by ``for_path`` and ``join``).
    """

    def __init__(self, fs: Any, *, retry: RetryPolicy | None = None) -> None:
        self.fs = fs
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        self.protocol: str = protocol
        self.retry = retry or RetryPolicy()

    @classmethod
    def for_path(
        cls,
        url_or_path: str | os.PathLike[str],
        *,
        storage_options: Mapping[str, Any] | None = None,
        retry: RetryPolicy | None = None,
    ) -> tuple[Storage, str]:
        """The storage for a path or URL (a backend instance of its kind), and the path in
        that filesystem's form.

        ``storage_options`` go to the fsspec filesystem (for S3: ``endpoint_url``, ``key``,
        ``secret``, ``client_kwargs``...); without them the standard environment applies.
        ``retry`` says how a remote backend retries idempotent calls (default
        :class:`RetryPolicy()`)."""
        text = os.fspath(url_or_path)
        if "\x00" in text:
            raise ConfigError(f"path {text!r} contains a NUL character")
        if "://" not in text:
            text = os.path.abspath(text)
        protocol = text.split("://", 1)[0] if "://" in text else "file"
        from acidstream.acid.storage_object import object_store_options

        options = object_store_options(protocol, storage_options)
        try:
            fs, path = fsspec.core.url_to_fs(text, **options)
        except ImportError as e:
            raise ConfigError(f"{protocol}:// needs a package that is not installed: {e}") from e
        except ValueError as e:  # an unknown protocol, a malformed URL
            raise ConfigError(f"{text}: {e}") from e
        return cls.backend_for(fs, retry=retry), path

    @staticmethod
    def backend_for(fs: Any, *, retry: RetryPolicy | None = None) -> Storage:
        """The backend of ``fs``'s kind: local, flushable (HDFS-like) or object store."""
        from acidstream.acid.storage_local import FlushableStorage, LocalStorage
        from acidstream.acid.storage_object import ObjectStorage

        protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
        if protocols & LOCAL_PROTOCOLS:
            return LocalStorage(fs)
        if protocols & FLUSHABLE_PROTOCOLS or getattr(fs, "supports_hflush", False):
            return FlushableStorage(fs, retry=retry)
        return ObjectStorage(fs, retry=retry)

    # -- capabilities -------------------------------------------------------------------

    @property
    def supports_flush(self) -> bool:
        """Whether a file being written can be made durable and readable mid-way (hflush):
        a streaming file then holds several transactions, each made visible by a flush and
        its length in a side file. Without it a streaming file is one transaction."""
        return bool(getattr(self.fs, "supports_hflush", False))

    @property
    def supports_rename(self) -> bool:
        """Whether :meth:`rename` is atomic (one name or the other, never both or none)."""
        return True

    @property
    def is_object_store(self) -> bool:
        """Whether files are whole objects: written once, visible only when closed, no
        directories (an empty "directory" does not exist)."""
        return False

    @property
    def is_local(self) -> bool:
        """Whether this is this machine's file system. Prefer the capability properties and
        :meth:`local_path`; this is kept for code that names local paths to the user."""
        return False

    def local_path(self, path: str) -> str | None:
        """The operating-system path of ``path`` when its bytes can be read with os calls
        (``mmap``, ``pread``), else ``None``: a fast path for readers, never a semantic."""
        return None

    # -- names ----------------------------------------------------------------------------

    def join(self, *parts: str) -> str:
        return "/".join(p.rstrip("/") if i == 0 else p.strip("/") for i, p in enumerate(parts))

    # -- metadata and listing -------------------------------------------------------------

    def exists(self, path: str) -> bool:
        return self._call("exists", path, lambda: bool(self.fs.exists(path)))

    def is_dir(self, path: str) -> bool:
        return self._call("is_dir", path, lambda: bool(self.fs.isdir(path)))

    def size(self, path: str) -> int:
        return self._call("size", path, lambda: int(self.fs.size(path)))

    def list_dir(self, path: str) -> list[FileInfo]:
        """Entries of a directory, sorted by name. Raises ``FileNotFoundError`` if missing.

        Always asks the filesystem (no listing cache): another process may have written."""

        def ls() -> list[FileInfo]:
            entries = self.fs.ls(path, detail=True, refresh=True)
            return [_file_info(e) for e in entries]

        return sorted(self._call("list", path, ls), key=lambda f: f.name)

    def list_tree(self, path: str) -> list[FileInfo]:
        """Every file below ``path`` (at any depth), sorted by path: on an object store one
        paged listing of the prefix instead of one listing per directory. A missing path
        has none."""

        def find() -> list[FileInfo]:
            found = self.fs.find(path, detail=True, withdirs=False)
            return [_file_info(e) for e in found.values()]

        return sorted(self._call("list", path, find), key=lambda f: f.path)

    # -- reads ----------------------------------------------------------------------------

    def read_bytes(self, path: str, *, length: int | None = None) -> bytes:
        """The whole file, or its first ``length`` bytes."""

        def read() -> bytes:
            with self.fs.open(path, "rb") as f:
                data: bytes = f.read() if length is None else f.read(length)
            return data

        return self._call("read", path, read)

    def open_read(self, path: str) -> IO[bytes]:
        f: IO[bytes] = self._call("open", path, lambda: self.fs.open(path, "rb"))
        return f

    # -- writes ---------------------------------------------------------------------------

    def makedirs(self, path: str) -> None:
        self._call("makedirs", path, lambda: self.fs.makedirs(path, exist_ok=True))

    def create(self, path: str, *, overwrite: bool = False) -> IO[bytes]:
        """Open a new file for writing; with ``overwrite=False`` an existing file is an error
        (``FileExistsError``), as Hive's ``fs.create(path, false)``.

        The generic backend checks, then opens (a filesystem that knows an exclusive create
        has a backend that uses it)."""
        if not overwrite and self.exists(path):
            raise FileExistsError(path)
        out: IO[bytes] = self._call("create", path, lambda: self.fs.open(path, "wb"), retry=False)
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

    def write_bytes_if_absent_soon(self, path: str, data: bytes) -> Future[bool]:
        """Start :meth:`write_bytes_if_absent` for a caller that needs the file only once
        a file it creates next in the same directory is closed: closing any file created
        in that directory waits for the write and raises its failure
        (:meth:`wait_for_writes`). The future holds the result (``True``: this call wrote
        it); :meth:`forget_write` drops it if no such file will be closed.

        This generic backend writes at once: the future is already done. Object stores
        write on a thread, so the small object's round trip overlaps the caller's work
        and the upload of the directory's file."""
        out: Future[bool] = Future()
        out.set_result(self.write_bytes_if_absent(path, data))
        return out

    def wait_for_writes(self, directory: str) -> None:
        """Wait for the :meth:`write_bytes_if_absent_soon` writes under way in
        ``directory``; raises the first one's failure. Nothing to wait for here."""

    def forget_write(self, path: str, write: Future[bool]) -> None:
        """Stop tracking a :meth:`write_bytes_if_absent_soon` write (its writer gave up:
        no file of the directory will be closed to report it). Does not wait."""

    def durable_flush(self, f: IO[bytes], *, sync: bool = True) -> None:
        """Flush a file being written so its bytes survive a crash: ``sync=True`` makes them
        durable (fsync / hsync); ``sync=False`` hands them to the OS or the filesystem's
        servers only (a process crash loses nothing, a machine crash may: the
        ``durability: flush`` mode). A filesystem that cannot do either only flushes the
        writer's buffer."""
        f.flush()
        hflush = getattr(f, "hflush", None)
        if callable(hflush):
            hflush()

    def start_writeback(self, f: IO[bytes]) -> None:
        """Start writing a file's bytes to disk now, not waiting for them, so the
        :meth:`durable_flush` that follows has less left to wait for. Only a head start,
        never durability; a no-op but on local Linux files."""

    def discard(self, f: IO[bytes]) -> None:
        """Abandon a file being written after a failure: on an object store nothing of it
        becomes visible (its upload is aborted); elsewhere it is closed (what was written
        stays, as a crashed writer's would). Never raises for the store's failure (the
        caller is already handling one): it is logged instead."""
        try:
            f.close()
        except OSError as e:
            _log_discard_failure(f, e)

    def truncate(self, path: str, length: int) -> None:
        """Cut a file back to ``length`` bytes, durably, where the filesystem can; elsewhere
        the file is left as it is (readers honour its side file)."""

    def delete(self, path: str, *, recursive: bool = False) -> None:
        """Delete a file or directory; a missing path is not an error."""

        def rm() -> None:
            try:
                self.fs.rm(path, recursive=recursive)
            except FileNotFoundError:
                pass

        self._call("delete", path, rm)

    def delete_many(self, paths: Iterable[str]) -> None:
        """Delete files (not directories); missing ones are not an error. Object stores do
        it in bulk requests (S3: 1,000 keys per request)."""
        for p in paths:
            self.delete(p)

    def rename(self, src: str, dst: str) -> None:
        """Give ``src`` the name ``dst`` (atomic where :attr:`supports_rename`)."""
        self._call("rename", src, lambda: self.fs.mv(src, dst), retry=False)

    # -- the one place remote calls go through --------------------------------------------

    def _call(self, doing: str, path: str, fn: Callable[[], T], *, retry: bool = True) -> T:
        """Run one call to the filesystem: retried per :attr:`retry` when ``retry`` (the
        call is idempotent) and its failure was a passing one; a failure that is not about
        the path's existence becomes a :class:`StorageError`."""
        from acidstream.acid.storage_errors import call_store

        return call_store(self, doing, path, fn, retry=self.retry if retry else NO_RETRY)


def _file_info(e: Mapping[str, Any]) -> FileInfo:
    p = str(e["name"]).rstrip("/")
    return FileInfo(p, p.rsplit("/", 1)[-1], e["type"] == "directory", int(e.get("size") or 0))


def _log_discard_failure(f: IO[bytes], e: OSError) -> None:
    log.warning("abandoning %s after a failure: %s", getattr(f, "path", f), str(e).splitlines()[0])
