"""A compaction command that fails says so in one line on stderr, with the README's exit
code (issue 28, items 4 and 5 follow-ups):

* ``compactor --once`` exits 4 when a compaction of its pass failed on storage, 1 otherwise
  (it used to exit 0);
* ``compact --wait`` whose compaction committed but whose cleaning failed (a read-only file
  system) says that cleaning failed and exits 4 (it used to print "ready for cleaning
  (waiting for older readers)" and exit 0);
* a minor compaction that cannot read a dead writer's side file fails in one line naming
  ``acidstream repair`` (the cleaner's warning used to be a second stderr line).

Real file systems (a tmpfs remounted read-only), real writers killed in child processes, the
CLI in real processes where stderr is checked. Both metastore backends.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acidstream.acid import faults
from acidstream.cli.main import EXIT_ERROR, EXIT_STORAGE, main
from acidstream.compaction.service import Compactor
from acidstream.txn.catalog import TableDef
from acidstream.txn.compaction_sql import FAILED, READY_FOR_CLEANING, CompactionQueue
from acidstream.txn.store import TxnState, TxnStore
from tests.chaos.harness import make_table, snapshot_ids
from tests.compaction.conftest import partitioned_on
from tests.plugins.tmpfs_fixture import Tmpfs, make_read_only
from tests.recovery.test_repair_side_files import COMMITTED, batch_killed_after_two_commits

ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str], store_url: str, warehouse: str) -> subprocess.CompletedProcess[str]:
    """``python -m acidstream ARGV --metastore M --warehouse W`` in a process of its own."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ACIDSTREAM_")}
    return subprocess.run(
        [sys.executable, "-m", "acidstream", *argv, "--metastore", store_url,
         "--warehouse", warehouse],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
        env={**clean, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def _one_error_line(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("acidstream: error: "), proc.stderr
    return proc.stderr


# ------------------------------------------------------------------ compactor --once


def test_compactor_once_exits_4_when_a_compaction_of_its_pass_fails_on_storage(
    store: TxnStore, store_url: str, warehouse: str, tmpfs: Tmpfs
) -> None:
    mnt = tmpfs("4m")
    t = partitioned_on(store, mnt)
    before = t.read(partition="ds=a")
    CompactionQueue(store).request("default", "t", "ds=a", major=True)
    make_read_only(mnt)
    proc = _run(["compactor", "--once", "--no-initiator", "--no-housekeeper"], store_url, warehouse)
    err = _one_error_line(proc, EXIT_STORAGE)
    assert err.startswith("acidstream: error: compaction 1 of default.t/ds=a failed: "), err
    assert "Read-only file system (EROFS)" in err
    assert "compaction 1 major default.t/ds=a: failed" in proc.stdout
    rec = CompactionQueue(store).get(1)
    assert rec is not None and rec.state == FAILED
    assert t.read(partition="ds=a").equals(before)


def _dead_writer_with_empty_side_file(store: TxnStore) -> tuple[TableDef, Path, bytes]:
    """A batch of 5 killed after 2 commits (20 rows in one open file), its side file cut to
    0 bytes, its open txns aborted (as the housekeeper reaps them): the table, the data
    file and its bytes (what ``repair`` recovers the committed rows from)."""
    table = make_table(store)
    path = batch_killed_after_two_commits(store, table)
    Path(f"{path}_flush_length").write_bytes(b"")
    for x in store.show_txns():
        if x.state == TxnState.OPEN:
            store.abort_txn(x.txn_id)
    return table, path, path.read_bytes()


def _repair_then_read(store: TxnStore, store_url: str, warehouse: str, t: TableDef) -> None:
    """What the error says to do: ``repair --apply`` gives back every committed row."""
    proc = _run(["repair", "default.t", "--apply"], store_url, warehouse)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(snapshot_ids(store, t)) == list(range(COMMITTED))


def test_compactor_once_exits_1_and_names_repair_for_a_dead_writers_side_file(
    store: TxnStore, store_url: str, warehouse: str
) -> None:
    t, path, data = _dead_writer_with_empty_side_file(store)
    CompactionQueue(store).request("default", "t", None, major=False)
    proc = _run(["compactor", "--once", "--no-initiator", "--no-housekeeper"], store_url, warehouse)
    err = _one_error_line(proc, EXIT_ERROR)
    assert err.startswith("acidstream: error: compaction 1 of default.t failed: "), err
    assert "side file" in err and "`acidstream repair default.t`" in err, err
    assert path.read_bytes() == data
    _repair_then_read(store, store_url, warehouse, t)


# ------------------------------------------------------------------ compact --wait


def test_compact_wait_on_a_dead_writers_side_file_is_one_line_naming_repair(
    store: TxnStore, store_url: str, warehouse: str
) -> None:
    """The chaos seed admin-torn-side-file 10005: the minor compaction cannot read the dead
    writer's side file (a legitimate refusal: the file's length is unknown); the cleaner's
    aborted-data pass fails on it too, which is a line of the output, not of stderr."""
    t, path, data = _dead_writer_with_empty_side_file(store)
    proc = _run(["compact", "default.t", "--type", "minor", "--wait"], store_url, warehouse)
    err = _one_error_line(proc, EXIT_ERROR)
    assert err.startswith("acidstream: error: compaction 1 of default.t failed: "), err
    assert "side file found but is not readable" in err
    assert "if that writer is dead, `acidstream repair default.t`" in err, err
    assert "compaction 1: failed" in proc.stdout.splitlines(), proc.stdout
    assert path.read_bytes() == data
    _repair_then_read(store, store_url, warehouse, t)


def test_compact_wait_reports_a_failed_cleaning_and_exits_4(
    store: TxnStore,
    store_url: str,
    warehouse: str,
    tmpfs: Tmpfs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The compaction commits; the file system turns read-only as the Cleaner starts
    deleting (a real EROFS). ``--wait`` says the compaction succeeded and cleaning failed,
    why, and that the daemon retries it; never "ready for cleaning (waiting for older
    readers)". Run in this process to remount at the Cleaner's step."""
    mnt = tmpfs("4m")
    t = partitioned_on(store, mnt)
    before = t.read(partition="ds=a")
    hits: list[str] = []

    def remount_at_cleaning(step: str) -> None:
        if step == "cleaner.before_delete" and not hits:
            hits.append(step)
            make_read_only(mnt)

    faults.set_hook(remount_at_cleaning)
    try:
        capsys.readouterr()
        argv = ["compact", "default.t", "--partition", "ds=a", "--type", "major", "--wait"]
        code = main([*argv, "--metastore", store_url, "--warehouse", warehouse])
        out, err = capsys.readouterr()
    finally:
        faults.set_hook(None)
    assert hits, "the Cleaner never reached a delete"
    assert code == EXIT_STORAGE, out + err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(
        "acidstream: error: compaction 1 of default.t/ds=a succeeded, but cleaning failed: "
    ), err
    assert "(EROFS)" in err and "`acidstream compactor`, retries it" in err, err
    assert "waiting for older readers" not in out, out
    assert "compaction 1: compacted, cleaning failed" in out.splitlines(), out
    # Still ready for cleaning (the daemon retries), every row readable.
    rec = CompactionQueue(store).get(1)
    assert rec is not None and rec.state == READY_FOR_CLEANING
    assert t.read(partition="ds=a").equals(before)


def test_the_daemon_still_logs_a_failed_cleaning_as_a_warning(
    store: TxnStore, tmpfs: Tmpfs, caplog: pytest.LogCaptureFixture
) -> None:
    """The commands print a failed cleaning on stdout; the ``Compactor`` a daemon runs
    (default ``on_warning``) logs it as a WARNING, and retries it on its next pass."""
    mnt = tmpfs("4m")
    t = partitioned_on(store, mnt)
    CompactionQueue(store).request("default", "t", "ds=a", major=True)
    events: list[str] = []
    faults.set_hook(lambda step: make_read_only(mnt) if step == "cleaner.before_delete" else None)
    try:
        with caplog.at_level(logging.WARNING, logger="acidstream.compaction"):
            report = Compactor(store, initiator=False, on_event=events.append).run_once()
    finally:
        faults.set_hook(None)
    ((failed,),) = [[c for c in report.cleaned if c.error is not None]]
    assert failed.id == 1 and isinstance(failed.error, OSError)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warned] == [failed.summary()]
    assert "cleaning failed (Read-only file system (EROFS)" in failed.summary()
    assert not any("cleaning failed" in e for e in events)  # a warning, not an event
    rec = CompactionQueue(store).get(1)
    assert rec is not None and rec.state == READY_FOR_CLEANING
    assert t.read(partition="ds=a").num_rows == 6


def test_compactor_once_prints_the_librarys_warnings_on_stdout(
    store: TxnStore, store_url: str, warehouse: str
) -> None:
    """The initiator cannot size the table and the Cleaner cannot clean its aborted data
    (the dead writer's side file): warnings of the pass, lines of its output; stderr stays
    empty (a failing command's stderr is its one error line). Nothing failed: exit 0."""
    _t, path, data = _dead_writer_with_empty_side_file(store)
    proc = _run(["compactor", "--once", "--no-housekeeper"], store_url, warehouse)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(ln.startswith("warning: initiator: default.t: ") for ln in lines), lines
    assert any(ln.startswith("cleaner aborted data default.t: cleaning failed (") for ln in lines)
    assert path.read_bytes() == data
