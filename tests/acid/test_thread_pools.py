"""The library's process-wide pools (``acidstream.acid.thread_pools``): made once, and a
forked child makes its own instead of handing work to threads it does not have."""

from __future__ import annotations

import os
import signal

import pytest

from acidstream.acid import group_sync, parallel_encode, storage_object
from acidstream.acid.thread_pools import SharedPool
from acidstream.ingest import record_bulk


def test_a_pool_is_made_once_with_its_thread_count() -> None:
    calls: list[int] = []
    pool = SharedPool("test-pool", lambda: calls.append(1) or 3)
    assert pool.get() is pool.get()
    assert calls == [1] and pool.get()._max_workers == 3
    assert pool.get().submit(lambda: 7).result(timeout=10) == 7


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is not available here")
def test_every_library_pool_runs_work_in_a_child_forked_after_it_was_used() -> None:
    """Each pool (encode, fsync, S3 PUTs ahead, parse parts) is used in this process, then
    the process forks: the child's work on each pool must run (before this mechanism, the
    encode, fsync and PUT pools kept the parent's pool, whose threads the child lacks, and
    a submitted task never ran)."""
    pools = [parallel_encode._pool, group_sync._pool, storage_object._put_pool,
             record_bulk._parts_pool]  # fmt: skip
    for pool in pools:
        assert pool.get().submit(lambda: 1).result(timeout=10) == 1
    pid = os.fork()
    if pid == 0:  # the child: killed by SIGALRM if a task never runs
        code = 3
        try:
            signal.alarm(30)
            ok = all(p.get().submit(lambda: 2).result(timeout=20) == 2 for p in pools)
            code = 0 if ok else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "a pool's task did not run in the child"
