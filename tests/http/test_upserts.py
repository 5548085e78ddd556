"""``POST /v1/tables/{db}.{table}?mode=upsert|delete`` on a real server process, both
store backends: changes applied by key, NULL keys rejected per line, idempotency keys,
metrics, the refusals (unkeyed table, unknown mode), and group commit never mixing a
change into an append txn."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

import acidstream
from acidstream.acid.schema import TableSchema
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnStore
from tests.http.conftest import ServerProcess, base_config, create_table, problem

NDJSON = {"Content-Type": "application/x-ndjson"}


def keyed(store: TxnStore, name: str, *, partitioned: bool = False) -> None:
    cols = TableSchema.parse("id bigint, msg string").columns
    store.create_table(
        TableDef(
            db="default",
            name=name,
            columns=tuple((n, str(t)) for n, t in cols),
            partition_keys=(("ds", "string"),) if partitioned else (),
            parameters={"transactional": "true", "acidstream.key": "id"},
        )
    )


def rows(store_url: str, warehouse: str, name: str) -> list[tuple[Any, ...]]:
    t = acidstream.table(f"default.{name}", metastore=store_url, warehouse=warehouse).read()
    cols = [c for c in ("id", "msg", "ds") if c in t.column_names]
    return sorted(zip(*(t.column(c).to_pylist() for c in cols), strict=True))


def lines(*records: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_upserts_and_deletes_over_http(
    store: TxnStore,
    store_url: str,
    warehouse: str,
    server_factory: Callable[..., ServerProcess],
) -> None:
    keyed(store, "k")
    keyed(store, "p", partitioned=True)
    create_table(store, "plain")
    tables = {f"default.{n}": {"format": "json"} for n in ("k", "p", "plain")}
    server = server_factory(base_config(store_url, warehouse, tables))
    with httpx.Client(base_url=server.url, timeout=60) as c:

        def post(table: str, body: bytes, mode: str | None, **headers: str) -> httpx.Response:
            q = "" if mode is None else f"?mode={mode}"
            return c.post(
                f"/v1/tables/default.{table}{q}", content=body, headers={**NDJSON, **headers}
            )

        r = post("k", lines(*({"id": i, "msg": "v1"} for i in range(1, 6))), "upsert")
        assert r.status_code == 200, r.text
        assert r.json()["mode"] == "upsert" and r.json()["accepted"] == 5
        # An update of two keys, one line without a key (rejected, line 2), one new key.
        body = lines(
            {"id": 2, "msg": "v2"},
            {"msg": "no key"},
            {"id": 3, "msg": "v2"},
            {"id": 7, "msg": "v2"},
        )
        r = post("k", body, "upsert")
        assert r.status_code == 200, r.text
        assert r.json()["accepted"] == 3
        assert r.json()["rejected"] == 1
        assert [x["line"] for x in r.json()["rejections"]] == [2]
        assert "NULL value in the key column 'id'" in r.json()["rejections"][0]["reason"]
        # Deletes: a present key, an absent one; only the key is read from the lines.
        r = post("k", lines({"id": 3}, {"id": 99, "msg": "ignored"}), "delete")
        assert r.status_code == 200, r.text
        assert r.json()["mode"] == "delete" and r.json()["accepted"] == 2
        want = [(1, "v1"), (2, "v2"), (4, "v1"), (5, "v1"), (7, "v2")]
        assert rows(store_url, warehouse, "k") == want

        # Idempotency: a retried upsert is answered from its first response, not re-applied.
        r1 = post("k", lines({"id": 1, "msg": "first"}), "upsert", **{"Idempotency-Key": "a1"})
        assert r1.status_code == 200, r1.text
        assert post("k", lines({"id": 1, "msg": "later"}), "upsert").status_code == 200
        r2 = post("k", lines({"id": 1, "msg": "first"}), "upsert", **{"Idempotency-Key": "a1"})
        assert r2.status_code == 200 and r2.headers.get("Idempotent-Replayed") == "true"
        assert r2.json() == r1.json()
        assert (1, "later") in rows(store_url, warehouse, "k")
        # The same key and body as a delete is another request: refused, not replayed.
        problem(
            post("k", lines({"id": 1, "msg": "first"}), "delete", **{"Idempotency-Key": "a1"}), 422
        )

        # A partitioned table: an upsert moves a row to its new partition.
        assert (
            post(
                "p",
                lines({"id": 1, "msg": "a", "ds": "x"}, {"id": 2, "msg": "b", "ds": "x"}),
                "upsert",
            ).status_code
            == 200
        )
        assert post("p", lines({"id": 1, "msg": "moved", "ds": "y"}), "upsert").status_code == 200
        assert post("p", lines({"id": 2}), "delete").status_code == 200
        assert rows(store_url, warehouse, "p") == [(1, "moved", "y")]

        # Refusals: no key, an unknown mode; nothing written.
        body409 = problem(post("plain", lines({"id": 1, "msg": "m"}), "upsert"), 409)
        assert "has no key" in body409["detail"] and body409["table"] == "default.plain"
        assert (
            "use one of append, upsert, delete"
            in problem(post("k", lines({"id": 1}), "merge"), 400)["detail"]
        )
        assert post("plain", lines({"id": 1, "msg": "m"}), "append").status_code == 200

        text = c.get("/metrics").text
        assert (
            metric(text, "acidstream_http_changes_total", table="default.k", mode="upsert")
            == 5 + 3 + 2
        )
        assert metric(text, "acidstream_http_changes_total", table="default.k", mode="delete") == 2
        done = {
            k: metric(text, "acidstream_http_change_results_total", table="default.k", result=k)
            for k in ("inserted", "updated", "deleted", "absent_deletes")
        }
        assert done == {"inserted": 6, "updated": 4, "deleted": 1, "absent_deletes": 1}


def test_group_commit_never_mixes_changes_into_an_append_txn(
    store: TxnStore,
    store_url: str,
    warehouse: str,
    server_factory: Callable[..., ServerProcess],
) -> None:
    """Concurrent appends and upserts of one keyed table within one commit window: each
    txn holds only one kind (the txn ids of the two kinds' responses are disjoint), every
    request lands, and the upserted keys are there once each."""
    keyed(store, "k")
    cfg = base_config(
        store_url, warehouse, {"default.k": {"format": "json"}}, commit={"max_delay_ms": 200}
    )
    server = server_factory(cfg)

    def send(i: int) -> tuple[str, list[int]]:
        with httpx.Client(base_url=server.url, timeout=120) as c:
            if i % 2:
                body, q = lines({"id": 1000 + i, "msg": "append"}), ""
            else:
                body, q = lines({"id": (i // 2) % 6, "msg": f"u{i}"}), "?mode=upsert"
            r = c.post(f"/v1/tables/default.k{q}", content=body, headers=NDJSON)
            assert r.status_code == 200, r.text
            return ("append" if i % 2 else "upsert"), r.json()["txn_ids"]

    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(send, range(48)))
    txns = {
        kind: {t for k, ts in results if k == kind for t in ts} for kind in ("append", "upsert")
    }
    # Groups formed (fewer txns than requests of each kind), yet never a mixed one.
    assert 0 < len(txns["append"]) < 24 and 0 < len(txns["upsert"]) < 24
    assert not txns["append"] & txns["upsert"]
    got = rows(store_url, warehouse, "k")
    appended = sorted(i for i, m in got if m == "append")
    assert appended == [1000 + i for i in range(1, 48, 2)]
    upserted = [i for i, m in got if m != "append"]
    assert sorted(upserted) == [0, 1, 2, 3, 4, 5]  # each key once
    assert all(re.fullmatch(r"u\d+", m) for i, m in got if m != "append")
