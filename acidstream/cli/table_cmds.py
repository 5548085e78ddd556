"""``acidstream alter-table | describe``: change and show a table's definition.

``alter-table`` does Hive's list-bucketing DDL (``SKEWED BY ... ON ... [STORED AS
DIRECTORIES]``, ``NOT SKEWED``, ``NOT STORED AS DIRECTORIES``, ``SET SKEWED LOCATION``);
each changes the table only, so partitions created afterwards get the new definition and
existing partitions keep theirs (as Hive does). ``describe`` prints a table's definition,
its skew, and with ``--partitions`` each partition's own skew. See ``docs/list_bucketing.md``.

Both follow the client's namespace binding (``--namespace``, namespace mode;
``docs/namespaces.md``): ``describe`` of a link describes its target and says it is a link,
``alter-table`` of a link is refused (links are read-only).
"""

from __future__ import annotations

import argparse

from acidstream.acid.errors import ConfigError
from acidstream.acid.list_bucketing import (
    DEFAULT_KEY,
    SkewedInfo,
    format_skewed_values,
    parse_skewed_location,
    parse_skewed_values,
)
from acidstream.cli.main import storage_options_of
from acidstream.cli.namespace_cmds import link_partitions
from acidstream.txn.config import StoreConfig
from acidstream.txn.namespaces import refuse_link, resolve_read, resolve_write
from acidstream.txn.store import TxnStore

__all__ = [
    "add_namespace_option",
    "add_skew_options",
    "register",
    "skew_summary",
    "skewed_from_args",
]


def add_namespace_option(p: argparse.ArgumentParser) -> None:
    """``--namespace A``: the client's binding (``docs/namespaces.md``)."""
    p.add_argument(
        "--namespace",
        metavar="A",
        help="bind to namespace A: T names A's table (with namespace mode on, a client "
        "without one is bound to default)",
    )


def add_skew_options(p: argparse.ArgumentParser) -> None:
    """``--skewed-by COLS --on VALUES [--stored-as-directories]`` (create-table, alter-table)."""
    p.add_argument(
        "--skewed-by", metavar="COLS", help='skewed columns (list bucketing), e.g. "x" or "x,y"'
    )
    p.add_argument(
        "--on",
        metavar="VALUES",
        help="the skewed value tuples, e.g. \"(6),(20)\" or \"('a',1),('b',2)\"",
    )
    p.add_argument(
        "--stored-as-directories",
        action="store_true",
        help="write rows of the skewed values into their own directories",
    )


def skewed_from_args(args: argparse.Namespace) -> SkewedInfo | None:
    """The :class:`SkewedInfo` of ``--skewed-by/--on/--stored-as-directories`` (``None``
    without ``--skewed-by``); checked further by the catalog.

    Raises:
        ConfigError: one option without the other, or a syntax error in ``--on``.
    """
    if args.skewed_by is None:
        if args.on is not None or args.stored_as_directories:
            raise ConfigError("--on and --stored-as-directories need --skewed-by COLS")
        return None
    if args.on is None:
        raise ConfigError('--skewed-by needs --on VALUES, e.g. --on "(6),(20)"')
    cols = tuple(c.strip() for c in args.skewed_by.split(","))
    if not all(cols):
        raise ConfigError(f"--skewed-by must be COL[,COL...], got {args.skewed_by!r}")
    return SkewedInfo(
        col_names=cols,
        col_values=parse_skewed_values(args.on, len(cols)),
        stored_as_dirs=args.stored_as_directories,
    )


def skew_summary(info: SkewedInfo | None) -> str:
    """One line: ``(x) ON ('6'), ('20') STORED AS DIRECTORIES`` (empty when not skewed)."""
    if info is None:
        return ""
    text = f"({', '.join(info.col_names)}) ON {format_skewed_values(info.col_values)}"
    return text + (" STORED AS DIRECTORIES" if info.stored_as_dirs else "")


def _locations(info: SkewedInfo) -> str:
    """The location map as ``('6') -> hot6, default -> cold``."""
    return ", ".join(
        f"{'default' if k == (DEFAULT_KEY,) else format_skewed_values([k])} -> {loc}"
        for k, loc in sorted(info.location_map.items())
    )


def _store(args: argparse.Namespace, *, read_only: bool) -> TxnStore:
    config = StoreConfig.resolve(
        metastore=args.metastore,
        warehouse=args.warehouse,
        storage_options=storage_options_of(args),
    )
    if not read_only:
        # A writing command on an existing store only: a mistyped --metastore reports
        # "no metastore at URL" instead of creating one.
        config.open(read_only=True).close()
    return config.open(read_only=read_only)


