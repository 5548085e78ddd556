"""Issue 28: compaction targets are one directory of rows, never a partitioned table's root;
``compact --wait`` failures are one line with the README's exit code; the compaction
commands never create a metastore and honour the namespace binding.

Both metastore backends; the commands run through ``acidstream``'s entry point (``main``,
or a real subprocess where stderr, the working directory or logging must be the real ones).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from acidstream.acid.errors import ConfigError
from acidstream.acid.storage import Storage
from acidstream.acid.writer import write_base
from acidstream.cli.main import EXIT_ERROR, EXIT_STORAGE
from acidstream.compaction.cleaner import Cleaner
from acidstream.compaction.worker import Worker
from acidstream.txn.catalog import TableDef
from acidstream.txn.compaction_sql import (
    FAILED,
    READY_FOR_CLEANING,
    CompactionQueue,
    next_txn_id,
)
from acidstream.txn.store import TxnStore
from tests.compaction.conftest import MakeTbl, Tbl, partitioned_on, rows
from tests.plugins.store_fixture import Cli
from tests.plugins.tmpfs_fixture import Tmpfs, make_read_only
from tests.txn.links_helpers import make_namespaces, write

ROOT = Path(__file__).resolve().parents[2]


NEED_PARTITION = "You must specify a partition to compact for partitioned tables"
"""Hive's words (``ErrorMsg.NO_COMPACTION_PARTITION``)."""


