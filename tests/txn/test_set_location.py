"""``set-location`` never orphans committed data (issue 28, item 9): a table with files
under its location, an open writer, or committed write ids and nothing at the new place is
refused; an empty table, or one whose directory was moved by hand, is re-pointed. Both
backends."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import acidstream
from acidstream.acid.errors import ConfigError
from acidstream.cli.main import EXIT_ERROR, main
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_json import StrictJsonWriter
from acidstream.txn import TableDef, TxnStore
from tests.txn.conftest import make_table


def _write(store: TxnStore, ids: range, *, table: str = "t") -> None:
    with StreamingConnection(
        table, record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        c.begin_transaction()
        c.write_rows([(i, f"m{i}") for i in ids])
        c.commit_transaction()


def _ids(store: TxnStore, warehouse: str, table: str = "default.t") -> list[int]:
    got = acidstream.read_table(table, metastore=store.url, warehouse=warehouse)
    return sorted(got.column("id").to_pylist())


def test_a_table_with_committed_rows_is_not_repointed(
    store: TxnStore, warehouse: str, tmp_path: Path
) -> None:
    t = make_table(store)
    _write(store, range(5))
    elsewhere = tmp_path / "elsewhere"
    with pytest.raises(ConfigError, match=r"default\.t: it has data under .*orphaned"):
        store.set_table_location("default", "t", str(elsewhere))
    assert store.get_table("default", "t").location == t.location
    assert _ids(store, warehouse) == [0, 1, 2, 3, 4]


def test_a_partitioned_table_keeps_its_partitions_when_refused(
    store: TxnStore, warehouse: str, tmp_path: Path
) -> None:
    t = make_table(store, partitioned=True)
    with StreamingConnection(
        "t", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        c.begin_transaction()
        c.write_rows([(1, "a")], partition=["x"])
        c.commit_transaction()
    with pytest.raises(ConfigError, match="has data"):
        store.set_table_location("default", "t", str(tmp_path / "new"))
    assert [p.location for p in store.list_partitions("default", "t")] == [f"{t.location}/ds=x"]


def test_an_open_writer_blocks_the_move_even_before_its_first_file(
    store: TxnStore, tmp_path: Path
) -> None:
    make_table(store)
    with StreamingConnection(
        "t", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        c.begin_transaction()  # write ids allocated, nothing on disk yet
        with pytest.raises(ConfigError, match=r"write ids 1 are open"):
            store.set_table_location("default", "t", str(tmp_path / "new"))
        c.abort_transaction()


def test_committed_write_ids_without_files_anywhere_are_refused(
    store: TxnStore, tmp_path: Path
) -> None:
    """The rows' files are gone from the old place and absent at the new one: pointing
    the table there would hide that; the fix is to find the files."""
    t = make_table(store)
    _write(store, range(3))
    assert t.location is not None
    shutil.rmtree(t.location)
    with pytest.raises(ConfigError, match=r"1 committed write id\(s\) and there is no file"):
        store.set_table_location("default", "t", str(tmp_path / "empty"))


def test_an_empty_or_never_written_table_is_repointed(store: TxnStore, tmp_path: Path) -> None:
    make_table(store)
    new = tmp_path / "new" / "t"
    assert store.set_table_location("default", "t", str(new)).location == str(new)
    # Only aborted writes (no committed write id, nothing left on disk) count as empty too.
    store.create_table(
        TableDef("default", "u", (("id", "int"), ("name", "string")),
                 parameters={"transactional": "true"})
    )  # fmt: skip
    with StreamingConnection(
        "u", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        c.begin_transaction()
        c.abort_transaction()
    other = tmp_path / "other" / "u"
    assert store.set_table_location("default", "u", str(other)).location == str(other)


def test_a_location_overlapping_another_tables_directory_is_refused(
    store: TxnStore, warehouse: str, tmp_path: Path
) -> None:
    """An empty table pointed at, above or inside a table with rows would read (and its
    compactor and cleaner would rewrite) that table's files."""
    t = make_table(store)
    _write(store, range(2))
    make_table(store, "u")
    assert t.location is not None
    for target in (t.location, f"{t.location}/", f"{t.location}/sub", warehouse):
        with pytest.raises(ConfigError, match=r"overlaps the directory of table default\.t"):
            store.set_table_location("default", "u", target)
    assert store.get_table("default", "u").location == f"{warehouse}/u"
    # a sibling whose name only starts like it is not inside it
    sibling = f"{t.location}_2"
    assert store.set_table_location("default", "u", sibling).location == sibling


def test_a_location_that_cannot_be_checked_is_not_repointed(
    store: TxnStore, tmp_path: Path
) -> None:
    """A file system acidstream cannot list (here: a scheme no client knows) may hold the
    table's data: refused with a ConfigError, not an internal error."""
    store.create_table(
        TableDef("default", "r", (("id", "int"),), location="nosuchfs://nn/w/r",
                 parameters={"transactional": "true"})
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"cannot look for data under nosuchfs://nn/w/r"):
        store.set_table_location("default", "r", str(tmp_path / "r"))
    make_table(store)
    with pytest.raises(ConfigError, match=r"cannot look for data under nosuchfs://x"):
        store.set_table_location("default", "t", "nosuchfs://x/t")
    assert store.get_table("default", "r").location == "nosuchfs://nn/w/r"


def test_a_directory_moved_by_hand_is_followed(
    store: TxnStore, warehouse: str, tmp_path: Path
) -> None:
    t = make_table(store)
    _write(store, range(4))
    assert t.location is not None
    moved = tmp_path / "moved" / "t"
    moved.parent.mkdir()
    shutil.move(t.location, moved)
    assert store.set_table_location("default", "t", str(moved)).location == str(moved)
    assert _ids(store, warehouse) == [0, 1, 2, 3]
    # pointing it at itself again is a no-op, data or not
    assert store.set_table_location("default", "t", f"{moved}/").location == str(moved)


def test_cli_refusal_is_one_line_and_the_rows_stay(
    store: TxnStore, warehouse: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = make_table(store)
    _write(store, range(6))
    capsys.readouterr()
    code = main(["set-location", "default.t", str(tmp_path / "x"), "--metastore", store.url])
    _out, err = capsys.readouterr()
    assert code == EXIT_ERROR, err
    assert err.count("\n") == 1 and err.startswith("acidstream: error: cannot set the location")
    assert "has data" in err and "Traceback" not in err
    assert store.get_table("default", "t").location == t.location
    assert _ids(store, warehouse) == [0, 1, 2, 3, 4, 5]


def test_a_database_move_leaves_its_tables_and_their_rows(
    store: TxnStore, warehouse: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database's location is only where its new tables default: the existing ones keep
    their own (absolute) locations, so nothing is orphaned."""
    store.create_database("b")
    t = store.create_table(
        TableDef("b", "t", (("id", "int"), ("name", "string")),
                 parameters={"transactional": "true"})
    )  # fmt: skip
    with StreamingConnection(
        "b.t", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as c:  # fmt: skip
        c.begin_transaction()
        c.write_rows([(1, "x"), (2, "y")])
        c.commit_transaction()
    new = tmp_path / "b2.db"
    assert main(["set-location", "--database", "b", str(new), "--metastore", store.url]) == 0
    assert store.get_database("b").location == str(new)
    assert store.get_table("b", "t").location == t.location
    assert _ids(store, warehouse, "b.t") == [1, 2]
