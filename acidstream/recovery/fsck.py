"""``acidstream fsck``: check a Hive ACID table's files against its metastore.

What an operator runs after an incident (a writer killed, a full disk, a lost metastore
connection) to learn whether the table is healthy, and what ``acidstream repair`` would
do about it (``docs/recovery.md``). Nothing here writes.

One check per finding kind (:data:`KINDS` lists them with their severity):

* every data file of every base / delta / delete_delta directory opens and decodes at its
  logical length (the last ``_flush_length`` entry, or its size);
* side files whose writer is gone: no write id of the directory's range is still open, so
  the file will never be finished by its writer (``repair`` truncates it to the last flush
  length and removes the side file, as ``orcfiledump --recover``);
* directories of aborted write ids (every write id of the range aborted: no committed
  write id needs them);
* directories no snapshot can see any more (``getAcidState``'s obsolete list: the cleaner's
  work, reported only);
* files and directories that are none of the above (unknown names);
* partitions on disk but not in the catalog, and catalog partitions without a directory;
* open txns of the table whose heartbeat is older than the txn timeout (dead writers).

Severity: ``info`` is no problem (exit 0), ``warning`` is a leftover ``repair`` can fix
(exit :data:`EXIT_WARNINGS`), ``error`` means data cannot be read as it stands (exit
:data:`EXIT_ERRORS`).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from acidstream.acid.directory import get_acid_state, is_lb_dir_name
from acidstream.acid.errors import AcidStreamError
from acidstream.acid.layout import (
    ACID_FORMAT_FILE,
    METADATA_FILE,
    SIDE_FILE_SUFFIX,
    ParsedBase,
    ParsedDelta,
    is_hidden,
    parse_bucket_file,
    parse_dir_name,
    parse_original_file,
    side_file_name,
)
from acidstream.acid.orc_inspect import inspect_orc
from acidstream.acid.partition_name import parse_partition_component
from acidstream.acid.partitions import discover_partitions
from acidstream.acid.snapshot import ValidTxnList, ValidWriteIdList
from acidstream.acid.storage import FileInfo, Storage
from acidstream.recovery.streaming_files import (
    SideFileState,
    judge_dead_writer_file,
    read_side_file,
)
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnState, TxnStore

__all__ = [
    "EXIT_CLEAN",
    "EXIT_ERRORS",
    "EXIT_WARNINGS",
    "KINDS",
    "Finding",
    "FsckReport",
    "Severity",
    "SideFileState",
    "WriteIdStates",
    "fsck_path",
    "fsck_table",
    "read_side_file",
]

EXIT_CLEAN = 0
"""No finding, or information only."""
EXIT_WARNINGS = 6
"""Leftovers of a failure that ``acidstream repair --apply`` can clear."""
EXIT_ERRORS = 7
"""Data that cannot be read as it stands: an operator must look."""

QUARANTINE_DIR = ".acidstream_quarantine"
"""Hidden directory (readers skip it) under the table where ``repair`` moves unknown files."""


class Severity(enum.IntEnum):
    """How bad a finding is; the report's exit code is that of its worst finding."""

    INFO = 0
    WARNING = 1
    ERROR = 2

    def __str__(self) -> str:
        return self.name.lower()


KINDS: dict[str, tuple[Severity, str]] = {
    "unreadable_file": (Severity.ERROR, "a data file does not decode at its logical length"),
    "bad_side_file": (Severity.ERROR, "a live writer's side file is torn or points past the file"),
    "dead_writer_side_file": (
        Severity.WARNING,
        "a streaming file whose writer is gone (no write id of its range is open)",
    ),
    "aborted_dir": (Severity.WARNING, "a directory whose write ids are all aborted"),
    "unknown_file": (Severity.WARNING, "a file or directory acidstream does not know"),
    "partition_not_in_catalog": (Severity.WARNING, "a partition directory the catalog lacks"),
    "partition_missing_on_disk": (Severity.WARNING, "a catalog partition without a directory"),
    "timed_out_txn": (
        Severity.WARNING,
        "an open txn of the table not heartbeaten within the txn timeout (dead writer)",
    ),
    "obsolete_dir": (Severity.INFO, "a directory no snapshot can see (the cleaner removes it)"),
    "aborted_compaction": (
        Severity.INFO,
        "output of an aborted compaction, invisible to readers (the cleaner removes it)",
    ),
    "streaming_in_progress": (Severity.INFO, "a side file of a writer whose txns are open"),
    "write_in_progress": (
        Severity.INFO,
        "a file without a side file, of a writer whose txn is open, that does not decode yet",
    ),
    "partly_aborted_dir": (
        Severity.INFO,
        "a directory holding aborted and committed write ids (compaction drops the aborted rows)",
    ),
    "no_snapshot": (Severity.INFO, "a path no metastore knows: every write id counts as valid"),
}


