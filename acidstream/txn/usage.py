"""Capacity tracking per namespace: what each namespace's tables hold on storage.

``acidstream usage`` reports, per namespace (database): its tables and catalog partitions,
and a walk of its tables' directories: files, bytes, and the ACID directories among them
(``base_N``, ``delta_*``, ``delete_delta_*``). Data read through links is counted once, at
its owner: a namespace's links show as a count (``links``: links it holds; ``linked_by``:
links other namespaces hold to its tables), never as bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from acidstream.acid.layout import ParsedBase, ParsedDelta, parse_dir_name
from acidstream.acid.storage import Storage

if TYPE_CHECKING:
    from acidstream.txn.store import TxnStore

__all__ = ["NamespaceUsage", "namespace_usage", "walk_usage"]


@dataclass(frozen=True)
class NamespaceUsage:
    """One namespace's footprint (see the module docstring)."""

    namespace: str
    tables: int = 0
    partitions: int = 0
    files: int = 0
    bytes: int = 0
    bases: int = 0
    deltas: int = 0
    delete_deltas: int = 0
    links: int = 0
    linked_by: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Walk:
    files: int = 0
    bytes: int = 0
    bases: int = 0
    deltas: int = 0
    delete_deltas: int = 0


def walk_usage(location: str, *, storage_options: Mapping[str, Any] | None = None) -> _Walk:
    """Files, bytes and ACID directories under one table directory (all files count:
    data, side files, version markers). A directory removed during the walk (the Cleaner)
    is skipped. ``storage_options``: the filesystem's (endpoint, credentials)."""
    out = _Walk()
    storage, root = Storage.for_path(location, storage_options=storage_options)
    if not storage.exists(root):
        return out
    stack = [root]
    while stack:
        path = stack.pop()
        try:
            entries = storage.list_dir(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for e in entries:
            if not e.is_dir:
                out.files += 1
                out.bytes += e.size
                continue
            parsed = parse_dir_name(e.name)
            if isinstance(parsed, ParsedBase):
                out.bases += 1
            elif isinstance(parsed, ParsedDelta):
                if parsed.is_delete:
                    out.delete_deltas += 1
                else:
                    out.deltas += 1
            stack.append(e.path)
    return out


def namespace_usage(store: TxnStore, namespace: str | None = None) -> list[NamespaceUsage]:
    """The footprint of one namespace, or of every one (by name).

    Raises:
        TableNotFoundError: ``namespace`` does not exist.
    """
    names = [store.get_database(namespace).name] if namespace else None
    if names is None:
        names = [d.name for d in store.list_databases()]
    links = store.list_links()
    out = []
    for ns in names:
        tables = store.list_tables(ns)
        seen: set[str] = set()
        total = _Walk()
        partitions = 0
        for t in tables:
            if t.is_partitioned:
                partitions += len(store.list_partitions(t.db, t.name))
            if not t.location or t.location in seen:
                continue  # two catalog entries on one directory count it once
            seen.add(t.location)
            w = walk_usage(t.location, storage_options=store.storage_options)
            total.files += w.files
            total.bytes += w.bytes
            total.bases += w.bases
            total.deltas += w.deltas
            total.delete_deltas += w.delete_deltas
        out.append(
            NamespaceUsage(
                namespace=ns,
                tables=len(tables),
                partitions=partitions,
                files=total.files,
                bytes=total.bytes,
                bases=total.bases,
                deltas=total.deltas,
                delete_deltas=total.delete_deltas,
                links=sum(1 for link in links if link.namespace == ns),
                linked_by=sum(1 for link in links if link.target_db == ns),
            )
        )
    return out