def _run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m acidstream ARGV`` in a real process (this checkout's code), in ``cwd``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ACIDSTREAM_")}
    return subprocess.run(
        [sys.executable, "-m", "acidstream", *argv],
        cwd=cwd, capture_output=True, text=True, timeout=120,
        env={**clean, "PYTHONPATH": str(ROOT), **env},
    )  # fmt: skip


def _dirs(path: str) -> list[str]:
    return sorted(p.name for p in Path(path).iterdir() if p.is_dir())


def _partitioned(make_tbl: MakeTbl) -> tuple[Tbl, dict[str, pa.Table]]:
    """``default.t`` partitioned by ``ds``: two txns into ``ds=a``, one into ``ds=b``."""
    t = make_tbl(partitioned=True)
    t.insert(rows(0, 3), partition="ds=a")
    t.insert(rows(3, 6), partition="ds=b")
    t.insert(rows(6, 9), partition="ds=a")
    return t, {p: t.read(partition=p) for p in ("ds=a", "ds=b")}


# ------------------------------------------------------------------ item 1: the table root


def test_compact_without_partition_compacts_each_partition(make_tbl: MakeTbl, cli: Cli) -> None:
    """``compact db.t --type major --wait`` on a partitioned table queues one request per
    partition; every committed row stays in its partition, and rows committed afterwards
    are read too (the table root never gets a base)."""
    t, before = _partitioned(make_tbl)
    code, out, err = cli("compact", "default.t", "--type", "major", "--wait")
    assert code == 0, err
    assert "compaction 1 queued (major, default.t/ds=a)" in out
    assert "compaction 2 queued (major, default.t/ds=b)" in out
    assert "compaction 1: succeeded" in out and "compaction 2: succeeded" in out
    assert _dirs(t.dir()) == ["ds=a", "ds=b"]  # no base_ at the table root
    for p in ("ds=a", "ds=b"):
        assert [d[:5] for d in _dirs(t.dir(p))] == ["base_"]
        assert t.read(partition=p).equals(before[p])
    t.insert(rows(9, 12), partition="ds=b")
    assert t.read(partition="ds=b").column("id").to_pylist() == [3, 4, 5, 9, 10, 11]


def test_minor_without_partition_compacts_each_partition(make_tbl: MakeTbl, cli: Cli) -> None:
    """``--type minor`` on a partitioned table works per partition (it was refused as "raw
    format" data: the partitions read as original files of the root). A partition with
    one delta has nothing to compact: refused, which is no failure of the table's request."""
    t, before = _partitioned(make_tbl)
    code, out, err = cli("compact", "default.t", "--type", "minor", "--wait")
    assert code == 0, err
    assert "raw format" not in out
    assert "compaction 1: succeeded" in out
    assert "compaction 2 minor default.t/ds=b: refused: None of the compaction thresholds" in out
    assert [d[:6] for d in _dirs(t.dir("ds=a"))] == ["delta_"]  # one delta_1_3_v
    assert _dirs(t.dir()) == ["ds=a", "ds=b"]
    for p in ("ds=a", "ds=b"):
        assert t.read(partition=p).equals(before[p])


def test_queue_refuses_targets_that_are_not_one_directory_of_rows(
    store: TxnStore, make_tbl: MakeTbl
) -> None:
    """Hive's refusal for a table-level request on a partitioned table; a partition of an
    unpartitioned table; a partition naming only some partition columns."""
    make_tbl(partitioned=True)
    make_tbl("u")
    store.create_table(
        TableDef(
            db="default",
            name="two",
            columns=(("id", "bigint"),),
            partition_keys=(("ds", "string"), ("h", "int")),
            parameters={"transactional": "true"},
        )
    )
    q = CompactionQueue(store)
    with pytest.raises(ConfigError, match=NEED_PARTITION):
        q.request("default", "t", None, major=True)
    with pytest.raises(ConfigError, match="not partitioned"):
        q.request("default", "u", "ds=a", major=True)
    with pytest.raises(
        ConfigError, match=r"every partition column in order \(ds=\.\.\./h=\.\.\.\)"
    ):
        q.request("default", "two", "ds=a", major=False)
    assert q.show() == []
    assert q.request("default", "two", "ds=a/h=1", major=True) == (1, True)


def _queue_by_hand(store: TxnStore, state: str, **cols: object) -> int:
    """A table-level request of ``default.t`` written straight into the queue, as an older
    version (without the queue's check) or a hand edit could leave one."""
    names = ["CQ_ID", "CQ_DATABASE", "CQ_TABLE", "CQ_STATE", "CQ_TYPE", "CQ_ENQUEUE_TIME"]
    values: list[object] = [99, "default", "t", state, "a", 0]
    names += list(cols)
    values += list(cols.values())
    sql = (
        f"INSERT INTO COMPACTION_QUEUE ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
    )
    store.database.run("test_queue", lambda tx: tx.x(sql, *values))
    return 99


def test_worker_refuses_a_partitioned_table_root(store: TxnStore, make_tbl: MakeTbl) -> None:
    """A table-level request of a partitioned table that reached the queue anyway fails in
    the worker before any txn or file: no base at the root, the partitions untouched."""
    t, before = _partitioned(make_tbl)
    cq_id = _queue_by_hand(store, "i")
    outcome = Worker(store).run_once()
    assert outcome is not None and outcome.id == cq_id and outcome.state == FAILED
    assert NEED_PARTITION in (outcome.message or "")
    assert outcome.txn_id is None
    rec = CompactionQueue(store).get(cq_id)
    assert rec is not None and rec.state == FAILED
    assert _dirs(t.dir()) == ["ds=a", "ds=b"]
    for p in ("ds=a", "ds=b"):
        assert t.read(partition=p).equals(before[p])


def test_cleaner_refuses_a_partitioned_table_root(store: TxnStore, make_tbl: MakeTbl) -> None:
    """What an older version's worker left: a base at a partitioned table's root (its txn
    committed) and the table-level request ready for cleaning. The cleaner deletes
    nothing (that listing calls every partition directory obsolete): the request fails,
    every partition and its rows stay."""
    t, before = _partitioned(make_tbl)
    (txn,) = store.open_txns(1, user="compactor", host="h")
    write_base(t.dir(), t.schema, 3, rows(0, 9), visibility_txn_id=txn)
    store.commit_txn(txn)
    nxt = store.database.run("next", next_txn_id, write=False)
    cols = {"CQ_TXN_ID": txn, "CQ_HIGHEST_WRITE_ID": 3, "CQ_NEXT_TXN_ID": nxt}
    cq_id = _queue_by_hand(store, READY_FOR_CLEANING, **cols)
    (outcome,) = [o for o in Cleaner(store).run_once() if o.id == cq_id]
    assert outcome.deleted == () and outcome.state.startswith("failed"), outcome
    rec = CompactionQueue(store).get(cq_id)
    assert rec is not None and rec.state == FAILED and NEED_PARTITION in (rec.error_message or "")
    assert _dirs(t.dir()) == [f"base_0000003_v{txn:07d}", "ds=a", "ds=b"]
    for p in ("ds=a", "ds=b"):
        assert t.read(partition=p).equals(before[p])


def test_a_partition_directory_inside_a_partition_is_never_compacted_or_deleted(
    store: TxnStore, make_tbl: MakeTbl
) -> None:
    """A copy of partition ``ds=b`` left inside ``ds=a`` (``ds=a/ds=b/...``; the worker's
    and cleaner's defence against any partition directory below their target, the table
    root's case included). Readers list the copy as original files of ``ds=a``; a major
    compaction of ``ds=a`` made that permanent in a base and the cleaner then deleted the
    copy. Now the worker refuses (failed, nothing written), and so does the cleaner of a
    request that got past an older worker: the files stay as they are."""
    t, _ = _partitioned(make_tbl)
    shutil.copytree(t.dir("ds=b"), Path(t.dir("ds=a")) / "ds=b")
    before = t.read(partition="ds=a")
    q = CompactionQueue(store)
    cq_id, _ = q.request("default", "t", "ds=a", major=True)
    outcome = Worker(store).run_once()
    assert outcome is not None and outcome.id == cq_id and outcome.state == FAILED, outcome
    assert "named like a partition of default.t (ds=b)" in (outcome.message or "")
    assert [d[:6] for d in _dirs(t.dir("ds=a"))] == ["delta_", "delta_", "ds=b"]  # nothing new
    assert t.read(partition="ds=a").equals(before)
    # What an older worker left: a base of ds=a over the copy, ready for cleaning.
    (txn,) = store.open_txns(1, user="compactor", host="h")
    write_base(t.dir("ds=a"), t.schema, 3, rows(0, 9), visibility_txn_id=txn)
    store.commit_txn(txn)
    nxt = store.database.run("next", next_txn_id, write=False)
    cols = {"CQ_PARTITION": "ds=a", "CQ_TXN_ID": txn, "CQ_HIGHEST_WRITE_ID": 3}
    cq_id = _queue_by_hand(store, READY_FOR_CLEANING, CQ_NEXT_TXN_ID=nxt, **cols)
    (cleaned,) = [o for o in Cleaner(store).run_once() if o.id == cq_id]
    assert cleaned.deleted == () and cleaned.state.startswith("failed"), cleaned
    assert "ds=b" in _dirs(t.dir("ds=a"))


def test_compact_without_partition_fails_when_one_partition_fails(
    make_tbl: MakeTbl, cli: Cli
) -> None:
    """The table's requests all run; one failed partition (here the stray copy above) makes
    the command fail in one line naming it, after the other partition was compacted."""
    t, before = _partitioned(make_tbl)
    shutil.copytree(t.dir("ds=b"), Path(t.dir("ds=a")) / "ds=b")
    code, out, err = cli("compact", "default.t", "--type", "major", "--wait")
    assert code == EXIT_ERROR, out + err
    assert "compaction 1: failed" in out and "compaction 2: succeeded" in out, out
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("acidstream: error: compaction 1 of default.t/ds=a failed: "), err
    assert "named like a partition of default.t (ds=b)" in err
    assert [d[:5] for d in _dirs(t.dir("ds=b"))] == ["base_"]
    assert t.read(partition="ds=b").equals(before["ds=b"])


def test_compact_table_with_a_live_writers_side_file_in_a_partition(
    make_tbl: MakeTbl, cli: Cli
) -> None:
    """A streaming writer's batch still open in ``ds=a`` (its ``_flush_length`` side file
    beside the bucket file): ``compact`` of the table compacts what is committed and
    leaves the open txn's rows to be committed later (the root's listing read the side
    file as an ORC file and failed with a traceback)."""
    t = make_tbl(partitioned=True)
    t.insert(rows(0, 3), partition="ds=a")
    t.insert(rows(3, 6), partition="ds=b")
    t.streaming_batch(["commit", "commit", "open"], 2, start=100, partition="ds=a")
    side = list(Path(t.dir("ds=a")).rglob("*_flush_length"))
    assert side  # the live batch's side file
    code, out, err = cli("compact", "default.t", "--type", "major", "--wait")
    assert code == 0, out + err
    assert "AcidFormatError" not in out + err
    assert t.read(partition="ds=a").column("id").to_pylist() == [0, 1, 2, 100, 101, 102, 103]
    t.finish_open("commit")  # the live writer's last txn commits after the compaction
    got = t.read(partition="ds=a").column("id").to_pylist()
    assert got == [0, 1, 2, 100, 101, 102, 103, 104, 105]
    assert t.read(partition="ds=b").column("id").to_pylist() == [3, 4, 5]


# ------------------------------------------------------------------ item 4: storage failure


def test_failed_compaction_is_one_line_and_exit_4(
    store: TxnStore, store_url: str, tmpfs: Tmpfs, tmp_path: Path
) -> None:
    """A partition on a read-only file system: ``compact --wait`` prints one line on
    stderr (no traceback) and exits 4; the request is failed, every row still readable."""
    mnt = tmpfs("4m")
    t = partitioned_on(store, mnt)
    before = t.read(partition="ds=a")
    make_read_only(mnt)
    argv = ["compact", "default.t", "--partition", "ds=a", "--type", "major", "--wait"]
    proc = _run([*argv, "--metastore", store_url, "--warehouse", str(tmp_path / "wh")], ROOT)
    assert proc.returncode == EXIT_STORAGE, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("acidstream: error: compaction 1 of default.t/ds=a failed: ")
    assert "Read-only file system (EROFS)" in proc.stderr
    rec = CompactionQueue(store).get(1)
    assert rec is not None and rec.state == FAILED
    assert t.read(partition="ds=a").equals(before)


# ------------------------------------------------------------------ item 12: no new store


@pytest.mark.parametrize(
    "argv",
    [["compactions"], ["compactor", "--once"], ["compact", "db.t", "--type", "major"]],
    ids=["compactions", "compactor-once", "compact"],
)
def test_compaction_commands_create_no_metastore(argv: list[str], tmp_path: Path) -> None:
    """In an empty directory (or with a mistyped ``--metastore``) the compaction commands
    refuse with "no metastore at ..." and create nothing."""
    proc = _run(argv, tmp_path)
    assert proc.returncode == EXIT_ERROR, proc.stdout + proc.stderr
    assert proc.stderr.startswith("acidstream: error: no metastore at "), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []
    typo = tmp_path / "typo" / "metastore.db"
    proc = _run([*argv, "--metastore", f"sqlite:///{typo}"], tmp_path)
    assert proc.returncode == EXIT_ERROR and "no metastore at" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ item 9: the binding


def test_compact_is_bound_by_namespace(store: TxnStore, cli: Cli) -> None:
    """Namespace mode on: an unbound client may not compact ``b.t1`` (as it may not read
    it); bound to ``b`` it may. ``compactions`` shows a bound client its namespace's only."""
    make_namespaces(store)
    write(store, [("1", range(0, 3)), ("1", range(3, 5))])
    store.set_namespace_mode(True)
    code, out, err = cli("compact", "b.t1", "--partition", "ds=1", "--type", "major")
    assert code == EXIT_ERROR and err.count("\n") == 1, err
    assert err.startswith("acidstream: error: b.t1 is outside namespace default"), err
    code, _, err = cli("compact", "b.t1", "--namespace", "a", "--type", "major")
    assert code == EXIT_ERROR and "outside namespace a" in err, err
    assert CompactionQueue(store).show() == []
    code, out, err = cli("compact", "t1", "--namespace", "b", "--type", "major", "--wait")
    assert code == 0, err
    assert "compaction 1 queued (major, b.t1/ds=1)" in out and "compaction 1: succeeded" in out
    code, out, _ = cli("compactions", "--namespace", "b")
    assert code == 0 and [r.split()[:3] for r in out.splitlines()[2:]] == [["1", "b", "t1"]]
    code, out, _ = cli("compactions")  # unbound in namespace mode: default's only
    assert code == 0 and out.splitlines()[2:] == []


def test_storage_of_partitions_is_listed_not_guessed(make_tbl: MakeTbl, cli: Cli) -> None:
    """A registered partition without data (no directory yet) gets no request."""
    t = make_tbl(partitioned=True)
    t.insert(rows(0, 3), partition="ds=a")
    t.store.add_partition("default", "t", {"ds": "empty"})
    assert not Storage.for_path(t.dir("ds=empty"))[0].exists(t.dir("ds=empty"))
    code, out, err = cli("compact", "default.t", "--type", "major")
    assert code == 0, err
    assert out == "compaction 1 queued (major, default.t/ds=a)\n"