@dataclass(frozen=True)
class Finding:
    """One thing fsck found.

    Attributes:
        kind: A key of :data:`KINDS`.
        path: The file, directory or partition concerned.
        detail: What exactly, in one line.
        write_ids: The write id range concerned, when there is one.
        txn_ids: The txns concerned, when there are some.
        cut_to: For a dead writer's streaming file: the length ``repair`` cuts it to (a
            readable footer that keeps every committed row).
        quarantine: For a dead writer's streaming file: ``repair`` moves it (and its side
            file) to the quarantine, as nothing in it can be read.
    """

    kind: str
    path: str
    detail: str = ""
    write_ids: tuple[int, int] | None = None
    txn_ids: tuple[int, ...] = ()
    cut_to: int | None = None
    quarantine: bool = False

    @property
    def severity(self) -> Severity:
        return KINDS[self.kind][0]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "severity": str(self.severity),
            "kind": self.kind,
            "path": self.path,
            "detail": self.detail,
        }
        if self.write_ids is not None:
            out["write_ids"] = list(self.write_ids)
        if self.txn_ids:
            out["txn_ids"] = list(self.txn_ids)
        if self.cut_to is not None:
            out["cut_to"] = self.cut_to
        if self.quarantine:
            out["quarantine"] = True
        return out


@dataclass(frozen=True)
class FsckReport:
    """Every finding about one table (or path), and how much was looked at."""

    target: str
    table: str | None
    findings: tuple[Finding, ...]
    files_checked: int = 0
    dirs_checked: int = 0
    partitions_checked: int = 0

    @property
    def worst(self) -> Severity:
        return max((f.severity for f in self.findings), default=Severity.INFO)

    @property
    def exit_code(self) -> int:
        return {Severity.INFO: EXIT_CLEAN, Severity.WARNING: EXIT_WARNINGS}.get(
            self.worst, EXIT_ERRORS
        )

    @property
    def clean(self) -> bool:
        """No warning and no error (information findings are allowed)."""
        return self.worst == Severity.INFO

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def to_json(self) -> str:
        return json.dumps(
            {
                "target": self.target,
                "table": self.table,
                "status": "clean" if self.clean else str(self.worst),
                "exit_code": self.exit_code,
                "files_checked": self.files_checked,
                "dirs_checked": self.dirs_checked,
                "partitions_checked": self.partitions_checked,
                "findings": [f.to_dict() for f in self.findings],
            },
            indent=2,
        )


# ---------------------------------------------------------------------------------------------
# snapshot helpers


