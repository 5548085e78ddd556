"""``acidstream delete | update | merge`` end to end: the counts and write id printed are the
table's change read back (before/after and time travel to the write id), every refusal is
one line with the README's exit code and writes nothing, a lost commit conflict exits 75,
and the real ``acidstream`` executable behaves alike. The ``cli`` fixture runs every test on
both metastore backends (SQLite, PostgreSQL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import acidstream
from acidstream.acid import faults
from acidstream.acid.layout import ParsedDelta, parse_dir_name
from acidstream.cli import mutation_cmds
from acidstream.cli.main import (
    EXIT_CONFLICT,
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
)
from acidstream.mutation.run import AGENT as MUTATION_AGENT
from acidstream.txn.store import TxnState, TxnStore
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import insert_rows
from tests.plugins.store_fixture import Cli
from tests.txn.links_helpers import make_namespaces

Row = tuple[Any, ...]


# ---------------------------------------------------------------------------- helpers


@pytest.fixture
def kv(store: TxnStore, make_table: MakeTable) -> str:
    """``default.kv (id int, v string, n bigint)`` partitioned by ``ds``: ids 0..11,
    ``v = "v<i>"``, ``n = i``, ``ds`` one of a, b, c by ``i % 3``."""
    make_table("kv", "id int, v string, n bigint", partitioned_by=[("ds", "string")])
    insert_rows(
        store, "kv", [{"id": i, "v": f"v{i}", "n": i, "ds": "abc"[i % 3]} for i in range(12)]
    )
    return "default.kv"


@pytest.fixture
def read(store_url: str, warehouse: str) -> Callable[..., dict[int, Row]]:
    """``read("default.kv", as_of_write_id=None)``: the table's rows by id, read back
    through the Table handle (the current snapshot, or time travel)."""

    def run(name: str, as_of_write_id: int | None = None) -> dict[int, Row]:
        t = acidstream.table(name, metastore=store_url, warehouse=warehouse)
        data = t.read(as_of_write_id=as_of_write_id).to_pylist()
        return {r["id"]: tuple(r[c] for c in ("v", "n", "ds")) for r in data}

    return run


def _result(out: str) -> dict[str, str]:
    """The one result row of ``--format table`` output, by column name."""
    lines = out.splitlines()
    assert len(lines) >= 3 and set(lines[1].replace(" ", "")) == {"-"}, out
    return dict(zip(lines[0].split(), lines[2].split(), strict=True))


def _written(warehouse: str, table: str, write_id: int) -> tuple[set[str], int]:
    """The partitions holding a delta or delete delta of ``write_id``, and their bucket files:
    what is on disk, to compare with the counts a command printed."""
    parts: set[str] = set()
    files = 0
    for dirpath, _dirs, names in os.walk(Path(warehouse) / table):
        p = parse_dir_name(os.path.basename(dirpath))
        if isinstance(p, ParsedDelta) and p.min_write_id == p.max_write_id == write_id:
            parts.add(os.path.relpath(os.path.dirname(dirpath), Path(warehouse) / table))
            files += sum(1 for n in names if n.startswith("bucket_"))
    return parts, files


def _check_counts(
    res: Mapping[str, Any], warehouse: str, before: dict[int, Row], after: dict[int, Row]
) -> None:
    """The printed partitions/files are the write id's on disk."""
    parts, files = _written(warehouse, "kv", int(res["write_id"]))
    assert int(res["partitions"]) == len(parts), (res, parts)
    assert int(res["files"]) == files, (res, files)
    assert before != after


def _refused(result: tuple[int, str, str], code: int, fragment: str) -> str:
    """The command failed with ``code``, printing one line on stderr and nothing on stdout."""
    got, out, err = result
    lines = [ln for ln in err.splitlines() if not ln.startswith(("delete:", "update:", "merge:"))]
    assert got == code and got != EXIT_INTERNAL, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert fragment in lines[0], err
    assert out == "", out
    return lines[0]


# ---------------------------------------------------------------------------- delete


