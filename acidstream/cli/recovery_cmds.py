"""``acidstream fsck | repair | sink-state``: an operator's tools after an incident.

* ``fsck db.t|PATH`` checks a table's files against its metastore (``recovery.fsck``);
  exit 0 clean, 6 leftovers ``repair`` can clear, 7 unreadable data;
* ``repair db.t [--apply]`` plans (dry run) or carries out the repair
  (``recovery.repair``); exit as fsck after it;
* ``sink-state CONFIG|db.t`` prints what each sink and resumable ingest recorded in the
  table (``recovery.sink_state``).

See ``docs/recovery.md``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from acidstream.cli.output import print_table

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``fsck``, ``repair`` and ``sink-state``."""
    p = subparsers.add_parser(
        "fsck", help="check a table's files against its metastore (exit 0 clean, 6, 7)"
    )
    p.add_argument("target", metavar="TABLE|PATH", help="db.table, or a table/partition path")
    _common(p)
    p.add_argument(
        "--quick", action="store_true", help="open file tails only (default: decode every stripe)"
    )
    p.add_argument("--verbose", "-v", action="store_true", help="list information findings too")
    p.set_defaults(func=_cmd_fsck)

    p = subparsers.add_parser(
        "repair", help="clear a failure's leftovers in a table (dry run unless --apply)"
    )
    p.add_argument("target", metavar="TABLE", help="db.table")
    _common(p)
    p.add_argument("--apply", action="store_true", help="carry the plan out (default: dry run)")
    p.set_defaults(func=_cmd_repair, quick=False)

    p = subparsers.add_parser(
        "sink-state", help="what each sink and resumable ingest recorded in a table"
    )
    p.add_argument("target", metavar="CONFIG|TABLE", help="a Kafka job YAML config, or db.table")
    p.add_argument("--sink-id", help="only this sink (default: the config's, or every one)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--metastore", help="metastore URL (default: $ACIDSTREAM_METASTORE)")
    p.add_argument("--warehouse", help="warehouse root (default: $ACIDSTREAM_WAREHOUSE)")
    p.set_defaults(func=_cmd_sink_state)


def _common(p: argparse.ArgumentParser) -> None:
    from txn.store import DEFAULT_TXN_TIMEOUT_S

    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument(
        "--txn-timeout",
        type=float,
        default=DEFAULT_TXN_TIMEOUT_S,
        metavar="SECONDS",
        help=f"open txns silent this long are dead writers' (default {DEFAULT_TXN_TIMEOUT_S:g})",
    )
    p.add_argument("--metastore", help="metastore URL (default: $ACIDSTREAM_METASTORE)")
    p.add_argument("--warehouse", help="warehouse root (default: $ACIDSTREAM_WAREHOUSE)")


def _resolve(args: argparse.Namespace, *, allow_path: bool) -> tuple[Any, Any, str | None]:
    """(store, table, partition) for a name or a registered path; (None, None, path) for a
    path no metastore knows."""
    from acid.errors import TableNotFoundError
    from acid.storage import Storage
    from acid.table_name import TableName
    from txn.config import StoreConfig
    from txn.namespaces import refuse_link

    cfg = StoreConfig.resolve(metastore=args.metastore, warehouse=args.warehouse)
    target: str = args.target
    is_path = "://" in target or os.path.exists(target) or "/" in target
    if is_path and not allow_path:
        raise TableNotFoundError(f"{target}: give a db.table name")
    meta_db = cfg.metastore_url.removeprefix("sqlite:///")
    has_store = not cfg.metastore_url.startswith("sqlite:") or os.path.exists(meta_db)
    if not has_store:
        if is_path:
            return None, None, target
        raise TableNotFoundError(f"{target}: no metastore at {cfg.metastore_url}")
    store = cfg.open(read_only=allow_path)  # fsck reads; repair writes
    try:
        if is_path:
            _s, path = Storage.for_path(target)
            found = store.find_location(path if "://" not in target else target)
            if found is None:
                store.close()
                return None, None, target
            table, partition = found
            return store, table, partition
        refuse_link(target, action="check" if allow_path else "repair")
        name = TableName.parse(target)
        return store, store.get_table(name.db, name.table), None
    except BaseException:
        store.close()
        raise


