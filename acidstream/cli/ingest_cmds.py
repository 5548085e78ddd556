"""``acidstream ingest``: stream records from stdin or files into a transactional table.

Input is read in blocks (bounded memory, progress once a second). A txn never spans two
files, and each commit records ``{file, offset}`` in the table atomically with the commit
(the commit key/value), so ``--resume`` re-runs the same files from where the last run's
commits got to: nothing committed is written twice. The exit code says whether records
were rejected (3; the good ones are committed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, BinaryIO, overload

from acidstream.cli.main import storage_options_of

if TYPE_CHECKING:
    from acidstream.ingest.line_blocks import Block
    from acidstream.ingest.parse_ahead import AheadParser

__all__ = ["register"]

RESUME_PREFIX = "_meta.acidstream.ingest."
_MAX_REPORTED = 10  # rejected records printed one by one without --dead-letter

#: The largest ``--max-record-bytes``. Converting and writing one record takes about 25
#: times its size in memory (measured: a 100 MiB JSON record peaks at 2.5 GB, 15 s), so a
#: larger limit would promise records the process cannot take; the default is 16 MiB.
MAX_RECORD_BYTES_LIMIT = 256 << 20
_SIZE = re.compile(r"^\s*(\d+)\s*(|B|KiB|MiB|GiB)\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


def record_bytes(text: str) -> int:
    """``--max-record-bytes``: a byte count, optionally with ``KiB``, ``MiB`` or ``GiB``,
    from 1 to :data:`MAX_RECORD_BYTES_LIMIT` (argparse turns the error into exit 2)."""
    m = _SIZE.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(
            f"expected a byte count such as 1048576, 512KiB or 20MiB, got {text!r}"
        )
    value = int(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    if not 1 <= value <= MAX_RECORD_BYTES_LIMIT:
        raise argparse.ArgumentTypeError(
            f"{text} is outside 1 .. {MAX_RECORD_BYTES_LIMIT >> 20} MiB "
            f"({MAX_RECORD_BYTES_LIMIT:,} bytes, the largest record acidstream ingest takes)"
        )
    return value


def register(subparsers: Any) -> None:
    # The formats of the one record-writer factory (raw too), so the CLI, the HTTP
    # server, the Kafka job and the sink take the same ones.
    from acidstream.ingest.record_writers import RECORD_FORMATS

    p = subparsers.add_parser(
        "ingest",
        help=f"stream records ({', '.join(RECORD_FORMATS)}) from stdin or files into a table",
    )
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("files", nargs="*", metavar="FILE", help="input files (default: stdin)")
    p.add_argument(
        "--format", choices=RECORD_FORMATS, required=True,
        help="record format; raw: each line whole into the table's one string or binary column",
    )  # fmt: skip
    p.add_argument("--delimiter", default="\x01", help="field delimiter for --format delimited")
    p.add_argument("--regex", help="regular expression for --format regex (one group per column)")
    p.add_argument(
        "--txn-rows", type=int, default=10_000, help="commit every N rows (default 10000)"
    )
    p.add_argument(
        "--txns-per-batch", "--batch-size", dest="txns_per_batch", type=int, default=1,
        help="transactions per transaction batch (default 1)",
    )  # fmt: skip
    p.add_argument(
        "--partition", action="append", default=[], metavar="K=V", help="static partition value"
    )
    p.add_argument(
        "--dead-letter", metavar="DIR",
        help="divert bad records (with the reason) to a file in this directory",
    )  # fmt: skip
    p.add_argument("--namespace", help="bind to this namespace: TABLE is then T or <namespace>.T")
    p.add_argument(
        "--resume", action="store_true",
        help="skip what earlier runs committed from these files (by file and byte offset)",
    )  # fmt: skip
    p.add_argument(
        "--max-record-bytes", type=record_bytes, default=16 << 20, metavar="BYTES",
        help="reject records longer than this (bytes, or with KiB/MiB/GiB; default 16 MiB, "
        "at most 256 MiB); memory stays bounded by it",
    )  # fmt: skip
    p.add_argument(
        "--metastore", help="metastore URL (default: $ACIDSTREAM_METASTORE or the embedded store)"
    )
    p.add_argument(
        "--warehouse", help="warehouse root (default: $ACIDSTREAM_WAREHOUSE or ./warehouse)"
    )
    p.set_defaults(func=_cmd_ingest, trailing_files=True)


def resume_key(path: str) -> str:
    """The table parameter that records how far commits got in one input file."""
    digest = hashlib.sha1(os.path.abspath(path).encode("utf-8")).hexdigest()[:16]
    return RESUME_PREFIX + digest


@contextmanager
def _open_input(path: str | None) -> Iterator[BinaryIO]:
    if path is None:
        yield sys.stdin.buffer
        return
    with open(path, "rb") as f:
        yield f


def _writer(args: argparse.Namespace) -> Any:
    """The run's record writer, from the one factory by format (``ConfigError`` for a
    missing ``--regex``, or one that does not compile)."""
    from acidstream.ingest.record_writers import record_writer_for

    # The writer checks the record size again: it must take what the reader let through.
    return record_writer_for(
        args.format,
        delimiter=args.delimiter,
        regex=args.regex,
        max_record_bytes=args.max_record_bytes,
        names={"format": "--format", "regex": "--regex"},
    )


def _static_partition(args: argparse.Namespace) -> dict[str, str] | None:
    from acidstream.acid.errors import ConfigError

    if not args.partition:
        return None
    static: dict[str, str] = {}
    for kv in args.partition:
        k, sep, v = kv.partition("=")
        if not sep:
            raise ConfigError(f"--partition takes K=V, got {kv!r}")
        key = k.strip().lower()
        if key in static:  # a second value would silently win
            raise ConfigError(f"--partition names {key!r} twice")
        static[key] = v
    return static


class _Run:
    """One ``ingest`` run: counts, progress and the rejected-record report."""

    def __init__(self, conn: Any, store: Any, args: argparse.Namespace) -> None:
        self.conn = conn
        self.store = store
        self.args = args
        self.t0 = self.last = time.monotonic()
        self.rejected = 0
        self.committed = 0  # good records of the txns this run committed
        self.skipped_bytes = 0

    def report_rejected(self, name: str, offset: int, reason: str) -> None:
        """Count a rejected record; print it (the first few, without --dead-letter) with
        the byte offset where it starts (the dead letter's ``position`` is ``name:offset``)."""
        self.rejected += 1
        if self.args.dead_letter is None and self.rejected <= _MAX_REPORTED:
            print(
                f"acidstream: rejected record at byte offset {offset} of {name}: {reason}",
                file=sys.stderr,
            )

    def summary(self) -> str:
        """The last line of a run with rejected records: how many, and what was committed."""
        where = f" (see {self.args.dead_letter})" if self.args.dead_letter else ""
        bad = f"{self.rejected:,} record{'' if self.rejected == 1 else 's'} rejected{where}"
        if self.committed == 0:
            return f"acidstream: {bad}; no records were committed"
        verb = "is" if self.committed == 1 else "are"
        other = "record" if self.committed == 1 else "records"
        return f"acidstream: {bad}; the {self.committed:,} other {other} {verb} committed"

    def progress(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < 1.0:
            return
        st = self.conn.stats()
        rate = st.records_written / max(now - self.t0, 1e-9)
        print(
            f"ingest: {st.records_written:,} records, {self.rejected:,} rejected, "
            f"{st.committed_transactions} commits, {rate:,.0f} records/s",
            file=sys.stderr,
            flush=True,
        )
        self.last = now


def _ingest_source(run: _Run, path: str | None) -> None:
    """Stream one input into the table, a txn never spanning two inputs."""
    from acidstream.acid.errors import ConfigError, SerializationError
    from acidstream.ingest.line_blocks import read_blocks

    conn, args = run.conn, run.args
    name = path or "<stdin>"
    start = 0
    key = resume_key(path) if path is not None else None
    if args.resume:
        if path is None:
            raise ConfigError("--resume needs input files (stdin cannot be resumed)")
        assert key is not None
        raw = run.store.get_table_param(conn.db, conn.table_name, key)
        if raw is not None:
            start = int(json.loads(raw)["offset"])
            if start > os.path.getsize(path):
                raise ConfigError(
                    f"{path} is shorter than the {start:,} bytes already committed from it: "
                    "it changed since; ingest it without --resume"
                )
            run.skipped_bytes += start
    with _open_input(path) as f, conn.ahead_parser() as parser:
        if start:
            f.seek(start)
        in_txn = 0  # good records in the open txn
        offset = start
        blocks = read_blocks(f, start=start, max_record_bytes=args.max_record_bytes)
        block, number = next(blocks, None), 0
        while block is not None:
            # A file is read one block ahead, so that block's parse overlaps this one's
            # commits; stdin is not (its next block may be minutes away).
            following = next(blocks, None) if path is not None else None
            for big in block.oversize:
                err = SerializationError(
                    f"record of {big.size:,} bytes is over --max-record-bytes "
                    f"({args.max_record_bytes:,}); its first {len(big.head)} bytes are kept"
                )
                conn.reject(big.head, err, position=f"{name}:{big.start}")
                run.report_rejected(name, big.start, str(err))
            i = 0
            while i < len(block.records):
                take = min(args.txn_rows - in_txn, len(block.records) - i)
                parsed = parser.take((number, i, take), block.records[i : i + take])
                _guess_next(
                    parser, args.txn_rows, in_txn + take, block, number, i + take, following
                )
                if in_txn == 0 and not _open(conn):
                    conn.begin_transaction()
                res = conn.write_block(
                    parsed, positions=_Positions(name, block.starts[i : i + take])
                )
                for j, e in res.rejected:
                    run.report_rejected(name, block.starts[i + j], str(e))
                in_txn += res.accepted
                offset = block.ends[i + take - 1]
                i += take
                if in_txn >= args.txn_rows:
                    _commit(conn, key, path, offset)
                    run.committed += in_txn
                    in_txn = 0
                run.progress()
            offset = max(offset, block.end)
            block = following if path is not None else next(blocks, None)
            number += 1
        if _open(conn):
            if in_txn:
                _commit(conn, key, path, offset)
                run.committed += in_txn
            else:
                conn.abort_transaction()  # only bad records: no empty txn is committed


class _Positions(Sequence[str]):
    """``file:offset`` of each record of a chunk, formatted only when asked for (for the
    rejected records' dead letters), not once per record."""

    def __init__(self, name: str, starts: list[int]) -> None:
        self._name, self._starts = name, starts

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            return [f"{self._name}:{s}" for s in self._starts[i]]
        return f"{self._name}:{self._starts[i]}"


def _guess_next(
    parser: AheadParser,
    txn_rows: int,
    filled: int,
    block: Block,
    number: int,
    i: int,
    following: Block | None,
) -> None:
    """Start parsing the chunk the loop takes next if every record of the current one is
    accepted (the usual case; a wrong guess is parsed again when taken): the rest of the
    current txn, or a whole one after its commit, from this block or the next."""
    room = txn_rows if filled >= txn_rows else txn_rows - filled
    if i < len(block.records):
        n = min(room, len(block.records) - i)
        parser.ahead((number, i, n), block.records[i : i + n])
    elif following is not None and following.records:
        n = min(room, len(following.records))
        parser.ahead((number + 1, 0, n), following.records[:n])


def _open(conn: Any) -> bool:
    return conn.state is not None and conn.state.name == "OPEN"


def _commit(conn: Any, key: str | None, path: str | None, offset: int) -> None:
    if key is None:
        conn.commit_transaction()
        return
    value = json.dumps({"file": os.path.abspath(path or ""), "offset": offset})
    conn.commit_transaction(key=key, value=value)


def _cmd_ingest(args: argparse.Namespace) -> int:
    from acidstream.acid.errors import ConfigError
    from acidstream.cli.main import EXIT_OK, EXIT_REJECTED
    from acidstream.ingest.connection import StreamingConnection, StreamingOptions
    from acidstream.txn.config import StoreConfig

    if args.txn_rows < 1:
        raise ConfigError("--txn-rows must be >= 1")
    opts = StreamingOptions(
        txns_per_batch=args.txns_per_batch,
        dead_letter_path=args.dead_letter,
        namespace=args.namespace,  # docs/namespaces.md
    )
    store = StoreConfig.resolve(
        metastore=args.metastore,
        warehouse=args.warehouse,
        storage_options=storage_options_of(args),
    ).open()
    try:
        with StreamingConnection(
            args.table,
            record_writer=_writer(args),
            store=store,
            static_partition=_static_partition(args),
            options=opts,
        ) as conn:
            run = _Run(conn, store, args)
            for path in args.files or [None]:
                _ingest_source(run, path)
            st = conn.stats()
    finally:
        store.close()
    secs = time.monotonic() - run.t0
    rows = [
        ("records written", f"{st.records_written:,}"),
        ("records rejected", f"{run.rejected:,}"),
        ("bytes", f"{st.records_size:,}"),
        ("committed txns", f"{st.committed_transactions:,}"),
        ("aborted txns", f"{st.aborted_transactions:,}"),
        ("auto-flushes", f"{st.auto_flushes:,}"),
        ("partitions created", f"{st.created_partitions:,}"),
        ("resumed past bytes", f"{run.skipped_bytes:,}"),
        ("seconds", f"{secs:.2f}"),
        ("records/s", f"{st.records_written / secs if secs else 0:,.0f}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v:>14}")
    if run.rejected:
        print(run.summary(), file=sys.stderr)
        return EXIT_REJECTED
    return EXIT_OK
