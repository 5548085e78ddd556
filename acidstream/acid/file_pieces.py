"""The stitched-file half of :class:`acidstream.acid.file_writer.AcidFileWriter`: pieces.

Split from :mod:`acidstream.acid.file_writer` (its seam: how rows become stripes of a
stitched file). A stitched file (streaming on the arrow engine, any arrow-engine file once
a batch needs the exact path, a big write encoded on several threads) is written as
"pieces": each run of rows one encoder wrote, as a whole ORC file whose stripes go to
the file and whose tail is dropped; the file gets one tail covering every piece
(``acidstream.acid.orc_stitch``). Arrow pieces are encoded into native memory, exact
pieces (pre-1970 timestamps with a fraction...) by pyorc, and a big write's slices on
the encoding threads (``acidstream.acid.parallel_encode``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO, Any, BinaryIO, cast
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.orc as pa_orc
import pyorc

from acidstream.acid.errors import SerializationError
from acidstream.acid.orc_capture import PieceCapture, TailCapture
from acidstream.acid.orc_events import InsertRun, splice_insert_events
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.orc_stitch import StripeStitcher
from acidstream.acid.orc_tail import parse_tail, tail_bytes
from acidstream.acid.parallel_encode import encode_slices
from acidstream.acid.schema import TableSchema
from acidstream.acid.storage import Storage
from acidstream.acid.timestamps import SplitTimestampConverter, exact_pyorc_values

__all__ = ["StitchedPieces"]

_UTC = ZoneInfo("UTC")
_ORC_HEADER = b"ORC"
# Pieces of at least this many bytes start their write-back as they reach the file (a
# big write's stripes, while the next ones encode); smaller ones wait for the sync.
_WRITEBACK_MIN = 1 << 20


class StitchedPieces:
    """The piece methods of ``AcidFileWriter`` (a mixin: the writer owns the state)."""

    # The writer's state these methods use (set by AcidFileWriter.__init__).
    storage: Storage
    schema: TableSchema
    options: OrcWriterOptions
    bucket_property: int
    sync: bool
    _raw: IO[bytes]
    _capture: TailCapture
    _bloom: dict[str, Any]
    _bloom_rows: dict[str, Any]
    _row_type: pa.StructType
    _stitch: StripeStitcher | None
    _piece: PieceCapture | None
    _native: pa.BufferOutputStream | None
    _piece_runs: list[InsertRun] | None
    _exact: Any
    _arrow: Any
    _declared_block_size: int
    _piece_bytes: int  # Arrow bytes written into the current arrow piece (by_bytes only)

    @staticmethod
    def _empty_events(rows: pa.Array) -> pa.Table:
        raise NotImplementedError  # AcidFileWriter's

    def _await_files(self) -> IO[bytes]:
        raise NotImplementedError  # AcidFileWriter's

    def _write_arrow_piece(self, table: pa.Table, run: InsertRun | None) -> None:
        """Stitched file: ``table`` into the current arrow piece, which pyarrow encodes
        into native memory: no write of pyarrow's comes back into the interpreter (each
        took the GIL, a wait while a parsing thread held it), and the piece reaches the
        file in one write, without the copies a Python file object made. A piece ends
        once it holds a stripe, so memory stays at about two stripes.

        With ``run``, ``table`` holds only the ``row`` column of those insert events:
        the piece's event columns are spliced in when it ends (``acidstream.acid.orc_events``).
        A piece holds one kind of table: a write of the other kind ends it."""
        if self._arrow is not None and (run is None) != (self._piece_runs is None):
            self._end_piece()
        stripe = self.options.stripe_size
        step = max(len(table), 1)
        # (The buffers' total is cheap and bounds the referenced bytes from above.)
        if len(table) > 1 and table.get_total_buffer_size() > stripe:
            nbytes = table.nbytes
            if nbytes > stripe:
                step = max(1, len(table) * stripe // nbytes)
        encode = self.options.arrow_encode_kwargs()
        # An encoder that never cuts a stripe (uncompressed: arrow_encode_kwargs): each
        # piece, one stripe, holds up to a stripe of Arrow bytes (a slice is at most that).
        by_bytes = encode["stripe_size"] > stripe
        for start in range(0, max(len(table), 1), step):
            part = table.slice(start, step)
            size = part.nbytes if by_bytes else 0
            if (
                self._arrow is not None
                and 0 < self._piece_bytes
                and self._piece_bytes + size > stripe
            ):
                self._end_piece()  # the piece (one stripe) stays within a stripe
            if self._arrow is None:
                self._native = pa.BufferOutputStream()
                bloom = self._bloom if run is None else self._bloom_rows
                self._arrow = pa_orc.ORCWriter(self._native, **encode, **bloom)
                self._piece_runs = None if run is None else []
                self._piece_bytes = 0
            if run is not None:
                assert self._piece_runs is not None
                self._piece_runs.append(
                    InsertRun(run.write_id, run.first_row_id + start, len(part))
                )
            self._arrow.write(part)
            assert self._native is not None
            self._piece_bytes += size
            if self._native.tell() >= stripe or self._piece_bytes >= stripe:
                self._end_piece()

    def _write_exact(self, table: pa.Table) -> None:
        """The exact path: ``table`` goes to a piece written by pyorc from (floor seconds,
        nanos) pairs, which ORC C++ encodes as ORC Java does (``acidstream.acid.timestamps``).
        About as fast as the pyorc engine; only batches that need it take it."""
        if self._stitch is None:
            self._begin_stitching()
        assert self._stitch is not None
        if self._arrow is not None:
            self._end_piece()
        if self._exact is None:
            self._await_files()  # pyorc writes through the piece (see _direct_writer)
            self._piece = PieceCapture(self._raw, first=self._stitch.position == 0)
            self._exact = pyorc.Writer(
                cast(BinaryIO, self._piece),
                self.schema.orc_event_schema(),
                timezone=_UTC,
                converters={pyorc.TypeKind.TIMESTAMP: SplitTimestampConverter},
                **self.options.pyorc_piece_kwargs(),
                **self._bloom,
            )
        cols = [c.combine_chunks() for c in table.columns]
        row = cast(pa.StructArray, cols[5])
        # Event and row columns as Python lists zipped into tuples (C loops); only the
        # values themselves are converted (exact_pyorc_values).
        fields = [exact_pyorc_values(row.field(i)) for i in range(row.type.num_fields)]
        rows: Iterable[Any] = zip(*fields, strict=True)
        if row.null_count:
            valid = row.is_valid().to_pylist()
            rows = (r if ok else None for r, ok in zip(rows, valid, strict=True))
        heads = [c.to_pylist() for c in cols[:5]]
        try:
            self._exact.writerows(zip(*heads, rows, strict=True))
        except (TypeError, ValueError, OverflowError) as e:
            raise SerializationError(f"rows do not fit the table's types: {e}") from e

    def _begin_stitching(self) -> None:
        """Turn a one-encoder arrow file into a stitched one: what pyarrow wrote so far
        becomes the first piece (its tail is dropped; the stitcher writes the file's)."""
        self._stitch = StripeStitcher(declared_block_size=self._declared_block_size)
        writer, self._arrow = self._arrow, None
        if writer is None:
            return
        cap = self._capture
        cap.holding = True
        try:
            if cap.logical == 0:
                # Nothing written: pyarrow needs a schema before it can close.
                empty = pa.array([], self._row_type)
                writer.write(self._empty_events(empty))
            writer.close()
        finally:
            cap.holding = False
        held = bytes(cap.held)
        cap.held.clear()
        passed = cap.logical - len(held)
        if passed == 0:
            return  # nothing reached the file: the first piece will write the header
        tail = parse_tail(held)
        self._raw.write(held[: len(held) - tail.tail_length])
        body = cap.logical - tail.tail_length - 3  # the file's "ORC" header excluded
        self._stitch.add_piece(tail, body_start=self._stitch.next_body_start, body_length=body)

    def _end_piece(self) -> None:
        """Close the current piece's encoder and register its stripes (no tail yet)."""
        assert self._stitch is not None
        if self._native is not None:
            self._end_arrow_piece(self._native)
            return
        writer = self._arrow if self._arrow is not None else self._exact
        piece = self._piece
        if writer is None or piece is None:
            return
        piece.holding = True  # the last stripe and the piece's own tail
        try:
            writer.close()
        finally:
            self._arrow = self._exact = self._piece = None
        held = bytes(piece.held)
        tail = parse_tail(held)
        self._raw.write(memoryview(held)[: len(held) - tail.tail_length])  # no copy
        body = piece.passed + len(held) - tail.tail_length
        # The stitcher's position has not moved since the piece began.
        self._stitch.add_piece(tail, body_start=self._stitch.next_body_start, body_length=body)

    def _write_parallel_pieces(
        self, table: pa.Table, run: InsertRun, slices: list[tuple[int, int]]
    ) -> None:
        """A big write of insert rows (``table``: the ``row`` column only): each slice
        encoded by pyarrow on an encoding thread into a piece of its own, the pieces
        appended in row order (``acidstream.acid.parallel_encode``)."""
        if self._arrow is not None:
            self._end_piece()  # the open piece's rows come first
        bloom = self._bloom_rows
        kwargs = self.options.arrow_encode_kwargs()

        def encode(part: pa.Table) -> pa.Buffer:  # (an encoding thread)
            sink = pa.BufferOutputStream()
            writer = pa_orc.ORCWriter(sink, **kwargs, **bloom)
            writer.write(part)
            writer.close()
            return sink.getvalue()

        for (offset, length), buf in zip(slices, encode_slices(table, slices, encode), strict=True):
            runs = [InsertRun(run.write_id, run.first_row_id + offset, length)]
            self._add_arrow_piece(memoryview(buf), runs)

    def _end_arrow_piece(self, native: pa.BufferOutputStream) -> None:
        """:meth:`_end_piece` of an arrow piece: its stripes (and, for the file's first
        piece, the ``ORC`` header) go to the file; its own tail is dropped."""
        assert self._stitch is not None
        runs, self._piece_runs = self._piece_runs, None
        try:
            if self._arrow is not None:
                self._arrow.close()
        finally:
            self._arrow = self._native = None
        self._add_arrow_piece(memoryview(native.getvalue()), runs)

    def _add_arrow_piece(self, data: memoryview, runs: list[InsertRun] | None) -> None:
        """A whole ORC file pyarrow encoded (``runs``: of insert rows only, whose event
        columns are spliced in) appended to the stitched file as its next piece."""
        assert self._stitch is not None
        tail = parse_tail(tail_bytes(data))
        header = len(_ORC_HEADER)
        first = self._stitch.position == 0  # it has not moved since the piece began
        if runs is not None:
            parts, tail = splice_insert_events(data, tail, runs, self.bucket_property)
            if first:
                parts.insert(0, data[:header])
            stripes = b"".join(parts)  # one write: a copy of about a stripe
            self._raw.write(stripes)
            body = len(stripes) - (header if first else 0)
        else:
            self._raw.write(data[0 if first else header : len(data) - tail.tail_length])
            body = len(data) - header - tail.tail_length
        if self.sync and body >= _WRITEBACK_MIN:
            # The commit's fdatasync comes soon: let the disk start on the stripes now.
            # (Not in durability flush: no sync follows, and starting the write-back can
            # itself wait when the device's queue is full. Nor for a small piece: its
            # fdatasync follows at once, and the early start only added a call that
            # allocates the blocks and queues the write the sync would queue anyway.)
            self.storage.start_writeback(self._raw)
        self._stitch.add_piece(tail, body_start=self._stitch.next_body_start, body_length=body)
