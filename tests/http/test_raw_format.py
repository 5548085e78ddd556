"""``format: raw`` on the HTTP server (issue 29: one record-writer factory, so the formats the
sink took are the server's too), against a real server process on both metastore backends."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from acidstream.txn.store import open_store
from tests.http.conftest import ServerProcess, base_config, create_table
from tests.ingest.conftest import snapshot_read


def test_raw_lines_land_whole_in_the_one_string_column(
    store_url: str, warehouse: str, server_factory: Callable[..., ServerProcess]
) -> None:
    with open_store(store_url, warehouse=warehouse) as s:
        create_table(s, "lines", "line string")
    cfg = base_config(store_url, warehouse, {"default.lines": {"format": "raw"}})
    srv = server_factory(cfg)
    lines = ["plain text", '{"not": "parsed"}', "a,b,c", "ünïcode"]
    body = "".join(f"{x}\n" for x in lines).encode()
    r = httpx.post(
        f"{srv.url}/v1/tables/default.lines",
        content=body,
        headers={"Content-Type": "text/plain"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    assert r.json()["accepted"] == len(lines) and r.json()["rejected"] == 0
    with open_store(store_url, warehouse=warehouse) as s:
        got = snapshot_read(s, s.get_table("default", "lines")).column("line").to_pylist()
    assert sorted(got) == sorted(lines)
