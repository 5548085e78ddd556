"""ACID ORC file writer: Hive's ``OrcRecordUpdater`` on pyorc.

One ``AcidFileWriter`` writes one bucket file of a base, delta or delete delta:
the exact event schema, rows in ROW__ID order with rowIds restarting at 0 per
write id, and in every footer (intermediate ones included) exactly one
``hive.acid.key.index`` entry per stripe plus ``hive.acid.stats`` and
``hive.acid.version``. Streaming files that hold several write ids get an
intermediate footer per commit and the ``_flush_length`` side file.

Two pyorc facts shape this module (see ``docs/writing.md``): rows buffered in
pyorc's batch are not covered by an intermediate footer, so files that take
intermediate footers use ``batch_size=1``; and pyorc appends user metadata
instead of replacing it, so every tail is rewritten by ``acid.orc_tail`` as it
is written.
"""

from __future__ import annotations

import bisect
import io
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import count, repeat
from typing import IO, Any, BinaryIO, Literal, cast
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as pa_orc
import pyorc

from acid import bucket_codec, layout
from acid.errors import AcidFormatError, ConfigError, SerializationError
from acid.orc_stitch import StripeStitcher
from acid.orc_tail import parse_tail, rewrite_tail
from acid.orc_types import event_type_messages
from acid.schema import HiveType, TableSchema
from acid.side_file import encode_flush_length
from acid.storage import Storage

__all__ = [
    "AcidFileWriter",
    "OrcWriterOptions",
    "write_base",
    "write_delete_delta",
    "write_delta",
]

log = logging.getLogger(__name__)

FileKind = Literal["insert", "delete", "base"]
Engine = Literal["auto", "pyorc", "arrow"]
INSERT_OP, UPDATE_OP, DELETE_OP = 0, 1, 2
KEY_INDEX = "hive.acid.key.index"
ACID_STATS = "hive.acid.stats"
ACID_VERSION_KEY = "hive.acid.version"
_UTC = ZoneInfo("UTC")
_EVENT_NAMES = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row")
_COMPRESSION = {"NONE": pyorc.CompressionKind.NONE, "ZLIB": pyorc.CompressionKind.ZLIB}


