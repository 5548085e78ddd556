"""The checks before a table's catalog entry is pointed at another directory.

``set-location`` changes only the catalog: files are not moved. Pointed away from its
data, a table reads as empty and its committed rows are orphaned (issue 28, item 9). So a
table is re-pointed only when nothing would be left behind: no file under its current
location, no writer streaming into it, and either no committed write id or files at the
new location (the data was moved there by hand, or the table's old relative location is
being migrated to the directory that really holds its files). Nor is a table pointed
into, above or at another table's directory: the two would read each other's files.

Moving the data ourselves is not offered: a directory rename is atomic only within one
file system, and readers holding a snapshot, the Cleaner and writers that opened before
the move would still use the old paths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from acidstream.acid.errors import ConfigError
from acidstream.acid.storage import Storage
from acidstream.txn.catalog import TableDef, is_absolute_location
from acidstream.txn.db import Tx
from acidstream.txn.snapshot_sql import (
    read_table_writes,
    read_txn_snapshot,
    table_write_state,
    valid_read_txn_list,
)

__all__ = ["WriteCounts", "check_relocation", "first_file_under", "table_write_counts"]


def first_file_under(
    location: str | None, *, storage_options: Mapping[str, Any] | None = None
) -> str | None:
    """A file anywhere under ``location`` (data, side file, version marker), or ``None``
    when there is none, the directory is missing, or the location is relative (an old
    store's, which names no one directory). ``storage_options``: the filesystem's
    (endpoint, credentials).

    Raises:
        ConfigError: the location cannot be looked at (an unknown scheme, a file system
            whose client is missing or unreachable, a directory that cannot be listed):
            what cannot be checked is not re-pointed.
    """
    if not location or not is_absolute_location(location):
        return None
    try:
        storage, path = Storage.for_path(location, storage_options=storage_options)
        pending = [path]
        while pending:
            d = pending.pop()
            try:
                entries = storage.list_dir(d)
            except (FileNotFoundError, NotADirectoryError):
                continue
            for e in entries:
                if not e.is_dir:
                    return e.path
                pending.append(e.path)
    except (ImportError, OSError, ValueError) as e:  # ConfigError too: an unknown protocol
        raise ConfigError(
            f"cannot look for data under {location} ({e}); set-location re-points only a "
            "table whose current and new locations it can check"
        ) from e
    return None


@dataclass(frozen=True)
class WriteCounts:
    """A table's write ids in the current snapshot: committed, and open (a writer)."""

    committed: int
    open: tuple[int, ...]


def table_write_counts(tx: Tx, db: str, table: str) -> WriteCounts:
    """How many of the table's write ids are committed and which are open, as a reader
    starting now would see them. Write ids whose txn records were purged count as
    committed (the safe side: they may be)."""
    valid = valid_read_txn_list(*read_txn_snapshot(tx), 0)
    hwm, opens, aborted, _ = table_write_state(valid, *read_table_writes(tx, db, table, valid))
    return WriteCounts(hwm - len(opens) - len(aborted), tuple(opens))


def _overlap(a: str, b: str) -> bool:
    """Whether two absolute locations are the same directory or one holds the other."""
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def check_relocation(
    t: TableDef,
    new: str,
    writes: WriteCounts,
    *,
    old_file: str | None,
    new_file: str | None,
    others: Sequence[tuple[str, str]] = (),
) -> None:
    """Refuse to point ``t`` at ``new`` when committed data would be orphaned, or when
    ``new`` is, holds or lies inside another table's directory (the two tables would read
    and compact each other's files).

    Args:
        writes: the table's write ids, read in the DB transaction that changes it.
        old_file: a file under the current location (:func:`first_file_under`).
        new_file: a file under ``new``.
        others: every other table's ``(name, location)``.

    Raises:
        ConfigError: saying what data the table has, or which table is in the way, and
            what to do instead.
    """
    old = t.location or ""
    what = f"cannot set the location of {t.full_name}"
    if old_file is not None:
        raise ConfigError(
            f"{what}: it has data under {old} ({old_file}); pointed at {new} it would read "
            "as empty and its committed rows would be orphaned. Leave it where it is, or "
            f"stop its writers, move the directory to {new} yourself and run set-location "
            "again (an empty old location and files at the new one are accepted)"
        )
    if writes.open:
        ids = ", ".join(map(str, writes.open))
        raise ConfigError(
            f"{what}: write ids {ids} are open (a writer is streaming into {old}); let it "
            "finish or abort its txns (`acidstream abort TXNID`) first"
        )
    for name, loc in others:
        if is_absolute_location(loc) and _overlap(new, loc):
            raise ConfigError(
                f"{what}: {new} overlaps the directory of table {name} ({loc}); give each "
                "table a directory of its own"
            )
    if writes.committed and new_file is None:
        raise ConfigError(
            f"{what}: it has {writes.committed} committed write id(s) and there is no file "
            f"under {new}; point it at the directory that holds its files"
        )
