"""The main job on embedded defaults (``acidstream run-kafka``): re-runnable, exactly once,
valid over an empty topic, and its counts checked before anything starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run_kafka(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``acidstream run-kafka configs/kafka_to_table.yaml ARGS`` in ``tmp_path``."""
    argv = [sys.executable, "-m", "acidstream", "run-kafka",
            str(ROOT / "configs" / "kafka_to_table.yaml"), *args]  # fmt: skip
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)


def _need_broker() -> None:
    from acidstream.jobs.broker import find_broker_binary
    from acidstream.jobs.errors import BrokerError

    try:
        find_broker_binary()
    except BrokerError as e:
        pytest.skip(f"Kafka broker unavailable: {e}")


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.kafka
def test_embedded_job_runs_twice_and_each_run_is_exactly_once(tmp_path: Path) -> None:
    _need_broker()
    wh = tmp_path / "wh"
    outs = []
    for _ in range(2):
        proc = _run_kafka(
            tmp_path, "--sample-events", "3000", "--bad-every", "1000", "--warehouse", str(wh)
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
        outs.append(proc.stdout)
    assert "reset" not in outs[0] and "reset" in outs[1]
    for out in outs:
        assert "(exactly once)" in out, out
        assert f"checkpoint   {wh}" in out
    # the dead letters of the bad sample records followed the warehouse
    assert list((wh / "_dead_letters" / "events").glob("*.jsonl"))


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.kafka
def test_embedded_job_over_an_empty_topic_reports_a_match(tmp_path: Path) -> None:
    """``--sample-events 0``: a run with nothing to do is valid, and its summary says every
    (zero) event landed exactly once."""
    _need_broker()
    proc = _run_kafka(tmp_path, "--sample-events", "0", "--warehouse", str(tmp_path / "wh"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    assert [ln.split() for ln in lines if ln.startswith(("total ", "distinct ids"))][:2] == [
        ["total", "0"],
        ["distinct", "ids", "0"],
    ]
    (verdict,) = [ln for ln in lines if ln.startswith("sample events produced")]
    assert verdict.split() == ["sample", "events", "produced", "0", "(exactly", "once)"]


@pytest.mark.parametrize("option", ["--sample-events", "--bad-every"])
def test_a_negative_count_is_a_usage_error(tmp_path: Path, option: str) -> None:
    proc = _run_kafka(tmp_path, option, "-1", "--warehouse", str(tmp_path / "wh"))
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert proc.stderr.splitlines() == [
        f"acidstream run-kafka: error: argument {option}: expected a count (0 or more), got -1"
        " (see acidstream run-kafka --help)"
    ]
    assert not (tmp_path / "wh").exists()  # nothing was started
