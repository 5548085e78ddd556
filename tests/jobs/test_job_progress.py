"""The Kafka job's progress reporting (driver side, no Spark): a batch's lag lookup, a
broker round trip, happens on the job's progress thread, so the next micro-batch does not
wait for it; every batch's line and ``on_batch`` call are out, in order, when the job
closes. The broker here is a real TCP listener that accepts and never answers: the lookup
takes its whole bootstrap timeout (2 s)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acidstream.jobs.config import KafkaJobConfig
from acidstream.jobs.kafka_job import _Progress, ensure_table
from acidstream.jobs.metrics import BatchSummary


@pytest.fixture
def silent_broker() -> Iterator[str]:
    """``host:port`` of a listener that accepts connections and never says a word."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield f"127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()


def _stats(batch_id: int) -> dict[str, Any]:
    return {"batch_id": batch_id, "write_ids": [batch_id + 1] * 2, "rows": 10, "bad_records": 0,
            "files": 1, "seconds": 0.1, "committed_at": time.time()}  # fmt: skip


def _config(silent_broker: str, store_url: str, tmp_path: Path) -> KafkaJobConfig:
    cfg = KafkaJobConfig.load(
        None,
        overrides={"kafka.topic": "t", "kafka.bootstrap_servers": silent_broker,
                   "table.name": "default.events", "table.columns": "id bigint",
                   "metastore": store_url, "warehouse": str(tmp_path / "wh"),
                   "checkpoint": str(tmp_path / "ckpt"), "kafka.end_offsets_from": "fetch"},
        env={},
    )  # fmt: skip
    ensure_table(cfg)
    return cfg


def test_the_batch_thread_does_not_wait_for_the_lag_lookup(
    silent_broker: str, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    progress = _Progress(_config(silent_broker, store_url, tmp_path), silent_broker)
    seen: list[BatchSummary] = []
    on_thread: list[str] = []

    def on_batch(s: BatchSummary) -> None:
        seen.append(s)
        on_thread.append(threading.current_thread().name)

    try:
        t0 = time.monotonic()
        for b in range(3):
            progress.committed(_stats(b), on_batch)
        returned = time.monotonic() - t0
        progress.skipped(3)
    finally:
        progress.close()
    # Each lookup waits for the silent broker (2 s bootstrap timeout): three batches
    # reported inline would take 6 s; the batch thread took none of it.
    assert returned < 1.0, returned
    assert [s.batch_id for s in seen] == [0, 1, 2]  # all reported by close, in order
    assert all(s.lag is None for s in seen)  # the lookups failed: lag unknown, not 0
    assert all(n.startswith("acidstream-progress") for n in on_thread), on_thread
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["batch 0", "batch 1", "batch 2", "batch 3"]
    assert "lag ?" in out[0] and "skipped" in out[3]


def test_an_on_batch_that_raises_is_logged_and_the_next_batch_is_still_reported(
    silent_broker: str, store_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The batch is committed whatever its report does: a failing callback is a warning,
    not a stop of the reports (nor of the job, whose batch thread never sees it)."""
    progress = _Progress(_config(silent_broker, store_url, tmp_path), silent_broker)
    seen: list[int] = []

    def on_batch(s: BatchSummary) -> None:
        seen.append(s.batch_id)
        if s.batch_id == 0:
            raise RuntimeError("callback failed")

    try:
        progress.committed(_stats(0), on_batch)
        progress.committed(_stats(1), on_batch)
    finally:
        progress.close()  # does not raise
    assert seen == [0, 1]
    assert "reporting batch 0 failed: callback failed" in caplog.text
