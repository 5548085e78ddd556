"""``acidstream fsck | repair | sink-state``: an operator's tools after an incident.

* ``fsck db.t|PATH`` checks a table's files against its metastore (``acidstream.recovery.fsck``);
  exit 0 clean, 6 leftovers ``repair`` can clear, 7 unreadable data;
* ``repair db.t [--apply]`` plans (dry run) or carries out the repair
  (``acidstream.recovery.repair``); exit as fsck after it, 4 when an action failed on the file
  system (each failure listed, the one-line error on stderr);
* ``sink-state CONFIG|db.t`` prints what each sink and resumable ingest recorded in the
  table (``acidstream.recovery.sink_state``).

Names follow ``acidstream.txn.namespaces`` (``--namespace``, namespace mode): ``fsck`` and
``sink-state`` read (a link checks its target), ``repair`` writes (a link is refused).

See ``docs/recovery.md``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

from acidstream.cli.main import storage_options_of
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
    _namespace(p)
    p.set_defaults(func=_cmd_sink_state)


def _namespace(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--namespace", help="bind to this namespace: TABLE is then T, <namespace>.T or a link T1@B"
    )


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument(
        "--txn-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="open txns silent this long are dead writers' (default: the metastore's "
        "txn_timeout_s, which writers heartbeat from; a shorter value also takes live "
        "writers for dead)",
    )
    p.add_argument("--metastore", help="metastore URL (default: $ACIDSTREAM_METASTORE)")
    p.add_argument("--warehouse", help="warehouse root (default: $ACIDSTREAM_WAREHOUSE)")
    _namespace(p)


@dataclass
class _Target:
    """What ``fsck``/``repair`` act on: a table of a metastore (``partitions``: only these,
    e.g. a static link's), or (``store`` ``None``) a path no metastore knows."""

    store: Any
    table: Any
    partitions: tuple[str, ...] | None = None
    path: str | None = None


def _resolve(args: argparse.Namespace, *, write: bool) -> _Target:
    """The table of a name or a registered path, bound as ``acidstream.txn.namespaces`` says: a read
    (``fsck``) through :func:`~acidstream.txn.namespaces.resolve_read` (a link checks its target), a
    write (``repair``) through :func:`~acidstream.txn.namespaces.resolve_write` (a link is refused)."""
    from acidstream.acid.errors import TableNotFoundError
    from acidstream.snapshot_read import find_registered
    from acidstream.txn.config import StoreConfig
    from acidstream.txn.namespaces import (
        check_table_namespace,
        refuse_link,
        resolve_read,
        resolve_write,
    )

    cfg = StoreConfig.resolve(
        metastore=args.metastore,
        warehouse=args.warehouse,
        storage_options=storage_options_of(args),
    )
    target: str = args.target
    namespace: str | None = args.namespace
    is_path = "://" in target or os.path.exists(target) or "/" in target
    if is_path and write:
        raise TableNotFoundError(f"{target}: give a db.table name")
    if write and not is_path:
        refuse_link(target, action="repair")  # before any store is opened
    meta_db = cfg.metastore_url.removeprefix("sqlite:///")
    has_store = not cfg.metastore_url.startswith("sqlite:") or os.path.exists(meta_db)
    if not has_store:
        if is_path and namespace is None:
            return _Target(None, None, path=target)
        raise TableNotFoundError(f"{target}: no metastore at {cfg.metastore_url}")
    store = cfg.open(read_only=not write)  # fsck reads; repair writes
    try:
        if is_path:
            # every spelling of a registered location (symlink, file:// URL, '..'), as read
            found = find_registered(store, target)
            if found is None:
                if namespace is not None:
                    raise TableNotFoundError(
                        f"{target}: no table of namespace {namespace} is at this path"
                    )
                store.close()
                return _Target(None, None, path=target)
            table, partition, _registered = found
            check_table_namespace(store, table.db, namespace=namespace)
            return _Target(store, table, None if partition is None else (partition,))
        if write:
            name = resolve_write(store, target, namespace=namespace, action="repair")
            return _Target(store, store.get_table(name.db, name.table))
        ref = resolve_read(store, target, namespace=namespace)
        table = store.get_table(ref.table.db, ref.table.table)
        parts = ref.partitions
        return _Target(store, table, None if parts is None else tuple(sorted(parts)))
    except BaseException:
        store.close()
        raise


def _print_findings(report: Any, *, verbose: bool) -> None:
    from acidstream.recovery.fsck import Severity

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
    from acidstream.recovery.fsck import fsck_path, fsck_table

    t = _resolve(args, write=False)
    if t.store is None:
        assert t.path is not None
        report = fsck_path(t.path, deep=not args.quick, storage_options=storage_options_of(args))
    else:
        try:
            report = fsck_table(
                t.store,
                t.table,
                partitions=t.partitions,
                txn_timeout_s=args.txn_timeout,
                deep=not args.quick,
            )
        finally:
            t.store.close()
    if args.format == "json":
        print(report.to_json())
    else:
        _print_findings(report, verbose=args.verbose)
    code: int = report.exit_code
    return code


def _cmd_repair(args: argparse.Namespace) -> int:
    from acidstream.acid.errors import StorageError
    from acidstream.recovery.repair import repair_table

    t = _resolve(args, write=True)
    try:
        report = repair_table(t.store, t.table, apply=args.apply, txn_timeout_s=args.txn_timeout)
    finally:
        t.store.close()
    failed = report.failed
    if args.format == "json":
        print(report.to_json())
    else:
        _print_repair(report)
    if failed:
        # One line on stderr and exit 4 (main); each failure is in the listing above.
        first = failed[0]
        more = f" (and {len(failed) - 1} more, listed above)" if len(failed) > 1 else ""
        raise StorageError(
            f"repair of {report.table}: {len(failed)} of {len(report.actions)} actions "
            f"failed; {first.error}{more}"
        )
    code: int = report.exit_code
    return code


def _print_repair(report: Any) -> None:
    """The plan, or what was done (``FAILED: ...`` / ``skipped: ...`` per action)."""
    if report.actions:
        print_table(
            ("action", "path", "result" if report.applied else "plan"),
            [
                (
                    a.action,
                    a.path,
                    _result(a) if report.applied else a.detail,
                )
                for a in report.actions
            ],
        )
    else:
        print("nothing to repair")
    if not report.applied:
        print(f"{report.table}: dry run (add --apply to carry it out)")
    elif report.failed:
        done = sum(a.done for a in report.actions)
        print(f"{report.table}: NOT repaired: {len(report.failed)} actions failed, {done} done")
    else:
        print(f"{report.table}: applied")
    if report.after is not None:
        _print_findings(report.after, verbose=False)


def _result(a: Any) -> str:
    if a.failed:
        return f"FAILED (StorageError): {a.error}"
    return str(a.error or a.detail)


def _cmd_sink_state(args: argparse.Namespace) -> int:
    import json

    from acidstream.recovery.sink_state import sink_records
    from acidstream.txn.config import StoreConfig
    from acidstream.txn.namespaces import resolve_read

    target: str = args.target
    sink_id = args.sink_id
    metastore, warehouse = args.metastore, args.warehouse
    namespace: str | None = args.namespace
    if target.endswith((".yaml", ".yml")) or os.path.isfile(target):
        from acidstream.jobs.config import KafkaJobConfig

        job = KafkaJobConfig.load(target)
        table_name = job.table.name
        sink_id = sink_id or job.sink.sink_id
        metastore = metastore or job.metastore
        warehouse = warehouse or job.warehouse
        namespace = namespace or job.table.namespace
    else:
        table_name = target
    cfg = StoreConfig.resolve(metastore=metastore, warehouse=warehouse)
    store = cfg.open(read_only=True)
    try:
        # A read: the client's binding holds, and a link shows its target's records.
        ref = resolve_read(store, table_name, namespace=namespace)
        table = store.get_table(ref.table.db, ref.table.table)
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
