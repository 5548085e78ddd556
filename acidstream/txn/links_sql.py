"""Namespaces and links in the metastore: the SQL behind namespace mode and table links.

Hive's Links design: namespaces are databases. A *link* held by namespace ``A`` points at
table ``T1`` of namespace ``B`` and is named ``T1@B`` inside ``A``; it stores metadata
only (no data is copied). A *static* link exposes the partitions added to it, a *dynamic*
one every partition of the target. Namespace mode (``METASTORE_SETTINGS``) is the
metastore-wide switch that binds clients without a namespace to ``default``
(:mod:`acidstream.txn.namespaces` applies the rules).

Functions here run inside a store call's DB transaction (a :class:`~acidstream.txn.db.Tx`);
:class:`LinkOps` exposes them as :class:`~acidstream.txn.store.TxnStore` methods. Both backends. A
metastore whose schema predates version 4 (opened read-only) has neither table: it reads
as namespace mode off and no links.
"""

from __future__ import annotations

from dataclasses import dataclass

from acidstream.acid.errors import AcidStreamError, ConfigError, TableNotFoundError
from acidstream.acid.partition_name import make_partition_name, parse_partition_name
from acidstream.txn.catalog_sql import get_database, get_table
from acidstream.txn.db import Tx
from acidstream.txn.settings import read_setting as get_setting
from acidstream.txn.settings import write_setting as set_setting
from acidstream.txn.store_ops import StoreOps

__all__ = ["NAMESPACE_MODE", "LinkDef", "LinkOps", "normalize_partition_spec"]

NAMESPACE_MODE = "namespace_mode"
"""The ``METASTORE_SETTINGS`` key of namespace mode (``on`` / ``off``, default off)."""


@dataclass(frozen=True)
class LinkDef:
    """One link as the metastore holds it.

    Attributes:
        namespace: The namespace holding the link (``A``).
        target_db / target_table: The linked table (``B.T1``), the data's owner.
        dynamic: Follows every partition of the target (else only ``partitions``).
        partitions: A static link's partition names (``ds=1``), as added.
        missing: Those of ``partitions`` the target's catalog no longer has (they read as
            nothing until the owner registers them again).
        target_exists: Whether the target table is still in the catalog.
        target_partitioned: Whether the target table is partitioned (a link to an
            unpartitioned table exposes the whole table).
    """

    namespace: str
    target_db: str
    target_table: str
    dynamic: bool
    partitions: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    target_exists: bool = True
    target_partitioned: bool = False
    owner: str = ""

    @property
    def name(self) -> str:
        """The link's name inside its namespace: ``T1@B``."""
        return f"{self.target_table}@{self.target_db}"

    @property
    def full_name(self) -> str:
        """``A.T1@B``."""
        return f"{self.namespace}.{self.name}"

    @property
    def visible_partitions(self) -> frozenset[str] | None:
        """The target's partitions a read through the link may see; ``None``: all of them
        (a dynamic link, or a link to an unpartitioned table)."""
        if self.dynamic or not self.target_partitioned:
            return None
        gone = set(self.missing)
        return frozenset(p for p in self.partitions if p not in gone)


def _norm(name: str) -> str:
    return name.strip().lower()


def _has_schema(tx: Tx) -> bool:
    return tx.has_table("TBL_LINKS")


def normalize_partition_spec(spec: str, keys: tuple[str, ...]) -> str:
    """A partition given as ``ds=1`` or ``ds=1/hr=2`` (``,`` also separates) as the
    catalog names it, checked against the table's partition keys.

    Raises:
        ConfigError: malformed, or not the table's keys in order.
    """
    text = spec.strip().replace(",", "/")
    try:
        pairs = parse_partition_name(text)
    except ConfigError as e:
        raise ConfigError(f"bad partition {spec!r}: expected k=v[/k2=v2]") from e
    got = tuple(k.lower() for k, _ in pairs)
    if got != keys:
        raise ConfigError(
            f"partition {spec!r} does not match the table's partition keys ({', '.join(keys)})"
        )
    try:
        return make_partition_name(keys, [v for _, v in pairs])
    except AcidStreamError as e:
        raise ConfigError(f"bad partition {spec!r}: {e}") from e


def _catalog_partitions(tx: Tx, db: str, table: str) -> set[str]:
    rows = tx.q("SELECT PART_NAME FROM PARTITIONS WHERE PART_DB = ? AND PART_TBL = ?", db, table)
    return {str(r[0]) for r in rows}


