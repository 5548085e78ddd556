"""The ``store`` fixture: every txn-store test runs against SQLite and PostgreSQL.

The PostgreSQL param carries the ``postgres`` marker and gets a fresh schema per
test (``?schema=`` in the store URL, dropped afterwards). If the server is not
reachable the test is skipped with the reason. Point the tests at another
server with ``ACIDSTREAM_TEST_PG_URL``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from acidstream.txn.store import TxnStore, open_store

Cli = Callable[..., tuple[int, str, str]]
"""The ``cli`` fixture's runner: ``cli(*argv) -> (exit code, stdout, stderr)``."""

PG_URL = os.environ.get("ACIDSTREAM_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


class FakeClock:
    """An injectable clock (seconds since the epoch) that only moves when told to."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _pg_unreachable() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_URL, connect_timeout=3):
            return None
    except Exception as e:  # any failure to connect means: skip, and say why
        return f"PostgreSQL not reachable at {PG_URL}: {e}"


@pytest.fixture(
    params=[pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty, isolated metastore on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/metastore.db"
        return
    reason = _pg_unreachable()
    if reason is not None:
        pytest.skip(reason)
    import psycopg

    schema = f"acidtest_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}schema={schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    return str(tmp_path / "warehouse")


@pytest.fixture
def store_factory(
    store_url: str, warehouse: str, clock: FakeClock
) -> Iterator[Callable[[], TxnStore]]:
    """Opens more clients of the same metastore (closed at teardown)."""
    opened: list[TxnStore] = []

    def make() -> TxnStore:
        s = open_store(store_url, warehouse=warehouse, clock=clock)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


@pytest.fixture
def store(store_factory: Callable[[], TxnStore]) -> TxnStore:
    """An empty metastore with a fake clock, on SQLite and on PostgreSQL."""
    return store_factory()


@pytest.fixture
def cli(store: TxnStore, store_url: str, warehouse: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run ``acidstream ARGS --metastore M --warehouse W`` in this process against the
    ``store`` fixture's metastore: ``(exit code, stdout, stderr)``."""
    from acidstream.cli.main import main

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*argv, "--metastore", store_url, "--warehouse", warehouse])
        out, err = capsys.readouterr()
        return code, out, err

    return run