def test_delete_prints_the_rows_it_removed_and_its_write_id(
    kv: str, cli: Cli, read: Callable[..., dict[int, Row]], warehouse: str
) -> None:
    before = read(kv)
    code, out, err = cli("delete", kv, "--where", "id < 4 OR ds = 'c'")
    assert (code, err) == (EXIT_OK, "")
    res = _result(out)
    after = read(kv)
    gone = set(before) - set(after)
    assert gone == {i for i, r in before.items() if i < 4 or r[2] == "c"}
    assert int(res["rows_deleted"]) == len(gone) == len(before) - len(after)
    assert res["table"] == kv and res["attempts"] == "1"
    w = int(res["write_id"])
    assert read(kv, as_of_write_id=w - 1) == before and read(kv, as_of_write_id=w) == after
    parts, files = _written(warehouse, "kv", w)
    assert parts == {f"ds={before[i][2]}" for i in gone}
    assert (int(res["partitions"]), int(res["files"])) == (len(parts), files)


def test_delete_all_and_json_output(
    kv: str, cli: Cli, read: Callable[..., dict[int, Row]], warehouse: str
) -> None:
    before = read(kv)
    code, out, _ = cli("delete", kv, "--all", "--format", "json")
    assert code == EXIT_OK
    res = json.loads(out)
    assert read(kv) == {}
    assert (res["command"], res["table"], res["rows_deleted"]) == ("delete", kv, len(before))
    assert res["replayed"] is False and res["attempts"] == 1
    parts, files = _written(warehouse, "kv", res["write_id"])
    assert sorted(res["partitions"]) == sorted(parts) and len(res["files_written"]) == files
    assert all(Path(f).is_file() for f in res["files_written"])


