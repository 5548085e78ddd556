"""Parsing the next block of records while the current one is written and committed.

A block's parse (``BoundRecordWriter.encode_block``: Arrow's JSON/CSV readers, regex
extraction, vectorized conversion) is pure: it reads the records and the bound writer,
and writes nothing a commit depends on. So a writer that knows its next block can parse
it on another core while the current txn's ORC write, ``fdatasync``s and metastore
commit run: :meth:`acidstream.ingest.connection.StreamingConnection.parse_ahead` for a stream of
blocks, :class:`AheadParser` when the next block is a guess (``acidstream ingest``
guesses that a txn's records were all good; a wrong guess is parsed again, in place).

What a writer may rely on: a :class:`ParsedBlock` is exactly what ``encode_block``
returns for its records (the same rows, rejections and errors, in the same order), and
``write_block`` writes it as it would write the records themselves: the dead-letter
records and the counts happen at ``write_block``, in the caller's order. At most one
block is parsed ahead, so memory stays bounded by two blocks.

Runs in the writer's process: one thread per :class:`AheadParser` (ended by ``close``); Arrow's
readers release the GIL, which is what makes the overlap pay.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from acidstream.ingest.record_common import EncodedBlock
from acidstream.ingest.record_writers import BoundRecordWriter

__all__ = ["AheadParser", "ParsedBlock", "parse_block", "parse_stream"]


@dataclass(frozen=True, slots=True)
class ParsedBlock:
    """Records and what their connection's record writer made of them, ready for
    ``StreamingConnection.write_block``."""

    records: Sequence[bytes]
    encoded: EncodedBlock
    #: The bound writer that parsed them (``write_block`` refuses another's blocks).
    writer: BoundRecordWriter
    #: The bytes of the records (counted here, off the writing thread).
    nbytes: int


def parse_block(writer: BoundRecordWriter, records: Sequence[bytes]) -> ParsedBlock:
    """Parse ``records`` with ``writer`` (any thread)."""
    enc = writer.encode_block(records)
    return ParsedBlock(records, enc, writer, enc.nbytes if enc.nbytes >= 0 else _nbytes(records))


def _nbytes(records: Sequence[bytes]) -> int:
    # One pass in C (a join) is about twice as fast as summing the lengths.
    return len(b"".join(records))


class AheadParser:
    """One block parsed ahead on a background thread, named by a key the caller chooses.

    ``ahead(key, records)`` starts parsing the block the caller expects next;
    ``take(key, records)`` returns it when the key matches, or parses ``records`` now
    (a wrong guess costs one parse, never a wrong block). ``close()`` ends the thread.
    """

    def __init__(self, writer: BoundRecordWriter) -> None:
        self._writer = writer
        self._pool: ThreadPoolExecutor | None = None
        self._key: Hashable | None = None
        self._future: Future[ParsedBlock] | None = None

    def ahead(self, key: Hashable, records: Sequence[bytes]) -> None:
        """Start parsing ``records``, the block the caller expects to take as ``key``
        (replacing any guess not taken)."""
        self._drop()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="acidstream-parse")
        self._key = key
        self._future = self._pool.submit(parse_block, self._writer, records)

    def take(self, key: Hashable, records: Sequence[bytes]) -> ParsedBlock:
        """The block of ``key``: parsed ahead when that was the guess, else now."""
        future, guessed = self._future, self._key
        self._future = self._key = None
        if future is not None and guessed == key:
            return future.result()  # a parse error (not a bad record) surfaces here
        if future is not None:
            future.cancel()
        return parse_block(self._writer, records)

    def _drop(self) -> None:
        if self._future is not None:
            self._future.cancel()
        self._future = self._key = None

    def close(self) -> None:
        """Forget any guess and end the thread (waits for a parse under way)."""
        self._drop()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> AheadParser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_stream(
    writer: BoundRecordWriter, blocks: Iterable[Sequence[bytes]]
) -> Iterator[ParsedBlock]:
    """Each block of ``blocks`` parsed, the next one on a background thread while the
    caller writes this one. Pulls at most one block ahead of the caller.

    The background thread also draws the blocks from ``blocks`` (one at a time, never
    two threads at once): slicing a list of records or splitting lines costs the
    writing thread nothing either. An error raised by ``blocks`` or by a parse reaches
    the caller where it takes that block, after every block before it.
    """
    it = iter(blocks)

    def pull() -> ParsedBlock | None:
        records = next(it, None)
        return None if records is None else parse_block(writer, records)

    with ThreadPoolExecutor(1, thread_name_prefix="acidstream-parse") as pool:
        future = pool.submit(pull)
        while (parsed := future.result()) is not None:
            future = pool.submit(pull)
            yield parsed
