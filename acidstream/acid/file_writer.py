"""ACID ORC file writer: Hive's ``OrcRecordUpdater`` on pyorc or pyarrow.

One ``AcidFileWriter`` writes one bucket file of a base, delta or delete delta:
the exact event schema, rows in ROW__ID order with rowIds restarting at 0 per
write id, and in every footer (intermediate ones included) exactly one
``hive.acid.key.index`` entry per stripe plus ``hive.acid.stats`` and
``hive.acid.version``. Streaming files that hold several write ids get an
intermediate footer per commit and the ``_flush_length`` side file.

Two pyorc facts shape this module (see ``docs/writing.md``): rows buffered in
pyorc's batch are not covered by an intermediate footer, so files that take
intermediate footers use ``batch_size=1``; and pyorc appends user metadata
instead of replacing it, so every tail is rewritten by ``acidstream.acid.orc_tail`` as it
is written.

The arrow engine writes every valid Hive value: batches pyarrow would get wrong
(timestamps before 1970 with a fraction of a second, which pyarrow stores with
negative nanoseconds that ORC Java refuses; nanosecond input with sub-microsecond
digits) go to a "piece" written by pyorc from exact (seconds, nanos) pairs, and the
file's pieces are stitched into one (``acidstream.acid.orc_stitch``). Other batches keep the
columnar fast path. The piece methods live in ``acidstream.acid.file_pieces``.

Durability (``acidstream.acid.durability``): each durable point (a flush's footer, the
final footer) syncs the file (``fsync``) or hands it to the OS (``flush``);
:func:`sync_data_of` and :func:`record_footers` do it for a commit's files together.
"""

from __future__ import annotations

import bisect
import functools
import logging
from collections.abc import Iterable, Sequence
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import count, repeat
from typing import IO, Any, BinaryIO, ClassVar, Literal, cast
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as pa_orc
import pyorc

from acidstream.acid import bucket_codec, faults, layout
from acidstream.acid.durability import Durability
from acidstream.acid.errors import AcidFormatError, ConfigError, SerializationError
from acidstream.acid.file_pieces import StitchedPieces
from acidstream.acid.group_sync import DeltaMarker, flush_files
from acidstream.acid.orc_capture import PieceCapture, TailCapture
from acidstream.acid.orc_events import InsertRun
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.orc_stitch import StripeStitcher
from acidstream.acid.orc_tail import parse_tail, rewrite_tail
from acidstream.acid.orc_types import event_type_messages
from acidstream.acid.parallel_encode import parallel_slices
from acidstream.acid.row_keys import KeyColumns, RowIdSequence, Segment, int_column
from acidstream.acid.schema import HiveType, TableSchema, with_null_struct_children
from acidstream.acid.side_file import encode_flush_length
from acidstream.acid.storage import Storage
from acidstream.acid.thread_pools import SharedPool
from acidstream.acid.timestamps import (
    HiveTimestampConverter,
    has_pre_epoch_fraction,
    with_timestamp_unit,
)

