"""Reaping by the metastore's txn timeout, with real processes on both backends (issue 29,
item 5): a writer with default options, SIGKILLed, is aborted by a default ``acidstream
housekeeping`` once the metastore's timeout has passed since its last heartbeat, and not
before; a healthy writer idle in an open txn for several timeouts is never aborted.

Before, the timeout lived in each client: a killed writer with ``txn_timeout_s=2`` stayed
open under a default (300 s) housekeeping, and a writer with ``txn_timeout_s=900`` was
aborted while healthy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from acidstream.txn import TxnState, TxnStore
from tests.txn.conftest import make_table

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 4.0  # small, so the test waits seconds; set with `acidstream config set`

# A writer: default options unless argv[2] (JSON) says otherwise. It opens a txn, writes a
# row, prints the txn id, then idles in the open txn until a line on stdin commits it.
_WRITER = """
import json, sys
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
opts = StreamingOptions(**json.loads(sys.argv[2]))
conn = StreamingConnection("default.t", record_writer=StrictJsonWriter(), metastore=sys.argv[1],
                           options=opts)
conn.begin_transaction()
conn.write(b'{"id": 1, "name": "a"}')
print(conn.current_txn_id, flush=True)
sys.stdin.readline()
conn.commit_transaction()
print("committed", flush=True)
conn.close()
"""


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ACIDSTREAM_METASTORE", None)
    return env


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acidstream.cli.main", *argv],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=60,
    )


def _start_writer(url: str, options: dict[str, Any]) -> tuple[subprocess.Popen[str], int]:
    w = subprocess.Popen(
        [sys.executable, "-c", _WRITER, url, json.dumps(options)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    assert w.stdout is not None
    line = w.stdout.readline()
    assert line.strip().isdigit(), f"writer failed: {line!r}"
    return w, int(line)


def _txn(store: TxnStore, txn: int) -> Any:
    return next(t for t in store.show_txns() if t.txn_id == txn)


def _set_timeout(url: str) -> None:
    done = _cli("config", "set", "txn_timeout_s", f"{TIMEOUT_S:g}", "--metastore", url)
    assert done.returncode == 0, done.stderr


def _wait_for_beat(store: TxnStore, txn: int, after_ms: int, deadline_s: float = 30) -> int:
    """Poll the store until the txn's heartbeat moves past ``after_ms``; its new value."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        hb: int = _txn(store, txn).last_heartbeat_ms
        if hb > after_ms:
            return hb
        time.sleep(0.05)
    raise AssertionError(f"txn {txn} was not heartbeaten within {deadline_s}s")


def test_killed_default_writer_is_reaped_by_default_housekeeping_after_the_metastores_timeout(
    store_url: str, store: TxnStore
) -> None:
    make_table(store)
    _set_timeout(store_url)
    writer, txn = _start_writer(store_url, {})
    try:
        # Kill it just after a heartbeat: its last sign of life is then known exactly.
        last_hb_ms = _wait_for_beat(store, txn, _txn(store, txn).last_heartbeat_ms)
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    finally:
        writer.kill()
        writer.wait()
    expiry = last_hb_ms / 1000 + TIMEOUT_S
    passes: list[tuple[float, float, TxnState]] = []  # (start, end, txn state after)
    give_up = time.time() + TIMEOUT_S + 60
    while time.time() < give_up:
        start = time.time()
        out = _cli("housekeeping", "--metastore", store_url)
        end = time.time()
        assert out.returncode == 0, out.stderr
        state = _txn(store, txn).state
        passes.append((start, end, state))
        if state is not TxnState.OPEN:
            break
    assert passes[-1][2] is TxnState.ABORTED, passes
    early = [p for p in passes if p[1] < expiry]
    # Not before: at least one pass ran before the timeout, and every one left it open.
    assert early, f"no housekeeping pass finished within {TIMEOUT_S}s of the kill: {passes}"
    assert all(state is TxnState.OPEN for _, _, state in early)
    # After: the pass that aborted it ended after the timeout, and started no later than
    # the first pass begun once the timeout had passed.
    start, end, _ = passes[-1]
    assert end >= expiry
    assert not any(s >= expiry for s, _, _ in passes[:-1])
    reason = _txn(store, txn).abort_reason or ""
    assert f"no heartbeat for more than {TIMEOUT_S:g}s" in reason


@pytest.mark.parametrize(
    "options",
    [{}, {"heartbeat_interval_s": 900.0}],
    ids=["default", "long-heartbeat-option"],
)
def test_healthy_writer_idle_in_an_open_txn_is_never_aborted(
    store_url: str, store: TxnStore, options: dict[str, Any]
) -> None:
    make_table(store)
    _set_timeout(store_url)
    writer, txn = _start_writer(store_url, options)
    try:
        opened_ms = _txn(store, txn).started_ms
        beats = {_txn(store, txn).last_heartbeat_ms}
        passes = 0
        # Housekeeping passes for more than twice the timeout after the txn opened, each
        # a real `acidstream housekeeping`; the writer's own housekeeper runs too.
        while time.time() * 1000 < opened_ms + 2.5 * TIMEOUT_S * 1000 or len(beats) < 4:
            out = _cli("housekeeping", "--metastore", store_url)
            assert out.returncode == 0, out.stderr
            passes += 1
            info = _txn(store, txn)
            assert info.state is TxnState.OPEN, info
            beats.add(info.last_heartbeat_ms)
            assert time.time() * 1000 < opened_ms + 60_000, "the writer stopped heartbeating"
        assert passes >= 2
        assert writer.stdin is not None and writer.stdout is not None
        writer.stdin.write("commit\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "committed"
        assert writer.wait(timeout=30) == 0
    finally:
        writer.kill()
        writer.wait()
    assert _txn(store, txn).state is TxnState.COMMITTED
