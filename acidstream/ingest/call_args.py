"""What callers pass to a connection's typed write paths, checked once: row tuples
(``write_rows``, ``upsert_rows``) and partition names or value lists
(``commit_transaction(partitions=...)``). Split from :mod:`acidstream.ingest.connection`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from acidstream.acid.errors import ConfigError, SerializationError
from acidstream.acid.partition_name import DEFAULT_PARTITION_NAME, parse_partition_name

__all__ = ["partition_values", "row_tuples"]


def row_tuples(rows: Iterable[Sequence[Any]], width: int) -> list[tuple[Any, ...]]:
    """``rows`` as tuples (C loops; a tuple is taken as it is), each checked to have
    ``width`` values; ``SerializationError`` names the first row that does not."""
    try:
        new = list(map(tuple, rows))
    except TypeError as e:
        raise SerializationError(f"a row is not a sequence of column values: {e}") from e
    lengths = list(map(len, new))
    if lengths.count(width) != len(new):
        i = next(i for i, k in enumerate(lengths) if k != width)
        raise SerializationError(f"row {i} has {len(new[i])} values, the table has {width} columns")
    return new


def partition_values(p: str | Sequence[str], keys: Sequence[str]) -> list[str | None]:
    if not isinstance(p, str):
        return list(p)
    kv = dict(parse_partition_name(p))
    if set(kv) != set(keys):
        raise ConfigError(f"partition {p!r} must name exactly {list(keys)}")
    return [None if kv[k] == DEFAULT_PARTITION_NAME else kv[k] for k in keys]
