"""Encoding one big write's rows on several threads (issue 33 item 3).

pyarrow's ORC writer encodes a table without the interpreter lock (its ``write`` and
``close`` run ``nogil`` into a native ``BufferOutputStream``), so the row slices of one
big write, each encoded into an ORC file of its own on its own thread, use every core;
the file writer then appends them in row order as pieces of its stitched file
(``acidstream.acid.orc_stitch``: each piece's stripes, one tail for the file). Small
writes stay on the caller's thread: a thread hand-off costs more than it saves below
:data:`MIN_ROWS_PER_THREAD` rows each.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pyarrow as pa

from acidstream.acid.thread_pools import SharedPool

__all__ = ["MIN_ROWS_PER_THREAD", "encode_slices", "parallel_slices"]

MIN_ROWS_PER_THREAD = 50_000
"""A slice smaller than this is not worth a thread (measured: 1,000-row txns got slower)."""


def threads() -> int:
    """The encoding threads: one per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


_pool = SharedPool("acidstream-encode", threads)  # the encoding threads


def parallel_slices(rows: int, nbytes: int, stripe_size: int) -> list[tuple[int, int]]:
    """How to cut a write of ``rows`` rows (``nbytes`` in memory) into slices encoded at
    once, as ``(offset, length)`` in row order; a single slice when it is not worth
    threads. Slices are about a stripe at most, so that each piece's stripes stay within
    the file's stripe size and memory holds a few stripes at a time."""
    n_threads = threads()
    if n_threads < 2 or rows < 2 * MIN_ROWS_PER_THREAD:
        return [(0, rows)]
    count = min(n_threads, rows // MIN_ROWS_PER_THREAD)
    if stripe_size > 0 and nbytes > stripe_size:
        count = max(count, -(-nbytes // stripe_size))
    step = -(-rows // count)
    return [(start, min(step, rows - start)) for start in range(0, rows, step)]


def encode_slices(
    table: pa.Table, slices: list[tuple[int, int]], encode: Callable[[pa.Table], pa.Buffer]
) -> Iterator[pa.Buffer]:
    """``encode`` of each slice of ``table``, on the encoding threads, yielded in slice
    order as each is ready (at most twice the threads in flight: memory stays bounded).
    An ``encode`` failure is raised in order, once the slices before it were yielded."""
    pool = _pool.get()
    ahead = 2 * threads()
    pending = [pool.submit(encode, table.slice(o, n)) for o, n in slices[:ahead]]
    nxt = len(pending)
    try:
        while pending:
            buf = pending.pop(0).result()
            if nxt < len(slices):
                o, n = slices[nxt]
                pending.append(pool.submit(encode, table.slice(o, n)))
                nxt += 1
            yield buf
    finally:
        for fut in pending:  # the caller stopped (a failure): nothing left running
            fut.cancel()
        for fut in pending:
            if not fut.cancelled():
                fut.exception()
