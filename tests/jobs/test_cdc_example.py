"""``configs/cdc_debezium.yaml``, the example docs/cdc.md shows, runs as documented: on the
embedded broker it produces sample Debezium orders, applies them and the table holds
exactly the orders still alive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acidstream.jobs.config import KafkaJobConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "configs" / "cdc_debezium.yaml"


def test_the_example_config_is_an_upsert_job_with_its_key_and_ordering(tmp_path: Path) -> None:
    cfg = KafkaJobConfig.load(EXAMPLE, overrides={"warehouse": str(tmp_path)}, env={})
    assert (cfg.sink.mode, cfg.sink.format, cfg.sink.key) == ("upsert", "debezium", ("id",))
    assert (cfg.sink.ordering, cfg.sink.ordering_guard) == ("source.lsn", True)
    assert cfg.job.metrics_port == 0
    assert cfg.checkpoint == str(tmp_path / "_checkpoints" / "orders")
    over = {"warehouse": str(tmp_path), "job.metrics_port": 9108}
    assert KafkaJobConfig.load(EXAMPLE, overrides=over, env={}).job.metrics_port == 9108


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.slow
def test_the_example_runs_on_the_embedded_broker(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from acidstream.cli.main import main
    from acidstream.txn.catalog import TableDef
    from acidstream.txn.store import open_store
    from acidstream.txn.table_key import table_key

    wh = tmp_path / "wh"
    code = main(["run-kafka", str(EXAMPLE), "--warehouse", str(wh), "--sample-events", "3000",
                 "--bad-every", "1000"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "(exactly once)" in out and "MISMATCH" not in out
    lines = [ln for ln in out.splitlines() if ln.startswith("batch ")]
    assert lines and all(" dead letters | write id " in ln for ln in lines)
    assert sum(int(ln.split(" dead letters")[0].rsplit(" ", 1)[1]) for ln in lines) == 3
    assert " | lag 0 | " in lines[-1]
    store = open_store(f"sqlite:///{wh}/metastore.db", warehouse=str(wh))
    try:
        t: TableDef = store.get_table("shop", "orders")
    finally:
        store.close()
    key = table_key(t)  # the job created the table keyed by sink.key
    assert key is not None and key.columns == ("id",)
