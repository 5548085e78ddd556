"""Each request the HTTP ingest server must refuse gets its status and problem details; good
requests (lines, gzip, static partitions, Flume's format, tokens) land in the table."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from acidstream.txn.store import open_store
from tests.http.conftest import (
    ServerProcess,
    base_config,
    create_table,
    jsonl,
    problem,
    read_ids,
    write_config,
)

NDJSON = {"Content-Type": "application/x-ndjson"}
TOKEN_A, TOKEN_B = "token-for-secure", "token-for-other"


class Env:
    def __init__(self, url: str, store_url: str, warehouse: str) -> None:
        self.url, self.store_url, self.warehouse = url, store_url, warehouse
        self.client = httpx.Client(base_url=url, timeout=30)

    def post(self, table: str, body: bytes, **kw: Any) -> httpx.Response:
        headers = {**NDJSON, **kw.pop("headers", {})}
        return self.client.post(f"/v1/tables/{table}", content=body, headers=headers, **kw)

    def ids(self, table: str) -> list[int]:
        return read_ids(self.store_url, self.warehouse, table)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("http_requests")
    warehouse = str(tmp / "warehouse")
    store_url = f"sqlite:///{tmp}/metastore.db"
    with open_store(store_url, warehouse=warehouse) as s:
        for name in ("plain", "strict", "secure", "other", "flume_a", "flume_b", "gz"):
            create_table(s, name)
        create_table(s, "parted", partitioned_by=[("ds", "string")])
        create_table(s, "tsv", "id bigint, msg string")
    tables: dict[str, dict[str, Any]] = {
        "default.plain": {"format": "json", "dead_letter_path": str(tmp / "dead")},
        "default.strict": {"format": "json", "all_or_nothing": True},
        "default.secure": {"format": "json", "tokens": [TOKEN_A]},
        "default.other": {"format": "json", "tokens": [TOKEN_B]},
        "default.flume_a": {"format": "json"},
        "default.flume_b": {"format": "json"},
        "default.gz": {"format": "json"},
        "default.parted": {"format": "json"},
        "default.tsv": {"format": "delimited", "delimiter": "\t"},
        "default.missing": {"format": "json"},  # configured, not in the metastore
    }
    cfg = base_config(
        store_url,
        warehouse,
        tables,
        limits={"max_body_bytes": 4096, "max_decoded_bytes": 8192, "max_reported_rejections": 2},
        flume={"table_header": "table", "default_table": "default.flume_a"},
    )
    proc = ServerProcess(write_config(tmp / "cfg.yaml", cfg), tmp / "server.log", None)
    url = proc.start()
    e = Env(url, store_url, warehouse)
    try:
        yield e
    finally:
        e.client.close()
        proc.kill()


def test_good_and_bad_lines_commit_the_good_ones_and_report_the_bad(env: Env) -> None:
    body = b'{"id":1,"msg":"a"}\n{"id":"x","msg":"b"}\n\n{"id":2,"msg":"c"}\r\nnot json\n'
    r = env.post("default.plain", body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["accepted"] == 2 and out["rejected"] == 2
    # Line numbers as the client counts them (the empty line 3 counts, is not a record).
    assert [x["line"] for x in out["rejections"]] == [2, 5]
    assert "id" in out["rejections"][0]["reason"]
    assert out["write_ids"] and out["txn_ids"]
    assert env.ids("plain") == [1, 2]
    from acidstream.ingest.dead_letter import read_dead_letters

    dead = list(read_dead_letters(str(Path(env.warehouse).parent / "dead")))
    assert sorted(d.record for d in dead) == sorted([b'{"id":"x","msg":"b"}', b"not json"])
    assert all(d.position.startswith("http:default.plain:") for d in dead)


def test_rejections_listed_up_to_the_limit(env: Env) -> None:
    r = env.post("default.gz", b"a\nb\nc\n" + jsonl([100]))
    out = r.json()
    assert r.status_code == 200 and out["rejected"] == 3
    assert len(out["rejections"]) == 2 and out["rejections_truncated"] is True


def test_nothing_valid_is_400_with_the_reasons(env: Env) -> None:
    before = env.ids("plain")
    body = problem(env.post("default.plain", b'nope\n{"id": []}\n'), 400)
    assert body["rejected"] == 2 and [x["line"] for x in body["rejections"]] == [1, 2]
    assert env.ids("plain") == before


def test_empty_body_is_400(env: Env) -> None:
    problem(env.post("default.plain", b"\n\n"), 400)


def test_all_or_nothing_table_refuses_the_whole_request(env: Env) -> None:
    body = problem(env.post("default.strict", jsonl([1, 2]) + b"bad\n"), 400)
    assert body["rejections"][0]["line"] == 3
    assert env.ids("strict") == []
    assert env.post("default.strict", jsonl([1, 2])).status_code == 200
    assert env.ids("strict") == [1, 2]


def test_unknown_table_is_404(env: Env) -> None:
    problem(env.post("default.nosuch", jsonl([1])), 404)
    problem(env.post("default.missing", jsonl([1])), 404)  # configured, not in the metastore


def test_missing_content_length_is_411(env: Env) -> None:
    def chunks() -> Iterator[bytes]:
        yield jsonl([1])

    r = env.client.post("/v1/tables/default.plain", content=chunks(), headers=NDJSON)
    problem(r, 411)


def test_body_over_the_limit_is_413(env: Env) -> None:
    problem(env.post("default.plain", jsonl(range(1000))), 413)


def test_gzip_body_is_accepted_and_a_gzip_bomb_is_413(env: Env) -> None:
    r = env.post("default.gz", gzip.compress(jsonl([7, 8])), headers={"Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    assert env.ids("gz") == [7, 8, 100]
    bomb = gzip.compress(b"\n" * 100_000)  # small on the wire, 100 kB inflated
    assert len(bomb) < 4096
    problem(env.post("default.gz", bomb, headers={"Content-Encoding": "gzip"}), 413)
    problem(env.post("default.gz", b"not gzip", headers={"Content-Encoding": "gzip"}), 400)


def test_wrong_content_type_or_encoding_is_415(env: Env) -> None:
    problem(env.post("default.plain", jsonl([1]), headers={"Content-Type": "text/csv"}), 415)
    problem(env.post("default.plain", jsonl([1]), headers={"Content-Type": ""}), 415)
    problem(env.post("default.plain", jsonl([1]), headers={"Content-Encoding": "br"}), 415)
    ct = {"Content-Type": "application/x-ndjson; charset=latin-1"}
    problem(env.post("default.plain", jsonl([1]), headers=ct), 415)


def test_delimited_table_takes_text(env: Env) -> None:
    r = env.post("default.tsv", b"5\tfive\n6\tsix\n", headers={"Content-Type": "text/plain"})
    assert r.status_code == 200 and r.json()["accepted"] == 2
    assert env.ids("tsv") == [5, 6]
    problem(env.post("default.tsv", b"5\tfive\n"), 415)  # ndjson is not a delimited type


def test_tokens(env: Env) -> None:
    body = problem(env.post("default.secure", jsonl([1])), 401)
    assert "bearer" in body["detail"]
    r = env.post("default.secure", jsonl([1]), headers={"Authorization": "Basic abc"})
    assert problem(r, 401) and r.headers["www-authenticate"].startswith("Bearer")
    wrong = {"Authorization": "Bearer nope"}
    problem(env.post("default.secure", jsonl([1]), headers=wrong), 403)
    other = {"Authorization": f"Bearer {TOKEN_B}"}  # good for default.other only
    problem(env.post("default.secure", jsonl([1]), headers=other), 403)
    assert env.ids("secure") == []
    ok = {"Authorization": f"Bearer {TOKEN_A}"}
    assert env.post("default.secure", jsonl([1]), headers=ok).status_code == 200
    assert env.post("default.other", jsonl([2]), headers=other).status_code == 200
    assert env.ids("secure") == [1] and env.ids("other") == [2]


def test_static_partition_parameter(env: Env) -> None:
    r = env.post("default.parted", jsonl([1, 2]), params={"partition": "ds=2026-11-23"})
    assert r.status_code == 200 and r.json()["partition"] == "ds=2026-11-23"
    dyn = b'{"id":3,"msg":"x","ds":"2026-11-24"}\n'
    assert env.post("default.parted", dyn).status_code == 200
    with open_store(env.store_url, warehouse=env.warehouse) as s:
        parts = sorted(p.name for p in s.list_partitions("default", "parted"))
    assert parts == ["ds=2026-11-23", "ds=2026-11-24"]
    assert env.ids("parted") == [1, 2, 3]
    problem(env.post("default.parted", jsonl([1]), params={"partition": "dt=1"}), 400)
    problem(env.post("default.plain", jsonl([1]), params={"partition": "ds=1"}), 400)


def test_idempotency_key_replays_and_a_different_body_is_422(env: Env) -> None:
    key = {"Idempotency-Key": "req-422"}
    first = env.post("default.flume_b", jsonl([41, 42]), headers=key)
    assert first.status_code == 200 and "idempotent-replayed" not in first.headers
    again = env.post("default.flume_b", jsonl([41, 42]), headers=key)
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    problem(env.post("default.flume_b", jsonl([43]), headers=key), 422)
    assert env.ids("flume_b").count(41) == 1 and 43 not in env.ids("flume_b")
    problem(env.post("default.flume_b", jsonl([1]), headers={"Idempotency-Key": "x" * 300}), 400)


def test_flume_json_handler_request(env: Env) -> None:
    events = [
        {"headers": {"table": "default.flume_a"}, "body": '{"id":1,"msg":"a"}'},
        {"headers": {"table": "default.flume_b", "host": "h1"}, "body": '{"id":2,"msg":"b"}'},
        {"headers": {}, "body": '{"id":3,"msg":"c"}'},  # the default table
        {"headers": {"table": "default.flume_a"}, "body": "not json"},
    ]
    r = env.client.post(
        "/", content=json.dumps(events), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text
    out = r.json()["tables"]
    assert out["default.flume_a"]["accepted"] == 2
    assert out["default.flume_a"]["rejections"] == [
        {"event": 4, "reason": out["default.flume_a"]["rejections"][0]["reason"]}
    ]
    assert out["default.flume_b"]["accepted"] == 1
    assert env.ids("flume_a") == [1, 3] and 2 in env.ids("flume_b")
    bad = [{"headers": {"table": "default.nosuch"}, "body": "{}"}]
    problem(env.client.post("/", json=bad), 404)
    problem(
        env.client.post("/", content=b"{not json", headers={"Content-Type": "application/json"}),
        400,
    )
    secure = [{"headers": {"table": "default.secure"}, "body": '{"id":9,"msg":"s"}'}]
    problem(env.client.post("/", json=secure), 401)


def test_health_readiness_and_metrics(env: Env) -> None:
    assert env.client.get("/healthz").text == "ok\n"
    r = env.client.get("/readyz")
    assert r.status_code == 200 and r.json() == {"ready": True}
    env.post("default.plain", jsonl([500]))
    text = env.client.get("/metrics").text
    for name in (
        "acidstream_http_requests_total",
        "acidstream_http_records_total",
        "acidstream_http_bytes_total",
        "acidstream_http_commit_seconds_bucket",
        "acidstream_http_ack_seconds_bucket",
        "acidstream_http_group_commit_requests_bucket",
        "acidstream_http_inflight_bytes",
        "acidstream_http_open_txns",
        "acidstream_http_commit_queue_requests",
    ):
        assert name in text, name
    line = next(
        x
        for x in text.splitlines()
        if x.startswith('acidstream_http_records_total{outcome="accepted",table="default.plain"}')
    )
    assert float(line.split()[-1]) == len(env.ids("plain"))
