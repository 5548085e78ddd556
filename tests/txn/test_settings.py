"""Metastore settings: the txn timeout is the metastore's, typed and validated, and the
clients that once carried their own copy follow it or are refused (issue 29, item 5)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from acidstream.acid.errors import ConfigError
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.heartbeat import Heartbeater
from acidstream.txn.settings import SETTINGS, TXN_TIMEOUT_S
from acidstream.txn.store import TxnStore, open_store
from tests.txn.conftest import make_table

ROOT = Path(__file__).resolve().parents[2]


def test_txn_timeout_defaults_to_300_s_from_the_registry(store: TxnStore) -> None:
    value = store.setting(TXN_TIMEOUT_S)
    assert (value.value, value.is_default) == (300.0, True)
    assert store.txn_timeout_s() == 300.0
    assert [v.key for v in store.settings()] == sorted(SETTINGS)


def test_set_txn_timeout_is_seen_by_every_client_of_the_metastore(store: TxnStore) -> None:
    stored = store.set_setting(TXN_TIMEOUT_S, "3")
    assert (stored.value, stored.is_default) == (3.0, False)
    with open_store(store.url) as other:  # another client (process) of the same metastore
        assert other.txn_timeout_s() == 3.0
        assert other.setting(TXN_TIMEOUT_S).is_default is False
    store.set_setting(TXN_TIMEOUT_S, 2.5)
    assert store.txn_timeout_s() == 2.5


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("txn_timeout", "3", "unknown metastore setting 'txn_timeout'; known settings: txn_t"),
        (TXN_TIMEOUT_S, "abc", "txn_timeout_s must be a number of seconds, not 'abc'"),
        (TXN_TIMEOUT_S, "0", "txn_timeout_s must be between 1 and 86400s, not '0'"),
        (TXN_TIMEOUT_S, "-5", "txn_timeout_s must be between 1 and 86400s"),
        (TXN_TIMEOUT_S, "nan", "txn_timeout_s must be between 1 and 86400s"),
        (TXN_TIMEOUT_S, "inf", "txn_timeout_s must be between 1 and 86400s"),
        (TXN_TIMEOUT_S, "1e9", "txn_timeout_s must be between 1 and 86400s"),
    ],
)
def test_bad_keys_and_values_are_refused_and_nothing_is_stored(
    store: TxnStore, key: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        store.set_setting(key, value)
    assert store.setting(TXN_TIMEOUT_S).is_default


def test_a_writer_has_no_timeout_option_of_its_own(store: TxnStore) -> None:
    """Measured in the issue: a writer with its own txn_timeout_s=900 heartbeated every
    450 s and a default housekeeper aborted it while healthy. The option is removed: a
    writer cannot be given a timeout other than the metastore's."""
    make_table(store)
    with pytest.raises(TypeError, match="txn_timeout_s"):
        StreamingOptions(txn_timeout_s=900)  # type: ignore[call-arg]
    opts = StreamingOptions(housekeeping_interval_s=None)
    StreamingConnection("t", record_writer=StrictJsonWriter(), store=store, options=opts).close()


def test_heartbeats_follow_the_metastores_timeout_and_its_changes(store: TxnStore) -> None:
    hb = Heartbeater(
        open_store(store.url), txn_range=lambda: None, on_lost=lambda _: None
    )  # not started: the thread's re-read is called by hand
    try:
        assert hb.interval_s == 150.0  # half of the default 300 s
        store.set_setting(TXN_TIMEOUT_S, 4)
        hb.refresh_interval()
        assert hb.interval_s == 2.0
    finally:
        hb.stop()
    # An explicit interval can only make beats more frequent, never stretch them past half
    # the metastore's timeout (the option once let a writer be taken for dead).
    long = Heartbeater(
        open_store(store.url), interval_s=3600, txn_range=lambda: None, on_lost=lambda _: None
    )
    short = Heartbeater(
        open_store(store.url), interval_s=0.5, txn_range=lambda: None, on_lost=lambda _: None
    )
    try:
        assert (long.interval_s, short.interval_s) == (2.0, 0.5)
    finally:
        long.stop()
        short.stop()


