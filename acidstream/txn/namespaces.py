"""Name resolution under namespaces and links: the one place every entry point asks.

Names a client may give (``docs/namespaces.md``):

* ``T`` -- table ``T`` of the client's namespace (``default`` when it has none);
* ``A.T`` -- table ``T`` of namespace ``A``;
* ``T1@B`` -- the link held by the client's namespace to table ``T1`` of ``B``;
* ``A.T1@B`` -- the same link, naming its namespace ``A``.

Binding rules. A client *bound* to namespace ``A`` (a ``namespace="A"`` option, ``--namespace
A``) names only ``A``'s tables and links: ``B.T`` (``B != A``) raises
:class:`~acidstream.acid.errors.NamespaceError`. When namespace mode is on (a metastore setting,
:meth:`~acidstream.txn.store.TxnStore.namespace_mode`), a client that gives no namespace is bound to
``default``, as a Hive session starts in ``default``; when it is off, such a client may name
any ``db.table`` (as before namespaces existed).

Links are read-only: :func:`resolve_write` (every writer) raises
:class:`~acidstream.acid.errors.LinkReadOnlyError` for a link name; :func:`resolve_read` (every reader)
returns the link's target table with the partitions the link exposes, so the read runs the
same code (snapshot, cleaner protection) as a direct read of the target.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acidstream.acid.errors import (
    ConfigError,
    LinkReadOnlyError,
    NamespaceError,
    TableNotFoundError,
)
from acidstream.acid.table_name import DEFAULT_DB, NAME_LOOKUP_PATTERN, TableName

if TYPE_CHECKING:
    from acidstream.acid.reader import Scan
    from acidstream.txn.links_sql import LinkDef
    from acidstream.txn.store import TxnStore

__all__ = [
    "NameRef",
    "ReadRef",
    "bind_write_name",
    "bound_namespace",
    "check_database_binding",
    "check_namespace_mode",
    "check_table_namespace",
    "is_link_name",
    "link_allows",
    "parse_name",
    "refuse_link",
    "resolve_read",
    "resolve_write",
    "scan_read",
]

_IDENT = NAME_LOOKUP_PATTERN
_NAME = re.compile(rf"^(?:({_IDENT})\.)?({_IDENT})(?:@({_IDENT}))?$")


@dataclass(frozen=True)
class NameRef:
    """A parsed name: ``db`` as given (``None``: the client's namespace), the table, and
    for a link the target's namespace (``link_owner``)."""

    db: str | None
    table: str
    link_owner: str | None = None

    @property
    def is_link(self) -> bool:
        return self.link_owner is not None

    def __str__(self) -> str:
        head = f"{self.db}." if self.db else ""
        tail = f"@{self.link_owner}" if self.link_owner else ""
        return f"{head}{self.table}{tail}"


@dataclass(frozen=True)
class ReadRef:
    """What a read of a name reads: the owner's table, and through a link, the link and the
    partitions it exposes (``None``: all)."""

    table: TableName
    link: LinkDef | None = None

    @property
    def partitions(self) -> frozenset[str] | None:
        return None if self.link is None else self.link.visible_partitions

    @property
    def source(self) -> str:
        """How a read names what it reads (``link a.t1@b -> b.t1`` or ``table b.t1``)."""
        if self.link is None:
            return f"table {self.table}"
        return f"link {self.link.full_name} -> {self.table}"


def is_link_name(name: str) -> bool:
    """Whether ``name`` names a link (``T1@B`` or ``A.T1@B``)."""
    return "@" in name


def parse_name(name: str) -> NameRef:
    """Parse ``T``, ``A.T``, ``T1@B`` or ``A.T1@B`` (lower-cased, as Hive normalises).

    Raises:
        ConfigError: anything else.
    """
    m = _NAME.match(name.strip().lower())
    if m is None:
        raise ConfigError(
            f"bad table name {name!r}: expected table, db.table, or a link table@db "
            "(letters, digits and '_')"
        )
    return NameRef(m.group(1), m.group(2), m.group(3))


def _norm_ns(namespace: str | None) -> str | None:
    if namespace is None:
        return None
    ns = namespace.strip().lower()
    if not re.fullmatch(_IDENT, ns):
        raise ConfigError(f"bad namespace {namespace!r}: use letters, digits and '_'")
    return ns


def _why(bound: str, namespace: str | None) -> str:
    """Why a client is bound to ``bound``: its own namespace, or namespace mode."""
    if namespace is not None:
        return f"the client is bound to namespace {bound}"
    return "namespace mode is on: a client without a namespace is bound to default"


def _bind(ref: NameRef, namespace: str | None, mode_on: bool) -> str:
    """The namespace the name lives in, refusing one outside the client's binding."""
    bound = namespace if namespace is not None else (DEFAULT_DB if mode_on else None)
    if bound is None:
        return ref.db or DEFAULT_DB
    if ref.db is not None and ref.db != bound:
        why = _why(bound, namespace)
        raise NamespaceError(
            f"{ref} is outside namespace {bound} ({why}); name {bound}'s tables ({ref.table}) "
            f"or its links ({ref.table}@{ref.link_owner or ref.db}), or bind the client to "
            f"namespace {ref.db}"
        )
    return bound


def refuse_link(name: str, *, action: str) -> None:
    """Raise :class:`LinkReadOnlyError` if ``name`` is a link (a check needing no store,
    for writers that resolve later: HTTP config, compaction requests, repair).

    Args:
        action: What was refused, for the message (``"stream into"``, ``"compact"``...).
    """
    if not is_link_name(name):
        return
    ref = parse_name(name)
    assert ref.link_owner is not None
    raise LinkReadOnlyError(
        f"cannot {action} {ref}: it is a link to {ref.link_owner}.{ref.table}, and links are "
        f"read-only; write to {ref.table} as a client of namespace {ref.link_owner}"
    )


def bind_write_name(
    name: str, *, namespace: str | None = None, action: str = "write to"
) -> TableName:
    """The table a writer names, from the name and its explicit binding only (no store):
    links refused, ``B.T`` outside ``namespace`` refused. A writer that opens its store
    later calls :func:`check_namespace_mode` then.

    Raises:
        LinkReadOnlyError, NamespaceError, ConfigError.
    """
    refuse_link(name, action=action)
    ref = parse_name(name)
    return TableName(_bind(ref, _norm_ns(namespace), False), ref.table)


def check_namespace_mode(store: TxnStore, table: TableName, *, namespace: str | None) -> None:
    """For a client without a namespace: refuse a table outside ``default`` when namespace
    mode is on (a bound client was checked when its name was bound).

    Raises:
        NamespaceError.
    """
    if namespace is None and table.db != DEFAULT_DB and store.namespace_mode():
        _bind(NameRef(table.db, table.table), None, True)


def check_table_namespace(store: TxnStore, db: str, *, namespace: str | None) -> None:
    """For a read that found its table by path: the table's namespace must be the client's
    (or, in namespace mode, ``default`` for a client without one).

    Raises:
        NamespaceError.
    """
    ns = _norm_ns(namespace)
    mode = ns is None and store.namespace_mode()
    _bind(NameRef(db, "<path>"), ns, mode)


def bound_namespace(store: TxnStore, namespace: str | None) -> str | None:
    """The namespace a client is bound to: its own (``--namespace``), ``default`` for a
    client without one when namespace mode is on, else ``None`` (it may name any).

    Raises:
        ConfigError: a malformed namespace.
    """
    ns = _norm_ns(namespace)
    if ns is not None:
        return ns
    return DEFAULT_DB if store.namespace_mode() else None


def check_database_binding(
    store: TxnStore, db: str, *, namespace: str | None, action: str = "use"
) -> None:
    """For a command that names a whole database (``tables DB``, ``set-location
    --database DB``) or finds one otherwise (the tables a txn writes, ``abort``): ``db``
    must be the client's namespace when it is bound (:func:`bound_namespace`).

    Raises:
        NamespaceError: naming the binding, why, and the fix.
    """
    bound = bound_namespace(store, namespace)
    target = db.strip().lower()
    if bound is not None and target != bound:
        raise NamespaceError(
            f"cannot {action} namespace {target}: it is outside namespace {bound} "
            f"({_why(bound, _norm_ns(namespace))}); bind the client to namespace {target}"
        )


def _check_namespace_exists(store: TxnStore, ns: str) -> None:
    try:
        store.get_database(ns)
    except TableNotFoundError as e:
        raise TableNotFoundError(f"namespace {ns} does not exist") from e


def resolve_write(
    store: TxnStore, name: str, *, namespace: str | None = None, action: str = "write to"
) -> TableName:
    """The table a writer (connection, sink, HTTP server, compaction, repair) may write.

    Raises:
        LinkReadOnlyError: ``name`` is a link.
        NamespaceError: ``name`` is outside the client's namespace.
        TableNotFoundError: the client's namespace does not exist.
        ConfigError: a malformed name.
    """
    refuse_link(name, action=action)
    ns = _norm_ns(namespace)
    ref = parse_name(name)
    db = _bind(ref, ns, ns is None and store.namespace_mode())
    if ns is not None:
        _check_namespace_exists(store, ns)
    return TableName(db, ref.table)


def resolve_read(store: TxnStore, name: str, *, namespace: str | None = None) -> ReadRef:
    """What a reader (snapshot read, Spark source, ``acidstream read``) reads for ``name``.

    A table name gives that table; a link gives its target and the partitions it exposes
    (a static link: those added and still in the target's catalog; dynamic: all).

    Raises:
        NamespaceError: ``name`` is outside the client's namespace.
        TableNotFoundError: no such namespace or link, or the link's target is gone.
        ConfigError: a malformed name.
    """
    ns = _norm_ns(namespace)
    ref = parse_name(name)
    db = _bind(ref, ns, ns is None and store.namespace_mode())
    if ns is not None:
        _check_namespace_exists(store, ns)
    if ref.link_owner is None:
        return ReadRef(TableName(db, ref.table))
    link = store.get_link(db, ref.link_owner, ref.table)
    if not link.target_exists:
        raise TableNotFoundError(
            f"link {link.full_name} points at {link.target_db}.{link.target_table}, which no "
            "longer exists (drop the link with `acidstream drop-link`)"
        )
    return ReadRef(TableName(link.target_db, link.target_table), link)


def scan_read(
    path: str,
    *,
    partitions: frozenset[str] | None = None,
    partition_keys: tuple[str, ...] = (),
    **kwargs: Any,
) -> Scan:
    """:func:`acidstream.acid.reader.scan` of a table directory, restricted to a static link's
    ``partitions`` when given: each exposed partition directory is scanned as a reader
    scans a partition path (its values still returned), the others are never listed.
    ``kwargs`` are ``scan``'s; ``schema`` (the catalog's) gives an empty read its columns."""
    from acidstream.acid.reader import Scan, scan

    if partitions is None:
        return scan(path, partition_keys=partition_keys, **kwargs)
    from acidstream.acid.read_plan import build_plan
    from acidstream.acid.storage import Storage

    scans = []
    for name in sorted(partitions):
        part = f"{path.rstrip('/')}/{name}"
        # A storage the caller opened (with the warehouse's options) serves every partition.
        given = kwargs.get("storage")
        storage, p = (given, part) if given is not None else Storage.for_path(part)
        if storage.exists(p):  # registered but not written yet: no rows
            scans.append(scan(part, partition_keys=partition_keys, **kwargs))
    if scans:
        return Scan(scans[0].schema, itertools.chain.from_iterable(s.batches for s in scans))
    plan = build_plan(
        None,
        schema=kwargs.get("schema"),
        partition_names=partition_keys,
        columns=kwargs.get("columns"),
        include_row_id=kwargs.get("include_row_id", False),
        filter=None,
        timestamp_unit=kwargs.get("timestamp_unit", "us"),
    )
    return Scan(plan.schema(), iter(()))


def link_allows(
    partitions: frozenset[str] | None, values: Sequence[tuple[str, str | None]]
) -> bool:
    """Whether a partition directory (its ``(key, value)`` pairs, ``None`` for Hive's
    default partition) is one a read through a link may see (``partitions`` ``None``: all)."""
    if partitions is None:
        return True
    from acidstream.acid.partition_name import make_partition_name

    return make_partition_name([k for k, _ in values], [v for _, v in values]) in partitions
