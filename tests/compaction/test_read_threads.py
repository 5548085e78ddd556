"""map_in_threads: the compactor's file reads on threads only when they pay off."""

from __future__ import annotations

import threading

import pytest

import acidstream.compaction.rewrite as rewrite
from acidstream.compaction.rewrite import map_in_threads


def _record(items: list[int]) -> tuple[list[int], set[str]]:
    seen: set[str] = set()

    def fn(x: int) -> int:
        seen.add(threading.current_thread().name)
        return x * x

    return map_in_threads(fn, items, total_bytes=len(items) * 4096), seen


@pytest.mark.skipif(rewrite.READ_THREADS <= 1, reason="one read thread on this machine")
def test_threads_when_a_core_is_spare(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rewrite, "_cores_to_spare", lambda: True)
    out, seen = _record(list(range(100)))
    assert out == [x * x for x in range(100)]  # item order, as the serial loop
    assert seen and all(name.startswith("compact") for name in seen)


def test_no_threads_on_a_busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rewrite, "_cores_to_spare", lambda: False)
    out, seen = _record(list(range(100)))
    assert out == [x * x for x in range(100)]
    assert seen == {threading.current_thread().name}


def test_no_threads_for_tiny_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rewrite, "_cores_to_spare", lambda: True)
    seen: set[str] = set()

    def fn(x: int) -> int:
        seen.add(threading.current_thread().name)
        return x

    small = rewrite.THREADED_EVENT_READ_MIN_AVG_BYTES - 1
    assert map_in_threads(fn, list(range(50)), total_bytes=50 * small) == list(range(50))
    assert seen == {threading.current_thread().name}


def test_spare_cores_from_the_load_average(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rewrite.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(rewrite.os, "getloadavg", lambda: (1.2, 0.0, 0.0))
    assert rewrite._cores_to_spare()  # this process's own thread and a little more
    monkeypatch.setattr(rewrite.os, "getloadavg", lambda: (2.1, 0.0, 0.0))
    assert not rewrite._cores_to_spare()  # another process keeps the second core busy