def _usage_error(cli: Cli, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """argparse refused the command line: exit 2 (``SystemExit`` out of ``main``), one line."""
    with pytest.raises(SystemExit) as e:
        cli(*argv)
    err = capsys.readouterr().err
    assert e.value.code == EXIT_USAGE and err.count("\n") == 1, err
    return err


def test_delete_needs_where_or_all(
    kv: str, cli: Cli, read: Callable[..., dict[int, Row]], capsys: pytest.CaptureFixture[str]
) -> None:
    before = read(kv)
    err = _usage_error(cli, capsys, "delete", kv)
    assert "one of the arguments --where --all is required" in err
    assert "not allowed with" in _usage_error(cli, capsys, "delete", kv, "--all", "--where", "1=1")
    assert "integer >= 0" in _usage_error(cli, capsys, "delete", kv, "--all", "--retries", "-1")
    assert "--set" in _usage_error(cli, capsys, "update", kv, "--all")
    assert read(kv) == before


# ---------------------------------------------------------------------------- update


def test_update_sets_each_column_and_prints_the_rows_changed(
    kv: str, cli: Cli, read: Callable[..., dict[int, Row]], warehouse: str
) -> None:
    before = read(kv)
    code, out, _ = cli(
        "update", kv, "--set", "v = upper(v) || '=x'", "--set", "N = n * 10",
        "--where", "id >= 5 AND ds <> 'a'",
    )  # fmt: skip
    assert code == EXIT_OK
    res = _result(out)
    after = read(kv)
    chosen = {i for i, r in before.items() if i >= 5 and r[2] != "a"}
    expected = {
        i: ((r[0].upper() + "=x", r[1] * 10, r[2]) if i in chosen else r) for i, r in before.items()
    }
    assert after == expected
    assert int(res["rows_updated"]) == len(chosen) == sum(after[i] != before[i] for i in before)
    w = int(res["write_id"])
    assert read(kv, as_of_write_id=w - 1) == before
    _check_counts(res, warehouse, before, after)


def test_update_of_a_partition_column_moves_rows(
    kv: str, cli: Cli, read: Callable[..., dict[int, Row]], warehouse: str
) -> None:
    before = read(kv)
    code, out, _ = cli("update", kv, "--set", "ds = 'z'", "--where", "ds = 'a'")
    assert code == EXIT_OK
    res = _result(out)
    after = read(kv)
    moved = {i for i, r in before.items() if r[2] == "a"}
    assert {i for i, r in after.items() if r[2] == "z"} == moved
    assert int(res["rows_updated"]) == len(moved)
    # delete events in ds=a, new versions in ds=z: two partitions written
    assert _written(warehouse, "kv", int(res["write_id"]))[0] == {"ds=a", "ds=z"}
    assert int(res["partitions"]) == 2


# ---------------------------------------------------------------------------- merge


def _changes() -> list[dict[str, Any]]:
    """CDC-like source rows: updates of 1 and 2, deletes of 3 and of the missing 40,
    inserts of 30 and 31."""
    return [
        {"id": 1, "v": "new1", "n": 100, "ds": "b", "op": "u"},
        {"id": 2, "v": "new2", "n": 200, "ds": "c", "op": "u"},
        {"id": 3, "v": None, "n": None, "ds": "a", "op": "d"},
        {"id": 40, "v": None, "n": None, "ds": "a", "op": "d"},
        {"id": 30, "v": "ins30", "n": 3000, "ds": "b", "op": "i"},
        {"id": 31, "v": "ins31", "n": 3100, "ds": "a", "op": "i"},
    ]


def _merged(
    before: dict[int, Row], changes: list[dict[str, Any]], *, update: bool, insert: bool
) -> dict[int, Row]:
    """The model: ``--delete-when "src.op = 'd'"`` first, then UPDATE SET * / INSERT * of
    the rows whose op is not 'd'."""
    out = dict(before)
    for c in changes:
        new = (c["v"], c["n"], c["ds"])
        if c["id"] in before:
            if c["op"] == "d":
                del out[c["id"]]
            elif update:
                out[c["id"]] = new
        elif insert and c["op"] != "d":
            out[c["id"]] = new
    return out


def test_merge_of_json_lines_deletes_updates_and_inserts(
    kv: str, cli: Cli, read: Callable[..., dict[int, Row]], tmp_path: Path, warehouse: str
) -> None:
    before = read(kv)
    src = tmp_path / "changes.jsonl"
    src.write_text("".join(json.dumps(c) + "\n" for c in _changes()))
    code, out, _ = cli(
        "merge", kv, "--source", str(src), "--on", "id",
        "--delete-when", "src.op = 'd'", "--insert-when", "src.op <> 'd'",
    )  # fmt: skip
    assert code == EXIT_OK
    res = _result(out)
    after = read(kv)
    assert after == _merged(before, _changes(), update=True, insert=True)
    assert int(res["rows_inserted"]) == len(set(after) - set(before)) == 2
    assert int(res["rows_deleted"]) == len(set(before) - set(after)) == 1
    changed = {i for i in set(before) & set(after) if before[i] != after[i]}
    assert int(res["rows_updated"]) == len(changed) == 2
    assert read(kv, as_of_write_id=int(res["write_id"]) - 1) == before
    _check_counts(res, warehouse, before, after)


def test_merge_of_parquet_on_a_condition_without_inserts(
    kv: str, cli: Cli, read: Callable[..., dict[int, Row]], tmp_path: Path
) -> None:
    before = read(kv)
    src = tmp_path / "changes.parquet"
    pq.write_table(pa.Table.from_pylist(_changes()), src)
    code, out, _ = cli(
        "merge", kv, "--source", str(src), "--source-alias", "s", "--target-alias", "t",
        "--on", "s.id = t.id", "--delete-when", "s.op = 'd'", "--no-insert",
    )  # fmt: skip
    assert code == EXIT_OK
    res = _result(out)
    assert read(kv) == _merged(before, _changes(), update=True, insert=False)
    assert (res["rows_inserted"], res["rows_updated"], res["rows_deleted"]) == ("0", "2", "1")


def test_merge_insert_only_with_a_source_format_flag(
    kv: str, cli: Cli, read: Callable[..., dict[int, Row]], tmp_path: Path
) -> None:
    before = read(kv)
    src = tmp_path / "changes.txt"  # a name that says nothing: --source-format does
    src.write_text("".join(json.dumps(c) + "\n" for c in _changes()))
    code, out, _ = cli(
        "merge", kv, "--source", str(src), "--source-format", "jsonl", "--on", "id",
        "--no-update", "--format", "json",
    )  # fmt: skip
    assert code == EXIT_OK
    res = json.loads(out)
    after = read(kv)
    inserted = {c["id"] for c in _changes() if c["id"] not in before}
    assert set(after) - set(before) == inserted and res["rows_inserted"] == len(inserted)
    assert all(after[i] == before[i] for i in before)  # nothing updated
    assert (res["rows_updated"], res["rows_deleted"]) == (0, 0)


def test_merge_reads_json_dates_and_decimals_as_the_table_types_them(
    store: TxnStore, make_table: MakeTable, cli: Cli, tmp_path: Path, store_url: str,
    warehouse: str,
) -> None:  # fmt: skip
    """JSON has no date, timestamp or decimal: the table's types are given to the reader,
    so ``"2024-02-29"`` is a date and ``12.35`` a decimal(10,2), not a timestamp and a
    double (which MERGE's SET rules would refuse), and a timestamp keeps its fraction."""
    import datetime
    import decimal

    make_table("typed", "id int, d date, price decimal(10,2), at timestamp")
    src = tmp_path / "rows.jsonl"
    src.write_text('{"id": 1, "d": "2024-02-29", "price": 12.35, "at": "2024-02-29 23:59:59.25"}\n')
    code, _out, err = cli("merge", "default.typed", "--source", str(src), "--on", "id")
    assert code == EXIT_OK, err
    t = acidstream.table("default.typed", metastore=store_url, warehouse=warehouse)
    assert t.read().to_pylist() == [
        {
            "id": 1,
            "d": datetime.date(2024, 2, 29),
            "price": decimal.Decimal("12.35"),
            "at": datetime.datetime(2024, 2, 29, 23, 59, 59, 250000),
        }
    ]


# ---------------------------------------------------------------------------- idempotency


def test_an_idempotency_key_replays_the_first_result(
    kv: str, cli: Cli, read: Callable[..., dict[int, Row]]
) -> None:
    code, out, _ = cli("delete", kv, "--where", "id = 1", "--idempotency-key", "k1")
    assert code == EXIT_OK
    first = _result(out)
    after = read(kv)
    code, out, _ = cli("delete", kv, "--where", "id = 2", "--idempotency-key", "k1")
    assert code == EXIT_OK
    again = _result(out)
    assert read(kv) == after  # nothing written: id 2 is still there
    assert 2 in after
    assert (again["write_id"], again["rows_deleted"]) == (first["write_id"], "1")
    assert "replayed: idempotency key 'k1'" in out.splitlines()[3]
    assert "replayed" not in cli("delete", kv, "--where", "id = 2")[1]


# ---------------------------------------------------------------------------- refusals


def _src(tmp_path: Path, name: str, text: str | bytes) -> str:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(p)


@pytest.mark.parametrize(
    "case",
    [
        "unknown column", "bad sql", "bad set", "set unknown column", "missing table",
        "link", "outside namespace", "bad jsonl", "bad parquet", "unknown format",
        "missing source", "cardinality", "on mixed", "no clause", "lossy set", "contradiction",
    ],
)  # fmt: skip
def test_refusals_are_one_line_with_the_documented_code_and_write_nothing(
    case: str, kv: str, store: TxnStore, cli: Cli, read: Callable[..., dict[int, Row]],
    tmp_path: Path,
) -> None:  # fmt: skip
    make_namespaces(store)
    store.create_link("a", "b", "t1")
    before = read(kv)
    dup = _src(tmp_path, "dup.jsonl", '{"id": 1, "v": "x"}\n{"id": 1, "v": "y"}\n')
    good = _src(tmp_path, "ok.jsonl", '{"id": 1, "v": "x"}\n')
    argv, code, fragment = {
        "unknown column": (["delete", kv, "--where", "nope = 1"], EXIT_ERROR,
                           "unknown column 'nope'"),
        "bad sql": (["delete", kv, "--where", "id = = 1"], EXIT_ERROR, "syntax error"),
        "bad set": (["update", kv, "--set", "v", "--all"], EXIT_ERROR, "'column = expression'"),
        "set unknown column": (["update", kv, "--set", "zz = 1", "--all"], EXIT_ERROR, "zz"),
        "missing table": (["delete", "default.nope", "--all"], EXIT_ERROR, "default.nope"),
        "link": (["delete", "t1@b", "--namespace", "a", "--all"], EXIT_ERROR,
                 "links are read-only"),
        "outside namespace": (["delete", "b.t1", "--namespace", "a", "--all"], EXIT_ERROR,
                              "outside namespace a"),
        "bad jsonl": (["merge", kv, "--source", _src(tmp_path, "x.jsonl", "{oops\n"), "--on",
                       "id"], EXIT_ERROR, "x.jsonl: not readable as jsonl"),
        "bad parquet": (["merge", kv, "--source", _src(tmp_path, "x.parquet", b"PAR1 no"),
                         "--on", "id"], EXIT_ERROR, "x.parquet: not readable as parquet"),
        "unknown format": (["merge", kv, "--source", _src(tmp_path, "x.csv", "id\n1\n"), "--on",
                            "id"], EXIT_ERROR, "add --source-format"),
        "missing source": (["merge", kv, "--source", str(tmp_path / "none.parquet"), "--on",
                            "id"], EXIT_ERROR, "none.parquet"),
        "cardinality": (["merge", kv, "--source", dup, "--on", "id"], EXIT_ERROR,
                        "matched by 2 source rows"),
        "on mixed": (["merge", kv, "--source", good, "--on", "id", "--on", "src.v = tgt.v"],
                     EXIT_ERROR, "is not a column name"),
        "no clause": (["merge", kv, "--source", good, "--on", "id", "--no-update",
                       "--no-insert"], EXIT_ERROR, "nothing to do"),
        "lossy set": (["update", kv, "--set", "id = n", "--all"], EXIT_ERROR, "CAST"),
        "contradiction": (["merge", kv, "--source", good, "--on", "id", "--no-insert",
                           "--insert-when", "src.v = 'x'"], EXIT_ERROR, "contradict"),
    }[case]  # fmt: skip
    line = _refused(cli(*argv), code, fragment)
    assert line.startswith("acidstream: error: "), line
    assert read(kv) == before
    mutations = [x.state for x in store.show_txns() if x.agent_info == MUTATION_AGENT]
    if case == "cardinality":  # its txn was opened, then aborted: nothing visible
        assert mutations == [TxnState.ABORTED]
    else:  # refused before any txn
        assert mutations == []


def test_a_missing_metastore_is_reported_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from acidstream.cli.main import main

    url = f"sqlite:///{tmp_path}/absent.db"
    code = main(["delete", "t", "--all", "--metastore", url, "--warehouse", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR and err.count("\n") == 1 and "no metastore" in err, err
    assert not (tmp_path / "absent.db").exists()


# ---------------------------------------------------------------------------- conflicts


@pytest.fixture
def rival(store_url: str, warehouse: str) -> Iterator[Callable[[str], None]]:
    """``rival(where)``: the first time a txn batch is about to commit, another process's
    mutation (here: another handle) deletes ``where`` from ``default.kv`` and commits
    first, so the batch's commit conflicts on the partitions both wrote."""
    fired = threading.Event()

    def arm(where: str) -> None:
        def hook(step: str) -> None:
            if step == "batch.before_commit" and not fired.is_set():
                fired.set()
                t = acidstream.table("default.kv", metastore=store_url, warehouse=warehouse)
                t.delete(where)

        faults.set_hook(hook)

    yield arm
    faults.set_hook(None)


def test_a_conflict_that_outlives_retries_exits_75_and_writes_nothing(
    kv: str, cli: Cli, read: Callable[..., dict[int, Row]], rival: Callable[[str], None]
) -> None:
    before = read(kv)
    rival("id = 0")  # ds=a
    line = _refused(
        cli("update", kv, "--set", "n = n + 1", "--where", "ds = 'a'"),
        EXIT_CONFLICT,
        "acidstream: error: ",
    )
    assert "conflict" in line.lower(), line
    # only the rival's delete is visible; no row of ds=a got n + 1
    assert read(kv) == {i: r for i, r in before.items() if i != 0}


def test_with_retries_the_conflict_is_rerun_and_the_attempts_printed(
    kv: str, cli: Cli, read: Callable[..., dict[int, Row]], rival: Callable[[str], None]
) -> None:
    before = read(kv)
    rival("id = 0")
    code, out, err = cli(
        "update", kv, "--set", "n = n + 1", "--where", "ds = 'a'", "--retries", "1"
    )
    assert code == EXIT_OK, err
    res = _result(out)
    assert res["attempts"] == "2"
    expected = {
        i: ((r[0], r[1] + 1, r[2]) if r[2] == "a" else r) for i, r in before.items() if i != 0
    }
    assert read(kv) == expected
    assert int(res["rows_updated"]) == sum(1 for r in expected.values() if r[2] == "a")


# ---------------------------------------------------------------------------- progress


def test_a_long_mutation_reports_progress_on_stderr(
    kv: str, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run longer than the interval says it is still running (stdout stays the result)."""
    monkeypatch.setattr(mutation_cmds, "PROGRESS_INTERVAL_S", 0.05)

    def slow(step: str) -> None:
        if step == "batch.before_commit":
            time.sleep(0.5)

    faults.set_hook(slow)
    try:
        code, out, err = cli("delete", kv, "--where", "id = 1")
    finally:
        faults.set_hook(None)
    assert code == EXIT_OK and _result(out)["rows_deleted"] == "1"
    lines = err.splitlines()
    assert len(lines) >= 2, err
    assert all(ln.startswith(f"delete: {kv}: running for ") for ln in lines), err


def test_a_short_mutation_prints_no_progress(kv: str, cli: Cli) -> None:
    code, _out, err = cli("delete", kv, "--where", "id = 1")
    assert (code, err) == (EXIT_OK, "")


# ---------------------------------------------------------------------------- subprocess


def _executable() -> str:
    exe = Path(sys.executable).with_name("acidstream")
    if not exe.is_file():
        pytest.skip(f"no acidstream console script next to {sys.executable} (pip install -e .)")
    return str(exe)


def test_the_acidstream_executable_deletes_updates_merges_and_fails_with_exit_codes(
    kv: str, store_url: str, warehouse: str, read: Callable[..., dict[int, Row]],
    tmp_path: Path,
) -> None:  # fmt: skip
    exe = _executable()
    env = {**os.environ, "ACIDSTREAM_METASTORE": store_url, "ACIDSTREAM_WAREHOUSE": warehouse}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [exe, *argv], capture_output=True, text=True, timeout=120, env=env, check=False
        )

    before = read(kv)
    r = run("delete", kv, "--where", "id = 4")
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert _result(r.stdout)["rows_deleted"] == "1" and 4 not in read(kv)
    r = run("update", kv, "--set", "v = 'u'", "--where", "id = 5")
    assert (r.returncode, _result(r.stdout)["rows_updated"]) == (0, "1")
    src = tmp_path / "m.jsonl"
    src.write_text('{"id": 6, "v": "m", "n": 6, "ds": "a"}\n{"id": 99, "v": "n", "ds": "b"}\n')
    r = run("merge", kv, "--source", str(src), "--on", "id", "--format", "json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert (res["rows_inserted"], res["rows_updated"], res["rows_deleted"]) == (1, 1, 0)
    after = read(kv)
    assert after[5][0] == "u" and after[6] == ("m", 6, "a") and after[99] == ("n", None, "b")
    assert len(after) == len(before)  # one deleted, one inserted
    for argv, code in [
        (["delete", kv, "--where", "nope = 1"], EXIT_ERROR),
        (["delete", kv], EXIT_USAGE),
        (["merge", kv, "--source", str(tmp_path / "none.jsonl"), "--on", "id"], EXIT_ERROR),
    ]:
        r = run(*argv)
        assert r.returncode == code and r.stdout == "", (argv, r.stderr)
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert read(kv) == after