class WriteIdStates:
    """Whether each write id of a table is committed, aborted or open, as of one snapshot.

    The snapshot's ``ValidWriteIdList`` answers for most ids; an id it cannot settle (an
    exception listed as open, or one above its high watermark, which Hive's rule moves
    down to the lowest invalid id when no valid write follows) is looked up through its
    txn in the store. An id no txn maps to (never allocated, or purged long after its
    commit) is ``unknown``, which is not open.

    ``reaped``: txns to count as aborted although they are open: the timed-out txns that
    ``repair --apply`` aborts first, so that its plan shows what it does after the abort.
    """

    def __init__(
        self,
        store: TxnStore | None,
        table: TableDef | None,
        write_ids: ValidWriteIdList,
        *,
        reaped: frozenset[int] = frozenset(),
    ) -> None:
        self._store, self._table, self.write_ids = store, table, write_ids
        self._reaped = reaped
        self._cache: dict[int, str] = {}

    def state(self, write_id: int) -> str:
        """``committed``, ``aborted``, ``open`` or ``unknown``."""
        if self.write_ids.is_write_id_valid(write_id):
            return "committed"
        if self.write_ids.is_write_id_aborted(write_id):
            return "aborted"
        if self._store is None or self._table is None:
            return "open"
        if write_id not in self._cache:
            txn = self._store.txn_for_write_id(self._table.db, self._table.name, write_id)
            st = None if txn is None else self._store.txn_state(txn)
            if st == TxnState.OPEN and txn in self._reaped:
                st = TxnState.ABORTED
            self._cache[write_id] = {
                TxnState.OPEN: "open",
                TxnState.ABORTED: "aborted",
                TxnState.COMMITTED: "committed",
            }.get(st, "unknown") if st is not None else "unknown"  # fmt: skip
        return self._cache[write_id]

    def range_has_open(self, lo: int, hi: int) -> bool:
        """Whether a live writer may still hold part of ``lo..hi``."""
        return any(self.state(w) == "open" for w in range(lo, hi + 1))

    def range_all_aborted(self, lo: int, hi: int) -> bool:
        """Every write id of ``lo..hi`` aborted: no committed write id needs the directory."""
        return all(self.state(w) == "aborted" for w in range(lo, hi + 1))

    def aborted_in(self, lo: int, hi: int) -> list[int]:
        return [w for w in range(lo, hi + 1) if self.state(w) == "aborted"]


# ---------------------------------------------------------------------------------------------
# the checks


@dataclass
class _Walk:
    """State of one fsck run."""

    storage: Storage
    states: WriteIdStates | None
    txns: ValidTxnList | None
    deep: bool
    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    dirs: int = 0

    def add(self, kind: str, path: str, detail: str = "", **kw: Any) -> None:
        self.findings.append(Finding(kind, path, detail, **kw))


def _check_data_file(w: _Walk, f: FileInfo, parsed: ParsedBase | ParsedDelta) -> None:
    """One bucket file: its side file (if any) and whether it decodes at its logical length.

    A dead writer's file (a side file, no write id of its range open) is judged by
    :func:`acidstream.recovery.streaming_files.judge_dead_writer_file`, which also says what ``repair``
    does with it (the finding's ``cut_to`` / ``quarantine``)."""
    w.files += 1
    length = f.size
    pending: str | None = None
    lo, hi = (
        (parsed.min_write_id, parsed.max_write_id)
        if isinstance(parsed, ParsedDelta)
        else (parsed.write_id, parsed.write_id)
    )
    if w.storage.exists(side_file_name(f.path)):
        states = w.states
        if states is not None and states.range_has_open(lo, hi):
            try:
                side = read_side_file(w.storage, f.path)
            except (OSError, AcidStreamError) as e:
                w.add("bad_side_file", side_file_name(f.path), f"cannot read: {e}")
                return
            if side is None:
                length = w.storage.size(f.path)  # the writer finished the file meanwhile
            elif side.torn or side.last > f.size or side.last < 0:
                w.add(
                    "bad_side_file",
                    side_file_name(f.path),
                    f"torn={side.torn} last flush {side.last} of a {f.size}-byte file "
                    "(a live writer's: left alone)",
                    write_ids=(lo, hi),
                )
                return
            else:
                w.add(
                    "streaming_in_progress",
                    f.path,
                    f"flushed {side.last} of {f.size} bytes",
                    write_ids=(lo, hi),
                )
                length = side.last
        elif states is not None and states.range_all_aborted(lo, hi):
            # Every write id of the directory is aborted: no committed row can be in the
            # file, whatever its side file says; the directory is an ``aborted_dir``
            # (``_classify_dir``), which repair removes whole. Nothing in it is read.
            return
        else:
            # No metastore (fsck PATH): no write id can be shown aborted.
            state_of = states.state if states is not None else (lambda _wid: "unknown")
            v = judge_dead_writer_file(w.storage, f.path, size=f.size, state_of=state_of)
            w.add(
                v.kind,
                f.path,
                v.detail,
                write_ids=(lo, hi),
                cut_to=v.cut_to,
                quarantine=v.quarantine,
            )
            return  # the judge decoded the file whole at its cut, or found nothing readable
    else:
        pending = _uncommitted(w, parsed, lo, hi)
        if pending == "aborted":
            # A one-shot file (a mutation's, an INSERT's: no side file) of aborted write ids
            # only: nothing committed can be in it, no reader opens it, and the directory
            # is an ``aborted_dir`` that repair removes whole, torn file or not.
            return
    if length == 0:
        return  # an empty file, or nothing flushed yet (Hive's readers skip those)
    try:
        orc_file, _info = inspect_orc(w.storage, f.path, length=length, file_length=f.size)
        if w.deep:
            orc_file.read()  # every stripe, not just the tail
    except Exception as e:  # any decoder failure means: unreadable at this length
        if pending == "open":
            # Its writer's txn is open: the file is still being written (no footer yet).
            w.add(
                "write_in_progress",
                f.path,
                f"txn of write ids {lo}..{hi} open; not readable yet: {type(e).__name__}",
                write_ids=(lo, hi),
            )
            return
        w.add("unreadable_file", f.path, f"at length {length}: {type(e).__name__}: {e}")