def _load_link(tx: Tx, row: tuple) -> LinkDef:
    ns, tdb, ttbl, dyn, owner = str(row[0]), str(row[1]), str(row[2]), row[3] == "Y", row[4]
    parts = tuple(
        str(r[0])
        for r in tx.q(
            "SELECT LP_PART_NAME FROM LINK_PARTITIONS WHERE LP_LINK_DB = ? AND LP_TARGET_DB = ? "
            "AND LP_TARGET_TBL = ? ORDER BY LP_PART_NAME",
            ns,
            tdb,
            ttbl,
        )
    )
    t = tx.one(
        "SELECT 1 FROM TBLS WHERE TBL_DB = ? AND TBL_NAME = ?",
        tdb,
        ttbl,
    )
    exists = t is not None
    partitioned = exists and (
        tx.one(
            "SELECT 1 FROM TBL_COLUMNS WHERE COL_DB = ? AND COL_TBL = ? AND COL_KIND = 'p'",
            tdb,
            ttbl,
        )
        is not None
    )
    have = _catalog_partitions(tx, tdb, ttbl) if exists else set()
    missing = tuple(p for p in parts if p not in have)
    return LinkDef(ns, tdb, ttbl, dyn, parts, missing, exists, partitioned, str(owner))


_LINK_COLS = "LINK_DB, TARGET_DB, TARGET_TBL, IS_DYNAMIC, OWNER"


def get_link(tx: Tx, namespace: str, target_db: str, target_table: str) -> LinkDef:
    ns, tdb, ttbl = _norm(namespace), _norm(target_db), _norm(target_table)
    row = (
        tx.one(
            f"SELECT {_LINK_COLS} FROM TBL_LINKS "
            "WHERE LINK_DB = ? AND TARGET_DB = ? AND TARGET_TBL = ?",
            ns,
            tdb,
            ttbl,
        )
        if _has_schema(tx)
        else None
    )
    if row is None:
        get_database(tx, ns)
        raise TableNotFoundError(f"no link {ttbl}@{tdb} in namespace {ns}")
    return _load_link(tx, row)


def list_links(tx: Tx, namespace: str | None) -> list[LinkDef]:
    if not _has_schema(tx):
        return []
    if namespace is None:
        rows = tx.q(f"SELECT {_LINK_COLS} FROM TBL_LINKS ORDER BY LINK_DB, TARGET_DB, TARGET_TBL")
    else:
        get_database(tx, namespace)
        rows = tx.q(
            f"SELECT {_LINK_COLS} FROM TBL_LINKS WHERE LINK_DB = ? ORDER BY TARGET_DB, TARGET_TBL",
            _norm(namespace),
        )
    return [_load_link(tx, r) for r in rows]


def create_link(
    tx: Tx,
    namespace: str,
    target_db: str,
    target_table: str,
    *,
    dynamic: bool,
    owner: str,
    now_ms: int,
) -> LinkDef:
    ns, tdb, ttbl = _norm(namespace), _norm(target_db), _norm(target_table)
    get_database(tx, ns)
    if ns == tdb:
        raise ConfigError(
            f"{ttbl}@{tdb}: a link points at another namespace's table; {ns}.{ttbl} is "
            f"already {ns}'s own"
        )
    get_table(tx, tdb, ttbl)
    created = tx.count(
        "INSERT INTO TBL_LINKS (LINK_DB, TARGET_DB, TARGET_TBL, IS_DYNAMIC, OWNER, CREATE_TIME) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (LINK_DB, TARGET_DB, TARGET_TBL) DO NOTHING",
        ns,
        tdb,
        ttbl,
        "Y" if dynamic else "N",
        owner,
        now_ms,
    )
    if created == 0:
        raise ConfigError(f"link {ttbl}@{tdb} already exists in namespace {ns}")
    return get_link(tx, ns, tdb, ttbl)


