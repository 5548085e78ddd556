"""Read-only commands create nothing and work on read-only media (issue 10, item 9)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream.acid.errors import ConfigError
from acidstream.cli.main import main
from acidstream.txn import TableDef, TxnStore, open_store
from acidstream.txn.locks import LockComponent, LockRequest, LockType
from acidstream.txn.migrations import READABLE_FROM_VERSION, SCHEMA_VERSION
from tests.plugins.store_fixture import PG_URL


@pytest.mark.parametrize(
    "command",
    [["txns"], ["locks"], ["tables"], ["abort", "1"], ["set-location", "t", "/x"]],
    ids=lambda c: c[0],
)
def test_a_missing_sqlite_metastore_is_reported_and_not_created(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    code = main([*command, "--metastore", f"sqlite:///{missing}/m.db"])
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and f"no metastore at sqlite:///{missing}/m.db" in err
    assert not (tmp_path / "nonexistent").exists()


@pytest.mark.parametrize("command", ["txns", "locks", "tables"])
def test_listing_with_defaults_in_an_empty_directory_creates_no_warehouse(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    monkeypatch.delenv("ACIDSTREAM_WAREHOUSE", raising=False)
    assert main([command]) != 0
    assert "no metastore at" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_empty_sqlite_file_is_no_metastore(tmp_path: Path) -> None:
    (tmp_path / "m.db").write_bytes(b"")
    with pytest.raises(ConfigError, match="no metastore at"):
        open_store(f"sqlite:///{tmp_path}/m.db", read_only=True)
    assert (tmp_path / "m.db").stat().st_size == 0  # not turned into a database


def test_read_only_store_lists_and_refuses_writes(store: TxnStore, store_url: str) -> None:
    store.create_table(TableDef("default", "t", (("id", "int"),), location="/w/t"))
    (a,) = store.open_txns(1, user="u", host="h")
    with open_store(store_url, read_only=True) as ro:
        assert ro.read_only
        assert [t.txn_id for t in ro.show_txns()] == [a]
        assert [t.name for t in ro.list_tables()] == ["t"]
        assert ro.get_valid_txns().open_txns == (a,)
        with pytest.raises(ConfigError, match="read-only"):
            ro.open_txns(1, user="u", host="h")
        with pytest.raises(ConfigError, match="read-only"):
            ro.heartbeat_txn_range(a, a)
    assert store.txn_state(a) is not None and len(store.show_txns()) == 1


@pytest.mark.postgres
def test_read_only_postgres_without_a_schema_creates_nothing() -> None:
    psycopg = pytest.importorskip("psycopg")
    try:
        conn = psycopg.connect(PG_URL, autocommit=True, connect_timeout=3)
    except Exception as e:
        pytest.skip(f"PostgreSQL not reachable at {PG_URL}: {e}")
    schema = f"acidtest_ro_{uuid.uuid4().hex[:10]}"
    with conn:
        with pytest.raises(ConfigError, match="no metastore at"):
            open_store(f"{PG_URL}?schema={schema}", read_only=True)
        row = conn.execute(
            "SELECT COUNT(*) FROM pg_namespace WHERE nspname = %s", (schema,)
        ).fetchone()
        assert row is not None and row[0] == 0


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs that the test fills, then remounts read-only (root ignores file modes)."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a read-only file system")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mnt)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)  # still busy


def _remount_read_only(mnt: Path) -> None:
    done = subprocess.run(["mount", "-o", "remount,ro", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot remount read-only: {done.stderr.decode().strip()}")
    try:
        (mnt / "probe").touch()
    except OSError:
        return
    pytest.skip("the remounted file system still accepts writes")


def test_a_metastore_on_a_read_only_mount_can_be_listed(
    read_only_mount: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{read_only_mount}/metastore.db"
    with open_store(url, warehouse=str(read_only_mount)) as store:
        store.create_table(TableDef("default", "t", (("id", "int"),)))
        (a,) = store.open_txns(1, user="me", host="h")
        store.lock(LockRequest((LockComponent(LockType.SHARED_READ, "default", "t"),), txn_id=a))
    before = sorted(os.listdir(read_only_mount))
    assert before == ["metastore.db"]  # the last close checkpointed the WAL away
    _remount_read_only(read_only_mount)
    base = ["--metastore", url]
    assert main(["txns", *base]) == 0
    assert f"{a}" in capsys.readouterr().out
    assert main(["locks", *base]) == 0
    assert "SHARED_READ" in capsys.readouterr().out
    assert main(["tables", *base]) == 0
    assert f"{read_only_mount}/t" in capsys.readouterr().out
    # A read would hold a read txn; here it cannot open one and reads without (zero rows).
    assert main(["read", "default.t", *base]) == 0
    assert capsys.readouterr().out == ""
    assert main(["abort", str(a), *base]) != 0  # a writing command fails, in one line
    assert capsys.readouterr().err.count("\n") == 1
    assert sorted(os.listdir(read_only_mount)) == before


def test_an_older_schema_is_listed_as_is_and_migrated_by_a_writer(
    store: TxnStore, store_url: str
) -> None:
    (a,) = store.open_txns(1, user="u", host="h")
    store.database.run(
        "downgrade",
        lambda tx: (
            tx.x("DROP INDEX COMPACTION_QUEUE_TARGET_IDX"),
            tx.x("DROP INDEX COMPLETED_COMPACTIONS_TARGET_IDX"),
            tx.x("DELETE FROM SCHEMA_VERSION WHERE VERSION > ?", READABLE_FROM_VERSION),
        ),
    )
    with open_store(store_url, read_only=True) as ro:
        assert ro.schema_version == READABLE_FROM_VERSION  # not migrated
        assert [t.txn_id for t in ro.show_txns()] == [a]
    with open_store(store_url) as rw:
        assert rw.schema_version == SCHEMA_VERSION
    with open_store(store_url, read_only=True) as ro:
        assert ro.schema_version == SCHEMA_VERSION
