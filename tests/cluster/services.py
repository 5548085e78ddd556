"""The server processes of the cluster tests, each started inside one :class:`Host`.

* :class:`PrivatePostgres`: a throwaway PostgreSQL instance (``initdb`` + ``pg_ctl`` as
  the ``postgres`` user, data in a temp dir) listening on its host's address only. The
  machine's own server listens on 127.0.0.1, which no other namespace can reach; a
  private instance is cleaner than editing the system configuration.
* :func:`start_moto`: moto's S3 server process bound to its host's address.
* :func:`start_tansu`: the Tansu Kafka broker (the binary ``EmbeddedBroker`` runs) bound
  to, and advertising, its host's address.
* :func:`start_spark_master` / :func:`start_spark_worker`: Spark standalone daemons
  started with the pyspark distribution's own launcher (``bin/spark-class``; pip's
  pyspark ships no ``sbin/start-*.sh``).

Every process is a :class:`Proc`: its own process group (so stopping it also stops what
it forked: a worker's executors and their Python workers), its output in a log file that
failure messages quote.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pyspark

from tests.cluster.hosts import Host
from tests.cluster.spark_log import SHORT_LIVED_JVM

__all__ = [
    "PrivatePostgres",
    "Proc",
    "spark_class",
    "start_moto",
    "start_spark_master",
    "start_spark_worker",
    "start_tansu",
    "wait_for",
]

SPARK_MASTER_PORT = 7077
SPARK_MASTER_UI_PORT = 8080
MOTO_PORT = 5000
KAFKA_PORT = 9092
PG_PORT = 5432


def spark_class() -> str:
    """The pyspark distribution's ``bin/spark-class`` launcher script."""
    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def wait_for(
    what: str, ready: Callable[[], bool], *, timeout: float, proc: Proc | None = None
) -> None:
    """Poll ``ready`` (a cheap probe of a server's own answer) until it is true.

    Servers started in another namespace give no event the test could wait on, so this is
    a bounded poll; it fails at once if ``proc`` exits meanwhile, quoting its log.
    """
    deadline = time.monotonic() + timeout
    while not ready():
        if proc is not None and proc.popen.poll() is not None:
            raise RuntimeError(f"{what}: process exited ({proc.popen.returncode}): {proc.tail()}")
        if time.monotonic() > deadline:
            tail = proc.tail() if proc is not None else ""
            raise RuntimeError(f"{what}: not ready after {timeout}s {tail}")
        time.sleep(0.1)


class Proc:
    """One server process started inside a host, in its own process group.

    Args:
        host: Where it runs.
        name: A short name for its log file and messages.
        argv: The command.
        log_dir: Where ``<name>.log`` (stdout and stderr) goes.
        env: Variables added to this process's environment.
    """

    def __init__(
        self,
        host: Host,
        name: str,
        argv: Sequence[str],
        *,
        log_dir: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.host = host
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                host.command(argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                start_new_session=True,  # its own group: stop() reaches its children
            )

    def tail(self, chars: int = 3000) -> str:
        """The end of the process's log (for failure messages)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return f"[{self.log_path}: ...{text[-chars:]}]"

    def stop(self, *, timeout: float = 15.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``timeout``. Idempotent."""
        pgid = self.popen.pid  # start_new_session: the group id is the leader's pid
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, sig)
            try:
                self.popen.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # The leader is gone; children that ignored SIGTERM still hold the group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except (urllib.error.URLError, OSError):
        return False


