"""The chaos suite's fast tier: a fixed set of seeded iterations inside the normal suite
(28 iterations; the Kafka job's scenarios run in the full tier only, Spark being slow to
start).

``make chaos`` runs the full tier (``tests/chaos/run.py``: >= 200 iterations, writes
``docs/chaos.md``). Each case here is ``(scenario, seed, backend)``; a failure message
names the seed and the replay command.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from acidstream.txn.store import open_store
from tests.chaos.harness import (
    InvariantViolation,
    Outcome,
    backend_url,
    check_snapshot,
    committed_next,
    connection_spec,
    make_table,
    pg_unreachable,
    run_child,
    run_iteration,
)

pytestmark = pytest.mark.chaos

FAST_TIER: list[tuple[str, int, str]] = [
    ("connection-batch1-kill", 101, "sqlite"),
    ("connection-batch1-kill", 103, "postgres"),
    ("connection-batchN-kill", 201, "sqlite"),
    ("connection-batchN-kill", 202, "sqlite"),
    ("connection-batchN-kill", 204, "postgres"),
    ("connection-batchN-kill", 205, "postgres"),
    ("connection-partitioned-kill", 10018, "sqlite"),  # found a repair bug (fixed)
    ("connection-partitioned-kill", 302, "postgres"),
    ("connection-sigstop-zombie", 401, "sqlite"),
    ("connection-sigstop-zombie", 402, "postgres"),
    ("connection-pg-terminate", 501, "postgres"),
    ("connection-pg-terminate", 502, "postgres"),
    ("connection-pg-terminate", 503, "postgres"),
    ("connection-storage-fault", 601, "sqlite"),
    ("connection-storage-fault", 602, "sqlite"),
    ("connection-storage-fault", 603, "postgres"),
    ("compactor-kill", 701, "sqlite"),
    ("compactor-kill", 702, "sqlite"),
    ("compactor-kill", 703, "postgres"),
    ("http-server-kill", 801, "sqlite"),
    ("http-server-kill", 802, "postgres"),
    ("connection-clock-jump", 4, "sqlite"),  # forward past the timeout: reaped, typed error
    ("connection-clock-jump", 5, "postgres"),  # backward: nothing reaped, writer finishes
    ("connection-pg-restart", 51009, "pg-private"),  # private cluster restarted mid-commit
    # Admin commands through the CLI (issue 28): `compact` without --partition on a
    # partitioned table wrote a base at the table root and the Cleaner deleted every
    # partition; `repair --apply` deleted a dead writer's file of committed txns whose side
    # file was cut to 0 bytes.
    ("admin-partitioned", 10009, "sqlite"),
    ("admin-torn-side-file", 20006, "postgres"),
    # DELETE/UPDATE/MERGE killed at mutation steps (issue 30 item 7): a MERGE killed before
    # and after its commit (replayed with its key), a moment kill; a delete delta's kill, a
    # MERGE replay, minor and major compaction.
    ("mutation-kill", 60008, "sqlite"),
    ("mutation-kill", 60009, "postgres"),
]

# Outcomes of this session's iterations, for the JVM ORC sample below.
_OUTCOMES: list[Outcome] = []


def _case_id(case: tuple[str, int, str]) -> str:
    return f"{case[0]}-{case[1]}-{case[2]}"


@pytest.mark.parametrize("case", FAST_TIER, ids=_case_id)
def test_iteration_keeps_every_invariant(case: tuple[str, int, str], tmp_path: Path) -> None:
    scenario, seed, backend = case
    if backend == "postgres":
        reason = pg_unreachable()
        if reason is not None:
            pytest.skip(reason)
    if backend == "pg-private":
        from tests.chaos.services import private_postgres

        pg = private_postgres()
        if isinstance(pg, str):
            pytest.skip(f"no private PostgreSQL cluster to restart: {pg}")
    with backend_url(backend, str(tmp_path)) as url:
        outcome = run_iteration(scenario, seed, url, str(tmp_path / "warehouse"))
    print(f"{scenario} seed {seed} {backend}: {outcome.detail} ({outcome.seconds:.1f}s)")
    replay = f".venv/bin/python -m tests.chaos.run --replay {scenario}:{seed}:{backend}"
    assert outcome.ok, f"{outcome.detail}\nreplay: {replay}"
    _OUTCOMES.append(outcome)


@pytest.mark.spark
def test_sample_of_files_reads_in_the_jvm_orc_reader(jvm_orc: Any) -> None:
    """Invariant 4 on a sample: files the fast tier left, at their flush lengths, read
    whole in ORC Java (Hive's reader)."""
    files = [(o, f) for o in _OUTCOMES for f in o.files if Path(f[0]).exists()]
    if not files:
        pytest.skip("no fast-tier iteration ran in this session (run the whole module)")
    sample = files[:: max(1, len(files) // 12)]
    for outcome, (path, length) in sample:
        got = jvm_orc.read(path, max_length=length)
        assert got["rows_read"] == got["rows"], f"{outcome.scenario} seed {outcome.seed}: {path}"


def test_snapshot_check_sees_uncommitted_rows(tmp_path: Path) -> None:
    """The invariant checker is not vacuous: after a writer is killed with uncommitted rows
    behind a flushed footer, a read that ignores the snapshot shows them, and
    :func:`check_snapshot` rejects it; the metastore's snapshot passes."""
    from acidstream.acid.reader import read_path
    from tests.chaos.harness import snapshot_ids

    with backend_url("sqlite", str(tmp_path)) as url:
        with open_store(url, warehouse=str(tmp_path / "wh")) as store:
            t = make_table(store)
            spec = connection_spec(
                url, t, events=200, rows_per_txn=20, txns_per_batch=4, memory_limit_bytes=200,
                hook={"step": "commit_txn.before_commit", "at": 3, "action": "kill"},
            )  # fmt: skip
            code, _out, err = run_child(spec)
            assert code == -signal.SIGKILL, err
            n = committed_next(store, t)
            assert n == 40
            everything = read_path(t.location or "", schema=t.schema).column("id").to_pylist()
            assert len(everything) > n  # the killed txn's auto-flushed rows are on disk
            with pytest.raises(InvariantViolation, match="uncommitted or aborted"):
                check_snapshot(everything, n, n, "self-test")
            assert check_snapshot(snapshot_ids(store, t), n, n, "self-test") == n
            assert json.loads(store.get_table_param("default", "t", "_meta.chaos.next") or "")


def test_once_marker_kills_only_the_first_process_at_a_step(tmp_path: Path) -> None:
    """``ACIDSTREAM_FAULTS_ONCE`` (the Spark task-retry scenario's switch): the first
    process reaching an armed step dies there, a second one (the retry) passes it."""
    import subprocess
    import sys

    from tests.chaos.harness import ROOT

    env = {"ACIDSTREAM_FAULTS": "sink.task_after_flush", "ACIDSTREAM_FAULTS_ONCE": str(tmp_path),
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    code = (
        "from acidstream.acid import faults; faults.point('sink.task_after_flush'); print('passed')"
    )
    runs = [
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    assert runs[0].returncode == -signal.SIGKILL and "passed" not in runs[0].stdout
    assert runs[1].returncode == 0 and runs[1].stdout.strip() == "passed"
    assert (tmp_path / "sink.task_after_flush").exists()
