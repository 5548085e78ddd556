"""``acidstream repair``: clear what a failure left in a table, never touching committed data.

Runs :func:`acidstream.recovery.fsck.fsck_table` and plans one action per repairable finding. The plan
is made once, by one code path (:func:`_plan`), as if the timed-out txns were already
aborted (``fsck_table(assume_reaped=True)``): a dry run (the default) prints it, and
``apply=True`` carries out exactly that plan, in order, re-checking each step against a
fresh snapshot right before it runs (a re-check may only skip a step, never add one);
then fsck runs again. In order:

1. **Dead writers' txns**: open txns not heartbeaten within ``txn_timeout_s`` are aborted
   (:meth:`acidstream.txn.txn_ops.TxnOps.reap_timed_out`, the housekeeper's step: one atomic store
   call, so a txn that heartbeats meanwhile is kept). Only timed-out txns: a slow live
   writer is never aborted.
2. **Aborted directories**: a directory whose write ids are *all* aborted is removed. A
   directory that also holds a committed write id is never removed (its aborted rows stay
   hidden by their write id until a compaction drops them).
3. **Streaming files whose writer died** (:mod:`acidstream.recovery.streaming_files` decides): the
   file is cut back to a readable footer that keeps every committed row -- the side
   file's last length when it is right, else the last readable footer (a
   ``bad_side_file`` finding) -- then the side file is removed. The cut is a copy of the
   prefix renamed over the file, so a writer that was only paused (SIGSTOP) and resumes
   keeps writing into the old, unlinked file and cannot tear the new one. A file never
   flushed (an empty side file and no readable footer) is moved to the quarantine. A
   data file is never deleted.
4. **Partitions on disk but not in the catalog** are registered; catalog partitions
   without a directory are reported (restore the files or drop the partition).
5. **Unknown files** are moved, not deleted, into the hidden ``.acidstream_quarantine``
   directory of the table (readers skip hidden names).

Unreadable files and side files no safe cut exists for are reported only: an operator
decides. Obsolete directories are the cleaner's work (``acidstream compact``). An action
that fails (a read-only file system, an I/O error) is reported with its
:class:`~acidstream.acid.errors.StorageError`; the others still run.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from acidstream.acid.directory import is_lb_dir_name
from acidstream.acid.errors import AcidStreamError, storage_error
from acidstream.acid.layout import ParsedDelta, parse_dir_name, side_file_name
from acidstream.acid.partition_name import parse_partition_component
from acidstream.acid.storage import Storage
from acidstream.recovery.fsck import (
    QUARANTINE_DIR,
    Finding,
    FsckReport,
    WriteIdStates,
    fsck_table,
)
from acidstream.recovery.streaming_files import judge_dead_writer_file
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore

__all__ = ["Action", "RepairReport", "recover_streaming_file", "repair_table"]

log = logging.getLogger(__name__)

_COPY_CHUNK = 8 << 20


@dataclass(frozen=True)
class Action:
    """One repair step: planned (dry run) or carried out.

    Attributes:
        action: ``abort_txns``, ``remove_dir``, ``recover_file``, ``register_partition``,
            ``quarantine``, or ``none`` (reported, not repairable here).
        path: What it acts on.
        detail: What it does (or why not).
        done: Carried out (``apply``) without error.
        error: Why it failed (``failed``) or was skipped at the last re-check.
        failed: It was tried and failed (a :class:`~acidstream.acid.errors.StorageError`, in
            ``error``); a skipped step is not failed.
        cut_to: ``recover_file``: the planned cut (``None``: moved to the quarantine).
    """

    action: str
    path: str
    detail: str
    done: bool = False
    error: str | None = None
    failed: bool = False
    cut_to: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "path": self.path,
            "detail": self.detail,
            "done": self.done,
            "error": self.error,
            "failed": self.failed,
        }


@dataclass(frozen=True)
class RepairReport:
    """What repair planned or did, with fsck before and (when applied) after."""

    table: str
    applied: bool
    actions: tuple[Action, ...]
    before: FsckReport
    after: FsckReport | None = None

    @property
    def failed(self) -> tuple[Action, ...]:
        """The actions tried and failed (never the skipped ones)."""
        return tuple(a for a in self.actions if a.failed)

    @property
    def exit_code(self) -> int:
        """Dry run: fsck's code before. Applied: fsck's code after (0 once clean)."""
        report = self.after if self.after is not None else self.before
        if any(a.error for a in self.actions):
            return max(report.exit_code, 1)
        return report.exit_code

    def to_json(self) -> str:
        return json.dumps(
            {
                "table": self.table,
                "applied": self.applied,
                "exit_code": self.exit_code,
                "actions": [a.to_dict() for a in self.actions],
                "before": json.loads(self.before.to_json()),
                "after": None if self.after is None else json.loads(self.after.to_json()),
            },
            indent=2,
        )


def recover_streaming_file(storage: Storage, path: str, length: int) -> None:
    """Cut ``path`` back to its first ``length`` bytes and remove its side file.

    The prefix is copied to a hidden file in the same directory, made durable and renamed
    over ``path``: the rename is atomic, and a paused writer still holding the old file
    open writes into an unlinked inode. A cut to nothing is refused: a file is never
    deleted here (``length`` must be a readable footer's end).
    """
    if length <= 0:
        raise ValueError(f"{path}: a cut to {length} bytes would delete the file; refused")
    side = side_file_name(path)
    directory, name = path.rsplit("/", 1)
    tmp = storage.join(directory, f".{name}.recover")
    storage.delete(tmp)
    with storage.open_read(path) as src, storage.create(tmp, overwrite=True) as dst:
        left = length
        while left > 0:
            chunk = src.read(min(_COPY_CHUNK, left))
            if not chunk:
                raise OSError(f"{path}: ended before its flush length {length}")
            dst.write(chunk)
            left -= len(chunk)
        storage.durable_flush(dst)
    storage.rename(tmp, path)
    storage.delete(side)


def _plan(table: TableDef, report: FsckReport) -> list[Action]:
    """The one plan: an action per finding of ``report`` (fsck with the timed-out txns
    counted as aborted), in the order apply carries them out."""
    out: list[Action] = []
    stale = sorted({t for f in report.of_kind("timed_out_txn") for t in f.txn_ids})
    if stale:
        out.append(
            Action(
                "abort_txns",
                table.full_name,
                f"abort timed-out txns {stale} (and any other timed-out txn of the metastore)",
            )
        )
    removed = [f.path.rstrip("/") + "/" for f in report.of_kind("aborted_dir")]
    for f in report.findings:
        if any(f.path.startswith(r) for r in removed):
            continue  # inside a directory that goes whole
        if f.kind == "aborted_dir":
            out.append(Action("remove_dir", f.path, f.detail))
        elif f.kind in ("dead_writer_side_file", "bad_side_file") and f.cut_to is not None:
            what = f"cut to {f.cut_to} bytes, side file removed"
            out.append(
                Action("recover_file", f.path, f"{what} ({f.kind}: {f.detail})", cut_to=f.cut_to)
            )
        elif f.kind in ("dead_writer_side_file", "bad_side_file") and f.quarantine:
            what = f"move with its side file to {QUARANTINE_DIR}/"
            out.append(Action("recover_file", f.path, f"{what} ({f.kind}: {f.detail})"))
        elif f.kind == "partition_not_in_catalog":
            out.append(Action("register_partition", f.path, "add the partition to the catalog"))
        elif f.kind == "unknown_file":
            out.append(Action("quarantine", f.path, f"move to {QUARANTINE_DIR}/: {f.detail}"))
        elif f.kind in (
            "unreadable_file",
            "bad_side_file",
            "dead_writer_side_file",
            "partition_missing_on_disk",
        ):
            out.append(Action("none", f.path, f"not repaired ({f.kind}): {f.detail}"))
    return out


def repair_table(
    store: TxnStore,
    table: TableDef,
    *,
    apply: bool = False,
    txn_timeout_s: float | None = None,
    deep: bool = True,
) -> RepairReport:
    """Plan (and with ``apply`` carry out) the repair of one table; see the module doc.

    The dry run's actions and the applied ones are the same list, in the same order:
    apply carries out the plan the dry run shows, each step re-checked (and skipped if the
    table moved on since), and adds none.

    Args:
        store: The table's metastore.
        table: The table.
        apply: Carry the plan out; without it nothing is changed.
        txn_timeout_s: Open txns without a heartbeat for this long count as dead writers'
            (default: the metastore's ``txn_timeout_s`` setting, which writers heartbeat
            from; a shorter value is an operator's override that aborts live writers too).
        deep: fsck decodes every stripe (default), not only file tails.
    """
    # One value for the plan, the reap and the check after it.
    if txn_timeout_s is None:
        txn_timeout_s = store.txn_timeout_s()
    before = fsck_table(store, table, txn_timeout_s=txn_timeout_s, deep=deep, assume_reaped=True)
    planned = _plan(table, before)
    if not apply:
        return RepairReport(table.full_name, False, tuple(planned), before)
    assert table.location is not None
    storage, root = store.storage(table.location)  # with the store's options (endpoint...)
    actions: list[Action] = []
    for a in planned:
        if a.action == "abort_txns":
            reaped = store.reap_timed_out(timeout_s=txn_timeout_s)
            actions.append(
                Action("abort_txns", table.full_name, f"aborted timed-out txns {reaped}", done=True)
            )
        else:
            actions.append(_carry_out(store, table, storage, root, a))
    after = fsck_table(store, table, txn_timeout_s=txn_timeout_s, deep=deep)
    return RepairReport(table.full_name, True, tuple(actions), before, after)


_OUTCOME = {
    "remove_dir": "the directory (all aborted write ids) may be partly removed",
    "recover_file": "the file is as it was (the cut is a copy renamed over it)",
    "quarantine": "the file is where it was",
}


def _carry_out(store: TxnStore, table: TableDef, storage: Storage, root: str, a: Action) -> Action:
    """One action, re-checked against a fresh snapshot right before it runs. A failure of
    the file system is returned as the action's :class:`~acidstream.acid.errors.StorageError`."""
    try:
        if a.action == "remove_dir":
            return _remove_aborted_dir(store, table, storage, a)
        if a.action == "recover_file":
            return _recover(store, table, storage, root, a)
        if a.action == "register_partition":
            rel = a.path[len(root.rstrip("/")) + 1 :]
            kv = [parse_partition_component(p) for p in rel.split("/")]
            if any(x is None for x in kv):
                return _skip(a, f"{rel} is not a partition path")
            values = dict(x for x in kv if x is not None)
            info = store.add_partition(table.db, table.name, values)
            return _done(a, f"registered {info.name}")
        if a.action == "quarantine":
            if not storage.exists(a.path):
                return _skip(a, "it is gone")
            return _done(a, f"moved to {_quarantine(storage, root, a.path)}")
        return a
    except OSError as e:
        err = storage_error(e, f"{a.action} {a.path}", _OUTCOME.get(a.action, "nothing changed"))
        log.warning("repair: %s", err)
        return Action(a.action, a.path, a.detail, error=str(err), failed=True, cut_to=a.cut_to)


def _done(a: Action, detail: str) -> Action:
    return Action(a.action, a.path, detail, done=True, cut_to=a.cut_to)


def _skip(a: Action, why: str) -> Action:
    return Action(a.action, a.path, a.detail, error=f"skipped: {why}", cut_to=a.cut_to)


def _quarantine(storage: Storage, root: str, path: str) -> str:
    """Move ``path`` to the same place under the table's quarantine (a free name: a file
    already there is never overwritten). Returns where it went."""
    rel = path[len(root.rstrip("/")) + 1 :]
    dest = storage.join(root, QUARANTINE_DIR, rel)
    n = 0
    while storage.exists(dest):
        n += 1
        dest = storage.join(root, QUARANTINE_DIR, f"{rel}.{n}")
    storage.makedirs(dest.rsplit("/", 1)[0])
    storage.rename(path, dest)
    return dest


def _states_now(store: TxnStore, table: TableDef) -> WriteIdStates:
    """Write id states at a fresh snapshot (each action re-checks right before it runs)."""
    wids = store.get_valid_write_ids(table.db, table.name, store.get_valid_txns())
    return WriteIdStates(store, table, wids)


def _remove_aborted_dir(store: TxnStore, table: TableDef, storage: Storage, a: Action) -> Action:
    parsed = parse_dir_name(a.path.rsplit("/", 1)[-1])
    if parsed is None:
        return _skip(a, "not an ACID directory")
    if isinstance(parsed, ParsedDelta):
        lo, hi = parsed.min_write_id, parsed.max_write_id
    else:
        lo = hi = parsed.write_id
    if parsed.visibility_txn_id > 0:
        return _skip(a, "compactor output: the cleaner's work")
    if not _states_now(store, table).range_all_aborted(lo, hi):
        return _skip(a, f"write ids {lo}..{hi} are no longer all aborted")
    storage.delete(a.path, recursive=True)
    return _done(a, f"removed (write ids {lo}..{hi} all aborted)")


def _recover(store: TxnStore, table: TableDef, storage: Storage, root: str, a: Action) -> Action:
    """A dead writer's file: judged again now; carried out only if the judgement is the
    planned one (the same cut, or the quarantine)."""
    dir_path = a.path.rsplit("/", 1)[0]
    while is_lb_dir_name(dir_path.rsplit("/", 1)[-1]):
        # The file sits in a list-bucketing directory of the delta: its writer's batch is
        # the delta's.
        dir_path = dir_path.rsplit("/", 1)[0]
    parsed = parse_dir_name(dir_path.rsplit("/", 1)[-1])
    if not isinstance(parsed, ParsedDelta):
        return _skip(a, "not in a delta directory")
    lo, hi = parsed.min_write_id, parsed.max_write_id
    states = _states_now(store, table)
    if states.range_has_open(lo, hi):
        return _skip(a, f"a write id of {lo}..{hi} is open: its writer is alive")
    if not storage.exists(side_file_name(a.path)):
        return _skip(a, "its side file is gone (the writer finished it)")
    try:
        size = storage.size(a.path)
        now = judge_dead_writer_file(storage, a.path, size=size, state_of=states.state)
    except AcidStreamError as e:
        return _skip(a, f"cannot be judged again: {e}")
    planned = f"cut:{a.cut_to}" if a.cut_to is not None else "quarantine"
    if now.remedy != planned:
        return _skip(a, f"the file changed since the plan (now: {now.remedy}: {now.detail})")
    if now.cut_to is not None:
        recover_streaming_file(storage, a.path, now.cut_to)
        return _done(a, f"cut {size} -> {now.cut_to} bytes; side file removed")
    side = side_file_name(a.path)
    dest = _quarantine(storage, root, a.path)
    side_dest = _quarantine(storage, root, side)
    return _done(a, f"moved to {dest} (never flushed), side file to {side_dest}")


def describe_finding(f: Finding) -> str:
    """One line for a finding, for logs."""
    return f"{f.severity} {f.kind} {f.path}: {f.detail}"
