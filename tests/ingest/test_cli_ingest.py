"""``acidstream ingest`` and ``acidstream read db.table`` end to end on the embedded store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acidstream.cli.main import EXIT_REJECTED, main
from acidstream.txn.config import StoreConfig


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
    dl = tmp_path / "dead"
    capsys.readouterr()
    code = main(["ingest", "db.ev", "--format", "json", "--txn-rows", "300", "--batch-size", "2",
                 "--dead-letter", str(dl), str(src)])  # fmt: skip
    assert code == EXIT_REJECTED  # one record was rejected; the others are committed
    out = capsys.readouterr().out
    assert "records written" in out and "1,000" in out
    assert "committed txns" in out
    (dead,) = dl.glob("*.jsonl")
    assert json.loads(dead.read_text())["record"] == "oops"
    assert main(["read", "db.ev", "--columns", "id"]) == 0
    ids = sorted(json.loads(x)["id"] for x in capsys.readouterr().out.splitlines())
    assert ids == list(range(1000))


def test_ingest_from_stdin_with_delimited_records(env: Path, tmp_path: Path) -> None:
    assert main(["create-table", "t", "id int, name string"]) == 0
    data = "".join(f"{i},n{i}\r\n" for i in range(50)).encode()
    proc = subprocess.run(
        [sys.executable, "-m", "acidstream", "ingest", "t", "--format", "delimited", "--delimiter", ",", "--txn-rows", "7"],
        input=data, capture_output=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert b"records written" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "acidstream", "read", "t"], capture_output=True, timeout=120
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


def _ids(wh: Path) -> list[int]:
    store = StoreConfig.resolve(warehouse=str(wh)).open()
    try:
        t = store.get_table("default", "t")
        from acidstream.acid.reader import read_path

        data = read_path(t.location or "", write_ids=store.get_valid_write_ids("default", "t", store.get_valid_txns()),
                          txns=store.get_valid_txns(), schema=t.schema)  # fmt: skip
    finally:
        store.close()
    return sorted(data.column("id").to_pylist())


def test_resume_after_a_failed_run_writes_nothing_twice(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["create-table", "t", "id int, name string"]) == 0
    src = tmp_path / "in.csv"
    src.write_text("".join(f"{i},n{i}\n" for i in range(100)))
    # a first run that dies after 4 commits of 10 rows (SIGKILL at the 5th commit)
    from acidstream.acid import faults

    env_vars = {**os.environ, faults.ENV: ""}
    code = [sys.executable, "-c", (
        "import sys; from acidstream.acid import faults; n=[0]\n"
        "def hook(step):\n"
        "    if step == 'batch.before_commit':\n"
        "        n[0] += 1\n"
        "        if n[0] == 5: import os, signal; os.kill(os.getpid(), signal.SIGKILL)\n"
        "faults.set_hook(hook)\n"
        "from acidstream.cli.main import main; sys.exit(main(sys.argv[1:]))"),
        "ingest", "t", "--format", "delimited", "--delimiter", ",", "--txn-rows", "10", str(src)]  # fmt: skip
    proc = subprocess.run(code, env=env_vars, capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    assert _ids(env) == list(range(40))
    capsys.readouterr()
    assert main(["ingest", "t", "--format", "delimited", "--delimiter", ",", "--txn-rows", "10",
                 "--resume", str(src)]) == 0  # fmt: skip
    assert "resumed past bytes" in capsys.readouterr().out
    assert _ids(env) == list(range(100))  # each row exactly once
    # resuming a fully ingested file adds nothing
    assert (
        main(["ingest", "t", "--format", "delimited", "--delimiter", ",", "--resume", str(src)])
        == 0
    )
    assert _ids(env) == list(range(100))


def test_all_bad_input_commits_no_txn_and_exits_rejected(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["create-table", "t", "id int, name string"]) == 0
    src = tmp_path / "bad.jsonl"
    src.write_text('oops\n{"id": "x"}\n')
    capsys.readouterr()
    assert main(["ingest", "t", "--format", "json", str(src)]) == EXIT_REJECTED
    err = capsys.readouterr().err
    assert "2 records rejected" in err and "rejected record at" in err
    store = StoreConfig.resolve(warehouse=str(env)).open()
    try:
        from acidstream.txn.store import TxnState

        assert TxnState.COMMITTED not in {t.state for t in store.show_txns()}
    finally:
        store.close()


def test_a_record_over_the_size_limit_is_rejected_without_holding_it(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["create-table", "t", "id int, name string"]) == 0
    src = tmp_path / "big.jsonl"
    big = '{"id": 2, "name": "' + "x" * 3_000_000 + '"}'
    src.write_text('{"id": 1, "name": "a"}\n' + big + '\n{"id": 3, "name": "c"}\n')
    dl = tmp_path / "dead"
    code = main(["ingest", "t", "--format", "json", "--max-record-bytes", "1000000",
                 "--dead-letter", str(dl), str(src)])  # fmt: skip
    assert code == EXIT_REJECTED
    assert _ids(env) == [1, 3]
    (f,) = dl.glob("*.jsonl")
    letter = json.loads(f.read_text())
    assert "over --max-record-bytes" in letter["reason"] and len(letter["record"]) == 1024


def _cli(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``acidstream ARGV`` in a process of its own (argparse's usage errors exit it)."""
    return subprocess.run(
        [sys.executable, "-m", "acidstream", *argv],
        input=stdin, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """stderr without the once-a-second progress lines (a slow machine prints some)."""
    return [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("ingest:")]


def test_rejected_records_are_reported_by_byte_offset_as_their_dead_letters_are(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["create-table", "t", "id int, name string"]) == 0
    src = tmp_path / "in.jsonl"
    lines = ['{"id": 1, "name": "a"}', "oops", '{"id": 2, "name": "b"}', '{"id": "x"}']
    src.write_text("\n".join(lines) + "\n")
    offsets = [0, 23, 28, 51]  # where each line starts
    capsys.readouterr()
    assert main(["ingest", "t", "--format", "json", str(src)]) == EXIT_REJECTED
    err = _err_lines(capsys)
    assert [ln.split(": ", 2)[1] for ln in err[:2]] == [
        f"rejected record at byte offset {offsets[1]} of {src}",
        f"rejected record at byte offset {offsets[3]} of {src}",
    ]
    # the dead letters of the same records carry the same offsets, as file:offset
    dl = tmp_path / "dead"
    assert main(["ingest", "t", "--format", "json", "--dead-letter", str(dl), str(src)]) == 3
    from acidstream.ingest.dead_letter import read_dead_letters

    assert [d.position for d in read_dead_letters(str(dl))] == [
        f"{src}:{offsets[1]}",
        f"{src}:{offsets[3]}",
    ]
    assert src.read_bytes()[offsets[3] :].startswith(b'{"id": "x"}')


def test_a_run_of_only_bad_records_says_none_were_committed(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["create-table", "t", "id int, name string"]) == 0
    src = tmp_path / "bad.jsonl"
    src.write_text('oops\n{"id": "x"}\n')
    capsys.readouterr()
    assert main(["ingest", "t", "--format", "json", str(src)]) == EXIT_REJECTED
    assert _err_lines(capsys)[-1] == "acidstream: 2 records rejected; no records were committed"
    assert main(["read", "t"]) == 0
    assert capsys.readouterr().out == ""


def test_a_run_with_one_good_record_says_that_one_is_committed(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["create-table", "t", "id int, name string"]) == 0
    src = tmp_path / "in.jsonl"
    src.write_text('oops\n{"id": 7, "name": "ok"}\n{"id": "x"}\n')
    dl = tmp_path / "dead"
    capsys.readouterr()
    code = main(["ingest", "t", "--format", "json", "--dead-letter", str(dl), str(src)])
    assert code == EXIT_REJECTED
    assert _err_lines(capsys)[-1] == (
        f"acidstream: 2 records rejected (see {dl}); the 1 other record is committed"
    )
    assert _ids(env) == [7]


def test_max_record_bytes_above_16_mib_takes_a_17_mib_record(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["create-table", "t", "id int, name string"]) == 0
    src = tmp_path / "big.jsonl"
    big = '{"id": 2, "name": "' + "x" * (17 << 20) + '"}'
    src.write_text('{"id": 1, "name": "a"}\n' + big + '\n{"id": 3, "name": "c"}\n')
    capsys.readouterr()
    assert (
        main(["ingest", "t", "--format", "json", "--max-record-bytes", str(20 << 20), str(src)])
        == 0
    )
    assert _ids(env) == [1, 2, 3]
    # and with a unit, as the help says
    assert main(["ingest", "t", "--format", "json", "--max-record-bytes", "20MiB", str(src)]) == 0
    assert _ids(env) == [1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize("value", ["300000000", "257MiB", "1GiB", "0", "-1", "12XB"])
def test_max_record_bytes_outside_its_range_is_a_usage_error(env: Path, value: str) -> None:
    assert main(["create-table", "t", "id int"]) == 0
    proc = _cli("ingest", "t", "--format", "json", "--max-record-bytes", value, stdin='{"id": 1}\n')
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""  # nothing was ingested
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("acidstream ingest: error: argument --max-record-bytes:"), last
    assert "Traceback" not in proc.stderr
    if value[0].isdigit() and not value.endswith("XB") and value != "0":
        assert "256 MiB" in last