def test_a_lost_metastore_keeps_the_heartbeat_interval(
    store: TxnStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-read after a beat fails when the metastore is gone: the heartbeater keeps
    its last interval (it must neither stretch nor stop) and the error does not escape.
    The loss is injected at the store's boundary (the read raises as a dropped connection
    does); the heartbeater under test is the real one."""
    store.set_setting(TXN_TIMEOUT_S, 4)
    own = open_store(store.url)
    hb = Heartbeater(own, txn_range=lambda: None, on_lost=lambda _: None)
    try:
        assert hb.interval_s == 2.0

        def gone() -> float:
            raise ConnectionError("server closed the connection unexpectedly")

        monkeypatch.setattr(own, "txn_timeout_s", gone)
        hb.refresh_interval()
        assert hb.interval_s == 2.0
        monkeypatch.undo()
        store.set_setting(TXN_TIMEOUT_S, 10)
        hb.refresh_interval()  # back: the new value is taken
        assert hb.interval_s == 5.0
    finally:
        hb.stop()


# -- the command line (real processes) ---------------------------------------------------------
def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ACIDSTREAM_METASTORE", None)
    return subprocess.run(
        [sys.executable, "-m", "acidstream.cli.main", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )


def test_cli_config_set_and_get_round_trip(store: TxnStore) -> None:
    url = store.url
    before = _cli("config", "get", "--metastore", url)
    assert before.returncode == 0, before.stderr
    lines = before.stdout.splitlines()
    assert lines[0].split()[:4] == ["setting", "value", "source", "default"]
    assert lines[2].split()[:4] == ["txn_timeout_s", "300s", "default", "300s"]
    done = _cli("config", "set", "txn_timeout_s", "3", "--metastore", url)
    assert (done.returncode, done.stdout, done.stderr) == (0, "txn_timeout_s = 3s\n", "")
    one = _cli("config", "get", "txn_timeout_s", "--metastore", url)
    assert (one.returncode, one.stdout) == (0, "3\n")
    after = _cli("config", "get", "--metastore", url)
    assert after.stdout.splitlines()[2].split()[:4] == ["txn_timeout_s", "3s", "set", "300s"]
    assert store.txn_timeout_s() == 3.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("set", "txn_timeout", "3"),
            "acidstream: error: unknown metastore setting 'txn_timeout'; "
            "known settings: txn_timeout_s",
        ),
        (("get", "nope"), "acidstream: error: unknown metastore setting 'nope'"),
        (
            ("set", "txn_timeout_s", "soon"),
            "acidstream: error: txn_timeout_s must be a number of seconds, not 'soon'",
        ),
        (
            ("set", "txn_timeout_s", "0.1"),
            "acidstream: error: txn_timeout_s must be between 1 and 86400s, not '0.1'",
        ),
    ],
)
def test_cli_config_refuses_bad_keys_and_values_in_one_line(
    store: TxnStore, argv: tuple[str, ...], message: str
) -> None:
    out = _cli("config", *argv, "--metastore", store.url)
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.startswith(message)
    assert len(out.stderr.splitlines()) == 1
    assert store.setting(TXN_TIMEOUT_S).is_default


def test_cli_config_on_a_missing_metastore_creates_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/nothing.db"
    for argv in (("get",), ("set", "txn_timeout_s", "5")):
        out = _cli("config", *argv, "--metastore", url)
        assert out.returncode == 1
        assert out.stderr == f"acidstream: error: no metastore at {url}\n"
    assert not (tmp_path / "nothing.db").exists()


def test_the_removed_sink_option_is_refused_with_the_way_to_set_it(store: TxnStore) -> None:
    from acidstream.sinks.foreach_batch import AcidSink, SinkOptions

    make_table(store)
    store.set_setting(TXN_TIMEOUT_S, 60)
    with pytest.raises(ConfigError) as e:
        SinkOptions.from_options({"txnTimeout": "300"})
    assert str(e.value) == (
        "txnTimeout (sink option): txn_timeout_s is a metastore setting now: "
        "acidstream config set txn_timeout_s N"
    )
    # The sink follows the metastore.
    ok = AcidSink(table="default.t", metastore=store.url)
    ok._open()
    assert ok._store is not None
    ok._store.close()
