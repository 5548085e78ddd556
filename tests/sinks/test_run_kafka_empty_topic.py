"""``acidstream run-kafka --sample-events 0``: a run over an empty topic is a valid run
with nothing to do, and its summary says every (zero) event landed exactly once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.kafka
def test_embedded_job_over_an_empty_topic_reports_a_match(tmp_path: Path) -> None:
    from acid.errors import BrokerError
    from sinks.broker import find_broker_binary

    try:
        find_broker_binary()
    except BrokerError as e:
        pytest.skip(f"Kafka broker unavailable: {e}")
    wh = tmp_path / "wh"
    argv = [sys.executable, "-m", "acidstream", "run-kafka", str(ROOT / "configs" / "kafka_to_table.yaml"),
            "--sample-events", "0", "--warehouse", str(wh)]  # fmt: skip
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
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
    argv = [sys.executable, "-m", "acidstream", "run-kafka", str(ROOT / "configs" / "kafka_to_table.yaml"),
            option, "-1", "--warehouse", str(tmp_path / "wh")]  # fmt: skip
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert proc.stderr.splitlines() == [
        f"acidstream run-kafka: error: argument {option}: expected a count (0 or more), got -1"
        " (see acidstream run-kafka --help)"
    ]
    assert not (tmp_path / "wh").exists()  # nothing was started
