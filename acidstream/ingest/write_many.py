"""``write_many``'s replay of ``write`` over a block parsed in one columnar pass.

A mixin of :class:`acidstream.ingest.connection.StreamingConnection` (split from it): the
records of a ``write_many`` chunk are parsed by the record writer's bulk path
(``encode_block``), then what ``write`` would do with each record is replayed in record
order (rejections, dead letters, partition registration, auto-flushes after the same
records), the good records buffered as Arrow slices in the connection's table writer.
Drawing the chunks from the caller's iterable stays in the connection module.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from acidstream.acid.errors import SerializationError
from acidstream.acid.placement import Placement
from acidstream.acid.table_writer import TableWriter
from acidstream.ingest.record_writers import BoundRecordWriter
from acidstream.ingest.stats import StatsCounter

if TYPE_CHECKING:
    from acidstream.ingest.streaming_options import StreamingOptions

__all__ = ["WriteManyReplay"]

# Events of a write_many chunk, in record order: a record the writer rejected, the first
# record of a partition, a later record of a partition that refused its first.
_REJECTED, _FIRST, _RETRY = 0, 1, 2


class WriteManyReplay:
    """The block replay of ``write_many`` (caller side: the connection's writing thread,
    under its lock). The connection provides the attributes and methods declared here."""

    options: StreamingOptions
    _writer: BoundRecordWriter
    _place: Placement
    _dynamic: bool
    _static: tuple[str | None, ...] | None
    _stats: StatsCounter

    def _partition(self, values: Sequence[str | None]) -> str:
        raise NotImplementedError

    def _reject(self, record: bytes, error: SerializationError, *, position: str = "") -> bool:
        raise NotImplementedError

    def _buffers(self) -> TableWriter:
        raise NotImplementedError

    def _maybe_auto_flush(self) -> None:
        raise NotImplementedError

    def _write_many_block(self, records: Sequence[bytes]) -> int:
        """Write records (all bytes) parsed in one ``encode_block``, replaying in record
        order what ``write`` does with each one: a rejected record is counted and dead-
        lettered (or raises), the first record of a partition registers it (which may
        reject it), and the good records between such events are buffered as Arrow
        slices, cut where ``write`` would auto-flush. Returns the records written."""
        if not records:
            return 0
        enc = self._writer.encode_block(records)
        good = enc.good_indices.to_numpy(zero_copy_only=False)
        errors = dict(enc.rejected)
        # The partition (group) of each good row, and each group's first record.
        values: list[tuple[str | None, ...]] = []
        gid = np.zeros(len(good), np.int64)
        members: list[np.ndarray] = []  # each group's record indices
        events: list[tuple[int, int, int]] = [(i, _REJECTED, 0) for i in errors]
        if len(good):
            if self._dynamic and enc.partitions is not None:
                for k, (v, rows) in enumerate(self._place.partition_groups(enc.partitions)):
                    at = rows.to_numpy(zero_copy_only=False)  # rows of ``enc.table``
                    gid[at] = k
                    values.append(v)
                    members.append(good[at])
            else:
                values.append(self._static if self._static is not None else ())
                members.append(good)
            events.extend((int(m.min()), _FIRST, k) for k, m in enumerate(members))
        heapq.heapify(events)
        names: dict[int, str] = {}
        written, pos = 0, 0
        while True:
            nxt = events[0][0] if events else len(records)
            if nxt > pos:  # good records of known partitions
                # (the usual chunk, all good in one partition: their bytes are counted)
                known = enc.nbytes if pos == 0 and nxt == len(records) else -1
                written += self._buffer_many(
                    good, gid, names, records, pos, nxt, enc.table, nbytes=known
                )
            if not events:
                return written
            i, kind, k = heapq.heappop(events)
            pos = i + 1
            if kind == _REJECTED:
                if not self._reject(records[i], errors[i]):
                    raise errors[i]
                continue
            try:  # what write() does first with a good record: its partition
                names[k] = self._partition(values[k])
            except SerializationError as e:
                if kind == _FIRST:  # each later record of the partition tries again
                    events.extend((int(m), _RETRY, k) for m in members[k] if m != i)
                    heapq.heapify(events)
                if not self._reject(records[i], e):
                    raise
                continue
            if kind == _FIRST:
                pos = i  # buffered with the records after it
            else:
                written += self._buffer_many(good, gid, names, records, i, i + 1, enc.table)

    def _buffer_many(
        self,
        good: np.ndarray,
        gid: np.ndarray,
        names: Mapping[int, str],
        records: Sequence[bytes],
        lo: int,
        hi: int,
        table: pa.Table,
        *,
        nbytes: int = -1,
    ) -> int:
        """Buffer records ``lo..hi-1`` of a ``write_many`` chunk (all good, their
        partitions registered), counting them as ``write`` does, with an auto-flush
        after each record at which ``write`` would flush. ``nbytes``: their bytes, when
        the parse counted them (-1: count them here)."""
        first = int(np.searchsorted(good, lo))  # their first row in ``table``
        limit = self.options.memory_limit_bytes
        n = hi - lo
        total = nbytes if nbytes >= 0 else sum(map(len, records[lo:hi]))
        out = self._buffers()
        if out.buffered_bytes + total < limit:  # no flush among them (the usual case)
            self._buffer_rows_of_many(gid, names, table, first, n, total)
            return n
        cum = np.cumsum(np.fromiter(map(len, records[lo:hi]), np.int64, n))
        start = 0
        while start < n:
            before = int(cum[start - 1]) if start else 0
            # The first record after which the buffered bytes reach the limit.
            stop = int(np.searchsorted(cum, limit - out.buffered_bytes + before)) + 1
            end = min(stop, n)
            nbytes = int(cum[end - 1]) - before
            self._buffer_rows_of_many(gid, names, table, first + start, end - start, nbytes)
            if stop <= n:
                self._maybe_auto_flush()
            start = end
        return n

    def _buffer_rows_of_many(
        self,
        gid: np.ndarray,
        names: Mapping[int, str],
        table: pa.Table,
        offset: int,
        length: int,
        nbytes: int,
    ) -> None:
        """Buffer ``length`` rows of a ``write_many`` chunk's table from ``offset`` (their
        records' bytes: ``nbytes``), each in its partition, in record order."""
        rows = table.slice(offset, length)
        groups = gid[offset : offset + length]
        out = self._buffers()
        if groups[0] == groups[-1] and (groups == groups[0]).all():
            out.add_arrow(names[int(groups[0])], rows, nbytes=0)
        else:
            order = np.argsort(groups, kind="stable")
            bounds = np.flatnonzero(np.diff(groups[order])) + 1
            for take in np.split(order, bounds):
                part = names[int(groups[take[0]])]
                out.add_arrow(part, rows.take(pa.array(take)), nbytes=0)
        out.count_bytes(nbytes)
        self._stats.add("records_written", length)
        self._stats.add("records_size", nbytes)
