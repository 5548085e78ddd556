"""The job's configuration: state paths follow the warehouse; failures read as one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from acidstream.acid.errors import ConfigError
from acidstream.cli.sink_cmds import DEMO_MARKER, fresh_demo_state
from acidstream.jobs.config import KafkaJobConfig
from acidstream.jobs.kafka_job import job_failure_message

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "kafka_to_table.yaml"


def test_warehouse_override_moves_checkpoint_and_dead_letters(tmp_path: Path) -> None:
    wh = tmp_path / "elsewhere"
    cfg = KafkaJobConfig.load(CONFIG, overrides={"warehouse": str(wh)}, env={})
    assert cfg.warehouse == str(wh)
    assert cfg.checkpoint == str(wh / "_checkpoints" / "events")
    assert cfg.sink.dead_letter_path == str(wh / "_dead_letters" / "events")


def test_relative_warehouse_is_made_absolute_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = KafkaJobConfig.load(CONFIG, overrides={"warehouse": "wh"}, env={})
    assert cfg.warehouse == str(tmp_path / "wh")
    assert cfg.checkpoint.startswith(str(tmp_path / "wh"))


def test_absolute_state_paths_are_kept(tmp_path: Path) -> None:
    cfg = KafkaJobConfig.load(
        CONFIG,
        overrides={
            "warehouse": str(tmp_path / "w"),
            "checkpoint": str(tmp_path / "ck"),
            "sink.dead_letter_path": str(tmp_path / "dl"),
        },
        env={},
    )
    assert (cfg.checkpoint, cfg.sink.dead_letter_path) == (
        str(tmp_path / "ck"),
        str(tmp_path / "dl"),
    )


def test_embedded_demo_resets_only_its_own_state(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    cfg = KafkaJobConfig.load(CONFIG, overrides={"warehouse": str(wh)}, env={})
    assert fresh_demo_state(cfg) is None  # first run: nothing to reset
    assert (wh / DEMO_MARKER).exists()
    (wh / "_checkpoints").mkdir()
    note = fresh_demo_state(cfg)
    assert note is not None and "reset" in note
    assert not (wh / "_checkpoints").exists() and (wh / DEMO_MARKER).exists()
    # a warehouse the demo did not create is never deleted
    other = tmp_path / "user"
    (other / "db.db").mkdir(parents=True)
    cfg2 = KafkaJobConfig.load(CONFIG, overrides={"warehouse": str(other)}, env={})
    with pytest.raises(ConfigError, match="new --warehouse"):
        fresh_demo_state(cfg2)
    assert (other / "db.db").is_dir()


def test_job_failure_names_the_cause_and_the_fix() -> None:
    report = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: An exception was thrown "
        "from the Python worker.\nTraceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "acidstream.acid.errors.DataLossError: partition events/0 offset went back from 10 to 4\n"
    )
    msg = job_failure_message(report)
    assert "\n" not in msg
    assert "DataLossError: partition events/0 offset went back from 10 to 4" in msg
    assert "fail_on_data_loss" in msg
    assert job_failure_message("boom\nmore") == "streaming query failed: boom"


def test_compaction_auto_keeps_the_job_table_compacted(tmp_path: Path) -> None:
    """With ``compaction: auto`` the job's driver runs the compactor: a table past Hive's
    delta-count threshold gets compacted while the job runs, without losing a row."""
    import time

    from acidstream.ingest.connection import StreamingConnection, StreamingOptions
    from acidstream.ingest.record_writers import StrictJsonWriter
    from acidstream.jobs.kafka_job import _TableServices, ensure_table
    from acidstream.txn.compaction_sql import CompactionQueue
    from acidstream.txn.config import StoreConfig

    cfg = KafkaJobConfig.load(
        CONFIG, overrides={"warehouse": str(tmp_path / "wh"), "table.partitioned_by": ""}, env={}
    )
    assert cfg.compaction == "auto"
    ensure_table(cfg)
    store = StoreConfig.resolve(warehouse=cfg.warehouse).open()
    try:
        with StreamingConnection("default.events", record_writer=StrictJsonWriter(), store=store,
                                 options=StreamingOptions(housekeeping_interval_s=None)) as c:  # fmt: skip
            for i in range(12):  # 12 deltas: past hive.compactor.delta.num.threshold (10)
                c.begin_transaction()
                c.write(b'{"id": %d, "user_name": "u", "amount": "1.00"}' % i)
                c.commit_transaction()
        services = _TableServices(cfg)
        try:
            queue = CompactionQueue(store)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(
                r.state_name in ("ready for cleaning", "succeeded") for r in queue.show()
            ):
                time.sleep(0.1)
            states = [r.state_name for r in queue.show()]
        finally:
            services.stop()
        assert any(s in ("ready for cleaning", "succeeded") for s in states), states
        from acidstream import read_table

        got = read_table("default.events", warehouse=cfg.warehouse)
        assert sorted(got.column("id").to_pylist()) == list(range(12))
    finally:
        store.close()
