"""A metastore must outlive the process: ``sqlite:///:memory:`` is refused, not turned
into a file named ``:memory:`` (nor a store no other client can see)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acidstream.acid.errors import ConfigError
from acidstream.txn.config import StoreConfig
from acidstream.txn.store import open_store

MEMORY = ["sqlite:///:memory:", "sqlite:///file::memory:?mode=memory&cache=shared"]


@pytest.mark.parametrize("url", MEMORY)
def test_an_in_memory_sqlite_metastore_is_refused_and_creates_no_file(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="in-memory metastore is not supported"):
        StoreConfig.resolve(metastore=url, warehouse=str(tmp_path / "wh"))
    with pytest.raises(ConfigError, match="in-memory metastore is not supported"):
        open_store(url, warehouse=str(tmp_path / "wh")).close()
    assert list(tmp_path.iterdir()) == []


def test_cli_with_an_in_memory_metastore_is_one_line_and_creates_no_file(
    tmp_path: Path,
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "acidstream", "create-table", "t", "id int",
         "--metastore", "sqlite:///:memory:", "--warehouse", str(tmp_path / "wh")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("acidstream: error: ") and proc.stderr.count("\n") == 1
    assert "in-memory metastore is not supported" in proc.stderr
    assert not (tmp_path / ":memory:").exists() and list(tmp_path.iterdir()) == []