def _uncommitted(w: _Walk, parsed: ParsedBase | ParsedDelta, lo: int, hi: int) -> str | None:
    """For a writer's own directory (no ``_v`` suffix) none of whose write ids committed:
    ``"aborted"`` when they all aborted, ``"open"`` when one is still open; else ``None``
    (committed data, a compactor's output, or no metastore to ask)."""
    if w.states is None or parsed.visibility_txn_id > 0:
        return None
    seen: set[str] = set()
    for wid in range(lo, hi + 1):
        seen.add(w.states.state(wid))
        if not seen <= {"open", "aborted"}:
            return None
    if seen == {"aborted"}:
        return "aborted"
    return "open" if "open" in seen else None


_KNOWN_IN_ACID_DIR = frozenset({ACID_FORMAT_FILE, METADATA_FILE})


def _check_acid_dir(
    w: _Walk, d: FileInfo, parsed: ParsedBase | ParsedDelta, *, top: bool = True
) -> None:
    """The files of a base/delta, and of its list-bucketing directories (``k=v`` or the
    default one, ``top=False``: the writers put a bucket's files and side files there)."""
    if top:
        w.dirs += 1
    for f in w.storage.list_dir(d.path):
        if is_hidden(f.name) and f.name not in _KNOWN_IN_ACID_DIR:
            continue
        if f.is_dir:
            if is_lb_dir_name(f.name):
                _check_acid_dir(w, f, parsed, top=False)
            else:
                w.add("unknown_file", f.path, "a directory inside an ACID directory")
            continue
        if f.name in _KNOWN_IN_ACID_DIR:
            continue
        if f.name.endswith(SIDE_FILE_SUFFIX):
            data = f.path[: -len(SIDE_FILE_SUFFIX)]
            if not w.storage.exists(data):
                w.add("unknown_file", f.path, "a side file without its data file")
            continue
        if parse_bucket_file(f.name) is not None or parse_original_file(f.name) is not None:
            _check_data_file(w, f, parsed)
            continue
        w.add("unknown_file", f.path, "not a bucket file")


def _classify_dir(w: _Walk, d: FileInfo, parsed: ParsedBase | ParsedDelta) -> None:
    """Aborted or partly aborted directories, and aborted compaction output."""
    if w.states is None or w.txns is None:
        return
    vis = parsed.visibility_txn_id
    if vis > 0 and w.txns.is_txn_aborted(vis):
        w.add("aborted_compaction", d.path, f"compactor txn {vis} aborted", txn_ids=(vis,))
        return
    if isinstance(parsed, ParsedDelta):
        lo, hi = parsed.min_write_id, parsed.max_write_id
        if w.states.range_all_aborted(lo, hi):
            w.add("aborted_dir", d.path, f"write ids {lo}..{hi} all aborted", write_ids=(lo, hi))
        elif aborted := w.states.aborted_in(lo, hi):
            w.add(
                "partly_aborted_dir",
                d.path,
                f"aborted write ids {aborted} among {lo}..{hi}",
                write_ids=(lo, hi),
            )
    elif vis == 0 and w.states.state(parsed.write_id) == "aborted":
        wid = parsed.write_id
        w.add("aborted_dir", d.path, f"aborted INSERT OVERWRITE base {wid}", write_ids=(wid, wid))


