"""``acidstream read | dump | ls``: look at Hive ACID tables and files from the shell.

* ``read PATH`` prints the rows visible in a snapshot (JSON lines or a table);
* ``dump FILE`` prints one ORC ACID file's metadata (first line) and every event,
  in ``orc-tools data`` form;
* ``ls PATH`` prints what ``getAcidState`` chose: base, deltas, obsolete and
  aborted directories, original files.

Errors are raised as typed ``AcidStreamError``s; ``cli.main`` prints them as one line.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import decimal
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from acid.errors import AcidFormatError, ConfigError, TableNotFoundError

__all__ = ["register"]

_TABLE_NAME = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*\.)?[A-Za-z_][A-Za-z0-9_]*$")


def register(subparsers: Any) -> None:
    """Add the ``read``, ``dump`` and ``ls`` sub-commands."""
    p = subparsers.add_parser("read", help="print the rows visible in a snapshot of a table")
    p.add_argument(
        "path", metavar="PATH", help="table or partition directory, ACID file, or db.table"
    )
    _snapshot_args(p)
    p.add_argument("--row-id", action="store_true", help="add Hive's row__id to every row")
    p.add_argument("--columns", help="comma-separated columns to print (default: all)")
    p.add_argument("--format", choices=("jsonl", "table"), default="jsonl", help="output format")
    p.set_defaults(func=_cmd_read)

    p = subparsers.add_parser("dump", help="print the events and ACID metadata of one ORC file")
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--flush-length",
        default="auto",
        help="read the first N bytes only; 'auto' (default) uses the _flush_length side file if any",
    )
    p.set_defaults(func=_cmd_dump)

    p = subparsers.add_parser("ls", help="print the directories a snapshot of a table uses")
    p.add_argument("path", metavar="PATH")
    _snapshot_args(p)
    p.set_defaults(func=_cmd_ls)


def _snapshot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--write-ids",
        help="ValidWriteIdList, e.g. 'db.t:10:9223372036854775807::' (default: everything valid)",
    )
    p.add_argument(
        "--txns", help="ValidTxnList, e.g. '100:9223372036854775807::' (default: everything valid)"
    )
    p.add_argument(
        "--metastore", help="metastore URL for db.table names (default: $ACIDSTREAM_METASTORE)"
    )
    p.add_argument(
        "--warehouse", help="warehouse root (default: $ACIDSTREAM_WAREHOUSE or ./warehouse)"
    )


def _resolve_table_arg(arg: str, args: argparse.Namespace | None = None) -> str:
    """Turn the PATH argument into a path: an existing path or URL, or a ``db.table`` name
    looked up in the metastore (``--metastore``/``--warehouse`` or their environment
    variables). For a table name without ``--write-ids``/``--txns``, the snapshot also
    comes from the metastore, as a Hive reader's would."""
    if "://" in arg or os.path.exists(arg):
        return arg
    if not _TABLE_NAME.match(arg):
        raise TableNotFoundError(f"{arg}: no such table, partition or file")
    from txn.config import StoreConfig

    cfg = StoreConfig.resolve(
        metastore=getattr(args, "metastore", None), warehouse=getattr(args, "warehouse", None)
    )
    if cfg.metastore_url.startswith("sqlite:///") and not os.path.exists(
        cfg.metastore_url[len("sqlite:///") :]
    ):
        raise TableNotFoundError(
            f"{arg!r} is not a path, and there is no metastore at {cfg.metastore_url} to look it up"
        )
    db, _, name = arg.lower().rpartition(".")
    store = cfg.open()
    try:
        table = store.get_table(db or "default", name)
        if args is not None and getattr(args, "write_ids", None) is None:
            txns = store.get_valid_txns()
            args.write_ids = store.get_valid_write_ids(table.db, table.name, txns).to_string()
            if getattr(args, "txns", None) is None:
                args.txns = txns.to_string()
    finally:
        store.close()
    if table.location is None:
        raise TableNotFoundError(f"table {arg} has no location")
    return table.location


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time | decimal.Decimal | dt.timedelta):
        return str(value)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(value).decode("ascii")
    return str(value)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, default=_json_default, ensure_ascii=False, separators=(",", ":"))


def _cmd_read(args: argparse.Namespace) -> int:
    from acid.reader import iter_batches

    path = _resolve_table_arg(args.path, args)
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    batches = iter_batches(
        path, write_ids=args.write_ids, txns=args.txns, columns=columns, include_row_id=args.row_id
    )
    out = sys.stdout
    if args.format == "jsonl":
        for t in batches:
            for row in t.to_pylist():
                out.write(_dumps(row) + "\n")
        return 0
    rows: list[dict[str, Any]] = []
    names: list[str] = []
    for t in batches:
        names = t.schema.names
        rows.extend(t.to_pylist())
    if not names:
        from acid.reader import read_table

        names = read_table(
            path, write_ids=args.write_ids, txns=args.txns, columns=columns
        ).schema.names
    _print_table(names, ([_cell(r.get(n)) for n in names] for r in rows), out)
    out.write(f"({len(rows)} rows)\n")
    return 0


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dict | list):
        return _dumps(value)
    return (
        str(_json_default(value)) if not isinstance(value, str | int | float | bool) else str(value)
    )


