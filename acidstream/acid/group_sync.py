"""Making several files durable at once: one wait for the disk instead of one per file.

A commit makes several files durable: the data file of each (partition, bucket), a new
delta's ``_orc_acid_version`` marker, the ``_flush_length`` side files. Their
``fdatasync`` calls are independent of each other, and each one alone waits for the
filesystem's journal commit and the disk's cache flush; issued one after the other a
commit waited for each in turn (measured here: two new files 9 ms in a row, 2-3 ms
together). Issued together, from several threads (``fdatasync`` releases the
interpreter lock), the filesystem folds them into one journal commit and one cache
flush. The caller still orders what must be ordered (the data before the side file that
names its length, both before the metastore commit): :func:`flush_files` returns only
once every file of the group is done.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from typing import IO

from acidstream.acid.storage import Storage
from acidstream.acid.thread_pools import SharedPool

__all__ = ["DeltaMarker", "flush_files"]

_MAX_THREADS = 8  # the syncs of one commit; more files wait for a free thread
_pool = SharedPool("acidstream-fsync", _MAX_THREADS)  # the syncing threads


def flush_files(storage: Storage, files: Sequence[IO[bytes]], *, sync: bool) -> None:
    """``storage.durable_flush`` every file of ``files``: with ``sync``, the ``fdatasync``s
    run at the same time (one on the caller's thread, the others on the syncing threads)
    and this returns once all are done; without it (durability ``flush``) each file's
    bytes are only handed to the OS, which costs no wait worth a thread.

    Raises:
        OSError: the first file that failed (after every sync ended: none is left running
            on a file its caller may close next).
    """
    if not files:
        return
    if not sync or len(files) == 1:
        for f in files:
            storage.durable_flush(f, sync=sync)
        return
    pool = _pool.get()
    rest: list[Future[None]] = [pool.submit(storage.durable_flush, f) for f in files[1:]]
    first: BaseException | None = None
    try:
        storage.durable_flush(files[0])
    except BaseException as e:  # re-raised below, once the others ended
        first = e
    for fut in rest:
        err = fut.exception()  # waits
        if err is not None and first is None:
            first = err
    if first is not None:
        raise first


# Markers this process made durable lately: a writer that finds one existing need not
# sync it again. Bounded (the oldest forgotten first): a miss only costs a sync of a
# clean file, and a long-running writer makes a new delta per batch.
_durable_markers: OrderedDict[str, None] = OrderedDict()
_MARKERS_KEPT = 4096
_markers_lock = threading.Lock()


class DeltaMarker:
    """A delta's ``_orc_acid_version`` marker, written when its first file is opened and
    made durable with that file's first sync (:func:`flush_files`), not on its own.

    Nothing in the delta commits before that sync, so the marker is durable before any
    commit needs it. A marker found existing (another file of the delta, a dead task's
    attempt) is synced once as well, unless this process already did: its writer may not
    have synced it yet. Elsewhere than on local files the marker is written whole, by
    ``Storage.write_bytes_if_absent_soon``: at once on HDFS; on an object store its PUT
    runs while the delta's file is encoded and uploaded, and that file's close waits for
    it (and fails if it failed), so a commit, which comes after the close, never lacks it.
    """

    def __init__(self, storage: Storage, path: str, content: bytes) -> None:
        self.path = path
        self._file: IO[bytes] | None = None
        self._storage = storage
        self._write: Future[bool] | None = None
        local = storage.local_path(path)
        if local is None:
            self._write = storage.write_bytes_if_absent_soon(path, content)
            return
        with _markers_lock:
            if path in _durable_markers:
                return
        try:
            f = storage.create(path)
        except FileExistsError:
            try:
                f = open(local, "rb")  # kept open until the first sync (fdatasync)
            except FileNotFoundError:  # deleted since (an aborted delta): nothing to sync
                return
        else:
            f.write(content)
            f.flush()  # handed to the OS now: a crash of this process keeps it
        self._file = f

    def pending(self) -> list[IO[bytes]]:
        """The marker's file while it still needs its sync (else nothing)."""
        return [] if self._file is None else [self._file]

    def synced(self, *, durable: bool) -> None:
        """The group sync that held the marker ended (``durable``: it was an fsync)."""
        f, self._file = self._file, None
        if f is not None:
            f.close()
            if durable:
                with _markers_lock:
                    _durable_markers[self.path] = None
                    if len(_durable_markers) > _MARKERS_KEPT:
                        _durable_markers.popitem(last=False)

    def close(self) -> None:
        """Give up (the writer failed or was aborted): close the file, nothing synced; a
        marker PUT still under way is no longer waited for by anyone (it may land: a
        marker alone in a delta is harmless, as one written before a failed write was)."""
        f, self._file = self._file, None
        if f is not None:
            f.close()
        write, self._write = self._write, None
        if write is not None:
            self._storage.forget_write(self.path, write)
