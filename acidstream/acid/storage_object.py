"""The object-store backend (S3 and S3-compatible stores, GCS, Azure, fsspec's memory).

What an object store gives, and how the ACID format lives with it:

- No hflush: an object is visible only once its upload completes, so a streaming file is
  one object per commit (``supports_flush=False``: the writers commit one transaction per
  file, Hive's rule for filesystems without hflush) and has no side file.
- No atomic rename: final names are written once. Where a write must not replace an
  existing object it is a conditional put (S3's ``If-None-Match: *``, s3fs's ``"xb"``
  mode): :meth:`ObjectStorage.create` and :meth:`ObjectStorage.write_bytes_if_absent`.
- An upload that fails is aborted (:meth:`ObjectStorage.discard`, and a file whose write
  or close failed aborts itself): no half object appears and no multipart upload is left
  behind to be billed.
- A small object a directory's file needs (a delta's ``_orc_acid_version``) can be PUT on
  a thread (:meth:`ObjectStorage.write_bytes_if_absent_soon`) while the file is encoded
  and uploaded: closing any file created in that directory waits for it and fails if it
  failed, so whatever commits after the file's close finds both objects complete. On S3
  a new delta's commit then waits for one round trip instead of two in a row.
- On an S3-compatible endpoint a whole object (a created file below s3fs's block size, a
  small conditional put) is one PUT signed and sent from the calling thread
  (:mod:`acidstream.acid.storage_s3put`), not through aiobotocore's pipeline on s3fs's one
  event-loop thread: the same request for a fifth of the client CPU. Where s3fs's request
  would differ, s3fs sends it.
- Listing by prefix (no directories: an empty "directory" does not exist); deletes in bulk.
- Idempotent calls (reads, listings, HEADs, deletes, conditional puts of whole small
  objects) are retried with backoff on throttling and timeouts, by this layer alone: the
  client library's own retries are turned off for S3 unless the options set them, so a
  store that stays unavailable fails in bounded time. Writes through an open file are not
  retried here: their transaction is aborted and its writer retries it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from types import TracebackType
from typing import IO, Any, cast

from acidstream.acid.storage import RetryPolicy, Storage
from acidstream.acid.storage_errors import store_error
from acidstream.acid.storage_s3put import DirectPut
from acidstream.acid.thread_pools import SharedPool

__all__ = ["ObjectStorage", "object_store_options"]

log = logging.getLogger(__name__)

S3_PROTOCOLS = frozenset({"s3", "s3a"})
# Object stores whose "directories" are only key prefixes: nothing to create.
_PREFIX_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss"})
_S3_BULK_DELETE = 1000  # keys per DeleteObjects request (S3's limit)
# Threads for the small PUTs started ahead (write_bytes_if_absent_soon): each waits on a
# round trip, not the CPU; one per file being written at once is plenty.
_PUT_THREADS = 8
_put_pool = SharedPool("acidstream-put", _PUT_THREADS)
_on_put_thread = threading.local()  # .active: this thread is running a PUT started ahead


def _parent(path: str) -> str:
    """The directory (key prefix) of an object's path."""
    return path.rstrip("/").rsplit("/", 1)[0].rstrip("/")


