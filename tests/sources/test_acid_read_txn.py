"""``AcidReadTxn`` whose txn the metastore aborted while it was held (a heartbeat later than
the txn timeout, a reaper): it says so, typed, instead of only logging, and never lets a read
go on under a snapshot the Cleaner no longer protects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream.acid.errors import ConfigError, TransactionError, TxnAbortedError
from acidstream.sources.acid_table import AcidReadTxn
from acidstream.txn.store import TxnState, TxnStore, open_store


@pytest.fixture
def env(store_url: str, tmp_path: Path) -> Iterator[tuple[str, str, TxnStore]]:
    """A metastore (both backends), its warehouse, and a store on it that plays the reaper."""
    wh = str(tmp_path / "wh")
    store = open_store(store_url, warehouse=wh)
    try:
        yield store_url, wh, store
    finally:
        store.close()


def test_a_lost_read_txn_is_reported_by_check_options_and_the_end_of_the_block(
    env: tuple[str, str, TxnStore],
) -> None:
    url, wh, store = env
    with pytest.raises(TransactionError, match="was aborted") as ended:
        # No heartbeat of its own thread during the test: check() does it.
        with AcidReadTxn(metastore=url, warehouse=wh, heartbeat_s=3600) as rt:
            assert rt.txn_id is not None
            rt.check()  # open: nothing to say
            assert rt.options()["readTxnId"] == str(rt.txn_id)
            store.abort_txn(rt.txn_id, reason="reaped")
            with pytest.raises(TransactionError, match=f"read txn {rt.txn_id} was aborted"):
                rt.check()
            with pytest.raises(TransactionError, match="was aborted"):
                rt.options()  # no new read under it
    assert not isinstance(ended.value, TxnAbortedError)  # the explanation, not the commit's
    assert rt.txn_id is not None
    assert store.txn_state(rt.txn_id) is TxnState.ABORTED  # and nothing committed it


def test_the_heartbeat_thread_finds_the_loss_and_stops(env: tuple[str, str, TxnStore]) -> None:
    url, wh, store = env
    rt = AcidReadTxn(metastore=url, warehouse=wh, heartbeat_s=0.01)
    with pytest.raises(TransactionError, match="was aborted"):
        with rt:
            assert rt.txn_id is not None and rt._thread is not None
            store.abort_txn(rt.txn_id, reason="reaped")
            rt._thread.join(timeout=30)  # the thread ends once a beat finds the txn lost
            assert not rt._thread.is_alive()
            with pytest.raises(TransactionError, match="was aborted"):
                rt.options()


def test_an_error_inside_the_block_is_not_replaced_by_the_loss(
    env: tuple[str, str, TxnStore],
) -> None:
    url, wh, store = env
    with pytest.raises(ValueError, match="the caller's own"):
        with AcidReadTxn(metastore=url, warehouse=wh, heartbeat_s=3600) as rt:
            assert rt.txn_id is not None
            store.abort_txn(rt.txn_id, reason="reaped")
            raise ValueError("the caller's own")


def test_check_outside_the_block_is_a_config_error(tmp_path: Path) -> None:
    rt = AcidReadTxn(metastore=f"sqlite:///{tmp_path}/m.db", warehouse=str(tmp_path / "wh"))
    with pytest.raises(ConfigError):
        rt.check()
