"""Every CLI failure is one line on stderr and a meaningful exit code, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from acidstream.cli.main import EXIT_ERROR, EXIT_INTERNAL, EXIT_REJECTED, EXIT_STORAGE, main
from tests.plugins.tmpfs_fixture import Tmpfs, make_read_only


@pytest.fixture
def wh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ACIDSTREAM_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    return tmp_path / "wh"


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if not ln.startswith("ingest:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert code not in (0, EXIT_INTERNAL), err
    return code, lines[0]


def test_nul_in_a_path(wh: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, line = _one_line(capsys, ["read", "/tmp/a\x00b"])
    assert code == EXIT_ERROR and ("NUL" in line or "no such" in line)


def test_name_too_long(wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, line = _one_line(capsys, ["read", str(tmp_path / ("x" * 300))])
    assert code in (EXIT_ERROR, EXIT_STORAGE) and ("too long" in line or "no such" in line.lower())


def test_decimal_and_timestamp_out_of_range_are_rejected_records(
    wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["create-table", "t", "id int, d decimal(5,2), at timestamp"]) == 0
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1, "d": 1e400}\n{"id": 2, "at": "10000-01-01 00:00:00"}\n{"id": 3}\n')
    capsys.readouterr()
    code = main(["ingest", "t", "--format", "json", str(src)])
    # (progress lines, "ingest: ...", come once a second on a slow machine)
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("ingest:")]
    assert code == EXIT_REJECTED and "Traceback" not in "".join(err)
    # one line per rejected record (where and why), then one summary line
    assert [ln.split(": ", 2)[1] for ln in err[:2]] == [
        f"rejected record at byte offset 0 of {src}",
        f"rejected record at byte offset 22 of {src}",
    ]
    assert "decimal(5,2)" in err[0] and "year 10000" in err[1]
    assert err[2] == "acidstream: 2 records rejected; the 1 other record is committed"


def test_store_argument_checks_are_config_errors(
    wh: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _line = _one_line(capsys, ["create-table", "t", "id int", "--buckets", "id:0"])
    assert code == EXIT_ERROR


def test_read_only_warehouse_is_a_storage_error(
    tmp_path: Path,
    tmpfs: Tmpfs,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    read_only_dir = tmpfs()
    monkeypatch.setenv("ACIDSTREAM_METASTORE", f"sqlite:///{tmp_path}/m.db")
    monkeypatch.setenv("ACIDSTREAM_WAREHOUSE", str(read_only_dir / "wh"))
    assert main(["create-table", "t", "id int"]) == 0
    make_read_only(read_only_dir)
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1}\n')
    code, line = _one_line(capsys, ["ingest", "t", "--format", "json", str(src)])
    assert code == EXIT_STORAGE and "Read-only file system" in line


@pytest.mark.parametrize(
    "argv",
    [
        [],  # no command
        ["nosuch"],  # an unknown command
        ["read"],  # a missing argument
        ["read", "db.t", "--columns", ","],  # a bad option value
        ["read", "db.t", "--no-such-flag"],  # an unknown option
        ["ingest", "db.t", "--format", "xml"],  # a bad choice
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    wh: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert len(err.splitlines()) == 1, err  # argparse's usage block is not repeated
    assert "error:" in err and "--help" in err
