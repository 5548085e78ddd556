"""``TableWriter``: the one buffered writer of a table's files for one write id range.

Every writer of ACID files goes through it: ``StreamingConnection`` (and the HTTP server
through it), the Spark sink's executor tasks and the compactor. For one table (a
:class:`~acidstream.acid.placement.Placement`) and one :class:`WriteTarget` (a write id
range, a statement id, a visibility txn id) it owns:

- **inserts**: rows in (row tuples or Arrow tables, per partition directory) -> bucket
  (Hive's hash) -> buffers per (partition, bucket) counted against a memory limit
  (:attr:`TableWriter.over_limit`; the caller decides when to flush, because only it
  knows the txn) -> on :meth:`~TableWriter.drain` one
  :class:`~acidstream.acid.file_writer.AcidFileWriter` per (partition, bucket,
  list-bucketing directory), the directories of one bucket numbered by one
  :class:`~acidstream.acid.row_keys.RowIdSequence`;
- **delete events**: ``(originalTransaction, bucket property, rowId)`` per partition ->
  ``delete_delta_<min>_<max>[_<stmt>]/bucket_N``, one file per original writer id
  (decoded from the bucket property), sorted by ROW__ID (as
  :func:`acidstream.acid.writer.write_delete_delta` writes them);
- **events with their own ROW__IDs** (the compactor's rewrites, :meth:`TableWriter.write_events`):
  a base, insert delta or delete delta file of already-sorted events, each keeping its
  ROW__ID and ``currentTransaction``.

It knows nothing of transactions or the metastore (the format layer): the caller opens
the txns, says which write id the buffered rows belong to, and makes the commit durable
with the footers it gets back (:meth:`TableWriter.write_footers`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

from acidstream.acid import bucket_codec, layout
from acidstream.acid.durability import Durability
from acidstream.acid.errors import AcidStreamError, ConfigError
from acidstream.acid.file_writer import AcidFileWriter, record_footers, sync_data_of
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.placement import Placement
from acidstream.acid.row_keys import RowIdSequence

__all__ = ["EventKind", "FileKey", "TableWriter", "WriteTarget"]

log = logging.getLogger(__name__)

Key = tuple[str, int]
"""(partition directory, bucket): one buffer, one rowId numbering."""
FileKey = tuple[str, int, str]
"""(partition directory, bucket, list-bucketing directory): one file."""
EventKind = Literal["base", "insert", "delete"]


@dataclass(frozen=True, kw_only=True)
class WriteTarget:
    """The directory a :class:`TableWriter` writes in each partition.

    Attributes:
        min_write_id, max_write_id: the write id range in the directory's name.
        statement_id: Hive's statement id (``_SSSS`` suffix; -1: none), also encoded in
            the bucket property of every insert event and in every delete file's name.
        visibility_txn_id: the ``_vT`` suffix of a compactor's output (0: none).
        base: insert files go to ``base_<max>[_vT]`` instead of ``delta_<min>_<max>``.
    """

    min_write_id: int
    max_write_id: int
    statement_id: int = -1
    visibility_txn_id: int = 0
    base: bool = False

    def __post_init__(self) -> None:
        if self.max_write_id < self.min_write_id:
            raise ConfigError(f"write id range {self.min_write_id}..{self.max_write_id} is empty")
        if self.base and self.statement_id != -1:
            raise ConfigError("a base has no statement id")

    def dir_name(self, *, delete: bool = False) -> str:
        """The directory's name: ``base_..``, ``delta_..`` or (``delete``) ``delete_delta_..``."""
        if self.base and not delete:
            return layout.base_dir_name(self.max_write_id, visibility_txn_id=self.visibility_txn_id)
        return layout.delta_dir_name(
            self.min_write_id,
            self.max_write_id,
            statement_id=self.statement_id,
            visibility_txn_id=self.visibility_txn_id,
            delete=delete,
        )


