"""``acidstream delete | update | merge``: row-level mutations from the shell (issue 30 item 6).

Each command is one statement in one txn with one write id, run through the Table handle
(``acidstream.table(...).delete / update / merge``, ``docs/mutations.md``), and prints
what it changed: the row counts, the write id, the partitions and files written, the runs
it took and its time (``--format json`` for scripts). Predicates and SET values are SQL
text in Hive's syntax; every problem with them (unknown column, syntax, types) is a
``ConfigError`` before any txn opens, so nothing is written (exit 1).

* ``delete T --where COND`` (``--all`` for every row: a forgotten ``--where`` must not
  empty a table);
* ``update T --set "c = expr" [--set ...] --where COND | --all``;
* ``merge T --source FILE --on COL [--on COL...] | --on "src.a = tgt.a"``: the source is
  a Parquet or JSON-lines file; matched rows are deleted where ``--delete-when`` holds,
  the others updated from the source (``UPDATE SET *``) unless ``--no-update``, unmatched
  source rows inserted (``INSERT *``) unless ``--no-insert``.

Names follow the client's namespace binding (``--namespace``, namespace mode); a link is
refused before anything else (links are read-only, ``docs/namespaces.md``). A commit
conflict that ``--retries`` did not overcome exits 75 (nothing was written: run it
again); see ``cli/main.py`` and the README for every exit code. Runs in the calling
process (no Spark).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from acidstream.acid.errors import ConfigError
from acidstream.cli.output import print_table

if TYPE_CHECKING:  # pyarrow and the handle are imported when a command runs
    import pyarrow as pa

    from acidstream.merge_builder import MergeBuilder
    from acidstream.mutation import MergeResult, MutationResult
    from acidstream.table_handle import Table

__all__ = ["PROGRESS_INTERVAL_S", "read_source", "register"]

#: How often a running mutation says it is still running (stderr). A mutation is one txn
#: whose counts exist only when it commits, so the line gives the time, not counts.
PROGRESS_INTERVAL_S = 5.0

_PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_IDENTIFIER = re.compile(r"\s*(`[^`]+`|[A-Za-z_][A-Za-z0-9_]*)\s*")


def _non_negative(text: str) -> int:
    """``--retries``: an integer >= 0 (argparse turns the error into exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def _common(p: argparse.ArgumentParser) -> None:
    """The options every mutation command takes: store, binding, retries, key, output."""
    p.add_argument("table", metavar="TABLE", help="[db.]table (a link T1@B is refused)")
    p.add_argument(
        "--metastore", metavar="URL", help="metastore URL (default: $ACIDSTREAM_METASTORE)"
    )
    p.add_argument(
        "--warehouse", metavar="PATH", help="warehouse root (default: $ACIDSTREAM_WAREHOUSE)"
    )
    p.add_argument("--namespace", metavar="A", help="bind to namespace A: TABLE is then T or A.T")
    p.add_argument(
        "--retries", type=_non_negative, default=0, metavar="N",
        help="on a commit conflict (another mutation of a partition committed first) run "
        "again with a new snapshot, up to N times (default 0)",
    )  # fmt: skip
    p.add_argument(
        "--idempotency-key", metavar="KEY",
        help="stored with the commit: a later run with the same KEY prints the first run's "
        "result and writes nothing",
    )  # fmt: skip
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")


def _where(p: argparse.ArgumentParser, verb: str) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--where", metavar="COND", help=f'the rows to {verb}: SQL, e.g. "id = 7"')
    g.add_argument("--all", action="store_true", help=f"{verb} every row (no WHERE)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``delete``, ``update`` and ``merge`` to the ``acidstream`` parser."""
    p = subparsers.add_parser(
        "delete",
        help="DELETE FROM a table WHERE a condition (one txn)",
        description="DELETE FROM TABLE WHERE COND in one txn; prints the rows deleted and "
        "the write id. e.g. acidstream delete db.t --where \"ds = '2024-01-01' AND id < 10\"",
    )
    _common(p)
    _where(p, "delete")
    p.set_defaults(func=_cmd_delete)

    p = subparsers.add_parser(
        "update",
        help="UPDATE a table SET c = expr WHERE a condition (one txn)",
        description="UPDATE TABLE SET c = expr, ... WHERE COND in one txn; prints the rows "
        'updated and the write id. e.g. acidstream update db.t --set "v = upper(v)" '
        '--set "n = n + 1" --where "id = 7"',
    )
    _common(p)
    p.add_argument(
        "--set", dest="assignments", action="append", required=True, metavar="'C = EXPR'",
        help="a column and its new value, SQL (repeatable)",
    )  # fmt: skip
    _where(p, "update")
    p.set_defaults(func=_cmd_update)

    p = subparsers.add_parser(
        "merge",
        help="MERGE a Parquet or JSON-lines file INTO a table ON keys (one txn)",
        description="MERGE INTO TABLE USING FILE ON keys in one txn: matched rows are "
        "deleted where --delete-when holds, else updated from the source (UPDATE SET *) "
        "unless --no-update; unmatched source rows are inserted (INSERT *) unless "
        "--no-insert. e.g. acidstream merge db.t --source changes.parquet --on id "
        "--delete-when \"src.op = 'd'\" --insert-when \"src.op <> 'd'\"",
    )
    _common(p)
    p.add_argument(
        "--source", required=True, metavar="FILE",
        help="the source rows: a Parquet file, or JSON lines (one object per line)",
    )  # fmt: skip
    p.add_argument(
        "--source-format", choices=("parquet", "jsonl"),
        help="the source's format (default: from its name: .parquet/.pq, .jsonl/.ndjson/.json)",
    )  # fmt: skip
    p.add_argument(
        "--on", action="append", required=True, metavar="COL|COND",
        help="a key column named alike in both (repeatable), or once a SQL condition of "
        'equalities, e.g. "src.id = tgt.id AND src.ds = tgt.ds"',
    )  # fmt: skip
    p.add_argument("--source-alias", default="src", metavar="NAME", help="default src")
    p.add_argument("--target-alias", default="tgt", metavar="NAME", help="default tgt")
    p.add_argument(
        "--delete-when", metavar="COND",
        help="WHEN MATCHED AND COND THEN DELETE (before the update)",
    )  # fmt: skip
    p.add_argument(
        "--update", action=argparse.BooleanOptionalAction, default=True,
        help="WHEN MATCHED THEN UPDATE SET *: every table column the source has (default)",
    )  # fmt: skip
    p.add_argument("--update-when", metavar="COND", help="update only matched rows where COND")
    p.add_argument(
        "--insert", action=argparse.BooleanOptionalAction, default=True,
        help="WHEN NOT MATCHED THEN INSERT *: unmatched source rows (default)",
    )  # fmt: skip
    p.add_argument(
        "--insert-when", metavar="COND",
        help="insert only unmatched source rows where COND (it sees the source only), e.g. "
        "\"src.op <> 'd'\" so that a delete marker of a missing key is not inserted",
    )  # fmt: skip
    p.set_defaults(func=_cmd_merge)


# ---------------------------------------------------------------------------- commands


def _handle(args: argparse.Namespace, action: str) -> Table:
    """The Table handle of ``args.table``: a link refused first (before the store is even
    opened, as every writing command does), then the table looked up; a missing metastore
    is reported, never created (``TableNotFoundError``)."""
    from acidstream.table_handle import table
    from acidstream.txn.namespaces import refuse_link

    refuse_link(args.table, action=action)
    return table(
        args.table, metastore=args.metastore, warehouse=args.warehouse, namespace=args.namespace
    )


def _cmd_delete(args: argparse.Namespace) -> int:
    t = _handle(args, "delete from")
    where = None if args.all else args.where
    with _progress("delete", t.name):
        res = t.delete(where, retries=args.retries, idempotency_key=args.idempotency_key)
    _print_result(args, "delete", t.name, res)
    return 0


def _cmd_update(args: argparse.Namespace) -> int:
    from acidstream.acid.sql_text import parse_assignments

    sets = parse_assignments(args.assignments)  # syntax checked before the table is opened
    t = _handle(args, "update")
    where = None if args.all else args.where
    with _progress("update", t.name):
        res = t.update(sets, where, retries=args.retries, idempotency_key=args.idempotency_key)
    _print_result(args, "update", t.name, res)
    return 0


def _merge_on(values: Sequence[str]) -> str | list[str]:
    """``--on``: one value as it is (a column or a SQL condition, the API tells them apart),
    several as key columns, each of which must be a plain name."""
    if len(values) == 1:
        return values[0]
    for v in values:
        if not _IDENTIFIER.fullmatch(v):
            raise ConfigError(
                f"--on {v!r} is not a column name: repeat --on for key columns, or give one "
                'SQL condition, e.g. --on "src.a = tgt.a AND src.b = tgt.b"'
            )
    return list(values)


def _merge_builder(args: argparse.Namespace, t: Table, source: pa.Table) -> MergeBuilder:
    """The MERGE of the options: the DELETE clause first (the first matching WHEN clause
    wins, so a row ``--delete-when`` selects is deleted, not updated), then UPDATE SET *,
    then INSERT *."""
    b = t.merge(
        source,
        on=_merge_on(args.on),
        source_alias=args.source_alias,
        target_alias=args.target_alias,
    )
    if args.delete_when is not None:
        b = b.when_matched_delete(condition=args.delete_when)
    if args.update:
        b = b.when_matched_update_all(condition=args.update_when)
    if args.insert:
        b = b.when_not_matched_insert_all(condition=args.insert_when)
    return b


def _check_merge_options(args: argparse.Namespace) -> None:
    """Options that contradict each other, refused before the table or the file is read."""
    if args.update_when is not None and not args.update:
        raise ConfigError("--update-when and --no-update contradict each other")
    if args.insert_when is not None and not args.insert:
        raise ConfigError("--insert-when and --no-insert contradict each other")
    if args.delete_when is None and not args.update and not args.insert:
        raise ConfigError(
            "nothing to do: --no-update and --no-insert without --delete-when leave no WHEN clause"
        )
    _merge_on(args.on)


def _cmd_merge(args: argparse.Namespace) -> int:
    _check_merge_options(args)
    t = _handle(args, "merge into")
    source = read_source(args.source, fmt=args.source_format, schema=t.schema)
    builder = _merge_builder(args, t, source)
    with _progress("merge", t.name):
        res = builder.execute(idempotency_key=args.idempotency_key, retries=args.retries)
    _print_result(args, "merge", t.name, res)
    return 0


# ---------------------------------------------------------------------------- the source


def read_source(path: str, *, fmt: str | None = None, schema: pa.Schema | None = None) -> pa.Table:
    """The rows of a MERGE source file: Parquet as written, JSON lines with the table's
    non-string columns typed as the table declares them (``schema``; JSON alone cannot
    tell a date, a timestamp or a decimal from text or a double, and the MERGE's SET
    rules refuse a double into a decimal) and any other field's type inferred
    (source-only fields such as ``op`` stay usable in conditions).

    Raises:
        ConfigError: a format that cannot be told from the name, or a file that is not
            readable as its format (the message names the file).
        FileNotFoundError, PermissionError: the file cannot be opened (exit 1).
    """
    import pyarrow as pa

    fmt = fmt or _format_of(path)
    with open(path, "rb"):  # a missing or unreadable file is the OS's one-line error
        pass
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path)
        import pyarrow.json as pj

        typed = [f for f in schema or () if not pa.types.is_string(f.type)]
        # Arrow's JSON reader parses timestamps and decimals but not dates: those are read
        # as text, then cast (ISO dates, as Hive writes them). Timestamps are read in
        # nanoseconds, Hive's precision (a microsecond reader refuses '...:00.123456789').
        dates = {f.name: f.type for f in typed if pa.types.is_date(f.type)}
        read_as = [
            f.with_type(pa.string())
            if f.name in dates
            else f.with_type(pa.timestamp("ns"))
            if pa.types.is_timestamp(f.type)
            else f
            for f in typed
        ]
        parse = pj.ParseOptions(
            explicit_schema=pa.schema(read_as) if read_as else None,
            unexpected_field_behavior="infer",
        )
        t = pj.read_json(path, parse_options=parse)
        for name, typ in dates.items():
            if name in t.column_names:
                i = t.column_names.index(name)
                t = t.set_column(i, name, t.column(i).cast(typ))
        return t
    except (pa.ArrowException, ValueError) as e:
        reason = " ".join(str(e).split()) or type(e).__name__
        raise ConfigError(f"--source {path}: not readable as {fmt}: {reason}") from e


def _format_of(path: str) -> str:
    low = path.lower()
    if low.endswith(_PARQUET_SUFFIXES):
        return "parquet"
    if low.endswith(_JSONL_SUFFIXES):
        return "jsonl"
    raise ConfigError(
        f"--source {path}: cannot tell its format from the name; add --source-format "
        "parquet or --source-format jsonl"
    )


# ---------------------------------------------------------------------------- output


@contextmanager
def _progress(command: str, name: str) -> Iterator[None]:
    """While a mutation runs, a line on stderr every :data:`PROGRESS_INTERVAL_S` seconds
    (``ingest`` prints its progress there too): a long MERGE, or one waiting for a lock,
    otherwise looks hung. Quiet for runs shorter than that."""
    t0 = time.monotonic()
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(PROGRESS_INTERVAL_S):
            print(
                f"{command}: {name}: running for {time.monotonic() - t0:,.0f} s "
                "(one txn: its counts come when it commits)",
                file=sys.stderr,
                flush=True,
            )

    thread = threading.Thread(target=tick, name=f"acidstream-{command}-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


_COUNTS = {
    "delete": ("rows_deleted",),
    "update": ("rows_updated",),
    "merge": ("rows_inserted", "rows_updated", "rows_deleted"),
}


def _print_result(
    args: argparse.Namespace, command: str, name: str, res: MutationResult | MergeResult
) -> None:
    """The result as one row under a header (``--format table``) or one JSON object."""
    if args.format == "json":
        out: dict[str, Any] = {"command": command, "table": name, **dataclasses.asdict(res)}
        print(json.dumps(out, indent=2))
        return
    counts = _COUNTS[command]
    header = ("table", *counts, "write_id", "partitions", "files", "attempts", "seconds")
    row = (
        name,
        *(f"{getattr(res, c):,}" for c in counts),
        res.write_id,
        len(res.partitions),
        len(res.files_written),
        res.attempts,
        f"{res.seconds:.2f}",
    )
    print_table(header, [row])
    if res.replayed:
        print(
            f"replayed: idempotency key {args.idempotency_key!r} was committed by an earlier "
            "run (its result is shown); nothing was written now"
        )
