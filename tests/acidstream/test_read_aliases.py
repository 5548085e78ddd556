"""Every spelling of a registered location reads with the metastore's snapshot (issue 28,
item 11): a symlink to the table or partition directory, its ``file://`` URL, a path with
``..`` or a trailing slash, a real path under a symlinked warehouse. And an explicit
write-id list of another table is refused (item 13). Both backends."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

import acidstream
from acidstream.acid.errors import ConfigError
from acidstream.cli.main import EXIT_ERROR, main
from acidstream.snapshot_read import NoSnapshotWarning
from acidstream.txn.store import TxnStore
from tests.acidstream.test_snapshot_read import _aborted_rows_on_disk
from tests.ingest.conftest import MakeTable

COMMITTED = [0, 1, 2, 3, 4]  # the aborted txn's ids 100..104 are on disk too


def _aliases(loc: str, tmp_path: Path) -> dict[str, str]:
    """Spellings of the table directory ``loc`` and of its partition ``ds=a``."""
    links = tmp_path / "links"
    links.mkdir()
    (links / "table").symlink_to(loc)
    (links / "part").symlink_to(f"{loc}/ds=a")
    parent, name = os.path.split(loc)
    return {
        "symlink": str(links / "table"),
        "symlink/": f"{links / 'table'}/",
        "file://": f"file://{loc}",
        "file:// of a symlink": f"file://{links / 'table'}",
        "..": f"{parent}/../{os.path.basename(parent)}/{name}",
        "trailing slash": f"{loc}/",
        "partition symlink": str(links / "part"),
        "partition file://": f"file://{loc}/ds=a",
        "partition via table symlink": f"{links / 'table'}/ds=a",
    }


def test_every_alias_of_a_table_or_partition_reads_committed_rows_only(
    store: TxnStore, make_table: MakeTable, store_url: str, warehouse: str, tmp_path: Path
) -> None:
    loc = _aborted_rows_on_disk(store, make_table)
    for what, alias in _aliases(loc, tmp_path).items():
        with warnings.catch_warnings():
            warnings.simplefilter("error", NoSnapshotWarning)
            got = acidstream.read_table(alias, metastore=store_url, warehouse=warehouse)
        assert sorted(got.column("id").to_pylist()) == COMMITTED, what
        # read at the registered directory: the partition column is there, named by it
        assert set(got.column("ds").to_pylist()) == {"a"}, what


def test_cli_read_and_ls_of_a_symlink_use_the_snapshot(
    store: TxnStore, make_table: MakeTable, store_url: str, warehouse: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    loc = _aborted_rows_on_disk(store, make_table)
    aliases = _aliases(loc, tmp_path)
    base = ["--metastore", store_url, "--warehouse", warehouse]
    for alias in (aliases["symlink"], aliases["file://"], aliases["partition symlink"]):
        capsys.readouterr()
        assert main(["read", alias, "--columns", "id", *base]) == 0
        out, err = capsys.readouterr()
        assert sorted(json.loads(x)["id"] for x in out.splitlines()) == COMMITTED, alias
        assert err == "", err  # no "no snapshot" warning
    assert main(["ls", aliases["symlink"], *base]) == 0
    out, err = capsys.readouterr()
    assert {line.split()[0] for line in out.splitlines()[2:]} == {"ds=a"}, out
    assert err == "", err  # listed with the snapshot


def test_a_real_path_under_a_symlinked_warehouse_reads_with_the_snapshot(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The catalog stores the location as configured (through a symlink); a reader that
    names the real directory is still reading that table."""
    from acidstream.ingest.connection import StreamingConnection, StreamingOptions
    from acidstream.ingest.record_json import StrictJsonWriter
    from acidstream.txn import TableDef, open_store

    real_wh = tmp_path / "real_wh"
    real_wh.mkdir()
    (tmp_path / "wh").symlink_to(real_wh)
    with open_store(store_url, warehouse=str(tmp_path / "wh")) as store:
        t = store.create_table(
            TableDef("default", "s", (("id", "int"),), parameters={"transactional": "true"})
        )
        with StreamingConnection(
            "s", record_writer=StrictJsonWriter(), store=store,
            options=StreamingOptions(txns_per_batch=2, memory_limit_bytes=100),
        ) as c:  # fmt: skip
            c.begin_transaction()
            c.write_many(b'{"id": %d}' % i for i in range(3))
            c.commit_transaction()
            c.begin_transaction()
            c.write_many(b'{"id": %d}' % i for i in range(100, 103))
            c.abort_transaction()
    assert t.location == str(tmp_path / "wh" / "s")
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoSnapshotWarning)
        got = acidstream.read_table(str(real_wh / "s"), metastore=store_url)
    assert sorted(got.column("id").to_pylist()) == [0, 1, 2]


def test_an_unregistered_copy_is_still_read_without_a_snapshot(
    store: TxnStore, make_table: MakeTable, store_url: str, warehouse: str, tmp_path: Path
) -> None:
    """The alias look-up must not claim a directory no table owns (a sibling whose name
    starts like the table's, a copy)."""
    import shutil

    loc = _aborted_rows_on_disk(store, make_table)
    twin = f"{loc}_copy"
    shutil.copytree(loc, twin)
    with pytest.warns(NoSnapshotWarning):
        got = acidstream.read_table(twin, metastore=store_url, warehouse=warehouse)
    assert len(got) == 10


def test_write_ids_of_another_table_are_refused(
    store: TxnStore, make_table: MakeTable, store_url: str, warehouse: str,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    loc = _aborted_rows_on_disk(store, make_table)
    make_table("other", "id int")
    other = "default.other:10:9223372036854775807::"
    kw = {"metastore": store_url, "warehouse": warehouse}
    with pytest.raises(ConfigError, match=r"default\.other.*default\.t"):
        acidstream.read_table("default.t", write_ids=other, **kw)
    with pytest.raises(ConfigError, match=r"default\.other.*default\.t"):
        acidstream.read_table(loc, write_ids=other, **kw)  # by path too
    base = ["--metastore", store_url, "--warehouse", warehouse]
    capsys.readouterr()
    assert main(["read", "default.t", "--write-ids", other, *base]) == EXIT_ERROR
    _out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "default.other" in err and "default.t" in err, err
    # the table's own list (any case, or without its database) is accepted
    own = acidstream.read_table("t", write_ids="T:10:9223372036854775807::", **kw)
    assert sorted(own.column("id").to_pylist()) == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]
