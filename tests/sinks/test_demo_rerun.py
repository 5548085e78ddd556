"""The main job is re-runnable: ``acidstream run-kafka`` on embedded defaults, twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.kafka
def test_embedded_job_runs_twice_and_each_run_is_exactly_once(tmp_path: Path) -> None:
    from acid.errors import BrokerError
    from sinks.broker import find_broker_binary

    try:
        find_broker_binary()
    except BrokerError as e:
        pytest.skip(f"Kafka broker unavailable: {e}")
    wh = tmp_path / "wh"
    argv = [sys.executable, "-m", "acidstream", "run-kafka", str(ROOT / "configs" / "kafka_to_table.yaml"),
            "--sample-events", "3000", "--bad-every", "1000", "--warehouse", str(wh)]  # fmt: skip
    outs = []
    for _ in range(2):
        proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
        outs.append(proc.stdout)
    assert "reset" not in outs[0] and "reset" in outs[1]
    for out in outs:
        assert "(exactly once)" in out, out
        assert f"checkpoint   {wh}" in out
    # the dead letters of the bad sample records followed the warehouse
    assert list((wh / "_dead_letters" / "events").glob("*.jsonl"))