def object_store_options(protocol: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fsspec options for a ``protocol`` URL: the caller's, plus this backend's
    defaults for S3 where the caller set none: no listing cache (another process may have
    written since the last listing) and no retries inside botocore or s3fs (this layer
    retries idempotent calls; two layers would multiply the wait)."""
    out = dict(options or {})
    if protocol not in S3_PROTOCOLS:
        return out
    out.setdefault("use_listings_cache", False)
    config = dict(out.get("config_kwargs") or {})
    config.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})
    out["config_kwargs"] = config
    return out


class ObjectStorage(Storage):
    """An object store through fsspec: whole objects, written once."""

    def __init__(self, fs: Any, *, retry: RetryPolicy | None = None) -> None:
        super().__init__(fs, retry=retry)
        self._s3 = self.protocol in S3_PROTOCOLS
        if self._s3 and not _caller_set_retries(fs):
            # s3fs retries each request up to 5 times inside every call; this layer does
            # the retrying (idempotent calls only), so s3fs makes one attempt.
            fs.retries = 1
        # The PUTs started ahead and not yet reported, by directory: a success is dropped
        # when it lands, a failure when a close reported it (or its writer forgot it).
        self._ahead: dict[str, set[Future[bool]]] = {}
        self._ahead_lock = threading.Lock()

    @property
    def supports_flush(self) -> bool:
        return False

    @property
    def supports_rename(self) -> bool:
        return False

    @property
    def is_object_store(self) -> bool:
        return True

    # -- reads ----------------------------------------------------------------------------

    def read_bytes(self, path: str, *, length: int | None = None) -> bytes:
        """The whole object, or its first ``length`` bytes: one GET (a ranged GET for a
        prefix), no HEAD first."""
        if length is not None and length <= 0:
            return b""

        def get() -> bytes:
            data: bytes = self.fs.cat_file(path, start=0, end=length)
            return data

        return self._call("read", path, get)

    def open_read(self, path: str) -> IO[bytes]:
        raw = self._call("open", path, lambda: self.fs.open(path, "rb"))
        return cast("IO[bytes]", _StoreFile(self, path, raw))

    # -- writes ---------------------------------------------------------------------------

    def makedirs(self, path: str) -> None:
        """Nothing on stores whose directories are key prefixes (no request)."""
        if self.protocol not in _PREFIX_STORES:
            super().makedirs(path)

    def create(self, path: str, *, overwrite: bool = False) -> IO[bytes]:
        """Open a new object for writing; it appears when the file is closed, whole. With
        ``overwrite=False`` it is a conditional put: if the object exists when the upload
        completes, closing raises ``FileExistsError`` and nothing is replaced. A failed
        write or close aborts the upload (no object, no multipart upload left)."""
        mode = "wb" if overwrite else "xb"
        direct = self._direct()
        if direct is not None:
            # Held in memory and PUT whole on close (a file past s3fs's block size goes on
            # as s3fs's multipart upload): one signed request, no aiobotocore pipeline.
            raw: Any = _HeldObject(self, path, direct, mode)
        else:
            raw = self._call("create", path, lambda: self.fs.open(path, mode), retry=False)
        return cast("IO[bytes]", _StoreFile(self, path, raw))

    def _direct(self) -> DirectPut | None:
        """The lean PUT for this store (:mod:`storage_s3put`), or ``None``: s3fs's."""
        return DirectPut.for_fs(self.fs) if self._s3 else None

    def _put_whole(self, direct: DirectPut, path: str, data: bytes, *, if_absent: bool) -> None:
        """One PUT of a whole object by ``direct`` (``path``: ``bucket/key``)."""
        bucket, key, _ = self.fs.split_path(path)
        direct.put(bucket, key, data, if_absent=if_absent)
        self.fs.invalidate_cache(path)

    def write_bytes_if_absent(self, path: str, data: bytes) -> bool:
        """Write a small object unless it exists (one conditional PUT, retried on
        throttling); ``True`` if this call wrote it. A retry after a lost answer to a PUT
        that landed reports ``False``: the object holds ``data`` either way."""
        if not self._s3:
            return super().write_bytes_if_absent(path, data)
        direct = self._direct()

        def put() -> None:
            if direct is not None:
                self._put_whole(direct, path, data, if_absent=True)
            else:
                self.fs.pipe_file(path, data, mode="create")

        try:
            self._call("write", path, put)
        except FileExistsError:
            return False
        return True

    def write_bytes_if_absent_soon(self, path: str, data: bytes) -> Future[bool]:
        """:meth:`write_bytes_if_absent` on a thread: returns at once. The next file
        closed in ``path``'s directory waits for it (:meth:`wait_for_writes`), so a commit
        that follows that close never finds the object missing."""
        directory = _parent(path)
        write = _put_pool.get().submit(self._put_ahead, path, data)
        with self._ahead_lock:
            self._ahead.setdefault(directory, set()).add(write)
        write.add_done_callback(lambda w: self._landed(directory, w))
        return write

    def _put_ahead(self, path: str, data: bytes) -> bool:
        """(A PUT thread.) The write itself; a file it closes (stores without a
        conditional put write through :meth:`create`) must not wait for this very write."""
        _on_put_thread.active = True
        try:
            return self.write_bytes_if_absent(path, data)
        finally:
            _on_put_thread.active = False

    def _landed(self, directory: str, write: Future[bool]) -> None:
        """A PUT started ahead ended: a success needs no reporting."""
        if not write.cancelled() and write.exception() is None:
            self._drop(directory, write)

    def _drop(self, directory: str, write: Future[bool]) -> None:
        with self._ahead_lock:
            writes = self._ahead.get(directory)
            if writes is not None:
                writes.discard(write)
                if not writes:
                    del self._ahead[directory]

    def wait_for_writes(self, directory: str) -> None:
        """Wait for the PUTs started ahead in ``directory``; raises the first failure
        (a :class:`StorageError`, or what the PUT raised), each failure reported once."""
        if getattr(_on_put_thread, "active", False):
            return  # the PUT's own file, closed by the PUT (see _put_ahead)
        directory = directory.rstrip("/")
        with self._ahead_lock:
            writes = list(self._ahead.get(directory, ()))
        first: BaseException | None = None
        for w in writes:
            err = w.exception()  # waits
            if err is not None:
                self._drop(directory, w)
                first = first or err
        if first is not None:
            raise first

    def forget_write(self, path: str, write: Future[bool]) -> None:
        self._drop(_parent(path), write)

    def durable_flush(self, f: IO[bytes], *, sync: bool = True) -> None:
        """Hands full parts to the store (an object becomes durable only when closed)."""
        f.flush()

    def discard(self, f: IO[bytes]) -> None:
        """Abort the upload: nothing of the object becomes visible, no part is kept."""
        if isinstance(f, _StoreFile):
            f.discard()  # (the IO[bytes] that create() returned)
        else:
            super().discard(f)

    def truncate(self, path: str, length: int) -> None:
        """Rewrite the object as its first ``length`` bytes (a PUT replaces an object
        atomically). A missing object (its upload never completed) is left missing."""
        try:
            data = self.read_bytes(path, length=length)
        except FileNotFoundError:
            return
        self._call("write", path, lambda: self.fs.pipe_file(path, data))

    def delete(self, path: str, *, recursive: bool = False) -> None:
        """Delete an object, or with ``recursive`` every object under the prefix ``path/``
        too (S3: one listing, then bulk deletes whose per-key errors are reported, where
        s3fs's recursive ``rm`` would drop them); a missing path is not an error."""
        if not (self._s3 and recursive):
            super().delete(path, recursive=recursive)
            return
        self.delete_many([*(f.path for f in self.list_tree(path)), path])

    def delete_many(self, paths: Iterable[str]) -> None:
        """Delete objects in bulk: S3's DeleteObjects, 1,000 keys a request, each request
        retried (deleting is idempotent); missing objects are not an error."""
        todo = list(paths)
        if not todo:
            return
        if not self._s3:
            self._call("delete", todo[0], lambda: self.fs.rm(todo))
            return
        by_bucket: dict[str, list[str]] = {}
        for p in todo:
            bucket, key, _ = self.fs.split_path(p)
            by_bucket.setdefault(bucket, []).append(key)
        for bucket, keys in by_bucket.items():
            for i in range(0, len(keys), _S3_BULK_DELETE):
                self._delete_objects(bucket, keys[i : i + _S3_BULK_DELETE])

    def _delete_objects(self, bucket: str, keys: list[str]) -> None:
        request = {"Objects": [{"Key": k} for k in keys], "Quiet": True}
        out = self._call(
            "delete",
            f"{bucket}/{keys[0]}",
            lambda: self.fs.call_s3("delete_objects", Bucket=bucket, Delete=request),
        )
        for k in keys:
            self.fs.invalidate_cache(f"{bucket}/{k}")
        errors = out.get("Errors") or []
        if errors:
            first = errors[0]
            raise store_error(
                self,
                "delete",
                f"{bucket}/{first.get('Key')}",
                OSError(
                    f"{first.get('Code')}: {first.get('Message')} "
                    f"({len(errors)} of {len(keys)} objects not deleted)"
                ),
            )

    def rename(self, src: str, dst: str) -> None:
        """A copy, then a delete of ``src``: NOT atomic (``supports_rename`` is False; for
        a moment both names exist). The write path never renames on an object store; this
        serves moves where that moment is harmless (``acidstream repair``'s quarantine)."""
        self._call("copy", src, lambda: self.fs.copy(src, dst))
        self.delete(src)


class _StoreFile:
    """An object being written (or read), whose failures are :class:`StorageError`s and
    whose failed upload is aborted, never completed half-written.

    fsspec's files complete their upload on ``close()``, also from ``__exit__`` after an
    exception: without this wrapper a write that failed midway would publish the bytes
    written so far. Any failed call poisons the file; closing a poisoned file aborts."""

    def __init__(self, storage: ObjectStorage, path: str, raw: Any) -> None:
        self._storage = storage
        self._raw = raw
        self.path = path
        self._failed = False
        self._discarded = False

    # the io.RawIOBase surface the writers and readers use --------------------------------

    @property
    def closed(self) -> bool:
        return self._discarded or bool(self._raw.closed)

    @property
    def mode(self) -> str:
        return str(self._raw.mode)

    def readable(self) -> bool:
        return bool(self._raw.readable())

    def writable(self) -> bool:
        return bool(self._raw.writable())

    def seekable(self) -> bool:
        return bool(self._raw.seekable())

    def tell(self) -> int:
        return int(self._raw.tell())

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._guard("seek", lambda: self._raw.seek(offset, whence)))

    def read(self, n: int = -1) -> bytes:
        data: bytes = self._guard("read", lambda: self._raw.read(n))
        return data

    def readinto(self, b: Any) -> int:
        return int(self._guard("read", lambda: self._raw.readinto(b)))

    def write(self, data: Any) -> int:
        return int(self._guard("write", lambda: self._raw.write(data)))

    def flush(self) -> None:
        self._guard("write", self._raw.flush)

    def close(self) -> None:
        """Complete the upload (a conditional put when the file was created without
        ``overwrite``); after a failure, or if completing fails, abort it instead. A
        written file's close then waits for the small PUTs started ahead in its directory
        (:meth:`ObjectStorage.write_bytes_if_absent_soon`) and raises their failure."""
        if self.closed:
            return
        if self._failed:
            self.discard()
            return
        writing = "r" not in str(getattr(self._raw, "mode", "wb"))  # (as discard tells)
        try:
            self._guard("close", self._raw.close)
        except BaseException:
            self.discard()  # (the raw file counts itself closed now, its upload open)
            raise
        if writing:
            self._storage.wait_for_writes(_parent(self.path))

    def discard(self) -> None:
        """Abort the upload (its parts are deleted); never raises: logged instead. A read
        file is just closed."""
        if self._discarded or (self._raw.closed and not self._failed):
            return  # already abandoned, or completed
        self._failed = True
        self._discarded = True  # from now on the file is closed; nothing completes it
        if "r" in str(getattr(self._raw, "mode", "wb")):  # (writable() is False once closed)
            self._raw.close()
            return
        abort = getattr(self._raw, "discard", None)
        if not callable(abort):
            return  # (fsspec's memory files publish only on close: never closing is the abort)
        try:
            abort()
        except Exception as e:
            log.warning(
                "aborting the upload of %s://%s: %s",
                self._storage.protocol,
                self.path,
                str(e).splitlines()[0] if str(e) else type(e).__name__,
            )
        try:
            # fsspec's buffered files would complete the upload when garbage-collected.
            self._raw.closed = True
        except AttributeError:
            pass

    def __enter__(self) -> _StoreFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.discard()
        else:
            self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def _guard(self, doing: str, fn: Any) -> Any:
        try:
            return fn()
        except (FileNotFoundError, FileExistsError):
            self._failed = True
            raise
        except Exception as e:
            self._failed = True
            if isinstance(e, OSError) or type(e).__module__.split(".", 1)[0] in (
                "botocore",
                "aiobotocore",
                "aiohttp",
                "s3fs",
                "fsspec",
            ):
                raise store_error(self._storage, doing, self.path, e) from e
            raise


