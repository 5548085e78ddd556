"""List-bucketed tables through the facade: reads by name prune with each partition's own
skew from the catalog, and ``acidstream ls`` shows the list-bucketing directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import acidstream
from acidstream.acid.errors import AcidFormatError
from acidstream.acid.list_bucketing import DEFAULT_DIR_NAME
from acidstream.acid.reader import read_path
from acidstream.cli.main import main
from acidstream.ingest.connection import StreamingConnection
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore
from tests.list_bucketing_tables import SKEW, make_lb_table


def lb_table(store: TxnStore) -> TableDef:
    """``default.t`` skewed on x (6, 20): partition ``p=a`` list-bucketed, three txns;
    ``p=b`` created after ``NOT SKEWED``: plain layout."""
    t = make_lb_table(store)
    with StreamingConnection("t", record_writer=StrictJsonWriter(), store=store) as c:
        for w in range(3):
            c.begin_transaction()
            c.write_rows([(x, f"a{w}{x}") for x in (6, 6, 20, 7, 8)], partition=["a"])
            c.commit_transaction()
    store.set_skewed("default", "t", None)
    with StreamingConnection("t", record_writer=StrictJsonWriter(), store=store) as c:
        c.begin_transaction()
        c.write_rows([(x, f"b{x}") for x in (6, 20, 7)], partition=["b"])
        c.commit_transaction()
    return t


def rows(t: Any) -> list[tuple[Any, ...]]:
    return sorted(zip(t.column("x").to_pylist(), t.column("s").to_pylist(), strict=True))


def spoil(table_dir: Path, lb_dir: str) -> int:
    """Overwrite every bucket file of ``lb_dir`` with bytes no reader can decode: a read
    that opens one fails, so a read that succeeds did not open it."""
    n = 0
    for f in table_dir.rglob("bucket_*"):
        if f.parent.name == lb_dir and not f.name.endswith("_flush_length"):
            f.write_bytes(b"not an orc file" * 10)
            n += 1
    return n


def test_read_by_name_prunes_with_each_partitions_own_skew(
    store: TxnStore, store_url: str, warehouse: str
) -> None:
    t = lb_table(store)
    kw: dict[str, Any] = {"metastore": store_url, "warehouse": warehouse}
    want6 = rows(acidstream.read_table("default.t", filter=[("x", "=", 6)], **kw))
    want7 = rows(acidstream.read_table("default.t", filter=[("x", "=", 7)], **kw))
    assert want6 == sorted([(6, f"a{w}6") for w in range(3) for _ in (0, 1)] + [(6, "b6")])
    assert want7 == sorted([(7, f"a{w}7") for w in range(3)] + [(7, "b7")])
    loc = Path(str(t.location))
    assert spoil(loc / "p=a", "x=20") == 3 and spoil(loc / "p=a", DEFAULT_DIR_NAME) == 3
    # x = 6 reads only p=a's x=6 directories (and p=b whole): the spoiled files are skipped.
    assert rows(acidstream.read_table("default.t", filter=[("x", "=", 6)], **kw)) == want6
    # A registered location resolves through the catalog too.
    assert rows(acidstream.read_table(str(loc), filter=[("x", "=", 6)], **kw)) == want6
    # The acid reader of a bare location, with no catalog, reads every directory.
    with pytest.raises(AcidFormatError):
        read_path(str(loc), filter=[("x", "=", 6)])
    # x = 7 needs the default directories: the read opens them and fails.
    with pytest.raises(AcidFormatError):
        acidstream.read_table("default.t", filter=[("x", "=", 7)], **kw)


def test_ls_shows_lb_dirs_and_which_a_filter_reads(
    store: TxnStore, store_url: str, warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lb_table(store)
    base = ["--metastore", store_url, "--warehouse", warehouse]
    capsys.readouterr()
    assert main(["ls", "default.t", *base]) == 0
    out = capsys.readouterr().out
    lb = [line.split() for line in out.splitlines() if " lb_dir " in line]
    assert len(lb) == 9  # three directories in each of p=a's three deltas; none in p=b
    assert {r[2].split("/", 1)[1] for r in lb} == {"x=6", "x=20", DEFAULT_DIR_NAME}
    assert all(r[0] == "p=a" for r in lb)
    assert main(["ls", "default.t", *base, "--where", "x = 6"]) == 0
    lb = [line.split() for line in capsys.readouterr().out.splitlines() if " lb_dir " in line]
    kept = {r[2].split("/", 1)[1] for r in lb if r[-1] == "read"}
    skipped = {r[2].split("/", 1)[1] for r in lb if r[-1] == "skipped"}
    assert kept == {"x=6"} and skipped == {"x=20", DEFAULT_DIR_NAME}
    assert main(["ls", "default.t", *base, "--where", "x in (7, '20')"]) == 0
    lb = [line.split() for line in capsys.readouterr().out.splitlines() if " lb_dir " in line]
    assert {r[2].split("/", 1)[1] for r in lb if r[-1] == "read"} == {"x=20", DEFAULT_DIR_NAME}


def test_ls_where_syntax_error_is_one_line(
    store: TxnStore, store_url: str, warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lb_table(store)
    rc = main(["ls", "default.t", "--metastore", store_url, "--warehouse", warehouse,
               "--where", "x > 6"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc != 0 and "--where" in err and err.count("\n") == 1


def test_read_by_name_finds_location_map_dirs(
    store: TxnStore, store_url: str, warehouse: str
) -> None:
    t = store.create_table(
        TableDef(
            db="default", name="m", columns=(("x", "int"), ("s", "string")),
            partition_keys=(("p", "string"),), parameters={"transactional": "true"},
            skewed=SKEW,
        )
    )  # fmt: skip
    store.set_skewed_location("default", "m", ("6",), "hot/6")
    with StreamingConnection("m", record_writer=StrictJsonWriter(), store=store) as c:
        c.begin_transaction()
        c.write_rows([(6, "a"), (7, "b"), (20, "c")], partition=["a"])
        c.commit_transaction()
    kw: dict[str, Any] = {"metastore": store_url, "warehouse": warehouse}
    assert rows(acidstream.read_table("default.m", **kw)) == [(6, "a"), (7, "b"), (20, "c")]
    spoil(Path(str(t.location)) / "p=a", "x=20")
    spoil(Path(str(t.location)) / "p=a", DEFAULT_DIR_NAME)
    assert rows(acidstream.read_table("default.m", filter=[("x", "=", 6)], **kw)) == [(6, "a")]
