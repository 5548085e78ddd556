"""Poison records are rejected where they enter, never at commit: API and CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from acidstream.cli.main import EXIT_REJECTED, main
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.dead_letter import read_dead_letters
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable, snapshot_read
from tests.poison_corpus import COLUMNS, POISON, corpus


@pytest.mark.parametrize("path", ["write", "write_many", "write_block"])
def test_poison_records_go_to_the_dead_letters_and_the_txn_commits(
    store: TxnStore, make_table: MakeTable, tmp_path: Path, path: str
) -> None:
    t = make_table("ev", COLUMNS, partitioned_by=[("ds", "string")])
    records, ids = corpus()
    dl = tmp_path / "dead"
    with StreamingConnection(
        "ev", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(txns_per_batch=2, dead_letter_path=str(dl)),
    ) as conn:  # fmt: skip
        conn.begin_transaction()
        if path == "write":
            for r in records:
                conn.write(r)
        elif path == "write_many":
            conn.write_many(records)
        else:
            res = conn.write_block(records)
            assert len(res.rejected) == len(POISON)
        conn.commit_transaction()  # never fails on data
    assert sorted(snapshot_read(store, t).column("id").to_pylist()) == ids
    letters = list(read_dead_letters(str(dl)))
    assert sorted(d.record for d in letters) == sorted(p for _, p in POISON)
    assert all(d.reason for d in letters)


def test_poison_records_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACIDSTREAM_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    assert main(["create-table", "ev", COLUMNS, "--partitioned-by", "ds string"]) == 0
    records, ids = corpus()
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(records) + b"\n")
    dl = tmp_path / "dead"
    code = main(
        ["ingest", "ev", "--format", "json", "--txn-rows", "7", "--dead-letter", str(dl), str(src)]
    )
    assert code == EXIT_REJECTED
    capsys.readouterr()
    assert main(["read", "ev", "--columns", "id"]) == 0
    import json

    got = sorted(json.loads(x)["id"] for x in capsys.readouterr().out.splitlines())
    assert got == ids
    letters = list(read_dead_letters(str(dl)))
    assert len(letters) == len(POISON) and all(d.position.startswith(str(src)) for d in letters)
