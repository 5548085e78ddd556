"""The HTTP server's txn timeout is the metastore's (issue 29, item 5): a config that still
names the removed ``txn_timeout_s``, or idempotency keys that would not outlive the
metastore's timeout, refuse the start in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acidstream.txn.store import open_store
from tests.http.conftest import ROOT, base_config, create_table, write_config


def _serve(config: Path) -> subprocess.CompletedProcess[str]:
    """``acidstream serve CONFIG --port 0``, expected to refuse at start."""
    return subprocess.run(
        [sys.executable, "-m", "acidstream.cli.main", "serve", str(config), "--port", "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/metastore.db"
    with open_store(url, warehouse=str(tmp_path / "warehouse")) as s:
        create_table(s, "t")
    return url


def test_a_config_naming_the_removed_timeout_refuses_the_start(
    tmp_path: Path, store_url: str
) -> None:
    cfg = base_config(store_url, str(tmp_path / "warehouse"), {"default.t": {}})  # metastore: 30
    cfg["txn_timeout_s"] = 900
    path = write_config(tmp_path / "c.yaml", cfg)
    r = _serve(path)
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"acidstream: error: txn_timeout_s (config file {path}): txn_timeout_s is a metastore "
        "setting now: acidstream config set txn_timeout_s N"
    ]
    assert "listening" not in r.stdout


def test_idempotency_keys_shorter_lived_than_the_metastores_timeout_refuse_the_start(
    tmp_path: Path, store_url: str
) -> None:
    cfg = base_config(store_url, str(tmp_path / "warehouse"), {"default.t": {}}, txn_timeout_s=600)
    cfg["idempotency_retention_s"] = 300
    r = _serve(write_config(tmp_path / "c.yaml", cfg))
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines() == [
        "acidstream: error: idempotency_retention_s (300) must be at least txn_timeout_s (600)"
    ]
