"""Namespaces and links on the command line (``docs/namespaces.md``).

``namespace-mode [on|off]``, ``create-link A T1@B [--dynamic]``, ``alter-link A T1@B
add-partition|drop-partition ds=...``, ``drop-link A T1@B``, ``show-links [--namespace A]``
and ``usage [--namespace A]``. Reading through a link is ``acidstream read 'T1@B'
--namespace A``. The rules live in :mod:`acidstream.txn.namespaces` and :mod:`acidstream.txn.links_sql`.
"""

from __future__ import annotations

import argparse
import json

from acidstream.acid.errors import ConfigError
from acidstream.cli.main import storage_options_of
from acidstream.cli.output import print_table
from acidstream.txn.config import StoreConfig
from acidstream.txn.links_sql import LinkDef
from acidstream.txn.namespaces import parse_name
from acidstream.txn.store import TxnStore

__all__ = ["link_partitions", "register"]


def _open(args: argparse.Namespace, *, read_only: bool = False) -> TxnStore:
    cfg = StoreConfig.resolve(
        metastore=args.metastore,
        warehouse=args.warehouse,
        storage_options=storage_options_of(args),
    )
    return cfg.open(read_only=read_only)


def _link_target(namespace: str, name: str) -> tuple[str, str]:
    """``T1@B`` (or ``A.T1@B`` naming the same namespace) as ``(B, T1)``."""
    ref = parse_name(name)
    if ref.link_owner is None:
        raise ConfigError(f"{name!r} is not a link name: expected table@namespace (T1@B)")
    if ref.db is not None and ref.db != namespace.strip().lower():
        raise ConfigError(f"{name!r} names a link of namespace {ref.db}, not of {namespace}")
    return ref.link_owner, ref.table


def link_partitions(link: LinkDef) -> str:
    """What a link exposes, in words (``show-links``, ``describe``)."""
    if not link.target_exists:
        return "target missing"
    if link.dynamic:
        return "all (dynamic)"
    if not link.target_partitioned:
        return "whole table"
    shown = [p + (" (missing)" if p in link.missing else "") for p in link.partitions]
    return ", ".join(shown) or "none"


def _link_json(link: LinkDef) -> dict[str, object]:
    return {
        "namespace": link.namespace,
        "link": link.name,
        "target": f"{link.target_db}.{link.target_table}",
        "dynamic": link.dynamic,
        "partitions": list(link.partitions),
        "missing_partitions": list(link.missing),
        "target_exists": link.target_exists,
    }


def _namespace_mode(args: argparse.Namespace) -> int:
    if args.state is None:
        with _open(args, read_only=True) as store:
            print(f"namespace mode is {'on' if store.namespace_mode() else 'off'}")
        return 0
    with _open(args) as store:
        store.set_namespace_mode(args.state == "on")
    print(f"namespace mode is {args.state}")
    return 0


def _create_link(args: argparse.Namespace) -> int:
    owner, table = _link_target(args.namespace, args.link)
    with _open(args) as store:
        link = store.create_link(args.namespace, owner, table, dynamic=args.dynamic)
    kind = "dynamic" if link.dynamic else "static"
    print(f"created {kind} link {link.full_name} -> {link.target_db}.{link.target_table}")
    return 0


def _alter_link(args: argparse.Namespace) -> int:
    owner, table = _link_target(args.namespace, args.link)
    add = args.action == "add-partition"
    with _open(args) as store:
        link = store.alter_link_partition(args.namespace, owner, table, args.partition, add=add)
    print(f"{link.full_name}: partitions {link_partitions(link)}")
    return 0


def _drop_link(args: argparse.Namespace) -> int:
    owner, table = _link_target(args.namespace, args.link)
    with _open(args) as store:
        store.drop_link(args.namespace, owner, table)
    print(f"dropped link {args.namespace.strip().lower()}.{table}@{owner}")
    return 0


def _show_links(args: argparse.Namespace) -> int:
    with _open(args, read_only=True) as store:
        links = store.list_links(args.namespace)
    if args.format == "json":
        print(json.dumps([_link_json(x) for x in links], indent=2))
        return 0
    rows = [
        (x.namespace, x.name, f"{x.target_db}.{x.target_table}", link_partitions(x)) for x in links
    ]
    print_table(("namespace", "link", "target", "partitions"), rows)
    return 0


_USAGE_COLUMNS = (
    "namespace", "tables", "partitions", "files", "bytes", "bases", "deltas", "delete_deltas",
    "links", "linked_by",
)  # fmt: skip


def _usage(args: argparse.Namespace) -> int:
    from acidstream.txn.usage import namespace_usage

    with _open(args, read_only=True) as store:
        usage = namespace_usage(store, args.namespace)
    if args.format == "json":
        print(json.dumps([u.as_dict() for u in usage], indent=2))
        return 0
    rows = [[u.as_dict()[c] for c in _USAGE_COLUMNS] for u in usage]
    print_table(_USAGE_COLUMNS, rows)
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metastore", metavar="URL", help="metastore URL (default: $ACIDSTREAM_METASTORE)"
    )
    p.add_argument(
        "--warehouse", metavar="PATH", help="warehouse root (default: $ACIDSTREAM_WAREHOUSE)"
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the namespace and link sub-commands to the ``acidstream`` parser."""
    p = subparsers.add_parser(
        "namespace-mode", help="show or set namespace mode (clients bound to a namespace)"
    )
    p.add_argument("state", nargs="?", choices=("on", "off"), help="on or off (default: show)")
    _common(p)
    p.set_defaults(func=_namespace_mode)

    p = subparsers.add_parser(
        "create-link", help="link namespace A to table T1 of namespace B (metadata only)"
    )
    p.add_argument("namespace", metavar="A", help="the namespace that holds the link")
    p.add_argument("link", metavar="T1@B", help="the linked table and its namespace")
    p.add_argument(
        "--dynamic", action="store_true", help="follow all of B's partitions (default: static)"
    )
    _common(p)
    p.set_defaults(func=_create_link)

    p = subparsers.add_parser(
        "alter-link", help="add a partition to, or drop one from, a static link"
    )
    p.add_argument("namespace", metavar="A")
    p.add_argument("link", metavar="T1@B")
    p.add_argument("action", choices=("add-partition", "drop-partition"))
    p.add_argument("partition", metavar="K=V[/K=V]", help="a partition of B's table, e.g. ds=1")
    _common(p)
    p.set_defaults(func=_alter_link)

    p = subparsers.add_parser("drop-link", help="remove a link (B's table is untouched)")
    p.add_argument("namespace", metavar="A")
    p.add_argument("link", metavar="T1@B")
    _common(p)
    p.set_defaults(func=_drop_link)

    p = subparsers.add_parser("show-links", help="the links each namespace holds")
    p.add_argument("--namespace", metavar="A", help="only the links of this namespace")
    p.add_argument("--format", choices=("table", "json"), default="table")
    _common(p)
    p.set_defaults(func=_show_links)

    p = subparsers.add_parser(
        "usage", help="bytes, files, tables, partitions and deltas per namespace"
    )
    p.add_argument("--namespace", metavar="A", help="only this namespace")
    p.add_argument("--format", choices=("table", "json"), default="table")
    _common(p)
    p.set_defaults(func=_usage)