class TableWriter:
    """Buffers, places and writes one table's rows and delete events for one target.

    Args:
        placement: the table's placement (partition directories, buckets, list bucketing).
        target: the write id range and names of the directories written.
        options: ORC settings (the table's ``orc.*`` properties already applied).
        streaming: insert files take an intermediate footer per :meth:`flush` /
            :meth:`write_footers` (a batch of more than one txn, or files that must be
            readable at each txn boundary); they keep a ``_flush_length`` side file where
            the storage can flush a file being written.
        memory_limit_bytes: buffered bytes at which :attr:`over_limit` turns true
            (``None``: never).
        replace_files: delete a file (and its side file) left at a path before writing it
            (a retried Spark task rewrites its dead attempt's file whole).
        durability: ``fsync`` (every durable point waits for the disk) or ``flush`` (the
            bytes are handed to the OS: Hive's hflush); see ``acidstream.acid.durability``.
            The files of one step (a commit's footers, the final footers, the delete
            files) are synced together, not one after the other.

    Not thread-safe: its owner serialises calls (``StreamingConnection`` holds its lock).
    """

    def __init__(
        self,
        placement: Placement,
        *,
        target: WriteTarget,
        options: OrcWriterOptions,
        streaming: bool = False,
        memory_limit_bytes: int | None = None,
        replace_files: bool = False,
        durability: Durability = "fsync",
    ) -> None:
        if memory_limit_bytes is not None and memory_limit_bytes <= 0:
            raise ConfigError("memory_limit_bytes must be > 0")
        if streaming and target.base:
            raise ConfigError("a base is written whole: it cannot take streaming files")
        self.place = placement
        self.target = target
        self.options = options
        self.streaming = streaming
        self.memory_limit_bytes = memory_limit_bytes
        self.replace_files = replace_files
        self.durability: Durability = durability
        self._files: dict[FileKey, AcidFileWriter] = {}
        # One rowId numbering per bucket, shared by its files in list-bucketing directories.
        self._row_ids: dict[Key, RowIdSequence] = {}
        # Buffered inserts: row tuples (the per-record path) and Arrow tables, per key.
        self._rows: dict[Key, list[tuple[Any, ...]]] = {}
        self._arrow: dict[Key, list[pa.Table]] = {}
        self._buffered_bytes = 0  # ... counted against the memory limit
        # Buffered delete events per partition: (originalTransaction, bucket, rowId).
        self._deletes: dict[str, list[tuple[int, int, int]]] = {}
        self._delete_bytes = 0

    # ------------------------------------------------------------------ buffering
    @property
    def buffered_bytes(self) -> int:
        """The bytes counted against the memory limit: rows since the last drain, delete
        events since the last :meth:`write_deletes`."""
        return self._buffered_bytes + self._delete_bytes

    @property
    def over_limit(self) -> bool:
        """Whether the buffered bytes reached the memory limit (time to :meth:`flush`)."""
        limit = self.memory_limit_bytes
        return limit is not None and self.buffered_bytes >= limit

    def count_bytes(self, n: int) -> None:
        """Count ``n`` more bytes against the memory limit (rows the caller added with
        ``nbytes=0``, counted in its own measure, e.g. the records' bytes)."""
        self._buffered_bytes += n

    def add_row(self, part: str, row: tuple[Any, ...], *, nbytes: int) -> None:
        """Buffer one row tuple (table column order) of partition ``part``; ``nbytes``
        (e.g. its record's length) counts against the memory limit."""
        key = (part, self.place.bucket_of(row))
        buf = self._rows.get(key)
        if buf is None:
            buf = self._rows[key] = []
        buf.append(row)
        self._buffered_bytes += nbytes

    def add_arrow(self, part: str, table: pa.Table, *, nbytes: int | None = None) -> None:
        """Buffer the rows of an Arrow table (columns in table order) of partition
        ``part``, split by bucket. ``nbytes`` counts against the memory limit (default:
        the table's ``nbytes``; 0 when the caller counts them with :meth:`count_bytes`)."""
        for bucket, rows in self.place.bucket_groups(table):
            key = (part, bucket)
            tables = self._arrow.setdefault(key, [])
            pending = self._rows.get(key)
            if pending:  # rows add_row buffered before these: they go first (rowId order)
                tables.append(self.place.rows_to_table(pending))
                pending.clear()
            tables.append(rows)
        self._buffered_bytes += table.nbytes if nbytes is None else nbytes

    def add_deletes(self, part: str, keys: Iterable[tuple[int, int, int]]) -> None:
        """Buffer delete events of partition ``part``: the ROW__IDs ``(originalTransaction,
        bucket property, rowId)`` of the rows deleted; written by :meth:`write_deletes`."""
        new = [(int(o), int(b), int(r)) for o, b, r in keys]
        self._deletes.setdefault(part, []).extend(new)
        self._delete_bytes += 24 * len(new)  # three 64-bit numbers each

    def drop_buffers(self) -> None:
        """Forget every buffered row and delete event (an aborted txn's)."""
        self._rows.clear()
        self._arrow.clear()
        self._deletes.clear()
        self._buffered_bytes = self._delete_bytes = 0

    # ------------------------------------------------------------------ insert files
    @property
    def files(self) -> list[AcidFileWriter]:
        """The insert files opened so far, in the order they were opened."""
        return list(self._files.values())

    def file(self, part: str, bucket: int, lb_dir: str = "") -> AcidFileWriter:
        """The insert file of (partition, bucket, list-bucketing directory), opened on
        first use (every file of one bucket shares its rowId numbering)."""
        w = self._files.get((part, bucket, lb_dir))
        if w is None:
            w = self._files[(part, bucket, lb_dir)] = self._open_insert(part, bucket, lb_dir)
        return w

    def _open_insert(self, part: str, bucket: int, lb_dir: str) -> AcidFileWriter:
        t = self.target
        path = self._path(part, t.dir_name(), bucket, lb_dir)
        if self.replace_files:
            self._replace(path)
        row_ids = self._row_ids.setdefault((part, bucket), RowIdSequence())
        if not t.base:
            w = self.place.insert_writer(
                part,
                bucket,
                min_write_id=t.min_write_id,
                max_write_id=t.max_write_id,
                statement_id=t.statement_id,
                streaming=self.streaming,
                options=self.options,
                lb_dir=lb_dir,
                row_ids=row_ids,
                visibility_txn_id=t.visibility_txn_id,
                # (Known when the writer is made: its creating thread may sync the marker.)
                durability=self.durability,
            )
            return w
        self._mark_lb_parent(part, t.dir_name(), lb_dir)
        return AcidFileWriter(
            self.place.storage,
            path,
            self.place.schema,
            kind="base",
            bucket_id=bucket,
            statement_id=-1,
            options=self.options,
            engine="arrow",
            row_ids=row_ids,
            durability=self.durability,
        )

    def drain(self, write_id: int) -> None:
        """Hand every buffered row to its file as rows of ``write_id`` (in a
        list-bucketed partition, to the file of its list-bucketing directory)."""
        # A key's Arrow tables before its rows: rows add_row buffered before a table were
        # moved into the tables (add_arrow), so its rows are the latest.
        for key, tables in self._arrow.items():
            for t in tables:
                for lb, rows_ in self.place.lb_groups(key[0], t):
                    self.file(key[0], key[1], lb).insert_arrow(write_id, rows_)
        for key, rows in self._rows.items():
            if not rows:
                continue
            if self.place.is_list_bucketed(key[0]):
                for lb, t in self.place.lb_groups(key[0], self.place.rows_to_table(rows)):
                    self.file(key[0], key[1], lb).insert_arrow(write_id, t)
            else:
                self.file(key[0], key[1]).insert(write_id, rows)
        self._rows.clear()
        self._arrow.clear()
        self._buffered_bytes = 0

    def flush(self, write_id: int) -> None:
        """Auto-flush: drain the buffers into the files, then give each streaming file an
        intermediate footer (and side-file length) so its rows leave memory. No commit."""
        self.drain(write_id)
        footers = [(w, w.write_footer()) for w in self._files.values() if w.streaming]
        sync_data_of([w for w, _ in footers])
        record_footers(footers)

    def write_footers(self, write_id: int) -> list[tuple[AcidFileWriter, int]]:
        """A txn boundary: drain, then an intermediate footer on every file. Returns each
        file with its new length, to make durable (``sync_data``) and then record in its
        side file (``record_footer``) when the txn commits."""
        self.drain(write_id)
        return [(w, w.write_footer()) for w in self._files.values()]

    def buffered_files(self) -> list[tuple[FileKey, pa.Table]]:
        """Take every buffered row out, as one Arrow table per file to write, in file
        order ((partition, bucket) then list-bucketing directory): for a caller that
        spreads each file's rows over several write ids itself (the Spark sink's tasks)."""
        keys = sorted(set(self._arrow) | {k for k, v in self._rows.items() if v})
        out: list[tuple[FileKey, pa.Table]] = []
        for key in keys:
            tables = list(self._arrow.get(key, ()))
            if self._rows.get(key):
                tables.append(self.place.rows_to_table(self._rows[key]))
            whole = pa.concat_tables(tables)
            out += [((key[0], key[1], lb), t) for lb, t in self.place.lb_groups(key[0], whole)]
        self._rows.clear()
        self._arrow.clear()
        self._buffered_bytes = 0
        return out

    # ------------------------------------------------------------------ delete files
    def write_deletes(self, write_id: int) -> list[str]:
        """Write the buffered delete events as events of ``write_id``: per partition,
        ``delete_delta_<min>_<max>[_<stmt>]/bucket_N`` with N each deleted row's writer
        id (decoded from its bucket property), events sorted by (originalTransaction,
        bucket, rowId), duplicates dropped. Returns the paths written."""
        paths: list[str] = []
        files: list[AcidFileWriter] = []
        d = self.target.dir_name(delete=True)
        for part in sorted(self._deletes):
            by_writer: dict[int, list[tuple[int, int, int]]] = {}
            for k in self._deletes[part]:
                by_writer.setdefault(bucket_codec.decode_writer_id(k[1]), []).append(k)
            for writer_id in sorted(by_writer):
                path = self._path(part, d, writer_id)
                if self.replace_files:
                    self._replace(path)
                w = AcidFileWriter(
                    self.place.storage,
                    path,
                    self.place.schema,
                    kind="delete",
                    bucket_id=writer_id,
                    statement_id=self.target.statement_id,
                    options=self.options,
                    durability=self.durability,
                )
                files.append(w)
                try:
                    w.delete(write_id, sorted(set(by_writer[writer_id])))
                    w.end()
                except BaseException:
                    for f in files:  # nothing of them is committed: removed
                        f.abandon()
                    raise
                paths.append(path)
        try:
            sync_data_of(files)  # the delete files' final footers, synced together
        except BaseException:
            for f in files:
                f.abandon()
            raise
        for f in files:
            f.finish()
        self._deletes.clear()
        self._delete_bytes = 0
        return paths

    # ------------------------------------------------------------------ events as they are
    def make_dir(self, part: str, *, delete: bool = False) -> str:
        """Create the target directory of a partition with its format marker (a
        directory that must exist even if no file is written in it); returns its path."""
        st = self.place.storage
        path = st.join(self.place.partition_path(part), self.target.dir_name(delete=delete))
        st.makedirs(path)
        st.write_bytes_if_absent(
            st.join(path, layout.ACID_FORMAT_FILE), str(layout.ACID_VERSION).encode()
        )
        return path

    def write_events(
        self,
        part: str,
        bucket: int,
        *,
        kind: EventKind,
        op: pa.Array,
        original_txn: pa.Array,
        bucket_property: pa.Array,
        row_id: pa.Array,
        current_txn: pa.Array,
        rows: pa.Array | None,
        lb_dir: str = "",
    ) -> str:
        """Write one whole file of events that keep their ROW__IDs (the compactor): in
        the target's base (``kind="base"``), insert delta or delete delta, in
        ``lb_dir`` when given. The events must be sorted by ROW__ID (the file writer
        checks); ``rows`` is the ``row`` struct in the table's row type (``None`` for
        deletes). Returns the file's path."""
        if (kind == "base") != self.target.base:
            raise ConfigError(f"{kind} events do not go to {self.target.dir_name()}")
        d = self.target.dir_name(delete=kind == "delete")
        path = self._path(part, d, bucket, lb_dir)
        if self.replace_files:
            self._replace(path)
        self._mark_lb_parent(part, d, lb_dir)
        w = AcidFileWriter(
            self.place.storage,
            path,
            self.place.schema,
            kind=kind,
            bucket_id=bucket,
            statement_id=self.target.statement_id,
            options=self.options,
            engine="arrow",
            durability=self.durability,
        )
        try:
            w.write_events(op, original_txn, bucket_property, row_id, current_txn, rows)
        except BaseException:
            w.abort()
            raise
        w.close()
        return path

    # ------------------------------------------------------------------ paths
    def _path(self, part: str, dir_name: str, bucket: int, lb_dir: str = "") -> str:
        st = self.place.storage
        parts = [self.place.partition_path(part), dir_name] + ([lb_dir] if lb_dir else [])
        return st.join(*parts, layout.bucket_file_name(bucket))

    def _mark_lb_parent(self, part: str, dir_name: str, lb_dir: str) -> None:
        """A file in a list-bucketing directory: the base/delta itself carries the format
        marker too, as every ACID directory (the file writer puts one beside its file)."""
        if lb_dir:
            st = self.place.storage
            d = st.join(self.place.partition_path(part), dir_name)
            st.makedirs(d)
            st.write_bytes_if_absent(
                st.join(d, layout.ACID_FORMAT_FILE), str(layout.ACID_VERSION).encode()
            )

    def _replace(self, path: str) -> None:
        st = self.place.storage
        st.delete(path)
        st.delete(layout.side_file_name(path))

    # ------------------------------------------------------------------ ending
    def close(self) -> None:
        """Final footers on every insert file (durable; side files deleted); raises on the
        first failure, leaving the rest to :meth:`abandon`. Buffered rows must have been
        drained; forgets the files.

        Every file's final footer is written first, then all are synced together (one
        wait for the disk), then closed."""
        sync_data_of(self.end_files())
        self.finish_ended()

    def end_files(self) -> list[AcidFileWriter]:
        """The first half of :meth:`close`: the final footer of every insert file, not yet
        durable; returns the files, to sync (:func:`sync_data_of`, possibly on another
        thread while the caller runs its commit's statements), then :meth:`finish_ended`.
        Raises on the first failure, leaving the rest to :meth:`abandon`."""
        files = list(self._files.values())
        for w in files:
            w.end()
        return files

    def finish_ended(self) -> None:
        """The second half of :meth:`close`, once the files :meth:`end_files` returned are
        durable: close them (side files deleted) and forget them. Nothing to do once
        done (or once :meth:`abandon` gave them up)."""
        for w in self._files.values():
            w.finish()
        self._forget()

    def finish(self) -> None:
        """Close every insert file, keeping going past failures: a file whose final footer
        cannot be written is abandoned (left readable at its last footer, its side file
        kept). Buffers are dropped; the files are forgotten."""
        self.drop_buffers()
        for w in list(self._files.values()):
            try:
                w.close()
            except (OSError, AcidStreamError) as e:
                log.error("closing %s failed (left readable at its last commit): %s", w.path, e)
                w.abandon()
        self._forget()

    def abandon(self) -> None:
        """A failed write: drop the buffers and cut every file back to its last footer
        (the side file keeps pointing at it); forget the files."""
        self.drop_buffers()
        for w in self._files.values():
            w.abandon()
        self._forget()

    def _forget(self) -> None:
        self._files.clear()
        self._row_ids.clear()