@dataclass(frozen=True)
class OrcWriterOptions:
    """ORC settings of a base writer; deltas derive theirs as Hive does.

    Defaults are ORC Java's (64 MiB stripes, 256 KiB compression blocks, ZLIB,
    index stride 10,000). ``delta_options`` applies ``orc.base.delta.ratio``
    (stripe and buffer divided by 8) and, for streaming, Hive's streaming
    optimizations (no row index, no dictionary).
    """

    compression: str = "ZLIB"
    stripe_size: int = 64 * 1024 * 1024
    compression_block_size: int = 256 * 1024
    row_index_stride: int = 10_000
    dictionary_key_size_threshold: float = 0.8
    base_delta_ratio: int = 8
    batch_size: int = 1024

    def __post_init__(self) -> None:
        if self.compression.upper() not in _COMPRESSION:
            raise ConfigError(
                f"orc compression must be one of {sorted(_COMPRESSION)}, got {self.compression!r}"
            )
        if self.stripe_size <= 0 or self.compression_block_size <= 0 or self.batch_size <= 0:
            raise ConfigError("orc stripe_size, compression_block_size and batch_size must be > 0")
        if self.base_delta_ratio <= 0:
            raise ConfigError("orc base_delta_ratio must be > 0")

    def delta_options(self, *, streaming: bool) -> OrcWriterOptions:
        """Insert-delta settings (``OrcRecordUpdater``): ratio applied; streaming optimizations."""
        opts = replace(
            self,
            stripe_size=max(self.stripe_size // self.base_delta_ratio, 64 * 1024),
            compression_block_size=max(
                self.compression_block_size // self.base_delta_ratio, 4 * 1024
            ),
        )
        if streaming:
            opts = replace(opts, row_index_stride=0, dictionary_key_size_threshold=0.0)
        return opts

    def arrow_kwargs(self) -> dict[str, Any]:
        return {
            "file_version": "0.12",
            "stripe_size": self.stripe_size,
            # pyarrow cannot turn the row index off (Hive's streaming writers do, for
            # speed only): a stitched streaming file keeps ORC's default stride.
            "row_index_stride": self.row_index_stride or 10_000,
            "compression": "zlib" if self.compression.upper() == "ZLIB" else "uncompressed",
            "compression_strategy": "speed",
            # pyarrow's ORC writer fixes its memory block at 64 KiB and needs the
            # compression block to be a multiple of it (Hive's delta 32 KiB is not).
            "compression_block_size": -(-self.compression_block_size // 65536) * 65536,
            "dictionary_key_size_threshold": self.dictionary_key_size_threshold,
            "padding_tolerance": 0.0,
        }

    def pyorc_kwargs(self, *, batch_size: int | None = None) -> dict[str, Any]:
        return {
            "batch_size": batch_size or self.batch_size,
            "stripe_size": self.stripe_size,
            "row_index_stride": self.row_index_stride,
            "compression": _COMPRESSION[self.compression.upper()],
            "compression_strategy": pyorc.CompressionStrategy.SPEED,
            "compression_block_size": self.compression_block_size,
            "dict_key_size_threshold": self.dictionary_key_size_threshold,
            "padding_tolerance": 0.0,
            # pyorc requires the compression block to be a multiple of its memory block.
            "memory_block_size": math.gcd(self.compression_block_size, 64 * 1024),
        }


class _TailCapture(io.RawIOBase):
    """The file object pyorc writes to.

    Bytes pass straight through, except while a footer is being written: then
    they are held so the tail can be rewritten before it reaches storage. The
    C++ writer counts offsets itself (``logical``); ``AcidFileWriter`` maps them
    to the physical file.
    """

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self.raw = raw
        self.logical = 0
        self.holding = False
        self.held = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        n = len(b)
        self.logical += n
        if self.holding:
            self.held += b
        else:
            self.raw.write(b)
        return n

    def flush(self) -> None:
        # Durability is decided by AcidFileWriter at commit points, not by pyorc.
        pass

    def close(self) -> None:
        # pyorc must not close the underlying file: the tail is still to be rewritten.
        pass


class _PieceCapture(_TailCapture):
    """The file object one stitched piece's pyarrow writer writes to.

    Stripes go straight to the real file as pyarrow emits them (memory stays at one
    stripe), minus the piece's own ``ORC`` header unless it is the file's first piece;
    while the piece is closed the bytes (last stripe + the piece's tail) are held so the
    tail can be replaced by one covering the whole file.
    """

    def __init__(self, raw: IO[bytes], *, first: bool) -> None:
        super().__init__(raw)
        self.header_left = 3  # len(b"ORC"): the file's header if first, else dropped
        self.first = first
        self.passed = 0  # body bytes written through (header excluded)

    def write(self, b: Any) -> int:
        n = len(b)
        data = bytes(b)
        if self.header_left:
            cut = min(self.header_left, len(data))
            self.header_left -= cut
            if self.first:
                self.raw.write(data[:cut])
            data = data[cut:]
        if self.holding:
            self.held += data
        elif data:
            self.raw.write(data)
            self.passed += len(data)
        return n


@dataclass(frozen=True, slots=True)
class _Segment:
    """Rows ``[start, start+n)`` of the file: a run of one write id, or explicit keys."""

    start: int
    n: int
    owid: int
    bucket: int
    rowid: int
    keys: Sequence[tuple[int, int, int]] | None = None

    def key_at(self, i: int) -> tuple[int, int, int]:
        if self.keys is not None:
            return self.keys[i - self.start]
        return (self.owid, self.bucket, self.rowid + (i - self.start))


class AcidFileWriter:
    """Writes one ACID bucket file (Hive's ``OrcRecordUpdater`` for one bucket/statement).

    Args:
        storage: where to write.
        path: the bucket file path, e.g. ``.../delta_0000005_0000005_0000/bucket_00000``.
        schema: the table's columns.
        kind: ``insert`` (delta), ``delete`` (delete delta) or ``base``.
        bucket_id: the writer id encoded into ``bucket`` (must match the file name).
        statement_id: the statement id encoded into ``bucket`` (-1 encodes as 0).
        streaming: the file takes intermediate footers (``flush``). With pyorc that
            forces ``batch_size=1`` so each footer covers every row written before it;
            with the arrow engine each flush's rows are a complete ORC file whose stripes
            stream into the file and whose tail is replaced (``acid.orc_stitch``).
        side_file: keep the ``_flush_length`` side file (transaction batches of more
            than one txn); requires ``streaming``.
        options: base ORC settings; deltas derive theirs.
        engine: ``pyorc`` (row tuples) or ``arrow`` (columnar pyarrow writer, about
            twice as fast; footers get Hive's exact types back in the tail rewrite).
            ``auto`` picks ``arrow`` unless the file is streaming.
    """

    def __init__(
        self,
        storage: Storage,
        path: str,
        schema: TableSchema,
        *,
        kind: FileKind,
        bucket_id: int,
        statement_id: int = -1,
        streaming: bool = False,
        side_file: bool = False,
        options: OrcWriterOptions | None = None,
        engine: Engine = "auto",
    ) -> None:
        if engine == "auto":
            engine = "pyorc" if streaming else "arrow"
        if streaming and kind == "base":
            raise ConfigError("a base is written whole: it cannot be a streaming file")
        if side_file and not streaming:
            raise ConfigError("a side file is only kept for streaming files")
        parsed = layout.parse_bucket_file(path.rsplit("/", 1)[-1])
        if parsed is None or parsed[0] != bucket_id:
            raise ConfigError(f"file name of {path} does not match bucket id {bucket_id}")
        self.storage = storage
        self.path = path
        self.schema = schema
        self.kind = kind
        self.bucket_id = bucket_id
        self.statement_id = statement_id
        self.bucket_property = bucket_codec.encode(bucket_id, statement_id)
        self.streaming = streaming
        base = options or OrcWriterOptions()
        if kind == "insert":
            self.options = base.delta_options(streaming=streaming)
        else:
            # Hive's delete-delta and base writers use fresh options: no ratio, no streaming tweaks.
            self.options = base
        directory = path.rsplit("/", 1)[0]
        storage.makedirs(directory)
        storage.write_bytes_if_absent(
            storage.join(directory, layout.ACID_FORMAT_FILE), str(layout.ACID_VERSION).encode()
        )
        self._raw = storage.create(path)
        self._side: IO[bytes] | None = None
        if side_file:
            self._side = storage.create(layout.side_file_name(path))
            self._side.write(encode_flush_length(0))
            storage.durable_flush(self._side)
        self._capture = _TailCapture(self._raw)
        self.engine = engine
        self._orc: Any = None
        self._arrow: Any = None
        self._columnar = engine == "arrow"
        # Streaming on the arrow engine: the rows since the last flush are one "piece".
        self._stitch: StripeStitcher | None = None
        self._piece: _PieceCapture | None = None
        if engine == "pyorc":
            self._orc = pyorc.Writer(
                cast(BinaryIO, self._capture),
                schema.orc_event_schema(),
                # Hive 3+ reads ORC timestamps as UTC wall-clock values (LocalDateTime semantics).
                timezone=_UTC,
                **self.options.pyorc_kwargs(batch_size=1 if streaming else None),
            )
        else:
            if streaming:
                self._stitch = StripeStitcher()
            else:
                self._arrow = pa_orc.ORCWriter(self._capture, **self.options.arrow_kwargs())
            self._row_type = pa.struct([pa.field(n, t.to_arrow()) for n, t in schema.columns])
        self._segments: list[_Segment] = []
        self._starts: list[int] = []
        self._rows = 0
        self._last_write_id = -1
        self._next_rowid = 0
        self._shifts: list[tuple[int, int]] = [(0, 0)]
        self._last_flush = 0
        self._closed = False
        self.flush_lengths: list[int] = []
        # pyarrow writes char/varchar as string: restore Hive's exact types in the footer.
        self._types = event_type_messages(schema) if engine == "arrow" else None

    # ------------------------------------------------------------------ writing
    @property
    def rows_written(self) -> int:
        return self._rows

    def _add_segment(self, seg: _Segment) -> None:
        self._segments.append(seg)
        self._starts.append(seg.start)
        self._rows += seg.n

    def _start_write(self, write_id: int) -> int:
        """The first rowId for rows of ``write_id``: numbering restarts per write id."""
        if write_id < self._last_write_id:
            raise ConfigError(
                f"write ids must not go down within a file ({write_id} after {self._last_write_id}): "
                "rows must stay in ROW__ID order"
            )
        if write_id != self._last_write_id:
            self._last_write_id = write_id
            self._next_rowid = 0
        return self._next_rowid

    def insert(self, write_id: int, rows: Iterable[Sequence[Any]]) -> int:
        """Append insert events for ``write_id``; rows are tuples in table column order.

        rowIds continue the write id's numbering in this file and restart at 0 for
        a new write id. Returns the number of rows written.
        """
        if self.kind == "delete":
            raise ConfigError("insert events cannot go to a delete delta")
        self._check_open()
        start_rowid = self._start_write(write_id)
        b = self.bucket_property
        if self._columnar:
            n = self._write_arrow_inserts(write_id, start_rowid, self._rows_to_struct(rows))
        else:
            events = zip(
                repeat(INSERT_OP),
                repeat(write_id),
                repeat(b),
                count(start_rowid),
                repeat(write_id),
                rows,
            )
            before = self._orc.current_row
            try:
                n = self._orc.writerows(events)
            except (TypeError, ValueError, OverflowError) as e:
                # Rows before the bad one are in the file; account for them so the key
                # index stays exact, then let the caller decide (usually: abort the txn).
                n = self._orc.current_row - before
                if n:
                    self._add_segment(_Segment(self._rows, n, write_id, b, start_rowid))
                    self._next_rowid += n
                raise SerializationError(
                    f"row {n} of this write does not fit the table's types: {e}"
                ) from e
        if n:
            self._add_segment(_Segment(self._rows, n, write_id, b, start_rowid))
            self._next_rowid += n
        return n

    def insert_arrow(self, write_id: int, data: pa.Table | pa.RecordBatch) -> int:
        """Append insert events from Arrow data whose columns are the table's, in order
        (matched by position, as Hive's ``orc.force.positional.evolution``)."""
        if data.num_columns != len(self.schema.columns):
            raise ConfigError(
                f"expected {len(self.schema.columns)} columns, got {data.num_columns}"
            )
        if not self._columnar:
            cols = [data.column(i).to_pylist() for i in range(data.num_columns)]
            return self.insert(write_id, zip(*cols, strict=True))
        self._check_open()
        start = self._start_write(write_id)
        n = self._write_arrow_inserts(write_id, start, self._columns_to_struct(list(data.columns)))
        if n:
            self._add_segment(_Segment(self._rows, n, write_id, self.bucket_property, start))
            self._next_rowid += n
        return n

    # ------------------------------------------------------------ arrow engine
    def _conform(
        self, col: pa.Array | pa.ChunkedArray, hive: HiveType, target: pa.DataType
    ) -> pa.Array:
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if not arr.type.equals(target):
            try:
                arr = arr.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise ConfigError(f"cannot convert {arr.type} to Hive {hive}: {e}") from e
        if hive.kind == "varchar":
            arr = pc.utf8_slice_codeunits(arr, 0, hive.params[0])
        elif hive.kind == "char":
            # Hive's CHAR(n) is fixed width: truncate, then pad with spaces (as ORC's writers do).
            arr = pc.utf8_rpad(pc.utf8_slice_codeunits(arr, 0, hive.params[0]), hive.params[0], " ")
        return arr

    def _columns_to_struct(self, cols: list[Any]) -> pa.StructArray:
        arrays = [
            self._conform(c, hive, f.type)
            for c, (_, hive), f in zip(cols, self.schema.columns, self._row_type, strict=True)
        ]
        return pa.StructArray.from_arrays(arrays, fields=list(self._row_type))

    def _rows_to_struct(self, rows: Iterable[Sequence[Any]]) -> pa.StructArray:
        rows = rows if isinstance(rows, list) else list(rows)
        try:
            # One C++ pass over the Python tuples: several times faster than transposing.
            arr = pa.array(rows, type=self._row_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as e:
            raise SerializationError(f"row values do not fit the table's types: {e}") from e
        if not any(h.kind in ("char", "varchar") for _, h in self.schema.columns):
            return arr
        return self._columns_to_struct(list(arr.flatten()))

    def _write_arrow_inserts(self, write_id: int, start_rowid: int, rows: pa.StructArray) -> int:
        n = len(rows)
        if n:
            self._write_events(
                INSERT_OP,
                np.full(n, write_id, np.int64),
                np.full(n, self.bucket_property, np.int32),
                np.arange(start_rowid, start_rowid + n, dtype=np.int64),
                write_id,
                rows,
            )
        return n

    def _write_events(
        self, op: int, owid: Any, bucket: Any, rowid: Any, cwid: int, rows: pa.Array
    ) -> None:
        n = len(rows)
        table = pa.Table.from_arrays(
            [
                pa.array(np.full(n, op, np.int32)),
                pa.array(owid, pa.int64()),
                pa.array(bucket, pa.int32()),
                pa.array(rowid, pa.int64()),
                pa.array(np.full(n, cwid, np.int64)),
                rows,
            ],
            names=list(_EVENT_NAMES),
        )
        if self._arrow is None and self._stitch is not None:
            # A new piece: its stripes stream to the file as pyarrow cuts them.
            self._piece = _PieceCapture(self._raw, first=self._stitch.position == 0)
            self._arrow = pa_orc.ORCWriter(self._piece, **self.options.arrow_kwargs())
        writer: Any = self._arrow
        writer.write(table)

    def delete(self, write_id: int, keys: Sequence[tuple[int, int, int]]) -> int:
        """Append delete events ``(originalTransaction, bucket, rowId)`` made by ``write_id``.

        Keys must be sorted and belong to this file's writer id (Hive checks
        ``decodeWriterId(bucket) == N`` of ``bucket_N``).
        """
        if self.kind != "delete":
            raise ConfigError("delete events go to a delete delta")
        self._check_open()
        keys = list(keys)
        prev: tuple[int, int, int] | None = None
        for k in keys:
            if bucket_codec.decode_writer_id(k[1]) != self.bucket_id:
                raise AcidFormatError(
                    f"delete event {k} has writer id {bucket_codec.decode_writer_id(k[1])}, "
                    f"but this is bucket {self.bucket_id}"
                )
            if prev is not None and k <= prev:
                raise ConfigError("delete keys must be strictly increasing by ROW__ID")
            prev = k
        if self._segments and prev is not None:
            last = self._segments[-1].key_at(self._rows - 1)
            if keys[0] <= last:
                raise ConfigError("delete keys must continue in ROW__ID order")
        if self._columnar:
            n = len(keys)
            if n:
                karr = np.asarray(keys, dtype=np.int64).reshape(n, 3)
                self._write_events(
                    DELETE_OP,
                    karr[:, 0],
                    karr[:, 1].astype(np.int32),
                    karr[:, 2],
                    write_id,
                    pa.nulls(n, self._row_type),
                )
        else:
            events = ((DELETE_OP, o, b, r, write_id, None) for (o, b, r) in keys)
            n = self._orc.writerows(events)
        if n:
            self._add_segment(_Segment(self._rows, n, 0, 0, 0, keys=keys))
        return n

    # ------------------------------------------------------------------ footers
    def _physical(self, logical: int) -> int:
        i = bisect.bisect_right(self._shifts, (logical, float("inf"))) - 1
        return logical + self._shifts[i][1]

    def _key_index(self, stripe_rows: list[int]) -> bytes:
        parts = []
        end = 0
        for n in stripe_rows:
            end += n
            i = end - 1
            seg = self._segments[bisect.bisect_right(self._starts, i) - 1]
            o, b, r = seg.key_at(i)
            parts.append(f"{o},{b},{r};")
        return "".join(parts).encode()

    def _metadata(self, stripe_rows: list[int]) -> dict[str, bytes]:
        total = sum(stripe_rows)
        ins, dels = (0, total) if self.kind == "delete" else (total, 0)
        # Keys in the order of ORC Java's TreeMap, as Hive's footers have them.
        return {
            KEY_INDEX: self._key_index(stripe_rows),
            ACID_STATS: f"{ins},0,{dels}".encode(),
            ACID_VERSION_KEY: str(layout.ACID_VERSION).encode(),
        }

    def _finish_tail(self, logical_end: int) -> int:
        held = bytes(self._capture.held)
        self._capture.held.clear()
        if not held:
            return self._physical(logical_end)
        tail = parse_tail(held)
        new_tail = rewrite_tail(
            tail,
            metadata=self._metadata(tail.stripe_rows),
            physical_offset=self._physical,
            types=self._types,
        )
        self._raw.write(held[: len(held) - tail.tail_length])
        self._raw.write(new_tail)
        shift = self._shifts[-1][1] + len(new_tail) - tail.tail_length
        self._shifts.append((logical_end, shift))
        return logical_end + shift

    def flush(self) -> int:
        """Write an intermediate footer covering every row so far, make it durable and
        record its length in the side file. Returns that length (Hive's ``flush``)."""
        self._check_open()
        if not self.streaming:
            raise ConfigError("flush() needs a streaming writer (streaming=True)")
        if self._stitch is not None:
            length = self._seal_piece()
        else:
            self._capture.holding = True
            try:
                logical = self._orc.write_intermediate_footer()
            finally:
                self._capture.holding = False
            length = self._finish_tail(logical) if self._rows else 0
        self.storage.durable_flush(self._raw)
        if self._side is not None:
            self._side.write(encode_flush_length(length))
            self.storage.durable_flush(self._side)
        self._last_flush = length
        self.flush_lengths.append(length)
        return length

    def _seal_piece(self) -> int:
        """Stitched streaming: finish the piece of rows since the last flush (its last
        stripe) and write a tail covering the whole file. Returns the file's length."""
        assert self._stitch is not None
        if self._arrow is not None and self._piece is not None:
            piece = self._piece
            piece.holding = True  # the last stripe and the piece's own tail
            self._arrow.close()
            self._arrow = self._piece = None
            held = bytes(piece.held)
            tail = parse_tail(held)
            self._raw.write(held[: len(held) - tail.tail_length])
            body = piece.passed + len(held) - tail.tail_length
            # The stitcher's position has not moved since the piece began.
            start = self._stitch.next_body_start
            self._stitch.add_piece(tail, body_start=start, body_length=body)
            self._raw.write(
                self._stitch.tail(
                    metadata=self._metadata(self._stitch.stripe_rows), types=self._types
                )
            )
        # No new rows: the file already ends with a tail that covers everything.
        return self._stitch.position

    def close(self) -> None:
        """Final footer, durable close, side file deleted. An insert or delete file with
        no events is deleted, as Hive does (a base is kept, even empty)."""
        if self._closed:
            return
        self._closed = True
        if self._stitch is not None:
            self._seal_piece()
            self._finish_file()
            return
        self._capture.holding = True
        try:
            if self._arrow is not None:
                if self._rows == 0:
                    # pyarrow creates the ORC writer on the first write: give it the schema.
                    empty = pa.array([], self._row_type)
                    self._write_events(INSERT_OP, [], [], [], 0, empty)
                self._arrow.close()
            else:
                self._orc.close()
        finally:
            self._capture.holding = False
        self._finish_tail(self._capture.logical)
        self._finish_file()

    def _finish_file(self) -> None:
        self.storage.durable_flush(self._raw)
        self._raw.close()
        if self._side is not None:
            self._side.close()
            self.storage.delete(layout.side_file_name(self.path))
        if self._rows == 0 and self.kind != "base":
            self.storage.delete(self.path)

    def abort(self) -> None:
        """Give up the file. Without a side file it is deleted (one txn, nobody committed);
        with one, other txns of the batch may have committed, so it is closed normally
        and the aborted rows stay hidden by their write id."""
        if self._closed:
            return
        if self._side is not None:
            self.close()
            return
        self._closed = True
        # Close the ORC writer into the void: its destructor must not write to a closed file.
        sink = self._piece if self._stitch is not None else self._capture
        try:
            if sink is not None:
                sink.holding = True
            if self._stitch is None and self._arrow is not None and self._rows == 0:
                # pyarrow creates its ORC writer on the first write: give it the schema.
                self._write_events(INSERT_OP, [], [], [], 0, pa.array([], self._row_type))
            if self._arrow is not None:
                self._arrow.close()
            elif self._orc is not None:
                self._orc.close()
        except Exception as e:  # the file is being thrown away; say why, do not mask the caller's
            log.debug("closing aborted writer of %s: %s", self.path, e)
        finally:
            self._arrow = self._piece = None
            self._capture.held.clear()
            self._raw.close()
            self.storage.delete(self.path)

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigError(f"writer for {self.path} is closed")

    def __enter__(self) -> AcidFileWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


# ---------------------------------------------------------------------- helpers
def _engine_for(rows: object) -> Engine:
    # Columnar input goes to pyarrow; row tuples are cheaper to hand to pyorc than to transpose.
    return "arrow" if isinstance(rows, pa.Table) else "pyorc"


def _storage_and_dir(table_dir: str, storage: Storage | None) -> tuple[Storage, str]:
    if storage is not None:
        return storage, table_dir
    return Storage.for_path(table_dir)


def _write_inserts(
    st: Storage,
    path: str,
    schema: TableSchema,
    write_id: int,
    rows: Iterable[Sequence[Any]] | pa.Table,
    *,
    kind: FileKind,
    bucket_id: int,
    statement_id: int,
    options: OrcWriterOptions | None,
) -> str:
    with AcidFileWriter(
        st,
        path,
        schema,
        kind=kind,
        bucket_id=bucket_id,
        statement_id=statement_id,
        options=options,
        engine=_engine_for(rows),
    ) as w:
        if isinstance(rows, pa.Table):
            w.insert_arrow(write_id, rows)
        else:
            w.insert(write_id, rows)
    return path


def write_delta(
    table_dir: str,
    schema: TableSchema,
    write_id: int,
    rows: Iterable[Sequence[Any]] | pa.Table,
    *,
    bucket_id: int = 0,
    statement_id: int = 0,
    storage: Storage | None = None,
    options: OrcWriterOptions | None = None,
) -> str:
    """Write one insert delta ``delta_w_w[_stmt]/bucket_N`` for one write id; returns its path."""
    st, root = _storage_and_dir(table_dir, storage)
    d = layout.delta_dir_name(write_id, write_id, statement_id=statement_id)
    path = st.join(root, d, layout.bucket_file_name(bucket_id))
    return _write_inserts(
        st, path, schema, write_id, rows,
        kind="insert", bucket_id=bucket_id, statement_id=statement_id, options=options,
    )  # fmt: skip


def write_delete_delta(
    table_dir: str,
    schema: TableSchema,
    write_id: int,
    keys: Iterable[tuple[int, int, int]],
    *,
    statement_id: int = 0,
    storage: Storage | None = None,
    options: OrcWriterOptions | None = None,
) -> list[str]:
    """Write split-update delete events ``(originalTransaction, bucket, rowId)`` made by
    ``write_id`` into ``delete_delta_w_w[_stmt]/bucket_N``, one file per writer id of the
    deleted rows, each sorted by ROW__ID. Returns the paths written."""
    st, root = _storage_and_dir(table_dir, storage)
    by_writer: dict[int, list[tuple[int, int, int]]] = {}
    for k in keys:
        by_writer.setdefault(bucket_codec.decode_writer_id(k[1]), []).append(
            (int(k[0]), int(k[1]), int(k[2]))
        )
    d = layout.delta_dir_name(write_id, write_id, statement_id=statement_id, delete=True)
    paths = []
    for writer_id in sorted(by_writer):
        ks = sorted(set(by_writer[writer_id]))
        path = st.join(root, d, layout.bucket_file_name(writer_id))
        with AcidFileWriter(
            st,
            path,
            schema,
            kind="delete",
            bucket_id=writer_id,
            statement_id=statement_id,
            options=options,
        ) as w:
            w.delete(write_id, ks)
        paths.append(path)
    return paths


def write_base(
    table_dir: str,
    schema: TableSchema,
    write_id: int,
    rows: Iterable[Sequence[Any]] | pa.Table,
    *,
    bucket_id: int = 0,
    visibility_txn_id: int = 0,
    storage: Storage | None = None,
    options: OrcWriterOptions | None = None,
) -> str:
    """Write ``base_w[_vT]/bucket_N`` holding ``rows`` as inserts of ``write_id``
    (an INSERT OVERWRITE base); returns its path."""
    st, root = _storage_and_dir(table_dir, storage)
    d = layout.base_dir_name(write_id, visibility_txn_id=visibility_txn_id)
    path = st.join(root, d, layout.bucket_file_name(bucket_id))
    return _write_inserts(
        st, path, schema, write_id, rows,
        kind="base", bucket_id=bucket_id, statement_id=-1, options=options,
    )  # fmt: skip
