"""``acidstream txns | locks | tables | create-table | abort | set-location``: the metastore
from the shell.

Each command takes ``--metastore URL`` and ``--warehouse PATH`` (or
``ACIDSTREAM_METASTORE`` / ``ACIDSTREAM_WAREHOUSE``; defaults ``./warehouse``
and the SQLite store inside it), resolved by :class:`acidstream.txn.config.StoreConfig`.
The listing commands open the store read-only: they create nothing (no directory, no
database) and fail with "no metastore at URL" where there is none.

Names follow the client's namespace binding (``--namespace``, namespace mode;
``docs/namespaces.md``): ``create-table`` and ``set-location`` through
:func:`~acidstream.txn.namespaces.resolve_write` (links refused), ``tables`` and ``locks`` list the
bound namespace only, ``abort`` refuses a txn of another namespace. ``txns`` lists them all.
"""

from __future__ import annotations

import argparse
import datetime as dt

from acidstream.acid.errors import ConfigError
from acidstream.acid.schema import TableSchema
from acidstream.cli.main import storage_options_of
from acidstream.cli.output import print_table
from acidstream.cli.table_cmds import (
    add_namespace_option,
    add_skew_options,
    skew_summary,
    skewed_from_args,
)
from acidstream.txn.catalog import TableDef, is_absolute_location
from acidstream.txn.config import StoreConfig
from acidstream.txn.namespaces import (
    bind_write_name,
    bound_namespace,
    check_database_binding,
    check_namespace_mode,
    resolve_write,
)
from acidstream.txn.store import TxnStore

__all__ = ["register"]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metastore", metavar="URL", help="sqlite:///path or postgresql://...")
    p.add_argument("--warehouse", metavar="PATH", help="warehouse root directory")


def _open(args: argparse.Namespace, *, read_only: bool = False, existing: bool = False) -> TxnStore:
    """The store of the command; ``existing``: a writing command that must not create one
    (a mistyped ``--metastore`` reports "no metastore at URL" instead)."""
    config = StoreConfig.resolve(
        metastore=args.metastore,
        warehouse=args.warehouse,
        storage_options=storage_options_of(args),
    )
    if existing and not read_only:
        config.open(read_only=True).close()
    return config.open(read_only=read_only)


def _ts(ms: int | None) -> str:
    if not ms:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _txns(args: argparse.Namespace) -> int:
    with _open(args, read_only=True) as store:
        txns = store.show_txns()
    if args.open:
        txns = [t for t in txns if t.state.value == "o"]
    state = {"o": "OPEN", "a": "ABORTED", "c": "COMMITTED"}
    print_table(
        ("txnid", "state", "startedtime", "lastheartbeattime", "user", "host", "agent_info",
         "abort_reason"),
        [
            (t.txn_id, state[t.state.value], _ts(t.started_ms), _ts(t.last_heartbeat_ms), t.user,
             t.host, t.agent_info, t.abort_reason)
            for t in txns
        ],
    )  # fmt: skip
    return 0


def _locks(args: argparse.Namespace) -> int:
    with _open(args, read_only=True) as store:
        locks = store.show_locks()
        bound = bound_namespace(store, args.namespace)
    if bound is not None:  # a bound client sees its own namespace's locks, as its tables
        locks = [lk for lk in locks if lk.database == bound]
    state = {"a": "ACQUIRED", "w": "WAITING"}
    print_table(
        ("lockid", "database", "table", "partition", "lock_state", "blocked_by", "lock_type",
         "transaction_id", "last_heartbeat", "acquired_at", "user", "hostname", "agent_info"),
        [
            (f"{lk.lock_id}.{lk.lock_int_id}", lk.database, lk.table, lk.partition,
             state.get(lk.state.value, lk.state.name), lk.blocked_by, lk.type.name, lk.txn_id,
             _ts(lk.last_heartbeat_ms), _ts(lk.acquired_at_ms), lk.user, lk.host, lk.agent_info)
            for lk in locks
        ],
    )  # fmt: skip
    return 0


def _tables(args: argparse.Namespace) -> int:
    with _open(args, read_only=True) as store:
        db = args.database
        bound = bound_namespace(store, args.namespace)
        if bound is not None:  # a bound client lists its own namespace only
            if db is not None:
                check_database_binding(store, db, namespace=args.namespace, action="list")
            db = bound
        tables = store.list_tables(db)
    # The list-bucketing column only when a listed table is skewed (describe shows more).
    skewed = any(t.skewed is not None for t in tables)
    print_table(
        ("table", "transactional", "partitioned_by", "buckets", "location")
        + (("skewed_by",) if skewed else ()),
        [
            (
                t.full_name,
                t.transactional_properties if t.is_transactional else "no",
                ", ".join(f"{k} {v}" for k, v in t.partition_keys),
                f"{','.join(t.bucket_cols)}:{t.num_buckets}" if t.bucket_cols else "",
                t.location
                if is_absolute_location(t.location or "")
                else f"{t.location} (relative: run set-location)",
            )
            + ((skew_summary(t.skewed),) if skewed else ())
            for t in tables
        ],
    )
    return 0


def _parse_buckets(spec: str | None) -> tuple[tuple[str, ...], int]:
    if not spec:
        return (), -1
    cols, sep, n = spec.rpartition(":")
    if not sep or not cols or not n.isdigit() or int(n) <= 0:
        raise ConfigError(f"--buckets must be COL[,COL...]:N, got {spec!r}")
    return tuple(c.strip() for c in cols.split(",")), int(n)