def alter_link_partition(
    tx: Tx,
    namespace: str,
    target_db: str,
    target_table: str,
    spec: str,
    *,
    add: bool,
    now_ms: int,
) -> LinkDef:
    link = get_link(tx, namespace, target_db, target_table)
    if link.dynamic:
        raise ConfigError(
            f"{link.full_name} is a dynamic link: it follows every partition of "
            f"{link.target_db}.{link.target_table}; only a static link has partitions to "
            "add or drop"
        )
    t = get_table(tx, link.target_db, link.target_table)
    if not t.is_partitioned:
        raise ConfigError(
            f"{t.full_name} is not partitioned: the link {link.full_name} exposes the whole table"
        )
    name = normalize_partition_spec(spec, t.partition_names)
    key = (link.namespace, link.target_db, link.target_table, name)
    if add:
        if name not in _catalog_partitions(tx, t.db, t.name):
            raise TableNotFoundError(f"{t.full_name} has no partition {name}")
        done = tx.count(
            "INSERT INTO LINK_PARTITIONS (LP_LINK_DB, LP_TARGET_DB, LP_TARGET_TBL, LP_PART_NAME, "
            "CREATE_TIME) VALUES (?, ?, ?, ?, ?) ON CONFLICT "
            "(LP_LINK_DB, LP_TARGET_DB, LP_TARGET_TBL, LP_PART_NAME) DO NOTHING",
            *key,
            now_ms,
        )
        if done == 0:
            raise ConfigError(f"{link.full_name} already exposes partition {name}")
    else:
        done = tx.count(
            "DELETE FROM LINK_PARTITIONS WHERE LP_LINK_DB = ? AND LP_TARGET_DB = ? "
            "AND LP_TARGET_TBL = ? AND LP_PART_NAME = ?",
            *key,
        )
        if done == 0:
            raise ConfigError(f"{link.full_name} does not expose partition {name}")
    return get_link(tx, link.namespace, link.target_db, link.target_table)


def drop_link(tx: Tx, namespace: str, target_db: str, target_table: str) -> None:
    link = get_link(tx, namespace, target_db, target_table)
    key = (link.namespace, link.target_db, link.target_table)
    tx.x(
        "DELETE FROM LINK_PARTITIONS WHERE LP_LINK_DB = ? AND LP_TARGET_DB = ? "
        "AND LP_TARGET_TBL = ?",
        *key,
    )
    tx.x(
        "DELETE FROM TBL_LINKS WHERE LINK_DB = ? AND TARGET_DB = ? AND TARGET_TBL = ?",
        *key,
    )


class LinkOps(StoreOps):
    """Namespace mode and links, the :class:`~acidstream.txn.store.TxnStore` methods (one DB
    transaction each)."""

    def namespace_mode(self) -> bool:
        """Whether namespace mode is on (clients without a namespace are bound to
        ``default``; see ``docs/namespaces.md``)."""
        value = self._db.run(
            "namespace_mode",
            lambda tx: get_setting(tx, NAMESPACE_MODE),
            write=False,
            idempotent=True,
        )
        return value == "on"

    def set_namespace_mode(self, on: bool) -> None:
        """Turn namespace mode on or off for every client of this metastore."""
        self._db.run(
            "set_namespace_mode",
            lambda tx: set_setting(tx, NAMESPACE_MODE, "on" if on else "off"),
            idempotent=True,
        )

    def create_link(
        self,
        namespace: str,
        target_db: str,
        target_table: str,
        *,
        dynamic: bool = False,
        owner: str = "",
    ) -> LinkDef:
        """Create the link ``target_table@target_db`` in ``namespace`` (metadata only).

        Raises:
            TableNotFoundError: the namespace or the target table does not exist.
            ConfigError: the link exists, or the target is the namespace's own table.
        """
        return self._db.run(
            "create_link",
            lambda tx: create_link(
                tx,
                namespace,
                target_db,
                target_table,
                dynamic=dynamic,
                owner=owner,
                now_ms=self._now_ms(),
            ),
        )

    def get_link(self, namespace: str, target_db: str, target_table: str) -> LinkDef:
        """The link ``target_table@target_db`` of ``namespace``. Raises TableNotFoundError."""
        return self._db.run(
            "get_link",
            lambda tx: get_link(tx, namespace, target_db, target_table),
            write=False,
            idempotent=True,
        )

    def list_links(self, namespace: str | None = None) -> list[LinkDef]:
        """The links held by one namespace, or by all."""
        return self._db.run(
            "list_links", lambda tx: list_links(tx, namespace), write=False, idempotent=True
        )

    def alter_link_partition(
        self, namespace: str, target_db: str, target_table: str, spec: str, *, add: bool
    ) -> LinkDef:
        """Add (it must exist in the target's catalog) or drop one partition (``ds=1``) of
        a static link.

        Raises:
            ConfigError: a dynamic link, an unpartitioned target, a bad spec, a partition
                already exposed (add) or not exposed (drop).
            TableNotFoundError: no such link, or (add) no such partition in the target.
        """
        return self._db.run(
            "alter_link_partition",
            lambda tx: alter_link_partition(
                tx, namespace, target_db, target_table, spec, add=add, now_ms=self._now_ms()
            ),
        )

    def drop_link(self, namespace: str, target_db: str, target_table: str) -> None:
        """Remove a link (the target table and its data are untouched)."""
        self._db.run("drop_link", lambda tx: drop_link(tx, namespace, target_db, target_table))
