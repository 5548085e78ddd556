"""The Python API on an ``s3://`` warehouse, end to end against moto's S3 server: a
``StreamingConnection`` writes (dead letters on S3 too), the Table handle reads, time-travels,
upserts and deletes, ``read_table`` reads by name and by path, all with
``storage_options=`` and with the metastore on SQLite and PostgreSQL. This process has no
AWS variable: only the options can point the clients at the server."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

import acidstream
from acidstream import StreamingConnection, StreamingOptions, StrictJsonWriter
from acidstream.acid.storage import Storage
from acidstream.ingest.dead_letter import read_dead_letters
from acidstream.txn.catalog import TableDef
from acidstream.txn.config import StoreConfig
from acidstream.txn.store import open_store
from tests.objectstore.s3_helpers import aws_pointers
from tests.plugins.s3_fixture import SECRET_KEY, S3Warehouse

pytestmark = pytest.mark.s3


def _create(store_url: str, wh: S3Warehouse) -> str:
    """``default.events`` (id bigint, msg string) partitioned by ds, keyed by id."""
    with open_store(store_url, warehouse=wh.url, storage_options=wh.storage_options) as s:
        t = s.create_table(
            TableDef(
                db="default",
                name="events",
                columns=(("id", "bigint"), ("msg", "string")),
                partition_keys=(("ds", "string"),),
                parameters={"transactional": "true", "acidstream.key": "id"},
            )
        )
    assert t.location == f"{wh.url}/events"
    return t.location


def _ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


def test_connection_writes_and_the_table_handle_reads_upserts_and_deletes_on_s3(
    s3_warehouse: S3Warehouse, store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wh = s3_warehouse
    assert not aws_pointers()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # a path mistaken for a local one would show up here
    location = _create(store_url, wh)
    dead = f"s3://{wh.bucket}/dead_letters"
    with StreamingConnection(
        "events",
        record_writer=StrictJsonWriter(),
        metastore=store_url,
        warehouse=wh.url,
        storage_options=wh.storage_options,
        options=StreamingOptions(dead_letter_path=dead),
    ) as conn:
        for first in (1, 4):
            conn.begin_transaction()
            conn.write_block(
                [
                    b'{"id": %d, "msg": "a", "ds": "x"}' % first,
                    b'{"id": %d, "msg": "b", "ds": "y"}' % (first + 1),
                    b'{"id": %d, "msg": "c", "ds": "y"}' % (first + 2),
                    b"not json",
                ]
            )
            conn.commit_transaction()
    assert [d.record for d in read_dead_letters(dead, storage_options=wh.storage_options)] == [
        b"not json",
        b"not json",
    ]
    # The files are objects in the bucket, and nothing was written locally.
    storage, root = Storage.for_path(location, storage_options=wh.storage_options)
    assert storage.is_object_store
    assert sorted(e.name for e in storage.list_dir(root)) == ["ds=x", "ds=y"]
    assert os.listdir(cwd) == []

    t = acidstream.table(
        "events", metastore=store_url, warehouse=wh.url, storage_options=wh.storage_options
    )
    assert SECRET_KEY not in repr(t) and SECRET_KEY not in repr(t._config)
    assert _ids(t.read()) == [1, 2, 3, 4, 5, 6]
    assert _ids(t.read(as_of_write_id=1)) == [1, 2, 3]
    assert _ids(t.read(filter=[("ds", "=", "x")])) == [1, 4]

    res = t.upsert(pa.table({"id": [2, 7], "msg": ["B", "new"], "ds": ["y", "x"]}), key=["id"])
    assert (res.updated, res.inserted) == (1, 1)
    t.delete("id = 1")
    rows = {r["id"]: r["msg"] for r in t.read().to_pylist()}
    assert rows == {2: "B", 3: "c", 4: "a", 5: "b", 6: "c", 7: "new"}
    by_path = acidstream.read_table(
        location, metastore=store_url, warehouse=wh.url, storage_options=wh.storage_options
    )
    assert _ids(by_path) == [2, 3, 4, 5, 6, 7]
    assert os.listdir(cwd) == []


def test_store_config_prints_no_secret_and_travels_pickled(s3_warehouse: S3Warehouse) -> None:
    """The resolved config (what Spark ships to executors) keeps the options whole and
    prints them masked."""
    import pickle

    cfg = StoreConfig.resolve(
        metastore="sqlite:////tmp/m.db",
        warehouse=s3_warehouse.url,
        storage_options=s3_warehouse.storage_options,
    )
    back = pickle.loads(pickle.dumps(cfg))
    assert back == cfg and dict(back.storage_options) == s3_warehouse.storage_options
    for text in (repr(cfg), str(cfg), repr(back)):
        assert SECRET_KEY not in text and "acidstream-test-key" not in text
        assert s3_warehouse.server.endpoint in text  # not a secret: shown
    storage, root = back.storage()
    assert storage.exists(root) is False  # reached the server with them: an empty bucket


def test_without_s3fs_the_cli_says_so_in_one_line(
    s3_warehouse: S3Warehouse, tmp_path: Path
) -> None:
    """A machine without s3fs (here: a child process where importing it fails) gets a
    one-line error naming the missing package and exit code 1 from ``ingest``, not an
    ImportError's traceback or an internal error."""
    import subprocess
    import sys

    from tests.objectstore.s3_helpers import clean_env

    _create(f"sqlite:///{tmp_path}/m.db", s3_warehouse)
    (tmp_path / "in.jsonl").write_text('{"id": 1, "msg": "a", "ds": "x"}\n')
    code = (
        "import sys; sys.modules['s3fs'] = None\n"  # `import s3fs` raises ImportError
        "from acidstream.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, "ingest", "default.events", "--format", "json",
         str(tmp_path / "in.jsonl"), "--warehouse", s3_warehouse.url,
         "--metastore", f"sqlite:///{tmp_path}/m.db", *s3_warehouse.cli_options()],
        env=clean_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    (line,) = p.stderr.splitlines()
    assert line.startswith("acidstream: error: ") and "s3fs" in line, line
    assert SECRET_KEY not in p.stderr
