"""Fixtures for the HTTP ingest server tests: a real server process on 127.0.0.1 (port 0),
tables in a real metastore (SQLite and PostgreSQL), reads through a store snapshot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
import yaml

from acidstream.acid.schema import TableSchema
from acidstream.ingest.http.server import LISTENING
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnState, TxnStore, open_store
from tests.ingest.conftest import snapshot_read

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0


class ServerProcess:
    """``python -m acidstream.cli.serve_cmds CONFIG --port 0`` in a child process."""

    def __init__(self, config_path: Path, log_path: Path, env: Mapping[str, str] | None) -> None:
        self.config_path = config_path
        self.log_path = log_path
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> str:
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "acidstream.cli.serve_cmds",
                str(self.config_path),
                "--port",
                "0",
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=ROOT,
            env=self.env,
        )
        log.close()
        found = threading.Event()
        line_holder: list[str] = []

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                if line.startswith(LISTENING) and not found.is_set():
                    line_holder.append(line.strip())
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(START_TIMEOUT_S):
            self.kill()
            raise AssertionError(f"server did not start:\n{self.log_path.read_text()[-3000:]}")
        self.url = line_holder[0][len(LISTENING) :]
        return self.url

    def kill(self) -> None:
        """SIGKILL: no drain, no cleanup."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def terminate(self, timeout_s: float = 60.0) -> int:
        """SIGTERM and wait for the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def wait_dead(self, timeout_s: float = 30.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout_s)


def write_config(path: Path, config: Mapping[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(dict(config)))
    return path


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start servers: ``server_factory(config_dict, env={...})``; all killed at teardown."""
    started: list[ServerProcess] = []
    counter = iter(range(1000))

    def make(config: Mapping[str, Any], *, env: Mapping[str, str] | None = None) -> ServerProcess:
        n = next(counter)
        cfg = write_config(tmp_path / f"http_{n}.yaml", config)
        s = ServerProcess(cfg, tmp_path / f"http_{n}.log", env)
        started.append(s)
        s.start()
        return s

    yield make
    for s in started:
        s.kill()


def base_config(
    store_url: str, warehouse: str, tables: Mapping[str, Mapping[str, Any]], **extra: Any
) -> dict[str, Any]:
    """A server config over ``store_url``; ``extra`` keys override (``commit``, ``limits``...).

    ``txn_timeout_s`` is the metastore's setting: it is stored there (as ``acidstream
    config set`` does) instead of going into the server's config."""
    cfg: dict[str, Any] = {
        "listen": {"host": "127.0.0.1", "port": 0},
        "metastore": store_url,
        "warehouse": warehouse,
        "tables": {k: dict(v) for k, v in tables.items()},
        "commit": {"max_delay_ms": 20},
        "txn_timeout_s": 30,
        "housekeeping_interval_s": 1,
        "log_level": "warning",
    }
    cfg.update(extra)
    with open_store(store_url) as s:
        s.set_setting("txn_timeout_s", cfg.pop("txn_timeout_s"))
    return cfg


def create_table(
    store: TxnStore,
    name: str,
    columns: str = "id bigint, msg string",
    *,
    partitioned_by: Sequence[tuple[str, str]] = (),
) -> TableDef:
    cols = tuple((n, str(t)) for n, t in TableSchema.parse(columns).columns)
    return store.create_table(
        TableDef(
            db="default",
            name=name,
            columns=cols,
            partition_keys=tuple(partitioned_by),
            parameters={"transactional": "true", "bucketing_version": "2"},
        )
    )


def read_ids(store_url: str, warehouse: str, table: str) -> list[int]:
    """The ``id`` column of a table as a new reader sees it (the store's snapshot)."""
    with open_store(store_url, warehouse=warehouse) as s:
        t = s.get_table("default", table)
        assert t.location is not None
        if not os.path.exists(t.location):
            return []  # nothing was ever written (the directory comes with the first txn)
        data: pa.Table = snapshot_read(s, t)
    return sorted(data.column("id").to_pylist())


def open_txns(store_url: str, warehouse: str) -> list[int]:
    with open_store(store_url, warehouse=warehouse) as s:
        return [t.txn_id for t in s.show_txns() if t.state is TxnState.OPEN]


def jsonl(ids: Sequence[int], *, msg: str = "m") -> bytes:
    return b"".join(b'{"id":%d,"msg":"%s"}\n' % (i, msg.encode()) for i in ids)


def problem(r: httpx.Response, status: int) -> dict[str, Any]:
    """The problem-details body of a refused request (RFC 9457), checked."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    return body