def _check_partition_dir(w: _Walk, path: str, *, table_root: bool) -> None:
    """Every child of one partition (or unpartitioned table) directory."""
    for c in w.storage.list_dir(path):
        if is_hidden(c.name):
            continue
        if c.is_dir:
            parsed = parse_dir_name(c.name)
            if parsed is not None:
                _classify_dir(w, c, parsed)
                _check_acid_dir(w, c, parsed)
            elif not (table_root and parse_partition_component(c.name) is not None):
                w.add("unknown_file", c.path, "a directory that is neither ACID nor a partition")
        elif parse_original_file(c.name) is None:
            w.add("unknown_file", c.path, "a file with a name Hive does not read")
        else:
            w.files += 1  # an original (pre-ACID) file: read it whole
            try:
                orc_file, _ = inspect_orc(w.storage, c.path, file_length=c.size)
                if w.deep:
                    orc_file.read()
            except Exception as e:  # any decoder failure
                w.add("unreadable_file", c.path, f"original file: {type(e).__name__}: {e}")
    if w.txns is not None:
        try:
            wids = w.states.write_ids if w.states is not None else None
            state = get_acid_state(path, write_ids=wids, txns=w.txns, storage=w.storage)
        except AcidStreamError as e:
            prefix = path.rstrip("/") + "/"
            if not any(
                f.path.startswith(prefix) and (f.cut_to is not None or f.quarantine)
                for f in w.findings
            ):
                w.add("unreadable_file", path, f"getAcidState fails: {e}")
            # else: a dead writer's side file that repair fixes broke the listing; its own
            # finding says so.
            return
        for o in state.obsolete:
            w.add("obsolete_dir", o)


def _timed_out_txns(store: TxnStore, table: TableDef, timeout_s: float) -> list[Finding]:
    """Open txns holding a write id of the table whose heartbeat is older than the timeout."""
    now = store.clock()
    cutoff_ms = int((now - timeout_s) * 1000)
    out = []
    for t in store.show_txns():
        if t.state != TxnState.OPEN or t.last_heartbeat_ms >= cutoff_ms:
            continue
        wid = store.write_id_for_txn(t.txn_id, table.db, table.name)
        if wid is None:
            continue  # a txn of another table, or one that has not written yet
        out.append(
            Finding(
                "timed_out_txn",
                table.full_name,
                f"txn {t.txn_id} (write id {wid}, agent {t.agent_info or '?'}): "
                f"no heartbeat for {now - t.last_heartbeat_ms / 1000:.0f}s",
                write_ids=(wid, wid),
                txn_ids=(t.txn_id,),
            )
        )
    return out


def _partition_dirs(
    store: TxnStore, table: TableDef, storage: Storage, root: str
) -> tuple[list[str], list[Finding]]:
    """The partition directories to check, and the catalog/disk mismatches."""
    if not table.is_partitioned:
        return [root], []
    findings: list[Finding] = []
    catalog = {p.location.rstrip("/"): p for p in store.list_partitions(table.db, table.name)}
    cat_paths = {store.storage(loc)[1].rstrip("/"): loc for loc in catalog}
    on_disk: list[str] = []
    if storage.exists(root):
        on_disk = [
            p.path.rstrip("/")
            for p in discover_partitions(storage, root)
            if p.path.rstrip("/") != root.rstrip("/") and len(p.values) == len(table.partition_keys)
        ]
    for p in on_disk:
        if p not in cat_paths:
            findings.append(Finding("partition_not_in_catalog", p, "on disk, not in the catalog"))
    for path, loc in sorted(cat_paths.items()):
        # An object store has no directories: a partition's prefix exists while it holds
        # objects, and one whose aborted or compacted files the Cleaner removed is gone.
        if not storage.exists(path) and not storage.is_object_store:
            name = catalog[loc.rstrip("/")].name
            findings.append(Finding("partition_missing_on_disk", path, f"catalog partition {name}"))
    dirs = sorted(set(on_disk) | {p for p in cat_paths if storage.exists(p)})
    return dirs, findings


