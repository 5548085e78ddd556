"""``acidstream ingest`` and ``acidstream read db.table`` end to end on the embedded store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import main


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    wh = tmp_path / "wh"
    monkeypatch.setenv("ACIDSTREAM_WAREHOUSE", str(wh))
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    return wh


def test_ingest_files_then_read_by_table_name(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["create-table", "db.ev", "id int, msg string", "--partitioned-by", "ds string"]) == 0
    )
    src = tmp_path / "in.jsonl"
    lines = [json.dumps({"id": i, "msg": f"m{i}", "ds": f"d{i % 2}"}) for i in range(1000)] + [
        "oops"
    ]
    src.write_text("\n".join(lines) + "\n")
    dl = tmp_path / "dead.jsonl"
    capsys.readouterr()
    code = main(["ingest", "db.ev", "--format", "json", "--txn-rows", "300", "--batch-size", "2",
                 "--dead-letter", str(dl), str(src)])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "records written" in out and "1,000" in out
    assert "committed txns" in out
    assert json.loads(dl.read_text())["record"] == "oops"
    assert main(["read", "db.ev", "--columns", "id"]) == 0
    ids = sorted(json.loads(x)["id"] for x in capsys.readouterr().out.splitlines())
    assert ids == list(range(1000))


def test_ingest_from_stdin_with_delimited_records(env: Path, tmp_path: Path) -> None:
    assert main(["create-table", "t", "id int, name string"]) == 0
    data = "".join(f"{i},n{i}\r\n" for i in range(50)).encode()
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "ingest", "t", "--format", "delimited", "--delimiter", ",", "--txn-rows", "7"],
        input=data, capture_output=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert b"records written" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "read", "t"], capture_output=True, timeout=120
    )
    rows = [json.loads(x) for x in proc.stdout.splitlines()]
    assert sorted(r["id"] for r in rows) == list(range(50))


def test_ingest_into_a_missing_table_is_one_clear_error(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1}\n')
    assert main(["ingest", "nope", "--format", "json", str(src)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("acidstream: error: Invalid table") and "Traceback" not in err
