"""The chaos suite's fast tier in durability ``flush`` (issue 33): a few seeded iterations
of the connection writer's process kills with ``StreamingOptions(durability="flush")``
(``tests/chaos/run.py --durability flush`` runs the full tier; ``make chaos`` both modes).

A killed process leaves its written bytes to the OS, so ``flush`` must keep every
invariant ``fsync`` keeps under process kills; power loss is ``fsync``'s alone
(``docs/durability.md``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acidstream.txn.store import open_store
from tests.chaos.harness import (
    DURABILITY_ENV,
    FLUSH_SCENARIOS,
    backend_url,
    committed_next,
    connection_spec,
    make_table,
    pg_unreachable,
    run_child,
    run_iteration,
)

pytestmark = pytest.mark.chaos

FLUSH_TIER: list[tuple[str, int, str]] = [
    ("connection-batch1-kill", 101, "sqlite"),
    ("connection-batchN-kill", 201, "sqlite"),
    ("connection-batchN-kill", 204, "postgres"),
]


def test_flush_run_reaches_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The setting is not vacuous: a writer child of a flush run opens its connection
    with durability ``flush`` (and writes every event)."""
    monkeypatch.setenv(DURABILITY_ENV, "flush")
    with backend_url("sqlite", str(tmp_path)) as url:
        with open_store(url, warehouse=str(tmp_path / "wh")) as store:
            t = make_table(store)
            spec = connection_spec(url, t, events=60, rows_per_txn=20, txns_per_batch=2)
            code, out, err = run_child(spec)
            assert code == 0, err
            assert "durability flush" in out.splitlines()
            assert committed_next(store, t) == 60


@pytest.mark.parametrize("case", FLUSH_TIER, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_flush_iteration_keeps_every_invariant(
    case: tuple[str, int, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario, seed, backend = case
    assert scenario in FLUSH_SCENARIOS
    if backend == "postgres" and (reason := pg_unreachable()) is not None:
        pytest.skip(reason)
    monkeypatch.setenv(DURABILITY_ENV, "flush")
    with backend_url(backend, str(tmp_path)) as url:
        outcome = run_iteration(scenario, seed, url, str(tmp_path / "warehouse"))
    replay = (
        f".venv/bin/python -m tests.chaos.run --durability flush --replay "
        f"{scenario}:{seed}:{backend}"
    )
    assert outcome.ok, f"{outcome.detail}\nreplay: {replay}"