def fsck_table(
    store: TxnStore,
    table: TableDef,
    *,
    partition: str | None = None,
    partitions: Sequence[str] | None = None,
    txn_timeout_s: float | None = None,
    deep: bool = True,
    assume_reaped: bool = False,
) -> FsckReport:
    """Check one table (or one of its partitions) against the store's current snapshot.

    Args:
        store: The table's metastore.
        table: The table (``store.get_table``).
        partition: A partition name (``ds=1/h=2``) to check that partition only.
        partitions: Partition names to check only those (a static link's).
        txn_timeout_s: Open txns not heartbeaten for this long are reported as dead
            (default: the metastore's ``txn_timeout_s`` setting, which writers heartbeat
            from; a shorter value is an operator's override and reports live writers).
        deep: Decode every stripe of every file (default), not only the file tails.
        assume_reaped: Judge the files as if the timed-out txns (still reported as
            ``timed_out_txn``) were aborted: ``repair``'s plan, which aborts them first.
    """
    assert table.location is not None
    storage, root = store.storage(table.location)  # with the store's options (endpoint...)
    timeout_s = store.txn_timeout_s() if txn_timeout_s is None else txn_timeout_s
    timed_out = _timed_out_txns(store, table, timeout_s)
    txns = store.get_valid_txns()
    write_ids = store.get_valid_write_ids(table.db, table.name, txns)
    reaped = frozenset(t for f in timed_out for t in f.txn_ids) if assume_reaped else frozenset()
    w = _Walk(storage, WriteIdStates(store, table, write_ids, reaped=reaped), txns, deep)
    mismatch: list[Finding] = []
    if partition is not None:
        partitions = (partition,)
    if partitions is not None:
        dirs = [storage.join(root, p) for p in partitions]
    else:
        dirs, mismatch = _partition_dirs(store, table, storage, root)
        if table.is_partitioned and storage.exists(root):
            _check_table_root(w, root)
    for d in dirs:
        if storage.exists(d):
            _check_partition_dir(w, d, table_root=not table.is_partitioned)
    w.findings.extend(mismatch)
    w.findings.extend(timed_out)
    return FsckReport(
        target=_target_name(table, partitions),
        table=table.full_name,
        findings=tuple(_ordered(w.findings)),
        files_checked=w.files,
        dirs_checked=w.dirs,
        partitions_checked=len(dirs),
    )


def _target_name(table: TableDef, partitions: Sequence[str] | None) -> str:
    if partitions is None:
        return table.full_name
    if len(partitions) == 1:
        return f"{table.full_name}/{partitions[0]}"
    return f"{table.full_name} (partitions {', '.join(partitions) or 'none'})"


def _check_table_root(w: _Walk, root: str) -> None:
    """A partitioned table's own directory holds partition directories only."""
    for c in w.storage.list_dir(root):
        if is_hidden(c.name):
            continue
        if not c.is_dir or parse_partition_component(c.name) is None:
            w.add("unknown_file", c.path, "not a partition directory of a partitioned table")


def fsck_path(
    path: str, *, deep: bool = True, storage_options: Mapping[str, Any] | None = None
) -> FsckReport:
    """Check a directory no metastore knows: file readability and unknown names only.
    ``storage_options``: the filesystem's (endpoint, credentials)."""
    storage, root = Storage.for_path(path, storage_options=storage_options)
    w = _Walk(storage, None, ValidTxnList(), deep)
    w.add("no_snapshot", root, "aborted and open write ids cannot be told from committed ones")
    parts = discover_partitions(storage, root)
    for p in parts:
        _check_partition_dir(w, p.path, table_root=True)
    return FsckReport(
        target=path,
        table=None,
        findings=tuple(_ordered(w.findings)),
        files_checked=w.files,
        dirs_checked=w.dirs,
        partitions_checked=len(parts),
    )


def _ordered(findings: Iterable[Finding]) -> Sequence[Finding]:
    return sorted(findings, key=lambda f: (-f.severity, f.kind, f.path))
