"""A failing disk never costs committed data: full disk and I/O errors mid-batch.

Two ways to fail the warehouse: a real 1 MiB tmpfs that fills up (needs root, which CI
has), and a ``faulty://`` filesystem that raises ENOSPC or EIO at a chosen write, flush or
hflush. Either way the failing txn is aborted, the error is a typed ``StorageError``, and
every txn committed before it reads back exactly, through the API and the CLI.
"""

from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream.acid.errors import StorageError
from acidstream.cli.main import EXIT_ERROR, EXIT_STORAGE, main
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnState, TxnStore
from tests.ingest.conftest import snapshot_read
from tests.plugins.faulty_fs import FaultPlan, install
from tests.plugins.tmpfs_fixture import Tmpfs

ROWS = 700
BATCH = 4


def _rows(k: int) -> list[tuple[int, str]]:
    rnd = random.Random(k)
    return [(k * ROWS + i, f"{rnd.getrandbits(400):0100x}") for i in range(ROWS)]


def _table(store: TxnStore, name: str, location: str | None) -> TableDef:
    return store.create_table(
        TableDef(db="default", name=name, columns=(("id", "int"), ("msg", "string")),
                 parameters={"transactional": "true"}, location=location)
    )  # fmt: skip


def _stream_until_failure(
    store: TxnStore, name: str, txns: int
) -> tuple[list[int], StorageError | None]:
    """Commit 700-row txns in batches of 4 until the disk fails; the committed ids."""
    committed: list[int] = []
    failure: StorageError | None = None
    conn = StreamingConnection(
        name, record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(txns_per_batch=BATCH),
    )  # fmt: skip
    try:
        for k in range(txns):
            conn.begin_transaction()
            rows = _rows(k)
            conn.write_rows(rows)
            try:
                conn.commit_transaction()
            except StorageError as e:
                failure = e
                assert conn.state is TxnState.ABORTED
                break
            committed += [r[0] for r in rows]
    finally:
        conn.close()  # must not destroy anything committed
    return committed, failure


@pytest.fixture
def plan() -> Iterator[FaultPlan]:
    p = install()
    yield p
    p.disarm()


@pytest.mark.parametrize("op", ["write", "hflush"])
@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO])
def test_injected_failure_at_any_point_keeps_every_committed_txn(
    store: TxnStore, tmp_path: Path, plan: FaultPlan, op: str, err: int
) -> None:
    # a dry run counts the operations, then the failure is placed early, mid-way and late
    t0 = _table(store, "dry", f"faulty://{tmp_path}/dry")
    _stream_until_failure(store, "dry", 10)
    total = plan.counts[op]
    assert total > 10
    for n, frac in enumerate((0.15, 0.5, 0.85)):
        name = f"t{n}"
        t = _table(store, name, f"faulty://{tmp_path}/{name}")
        at = max(1, int(total * frac))
        plan.arm(op, at, err)
        committed, failure = _stream_until_failure(store, name, 10)
        plan.disarm()
        assert plan.counts[op] >= at  # the fault fired
        if failure is None:
            # it hit the final footers at close(): every txn had committed
            assert len(committed) == 10 * ROWS
        else:
            assert failure.errno == err and os.strerror(err) in str(failure)
            assert "committed data is intact" in str(failure)
        got = snapshot_read(store, t).column("id").to_pylist()
        assert sorted(got) == committed  # nothing committed lost, nothing aborted visible
        # the disk is back: the table takes more, and everything reads
        more, failure = _stream_until_failure(store, name, 2)
        assert failure is None
        assert sorted(snapshot_read(store, t).column("id").to_pylist()) == sorted(committed + more)
    assert len(snapshot_read(store, t0)) == 10 * ROWS


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO])
def test_a_failing_disk_during_a_write_rows_auto_flush_aborts_only_that_txn(
    store: TxnStore, tmp_path: Path, plan: FaultPlan, err: int
) -> None:
    """``write_rows`` counts towards the memory limit, so a storage failure can come at the
    call (its auto-flush), not only at commit: typed, the txn aborted, nothing else lost."""
    t = _table(store, "a", f"faulty://{tmp_path}/a")
    opts = StreamingOptions(txns_per_batch=BATCH, memory_limit_bytes=20_000)
    with StreamingConnection("a", record_writer=StrictJsonWriter(), store=store, options=opts) as c:
        c.begin_transaction()
        c.write_rows(_rows(0))
        c.commit_transaction()
        assert c.stats().auto_flushes >= 1
        c.begin_transaction()
        plan.arm("write", 1, err)  # the next write of a file fails
        with pytest.raises(StorageError, match="committed data is intact") as failed:
            c.write_rows(_rows(1))  # 700 rows, ~75 kB: over the limit, flushed at once
        plan.disarm()
        assert failed.value.errno == err
        assert c.state is TxnState.ABORTED
    got = sorted(snapshot_read(store, t).column("id").to_pylist())
    assert got == [r[0] for r in _rows(0)]
    more, failure = _stream_until_failure(store, "a", 2)  # the disk is back
    assert failure is None
    assert sorted(snapshot_read(store, t).column("id").to_pylist()) == sorted(got + more)


