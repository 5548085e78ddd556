"""Partition discovery: the ``k=v`` directories of a table, as readers and ``acidstream ls`` see them.

Directory names are decoded by the one partition-name codec,
``acidstream.acid.partition_name.parse_partition_component`` (Hive's ``unescapePathName``; the
default partition ``__HIVE_DEFAULT_PARTITION__`` is ``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

from acidstream.acid.layout import is_hidden, parse_dir_name
from acidstream.acid.partition_name import parse_partition_component
from acidstream.acid.storage import Storage

__all__ = ["Partition", "PartitionValues", "discover_partitions", "partition_values_of_path"]

# ((lower-case key, value or None for the default partition), ...), outermost first.
PartitionValues = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class Partition:
    """One directory holding ACID data: its path and the partition values naming it."""

    path: str
    values: PartitionValues


def partition_values_of_path(path: str) -> PartitionValues:
    """The partition values named by the trailing ``k=v`` components of ``path``
    (so that reading ``table/ds=1`` still returns ``ds``)."""
    out: list[tuple[str, str | None]] = []
    for part in reversed(path.rstrip("/").split("/")):
        kv = parse_partition_component(part)
        if kv is None:
            break
        out.append(kv)
    return tuple(reversed(out))


def discover_partitions(
    storage: Storage, path: str, values: PartitionValues | None = None
) -> list[Partition]:
    """The ``k=v`` partition directories under ``path`` (recursively), or ``path`` itself.

    ``path`` counts as one partition when it holds ACID directories or files, or no
    ``k=v`` directory. ``values`` are those of ``path`` itself; by default they come
    from its trailing ``k=v`` components (:func:`partition_values_of_path`).
    """
    if values is None:
        values = partition_values_of_path(path)
    children = storage.list_dir(path)
    part_dirs = [
        (c, kv)
        for c in children
        if c.is_dir and not is_hidden(c.name)
        for kv in (parse_partition_component(c.name),)
        if kv is not None
    ]
    acid_like = any(
        not c.is_dir or parse_dir_name(c.name) is not None
        for c in children
        if not is_hidden(c.name)
    )
    if not part_dirs or acid_like:
        return [Partition(path, values)]
    out: list[Partition] = []
    for c, kv in part_dirs:
        out.extend(discover_partitions(storage, c.path, (*values, kv)))
    return out