def _create_table(args: argparse.Namespace) -> int:
    tn = bind_write_name(args.table, namespace=args.namespace, action="create")
    db, name = tn.db, tn.table
    columns = TableSchema.parse(args.columns)
    pkeys = TableSchema.parse(args.partitioned_by) if args.partitioned_by else None
    bucket_cols, num_buckets = _parse_buckets(args.buckets)
    params = {"transactional": "true"}
    for kv in args.tblproperty:
        k, eq, v = kv.partition("=")
        if not eq or not k:
            raise ConfigError(f"--tblproperty must be KEY=VALUE, got {kv!r}")
        params[k.strip()] = v.strip()
    table = TableDef(
        db,
        name,
        tuple((n, str(t)) for n, t in columns.columns),
        partition_keys=tuple((n, str(t)) for n, t in pkeys.columns) if pkeys else (),
        bucket_cols=bucket_cols,
        num_buckets=num_buckets,
        parameters=params,
        location=args.location,
        skewed=skewed_from_args(args),
    )
    with _open(args) as store:
        check_namespace_mode(store, tn, namespace=args.namespace)
        if db.lower() != "default":
            store.create_database(db, if_not_exists=True)
        created = store.create_table(table, if_not_exists=args.if_not_exists)
    print(f"created {created.full_name} at {created.location}")
    return 0


def _abort(args: argparse.Namespace) -> int:
    with _open(args, existing=True) as store:
        if bound_namespace(store, args.namespace) is not None:
            # Every txn is checked before any is aborted: a refusal changes nothing.
            for t in args.txn_ids:
                for db in _txn_namespaces(store, t):
                    check_database_binding(
                        store, db, namespace=args.namespace, action=f"abort txnid:{t} of"
                    )
        for t in args.txn_ids:
            store.abort_txn(t, reason=args.reason)
            print(f"aborted txnid:{t}")
    return 0


def _txn_namespaces(store: TxnStore, txn_id: int) -> set[str]:
    """The databases a txn writes (its components) or locks."""
    dbs = {str(c[0]) for c in store.txn_components(txn_id)}
    return dbs | {lk.database for lk in store.show_locks() if lk.txn_id == txn_id}


def _set_location(args: argparse.Namespace) -> int:
    with _open(args, existing=True) as store:
        if args.database:
            check_database_binding(
                store, args.name, namespace=args.namespace, action="set the location of"
            )
            d = store.set_database_location(args.name, args.location)
            print(f"database {d.name} now at {d.location}")
        else:
            tn = resolve_write(
                store, args.name, namespace=args.namespace, action="set the location of"
            )
            t = store.set_table_location(tn.db, tn.table, args.location)
            print(f"{t.full_name} now at {t.location}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the metastore sub-commands to the ``acidstream`` parser."""
    p = subparsers.add_parser("txns", help="list transactions (like SHOW TRANSACTIONS)")
    _common(p)
    p.add_argument("--open", action="store_true", help="only open transactions")
    p.set_defaults(func=_txns)

    p = subparsers.add_parser("locks", help="list locks (like SHOW LOCKS)")
    _common(p)
    add_namespace_option(p)
    p.set_defaults(func=_locks)

    p = subparsers.add_parser("tables", help="list tables of the catalog")
    _common(p)
    add_namespace_option(p)
    p.add_argument("database", nargs="?", help="only this database")
    p.set_defaults(func=_tables)

    p = subparsers.add_parser(
        "create-table",
        help="create a (transactional) table",
        description='e.g. acidstream create-table db.t "id int, name string" '
        '--partitioned-by "ds string" --buckets id:4 --tblproperty k=v; list bucketing: '
        '--skewed-by x --on "(6),(20)" --stored-as-directories',
    )
    _common(p)
    p.add_argument("table", help="[db.]table (the database is created if missing)")
    p.add_argument("columns", help='columns, e.g. "id int, name string"')
    p.add_argument("--partitioned-by", metavar="COLUMNS", help='e.g. "ds string, h int"')
    p.add_argument("--buckets", metavar="COLS:N", help="bucket columns and count, e.g. id:4")
    p.add_argument(
        "--tblproperty",
        metavar="K=V",
        action="append",
        default=[],
        help="table property (repeatable); transactional=true is the default",
    )
    add_skew_options(p)
    add_namespace_option(p)
    p.add_argument("--location", help="table directory (default: under the warehouse)")
    p.add_argument("--if-not-exists", action="store_true", help="no error if it exists")
    p.set_defaults(func=_create_table)

    p = subparsers.add_parser(
        "set-location",
        help="point a table (or --database) at an absolute directory",
        description="The explicit migration of a table an older acidstream stored with a "
        "relative location: its catalog entry (and partitions at their default place) are "
        "pointed at PATH, made absolute against the current directory. Files are not moved, "
        "so a table with data is refused: a file under its current location, an open write "
        "id, or committed write ids with no file under PATH (move the directory yourself "
        "first). A database's existing tables keep their locations.",
    )
    _common(p)
    add_namespace_option(p)
    p.add_argument("name", help="[db.]table, or a database with --database")
    p.add_argument("location", metavar="PATH", help="the table's (database's) real directory")
    p.add_argument("--database", action="store_true", help="NAME is a database")
    p.set_defaults(func=_set_location)

    p = subparsers.add_parser("abort", help="abort open transactions")
    _common(p)
    add_namespace_option(p)
    p.add_argument("txn_ids", metavar="TXNID", type=int, nargs="+")
    p.add_argument("--reason", default="ABORT_ROLLBACK: acidstream abort", help="abort reason")
    p.set_defaults(func=_abort)