def _print_table(header: Sequence[str], rows: Iterable[Sequence[str]], out: Any) -> None:
    body = [list(r) for r in rows]
    widths = [len(h) for h in header]
    for r in body:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    out.write("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in body:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def _cmd_dump(args: argparse.Namespace) -> int:
    from acid.orc_inspect import inspect_orc, logical_length, read_flush_lengths
    from acid.storage import Storage

    storage, path = Storage.for_path(args.file)
    if not storage.exists(path) or storage.is_dir(path):
        raise FileNotFoundError(f"{args.file}: no such file")
    size = storage.size(path)
    flush_lengths = read_flush_lengths(storage, path)
    if args.flush_length == "auto":
        length = logical_length(storage, path, file_length=size, use_side_file=True)
    else:
        try:
            length = int(args.flush_length)
        except ValueError as e:
            raise ConfigError(
                f"--flush-length must be 'auto' or a byte count, got {args.flush_length!r}"
            ) from e
        if not 0 < length <= size:
            raise AcidFormatError(
                f"{path}: --flush-length {length} is outside the file (size {size})"
            )
    orcf, info = inspect_orc(storage, path, length=length, file_length=size)
    meta = {
        "file": path,
        "file_length": size,
        "logical_length": length,
        "flush_lengths": flush_lengths,
        "rows": info.nrows,
        "stripes": info.nstripes,
        "compression": info.compression,
        "row_index_stride": info.row_index_stride,
        "schema": str(info.schema).split("\n-- schema metadata --")[0].replace("\n", "; "),
        "is_acid": info.is_acid,
        "acid_version": info.acid_version,
        "acid_stats": list(info.acid_stats) if info.acid_stats else None,
        "key_index": [list(k) if k else None for k in info.key_index] if info.key_index else None,
        "user_metadata": dict(info.user_metadata),
    }
    out = sys.stdout
    out.write(_dumps({"metadata": meta}) + "\n")
    for i in range(info.nstripes):
        batch = orcf.read_stripe(i)
        for row in batch.to_pylist():
            if info.acid_columns is not None:
                # canonical field names, as orc-tools prints Hive's files
                canon = {v: k for k, v in info.acid_columns.items()}
                row = {canon.get(k, k): v for k, v in row.items()}
            out.write(_dumps(row) + "\n")
    return 0


def _cmd_ls(args: argparse.Namespace) -> int:
    from acid.directory import get_acid_state
    from acid.reader import _discover_partitions, _trailing_partition_values
    from acid.snapshot import ValidTxnList, ValidWriteIdList
    from acid.storage import Storage

    path = _resolve_table_arg(args.path, args)
    storage, spath = Storage.for_path(path)
    if not storage.is_dir(spath):
        raise TableNotFoundError(f"{path}: not a table or partition directory")
    wids = ValidWriteIdList.from_string(args.write_ids)
    txns = ValidTxnList.from_string(args.txns)
    rows: list[list[str]] = []
    for part in _discover_partitions(storage, spath, _trailing_partition_values(spath)):
        st = get_acid_state(part.path, write_ids=wids, txns=txns, storage=storage)
        rel = os.path.relpath(part.path, spath) if part.path != spath else "."
        if st.base is not None:
            b = st.base
            extra = "compacted" if b.is_compacted else "insert-overwrite"
            rows.append(
                [
                    rel,
                    "base",
                    b.name,
                    f"{len(b.files)} files, {extra}" + (", raw" if b.is_raw else ""),
                ]
            )
        for d in st.deltas:
            kind = "delete_delta" if d.is_delete else "delta"
            side = [f"{f.name}@{f.logical_length}" for f in d.files if f.logical_length != f.length]
            detail = f"{len(d.files)} files" + (", raw" if d.is_raw else "")
            if side:
                detail += ", flush lengths " + " ".join(side)
            rows.append([rel, kind, d.name, detail])
        for o in st.original_files:
            where = o.dir_name or os.path.relpath(o.path, part.path)
            rows.append(
                [
                    rel,
                    "original",
                    where if o.dir_name is None else f"{o.dir_name}/{o.name}",
                    f"bucket {o.bucket_id}, write id {o.write_id}, rows {o.row_count}, "
                    f"start rowId {o.start_row_id}",
                ]
            )
        for p in st.obsolete:
            rows.append([rel, "obsolete", os.path.relpath(p, part.path), ""])
        for p in st.aborted:
            rows.append([rel, "aborted", os.path.relpath(p, part.path), ""])
    _print_table(["PARTITION", "KIND", "NAME", "DETAIL"], rows, sys.stdout)
    return 0
