"""``acidstream read | dump | ls``: look at Hive ACID tables and files from the shell.

* ``read PATH`` prints the rows visible in a snapshot (JSON lines or a table);
* ``dump FILE`` prints one ORC ACID file's metadata (first line) and every event,
  in ``orc-tools data`` form;
* ``ls PATH`` prints what ``getAcidState`` chose: base, deltas, obsolete and
  aborted directories, original files, and the list-bucketing directories inside each
  chosen base/delta (with ``--where``, which of them a read with that filter skips).

Errors are raised as typed ``AcidStreamError``s; ``cli.main`` prints them as one line.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acidstream.acid.errors import AcidFormatError, ConfigError, TableNotFoundError
from acidstream.acid.layout import ParsedDelta, parse_dir_name
from acidstream.cli.main import add_storage_option, storage_options_of
from acidstream.cli.output import print_table

if TYPE_CHECKING:  # pyarrow is imported when a command runs, not when the CLI starts
    import pyarrow as pa

    from acidstream.acid.directory import AcidDir
    from acidstream.acid.list_bucketing import SkewedInfo
    from acidstream.acid.list_bucketing_prune import LbSelection
    from acidstream.acid.partitions import PartitionValues
    from acidstream.acid.schema import TableSchema
    from acidstream.acid.storage import Storage

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``read``, ``dump`` and ``ls`` sub-commands."""
    p = subparsers.add_parser("read", help="print the rows visible in a snapshot of a table")
    p.add_argument(
        "path", metavar="PATH", help="table or partition directory, ACID file, or db.table"
    )
    _snapshot_args(p)
    p.add_argument("--row-id", action="store_true", help="add Hive's row__id to every row")
    p.add_argument(
        "--columns",
        type=column_list,
        metavar="COL[,COL...]",
        help="comma-separated columns to print, each once (default: all)",
    )
    p.add_argument("--format", choices=("jsonl", "table"), default="jsonl", help="output format")
    p.set_defaults(func=_cmd_read)

    p = subparsers.add_parser("dump", help="print the events and ACID metadata of one ORC file")
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--flush-length",
        default="auto",
        help="read the first N bytes only; 'auto' (default) uses the _flush_length side file if any",
    )
    add_storage_option(p)  # the file may be on an object store
    p.set_defaults(func=_cmd_dump)

    p = subparsers.add_parser("ls", help="print the directories a snapshot of a table uses")
    p.add_argument("path", metavar="PATH")
    _snapshot_args(p)
    p.add_argument(
        "--where",
        action="append",
        default=[],
        help="a condition (COL = V, COL != V, COL IN (V, ...); repeat to AND them): show which "
        "list-bucketing directories a read with it would skip",
    )
    p.set_defaults(func=_cmd_ls)


def column_list(text: str) -> list[str]:
    """``--columns``: names separated by commas. An empty name (``,``, ``a,,b``, a trailing
    comma) or a name given twice (case-insensitive, as column names are) is a usage error
    (argparse: exit 2): a read of no column, or of a column twice, is never what was meant."""
    names = [c.strip() for c in text.split(",")]
    seen: dict[str, int] = {}
    for i, name in enumerate(names, 1):
        if not name:
            raise argparse.ArgumentTypeError(f"column {i} of {text!r} is empty")
        if name.lower() in seen:
            raise argparse.ArgumentTypeError(
                f"column {name!r} is named twice in {text!r} (columns {seen[name.lower()]} and {i})"
            )
        seen[name.lower()] = i
    return names


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
    p.add_argument("--namespace", help="bind to this namespace: T, T1@B name its tables/links")


@dataclass(frozen=True)
class _Target:
    """What PATH names: a path, plus for a catalog table its schema and partition keys."""

    path: str
    source: str = "path"  # "table db.t", "partition db.t/ds=1", a link's, or "path"
    schema: TableSchema | None = None
    partition_keys: tuple[str, ...] = ()
    partitions: frozenset[str] | None = None  # through a static link: the ones it exposes
    skews: Mapping[PartitionValues, SkewedInfo] = field(default_factory=dict)
    lease: Any = field(default=None, compare=False)  # the read txn (``lease=True``)


def _resolve_table_arg(
    arg: str, args: argparse.Namespace | None = None, *, lease: bool = False
) -> _Target:
    """Turn the PATH argument into a path and a snapshot (``acidstream.snapshot_read``): a
    ``db.table`` name, or a path that is a registered table or partition location, reads
    with the metastore's snapshot unless ``--write-ids``/``--txns`` are given; any other
    path reads everything valid, with a one-line warning saying so."""
    from acidstream.snapshot_read import resolve

    target = resolve(
        arg,
        metastore=getattr(args, "metastore", None),
        warehouse=getattr(args, "warehouse", None),
        write_ids=getattr(args, "write_ids", None),
        txns=getattr(args, "txns", None),
        namespace=getattr(args, "namespace", None),
        lease=lease,
        storage_options=storage_options_of(args) if args is not None else None,
    )
    if args is not None:
        if target.write_ids is not None and getattr(args, "write_ids", None) is None:
            args.write_ids = str(target.write_ids)
        if target.txns is not None and getattr(args, "txns", None) is None:
            args.txns = str(target.txns)
        # said after the output, so that a failure stays one line
        args.no_snapshot_warning = (
            f"acidstream: warning: no snapshot for {arg} (no metastore knows this path): "
            "every write id was read as committed"
            if not target.has_snapshot and getattr(args, "write_ids", None) is None
            else None
        )
    return _Target(
        target.path,
        source=target.source,
        schema=target.schema,
        partition_keys=target.partition_keys,
        partitions=target.partitions,
        skews=target.skews,
        lease=target.lease,
    )