@pytest.fixture
def tiny_disk(tmpfs: Tmpfs) -> Path:
    """A real 1 MiB tmpfs (root only; skipped with the reason otherwise)."""
    return tmpfs("1m")


def test_full_disk_mid_batch_keeps_the_table_readable(
    store: TxnStore,
    store_url: str,
    tiny_disk: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    t = _table(store, "t", str(tiny_disk / "t"))
    committed, failure = _stream_until_failure(store, "t", 40)
    assert failure is not None and failure.errno == errno.ENOSPC
    assert len(committed) >= 2 * ROWS  # some txns fitted before the disk filled up
    assert sorted(snapshot_read(store, t).column("id").to_pylist()) == committed
    # the CLI reads every committed row of the full table
    base = ["--metastore", store_url, "--warehouse", str(tmp_path / "wh")]
    capsys.readouterr()
    assert main(["read", "t", "--columns", "id", *base]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(committed)
    # and ingest into the full disk is one line and the storage exit code
    src = tmp_path / "more.jsonl"
    src.write_text("".join(f'{{"id": {10**6 + i}, "msg": "{"y" * 200}"}}\n' for i in range(20_000)))
    code = main(["ingest", "t", "--format", "json", "--txn-rows", "5000", str(src), *base])
    err = capsys.readouterr().err
    assert code == EXIT_STORAGE, err
    assert err.count("\n") == 1 and "No space left on device" in err and "Traceback" not in err
    after = sorted(snapshot_read(store, t).column("id").to_pylist())
    assert after[: len(committed)] == committed  # the ingest's own commits come on top
    assert all(i >= 10**6 for i in after[len(committed) :])


def test_cli_full_disk_is_one_line_without_traceback(tiny_disk: Path, tmp_path: Path) -> None:
    env = {**os.environ, "ACIDSTREAM_WAREHOUSE": str(tiny_disk / "wh")}
    env.pop("ACIDSTREAM_METASTORE", None)
    run = [sys.executable, "-m", "acidstream"]
    assert (
        subprocess.run([*run, "create-table", "t", "id int, msg string"], env=env).returncode == 0
    )
    src = tmp_path / "big.jsonl"
    src.write_text(
        "".join(f'{{"id": {i}, "msg": "{os.urandom(60).hex()}"}}\n' for i in range(30_000))
    )
    proc = subprocess.run([*run, "ingest", "t", "--format", "json", str(src)], env=env,
                          capture_output=True, text=True)  # fmt: skip
    # the table's files or the embedded metastore beside them hit the full disk first
    assert proc.returncode in (EXIT_STORAGE, EXIT_ERROR), proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("ingest:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "No space left on device" in lines[0] or "disk is full" in lines[0]