def _print_findings(report: Any, *, verbose: bool) -> None:
    from recovery.fsck import Severity

    shown = [f for f in report.findings if verbose or f.severity > Severity.INFO]
    if shown:
        print_table(
            ("severity", "kind", "path", "detail"),
            [(str(f.severity), f.kind, f.path, f.detail) for f in shown],
        )
    hidden = len(report.findings) - len(shown)
    status = "clean" if report.clean else str(report.worst)
    print(
        f"{report.target}: {status}; {report.files_checked} files in {report.dirs_checked} "
        f"directories, {report.partitions_checked} partitions checked"
        + (f"; {hidden} information findings (-v lists them)" if hidden else "")
    )


def _cmd_fsck(args: argparse.Namespace) -> int:
    from recovery.fsck import fsck_path, fsck_table

    store, table, partition = _resolve(args, allow_path=True)
    if store is None:
        assert partition is not None  # the path itself
        report = fsck_path(partition, deep=not args.quick)
    else:
        try:
            report = fsck_table(
                store,
                table,
                partition=partition,
                txn_timeout_s=args.txn_timeout,
                deep=not args.quick,
            )
        finally:
            store.close()
    if args.format == "json":
        print(report.to_json())
    else:
        _print_findings(report, verbose=args.verbose)
    code: int = report.exit_code
    return code


def _cmd_repair(args: argparse.Namespace) -> int:
    from recovery.repair import repair_table

    store, table, _partition = _resolve(args, allow_path=False)
    assert store is not None
    try:
        report = repair_table(store, table, apply=args.apply, txn_timeout_s=args.txn_timeout)
    finally:
        store.close()
    if args.format == "json":
        print(report.to_json())
        code: int = report.exit_code
        return code
    mode = "applied" if report.applied else "dry run (add --apply to carry it out)"
    if report.actions:
        print_table(
            ("action", "path", "result" if report.applied else "plan"),
            [
                (
                    a.action,
                    a.path,
                    (a.error or a.detail) if report.applied else a.detail,
                )
                for a in report.actions
            ],
        )
    else:
        print("nothing to repair")
    print(f"{report.table}: {mode}")
    if report.after is not None:
        _print_findings(report.after, verbose=False)
    return report.exit_code


def _cmd_sink_state(args: argparse.Namespace) -> int:
    import json

    from acid.table_name import TableName
    from recovery.sink_state import sink_records
    from txn.config import StoreConfig

    target: str = args.target
    sink_id = args.sink_id
    metastore, warehouse = args.metastore, args.warehouse
    if target.endswith((".yaml", ".yml")) or os.path.isfile(target):
        from sinks.config import KafkaJobConfig

        job = KafkaJobConfig.load(target)
        table_name = job.table.name
        sink_id = sink_id or job.sink.sink_id
        metastore = metastore or job.metastore
        warehouse = warehouse or job.warehouse
    else:
        table_name = target
    cfg = StoreConfig.resolve(metastore=metastore, warehouse=warehouse)
    name = TableName.parse(table_name)
    store = cfg.open(read_only=True)
    try:
        table = store.get_table(name.db, name.table)
    finally:
        store.close()
    records = sink_records(table, sink_id=sink_id)
    if args.format == "json":
        print(
            json.dumps(
                [
                    {"kind": r.kind, "key": r.key, "writer": r.writer, "value": r.value}
                    for r in records
                ],
                indent=2,
            )
        )
        return 0
    if not records:
        who = f"sink {sink_id!r}" if sink_id else "any sink or resumable ingest"
        print(f"{table.full_name}: nothing recorded for {who} (a stream starts from scratch)")
        return 0
    print_table(
        ("kind", "writer", "restarts", "write ids", "rows"),
        [
            (
                r.kind,
                r.writer,
                r.position,
                _range(r.value.get("write_ids")),
                str(r.value.get("rows", "")),
            )
            for r in records
        ],
    )
    return 0


def _range(v: Any) -> str:
    if isinstance(v, list) and len(v) == 2:
        return f"{v[0]}..{v[1]}"
    return ""