def _warn_no_snapshot(args: argparse.Namespace) -> None:
    if getattr(args, "no_snapshot_warning", None):
        print(args.no_snapshot_warning, file=sys.stderr)


def _storage(path: str, args: argparse.Namespace) -> tuple[Storage, str]:
    """``Storage.for_path`` with the command's ``--storage-option``s."""
    from acidstream.acid.storage import Storage

    return Storage.for_path(path, storage_options=storage_options_of(args))


def _location_exists(target: _Target, args: argparse.Namespace) -> bool:
    """Whether the target's directory exists; a catalog table's may not yet (no writes)."""
    storage, spath = _storage(target.path, args)
    return storage.exists(spath)


def _check_columns(target: _Target, columns: Sequence[str]) -> None:
    """Refuse a ``--columns`` name the table does not have, naming the ones it has
    (table columns, then partition columns). Known for a catalog table only; for a bare
    path the reader refuses it once it has read the files' schema."""
    if target.schema is None:
        return
    names = [*target.schema.names, *target.partition_keys]
    known = {n.lower() for n in names}
    for c in columns:
        if c.lower() not in known:
            what = target.source if target.source != "path" else target.path
            raise ConfigError(
                f"--columns: unknown column {c!r} in {what}; its columns are {', '.join(names)}"
            )


def _cmd_read(args: argparse.Namespace) -> int:
    from acidstream.acid.json_values import json_lines
    from acidstream.snapshot_read import scan_location

    target = _resolve_table_arg(args.path, args, lease=True)
    # The read txn keeps the Cleaner off the snapshot's files until the last row is out.
    try:
        columns: list[str] | None = args.columns  # checked by column_list
        if columns is not None:
            _check_columns(target, columns)
        # A catalog table nothing was written to yet reads as zero rows with its columns.
        s = scan_location(
            target.path,
            partitions=target.partitions,  # through a static link: only its partitions
            partition_keys=target.partition_keys,
            write_ids=args.write_ids,
            txns=args.txns,
            columns=columns,
            include_row_id=args.row_id,
            schema=target.schema,
            storage_options=storage_options_of(args),
        )
        schema, batches = s.schema, s.batches
        out = sys.stdout
        if args.format == "jsonl":
            for t in batches:
                for line in json_lines(t):
                    out.write(line + "\n")
        else:
            _print_table_stream(schema.names, batches, out)
    finally:
        if target.lease is not None:
            target.lease.close()
    _warn_no_snapshot(args)
    return 0


# The table format sizes its columns on the first rows only, so that it streams.
_TABLE_SIZING_ROWS = 1000


def _print_table_stream(names: Sequence[str], batches: Iterable[pa.Table], out: Any) -> None:
    """``--format table``: a header sized on the first rows, then every row as it comes
    (a longer value later on widens its own line only), then ``(N rows)``."""
    from acidstream.acid.json_values import json_rows

    rows = ([_cell(row[n]) for n in names] for t in batches for row in json_rows(t))
    head: list[list[str]] = []
    for r in rows:
        head.append(r)
        if len(head) >= _TABLE_SIZING_ROWS:
            break
    widths = [len(h) for h in names]
    for r in head:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() + "\n"

    out.write(line(names))
    out.write("  ".join("-" * w for w in widths) + "\n")
    n = 0
    for r in head:
        out.write(line(r))
        n += 1
    for r in rows:
        out.write(line(r))
        n += 1
    out.write(f"({n} rows)\n")


def _cell(value: Any) -> str:
    """A table cell: the JSON form of the value, strings unquoted, NULL for null."""
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return value
    from acidstream.acid.json_values import json_dumps

    return json_dumps(value)


def _cmd_dump(args: argparse.Namespace) -> int:
    from acidstream.acid.json_values import json_dumps, json_lines
    from acidstream.acid.orc_inspect import inspect_orc, logical_length, read_flush_lengths
    from acidstream.acid.orc_read import read_orc_columns

    storage, path = _storage(args.file, args)
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
    out.write(json_dumps({"metadata": meta}) + "\n")
    # canonical field names, as orc-tools prints Hive's files
    canon = {v: k for k, v in (info.acid_columns or {}).items()}
    for i in range(info.nstripes):
        batch = read_orc_columns(orcf, storage=storage, path=path, length=length, stripe=i)
        batch = batch.rename_columns([canon.get(n, n) for n in batch.schema.names])
        for line in json_lines(batch):
            out.write(line + "\n")
    return 0


