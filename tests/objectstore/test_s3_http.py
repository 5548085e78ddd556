"""The HTTP ingest server process writing to an ``s3://`` warehouse (moto's S3 server): its
storage options come from its YAML config only (the process has no AWS variable), every
acknowledged request is in the table, readiness probes the bucket, and neither its output
nor its log shows the secret."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import acidstream
from acidstream.txn.store import open_store
from tests.http.conftest import ServerProcess, base_config, create_table, jsonl, write_config
from tests.objectstore.s3_helpers import aws_pointers, clean_env
from tests.plugins.s3_fixture import SECRET_KEY, S3Warehouse

pytestmark = pytest.mark.s3

NDJSON = {"Content-Type": "application/x-ndjson"}


def test_the_http_server_writes_to_s3_with_the_options_of_its_config(
    s3_warehouse: S3Warehouse, store_url: str, tmp_path: Path
) -> None:
    wh = s3_warehouse
    assert not aws_pointers()
    with open_store(store_url, warehouse=wh.url, storage_options=wh.storage_options) as s:
        create_table(s, "events")
    cfg = base_config(store_url, wh.url, {"default.events": {}}, storage_options=wh.storage_options)
    server = ServerProcess(write_config(tmp_path / "http.yaml", cfg), tmp_path / "http.log", None)
    server.env = clean_env()
    url = server.start()
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            assert http.get("/readyz").status_code == 200  # it wrote and removed a probe object
            for first in range(0, 300, 100):
                r = http.post(
                    "/v1/tables/default.events", content=jsonl(range(first, first + 100)),
                    headers=NDJSON,
                )  # fmt: skip
                assert r.status_code == 200, r.text
            metrics = http.get("/metrics").text
        assert server.terminate() == 0
    finally:
        server.kill()
    t = acidstream.table(
        "events", metastore=store_url, warehouse=wh.url, storage_options=wh.storage_options
    )
    assert sorted(t.read(columns=["id"]).column("id").to_pylist()) == list(range(300))
    log = server.log_path.read_text()
    for text in (log, metrics):
        assert SECRET_KEY not in text


def test_a_server_without_storage_options_cannot_reach_the_bucket_and_says_why(
    s3_warehouse: S3Warehouse, tmp_path: Path
) -> None:
    """The same server config without ``storage_options`` (and no AWS variable): the
    options are what made the first test work. Its readiness says the warehouse is not
    reachable; no request is acknowledged."""
    store_url = f"sqlite:///{tmp_path}/m.db"
    wh = s3_warehouse
    with open_store(store_url, warehouse=wh.url, storage_options=wh.storage_options) as s:
        create_table(s, "events")
    cfg = base_config(
        store_url,
        wh.url,
        {"default.events": {}},
        # Only the endpoint: without credentials no request to the server can be signed.
        storage_options={"endpoint_url": wh.server.endpoint},
    )
    server = ServerProcess(write_config(tmp_path / "http.yaml", cfg), tmp_path / "http.log", None)
    server.env = clean_env({"AWS_EC2_METADATA_DISABLED": "true"})
    url = server.start()
    try:
        with httpx.Client(base_url=url, timeout=120) as http:
            ready = http.get("/readyz")
            assert ready.status_code == 503 and "warehouse" in ready.text, ready.text
            r = http.post("/v1/tables/default.events", content=jsonl([1]), headers=NDJSON)
            assert r.status_code >= 500, r.text
    finally:
        server.kill()
