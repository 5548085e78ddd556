"""What a row-level mutation reports: counts, its write id, the files it wrote, its time.

Frozen values, also stored (as JSON) with the commit of a mutation run under an
idempotency key, so that a repeat returns the first run's result without writing.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

__all__ = ["ChangeResult", "MergeResult", "MutationResult", "from_json", "to_json"]


@dataclass(frozen=True, kw_only=True)
class MutationResult:
    """The outcome of ``Table.delete`` or ``Table.update``.

    Attributes:
        rows_deleted: rows removed (delete events written) by a DELETE.
        rows_updated: rows given a new version by an UPDATE.
        write_id: the table write id of the mutation's txn (one per mutation, also when
            nothing matched: the txn committed and wrote nothing).
        files_written: the bucket files written (delete deltas and deltas), absolute.
        partitions: the partitions written (``k=v/...``; ``()`` for an unpartitioned table
            or when nothing matched).
        seconds: wall time of the run that committed (retries included).
        attempts: txns it took (``1``: none lost a commit conflict or had to start again
            because a conflicting update committed while it waited for its lock).
        replayed: the result was stored by an earlier run with the same idempotency key;
            nothing was written now.
    """

    rows_deleted: int = 0
    rows_updated: int = 0
    write_id: int
    files_written: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    seconds: float = 0.0
    attempts: int = 1
    replayed: bool = False


@dataclass(frozen=True, kw_only=True)
class MergeResult:
    """The outcome of ``Table.merge(...).execute()``; attributes as :class:`MutationResult`,
    plus ``rows_inserted`` (source rows the WHEN NOT MATCHED clauses inserted)."""

    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    write_id: int
    files_written: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    seconds: float = 0.0
    attempts: int = 1
    replayed: bool = False


@dataclass(frozen=True, kw_only=True)
class ChangeResult:
    """The outcome of applying a batch of change events (``acidstream.mutation.changes``):
    what happened to each key after the batch was collapsed to one event per key.

    Attributes:
        events: change events given.
        keys: distinct keys after the collapse (one event each).
        inserted / updated / deleted: rows inserted (new keys), given a new version
            (existing keys), removed.
        absent_deletes: deletes of keys the table does not hold (no-ops, counted).
        skipped_late: events older than the row in the table (``ordering_guard``), left out.
        txn_id: the txn that committed the changes.
        write_id, files_written, partitions, seconds, attempts, replayed: as
            :class:`MutationResult`.
    """

    events: int = 0
    keys: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    absent_deletes: int = 0
    skipped_late: int = 0
    txn_id: int = 0
    write_id: int
    files_written: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    seconds: float = 0.0
    attempts: int = 1
    replayed: bool = False

    @property
    def upserts(self) -> int:
        """Keys written with a new version (inserted + updated)."""
        return self.inserted + self.updated


R = TypeVar("R", MutationResult, MergeResult, ChangeResult)


def to_json(result: MutationResult | MergeResult | ChangeResult) -> str:
    """The result as the JSON an idempotency key's commit stores."""
    return json.dumps({"kind": type(result).__name__, **asdict(result)}, sort_keys=True)


def from_json(text: str, kind: type[R]) -> R:
    """A stored result, marked ``replayed``.

    Raises:
        ValueError: the stored text is not a result of ``kind`` (the key was used by
            another kind of mutation).
    """
    data: dict[str, Any] = json.loads(text)
    if data.pop("kind", None) != kind.__name__:
        raise ValueError(f"the stored result is not a {kind.__name__}: {text[:200]}")
    names = {f.name for f in fields(kind)}
    args = {k: v for k, v in data.items() if k in names}
    for k in ("files_written", "partitions"):
        args[k] = tuple(args.get(k, ()))
    args["replayed"] = True
    return kind(**args)
