"""A mutation on a full or read-only disk: a typed ``StorageError``, its txn aborted, no
file of it left behind, every committed row intact; the same statement works once the disk
has room again. A real tmpfs (root only; skipped with the reason printed otherwise), both
metastore backends (the metastore lives outside the full disk)."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

import acidstream
from acidstream import Table
from acidstream.acid.errors import StorageError
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnState, TxnStore
from tests.mutation.conftest import insert_rows, rows_of
from tests.plugins.tmpfs_fixture import Tmpfs, make_read_only

ROWS = [{"id": i, "msg": f"m{i}" * 20} for i in range(200)]


@pytest.fixture
def on_tiny_disk(
    store: TxnStore, store_url: str, warehouse: str, tmpfs: Tmpfs
) -> tuple[Table, Path]:
    disk = tmpfs("1m")
    store.create_table(
        TableDef(db="default", name="t", columns=(("id", "int"), ("msg", "string")),
                 parameters={"transactional": "true"}, location=str(disk / "t"),
                 bucket_cols=("id",), num_buckets=2)
    )  # fmt: skip
    insert_rows(store, "default.t", ROWS)
    return acidstream.table("default.t", metastore=store_url, warehouse=warehouse), disk


def _fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte with one file; its path."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (65536, 512, 1):  # unbuffered: each write lands or fails at once
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as e:
                assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def _files(disk: Path) -> set[str]:
    return {str(p.relative_to(disk)) for p in disk.rglob("bucket_*")}


@pytest.mark.parametrize(
    "statement",
    [
        lambda t: t.delete("id < 50"),
        lambda t: t.update(set={"msg": "upper(msg)"}, where="id % 3 = 0"),
        lambda t: (
            t.merge(acidstream_source(), on=["id"])
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        ),
    ],
    ids=["delete", "update", "merge"],
)
def test_a_mutation_on_a_full_disk_fails_typed_and_leaves_the_table_as_it_was(
    on_tiny_disk: tuple[Table, Path], store: TxnStore, statement: Callable[[Table], object]
) -> None:
    t, disk = on_tiny_disk
    before, files = rows_of(t.read()), _files(disk)
    filler = _fill(disk)
    with pytest.raises(StorageError) as failed:
        statement(t)
    assert failed.value.errno == errno.ENOSPC
    last = max(store.show_txns(), key=lambda x: x.txn_id)
    assert last.state is TxnState.ABORTED  # nothing of it committed
    assert rows_of(t.read()) == before
    assert _files(disk) == files  # its files removed (the partial one too)
    os.unlink(filler)
    statement(t)  # the disk has room again: the same statement works
    assert rows_of(t.read()) != before


def test_a_mutation_on_a_read_only_disk_fails_typed(
    on_tiny_disk: tuple[Table, Path], store: TxnStore
) -> None:
    t, disk = on_tiny_disk
    before = rows_of(t.read())
    make_read_only(disk)
    with pytest.raises(StorageError) as failed:
        t.delete("id < 50")
    assert failed.value.errno == errno.EROFS
    assert max(store.show_txns(), key=lambda x: x.txn_id).state is TxnState.ABORTED
    assert rows_of(t.read()) == before


def acidstream_source() -> object:
    import pyarrow as pa

    ids = list(range(150, 260))
    return pa.table({"id": pa.array(ids, pa.int32()), "msg": [f"new{i}" * 20 for i in ids]})


def test_the_cli_on_a_full_disk_prints_one_line_and_exits_4(
    on_tiny_disk: tuple[Table, Path],
    store_url: str,
    warehouse: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from acidstream.cli.main import EXIT_STORAGE, main

    t, disk = on_tiny_disk
    before = rows_of(t.read())
    _fill(disk)
    capsys.readouterr()
    code = main(
        ["delete", "default.t", "--where", "id < 50", "--metastore", store_url,
         "--warehouse", warehouse]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == EXIT_STORAGE == 4, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "No space left on device" in lines[0], err
    assert "Traceback" not in err
    assert rows_of(t.read()) == before
