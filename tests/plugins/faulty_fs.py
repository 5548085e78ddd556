"""A local filesystem that fails on purpose: ENOSPC / EIO at a chosen write, flush or hflush.

For tests of what a failing disk does to the writers, where a small tmpfs cannot be
mounted (not root) or a precise failure point is wanted. Register it with
:func:`install` and use ``faulty://<absolute path>`` as a table location; the N-th
operation of the armed kind (counted across every file) raises ``OSError(err)``, and
every operation of that kind after it too (a full disk stays full).
"""

from __future__ import annotations

import errno
import os
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

__all__ = ["FaultPlan", "FaultyFileSystem", "install"]


class FaultPlan:
    """Which operation fails, from which occurrence on (``None``: nothing fails)."""

    def __init__(self) -> None:
        self.op: str | None = None
        self.at = 0
        self.err = errno.ENOSPC
        self.counts: dict[str, int] = {}

    def arm(self, op: str, at: int, err: int = errno.ENOSPC) -> None:
        self.op, self.at, self.err, self.counts = op, at, err, {}

    def disarm(self) -> None:
        self.op = None

    def hit(self, op: str, path: str) -> None:
        n = self.counts[op] = self.counts.get(op, 0) + 1
        if op == self.op and n >= self.at:
            raise OSError(self.err, os.strerror(self.err), path)


PLAN = FaultPlan()


class _FaultyFile:
    def __init__(self, inner: Any, path: str) -> None:
        self._f = inner
        self._path = path

    def write(self, data: Any) -> int:
        PLAN.hit("write", self._path)
        return int(self._f.write(data))

    def flush(self) -> None:
        PLAN.hit("flush", self._path)
        self._f.flush()

    def hflush(self) -> None:
        PLAN.hit("hflush", self._path)
        self._f.flush()
        os.fsync(self._f.fileno())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __enter__(self) -> _FaultyFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


class FaultyFileSystem(LocalFileSystem):  # type: ignore[misc]
    """``faulty://`` paths: the local filesystem, with :data:`PLAN`'s failures."""

    protocol = "faulty"
    root_marker = "/"
    supports_hflush = True

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        if path.startswith("faulty://"):
            path = path[len("faulty://") :]
        return str(super()._strip_protocol(path))

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        f = super()._open(path, mode, **kwargs)
        return _FaultyFile(f, path) if "w" in mode or "a" in mode else f

    def mv(self, path1: str, path2: str, **kwargs: Any) -> None:
        PLAN.hit("rename", path1)
        super().mv(path1, path2, **kwargs)


def install() -> FaultPlan:
    """Register ``faulty://`` with fsspec and return the (disarmed) plan."""
    fsspec.register_implementation("faulty", FaultyFileSystem, clobber=True)
    PLAN.disarm()
    PLAN.counts = {}
    return PLAN
