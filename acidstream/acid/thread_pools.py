"""Process-wide thread pools, each made on first use and forgotten in a forked child.

One mechanism for the library's long-lived pools (encoding, fsyncs, object PUTs started
ahead, parse parts): nothing starts at import, and a child forked after a pool was made
(Spark's Python daemon forks its workers) makes its own instead of handing work to the
parent's threads, which the child does not have and which would never run it.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["SharedPool"]

_all: weakref.WeakSet[SharedPool] = weakref.WeakSet()


class SharedPool:
    """A named process-wide :class:`ThreadPoolExecutor`; :meth:`get` makes it once.

    Args:
        name: the threads' name prefix.
        threads: how many threads, or a function giving it when the pool is made.
    """

    def __init__(self, name: str, threads: int | Callable[[], int]) -> None:
        self._name = name
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        _all.add(self)

    def get(self) -> ThreadPoolExecutor:
        """The pool, made on the first call in this process."""
        with self._lock:
            if self._pool is None:
                n = self._threads() if callable(self._threads) else self._threads
                self._pool = ThreadPoolExecutor(max(1, n), thread_name_prefix=self._name)
            return self._pool

    def _forget(self) -> None:
        # (In a forked child: the parent's threads and a lock a parent thread held are not
        # the child's.)
        self._pool, self._lock = None, threading.Lock()


def _forget_all_in_child() -> None:
    for pool in list(_all):
        pool._forget()


os.register_at_fork(after_in_child=_forget_all_in_child)