class _HeldObject:
    """(The writer's thread.) An object being written through :class:`DirectPut`: its
    bytes are held in memory and PUT whole when it is closed (a conditional put in mode
    ``"xb"``), so nothing of it is visible before, and a discard sends nothing. Past the
    filesystem's block size (s3fs's own single-PUT limit) the bytes go on as s3fs's file,
    a multipart upload, with s3fs's semantics."""

    def __init__(self, storage: ObjectStorage, path: str, direct: DirectPut, mode: str) -> None:
        self._storage = storage
        self._direct = direct
        self.path = path
        self.mode = mode
        self.closed = False
        self._chunks: list[bytes] = []
        self._size = 0
        self._limit = int(getattr(storage.fs, "default_block_size", 0) or 5 * 2**20)
        self._spilled: Any = None  # s3fs's file, once past the limit

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return not self.closed

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._size

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        chunk = bytes(data)
        self._size += len(chunk)
        if self._spilled is not None:
            return int(self._spilled.write(chunk))
        self._chunks.append(chunk)
        if self._size > self._limit:
            self._spilled = self._storage.fs.open(self.path, self.mode)
            held, self._chunks = b"".join(self._chunks), []
            self._spilled.write(held)
        return len(chunk)

    def flush(self) -> None:
        if self._spilled is not None:
            self._spilled.flush()

    def close(self) -> None:
        """Send the object (one PUT, or the multipart upload's completion)."""
        if self.closed:
            return
        self.closed = True  # as fsspec's files: a failed close is not retried by closing
        if self._spilled is not None:
            self._spilled.close()
            return
        data, self._chunks = b"".join(self._chunks), []
        self._storage._put_whole(self._direct, self.path, data, if_absent=self.mode == "xb")

    def discard(self) -> None:
        """Drop the object: nothing was sent, or abort the multipart upload."""
        self.closed = True
        self._chunks = []
        spilled, self._spilled = self._spilled, None
        if spilled is not None:
            try:
                spilled.discard()  # (its abort may fail: the caller logs it)
            finally:
                # fsspec's buffered files would complete the upload when garbage-collected.
                spilled.closed = True


def _caller_set_retries(fs: Any) -> bool:
    return "retries" in (getattr(fs, "storage_options", None) or {})