__all__ = [
    "ACID_STATS",
    "ACID_VERSION_KEY",
    "DELETE_OP",
    "INSERT_OP",
    "KEY_INDEX",
    "UPDATE_OP",
    "AcidFileWriter",
    "Engine",
    "FileKind",
    "record_footers",
    "sync_data_of",
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
_EVENT_TYPES = (pa.int32(), pa.int64(), pa.int32(), pa.int64(), pa.int64())


class AcidFileWriter(StitchedPieces):
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
            stream into the file and whose tail is replaced (``acidstream.acid.orc_stitch``).
        side_file: keep the ``_flush_length`` side file (transaction batches of more
            than one txn); requires ``streaming``.
        options: base ORC settings; deltas derive theirs.
        row_ids: the rowId numbering shared with the other files of this bucket in the
            same delta (list-bucketing directories); default: the file's own.
        engine: ``pyorc`` (row tuples) or ``arrow`` (columnar pyarrow writer, about
            twice as fast; footers get Hive's exact types back in the tail rewrite;
            batches pyarrow would get wrong, such as pre-1970 timestamps with a
            fraction, go to exact pyorc-written pieces of a stitched file).
            ``auto`` picks ``arrow`` unless the file is streaming.
        durability: ``fsync`` (each durable point waits for the disk) or ``flush``
            (hands the bytes to the OS only: Hive's hflush; ``acidstream.acid.durability``).
    """

    #: Streaming pieces of inserts let pyarrow encode only the rows and splice the event
    #: columns in (``acidstream.acid.orc_events``). False encodes them with pyarrow too: the same
    #: bytes, slower; tests compare the two.
    splice_events: ClassVar[bool] = True

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
        row_ids: RowIdSequence | None = None,
        durability: Durability = "fsync",
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
        self.sync = durability == "fsync"
        base = options or OrcWriterOptions()
        # What follows from the table and the options only, worked out once per table
        # (a streaming writer at batch 1 opens a file per commit).
        setup = _file_setup(schema, base, kind, streaming)
        self.options = setup.options
        # Bloom filters of the table's columns (orc.bloom.filter.columns) on files that
        # carry rows; a delete event's row is null, so its files get none; and of a
        # spliced piece, whose file pyarrow writes holds the rows only (the event columns
        # are spliced in and the ids renumbered: acid.orc_events). Shared: read only.
        self._bloom = setup.bloom
        self._bloom_rows = setup.bloom_rows
        directory = path.rsplit("/", 1)[0]
        marker = storage.join(directory, layout.ACID_FORMAT_FILE)
        self._marker: DeltaMarker
        self._raw: IO[bytes]
        self._opening: Future[tuple[DeltaMarker, IO[bytes]]] | None = None
        self._marker_sync: Future[None] | None = None
        if side_file or storage.local_path(path) is None:
            self._marker, self._raw = _create_files(storage, directory, marker, path)
        else:
            # A local file without a side file (a batch-1 commit makes a new delta every
            # time): its directory, the delta's marker and the file itself are made on a
            # creating thread while this one encodes the rows. On ext4 they are 0.3-0.5
            # ms of the filesystem's work per commit. Every use of the file waits for
            # them (``_await_files``); the syncs come after, as before.
            self._opening = Future()
            self._marker_sync = _create_pool.get().submit(
                self._create_ahead, self._opening, storage, directory, marker, path
            )
            self._raw = cast(IO[bytes], _OpeningFile(self._opening))
        self._side: IO[bytes] | None = None
        if side_file:
            self._side = storage.create(layout.side_file_name(path))
            self._side.write(encode_flush_length(0))
            # To the OS only: the first record_footer syncs this entry with its own, and
            # nothing in the file commits before that.
            storage.durable_flush(self._side, sync=False)
        self._capture = TailCapture(self._raw)
        self.engine = engine
        self._orc: Any = None
        self._arrow: Any = None
        self._columnar = engine == "arrow"
        # The compression block a stitched file declares (its pieces' encoders may use a
        # larger one when it is uncompressed: OrcWriterOptions.arrow_encode_kwargs).
        self._declared_block_size: int = self.options.arrow_kwargs()["compression_block_size"]
        # Stitched files (streaming on the arrow engine, or any arrow-engine file once a
        # batch needs the exact path): each run of rows written by one encoder is a
        # "piece"; a flush ends the current one.
        self._stitch: StripeStitcher | None = None
        self._piece: PieceCapture | None = None  # the sink of the current exact piece
        self._native: pa.BufferOutputStream | None = None  # ... of the current arrow piece
        # The insert runs of the current arrow piece when pyarrow encodes only its rows.
        self._piece_runs: list[InsertRun] | None = None
        self._piece_bytes = 0
        self._exact: Any = None  # the pyorc writer of the current exact piece
        self._tail_end = 0  # stitched file length after its last tail
        if engine == "pyorc":
            self._await_files()  # (pyorc writes to it now: an error must be ours, not its)
            self._orc = pyorc.Writer(
                cast(BinaryIO, self._capture),
                schema.orc_event_schema(),
                # Hive 3+ reads ORC timestamps as UTC wall-clock values (LocalDateTime semantics).
                timezone=_UTC,
                # Exact seconds/nanos for Hive's whole range, naive values as UTC wall clock.
                converters={pyorc.TypeKind.TIMESTAMP: HiveTimestampConverter},
                **self.options.pyorc_kwargs(batch_size=1 if streaming else None),
                **self._bloom,
            )
        else:
            if streaming:
                self._stitch = StripeStitcher(declared_block_size=self._declared_block_size)
            # Otherwise the encoder is made by the first write (_direct_writer), unless
            # that write is of inserts: the file is then stitched (_write_arrow_inserts).
            self._row_type = setup.row_type
        self._has_timestamps = setup.has_timestamps
        self._has_structs = setup.has_structs
        self._segments: list[Segment] = []
        self._starts: list[int] = []
        self._rows = 0
        self._last_write_id = -1
        self._row_ids = row_ids if row_ids is not None else RowIdSequence()
        self._shifts: list[tuple[int, int]] = [(0, 0)]
        self._last_flush = 0
        self._closed = False
        self._finished = False  # closed for good (final footer durable, or abandoned)
        self.flush_lengths: list[int] = []
        # pyarrow writes char/varchar as string: restore Hive's exact types in the footer.
        self._types = event_type_messages(schema) if engine == "arrow" else None

    # ------------------------------------------------------------------ writing
    @property
    def rows_written(self) -> int:
        return self._rows

    def _add_segment(self, seg: Segment) -> None:
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
        self._last_write_id = write_id
        return self._row_ids.start(write_id)

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
                    self._add_segment(Segment(self._rows, n, write_id, b, start_rowid))
                    self._row_ids.advance(write_id, n)
                raise SerializationError(
                    f"row {n} of this write does not fit the table's types: {e}"
                ) from e
        if n:
            self._add_segment(Segment(self._rows, n, write_id, b, start_rowid))
            self._row_ids.advance(write_id, n)
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
            self._add_segment(Segment(self._rows, n, write_id, self.bucket_property, start))
            self._row_ids.advance(write_id, n)
        return n

    def write_events(
        self,
        op: int | Any,
        original_write_ids: Any,
        buckets: Any,
        row_ids: Any,
        current_write_ids: int | Any,
        rows: pa.Array | pa.ChunkedArray | None,
    ) -> int:
        """Append whole ACID events, keeping the ROW__IDs given (compaction and other
        rewrites, which must not renumber rows). Arrow engine only.

        Args:
            op: the ``operation`` of every event (``INSERT_OP``, ``DELETE_OP``...), or
                one per event.
            original_write_ids, buckets, row_ids: the ROW__ID of each event (Arrow
                arrays or numpy arrays; ``buckets`` is the encoded bucket property).
                Events must be in ROW__ID order, continuing this file's.
            current_write_ids: the ``currentTransaction`` of every event, or one per event.
            rows: the table's row struct (columns matched by position, converted as
                :meth:`insert_arrow` does), or ``None`` for delete events (null rows).

        Returns the number of events written. Do not mix with :meth:`insert` or
        :meth:`delete` in one file (their rowId numbering does not see these events).
        """
        self._check_open()
        if not self._columnar:
            raise ConfigError("write_events needs the arrow engine")
        o = int_column(original_write_ids, np.int64)
        b = int_column(buckets, np.int32)
        r = int_column(row_ids, np.int64)
        n = len(o)
        if not len(b) == len(r) == n:
            raise ConfigError("original_write_ids, buckets and row_ids differ in length")
        if n == 0:
            return 0
        c = int_column(current_write_ids, np.int64, n)
        ops = int_column(op, np.int32, n)
        if len(c) != n or len(ops) != n:
            raise ConfigError("op and current_write_ids must be one value or one per event")
        keys = KeyColumns(o, b, r)
        if not keys.is_sorted() or (self._segments and keys[0] < self._last_key()):
            raise ConfigError("events must be in ROW__ID order, continuing the file's")
        if rows is None:
            struct = pa.nulls(n, self._row_type)
        else:
            struct = self._conform_rows(rows)
            if len(struct) != n:
                raise ConfigError(f"{len(struct)} rows for {n} events")
        self._write_events(ops, o, b, r, c, struct)
        self._add_segment(Segment(self._rows, n, 0, 0, 0, keys=keys))
        return n

    def _last_key(self) -> tuple[int, int, int]:
        return self._segments[-1].key_at(self._rows - 1)

    # ------------------------------------------------------------ arrow engine
    def _conform_rows(self, rows: pa.Array | pa.ChunkedArray) -> pa.StructArray:
        arr = rows.combine_chunks() if isinstance(rows, pa.ChunkedArray) else rows
        if arr.type.equals(self._row_type):
            return arr
        if not pa.types.is_struct(arr.type) or arr.type.num_fields != len(self.schema.columns):
            raise ConfigError(f"rows of type {arr.type} do not match the table's columns")
        out = self._columns_to_struct(list(arr.flatten()))
        if arr.null_count:
            out = pa.StructArray.from_arrays(
                out.flatten(), fields=list(out.type), mask=arr.is_null()
            )
        return out

    def _conform(
        self, col: pa.Array | pa.ChunkedArray, hive: HiveType, target: pa.DataType
    ) -> pa.Array:
        if isinstance(col, pa.ChunkedArray):
            arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        else:
            arr = col
        if not arr.type.equals(target):
            try:
                arr = arr.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                if with_timestamp_unit(arr.type, "us").equals(with_timestamp_unit(target, "us")):
                    # Timestamps finer than the target (nanoseconds with sub-microsecond
                    # digits) keep their unit: the exact path writes them to the nanosecond.
                    return arr
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
        fields = [f.with_type(a.type) for f, a in zip(self._row_type, arrays, strict=True)]
        return pa.StructArray.from_arrays(arrays, fields=fields)

    def _rows_to_struct(self, rows: Iterable[Sequence[Any]]) -> pa.StructArray:
        # One C++ pass over the Python tuples: several times faster than transposing.
        arr = self.schema.rows_to_arrow(rows if isinstance(rows, list) else list(rows))
        if not any(h.kind in ("char", "varchar") for _, h in self.schema.columns):
            return arr
        return self._columns_to_struct(list(arr.flatten()))

    def _write_arrow_inserts(self, write_id: int, start_rowid: int, rows: pa.StructArray) -> int:
        n = len(rows)
        slices = [(0, n)]
        if n and self.splice_events:
            slices = parallel_slices(n, rows.nbytes, self.options.stripe_size)
        # A file whose first write is of inserts is stitched too: pyarrow encodes only
        # the rows and the five event columns are spliced in. Fewer streams, so less of
        # the encoder's fixed cost per stream (zlib's deflateReset clears 64 KiB each
        # time), which a small commit pays in full: about 8% of its instructions.
        fresh = self._stitch is None and self._arrow is None and self.kind == "insert"
        if n and (self._stitch is not None or len(slices) > 1 or fresh) and self.splice_events:
            rows = self._cleared_null_structs(rows)
            if not (self._has_timestamps and self._needs_exact(rows)):
                # Only the rows go through pyarrow; the event columns are spliced in.
                if self._stitch is None:
                    self._begin_stitching()  # a big write: its slices become pieces
                if self._exact is not None:
                    self._end_piece()
                run = InsertRun(write_id, start_rowid, n)
                table = pa.Table.from_arrays([rows], names=["row"])
                if len(slices) > 1:
                    self._write_parallel_pieces(table, run, slices)
                else:
                    self._write_arrow_piece(table, run)
                return n
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
        self, op: Any, owid: Any, bucket: Any, rowid: Any, cwid: Any, rows: pa.Array
    ) -> None:
        n = len(rows)
        if self._columnar:
            rows = self._cleared_null_structs(rows)
        table = pa.Table.from_arrays(
            [
                pa.array(np.full(n, op, np.int32) if isinstance(op, int) else op, pa.int32()),
                pa.array(owid, pa.int64()),
                pa.array(bucket, pa.int32()),
                pa.array(rowid, pa.int64()),
                pa.array(np.full(n, cwid, np.int64) if isinstance(cwid, int) else cwid, pa.int64()),
                rows,
            ],
            names=list(_EVENT_NAMES),
        )
        if self._has_timestamps and n and self._needs_exact(rows):
            self._write_exact(table)
            return
        if self._stitch is not None:
            if self._exact is not None:
                self._end_piece()
            self._write_arrow_piece(table, None)
            return
        self._direct_writer().write(table)

    def _direct_writer(self) -> Any:
        """The pyarrow encoder of an arrow-engine file that is not stitched, made on
        first use."""
        if self._arrow is None:
            # pyarrow writes through the capture into the file: a creation error raised
            # inside its writes would come back wrapped with a Python traceback in its
            # text, so the file must exist first (the stitched pieces write from here).
            self._await_files()
            self._arrow = pa_orc.ORCWriter(
                self._capture, **self.options.arrow_kwargs(), **self._bloom
            )
        return self._arrow

    def _cleared_null_structs(self, rows: pa.Array) -> pa.Array:
        """``rows`` with the children of NULL structs NULL too: pyarrow would write them
        as values (``acidstream.acid.schema``). The same array when there is nothing to clear."""
        if self._has_structs and rows.null_count != len(rows):
            return with_null_struct_children(rows)
        return rows

    def _needs_exact(self, rows: pa.Array) -> bool:
        """Whether pyarrow would write some timestamp of ``rows`` wrongly: before 1970
        with a fraction (pyarrow's negative nanoseconds, which ORC Java refuses), or
        kept at a finer unit than the fast path's (sub-microsecond digits)."""
        if rows.null_count == len(rows):
            return False
        return not rows.type.equals(self._row_type) or has_pre_epoch_fraction(rows)

    @staticmethod
    def _empty_events(rows: pa.Array) -> pa.Table:
        return pa.Table.from_arrays(
            [pa.array([], t) for t in _EVENT_TYPES] + [rows], names=list(_EVENT_NAMES)
        )

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
            self._add_segment(Segment(self._rows, n, 0, 0, 0, keys=keys))
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
        return self.sync_footer(self.write_footer())

    def write_footer(self) -> int:
        """The first half of :meth:`flush`: write an intermediate footer covering every
        row so far (not yet durable). Returns the file's length with it."""
        self._check_open()
        if not self.streaming:
            raise ConfigError("flush() needs a streaming writer (streaming=True)")
        if self._stitch is not None:
            return self._seal_piece()
        self._capture.holding = True
        try:
            logical = self._orc.write_intermediate_footer()
        finally:
            self._capture.holding = False
        return self._finish_tail(logical) if self._rows else 0

    def sync_footer(self, length: int) -> int:
        """The second half of :meth:`flush`: :meth:`sync_data`, then
        :meth:`record_footer`. Returns ``length``."""
        self.sync_data()
        return self.record_footer(length)

    def sync_data(self) -> None:
        """Make the file durable up to its last footer (``fdatasync``; with durability
        ``flush``, handed to the OS), with the delta's marker on the first call. May run
        on another thread while the writer's owner waits for it and does not touch the
        writer. :func:`sync_data_of` does this for several files at once."""
        sync_data_of([self])

    def sync_handles(self) -> list[IO[bytes]]:
        """The files :meth:`sync_data` makes durable: the data file, and the delta's
        marker until its first sync."""
        raw = self._await_files()
        if self._marker_sync is not None:
            self._marker_sync.result()  # (its failure fails the commit)
            self._marker_sync = None
        return [raw, *self._marker.pending()]

    def _create_ahead(
        self,
        files: Future[tuple[DeltaMarker, IO[bytes]]],
        storage: Storage,
        directory: str,
        marker: str,
        path: str,
    ) -> None:
        """The creating thread's work: the files (``files``), then, with durability fsync,
        the delta's marker made durable while the rows encode, so that the commit's
        sync is the data file's alone (no second thread to hand the marker to)."""
        try:
            m, raw = _create_files(storage, directory, marker, path)
        except BaseException as e:
            files.set_exception(e)
            return
        files.set_result((m, raw))
        pending = m.pending() if self.sync else []
        for f in pending:
            storage.durable_flush(f)
        if pending:
            m.synced(durable=True)

    def _await_files(self) -> IO[bytes]:
        """The data file, once the creating thread made it (and the delta's directory
        and marker); raises the creation's error (on every call)."""
        opening = self._opening
        if opening is not None:
            self._marker, self._raw = opening.result()
            self._opening = None
        return self._raw

    def _created(self) -> bool:
        """Whether the files were created (waiting for the creating thread). False: the
        creation failed, and nothing at this path is the writer's to close or delete
        (a file that existed is another writer's)."""
        if self._marker_sync is not None:
            futures.wait([self._marker_sync])  # nothing may touch the marker after this
        try:
            self._await_files()
        except Exception:
            return False
        return True

    def data_synced(self) -> None:
        """The sync of :meth:`sync_handles` ended well (the marker is done with)."""
        self._marker.synced(durable=self.sync)

    def record_footer(self, length: int) -> int:
        """Record ``length`` (from :meth:`write_footer`) in the side file, durably; only
        after :meth:`sync_data` returned, so the side file never points past durable
        bytes. Returns ``length``. :func:`record_footers` does this for several files."""
        record_footers([(self, length)])
        return length

    def _write_side(self, length: int) -> IO[bytes] | None:
        """The first half of :meth:`record_footer`: the side-file entry, not yet durable."""
        faults.point("file.after_footer")  # the footer is durable, its length not yet recorded
        if self._side is not None:
            self._side.write(encode_flush_length(length))
        return self._side

    def _side_recorded(self, length: int) -> None:
        self._last_flush = length
        self.flush_lengths.append(length)

    def _seal_piece(self) -> int:
        """Stitched file: finish the current piece (its last stripe) and write a tail
        covering the whole file. Returns the file's length."""
        assert self._stitch is not None
        self._end_piece()
        if self._stitch.position != self._tail_end:
            self._raw.write(
                self._stitch.tail(
                    metadata=self._metadata(self._stitch.stripe_rows), types=self._types
                )
            )
            self._tail_end = self._stitch.position
        # No new rows: the file already ends with a tail that covers everything.
        return self._stitch.position

    def close(self) -> None:
        """Final footer, durable close, side file deleted. An insert or delete file with
        no events is deleted, as Hive does (a base is kept, even empty).

        The side file is deleted only once the final footer is durable: if any step
        fails (full disk, I/O error), the writer is left failed, the side file still
        points at the last flushed footer, and :meth:`abandon` cuts the file back to it.
        """
        if self._closed:
            return
        self.end()
        self.sync_data()
        self.finish()

    def end(self) -> None:
        """The first part of :meth:`close`: the final footer, not yet durable (then
        :meth:`sync_data` and :meth:`finish`; ``TableWriter`` syncs its files at once)."""
        self._closed = True  # whatever happens below, only abandon() is left
        if self._stitch is not None:
            self._seal_piece()
        else:
            self._capture.holding = True
            try:
                if self._columnar:
                    writer = self._direct_writer()
                    if self._rows == 0:
                        # pyarrow creates the ORC writer on the first write: give it the schema.
                        writer.write(self._empty_events(pa.array([], self._row_type)))
                    writer.close()
                else:
                    self._orc.close()
            finally:
                self._capture.holding = False
            self._finish_tail(self._capture.logical)

    def finish(self) -> None:
        """The last part of :meth:`close`, once the final footer is durable
        (:meth:`sync_data`): close the file, delete the side file (and the file, if it
        holds no events and is not a base)."""
        self._raw.close()
        if self._side is not None:
            self._side.close()
            self.storage.delete(layout.side_file_name(self.path))
        if self._rows == 0 and self.kind != "base":
            self.storage.delete(self.path)
        self._finished = True

    def _drop_encoder(self) -> None:
        """Close the ORC encoder into the void: nothing more reaches the file (and its
        destructor must not write to a closed file)."""
        sink = self._piece if self._stitch is not None else self._capture
        try:
            if sink is not None:
                sink.holding = True
            if self._stitch is None and self._arrow is not None and self._rows == 0:
                # pyarrow creates its ORC writer on the first write: give it the schema.
                self._arrow.write(self._empty_events(pa.array([], self._row_type)))
            if self._arrow is not None:
                self._arrow.close()
            elif self._exact is not None:
                self._exact.close()
            elif self._orc is not None:
                self._orc.close()
        except Exception as e:  # the rest is being thrown away; say why, do not mask the caller's
            log.debug("closing the encoder of %s: %s", self.path, e)
        finally:
            self._arrow = self._piece = self._exact = self._native = None
            self._piece_runs = None
            self._capture.held.clear()

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
        self._drop_encoder()
        if not self._created():
            return
        self._marker.close()
        # discard, not close: on an object store closing would publish the partial object
        # (its upload is aborted instead); elsewhere it is a close.
        self.storage.discard(self._raw)
        self.storage.delete(self.path)

    def abandon(self) -> None:
        """Stop after a failure (e.g. a full disk) without writing anything more.

        The file is left as readable as at its last successful flush: cut back to that
        length (it ends with that flush's intermediate footer), and the side file that
        points at it is kept, as for any writer that died (readers honour it; ``acidstream
        repair`` finishes the file). A file never flushed held nothing committed: it is
        deleted, with its side file.
        """
        if self._finished:
            return
        self._closed = True
        self._drop_encoder()
        if not self._created():
            self._finished = True
            return
        self._marker.close()
        for f in (self._raw, self._side):
            if f is not None:
                # A close that fails too (the disk that failed) is logged by discard; on an
                # object store the upload is aborted rather than published half-written.
                self.storage.discard(f)
        side = layout.side_file_name(self.path)
        try:
            if self._last_flush > 0:
                self.storage.truncate(self.path, self._last_flush)
            else:
                self.storage.delete(self.path)
                if self._side is not None:
                    self.storage.delete(side)
        except OSError as e:
            log.warning("leaving %s as it is after a failure: %s", self.path, e)
        self._finished = True

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


# The creating threads of local files (``AcidFileWriter._opening``).
_create_pool = SharedPool("acidstream-create", 4)


def _create_files(
    storage: Storage, directory: str, marker: str, path: str
) -> tuple[DeltaMarker, IO[bytes]]:
    """A new file's directory, its delta's format marker (made durable with the file's
    first sync) and the file, in that order."""
    storage.makedirs(directory)
    m = DeltaMarker(storage, marker, str(layout.ACID_VERSION).encode())
    try:
        return m, storage.create(path)
    except BaseException:
        m.close()
        raise


class _OpeningFile:
    """Stands for a writer's data file while the creating thread makes it: every use
    waits for the creation and raises its error."""

    __slots__ = ("_opening",)

    def __init__(self, opening: Future[tuple[DeltaMarker, IO[bytes]]]) -> None:
        self._opening = opening

    def __getattr__(self, name: str) -> Any:
        return getattr(self._opening.result()[1], name)


@dataclass(frozen=True, slots=True)
class _FileSetup:
    """What an :class:`AcidFileWriter` derives from its table and options alone."""

    options: OrcWriterOptions
    bloom: dict[str, Any]
    bloom_rows: dict[str, Any]
    row_type: pa.StructType
    has_timestamps: bool
    has_structs: bool


@functools.lru_cache(maxsize=256)
def _file_setup(
    schema: TableSchema, base: OrcWriterOptions, kind: FileKind, streaming: bool
) -> _FileSetup:
    """The writer's settings for a file of ``kind`` of this table (cached: the same for
    every file a writer opens)."""
    if kind == "insert":
        options = base.delta_options(streaming=streaming)
    else:
        # Hive's delete-delta and base writers use fresh options: no ratio, no streaming tweaks.
        options = base
    bloom = {} if kind == "delete" else options.bloom_filter_kwargs(schema.orc_event_schema())
    bloom_rows = options.bloom_filter_kwargs(f"struct<row:{schema.row_type()}>") if bloom else {}
    spec = schema.to_spec()
    return _FileSetup(
        options=options,
        bloom=bloom,
        bloom_rows=bloom_rows,
        row_type=pa.struct([pa.field(n, t.to_arrow()) for n, t in schema.columns]),
        has_timestamps="timestamp" in spec,
        has_structs="struct<" in spec,
    )


def sync_data_of(writers: Sequence[AcidFileWriter]) -> None:
    """:meth:`AcidFileWriter.sync_data` of several files (one commit's, on one storage
    and durability) at once: their ``fdatasync``s run together, so the commit waits
    for the disk about once, not once per file (``acidstream.acid.group_sync``)."""
    if not writers:
        return
    first = writers[0]
    flush_files(first.storage, [h for w in writers for h in w.sync_handles()], sync=first.sync)
    for w in writers:
        w.data_synced()


def record_footers(footers: Sequence[tuple[AcidFileWriter, int]]) -> None:
    """:meth:`AcidFileWriter.record_footer` of several files at once: every side-file
    entry written, then their syncs together. Only after the files' data sync
    (:func:`sync_data_of`) returned.

    Why not one sync per file for data and side file together: the side file must never
    point past durable bytes (a reader would take garbage for a footer; ``acidstream.acid.
    side_file``). Synced together, the side file's new entry could reach the disk before
    the footer it names, and a power loss in between would leave exactly that. The
    order is what costs the second wait: data, then side file, then the metastore
    commit; each step's files are synced together instead of one by one."""
    if not footers:
        return
    sides = [f for w, length in footers if (f := w._write_side(length)) is not None]
    first = footers[0][0]
    flush_files(first.storage, sides, sync=first.sync)
    for w, length in footers:
        w._side_recorded(length)
