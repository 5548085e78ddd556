"""``acidstream fsck`` of any spelling of a registered location (a symlink to the table
directory, its ``file://`` URL, a path with ``..``) checks the catalog's table with the
metastore's snapshot, as ``read`` does, never the bare path without one (issue 28, item 11
follow-up). Both metastore backends."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acidstream.cli.main import main
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore


@pytest.mark.parametrize("alias", ["symlink", "file_url", "dotdot", "trailing_slash"])
def test_fsck_of_an_alias_of_a_registered_location_checks_the_table(
    store: TxnStore,
    store_url: str,
    warehouse: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    alias: str,
) -> None:
    location = tmp_path / "data" / "t"
    location.mkdir(parents=True)
    store.create_table(
        TableDef(
            db="default",
            name="t",
            columns=(("id", "int"),),
            parameters={"transactional": "true"},
            location=str(location),
        )
    )
    link = tmp_path / "link"
    os.symlink(location, link)
    spelling = {
        "symlink": str(link),
        "file_url": f"file://{location}",
        "dotdot": str(tmp_path / "data" / ".." / "data" / "t"),
        "trailing_slash": f"{link}/",
    }[alias]
    capsys.readouterr()
    code = main(["fsck", spelling, "--metastore", store_url, "--warehouse", warehouse])
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    # the catalog's table, not an unknown path read without a snapshot
    assert out.startswith("default.t: clean"), out
