"""Helpers of the end-to-end tests on an ``s3://`` warehouse (tests/objectstore/test_s3_*.py):
the ``acidstream`` command as a child process, with the S3 server reached either through
``--storage-option`` flags (and no AWS variable in its environment, so nothing but the
flags can point it there) or through the standard AWS environment alone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import acidstream
from acidstream import StreamingConnection, StrictJsonWriter
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import open_store
from tests.plugins.s3_fixture import SECRET_KEY, S3Warehouse

ROOT = Path(__file__).resolve().parents[2]


_POINTERS = (
    "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
    "ACIDSTREAM_METASTORE", "ACIDSTREAM_WAREHOUSE",
)  # fmt: skip
"""Variables that could point a process at a store or give it credentials."""


def aws_pointers() -> list[str]:
    """The variables of :data:`_POINTERS` set in this process."""
    return [k for k in os.environ if k.startswith(_POINTERS)]


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any variable that points at a store or holds
    credentials (the child finds the store only where the test says), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_POINTERS)}
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class Cli:
    """``acidstream ...`` against one warehouse and metastore, by flags or by environment.

    Attributes:
        wh: the test's bucket.
        metastore: the metastore URL (a local SQLite file or PostgreSQL).
        via: ``"options"`` (``--storage-option`` flags, no AWS variable) or ``"env"``
            (the standard AWS variables, no flag).
        cwd: the working directory of the commands.
    """

    wh: S3Warehouse
    metastore: str
    via: str
    cwd: Path

    def store_args(self) -> list[str]:
        """``--warehouse``, ``--metastore`` and, by flags, the storage options."""
        out = ["--warehouse", self.wh.url, "--metastore", self.metastore]
        return out + (self.wh.cli_options() if self.via == "options" else [])

    def env(self) -> dict[str, str]:
        return clean_env(self.wh.env if self.via == "env" else None)

    def run(self, *argv: str, store: bool = True, timeout: float = 300) -> Result:
        """Run ``acidstream ARGV`` (plus the store arguments unless ``store=False``): by
        environment in a child process (whose environment is the point), by flags in this
        process (``main(argv)``, its output captured: this process has no AWS variable,
        which :func:`clean_env` checks)."""
        args = [*argv, *(self.store_args() if store else [])]
        if self.via == "options":
            return run_in_process(args)
        p = subprocess.run(
            [sys.executable, "-m", "acidstream.cli.main", *args],
            cwd=self.cwd,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Result(p.returncode, p.stdout, p.stderr)


def run_in_process(argv: Sequence[str]) -> Result:
    """``acidstream ARGV`` through ``main``, stdout and stderr captured (log records that
    reach logging's last-resort handler go to the captured stderr too)."""
    import contextlib
    import io

    from acidstream.cli.main import main

    assert not aws_pointers(), f"{aws_pointers()} are set: flags would not be what is tested"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return Result(code, out.getvalue(), err.getvalue())


@dataclass(frozen=True)
class Result:
    """One command's exit code and output."""

    code: int
    out: str
    err: str

    def ok(self) -> Result:
        """Assert exit 0 without a traceback; returns itself."""
        assert self.code == 0, f"exit {self.code}\n{self.out[-2000:]}\n{self.err[-3000:]}"
        assert "Traceback" not in self.err, self.err[-3000:]
        return self

    def shows_no_secret(self) -> Result:
        """Assert the secret key appears in neither stream."""
        assert SECRET_KEY not in self.out and SECRET_KEY not in self.err
        return self


def jsonl_ids(lines: Sequence[str]) -> list[int]:
    """The ``id`` of each JSON line (``acidstream read --format jsonl``), sorted."""
    import json

    return sorted(json.loads(ln)["id"] for ln in lines if ln.strip())


def create_events_table(metastore: str, wh: S3Warehouse) -> str:
    """Create ``default.events (id bigint, msg string)``, transactional, on ``wh``; its
    location."""
    with open_store(metastore, warehouse=wh.url, storage_options=wh.storage_options) as s:
        t = s.create_table(
            TableDef(
                db="default",
                name="events",
                columns=(("id", "bigint"), ("msg", "string")),
                parameters={"transactional": "true"},
            )
        )
    assert t.location is not None
    return t.location


def events_connection(
    metastore: str, wh: S3Warehouse, storage_options: Mapping[str, object] | None = None
) -> StreamingConnection:
    """A JSON StreamingConnection to ``default.events`` on ``wh`` (``storage_options``:
    other options than the warehouse's, e.g. through a proxy)."""
    opts = dict(wh.storage_options if storage_options is None else storage_options)
    return StreamingConnection(
        "events",
        record_writer=StrictJsonWriter(),
        metastore=metastore,
        warehouse=wh.url,
        storage_options=opts,
    )


def commit_ids(conn: StreamingConnection, ids: range) -> None:
    """One txn of ``conn`` holding the JSON rows ``{"id": i, "msg": "m<i>"}`` of ``ids``."""
    conn.begin_transaction()
    conn.write_block([b'{"id": %d, "msg": "m%d"}' % (i, i) for i in ids])
    conn.commit_transaction()


def read_ids(metastore: str, wh: S3Warehouse) -> list[int]:
    """The ``id`` column of ``default.events`` as read now, sorted."""
    t = acidstream.table(
        "events", metastore=metastore, warehouse=wh.url, storage_options=wh.storage_options
    )
    return sorted(t.read(columns=["id"]).column("id").to_pylist())
