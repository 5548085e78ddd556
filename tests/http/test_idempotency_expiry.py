"""Idempotency keys expire after ``idempotency_retention_s``: the server's housekeeping
pass deletes old pointers and markers from the table's parameters (both backends)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx
import pytest

from acidstream.acid import faults
from acidstream.acid.errors import AcidStreamError, ConfigError, TransactionError
from acidstream.ingest.http.config import ServerConfig, TableSettings
from acidstream.ingest.http.idempotency import (
    IDEM_PREFIX,
    RECORD_PREFIX,
    IdempotencyIndex,
    Outcome,
    key_hash,
    marker_entry,
    marker_key,
    pointer_key,
    pointer_value,
)
from acidstream.txn.store import TxnStore
from tests.http.conftest import ServerProcess, base_config, create_table, jsonl, read_ids

NDJSON = {"content-type": "application/x-ndjson"}


def _use_key(store: TxnStore, khash: str, bhash: str, *, at: float) -> int:
    """Record a key as the server does for a committed txn: pointer, then marker."""
    (txn,) = store.open_txns(1, user="http", host="h")
    store.allocate_write_ids([txn], "default", "t")
    store.set_table_param("default", "t", pointer_key(khash), pointer_value(txn, "b", at=at))
    entry = {khash: marker_entry(bhash, {"accepted": 1}, at=at)}
    store.commit_txn(txn, key=marker_key(txn), value=json.dumps(entry), db="default", table="t")
    return txn


def test_prune_deletes_exactly_the_records_older_than_the_retention(
    store: TxnStore, store_factory: Callable[[], TxnStore]
) -> None:
    create_table(store, "t")
    now = time.time()
    old, new = key_hash("old"), key_hash("new")
    old_txn = _use_key(store, old, "b", at=now - 1000)
    new_txn = _use_key(store, new, "b", at=now - 10)
    # A record without a time (written by hand, or unreadable) is never guessed old.
    store.set_table_param("default", "t", pointer_key(key_hash("undated")), '{"txn": 1}')
    index = IdempotencyIndex(store_factory())
    assert index.claim("t", old, "b", db_table=("default", "t")).outcome is Outcome.REPLAY
    assert index.prune("t", ("default", "t"), older_than=now - 100) == 2
    left = store.table_params_with_prefix("default", "t", RECORD_PREFIX)
    assert sorted(left) == sorted(
        [pointer_key(new), marker_key(new_txn), pointer_key(key_hash("undated"))]
    )
    assert marker_key(old_txn) not in left
    # The expired key is fresh again (also in this server's memory); the other still replays.
    assert index.claim("t", old, "b", db_table=("default", "t")).outcome is Outcome.FRESH
    index.release("t", old)
    assert index.claim("t", new, "b", db_table=("default", "t")).outcome is Outcome.REPLAY
    assert index.prune("t", ("default", "t"), older_than=now - 100) == 0
    index.close()


def test_a_failed_prune_deletes_nothing_and_the_next_pass_does(
    store: TxnStore, store_factory: Callable[[], TxnStore]
) -> None:
    """The metastore fails the prune's transaction: no record is deleted (one DB
    transaction), the key still replays (memory untouched), the error is typed (the server's
    housekeeping pass logs it and goes on), and the next prune deletes what has expired."""
    create_table(store, "t")
    now = time.time()
    old = key_hash("old")
    _use_key(store, old, "b", at=now - 1000)
    before = store.table_params_with_prefix("default", "t", RECORD_PREFIX)
    index = IdempotencyIndex(store_factory())
    assert index.claim("t", old, "b", db_table=("default", "t")).outcome is Outcome.REPLAY

    def fail(step: str) -> None:
        if step == "delete_table_params.before_commit":
            raise TransactionError("injected: the metastore went away mid-prune")

    faults.set_hook(fail)
    try:
        with pytest.raises(AcidStreamError, match="injected"):
            index.prune("t", ("default", "t"), older_than=now - 100)
    finally:
        faults.set_hook(None)
    assert store.table_params_with_prefix("default", "t", RECORD_PREFIX) == before
    assert index.claim("t", old, "b", db_table=("default", "t")).outcome is Outcome.REPLAY
    assert index.prune("t", ("default", "t"), older_than=now - 100) == 2
    assert store.table_params_with_prefix("default", "t", RECORD_PREFIX) == {}
    index.close()


def test_retention_shorter_than_the_txn_timeout_is_refused() -> None:
    cfg = ServerConfig(
        tables={"default.t": TableSettings(name="default.t")}, idempotency_retention_s=60
    )
    cfg.check_retention(60)  # as long as the metastore's timeout: kept
    with pytest.raises(ConfigError, match="idempotency_retention_s"):
        cfg.check_retention(300)  # the metastore's timeout, read when the server opens it


@pytest.mark.slow
def test_the_server_expires_keys_after_the_retention(
    store: TxnStore,
    store_url: str,
    warehouse: str,
    server_factory: Callable[..., ServerProcess],
) -> None:
    create_table(store, "t")
    cfg = base_config(
        store_url,
        warehouse,
        {"default.t": {}},
        txn_timeout_s=1,
        idempotency_retention_s=1,
        housekeeping_interval_s=0.2,
    )
    srv = server_factory(cfg)
    post = lambda: httpx.post(  # noqa: E731
        f"{srv.url}/v1/tables/default.t",
        content=jsonl([1, 2]),
        headers={**NDJSON, "Idempotency-Key": "k"},
        timeout=30,
    )
    first = post()
    assert first.status_code == 200 and "idempotent-replayed" not in first.headers
    again = post()  # within the retention: answered from the first commit
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert read_ids(store_url, warehouse, "t") == [1, 2]
    # The housekeeping passes (every 0.2 s) expire the key once it is 1 s old.
    deadline = time.monotonic() + 60
    while store.table_params_with_prefix("default", "t", IDEM_PREFIX):
        assert time.monotonic() < deadline, "the key was never expired"
        time.sleep(0.1)  # polling another process's metastore writes: no event to wait on
    assert store.table_params_with_prefix("default", "t", RECORD_PREFIX) == {}
    late = post()  # after the retention the same key is a new request, as documented
    assert late.status_code == 200 and "idempotent-replayed" not in late.headers
    assert read_ids(store_url, warehouse, "t") == [1, 1, 2, 2]