def _alter_table(args: argparse.Namespace) -> int:
    refuse_link(args.table, action="alter")  # before any other check: links are read-only
    skewed = skewed_from_args(args)
    actions = [
        skewed is not None,
        args.not_skewed,
        args.not_stored_as_directories,
        bool(args.set_skewed_location),
    ]
    if sum(actions) != 1:
        raise ConfigError(
            "give exactly one of --skewed-by ... --on ..., --not-skewed, "
            "--not-stored-as-directories, --set-skewed-location"
        )
    with _store(args, read_only=False) as store:
        tn = resolve_write(store, args.table, namespace=args.namespace, action="alter")
        if skewed is not None:
            t = store.set_skewed(tn.db, tn.table, skewed)
        elif args.not_skewed:
            t = store.set_skewed(tn.db, tn.table, None)
        elif args.not_stored_as_directories:
            t = store.set_stored_as_dirs(tn.db, tn.table, False)
        else:
            current = store.get_table(tn.db, tn.table).skewed
            num_cols = len(current.col_names) if current is not None else 1
            locations = dict(parse_skewed_location(s, num_cols) for s in args.set_skewed_location)
            t = store.set_skewed_locations(tn.db, tn.table, locations)
    print(f"altered {t.full_name}: {skew_summary(t.skewed) or 'not skewed'}")
    return 0


def _describe(args: argparse.Namespace) -> int:
    with _store(args, read_only=True) as store:
        ref = resolve_read(store, args.table, namespace=args.namespace)
        t = store.get_table(ref.table.db, ref.table.table)
        parts = store.list_partitions(t.db, t.name) if args.partitions else []
    if ref.partitions is not None:  # through a static link: the partitions it exposes
        parts = [p for p in parts if p.name in ref.partitions]
    rows: list[tuple[str, str]] = []
    if ref.link is not None:
        rows += [
            ("link", f"{ref.link.full_name} (read-only)"),
            ("link_partitions", link_partitions(ref.link)),
        ]
    rows += [
        ("table", t.full_name),
        ("location", t.location or ""),
        ("transactional", t.transactional_properties if t.is_transactional else "no"),
        ("columns", ", ".join(f"{n} {typ}" for n, typ in t.columns)),
        ("partitioned_by", ", ".join(f"{n} {typ}" for n, typ in t.partition_keys)),
        ("buckets", f"{','.join(t.bucket_cols)}:{t.num_buckets}" if t.bucket_cols else ""),
        ("skewed_by", skew_summary(t.skewed)),
    ]
    if t.skewed is not None:
        rows.append(("skewed_locations", _locations(t.skewed)))
        dirs = t.skewed.all_dirs() if t.skewed.is_list_bucketed else ("(not stored as dirs)",)
        rows.append(("list_bucketing_dirs", ", ".join(dirs)))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}".rstrip())
    if args.partitions:
        print()
        for p in parts:
            print(f"{p.name}  {skew_summary(p.skewed) or 'not skewed'}")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metastore", metavar="URL", help="sqlite:///path or postgresql://...")
    p.add_argument("--warehouse", metavar="PATH", help="warehouse root directory")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``alter-table`` and ``describe`` to the ``acidstream`` parser."""
    p = subparsers.add_parser(
        "alter-table",
        help="change a table's list bucketing (SKEWED BY, NOT SKEWED, ...)",
        description="Hive's list-bucketing DDL; the table's definition changes, partitions "
        "created afterwards get it and existing partitions keep theirs. "
        'e.g. acidstream alter-table db.t --skewed-by x --on "(6),(20)" '
        "--stored-as-directories",
    )
    _common(p)
    add_namespace_option(p)
    p.add_argument("table", help="[db.]table")
    add_skew_options(p)
    p.add_argument("--not-skewed", action="store_true", help="NOT SKEWED: forget the skew")
    p.add_argument(
        "--not-stored-as-directories",
        action="store_true",
        help="keep the skew declared but write rows as usual",
    )
    p.add_argument(
        "--set-skewed-location",
        metavar="VALUES=DIR",
        action="append",
        default=[],
        help="directory of a skewed value tuple, relative to each delta/base, e.g. "
        '"(6)=hot6" (repeatable)',
    )
    p.set_defaults(func=_alter_table)

    p = subparsers.add_parser("describe", help="show a table's definition and skew")
    _common(p)
    add_namespace_option(p)
    p.add_argument("table", help="[db.]table, or a link table@db (describes its target)")
    p.add_argument("--partitions", action="store_true", help="also each partition's own skew")
    p.set_defaults(func=_describe)