class PrivatePostgres:
    """A PostgreSQL instance of this test only, listening on ``host.ip:5432``.

    ``initdb`` and the server run as the ``postgres`` user (PostgreSQL refuses root) in a
    temp dir it owns; clients of the cluster's subnet are trusted (a test server without
    secrets). The Unix socket goes to the temp dir so it never meets the machine's server.
    """

    def __init__(self, host: Host, subnet: str) -> None:
        self.host = host
        bindir = _pg_bindir()
        self._pg_ctl = str(bindir / "pg_ctl")
        self.dir = Path(tempfile.mkdtemp(prefix="acidstream-cluster-pg-"))
        self.data = self.dir / "data"
        # The log lives in the postgres-owned dir: the test's log dir is root's alone.
        self.log_path = self.dir / "postgres.log"
        self._subnet = subnet
        self._bindir = bindir
        self._started = False

    def start(self) -> None:
        """``initdb``, then start the server inside its host and create the ``metastore``
        database; :meth:`stop` cleans up after a failure here too."""
        host, bindir, subnet = self.host, self._bindir, self._subnet
        shutil.chown(self.dir, "postgres", "postgres")
        _as_postgres(
            [str(bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust"]
        )
        with open(self.data / "pg_hba.conf", "a") as f:
            f.write(f"host all all {subnet} trust\n")
        # pg_ctl must run inside the namespace: the postmaster it forks inherits it and
        # binds to the host's address there.
        # fsync off: a throwaway instance whose data nothing needs after the test.
        opts = (
            f"-c listen_addresses={host.ip} -c port={PG_PORT} "
            f"-c unix_socket_directories={self.dir} -c max_connections=200 -c fsync=off"
        )
        argv = [
            "runuser", "-u", "postgres", "--", self._pg_ctl, "-D", str(self.data),
            "-o", opts, "-l", str(self.log_path), "-w", "-t", "60", "start",
        ]  # fmt: skip
        self._started = True  # from here on stop() runs pg_ctl stop (harmless if not up)
        done = subprocess.run(host.command(argv), capture_output=True, text=True, timeout=90)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()} {self.tail()}")
        # Created over TCP from inside the namespace: the same way in as every client.
        _as_postgres(
            ["psql", "-h", host.ip, "-p", str(PG_PORT), "-U", "postgres", "-qc",
             "create database metastore", "postgres"],
            host=host,
        )  # fmt: skip

    @property
    def url(self) -> str:
        """The metastore URL, by the host's address (what every other host uses)."""
        return f"postgresql://postgres@{self.host.ip}:{PG_PORT}/metastore"

    def tail(self, chars: int = 3000) -> str:
        """The end of the server's log (for failure messages)."""
        try:
            return f"[{self.log_path}: ...{self.log_path.read_text(errors='replace')[-chars:]}]"
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop the server (immediate: nothing here needs to survive) and delete its data."""
        if self._started:
            subprocess.run(
                ["runuser", "-u", "postgres", "--", self._pg_ctl, "-D", str(self.data),
                 "-m", "immediate", "-w", "stop"],
                capture_output=True, timeout=60,
            )  # fmt: skip
            self._started = False
        shutil.rmtree(self.dir, ignore_errors=True)


def _pg_bindir() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` that has ``initdb``."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0,
    )
    if not found:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
    return found[-1].parent


def _as_postgres(argv: list[str], *, host: Host | None = None) -> None:
    """Run ``argv`` as the ``postgres`` user (inside ``host`` when given); raise on failure."""
    argv = ["runuser", "-u", "postgres", "--", *argv]
    if host is not None:
        argv = host.command(argv)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()}")


def start_moto(host: Host, *, log_dir: Path) -> Proc:
    """moto's S3 server on ``host.ip:5000``, answering HTTP before this returns."""
    proc = Proc(
        host,
        "moto",
        [sys.executable, "-m", "moto.server", "-H", host.ip, "-p", str(MOTO_PORT)],
        log_dir=log_dir,
    )
    wait_for(
        "moto S3 server",
        lambda: _http_ok(f"http://{host.ip}:{MOTO_PORT}/moto-api/"),
        timeout=60,
        proc=proc,
    )
    return proc


def start_tansu(host: Host, binary: str, *, log_dir: Path) -> Proc:
    """Tansu on ``host.ip:9092`` (listening on and advertising that address, so clients on
    other hosts are sent back to it), answering metadata before this returns."""
    url = f"tcp://{host.ip}:{KAFKA_PORT}"
    proc = Proc(
        host,
        "tansu",
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        log_dir=log_dir,
    )  # fmt: skip

    def ready() -> bool:
        from kafka import KafkaConsumer

        try:
            consumer = KafkaConsumer(
                bootstrap_servers=f"{host.ip}:{KAFKA_PORT}", bootstrap_timeout_ms=1000
            )
        except Exception:  # any client failure means "not ready yet"
            return False
        try:
            consumer.topics()
            return True
        except Exception:
            return False
        finally:
            consumer.close()

    wait_for("Tansu broker", ready, timeout=30, proc=proc)
    return proc


def _spark_env(work: Path) -> dict[str, str]:
    return {
        "SPARK_DAEMON_MEMORY": "256m",  # master and worker daemons; executors get their own
        "SPARK_DAEMON_JAVA_OPTS": SHORT_LIVED_JVM,
        "SPARK_LOCAL_DIRS": str(work / "local"),
        "PYSPARK_PYTHON": sys.executable,
    }


def start_spark_master(host: Host, *, log_dir: Path, wait: bool = True) -> Proc:
    """The standalone master on ``host.ip:7077`` (web UI/JSON on 8080); with ``wait``,
    answering its status page before this returns."""
    work = Path(tempfile.mkdtemp(prefix="spark-master-", dir=log_dir))
    proc = Proc(
        host,
        "spark-master",
        [spark_class(), "org.apache.spark.deploy.master.Master", "--host", host.ip,
         "--port", str(SPARK_MASTER_PORT), "--webui-port", str(SPARK_MASTER_UI_PORT)],
        log_dir=log_dir,
        env=_spark_env(work),
    )  # fmt: skip
    if wait:
        wait_for(
            "Spark master",
            lambda: _http_ok(f"http://{host.ip}:{SPARK_MASTER_UI_PORT}/json/"),
            timeout=90,
            proc=proc,
        )
    return proc


def start_spark_worker(host: Host, master: str, *, log_dir: Path) -> Proc:
    """A standalone worker of ``master`` (``spark://ip:7077``) with 1 core and 1 GiB, its
    executors' work dirs in the test's temp dir (not in site-packages)."""
    work = Path(tempfile.mkdtemp(prefix=f"spark-worker-{host.name}-", dir=log_dir))
    return Proc(
        host,
        f"spark-worker-{host.name}",
        [spark_class(), "org.apache.spark.deploy.worker.Worker", master, "--host", host.ip,
         "--cores", "1", "--memory", "1g", "--work-dir", str(work / "work")],
        log_dir=log_dir,
        env=_spark_env(work),
    )  # fmt: skip


def alive_workers(master_host: Host) -> list[str]:
    """The hosts of the workers the master lists as ALIVE (its ``/json/`` status)."""
    try:
        with urllib.request.urlopen(
            f"http://{master_host.ip}:{SPARK_MASTER_UI_PORT}/json/", timeout=3
        ) as r:
            status = json.load(r)
    except (urllib.error.URLError, OSError, ValueError):
        return []
    return sorted(w["host"] for w in status.get("workers", []) if w.get("state") == "ALIVE")
