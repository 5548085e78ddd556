"""``acidstream ingest``: stream records from stdin or files into a transactional table."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import Any, BinaryIO

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "ingest", help="stream records (json, delimited, regex) from stdin or files into a table"
    )
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("files", nargs="*", metavar="FILE", help="input files (default: stdin)")
    p.add_argument("--format", choices=("json", "delimited", "regex"), required=True)
    p.add_argument("--delimiter", default="\x01", help="field delimiter for --format delimited")
    p.add_argument("--regex", help="regular expression for --format regex (one group per column)")
    p.add_argument(
        "--txn-rows", type=int, default=10_000, help="commit every N rows (default 10000)"
    )
    p.add_argument("--batch-size", type=int, default=1, help="transactions per transaction batch")
    p.add_argument(
        "--partition", action="append", default=[], metavar="K=V", help="static partition value"
    )
    p.add_argument(
        "--dead-letter", metavar="PATH", help="divert bad records (with the reason) to this file"
    )
    p.add_argument(
        "--metastore", help="metastore URL (default: $ACIDSTREAM_METASTORE or the embedded store)"
    )
    p.add_argument(
        "--warehouse", help="warehouse root (default: $ACIDSTREAM_WAREHOUSE or ./warehouse)"
    )
    p.set_defaults(func=_cmd_ingest, trailing_files=True)


def _records(files: list[str]) -> Iterator[bytes]:
    from ingest.record_writers import split_records

    streams: list[BinaryIO] = [open(f, "rb") for f in files] if files else [sys.stdin.buffer]
    try:
        for s in streams:
            yield from split_records(iter(lambda s=s: s.read(1 << 20), b""))  # type: ignore[misc]
    finally:
        for s in streams:
            if s is not sys.stdin.buffer:
                s.close()


def _cmd_ingest(args: argparse.Namespace) -> int:
    from acid.errors import ConfigError, SerializationError
    from ingest.connection import StreamingConnection, StreamingOptions
    from ingest.record_writers import (
        RecordWriter,
        StrictDelimitedInputWriter,
        StrictJsonWriter,
        StrictRegexWriter,
    )

    if args.txn_rows < 1:
        raise ConfigError("--txn-rows must be >= 1")
    writer: RecordWriter
    if args.format == "json":
        writer = StrictJsonWriter()
    elif args.format == "delimited":
        writer = StrictDelimitedInputWriter(field_delimiter=args.delimiter)
    else:
        if not args.regex:
            raise ConfigError("--format regex needs --regex")
        writer = StrictRegexWriter(regex=args.regex)
    static: dict[str, str] | None = None
    if args.partition:
        static = {}
        for kv in args.partition:
            k, sep, v = kv.partition("=")
            if not sep:
                raise ConfigError(f"--partition takes K=V, got {kv!r}")
            static[k.strip().lower()] = v
    opts = StreamingOptions(
        transaction_batch_size=args.batch_size, dead_letter_path=args.dead_letter
    )
    t0 = time.monotonic()
    last = t0
    n_in_txn = 0
    with StreamingConnection(
        args.table,
        record_writer=writer,
        metastore=args.metastore,
        warehouse=args.warehouse,
        static_partition=static,
        options=opts,
    ) as conn:
        open_txn = False
        for rec in _records(args.files):
            if not rec:
                continue
            if not open_txn:
                conn.begin_transaction()
                open_txn = True
            try:
                conn.write(rec)
            except SerializationError as e:
                print(f"acidstream: bad record skipped: {e}", file=sys.stderr)
                continue
            n_in_txn += 1
            if n_in_txn >= args.txn_rows:
                conn.commit_transaction()
                open_txn = False
                n_in_txn = 0
            now = time.monotonic()
            if now - last >= 1.0:
                st = conn.stats()
                rate = st.records_written / (now - t0)
                print(
                    f"ingest: {st.records_written:,} records, {st.committed_transactions} commits, "
                    f"{rate:,.0f} records/s",
                    file=sys.stderr,
                    flush=True,
                )
                last = now
        if open_txn:
            conn.commit_transaction()
        st = conn.stats()
    secs = time.monotonic() - t0
    rows = [
        ("records written", f"{st.records_written:,}"),
        ("bytes", f"{st.records_size:,}"),
        ("bad records", f"{st.bad_records:,}"),
        ("committed txns", f"{st.committed_transactions:,}"),
        ("aborted txns", f"{st.aborted_transactions:,}"),
        ("auto-flushes", f"{st.auto_flushes:,}"),
        ("partitions created", f"{st.created_partitions:,}"),
        ("seconds", f"{secs:.2f}"),
        ("records/s", f"{st.records_written / secs if secs else 0:,.0f}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v:>14}")
    return 0