def _cmd_ls(args: argparse.Namespace) -> int:
    from acidstream.acid.directory import get_acid_state
    from acidstream.acid.list_bucketing_prune import ListBucketingPruner, from_predicates
    from acidstream.acid.partitions import discover_partitions
    from acidstream.acid.snapshot import ValidTxnList, ValidWriteIdList

    target = _resolve_table_arg(args.path, args)
    header = ["PARTITION", "KIND", "NAME", "DETAIL"]
    if target.schema is not None and not _location_exists(target, args):
        print_table(header, [], sys.stdout)  # a catalog table nothing was written to
        return 0
    path = target.path
    storage, spath = _storage(path, args)
    if not storage.is_dir(spath):
        raise TableNotFoundError(f"{path}: not a table or partition directory")
    wids = ValidWriteIdList.from_string(args.write_ids)
    txns = ValidTxnList.from_string(args.txns)
    conditions = [_where_predicate(w) for w in getattr(args, "where", [])]
    pruner = ListBucketingPruner(
        skews=target.skews,
        schema=target.schema,
        expr=from_predicates(conditions) if conditions else None,
    )
    rows: list[list[str]] = []
    for part in discover_partitions(storage, spath):
        rel = os.path.relpath(part.path, spath) if part.path != spath else "."
        if target.partitions is not None and rel not in target.partitions:
            continue  # through a static link: only the partitions it exposes
        st = get_acid_state(
            part.path, write_ids=wids, txns=txns, storage=storage,
            lb_location_dirs=pruner.location_dirs(part),
        )  # fmt: skip
        sel = pruner.selection(part)
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
            rows += _lb_rows(rel, b, sel, bool(conditions))
        for d in st.deltas:
            kind = "delete_delta" if d.is_delete else "delta"
            side = [f"{f.name}@{f.logical_length}" for f in d.files if f.logical_length != f.length]
            detail = ", ".join(
                x for x in (f"{len(d.files)} files", _statement(d.name), d.is_raw and "raw") if x
            )
            if side:
                detail += ", flush lengths " + " ".join(side)
            rows.append([rel, kind, d.name, detail])
            rows += _lb_rows(rel, d, None if d.is_delete else sel, bool(conditions))
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
            rows.append([rel, "obsolete", os.path.relpath(p, part.path), _statement(p)])
        for p in st.aborted:
            rows.append([rel, "aborted", os.path.relpath(p, part.path), _statement(p)])
    print_table(header, rows, sys.stdout)
    _warn_no_snapshot(args)
    return 0


def _statement(path: str) -> str:
    """``statement S`` for a ``[delete_]delta_W_W_SSSS`` directory: which statement of its
    txn wrote it (a MERGE's clauses, an UPDATE's two halves); ``""`` for names without a
    statement id (streaming and compacted deltas, bases)."""
    parsed = parse_dir_name(path.rstrip("/").rsplit("/", 1)[-1])
    if isinstance(parsed, ParsedDelta) and parsed.statement_id >= 0:
        return f"statement {parsed.statement_id}"
    return ""


def _lb_rows(rel: str, d: AcidDir, sel: LbSelection | None, where: bool) -> list[list[str]]:
    """One ``lb_dir`` row per list-bucketing directory of a chosen base/delta: its files,
    and with ``--where`` whether a read with that filter reads it."""
    counts: dict[str, int] = {}
    for f in d.files:
        if f.lb_dir:
            counts[f.lb_dir] = counts.get(f.lb_dir, 0) + 1
    out = []
    for lb, n in sorted(counts.items()):
        detail = f"{n} files"
        if where:
            detail += ", read" if sel is None or sel.keeps(lb) else ", skipped"
        out.append([rel, "lb_dir", f"{d.name}/{lb}", detail])
    return out


_WHERE = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:(!=|<>|==|=)\s*(.*?)|\s(?i:in)\s*\((.*)\))\s*$", re.S
)


def _where_value(text: str) -> str:
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    return t


def _where_predicate(text: str) -> tuple[str, str, Any]:
    """``--where`` as a reader predicate: ``COL = V``, ``COL != V`` or ``COL IN (V, ...)``
    (values as text, optionally quoted; the reader casts them to the column's type)."""
    m = _WHERE.match(text)
    if m is None:
        raise ConfigError(
            f"--where {text!r}: expected COL = VALUE, COL != VALUE or COL IN (V, ...)"
        )
    col = m.group(1).lower()
    if m.group(4) is not None:
        return (col, "in", tuple(_where_value(v) for v in m.group(4).split(",")))
    op = "!=" if m.group(2) in ("!=", "<>") else "="
    return (col, op, _where_value(m.group(3)))
