"""``acidstream txns | locks | tables | create-table | abort`` and the config resolution."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acidstream.acid.errors import ConfigError
from acidstream.cli.main import main
from acidstream.txn import StoreConfig, TxnState, open_store
from acidstream.txn.locks import LockComponent, LockRequest, LockType


def test_config_precedence_args_env_defaults() -> None:
    env = {"ACIDSTREAM_METASTORE": "postgresql://h/db", "ACIDSTREAM_WAREHOUSE": "/env/wh"}
    cwd = os.getcwd()
    assert StoreConfig.resolve(env={}) == StoreConfig(
        metastore_url=f"sqlite:///{cwd}/warehouse/metastore.db", warehouse=f"{cwd}/warehouse"
    )
    assert StoreConfig.resolve(env=env) == StoreConfig(
        metastore_url="postgresql://h/db", warehouse="/env/wh"
    )
    assert StoreConfig.resolve(warehouse="/arg/wh", env={}).metastore_url == (
        "sqlite:////arg/wh/metastore.db"
    )
    got = StoreConfig.resolve(metastore="sqlite:///x.db", warehouse="/a", env=env)
    assert got == StoreConfig(
        metastore_url=f"sqlite:///{cwd}/x.db", warehouse="/a"
    )  # relative paths made absolute
    with pytest.raises(ConfigError, match="ACIDSTREAM_METASTORE"):
        StoreConfig.resolve(metastore="mysql://x", env={})


def test_create_table_and_list(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wh = str(tmp_path / "wh")
    base = ["--metastore", store_url, "--warehouse", wh]
    code = main(
        ["create-table", "sales.orders", "id int, name string", "--partitioned-by", "ds string",
         "--buckets", "id:4", "--tblproperty", "orc.compress=ZLIB", *base]
    )  # fmt: skip
    assert code == 0
    assert f"created sales.orders at {wh}/sales.db/orders" in capsys.readouterr().out
    with open_store(store_url, warehouse=wh) as store:
        t = store.get_table("sales", "orders")
    assert t.is_full_acid and t.bucket_cols == ("id",) and t.num_buckets == 4
    assert t.partition_keys == (("ds", "string"),)
    assert t.parameters["orc.compress"] == "ZLIB"
    assert main(["tables", *base]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["table", "transactional", "partitioned_by", "buckets", "location"]
    assert lines[2].split() == [
        "sales.orders",
        "default",
        "ds",
        "string",
        "id:4",
        f"{wh}/sales.db/orders",
    ]


def test_errors_exit_non_zero_with_one_line(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--metastore", store_url, "--warehouse", str(tmp_path)]
    assert main(["create-table", "t", "id int", *base]) == 0
    capsys.readouterr()
    assert main(["create-table", "t", "id int", *base]) == 1
    err = capsys.readouterr().err
    assert err == "acidstream: error: Table default.t already exists\n"
    assert (
        main(["create-table", "u", "id int", "--tblproperty", "transactional_properties=x", *base])
        == 1
    )
    assert "transactional_properties" in capsys.readouterr().err
    assert main(["abort", "999", *base]) == 1
    assert capsys.readouterr().err == "acidstream: error: No such transaction txnid:999\n"


def test_txns_locks_and_abort(
    store_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACIDSTREAM_METASTORE", store_url)
    monkeypatch.setenv("ACIDSTREAM_WAREHOUSE", str(tmp_path))
    with open_store(store_url, warehouse=str(tmp_path)) as store:
        a, b = store.open_txns(2, user="alice", host="node1", agent_info="ingest-1")
        store.lock(
            LockRequest(
                (LockComponent(LockType.SHARED_READ, "default", "t"),),
                txn_id=a,
                user="alice",
                host="node1",
            )
        )
        assert main(["txns"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == [
            "txnid", "state", "startedtime", "lastheartbeattime", "user", "host", "agent_info", "abort_reason",
        ]  # fmt: skip
        assert out[2].split()[:2] == [str(a), "OPEN"] and "alice" in out[2] and "ingest-1" in out[2]
        assert main(["locks"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split()[:8] == [
            "lockid", "database", "table", "partition", "lock_state", "blocked_by", "lock_type", "transaction_id",
        ]  # fmt: skip
        assert out[2].split()[:6] == ["1.1", "default", "t", "ACQUIRED", "SHARED_READ", str(a)]
        assert main(["abort", str(a), str(b)]) == 0
        assert capsys.readouterr().out == f"aborted txnid:{a}\naborted txnid:{b}\n"
        assert store.txn_state(a) is TxnState.ABORTED
        assert store.show_locks() == []


def test_defaults_use_sqlite_inside_dot_warehouse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    monkeypatch.delenv("ACIDSTREAM_WAREHOUSE", raising=False)
    assert main(["create-table", "t", "id int"]) == 0
    assert (tmp_path / "warehouse" / "metastore.db").is_file()
    # the default warehouse is resolved against the cwd once, and stored absolute
    assert f"created default.t at {tmp_path}/warehouse/t" in capsys.readouterr().out
