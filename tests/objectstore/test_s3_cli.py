"""The ``acidstream`` command on an ``s3://`` warehouse, end to end against moto's S3 server
(a real HTTP server process; nothing mocks s3fs or botocore): create, ingest (with dead
letters on S3), read, dump, ls, compact, the compactor and cleaner, fsck, repair and usage,
reached through ``--storage-option`` flags or through the standard AWS environment alone,
with the metastore on SQLite and PostgreSQL. No command prints the secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from acidstream.ingest.dead_letter import read_dead_letters
from tests.objectstore.s3_helpers import Cli, Result, jsonl_ids
from tests.plugins.s3_fixture import S3Warehouse

pytestmark = pytest.mark.s3

TABLE = "db.s"


def _rows(ids: range, ds: str) -> str:
    return "".join(f'{{"id": {i}, "msg": "m{i}", "ds": "{ds}"}}\n' for i in ids)


def _full_flow(cli: Cli, tmp_path: Path) -> None:
    wh = cli.wh
    results = []

    def run(*argv: str, store: bool = True) -> Result:
        r = cli.run(*argv, store=store)
        results.append(r)
        return r

    r = run("create-table", TABLE, "id int, msg string", "--partitioned-by", "ds string")
    assert f"{wh.url}/db.db/s" in r.ok().out

    first = tmp_path / "first.jsonl"
    first.write_text(_rows(range(1, 3), "x") + "not json\n" + _rows(range(3, 5), "y"))
    dead = f"s3://{wh.bucket}/dead_letters"
    r = run("ingest", TABLE, "--format", "json", str(first), "--dead-letter", dead)
    assert r.code == 3, r  # 1 rejected, the rest committed
    letters = list(read_dead_letters(dead, storage_options=wh.storage_options))
    assert [d.record for d in letters] == [b"not json"]

    r = run("read", TABLE, "--format", "jsonl")
    assert jsonl_ids(r.ok().out.splitlines()) == [1, 2, 3, 4]
    r = run("ls", TABLE)
    assert r.ok().out.count("delta_0000001_0000001") == 2

    # dump takes no warehouse: the file's URL, and the options by flag (or environment).
    bucket_file = f"{wh.url}/db.db/s/ds=x/delta_0000001_0000001/bucket_00000"
    dump_opts = wh.cli_options() if cli.via == "options" else []
    r = run("dump", bucket_file, *dump_opts, store=False)
    lines = r.ok().out.splitlines()
    assert '"rows":2' in lines[0] and len(lines) == 3

    second = tmp_path / "second.jsonl"
    second.write_text(_rows(range(5, 7), "x") + _rows(range(7, 9), "y"))
    run("ingest", TABLE, "--format", "json", str(second)).ok()

    r = run("compact", TABLE, "--partition", "ds=x", "--type", "major", "--wait")
    assert "succeeded" in r.ok().out
    r = run("compactor", "--once", "--no-initiator")
    r.ok()
    r = run("ls", TABLE)
    ls = r.ok().out.splitlines()
    x_rows = [ln.split() for ln in ls if ln.startswith("ds=x")]
    assert [(k, name[:5]) for _, k, name, *_ in x_rows] == [("base", "base_")], ls
    assert len([ln for ln in ls if ln.startswith("ds=y")]) == 2  # never compacted

    r = run("read", TABLE, "--format", "jsonl")
    assert jsonl_ids(r.ok().out.splitlines()) == list(range(1, 9))
    r = run("fsck", TABLE)
    assert "clean" in r.ok().out
    r = run("repair", TABLE)
    assert "nothing to repair" in r.ok().out
    r = run("usage", "--format", "json")
    import json

    usage = {u["namespace"]: u for u in json.loads(r.ok().out)}
    assert usage["db"]["tables"] == 1 and usage["db"]["bases"] == 1
    assert usage["db"]["files"] >= 5 and usage["db"]["bytes"] > 0
    for res in results:
        res.shows_no_secret()


def test_every_command_on_an_s3_warehouse_by_storage_options(
    s3_warehouse: S3Warehouse, store_url: str, tmp_path: Path
) -> None:
    """``--storage-option`` alone points the commands at the server: the child processes
    have no AWS variable, so nothing else could."""
    _full_flow(Cli(s3_warehouse, store_url, "options", tmp_path), tmp_path)


def test_the_commands_reach_s3_by_the_aws_environment_alone(
    s3_warehouse: S3Warehouse, tmp_path: Path
) -> None:
    """No flag: botocore reads ``AWS_ENDPOINT_URL`` and the keys from the environment of
    each child process (a shorter round than by flags: each command is a new process)."""
    cli = Cli(s3_warehouse, f"sqlite:///{tmp_path}/m.db", "env", tmp_path)
    out = [cli.run("create-table", TABLE, "id int, msg string", "--partitioned-by", "ds string")]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(_rows(range(1, 4), "x") + _rows(range(4, 6), "y"))
    out.append(cli.run("ingest", TABLE, "--format", "json", str(rows)))
    out.append(cli.run("compact", TABLE, "--partition", "ds=x", "--type", "major", "--wait"))
    read = cli.run("read", TABLE, "--format", "jsonl")
    assert jsonl_ids(read.ok().out.splitlines()) == [1, 2, 3, 4, 5]
    fsck = cli.run("fsck", TABLE)
    assert "clean" in fsck.ok().out
    for r in [*out, read, fsck]:
        r.ok().shows_no_secret()
    assert "succeeded" in out[-1].out


def test_a_remote_warehouse_without_a_metastore_is_refused_in_one_line(
    s3_warehouse: S3Warehouse, tmp_path: Path
) -> None:
    """The default metastore is a SQLite file inside the warehouse: never on S3."""
    cli = Cli(s3_warehouse, "", "options", tmp_path)
    r = cli.run(
        "create-table", TABLE, "id int", "--warehouse", s3_warehouse.url,
        *s3_warehouse.cli_options(), store=False,
    )  # fmt: skip
    assert r.code == 1 and r.out == ""
    assert r.err.splitlines() == [
        f"acidstream: error: the warehouse {s3_warehouse.url} is not a local directory: name "
        "the metastore with --metastore (or ACIDSTREAM_METASTORE; sqlite:///local/path.db or "
        "postgresql://)"
    ]
    r = cli.run(
        "create-table", TABLE, "id int", "--warehouse", s3_warehouse.url,
        "--metastore", f"sqlite:///{s3_warehouse.url}/m.db", store=False,
    )  # fmt: skip
    assert r.code == 1 and len(r.err.splitlines()) == 1
    assert "a SQLite metastore must be a local file" in r.err
    assert s3_warehouse.env and not list(tmp_path.glob("**/*.db"))


def test_a_storage_option_without_a_value_is_a_one_line_error_that_hides_the_text(
    s3_warehouse: S3Warehouse, tmp_path: Path
) -> None:
    cli = Cli(s3_warehouse, f"sqlite:///{tmp_path}/m.db", "options", tmp_path)
    r = cli.run("tables", "--storage-option", "secret:" + "typo-secret")
    assert r.code == 1
    assert r.err.splitlines() == [
        "acidstream: error: --storage-option: expected NAME=VALUE, got a text without '=' "
        "(not shown: it may be a secret)"
    ]
